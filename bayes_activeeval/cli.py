"""The ``bae`` command."""

from __future__ import annotations

import sys
import time

import click

from . import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bae")
def main() -> None:
    """Label-efficient evaluation of predictive models."""


@main.command()
@click.option(
    "--budgets", default="250,1000", show_default=True, help="Comma-separated label budgets."
)
@click.option("--seed", default=0, show_default=True, help="Random seed for the draws.")
def demo(budgets: str, seed: int) -> None:
    """Active versus passive evaluation of F1 and accuracy on the embedded demo pool."""
    from .demo import format_demo, run_demo

    try:
        b = tuple(int(x) for x in budgets.split(",") if x.strip())
        if not b or min(b) < 1:
            raise ValueError
    except ValueError:
        click.echo(
            f"error: --budgets must be positive integers separated by commas, got {budgets!r}",
            err=True,
        )
        sys.exit(2)
    start = time.perf_counter()
    result = run_demo(budgets=b, seed=seed)
    click.echo(format_demo(result))
    click.echo(f"\n({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":  # pragma: no cover
    main()
