"""One check in one place: what a file about to be replaced holds is checked once, under the lock
of the replacement; one-row reads of a session's meta table copy no file; the ``--lease``,
budget, two-labels and JSON checks are the library's, shared by the CLI and the sessions."""

from __future__ import annotations

import json
import math
import sqlite3

import numpy as np
import pandas as pd
import pytest
from cli_helpers import fails, labeled_pool_csv, ok

from bayes_activeeval.adaptive import ActiveEvaluator
from bayes_activeeval.datasets import make_classification_pool
from bayes_activeeval.ranking_session import is_ranking_session
from bayes_activeeval.session import Session, store
from bayes_activeeval.session.annotations import MAX_LEASE

POOL_OPTS = ["--id-col", "id", "--pred-col", "pred", "--prob-col", "p"]


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    return labeled_pool_csv(tmp_path_factory.mktemp("one") / "pool.csv", seed=5, prefix="i")


def _session(pool, path, *extra) -> None:
    ok("init", pool[0], "--measure", "accuracy", "--session", path, *POOL_OPTS, *extra)


def _no_copy(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the whole session file was copied into memory")

    monkeypatch.setattr(store, "_image", refuse)


def test_meta_is_read_in_place_without_a_copy(pool, tmp_path, monkeypatch):
    s = tmp_path / "s.bae"
    _session(pool, s)
    _no_copy(monkeypatch)
    assert store.peek_meta(str(s), "schema_version") == 2
    assert store.peek_meta(str(s), "no such key") is None
    assert not is_ranking_session(str(s))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.bae"]  # nothing created beside it


def test_meta_read_while_a_writer_has_the_file_open(pool, tmp_path, monkeypatch):
    s = tmp_path / "s.bae"
    _session(pool, s)
    with Session.open(s) as w:
        w.next(3)  # the writer's -wal and -shm are beside the file now
        _no_copy(monkeypatch)
        assert store.peek_meta(str(s), "schema_version") == 2


def test_overwrite_checks_the_labels_once_under_the_lock(pool, tmp_path, monkeypatch):
    s = tmp_path / "s.bae"
    _session(pool, s)
    with Session.open(s) as w:
        ids = [str(i) for i in w.pool_file.ids[w.next(2)]]
        w.record(ids, [pool[1][i] for i in ids])
    before = s.read_bytes()

    def refuse(path):
        raise AssertionError("the file was read before the lock of the replacement")

    monkeypatch.setattr(store, "_read_connection", refuse)
    fails("init", pool[0], "--measure", "accuracy", "--session", s, *POOL_OPTS, "--overwrite",
          message="holds 2 recorded labels")  # fmt: skip
    assert s.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.bae"]


def test_an_existing_file_is_refused_before_the_pool_is_read(pool, tmp_path):
    s = tmp_path / "s.bae"
    s.write_text("notes\n")
    fails("init", tmp_path / "missing.csv", "--measure", "accuracy", "--session", s,
          *POOL_OPTS, message="already exists")  # fmt: skip
    con = sqlite3.connect(tmp_path / "other.db")
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    fails("init", pool[0], "--measure", "accuracy", "--session", tmp_path / "other.db",
          *POOL_OPTS, "--overwrite", message="not a bae session")  # fmt: skip


def test_lease_in_minutes_is_the_library_check():
    from bayes_activeeval.session.annotations import check_lease

    assert check_lease(90, "--lease", "minutes") == 5400.0
    assert check_lease(MAX_LEASE / 60, "--lease", "minutes") == MAX_LEASE
    for bad in (0.0, -1.0, math.nan, MAX_LEASE / 60 + 1):
        with pytest.raises(ValueError, match=r"--lease must be a positive number of minutes"):
            check_lease(bad, "--lease", "minutes")
    with pytest.raises(ValueError, match=r"^lease must be a positive number of seconds"):
        check_lease(MAX_LEASE + 1)


def test_budget_check_names_the_argument_and_the_value():
    from bayes_activeeval._validation import check_budget

    assert check_budget(np.float64(3)) == 3.0
    with pytest.raises(ValueError, match=r"--budget must be positive and finite, got -1.0"):
        check_budget(np.float64(-1), "--budget")
    with pytest.raises(TypeError, match="budget must be a number, got 'x'"):
        check_budget("x")
    ev = ActiveEvaluator(make_classification_pool(200, 0.3, rng=0).pool, "accuracy", rng=0)
    with pytest.raises(ValueError, match=r"budget must be positive and finite, got inf"):
        ev.run(lambda idx: np.zeros(len(idx), dtype=int), budget=np.inf)


def test_two_labels_of_one_item_are_named_with_both_labels():
    ev = ActiveEvaluator(make_classification_pool(200, 0.3, rng=0).pool, "accuracy", rng=0)
    with pytest.raises(ValueError, match=r"item 5 has two different labels \(0 and 1\)"):
        ev.update([5, 5], [0, 1])


def test_jsonable_handles_arrays_scalars_and_non_finite_numbers():
    from bayes_activeeval.io import jsonable

    got = jsonable({1: np.array([1.5, np.nan]), "t": (np.int64(2), np.float32(np.inf)), "s": "x"})
    assert got == {"1": [1.5, None], "t": [2, None], "s": "x"}
    assert json.dumps(got, allow_nan=False)


def test_ranking_init_options_are_checked_before_the_pool_is_read(tmp_path):
    missing = tmp_path / "missing.parquet"
    base = ["init", missing, "--task", "ranking", "--session", tmp_path / "r.bae", "--rank",
            "a=rank_a"]  # fmt: skip
    fails(*base, "--measure", "dcg", "--budget", 5, "--mix", 2,
          message="mix (--mix) must be in [0, 1]")  # fmt: skip
    fails(*base, "--measure", "dcg", "--budget", 0, message="budget (--budget) must be positive")
    fails(*base, "--measure", "dcg", "--budget", 5, "--model", "b",
          message="models (--model) 'b' is not a ranker of the pool ['a']")  # fmt: skip
    line = fails(*base, "--measure", "nope", "--budget", 5, message="--measure: ")
    assert "'nope' is not a ranking measure" in line
    assert not (tmp_path / "r.bae").exists()


def test_ranking_pool_columns_are_named_by_their_options(tmp_path):
    pool = tmp_path / "pool.csv"
    pd.DataFrame({"qid": ["q1", "q1"], "doc": ["d1", "d2"], "rank_a": [1, 2]}).to_csv(
        pool, index=False
    )
    base = ["init", pool, "--task", "ranking", "--measure", "dcg", "--session",
            tmp_path / "r.bae", "--budget", 5]  # fmt: skip
    for extra, option in [
        (["--rank", "a=nope"], "--rank a=…"),
        (["--rank", "a=rank_a", "--query-col", "q"], "--query-col"),
        (["--rank", "a=rank_a", "--item-col", "d"], "--item-col"),
        (["--rank", "a=rank_a", "--cost-col", "c"], "--cost-col"),
        (["--rank", "a=rank_a", "--relevance-cols", "p0,p1"], "--relevance-cols"),
        (["--rank", "a=rank_a", "--text-col", "t"], "--text-col"),
    ]:
        line = fails(*base, *extra, message=f"({option}) is not in the pool file")
        assert "its columns are: qid, doc, rank_a" in line
