"""Ranking session review: ids with surrounding spaces are relabeled exactly as recorded and
round-trip through the CSV of ``bae next``; ``bae init --task ranking`` passes ``--estimator`` on
and refuses the labeling-session options; errors name the command's options; the synthetic pool
generators check ``noise`` and ``n_models``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from cli_helpers import fails, ok

from bayes_activeeval.datasets import make_classification_pool, make_regression_pool
from bayes_activeeval.ranking_session import RankingSession

pytest.importorskip("pyarrow")  # Parquet pools keep the spaces of an id exactly


def _pool(path, docs: dict[str, list[str]]) -> str:
    rows = [
        {"qid": q, "doc": d, "rank_a": j + 1, "rank_b": len(ds) - j}
        for q, ds in docs.items()
        for j, d in enumerate(ds)
    ]
    pd.DataFrame(rows).to_parquet(path)
    return str(path)


def _init(tmp_path, docs, *extra, budget=30):
    pool = _pool(tmp_path / "pool.parquet", docs)
    session = str(tmp_path / "r.bae")
    ok("init", pool, "--task", "ranking", "--measure", "dcg", "--session", session,
       "--rank", "a=rank_a", "--rank", "b=rank_b", "--max-grade", "2", "--budget", budget,
       *extra)  # fmt: skip
    return pool, session


def _grades(session) -> dict[str, dict[str, int]]:
    with RankingSession.open(session, readonly=True) as rs:
        return {str(rs.pool.query_ids[qi]): g for qi, g in rs.graded().items()}


# -- 1. bae relabel looks ids up exactly as given -----------------------------------------------
DOCS = {"q1": ["d1", "d1 "], "q1 ": ["d1", "d2"], "q2": ["d1", "d2"]}


@pytest.fixture
def graded(tmp_path):
    _, session = _init(tmp_path, DOCS)
    rows = [(q, d, 0) for q, ds in DOCS.items() for d in ds]
    with RankingSession.open(session) as rs:
        drawn = {str(rs.pool.query_ids[q]) for q in rs._order().tolist()}
        assert drawn == set(DOCS)  # 30 draws of 3 queries: every query is drawn
        rs.record(pd.DataFrame(rows, columns=["qid", "doc", "grade"]), annotator="al")
    return session


def test_relabel_query_with_trailing_space_changes_only_that_query(graded):
    ok("relabel", graded, "q1 ", "d1=2", "--reason", "adjudicated", "--annotator", "al")
    g = _grades(graded)
    assert g["q1 "] == {"d1": 2, "d2": 0}
    assert g["q1"] == {"d1": 0, "d1 ": 0}  # the query without the space is untouched
    assert g["q2"] == {"d1": 0, "d2": 0}


def test_relabel_document_with_space_changes_that_document(graded):
    ok("relabel", graded, "q1", "d1 =2", "--reason", "adjudicated", "--annotator", "al")
    assert _grades(graded)["q1"] == {"d1": 0, "d1 ": 2}
    # ' d2' is no document of q2, 'd2' is: the usual "DOC=GRADE, DOC=GRADE" still works
    ok("relabel", graded, "q2", "d1=1, d2=2", "--reason", "r", "--annotator", "al")
    assert _grades(graded)["q2"] == {"d1": 1, "d2": 2}


def test_relabel_ambiguous_without_spaces_is_refused(graded):
    # '  q1' matches no query exactly; without its spaces it could be 'q1' or 'q1 '
    fails("relabel", graded, "  q1", "d1=2", "--reason", "r", "--annotator", "al",
          message="could be any of 'q1', 'q1 '")  # fmt: skip
    assert _grades(graded)["q1"] == {"d1": 0, "d1 ": 0}


# -- 2. bae next quotes ids with surrounding spaces ---------------------------------------------
def test_next_csv_round_trips_ids_with_leading_spaces(tmp_path):
    _, session = _init(tmp_path, {" lead": [" d", "e"]}, budget=1)
    out = tmp_path / "batch.csv"
    ok("next", session, "--n", 5, "--annotator", "al", "--out", out)
    text = out.read_text(encoding="utf-8")
    assert '" lead"' in text and '" d"' in text
    lines = text.splitlines()
    out.write_text("\n".join(lines[:1] + [line + "1" for line in lines[1:]]) + "\n")
    res = ok("record", session, out, "--annotator", "al")
    assert "recorded 1 queries (2 grades)" in res.output
    assert _grades(session) == {" lead": {" d": 1, "e": 1}}


def test_next_stdout_quotes_ids_with_spaces(tmp_path):
    _, session = _init(tmp_path, {" lead": [" d", "e "]}, budget=1)
    res = ok("next", session, "--n", 5, "--annotator", "al")
    assert '" lead"," d"' in res.stdout and '" lead","e "' in res.stdout


# -- 3. bae init --task ranking: --estimator passed on, other options refused -------------------
def test_init_ranking_passes_estimator(tmp_path):
    _, session = _init(tmp_path, DOCS, "--estimator", "ipw")
    with RankingSession.open(session, readonly=True) as rs:
        assert rs.estimator == "ipw"
        assert rs.meta["estimator"] == "ipw"


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        (["--lazy"], "--lazy"),
        (["--weight-col", "x"], "--weight-col"),
        (["--design", "static"], "--design"),
        (["--oracle", "a"], "--oracle"),
        (["--pred-col", "rank_a"], "--pred-col"),
        (["--prob", "a=p"], "--prob"),
        (["--id-col", "doc"], "--id-col"),
        (["--classes", "0,1"], "--classes"),
        (["--pos-label", "1"], "--pos-label"),
    ],
)
def test_init_ranking_refuses_labeling_options(tmp_path, extra, option):
    pool = _pool(tmp_path / "pool.parquet", DOCS)
    session = tmp_path / "r.bae"
    line = fails("init", pool, "--task", "ranking", "--measure", "dcg", "--session", session,
                 "--rank", "a=rank_a", "--budget", 5, *extra, message=option)  # fmt: skip
    assert "ranking" in line
    assert not session.exists()


# -- 4. errors name the options -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--budget", -1], "budget (--budget) must be positive"),
        (["--budget", 5, "--cost-col", "nope"], "column 'nope' (--cost-col)"),
        (["--budget", 5, "--rank", "b=nocol"], "column 'nocol' (--rank b="),
        (["--budget", 5, "--mix", 2], "mix (--mix) must be"),
        (["--budget", 5, "--query-col", "nope"], "(--query-col)"),
        (["--budget", 5, "--relevance-cols", "p0,nope"], "(--relevance-cols)"),
        (["--budget", 5, "--model", "zz"], "(--model) 'zz'"),
        (["--budget", 5, "--measure", "dcg@x"], "--measure: measure='dcg@x'"),
    ],
)
def test_init_ranking_errors_name_options(tmp_path, extra, message):
    pool = _pool(tmp_path / "pool.parquet", DOCS)
    fails("init", pool, "--task", "ranking", "--measure", "dcg", "--session",
          tmp_path / "r.bae", "--rank", "a=rank_a", *extra, message=message)  # fmt: skip


@pytest.mark.parametrize("level", ["1.5", "0", "nan"])
def test_ranking_status_and_report_level_named(tmp_path, level):
    _, session = _init(tmp_path, DOCS)
    fails("status", session, "--level", level, message="--level must be in (0, 1)")
    fails("status", session, "--json", "--level", level, message="--level must be in (0, 1)")
    out = tmp_path / "rep.txt"
    fails("report", session, "--out", out, "--level", level, message="--level must be")
    assert not out.exists()


# -- 5. synthetic pools: noise and n_models checked ---------------------------------------------
@pytest.mark.parametrize("make", [make_classification_pool, make_regression_pool])
@pytest.mark.parametrize("noise", [np.nan, -1.0, np.inf, -0.1])
def test_generators_check_noise(make, noise):
    with pytest.raises(ValueError, match="noise must be a finite number >= 0"):
        make(n=100, noise=noise, rng=0)


@pytest.mark.parametrize("make", [make_classification_pool, make_regression_pool])
def test_generators_check_noise_type(make):
    with pytest.raises(TypeError, match="noise must be a number"):
        make(n=100, noise="0.4", rng=0)


@pytest.mark.parametrize("make", [make_classification_pool, make_regression_pool])
def test_generators_check_n_models(make):
    with pytest.raises(ValueError, match="n_models must be >= 1"):
        make(n=100, n_models=0, rng=0)
    with pytest.raises(TypeError, match="n_models must be an integer"):
        make(n=100, n_models=1.5, rng=0)
    # what is valid stays valid: no noise, NumPy numbers
    make(n=100, noise=0.0, rng=0)
    p = make(n=100, noise=np.float32(0.3), n_models=np.int64(2), rng=0)
    assert list(p.pool.models) == ["m0", "m1"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"measure": "dcg@x"}, "--measure: measure='dcg@x'"),
        ({"budget": -1.0}, r"budget \(--budget\) must be positive"),
        ({"mix": 2.0}, r"mix \(--mix\) must be"),
        ({"models": ("zz",)}, r"models \(--model\) 'zz' is not a ranker"),
    ],
)
def test_create_checks_its_arguments_before_reading_the_pool(tmp_path, kwargs, message):
    # the pool file does not exist: an argument error must come first, naming the argument
    args = {"measure": "dcg", "budget": 5.0, "models": ("a",), **kwargs}
    with pytest.raises(ValueError, match=message):
        RankingSession.create(
            str(tmp_path / "r.bae"),
            str(tmp_path / "missing.parquet"),
            {"query": "qid", "item": "doc", "ranks": {"a": "rank_a"}},
            **args,
        )
    assert not (tmp_path / "r.bae").exists()
