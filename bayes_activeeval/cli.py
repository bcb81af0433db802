"""The ``bae`` command.

Every command that takes a session opens it through :class:`bayes_activeeval.session.Session`,
which re-reads the pool file and refuses it if its SHA-256 changed. Bad input — a malformed CSV,
unknown item ids, labels outside the classes, duplicate ids, NaN probabilities, an empty pool —
prints one line ``error: …`` on stderr and exits with status 2, before anything is written.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import sys
import time

import click

from . import __version__
from ._validation import MissingInput

#: The command line's words for an input a library call misses (``MissingInput.needs``): the
#: option that gives it, and the option that gives it per model where a belief would do instead
#: (the library's ``or pass belief=``).
_CLI_OPTIONS = {
    "probs": ("name the probability column: --prob-col COLUMN", " (or --prob NAME=COLUMN)"),
    "predictive_std": (
        "name the predictive std column: --std-col COLUMN",
        " (or --std NAME=COLUMN)",
    ),
    "classes": ("give the classes: --classes A,B,…", ""),
}


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _missing_inputs(exc: BaseException | None, seen: set[int] | None = None):
    """The :class:`MissingInput` errors (with ``needs``) in ``exc``'s chain, ``exc`` first: a
    reader re-raises them with the file's name (:func:`~bayes_activeeval.io.read_pool`:
    ``raise ValueError(f"{name}: {exc}") from exc``), and an exception group's members (errors
    collected from several attempts) are searched too."""
    seen = set() if seen is None else seen
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, MissingInput) and exc.needs is not None:
            yield exc
        if isinstance(exc, BaseExceptionGroup):
            for member in exc.exceptions:
                yield from _missing_inputs(member, seen)
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)


def _cli_message(exc: BaseException) -> str:
    """``exc`` in one line, a missing input named by its option (:data:`_CLI_OPTIONS`)."""
    text = _one_line(exc)
    for missing in _missing_inputs(exc):
        option, per_model = _CLI_OPTIONS[missing.needs]
        words = missing.reason + option + (per_model if missing.or_belief else "")
        text = text.replace(_one_line(missing), " ".join(words.split()))
    return text


class _BaeGroup(click.Group):
    """A click group that turns library errors into one line on stderr and exit status 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(1)
        except click.exceptions.NoArgsIsHelpError as exc:  # plain `bae`: the help, as is
            click.echo(exc.format_message())
            sys.exit(0)
        except click.ClickException as exc:
            click.echo(f"error: {_one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except (ValueError, TypeError) as exc:
            if os.environ.get("BAE_DEBUG"):
                raise
            click.echo(f"error: {_cli_message(exc)}", err=True)
            sys.exit(2)
        except sqlite3.Error as exc:
            click.echo(f"error: session database: {_one_line(exc)}", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=_BaeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bae")
def main() -> None:
    """Label-efficient evaluation of predictive models.

    \b
    A labeling session:
      bae init pool.csv --measure f1 --session s.bae --id-col id --pred-col pred --prob-col p
      bae next s.bae --n 20 --out batch.csv      # the items to label
      bae record s.bae labels.csv                # columns id,label
      bae label s.bae                            # or label interactively in the terminal
      bae serve s.bae --port 8765                # or in a browser (several at once)
      bae relabel s.bae ITEM LABEL --reason '…'  # correct a label (audited)
      bae status s.bae                           # estimate, interval, budget, agreement
      bae report s.bae --out report.html
    """


@main.command()
@click.option(
    "--budgets", default="250,1000", show_default=True, help="Comma-separated label budgets."
)
@click.option("--seed", default=0, show_default=True, help="Random seed for the draws.")
@click.option(
    "--export",
    default=None,
    help="Instead: write the demo pool to this CSV (id, pred, p, score, text) and its true "
    "labels beside it (…-truth.csv), to try a labeling session.",
)
def demo(budgets: str, seed: int, export: str | None) -> None:
    """Active versus passive evaluation of F1 and accuracy on the embedded demo pool."""
    from .demo import format_demo, run_demo

    if export:
        _export_demo(export)
        return

    try:
        b = tuple(int(x) for x in budgets.split(",") if x.strip())
        if not b or min(b) < 1:
            raise ValueError
    except ValueError:
        raise ValueError(
            f"--budgets must be positive integers separated by commas, got {budgets!r}"
        ) from None
    start = time.perf_counter()
    result = run_demo(budgets=b, seed=seed)
    click.echo(format_demo(result))
    click.echo(f"\n({time.perf_counter() - start:.1f} s)")


def _export_demo(path: str) -> None:
    from .datasets import DEMO_SIZE
    from .demo import export_demo

    pool_csv, truth_csv = export_demo(path)
    click.echo(f"demo pool written to {pool_csv} ({DEMO_SIZE:,} items); true labels to {truth_csv}")


# -- helpers --------------------------------------------------------------------------------------
def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        if "=" not in v:
            raise ValueError(f"--{option} takes NAME=COLUMN, got {v!r}")
        name, col = (s.strip() for s in v.split("=", 1))
        if not name or not col:
            raise ValueError(f"--{option} takes NAME=COLUMN, got {v!r}")
        if name in out:
            raise ValueError(f"--{option} names model {name!r} twice")
        out[name] = col
    return out


def _model_columns(single: str | None, many: tuple[str, ...], option: str, split: bool = False):
    if single and many:
        raise ValueError(f"give either --{option}-col or --{option} NAME=COLUMN, not both")
    if single:
        return [c.strip() for c in single.split(",")] if split and "," in single else single
    if many:
        d = _pairs(many, option)
        if split:
            return {k: [c.strip() for c in v.split(",")] if "," in v else v for k, v in d.items()}
        return d
    return None


def _open(session: str, pool: str | None = None, readonly: bool = False):
    from .session import Session

    return Session.open(session, pool_path=pool, readonly=readonly)


def _annotator_option(what: str):
    return click.option(
        "--annotator",
        default=None,
        help=f"Who {what} (default: your login name).",
    )


_lease_option = click.option(
    "--lease",
    "lease_minutes",
    type=float,
    default=60.0,
    show_default=True,
    help="Minutes the items stay reserved for you before others may get them.",
)


def _lease_seconds(minutes: float) -> float:
    """``--lease`` (minutes) in seconds: a positive number of minutes up to a year."""
    from .session.annotations import check_lease

    return check_lease(minutes, "--lease", "minutes")


def _protected(s) -> list[tuple[str, str]]:
    return [(s.path, "the session file"), (s.pool_file.path, "the pool file")]


def _protected_ranking(rs) -> list[tuple[str, str]]:
    """:func:`_protected` of a ranking session (the pool file where it is now)."""
    return [(rs.path, "the session file"), (rs.meta["pool_path"], "the pool file")]


_pool_option = click.option(
    "--pool", "pool_path", default=None, help="Where the pool file is now, if it moved."
)


# -- init -----------------------------------------------------------------------------------------
@main.command()
@click.argument("pool")
@click.option("--measure", required=True, help="Measure: f1, accuracy, error_rate, precision, …")
@click.option("--session", "session_path", required=True, help="The session file to create.")
@click.option("--id-col", default=None, help="Column of item ids (default: row numbers).")
@click.option("--pred-col", default=None, help="Prediction column (one model).")
@click.option("--pred", "preds", multiple=True, help="NAME=COLUMN: a model's predictions.")
@click.option(
    "--prob-col", default=None, help="P(positive) column, or comma-separated class columns."
)
@click.option("--prob", "probs", multiple=True, help="NAME=COLUMN[,COLUMN…]: a model's probs.")
@click.option("--score-col", default=None, help="Raw score column (one model).")
@click.option("--score", "scores", multiple=True, help="NAME=COLUMN: a model's raw scores.")
@click.option("--std-col", default=None, help="Regression: predictive std column.")
@click.option("--std", "stds", multiple=True, help="NAME=COLUMN: a model's predictive std.")
@click.option("--text-col", "text_cols", multiple=True, help="Column(s) shown to labelers.")
@click.option("--cost-col", default=None, help="Label cost column.")
@click.option("--weight-col", default=None, help="Item weight column p(x).")
@click.option("--classes", default=None, help="Comma-separated class labels (sorted).")
@click.option("--pos-label", default=None, help="The positive class of binary measures.")
@click.option(
    "--task", type=click.Choice(["binary", "multiclass", "regression", "ranking"]), default=None
)
@click.option("--query-col", default="qid", show_default=True, help="Ranking: query id column.")
@click.option("--item-col", default="doc", show_default=True, help="Ranking: document column.")
@click.option("--rank", "ranks", multiple=True, help="Ranking: NAME=COLUMN of 1-based ranks.")
@click.option("--relevance-cols", default=None, help="Ranking: P(grade=0),P(grade=1),… columns.")
@click.option(
    "--max-grade",
    type=int,
    default=None,
    help="Ranking: the highest relevance grade y_max (grades 0..y_max; default: from "
    "--relevance-cols, else 4).",
)
@click.option("--model", "models", multiple=True, help="Evaluate only these models.")
@click.option("--budget", type=float, default=None, help="Labels allowed (or total label cost).")
@click.option("--design", type=click.Choice(["static", "adaptive"]), default="static")
@click.option(
    "--oracle",
    default=None,
    help="Oracle model (adaptive; default auto on a binary pool, else model).",
)
@click.option(
    "--estimator",
    type=click.Choice(["model_assisted", "ipw"]),
    default=None,
    help="Adaptive (or --task ranking): the difference estimate with the belief as control "
    "variate (default) or the AIS estimate.",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--mix",
    type=float,
    default=None,
    help="Defensive mixing δ (default: none for a static design of one model and a measure of "
    "expected losses, which takes the defensive floor instead; 0.05 otherwise).",
)
@click.option(
    "--defensive-floor",
    type=float,
    default=None,
    help="Defensive floor λ of a static design, q ← max(q, λp)/Z (default 0.1 when --mix is "
    "not given, else 0).",
)
@click.option("--overwrite", is_flag=True, help="Replace an existing session file.")
@click.option(
    "--lazy",
    is_flag=True,
    help="Parquet pools beyond memory: read the pool chunk by chunk on dask.",
)
def init(pool, measure, session_path, id_col, pred_col, preds, prob_col, probs, score_col, scores,
         std_col, stds, text_cols, cost_col, weight_col, classes, pos_label, task, query_col,
         item_col, ranks, relevance_cols, max_grade, models, budget, design, oracle, estimator,
         seed, mix, defensive_floor, overwrite, lazy):  # fmt: skip
    """Create a labeling session for the pool file POOL (CSV or Parquet)."""
    from .io import PoolSpec
    from .session import Design, Session

    if task == "ranking":
        _refuse_given(_NOT_RANKING, "not for --task ranking (labeling sessions only)")
        _init_ranking(pool, measure, session_path, query_col, item_col, ranks, relevance_cols,
                      cost_col, models, budget, seed, mix, overwrite, text_cols,
                      max_grade, estimator)  # fmt: skip
        return
    if max_grade is not None:
        raise ValueError(f"--max-grade {max_grade} is for ranking pools; add --task ranking")
    pred = _model_columns(pred_col, preds, "pred")
    if pred is None:
        raise ValueError("name the prediction column: --pred-col COLUMN or --pred NAME=COLUMN")
    spec = PoolSpec(
        pred=pred,
        prob=_model_columns(prob_col, probs, "prob", split=True),
        score=_model_columns(score_col, scores, "score"),
        std=_model_columns(std_col, stds, "std"),
        id_col=id_col,
        text_cols=tuple(text_cols),
        cost_col=cost_col,
        weight_col=weight_col,
        classes=None if classes is None else tuple(c.strip() for c in classes.split(",")),
        pos_label=pos_label,
        task=task,
        lazy=lazy,
    )
    d = Design(
        measure=measure,
        kind=design,
        oracle=oracle,
        seed=seed,
        budget=budget,
        models=models,
        mix=mix,
        defensive_floor=defensive_floor,
        options={} if estimator is None else {"estimator": estimator},
    )
    if estimator is not None and design != "adaptive":
        raise ValueError(f"--estimator {estimator} needs --design adaptive")
    with Session.create(session_path, pool, spec, d, overwrite=overwrite) as s:
        p = s.pool
        click.echo(
            f"created {session_path}: {p.n_items:,} items, models {', '.join(s.design.models)}, "
            f"measure {measure}, {design} design"
            + (f", budget {budget:g}" if budget else "")
            + f" (pool sha256 {s.pool_file.checksum[:12]}…)"
        )


#: ``bae init`` options a ranking session has no use for (parameter name, option).
_NOT_RANKING = (
    ("design", "--design"), ("oracle", "--oracle"), ("id_col", "--id-col"),
    ("defensive_floor", "--defensive-floor"),
    ("pred_col", "--pred-col"), ("preds", "--pred"), ("prob_col", "--prob-col"),
    ("probs", "--prob"), ("score_col", "--score-col"), ("scores", "--score"),
    ("std_col", "--std-col"), ("stds", "--std"), ("weight_col", "--weight-col"),
    ("classes", "--classes"), ("pos_label", "--pos-label"), ("lazy", "--lazy"),
)  # fmt: skip


def _refuse_given(options, why: str) -> None:
    """Refuse the ``options`` the user gave (on the command line or in the environment; a
    default value is not given): one error naming them."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    given = [opt for name, opt in options if ctx.get_parameter_source(name)
             not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)]  # fmt: skip
    if given:
        raise click.UsageError(f"{', '.join(given)}: {why}")


def _init_ranking(pool, measure, session_path, query_col, item_col, ranks, relevance_cols,
                  cost_col, models, budget, seed, mix, overwrite, text_cols=(),
                  max_grade=None, estimator=None):  # fmt: skip
    from .ranking_session import RankingSession

    read = {"query": query_col, "item": item_col, "ranks": _pairs(ranks, "rank")}
    if not read["ranks"]:
        raise ValueError("name the rankers' rank columns: --rank NAME=COLUMN")
    if relevance_cols:
        read["relevance"] = [c.strip() for c in relevance_cols.split(",")]
    if max_grade is not None:
        if max_grade < 1:
            raise ValueError(
                f"--max-grade must be at least 1 (grades 0..y_max need two values), got {max_grade}"
            )
        cols = read.get("relevance")
        if cols is not None and len(cols) != max_grade + 1:
            raise ValueError(
                f"--max-grade {max_grade} needs {max_grade + 1} --relevance-cols (P(grade=0) .. "
                f"P(grade={max_grade})), got {len(cols)}: {relevance_cols}"
            )
        read["max_grade"] = int(max_grade)
    if cost_col:
        read["cost"] = cost_col
    opts = {} if estimator is None else {"estimator": estimator}
    if mix is not None:
        opts["mix"] = mix
    with RankingSession.create(
        session_path, pool, read, measure=measure, models=tuple(models), budget=budget,
        seed=seed, text_cols=tuple(text_cols), overwrite=overwrite, **opts,
    ) as s:  # fmt: skip
        st = s.status()
        click.echo(
            f"created {session_path}: {s.pool.n_queries:,} queries, rankers "
            f"{', '.join(s.models)}, measure {s.measure}, budget {budget:g} "
            f"({st['queries_in_sample']} queries drawn)"
        )


def _next_ranking(session, n, out, overwrite, annotator, lease, pool_path, text_cols=()) -> None:
    from .io import check_output, escape_cell
    from .ranking_session import RankingSession

    with RankingSession.open(session, pool_path=pool_path) as rs:
        if out:
            check_output(out, overwrite=overwrite, protected=_protected_ranking(rs))
        # a bad --text-col fails before anything is leased (RankingSession.next checks first)
        frame = rs.next(n, annotator=annotator, lease=lease, text=text_cols).map(escape_cell)
    _write_batch(_batch_csv(frame), out, overwrite,
                 f"{frame['qid'].nunique()} queries ({len(frame)} documents) to grade")  # fmt: skip


def _write_batch(csv_text: str, out: str | None, overwrite: bool, what: str) -> None:
    """``bae next``'s batch: to ``out`` (saying ``what`` was written on stderr), or stdout."""
    from .io import write_new_file

    if out:
        write_new_file(out, csv_text, overwrite=overwrite)
        click.echo(f"{what} written to {out}", err=True)
    else:
        click.echo(csv_text, nl=False)


def _batch_csv(frame) -> str:
    """``frame.to_csv(index=False)`` with every cell that starts or ends with whitespace quoted
    as well: ``bae record`` reads the file with ``skipinitialspace``, which drops the leading
    spaces of an unquoted cell but keeps those inside quotes, so a ranking pool's id such as
    ``' lead'`` (a Parquet pool keeps it) comes back as it was written."""
    import csv
    import io

    def cell(text: str) -> str:  # quoted where pandas quotes it, and where it has edge spaces
        if text != text.strip() or any(c in text for c in ',"\r\n'):
            return '"' + text.replace('"', '""') + '"'
        return text

    rows = csv.reader(io.StringIO(frame.to_csv(index=False)))  # the cells as pandas writes them
    return "".join(",".join(map(cell, row)) + "\n" for row in rows)


def _ranking(session: str) -> bool:
    from .ranking_session import is_ranking_session

    return is_ranking_session(session)


# -- next -----------------------------------------------------------------------------------------
@main.command("next")
@click.argument("session")
@click.option("--n", "n", type=int, default=20, show_default=True, help="Items to hand out.")
@click.option("--stage-size", type=int, default=None, help="Draws of a new stage (default --n).")
@click.option("--out", default=None, help="Write the CSV here (default: stdout).")
@click.option(
    "--overwrite", is_flag=True, help="Replace --out if it exists (never one with labels)."
)
@click.option("--text-col", "text_cols", multiple=True, help="Text columns to include.")
@_annotator_option("asks")
@_lease_option
@_pool_option
def next_(session, n, stage_size, out, overwrite, text_cols, annotator, lease_minutes, pool_path):
    """List the items to label next (CSV: id and text columns), leased to you.

    Asking again lists the same items until they are labeled; others get other items until your
    lease expires (--lease minutes). For a ranking session: the next N queries, one row per
    (query, document) to grade.
    """
    import pandas as pd

    from ._validation import check_count
    from .io import check_output, escape_cell

    lease = _lease_seconds(lease_minutes)
    check_count(n, "--n")
    if stage_size is not None:
        check_count(stage_size, "--stage-size")
    if _ranking(session):
        if stage_size is not None:
            raise ValueError(
                "--stage-size is for labeling sessions; a ranking session draws queries "
                "until its stage's budget is spent (bae init --budget)"
            )
        _next_ranking(session, n, out, overwrite, annotator, lease, pool_path, text_cols)
        return

    with _open(session, pool_path) as s:
        if out:
            check_output(out, overwrite=overwrite, protected=_protected(s))
        text = _text_frame(s, text_cols)  # a bad --text-col fails before anything is written
        idx = s.next(n, annotator=annotator, lease=lease, stage_size=stage_size)
        frame = pd.DataFrame({"id": s.pool_file.ids[idx]})
        for c in text.columns:
            frame[c] = text[c].to_numpy()[idx]
        _write_batch(frame.map(escape_cell).to_csv(index=False), out, overwrite,
                     f"{len(frame)} items to label")  # fmt: skip


def _text_frame(s, text_cols):
    if not text_cols:
        return s.pool_file.text
    from pathlib import Path

    from .io import read_pool_frame  # same file, extra columns

    p = Path(s.pool_file.path)
    spec = s.pool_file.spec
    used = spec.columns()
    shown = [c for c in text_cols if used.get(c, "text") == "text"]  # as text, as written
    frame = read_pool_frame(p, spec.format, spec.id_col, shown)
    missing = [c for c in text_cols if c not in frame.columns]
    if missing:
        raise ValueError(
            f"column {missing[0]!r} (--text-col) is not in {p.name}; its columns are: "
            + ", ".join(map(str, frame.columns))
        )
    return frame[list(text_cols)].reset_index(drop=True)


# -- record ---------------------------------------------------------------------------------------
@main.command()
@click.argument("session")
@click.argument("labels")
@click.option("--id-col", default="id", show_default=True)
@click.option("--label-col", default="label", show_default=True)
@click.option("--batch-size", type=int, default=50, show_default=True, help="Labels per commit.")
@_annotator_option("gave the labels")
@_pool_option
def record(session, labels, id_col, label_col, batch_size, annotator, pool_path):
    """Record the labels in the CSV file LABELS (columns id,label).

    Everything is checked before anything is written; labels you already recorded with the same
    value are skipped, so the same file can be recorded again after a crash. Items another
    annotator labeled get your label as a second annotation (see bae status: agreement).
    """
    from tqdm import tqdm

    from ._validation import check_count
    from .io import read_labels

    check_count(batch_size, "--batch-size")
    if _ranking(session):  # a CSV with columns qid, doc, grade
        from .ranking_session import RankingSession, read_grades

        grades = read_grades(labels)  # ids as text, unescaped (`bae next` escaped them)
        with RankingSession.open(session, pool_path=pool_path) as rs:
            res = rs.record(
                grades,
                annotator=annotator,
                source=f"csv:{os.path.basename(labels)}",
            )
            st = rs.status()
        click.echo(f"recorded {res.recorded} queries ({res.documents} grades) as "
                   f"{_who(annotator)} ({res.skipped} already present); "
                   f"{st['queries_graded']} of {st['queries_in_sample']} queries graded")  # fmt: skip
        return

    frame = read_labels(labels, id_col=id_col, label_col=label_col)
    with _open(session, pool_path) as s:
        bar = None

        def progress(k: int) -> None:  # the bar opens once validation passed and writing began
            nonlocal bar
            if bar is None:
                bar = tqdm(total=len(frame), desc="recording", unit="label", disable=None)
            bar.update(k)

        try:
            res = s.record(
                frame["id"].tolist(),
                frame["label"].tolist(),
                batch_size=batch_size,
                source=f"csv:{os.path.basename(labels)}",
                annotator=annotator,
                progress=progress,
            )
        finally:
            if bar is not None:
                bar.close()
        click.echo(
            f"recorded {res.recorded} labels ({res.skipped} already present)"
            f" as {_who(annotator)}; "
            f"{s.n_labels} labels in all, {res.pending} items of the current stage still to label"
        )


# -- label (interactive) --------------------------------------------------------------------------
@main.command()
@click.argument("session")
@click.option("--text-col", "text_cols", multiple=True, help="Columns to show for each item.")
@click.option("--n", "n", type=int, default=20, show_default=True,
              help="Items per stage (ranking: queries leased at a time).")  # fmt: skip
@click.option("--max", "max_labels", type=int, default=None,
              help="Stop after this many labels (ranking: queries).")  # fmt: skip
@click.option("--show-prediction", is_flag=True,
              help="Also show the model's prediction (ranking: the rankers' ranks).")  # fmt: skip
@_annotator_option("labels")
@_lease_option
@_pool_option
def label(session, text_cols, n, max_labels, show_prediction, annotator, lease_minutes, pool_path):
    """Label items interactively: each answer is saved as soon as it is given.

    Type a class label, 's' to skip an item, 'q' to quit. Items handed to others are not shown;
    items someone else labeled while you worked are skipped.

    For a ranking session: grade every document of a query in turn ('b' goes back one document);
    the query is saved as soon as its last document is graded.
    """
    from ._validation import check_count

    lease = _lease_seconds(lease_minutes)  # a bad --lease fails before the session is opened
    check_count(n, "--n")
    if max_labels is not None:
        check_count(max_labels, "--max")
    if _ranking(session):
        _label_ranking(session, n, max_labels, show_prediction, annotator, lease, text_cols,
                       pool_path)  # fmt: skip
        return
    with _open(session, pool_path) as s:
        text = _text_frame(s, text_cols)
        classes = [str(c) for c in s.pool.classes] if s.pool.classes is not None else None
        choices = "/".join(classes) if classes else "a number"

        def answer(k: int, size: int, it: int, done: int):
            item_id = str(s.pool_file.ids[it])
            click.echo(f"\n[{k + 1}/{size}] item {item_id}")
            for c in text.columns:
                click.echo(f"  {c}: {text[c].iloc[it]}")
            if show_prediction:
                for m in s.design.models:
                    pred = s.pool.view(m, [it]).pred
                    if s.pool.classes is not None:
                        pred = s.pool.classes[pred]
                    click.echo(f"  prediction ({m}): {pred[0]}")
            got = _ask(s, item_id, choices)
            if got is None:
                click.echo(f"\nstopped; {done} labels saved, {s.n_labels} in all")
            elif not (isinstance(got, str) and got == "skip"):
                s.record([item_id], [got], batch_size=1, source="interactive",
                         annotator=annotator, rows=False)  # fmt: skip
            return got

        done = _work_through(
            lambda: s.next(n, annotator=annotator, lease=lease),
            lambda it: it in s.label_map(),
            answer,
            max_labels,
            ("items", "labeled"),
        )
        if done is not None:
            click.echo(f"\n{done} labels saved, {s.n_labels} in all")


def _work_through(lease, taken, answer, limit, words) -> int | None:
    """The loop of ``bae label``: lease a batch, pass over what someone else answered meanwhile
    (``taken``), ``answer(k, size, item, done)`` each of the rest (``None``: quit, ``"skip"``,
    anything else: saved) until ``limit`` answers; a batch with skipped items ends the loop (they
    stay leased and pending). Returns the answers saved, or ``None`` after a quit."""
    from .session import SessionError

    done = others = 0
    while limit is None or done < limit:
        try:
            batch = lease()
        except SessionError as exc:
            click.echo(str(exc))
            break
        skipped = 0
        for k, it in enumerate(batch.tolist()):
            if limit is not None and done >= limit:
                break
            if taken(it):
                others += 1
                continue
            got = answer(k, len(batch), it, done)
            if got is None:
                return None
            if isinstance(got, str) and got == "skip":
                skipped += 1
                continue
            done += 1
        if skipped:
            click.echo(f"\n{skipped} {words[0]} skipped; they stay pending (bae label again)")
            break
    if others:
        click.echo(f"\n{others} {words[0]} were {words[1]} by someone else meanwhile (skipped)")
    return done


def _label_ranking(session, n, max_queries, show_ranks, annotator, lease, text_cols, pool_path):
    """``bae label`` on a ranking session: grade one query's documents after another; a query
    is saved (through :meth:`RankingSession.record`) as soon as its last document is graded."""
    import pandas as pd

    from .ranking_session import RankingSession

    with RankingSession.open(session, pool_path=pool_path) as rs:
        top = int(rs.pool.max_grade)
        per_query, per_doc = rs.text_columns(text_cols)

        def answer(k: int, size: int, qi: int, done: int):
            docs = rs.documents([qi], ranks=show_ranks, text=text_cols)
            qid = str(rs.pool.query_ids[qi])
            click.echo(f"\n[{k + 1}/{size}] query {qid}: {len(docs)} documents to grade 0..{top}")
            for c in per_query:
                click.echo(f"  {c}: {docs[c].iloc[0]}")
            grades = _ask_grades(docs, per_doc, top, show_ranks)
            if grades is None:
                click.echo(f"\nstopped; query {qid} not saved (it stays pending); "
                           f"{done} queries saved")  # fmt: skip
            elif grades != "skip":
                frame = pd.DataFrame(
                    {"qid": qid, "doc": list(grades), "grade": list(grades.values())}
                )
                rs.record(frame, annotator=annotator, source="interactive")
                click.echo(f"  query {qid} saved ({len(grades)} grades)")
            return grades

        done = _work_through(
            lambda: rs.lease(n, annotator=annotator, lease=lease),
            lambda qi: qi in rs.graded(),
            answer,
            max_queries,
            ("queries", "graded"),
        )
        if done is not None:
            st = rs.status()
            click.echo(f"\n{done} queries saved; {st['queries_graded']} of "
                       f"{st['queries_in_sample']} queries graded in all")  # fmt: skip


def _ask_grades(docs, per_doc, top: int, show_ranks: bool):
    """Ask a grade for every document of one query: ``{doc: grade}``, ``"skip"`` or ``None``
    (quit). ``b`` goes back one document (the query is not saved until its last grade)."""
    grades: dict = {}
    ranks = [c for c in docs.columns if c.startswith("rank_")] if show_ranks else []
    j = 0
    while j < len(docs):
        row = docs.iloc[j]
        click.echo(f"  document {j + 1}/{len(docs)}: {row['doc']}")
        for c in per_doc:
            click.echo(f"    {c}: {row[c]}")
        for c in ranks:
            if _notna(row[c]):
                click.echo(f"    {c}: {int(row[c])}")
        try:
            raw = click.prompt(f"  grade (0..{top}; b=back, s=skip query, q=quit)", default="",
                               show_default=False).strip().lower()  # fmt: skip
        except click.exceptions.Abort:
            return None
        if raw in ("q", "quit"):
            return None
        if raw in ("s", "skip"):
            return "skip"
        if raw in ("b", "back"):
            j = max(j - 1, 0)
            continue
        if raw.isdigit() and int(raw) <= top:
            grades[row["doc"]] = int(raw)
            j += 1
        elif raw:
            click.echo(f"  a grade is a whole number 0..{top}, got {raw!r}")
    return grades


def _notna(value) -> bool:
    import pandas as pd

    return bool(pd.notna(value))


def _ask(s, item_id: str, choices: str):
    from .io import label_codec

    parse = label_codec(s.pool)
    while True:
        try:
            raw = click.prompt(
                f"  label ({choices}; s=skip, q=quit)", default="", show_default=False
            )
        except click.exceptions.Abort:
            return None
        raw = raw.strip()
        if raw.lower() in ("q", "quit"):
            return None
        if raw.lower() in ("s", "skip"):
            return "skip"
        if not raw:
            continue
        try:
            return parse(raw)
        except ValueError as exc:
            click.echo(f"  {exc}")


# -- status ---------------------------------------------------------------------------------------
@main.command()
@click.argument("session")
@click.option("--level", type=float, default=0.95, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_pool_option
def status(session, level, as_json, pool_path):
    """Estimate with interval, labels used, budget left, agreement between annotators (and the
    posterior if there is one). Reads the session without writing to it."""
    if _ranking(session):
        click.echo(_ranking_text(session, level, as_json, pool_path))
        return
    with _open(session, pool_path, readonly=True) as s, s.store.reading():  # one state of it
        st = s.status(level)
        post = _posterior_summary(s)
        if as_json:
            if post is not None:
                from .report import posterior_conflicts

                st["posterior"] = json.loads(post.to_json(orient="index"))
                st["notes"] = posterior_conflicts(st["estimates"], post, st["measure"])
            click.echo(_json(st))
            return
        click.echo(format_status(s, st))
        if post is not None:
            from .report import posterior_conflicts, posterior_note

            click.echo(f"\nposterior of the measure ({post.attrs['model']}; ArviZ summary):")
            click.echo(post.to_string())
            click.echo(posterior_note(post.attrs["method"]))
            for line in posterior_conflicts(st["estimates"], post, st["measure"]):
                click.echo(line)


def _json(st) -> str:
    """``bae status --json``: valid JSON (NaN and infinities as ``null``, as ``/api/status``
    writes them: :func:`bayes_activeeval.io.jsonable`)."""
    from .io import jsonable

    return json.dumps(jsonable(st), indent=2, allow_nan=False)


def _posterior_summary(s):
    from .report import posterior_summary

    return posterior_summary(s.posterior())


def format_status(s, st) -> str:
    """The text ``bae status`` prints."""
    budget = (
        f"budget {st['budget']:g}: {st['budget_used']:g} used, {st['budget_left']:g} left"
        if st["budget"] is not None
        else f"{st['budget_used']:g} used (no budget set)"
    )
    lines = [
        f"session {s.path}: pool {os.path.basename(s.pool_file.path)} "
        f"({st['n_items']:,} items), measure {st['measure']}, {st['design']} design "
        f"(oracle {st['oracle']}, seed {s.design.seed})",
        f"labels: {st['labels']} ({budget}); stages completed: {st['stages_completed']}; "
        f"items pending: {st['pending']}",
    ]
    if not st["estimates"]:
        lines.append("no estimate yet: label the items of `bae next` first")
    lvl = f"{st['level']:.0%}"
    for r in st["estimates"]:
        lines.append(
            f"{st['measure']} [{r['model']}] = {r['estimate']:.4f} ± {r['stderr']:.4f} (SE), "
            f"{lvl} interval [{r['low']:.4f}, {r['high']:.4f}] from {r['draws']} draws"
        )
        if r.get("unseen"):
            from .report import unseen_line

            lines.append("  " + unseen_line(r["unseen"], st["measure"], lvl))
    return "\n".join(lines + _team_lines(st))


def _team_lines(st, item="item", items="items", labeled="labeled", unit="items") -> list[str]:
    """The annotator and agreement lines of ``bae status`` (``unit``: what agreement counts)."""
    if not st.get("annotators"):
        return []
    who = ", ".join(f"{a} {k}" for a, k in st["annotators"].items())
    lines = [
        f"annotators: {who}; corrections: {st['corrections']}; {items} leased now: "
        f"{st['leased']}; each {item} counts with its {st['rule']}"
    ]
    ag = st["agreement"]
    if ag["items"]:
        kap = "; ".join(
            f"Cohen's kappa {k['annotators'][0]}–{k['annotators'][1]} {k['kappa']:.3f} "
            f"({k['items']} {unit})"
            for k in ag["kappa"]
        )
        lines.append(
            f"agreement: {ag['items']} {unit} {labeled} by two or more annotators, "
            f"{ag['agree']:.1%} of {ag['pairs']} pairs agree" + (f"; {kap}" if kap else "")
        )
    else:
        lines.append(f"agreement: no {item} {labeled} by two annotators yet")
    return lines


# -- report ---------------------------------------------------------------------------------------
@main.command()
@click.argument("session")
@click.option("--out", required=True, help="The HTML file to write.")
@click.option("--overwrite", is_flag=True, help="Replace --out if it exists.")
@click.option("--level", type=float, default=0.95, show_default=True)
@_pool_option
def report(session, out, overwrite, level, pool_path):
    """Write a self-contained HTML report (plots embedded). Reads the session without writing.

    For a ranking session: a text report (estimate or paired test) written to --out.
    """
    from .io import check_output, write_new_file
    from .report import write_report

    if _ranking(session):

        def check(rs) -> None:
            check_output(out, overwrite=overwrite, protected=_protected_ranking(rs))

        text = _ranking_text(session, level, False, pool_path, check=check)
        write_new_file(out, text + "\n", overwrite=overwrite)  # atomic, as every other output
        click.echo(text)
        click.echo(f"report written to {out}")
        return

    with _open(session, pool_path, readonly=True) as s:
        check_output(out, overwrite=overwrite, protected=_protected(s))
        write_report(s, out, level=level, overwrite=overwrite)
    click.echo(f"report written to {out}")


def _ranking_text(
    session: str, level: float, as_json: bool, pool_path: str | None, check=None
) -> str:
    """The ranking session's summary as text or JSON; ``check(rs)`` runs first (e.g. the output
    file check of ``bae report``, which needs the session's paths)."""
    from ._validation import check_level
    from .ranking_session import RankingSession

    level = check_level(level, "--level")  # before the session is opened
    with RankingSession.open(session, readonly=True, pool_path=pool_path) as rs:
        if check is not None:
            check(rs)
        st = rs.summary(level)
    if as_json:
        return _json(st)
    target = f"{st['measure']} [{' - '.join(st['models'])}]"
    lines = [
        f"ranking session {session}: {target}, {st['design']} design, budget {st['budget']:g}",
        f"queries graded: {st['queries_graded']} of {st['queries_in_sample']} drawn "
        f"(cost {st['cost_graded']:.4g})",
    ]
    if "estimate" not in st:
        lines.append("no estimate yet: grade the queries of `bae next` first")
    elif not math.isfinite(st["stderr"]):  # e.g. one graded query: no variance from it
        lines.append(f"{target} = {st['estimate']:.4f}; standard error undefined (one graded "
                     "query cannot estimate a variance): no interval or test yet")  # fmt: skip
    else:
        lines.append(f"{target} = {st['estimate']:.4f} ± {st['stderr']:.4f} (SE), "
                     f"{level:.0%} interval [{st['low']:.4f}, {st['high']:.4f}]")  # fmt: skip
        if "pvalue" in st:
            lines.append(f"paired Wald test of equality: p = {st['pvalue']:.4g}")
    lines += _team_lines(st, "query", "queries", "graded", "documents")
    return "\n".join(lines)


# -- relabel --------------------------------------------------------------------------------------
@main.command()
@click.argument("session")
@click.argument("item")
@click.argument("label")
@click.option("--reason", required=True, help="Why (kept with the correction, for audits).")
@_annotator_option("corrects")
@_pool_option
def relabel(session, item, label, reason, annotator, pool_path):
    """Correct the label of ITEM to LABEL: a new row that supersedes the old one (never a
    deletion); the estimate and an adaptive design's proposals follow the corrected label.

    For a ranking session ITEM is a query id and LABEL one or more DOC=GRADE (comma-separated).
    """
    if _ranking(session):
        _relabel_ranking(session, item, label, reason, annotator, pool_path)
        return
    with _open(session, pool_path) as s:
        before = s.labels().set_index("id")["label"].get(str(item).strip())
        changed = s.relabel(item, label, reason=reason, annotator=annotator, source="cli")
        if changed:
            click.echo(
                f"item {item}: {before} -> {label} (correction by {_who(annotator)}: {reason}); "
                "the old label is kept in the audit trail"
            )
        else:
            click.echo(f"item {item} already counts with label {label}; nothing written")


def _relabel_ranking(session, qid, label, reason, annotator, pool_path) -> None:
    from .ranking_session import RankingSession

    # ids are passed on as given (the pool keeps their spaces: 'd1 ' and 'd1' are two documents);
    # RankingSession.relabel matches them exactly, and ignores the spaces only where no id
    # matches exactly and one does without them ("d1=2, d2=1" finds d2)
    grades = {}
    for part in (x for x in label.split(",") if x.strip()):
        doc, sep, grade = part.partition("=")
        if not (sep and doc.strip() and grade.strip()):
            raise ValueError(
                f"a ranking session's LABEL is DOC=GRADE[,DOC=GRADE…], got {part.strip()!r}"
            )
        if doc in grades:
            raise ValueError(
                f"document {doc.strip()!r} is given twice in LABEL {label!r}; give each "
                "document one grade"
            )
        grades[doc] = grade.strip()
    with RankingSession.open(session, pool_path=pool_path) as rs:
        changed = rs.relabel(qid, grades, reason=reason, annotator=annotator, source="cli")
    if changed:
        click.echo(f"query {qid}: {label} (correction by {_who(annotator)}: {reason}); "
                   "the old grades are kept in the audit trail")  # fmt: skip
    else:
        click.echo(f"query {qid} already counts with {label}; nothing written")


def _who(annotator: str | None) -> str:
    from .session import default_annotator

    return annotator or default_annotator()


# -- serve ----------------------------------------------------------------------------------------
@main.command()
@click.argument("session")
@click.option("--port", type=int, default=8765, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback requires the printed access token.")  # fmt: skip
@_annotator_option("labels in the browsers (each browser may set its own: /?annotator=NAME)")
@click.option("--n", "stage_size", type=int, default=20, show_default=True,
              help="Draws of a new stage.")  # fmt: skip
@click.option("--batch", type=int, default=5, show_default=True,
              help="Items leased to one browser at a time.")  # fmt: skip
@click.option("--lease", "lease_minutes", type=float, default=30.0, show_default=True,
              help="Minutes a browser's items stay reserved for it.")  # fmt: skip
@click.option("--level", type=float, default=0.95, show_default=True)
@_pool_option
def serve(session, port, host, annotator, stage_size, batch, lease_minutes, level, pool_path):
    """Serve a local labeling page for SESSION (one browser per annotator, or several).

    For a ranking session the page shows one query at a time with every document to grade;
    --batch is the number of queries leased to one browser (--n does not apply).
    """
    from ._validation import check_count, check_level
    from .serve import ServeConfig
    from .serve import serve as run_server

    if not (0 < port < 65536):
        raise ValueError(f"--port must be in 1..65535, got {port}")
    if annotator is not None:
        from .session.annotations import check_annotator

        try:
            check_annotator(annotator.strip())
        except ValueError as exc:
            raise ValueError(f"--annotator {annotator!r}: {exc}") from exc
    _check_bind(host, port)
    cfg = ServeConfig(
        session=session,
        pool_path=pool_path,
        host=host,
        port=port,
        annotator=annotator,
        stage_size=check_count(stage_size, "--n"),
        batch=check_count(batch, "--batch"),
        lease=_lease_seconds(lease_minutes),
        level=check_level(level),
    )
    run_server(cfg, echo=lambda m: click.echo(m, err=True))


def _check_bind(host: str, port: int) -> None:
    """Refuse a --host/--port the server could not bind (an unknown name, an address not on
    this machine, a port in use) before anything is printed, naming the option."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ValueError(f"--host {host!r} cannot be bound: {exc.strerror or exc}") from exc
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(addr)
        except OSError as exc:
            raise ValueError(
                f"--host {host!r} --port {port} cannot be bound: {exc.strerror or exc}"
            ) from exc


# -- compare --------------------------------------------------------------------------------------
@main.command()
@click.argument("session")
@click.option("--level", type=float, default=0.95, show_default=True)
@_pool_option
def compare(session, level, pool_path):
    """Compare the session's models: estimates and pairwise tests of their differences."""
    from .report import comparison_table

    if _ranking(session):
        raise ValueError(
            "bae compare is for labeling sessions; for a ranking session of two rankers, "
            "bae status reports their paired test"
        )
    with _open(session, pool_path, readonly=True) as s:
        if len(s.design.models) < 2:
            raise ValueError(
                f"the session evaluates one model ({s.design.models[0]}); comparing needs "
                "several (bae init … --pred a=COL --pred b=COL)"
            )
        with s.store.reading():  # one state of the file, while others may write
            est, tests = comparison_table(s, level)
        click.echo(est.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
        click.echo("")
        click.echo(tests.to_string(index=False, float_format=lambda v: f"{v:.4g}"))


if __name__ == "__main__":  # pragma: no cover
    main()
