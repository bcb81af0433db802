"""Helpers shared by the tests that drive the ``bae`` command line in-process (click's CliRunner).

Imported as ``from cli_helpers import ok, run, fails`` (like ``pools``: ``tests`` is no package,
so pytest puts this folder on ``sys.path``)."""

from __future__ import annotations

import pandas as pd
from click.testing import CliRunner, Result

from bayes_activeeval.cli import main
from bayes_activeeval.datasets import make_classification_pool


def run(*args, input=None) -> Result:
    """Invoke ``bae`` with ``args`` (each passed through ``str``); ``input`` feeds stdin."""
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def ok(*args, input=None) -> Result:
    """``run`` that must exit 0; on failure the assertion shows the command's output."""
    res = run(*args, input=input)
    assert res.exit_code == 0, (res.output, res.stderr, res.exception)
    return res


def fails(*args, message: str, input=None) -> str:
    """``run`` that must exit 2 with one ``error: ...`` line on stderr holding ``message``;
    returns that line."""
    res = run(*args, input=input)
    assert res.exit_code == 2, (res.output, res.stderr, res.exception)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert message in lines[0], lines[0]
    return lines[0]


def init_static(pool_path, session, *extra, measure: str = "f1") -> Result:
    """``bae init`` of a static-design session on a pool file of :func:`labeled_pool_csv`
    (``extra``: more options, e.g. ``"--text-col", "zip"``)."""
    return ok("init", pool_path, "--pred-col", "pred", "--prob-col", "p", "--id-col", "id",
              "--measure", measure, "--design", "static", "--session", session, *extra)  # fmt: skip


def labeled_pool_csv(path, *, seed: int, prefix: str, text: str = "t{}", n: int = 600):
    """A binary pool file ``path`` (columns ``id``, ``pred``, ``p``, ``text``) from
    ``make_classification_pool(n, 0.2, separation=3.0, rng=seed)`` and its truth ``{id: label}``."""
    sp = make_classification_pool(n, 0.2, separation=3.0, rng=seed)
    v = sp.pool.view()
    ids = [f"{prefix}{i}" for i in range(n)]
    pd.DataFrame(
        {"id": ids, "pred": v.pred, "p": v.positive_prob(), "text": [text.format(i) for i in ids]}
    ).to_csv(path, index=False)
    return path, dict(zip(ids, sp.labels.tolist(), strict=True))
