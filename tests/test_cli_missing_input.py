"""A missing input (the pool's probabilities, predictive std, classes) is named by its option on
the command line and by its argument in Python: the library raises
:class:`~bayes_activeeval._validation.MissingInput` with ``needs`` and the ``bae`` error handler
maps it to the option (``_CLI_OPTIONS``), also when a reader re-raised it with the file's name.
The command-line lines are those of the former string rewriting, word for word."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from cli_helpers import fails

import bayes_activeeval as bae
from bayes_activeeval._validation import MissingInput
from bayes_activeeval.cli import _cli_message

N = 50


def _frame(kind: str) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    p = rng.uniform(size=N)
    ids = [f"i{k}" for k in range(N)]
    if kind == "binary":
        return pd.DataFrame({"id": ids, "pred": (p > 0.5).astype(int), "p": p})
    if kind == "regression":
        return pd.DataFrame({"id": ids, "pred": rng.normal(size=N)})
    # string predictions of two values and three probability columns: no classes to infer
    return pd.DataFrame(
        {"id": ids, "pred": np.where(p > 0.5, "x", "y"), "a": p / 2, "b": p / 2, "c": 1 - p}
    )


def _init(path, *extra):
    return ["init", path, "--session", path.parent / "s.bae", "--id-col", "id", *extra]


@pytest.mark.parametrize(
    ("kind", "extra", "line"),
    [
        (
            "binary",
            ("--measure", "f1"),
            "error: the pool has no probs, so there is no belief about the labels; name the "
            "probability column: --prob-col COLUMN (or --prob NAME=COLUMN)",
        ),
        (
            "regression",
            ("--measure", "mse", "--task", "regression"),
            "error: the pool has no predictive_std, so there is no belief about the labels; name "
            "the predictive std column: --std-col COLUMN (or --std NAME=COLUMN)",
        ),
    ],
)
def test_missing_belief_column_names_the_option(tmp_path, kind, extra, line):
    path = tmp_path / "pool.csv"
    _frame(kind).to_csv(path, index=False)
    option = "--prob-col" if kind == "binary" else "--std-col"
    assert fails(*_init(path, *extra, "--pred-col", "pred"), message=option) == line


def test_classes_not_inferred_names_the_option_after_the_file_name(tmp_path):
    """The pool reader re-raises the error with the file's name (``raise ... from exc``)."""
    path = tmp_path / "pool.csv"
    _frame("strings").to_csv(path, index=False)
    args = _init(path, "--measure", "accuracy", "--pred-col", "pred", "--prob-col", "a,b,c")
    line = fails(*args, message="--classes")
    assert line == (
        "error: pool.csv: cannot infer the classes from predictions ['x', 'y'] and probs with 3 "
        "columns; give the classes: --classes A,B,…"
    )


def test_lazy_pool_names_the_options(tmp_path):
    pytest.importorskip("pyarrow")
    pytest.importorskip("dask.array")
    path = tmp_path / "pool.parquet"
    _frame("strings").to_parquet(path, index=False)
    args = _init(path, "--lazy", "--measure", "accuracy", "--pred-col", "pred")
    line = fails(*args, "--prob-col", "a,b,c", message="--classes")
    assert line == (
        "error: cannot infer the classes from predictions ['x', 'y'] and probs with 3 columns; "
        "give the classes: --classes A,B,…"
    )
    path = tmp_path / "binary.parquet"
    _frame("binary").to_parquet(path, index=False)
    line = fails(*_init(path, "--lazy", "--measure", "f1", "--pred-col", "pred"), message="--prob")
    assert line == (
        "error: the pool has no probs, so there is no belief about the labels; name the "
        "probability column: --prob-col COLUMN (or --prob NAME=COLUMN)"
    )


# -- the library side: a ValueError with the same message, and needs --------------------------------
def test_library_messages_are_unchanged_and_carry_needs():
    pool = bae.Pool(np.r_[0, 1, 1, 0], scores=np.r_[0.1, 0.9, 0.8, 0.3])
    with pytest.raises(ValueError) as info:
        pool.view().positive_prob()
    exc = info.value
    assert isinstance(exc, MissingInput) and exc.needs == "probs" and not exc.or_belief
    assert str(exc) == "this measure needs the model's probabilities: give the pool probs="
    # without a belief alternative: the option alone (the former table's third entry)
    assert _cli_message(exc) == (
        "this measure needs the model's probabilities: name the probability column: --prob-col "
        "COLUMN"
    )
    with pytest.raises(ValueError) as info:
        bae.beliefs.pool_belief(pool, ("model",))
    assert str(info.value) == (
        "the pool has no probs, so there is no belief about the labels; give the pool probs= or "
        "pass belief="
    )
    assert (info.value.needs, info.value.or_belief) == ("probs", True)
    with pytest.raises(ValueError) as info:
        bae.Pool(np.array(["x", "y", "x"]), np.full((3, 3), 1 / 3))
    assert str(info.value) == (
        "cannot infer the classes from predictions ['x', 'y'] and probs with 3 columns; "
        "give classes="
    )
    assert info.value.needs == "classes"


def test_missing_input_keeps_needs_when_pickled_and_reraised_plain():
    exc = MissingInput("no std; ", "predictive_std", or_belief=True)
    assert str(exc) == "no std; give the pool predictive_std= or pass belief="
    back = pickle.loads(pickle.dumps(exc))
    assert (str(back), back.needs, back.or_belief) == (str(exc), "predictive_std", True)
    # a reader appending context as type(exc)(text) keeps the text; the cause keeps needs
    plain = MissingInput(f"{exc} (in the chunk of items 0..9)")
    assert plain.needs is None and str(plain) == f"{exc} (in the chunk of items 0..9)"
    plain.__cause__ = exc
    assert _cli_message(plain) == (
        "no std; name the predictive std column: --std-col COLUMN (or --std NAME=COLUMN) "
        "(in the chunk of items 0..9)"
    )
    with pytest.raises(ValueError, match=r"needs must be one of .* got 'scores'"):
        MissingInput("x", "scores")


def test_adaptive_default_oracle_names_the_option(tmp_path):
    """``--design adaptive`` on a pool without probabilities: the default oracle (an ensemble)
    reports its members' errors, the plug-in member's missing probabilities among them."""
    path = tmp_path / "pool.csv"
    _frame("binary").to_csv(path, index=False)
    args = _init(path, "--measure", "brier", "--pred-col", "pred", "--design", "adaptive")
    line = fails(*args, message="no member oracle model can handle this pool")
    assert (
        "model: the pool has no probs, so there is no belief about the labels; name the "
        "probability column: --prob-col COLUMN (or --prob NAME=COLUMN);" in line
    )
