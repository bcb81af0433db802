"""Sessions: persistence, determinism, crash safety (SIGKILL during ``bae record``), bad input."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayes_activeeval as bae
from bayes_activeeval.datasets import make_classification_pool
from bayes_activeeval.io import PoolSpec, read_labels, read_pool
from bayes_activeeval.session import DELAY_ENV, Design, Session, SessionError, stage_rng
from bayes_activeeval.session.designs import make_design

ROOT = Path(__file__).resolve().parents[1]
SPEC = PoolSpec(pred="pred", prob="p", score="score", id_col="id", text_cols=("text",))


def write_pool_csv(sp, path: Path) -> None:
    pool = sp.pool
    v = pool.view()
    pd.DataFrame(
        {
            "id": [f"item-{i}" for i in range(pool.n_items)],
            "pred": v.pred,
            "p": v.positive_prob(),
            "score": pool.scores["model"],
            "text": [f"text of item {i}" for i in range(pool.n_items)],
        }
    ).to_csv(path, index=False)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 20,000-item pool with 2% positives, written to CSV, with its true labels."""
    d = tmp_path_factory.mktemp("pool")
    sp = make_classification_pool(20_000, 0.02, separation=4.0, rng=11)
    path = d / "pool.csv"
    write_pool_csv(sp, path)
    truth = dict(
        zip([f"item-{i}" for i in range(sp.pool.n_items)], sp.labels.tolist(), strict=True)
    )
    return path, sp, truth


def labels_for(ids, truth):
    return [truth[i] for i in ids]


def label_stage(s, n, truth, used_up="budget"):
    """Label the items of ``s.next(n)``; their number, or ``None`` once ``next`` refuses with a
    message containing ``used_up``."""
    try:
        idx = s.next(n)
    except SessionError as exc:
        assert used_up in str(exc)
        return None
    ids = s.pool_file.ids[idx]
    s.record(ids, labels_for(ids, truth))
    return len(idx)


def db_digest(path) -> tuple[str, list[str]]:
    """Bytes of the session file and its logical contents."""
    raw = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    con = sqlite3.connect(path)
    dump = list(con.iterdump())
    con.close()
    return raw, dump


# -- io -------------------------------------------------------------------------------------------
def test_read_pool_roundtrip_is_exact(small):
    path, sp, _ = small
    pf = read_pool(path, SPEC)
    assert pf.pool.n_items == sp.pool.n_items
    np.testing.assert_array_equal(pf.pool.view().prob, sp.pool.view().prob)
    np.testing.assert_array_equal(pf.pool.view().pred, sp.pool.view().pred)
    assert pf.ids[3] == "item-3" and pf.text["text"].iloc[3] == "text of item 3"
    assert len(pf.checksum) == 64
    # the same proposal as from the in-memory pool: bit-identical q
    q1 = bae.optimal_proposal(pf.pool, "f1").q
    q2 = bae.optimal_proposal(sp.pool, "f1").q
    np.testing.assert_array_equal(q1, q2)


def test_read_pool_parquet_equals_csv(small, tmp_path):
    path, _, _ = small
    pq = tmp_path / "pool.parquet"
    pd.read_csv(path, dtype={"id": str}, float_precision="round_trip").to_parquet(pq)
    a, b = read_pool(path, SPEC), read_pool(pq, SPEC)
    np.testing.assert_array_equal(a.pool.view().prob, b.pool.view().prob)
    np.testing.assert_array_equal(a.ids, b.ids)


def test_read_pool_several_models_and_multiclass(tmp_path):
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(3), 50)
    frame = pd.DataFrame(P, columns=["c0", "c1", "c2"])
    frame["a"] = P.argmax(1)
    frame["b"] = rng.integers(0, 3, 50)
    frame.to_csv(tmp_path / "m.csv", index=False)
    spec = PoolSpec(
        pred={"a": "a", "b": "b"}, prob={"a": ["c0", "c1", "c2"], "b": ["c0", "c1", "c2"]}
    )
    pf = read_pool(tmp_path / "m.csv", spec)
    assert pf.pool.models == ("a", "b") and pf.pool.n_classes == 3
    np.testing.assert_allclose(pf.pool.view("a").prob, P)
    assert PoolSpec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("id,pred,p\n", "empty"),
        ("id,pred,p\na,1,0.5\na,0,0.1\n", "duplicate item id 'a'"),
        ("id,pred,p\na,1,0.5\nb,0,\n", "missing (NaN) at row 2"),
        ("id,pred,p\na,1,0.5\nb,0,nan\n", "missing (NaN) at row 2"),
        ("id,pred,p\na,1,0.5\nb,0,1.5\n", "probabilities must be in [0, 1]"),
        ("id,pred,q\na,1,0.5\n", "column 'p' (--prob) is not in"),
        ('id,pred,p\na,1,0.5\nb,"0,0.2\n', "not a well-formed CSV"),
        ("id,pred,p\na,1,0.5,7,8\nb,0,0.2\n", "not a well-formed CSV"),
        ("", "is empty"),
    ],
)
def test_read_pool_rejects_bad_files(tmp_path, content, message):
    f = tmp_path / "bad.csv"
    f.write_text(content)
    with pytest.raises(ValueError, match=None) as info:
        read_pool(f, PoolSpec(pred="pred", prob="p", id_col="id"))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_read_labels_checks(tmp_path):
    f = tmp_path / "l.csv"
    f.write_text("id,label\na,1\na,0\n")
    with pytest.raises(ValueError, match="'a' twice"):
        read_labels(f)
    f.write_text("item,label\na,1\n")
    with pytest.raises(ValueError, match="no column 'id'"):
        read_labels(f)


# -- sessions -------------------------------------------------------------------------------------
def test_static_session_matches_python_api(small, tmp_path):
    """Stage k draws Proposal.draw(n_k, rng=stage_rng(seed, k), unique=True); the session's
    estimate equals bae.estimate on the concatenated draws."""
    path, sp, truth = small
    seed, sizes = 5, (30, 50, 40)
    s = Session.create(tmp_path / "s.bae", path, SPEC, Design("f1", seed=seed))
    for n in sizes:
        idx = s.next(n)
        ids = s.pool_file.ids[idx]
        s.record(ids, labels_for(ids, truth))
    est = s.estimate()
    s.close()

    proposal = bae.optimal_proposal(sp.pool, "f1")
    draws = None
    for k, n in enumerate(sizes):
        d = proposal.draw(n, rng=stage_rng(seed, k), unique=True)
        draws = d if draws is None else draws + d
    ref = bae.estimate(sp.pool, "f1", draws, sp.labels[draws.indices])
    assert est.value == pytest.approx(ref.value, rel=1e-12, abs=1e-15)
    assert est.stderr == pytest.approx(ref.stderr, rel=1e-12, abs=1e-15)
    assert est.n_draws == len(draws)


def test_session_stores_its_defences_and_a_legacy_file_keeps_its_mixture(small, tmp_path):
    """A new static session stores the defensive floor of ``optimal_proposal`` (and no mixture);
    a design written before the floor existed (a mix, no floor) keeps its mixture."""
    from bayes_activeeval.kernel import DEFAULT_DEFENSIVE_FLOOR
    from bayes_activeeval.session.designs import StaticDesign

    path, sp, _ = small
    with Session.create(tmp_path / "s.bae", path, SPEC, Design("f1", seed=1)) as s:
        assert (s.design.mix, s.design.defensive_floor) == (0.0, DEFAULT_DEFENSIVE_FLOOR)
        np.testing.assert_allclose(s._design.proposal.q, bae.optimal_proposal(sp.pool, "f1").q)
    with Session.create(tmp_path / "m.bae", path, SPEC, Design("f1", mix=0.05)) as s:
        assert (s.design.mix, s.design.defensive_floor) == (0.05, 0.0)
    with Session.create(tmp_path / "a.bae", path, SPEC, Design("roc_auc")) as s:
        assert (s.design.mix, s.design.defensive_floor) == (0.05, 0.0)
    legacy = {k: v for k, v in Design("f1", mix=0.05).to_dict().items() if k != "defensive_floor"}
    prop = StaticDesign(sp.pool, Design.from_dict(legacy)).proposal
    np.testing.assert_allclose(prop.q, bae.optimal_proposal(sp.pool, "f1", mix=0.05).q, rtol=1e-12)
    assert prop.info["defensive_floor"] == 0.0 and prop.info["mix"] == 0.05
    assert not np.allclose(prop.q, bae.optimal_proposal(sp.pool, "f1").q)


def test_next_is_idempotent_until_labeled(small, tmp_path):
    """A crash between next and record does not change what is asked."""
    path, _, truth = small
    s = Session.create(tmp_path / "s.bae", path, SPEC, Design("f1", seed=1))
    first = s.next(20)
    s.close()
    s = Session.open(tmp_path / "s.bae")
    again = s.next(99)  # pending stage: same items, n ignored
    np.testing.assert_array_equal(first, again)
    ids = s.pool_file.ids[first]
    s.record(ids[:7], labels_for(ids[:7], truth))
    np.testing.assert_array_equal(s.next(5), first[7:])
    assert s.estimates() == {}  # the stage is incomplete: nothing enters the estimate yet
    s.close()


def test_budget_is_respected(small, tmp_path):
    path, _, truth = small
    s = Session.create(tmp_path / "s.bae", path, SPEC, Design("accuracy", budget=25, seed=2))
    total = 0
    while (got := label_stage(s, 10, truth, "budget of 25 is used up")) is not None:
        total += got
    assert s.n_labels == 25 == total
    assert s.budget_left() == 0
    s.close()


def test_changed_pool_file_is_refused(small, tmp_path):
    path, _, _ = small
    copy = tmp_path / "pool.csv"
    copy.write_bytes(path.read_bytes())
    Session.create(tmp_path / "s.bae", copy, SPEC, Design("f1")).close()
    with copy.open("a") as fh:
        fh.write("item-extra,0,0.1,-3.0,extra\n")
    with pytest.raises(SessionError, match="changed since the session was created"):
        Session.open(tmp_path / "s.bae")
    moved = tmp_path / "moved.csv"
    moved.write_bytes(path.read_bytes())
    Session.open(tmp_path / "s.bae", pool_path=moved).close()  # same bytes elsewhere: accepted


def test_bad_labels_leave_session_untouched(small, tmp_path):
    path, _, truth = small
    f = tmp_path / "s.bae"
    s = Session.create(f, path, SPEC, Design("f1", seed=3))
    idx = s.next(10)
    ids = list(s.pool_file.ids[idx])
    s.record(ids[:2], labels_for(ids[:2], truth))
    s.close()
    before = db_digest(f)
    y = labels_for(ids, truth)
    flipped = 1 - y[0]
    cases = [
        ([*ids[2:5], "nope"], [*y[2:5], 0], "unknown item id 'nope'"),
        (ids[2:5], [y[2], 7, y[4]], "label '7' for item"),
        ([*ids[2:4], ids[2]], [*y[2:4], y[2]], "appears twice"),
        ([*ids[2:4], "item-19999"], [*y[2:4], 0], "was not asked for"),
        ([ids[0], ids[3]], [flipped, y[3]], "already has your label"),
    ]
    for bad_ids, bad_y, msg in cases:
        s = Session.open(f)
        with pytest.raises(ValueError, match=msg):
            s.record(bad_ids, bad_y)
        s.close()
        assert db_digest(f) == before
    # the same labels again: skipped, nothing counted twice
    s = Session.open(f)
    res = s.record(ids[:2], labels_for(ids[:2], truth))
    assert (res.recorded, res.skipped) == (0, 2)
    assert s.n_labels == 2
    s.close()


def _uninterrupted_estimate(path, tmp: Path, truth, n: int, seed: int):
    s = Session.create(tmp / "ref.bae", path, SPEC, Design("f1", seed=seed))
    ids = s.pool_file.ids[s.next(n)]
    s.record(ids, labels_for(ids, truth), batch_size=1000)
    est = s.estimate()
    s.close()
    return est


def test_sigkill_during_record_loses_nothing_and_counts_nothing_twice(small, tmp_path):
    path, _, truth = small
    n, seed = 1000, 9
    f = tmp_path / "s.bae"
    s = Session.create(f, path, SPEC, Design("f1", seed=seed))
    ids = s.pool_file.ids[s.next(n)]
    s.close()
    assert len(ids) == n
    labels_csv = tmp_path / "labels.csv"
    pd.DataFrame({"id": ids, "label": labels_for(ids, truth)}).to_csv(labels_csv, index=False)

    env = {**os.environ, DELAY_ENV: "0.05", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "bayes_activeeval.cli", "record", str(f), str(labels_csv)]
    proc = subprocess.Popen(
        [*cmd, "--batch-size", "5"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    seen: set[str] = set()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            con = sqlite3.connect(f, timeout=10)
            seen = {r[0] for r in con.execute("SELECT item_id FROM labels")}
            con.close()
            if len(seen) >= 150:
                break
            assert proc.poll() is None, proc.stderr.read().decode()
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert 150 <= len(seen) < n, "the kill must land in the middle of the record"

    s = Session.open(f)
    got = s.labels()
    assert got["id"].is_unique  # none twice
    assert seen <= set(got["id"])  # every label seen committed is still there
    assert len(got) < n
    for i, y in zip(got["id"], got["label"], strict=True):
        assert int(y) == truth[i]
    assert s.estimates() == {}  # an incomplete stage never enters the estimate
    committed = len(got)
    s.close()

    # resume: the same file again, through the CLI, without the delay
    env.pop(DELAY_ENV)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    assert f"recorded {n - committed} labels ({committed} already present)" in out.stdout
    s = Session.open(f)
    assert s.n_labels == n and s.labels()["id"].is_unique
    resumed = s.estimate()
    s.close()
    ref = _uninterrupted_estimate(path, tmp_path, truth, n, seed)
    assert resumed.value == ref.value and resumed.stderr == ref.stderr
    assert resumed.n_draws == ref.n_draws


@pytest.mark.parametrize("oracle", ["model", "dirichlet-tree"])
def test_adaptive_session_across_processes_equals_active_evaluator(small, tmp_path, oracle):
    """Every call in a fresh Session (as separate `bae` commands would be), a repeated `next`
    (a crash before record), labels recorded in two halves: the same draws and estimate as one
    uninterrupted ActiveEvaluator."""
    path, sp, truth = small
    f = tmp_path / "a.bae"
    Session.create(f, path, SPEC, Design("f1", kind="adaptive", oracle=oracle, seed=4)).close()
    for _ in range(3):
        with Session.open(f) as s:
            first = s.next(30)
        with Session.open(f) as s:
            np.testing.assert_array_equal(s.next(30), first)
            ids = s.pool_file.ids[first]
            s.record(ids[:10], labels_for(ids[:10], truth))
        with Session.open(f) as s:
            s.record(ids, labels_for(ids, truth))
    with Session.open(f) as s:
        got = s.estimate()
        stored = s.draws()
    ev = bae.ActiveEvaluator(sp.pool, "f1", oracle=oracle, rng=4, mix=0.05)
    for _ in range(3):
        idx = ev.query(30)
        ev.update(idx, sp.labeler(idx))
    ref = ev.estimate(variance="martingale")  # the session's default standard error
    np.testing.assert_array_equal(stored["item"].to_numpy(), ev.draws()["item"].to_numpy())
    assert (got.value, got.stderr, got.n_draws) == (ref.value, ref.stderr, ref.n_draws)


def test_adaptive_session_stores_its_relative_floor(small, tmp_path):
    """A new adaptive session stores the resolved relative floor (the evaluator's default with the
    model-assisted estimate); a session written before the option existed replays with 0."""
    from bayes_activeeval.adaptive import RELATIVE_FLOOR

    path, _, _ = small
    f = tmp_path / "a.bae"
    Session.create(f, path, SPEC, Design("f1", kind="adaptive", seed=1)).close()
    with Session.open(f) as s:
        assert s.design.options["estimator"] == "model_assisted"
        assert s.design.options["relative_floor"] == RELATIVE_FLOOR
    f_ipw = tmp_path / "b.bae"
    opts = {"estimator": "ipw"}
    Session.create(f_ipw, path, SPEC, Design("f1", kind="adaptive", seed=1, options=opts)).close()
    with Session.open(f_ipw) as s:
        assert s.design.options["relative_floor"] == 0.0
    old = Design("f1", kind="adaptive", seed=1, options={"estimator": "model_assisted"})
    assert make_design(small[1].pool, old)._fresh().relative_floor == 0.0
    # a session recorded under the earlier default (0.01) replays with it, not with today's
    then = {"estimator": "model_assisted", "relative_floor": 0.01}
    assert RELATIVE_FLOOR != 0.01
    then_design = Design("f1", kind="adaptive", seed=1, options=then)
    assert make_design(small[1].pool, then_design)._fresh().relative_floor == 0.01


def test_two_labelers_recording_at_once(small, tmp_path):
    """Two `bae record` processes with overlapping label files, running concurrently: every label
    is stored once (BEGIN IMMEDIATE serializes the writers; an overlap is skipped)."""
    path, _, truth = small
    f = tmp_path / "s.bae"
    s = Session.create(f, path, SPEC, Design("f1", seed=12))
    ids = list(s.pool_file.ids[s.next(300)])
    s.close()
    files = []
    for k, part in enumerate((ids[:200], ids[100:])):
        out = tmp_path / f"labels{k}.csv"
        pd.DataFrame({"id": part, "label": labels_for(part, truth)}).to_csv(out, index=False)
        files.append(out)
    env = {**os.environ, DELAY_ENV: "0.01", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "bayes_activeeval.cli", "record", str(f)]
    procs = [
        subprocess.Popen(
            [*cmd, str(lf), "--batch-size", "5"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for lf in files
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    with Session.open(f) as s:
        got = s.labels()
        assert len(got) == len(ids) and got["id"].is_unique and set(got["id"]) == set(ids)
        assert s.pending_items().size == 0 and s.estimate().n_draws > 0


@pytest.mark.parametrize("kind", ["static", "adaptive"])
def test_cost_budget(small, tmp_path, kind):
    """Label costs: the budget counts cost; each stage is cut so the budget is not exceeded
    (adaptive: by less than one label's cost, as ActiveEvaluator does); reopening replays."""
    path, _, truth = small
    frame = pd.read_csv(path, dtype={"id": str})
    frame["cost"] = 1.0 + (np.arange(len(frame)) % 3)
    pool_csv = tmp_path / "costly.csv"
    frame.to_csv(pool_csv, index=False)
    spec = PoolSpec(pred="pred", prob="p", score="score", id_col="id", cost_col="cost")
    f = tmp_path / "c.bae"
    Session.create(f, pool_csv, spec, Design("f1", kind=kind, budget=100, seed=3)).close()
    for _ in range(20):
        with Session.open(f) as s:
            if label_stage(s, 25, truth) is None:
                break
    with Session.open(f) as s:
        used = s.budget_used()
        assert 100 - 3 < used <= (100 if kind == "static" else 100 + 3)
        assert np.isfinite(s.estimate().value)
