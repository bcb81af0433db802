"""Labeling as a team: annotators, leases, second annotations, corrections, agreement, and the
migration of format-1 session files (no recorded label is ever lost)."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayes_activeeval as bae
from bayes_activeeval.datasets import make_classification_pool
from bayes_activeeval.io import PoolSpec
from bayes_activeeval.session import Design, Session, SessionError
from bayes_activeeval.session.annotations import cohen_kappa

SPEC = PoolSpec(pred="pred", prob="p", score="score", id_col="id", text_cols=("text",))

V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE stages (stage INTEGER PRIMARY KEY, n_requested INTEGER NOT NULL, rng TEXT NOT NULL,
    created TEXT NOT NULL);
CREATE TABLE draws (seq INTEGER PRIMARY KEY, stage INTEGER NOT NULL REFERENCES stages(stage),
    item INTEGER NOT NULL, item_id TEXT NOT NULL, q REAL NOT NULL, weight REAL NOT NULL);
CREATE INDEX draws_stage ON draws(stage);
CREATE INDEX draws_item ON draws(item);
CREATE TABLE labels (seq INTEGER PRIMARY KEY, item INTEGER NOT NULL UNIQUE,
    item_id TEXT NOT NULL UNIQUE, label TEXT NOT NULL, stage INTEGER, time TEXT NOT NULL,
    source TEXT NOT NULL);
CREATE TABLE snapshots (stage INTEGER PRIMARY KEY, state BLOB NOT NULL);
"""


@pytest.fixture(scope="module")
def pool_csv(tmp_path_factory):
    d = tmp_path_factory.mktemp("team")
    sp = make_classification_pool(5_000, 0.05, separation=3.0, rng=21)
    v = sp.pool.view()
    ids = [f"it{i}" for i in range(sp.pool.n_items)]
    pd.DataFrame(
        {
            "id": ids,
            "pred": v.pred,
            "p": v.positive_prob(),
            "score": sp.pool.scores["model"],
            "text": [f"text {i}" for i in range(sp.pool.n_items)],
        }
    ).to_csv(d / "pool.csv", index=False)
    truth = dict(zip(ids, sp.labels.tolist(), strict=True))
    return d / "pool.csv", sp, truth


def digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def make_v1(src: Path, dst: Path) -> None:
    """A format-1 session file with the contents of a format-2 one (one label per item)."""
    con = sqlite3.connect(dst)
    con.executescript(V1_SCHEMA)
    con.execute("ATTACH DATABASE ? AS src", (str(src),))
    con.execute("INSERT INTO meta SELECT key, value FROM src.meta")
    con.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    con.execute("INSERT INTO stages SELECT * FROM src.stages")
    con.execute("INSERT INTO draws SELECT * FROM src.draws")
    con.execute("INSERT INTO snapshots SELECT * FROM src.snapshots")
    con.execute(
        "INSERT INTO labels(item, item_id, label, stage, time, source) "
        "SELECT item, item_id, label, stage, time, source FROM src.labels ORDER BY seq"
    )
    con.commit()
    con.execute("DETACH DATABASE src")
    con.execute("PRAGMA journal_mode=WAL")
    con.close()


def label_all(s: Session, truth, annotator="alice", n=30):
    idx = s.next(n, annotator=annotator)
    ids = s.pool_file.ids[idx]
    s.record(ids, [truth[i] for i in ids], annotator=annotator)
    return list(ids)


@pytest.mark.parametrize("kind", ["static", "adaptive"])
def test_format_1_session_is_read_as_is_and_migrated_on_first_write(pool_csv, tmp_path, kind):
    path, _, truth = pool_csv
    v2 = tmp_path / "v2.bae"
    with Session.create(v2, path, SPEC, Design("f1", kind=kind, seed=3)) as s:
        for _ in range(2):
            label_all(s, truth)
        s.next(10)  # a pending stage, partly labeled
        ids = s.pool_file.ids[s.pending_items()[:4]]
        s.record(ids, [truth[i] for i in ids])
        ref_labels = s.labels()[["item", "id", "label", "stage", "time", "source"]]
        ref_est = s.estimate()
    v1 = tmp_path / "v1.bae"
    make_v1(v2, v1)
    before = digest(v1)
    with Session.open(v1, readonly=True) as s:  # read as it is: not a byte changes
        pd.testing.assert_frame_equal(s.labels()[ref_labels.columns], ref_labels)
        assert s.estimate().value == ref_est.value
        assert s.status()["labels"] == len(ref_labels)
    assert digest(v1) == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "v1.bae", "v2.bae"]  # fmt: skip
    with Session.open(v1) as s:  # a writable open migrates, keeping every label
        pd.testing.assert_frame_equal(s.labels()[ref_labels.columns], ref_labels)
        assert set(s.annotations()["annotator"]) == {"(before annotators)"}
        assert s.estimate().value == ref_est.value
        label_all(s, truth, "bob")  # and the session goes on
    con = sqlite3.connect(v1)
    assert con.execute("SELECT COUNT(*) FROM labels_v1").fetchone()[0] == len(ref_labels)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "2"
    con.close()


def test_leases_keep_annotators_apart_until_labeled_or_expired(pool_csv, tmp_path):
    path, _, truth = pool_csv
    f = tmp_path / "s.bae"
    Session.create(f, path, SPEC, Design("accuracy", seed=1)).close()
    with Session.open(f) as a, Session.open(f) as b:
        first = a.next(10, annotator="alice", stage_size=30)
        assert first.size == 10
        np.testing.assert_array_equal(a.next(10, annotator="alice"), first)  # same when asked again
        other = b.next(10, annotator="bob")
        assert other.size == 10 and not set(first) & set(other)
        third = b.next(50, annotator="carol", lease=1.0)  # the rest of the stage (10)
        assert third.size == 10 and not set(third) & (set(first) | set(other))
        # nothing free in the stage: a static design draws a new stage for dave
        dave = a.next(5, annotator="dave")
        assert not set(dave) & (set(first) | set(other) | set(third))
        time.sleep(1.1)  # carol's leases expire: her items go to erin
        erin = b.next(50, annotator="erin")
        assert set(third) <= set(erin)
        # labels recorded by alice are never handed out again
        ids = a.pool_file.ids[first]
        a.record(ids, [truth[i] for i in ids], annotator="alice")
        assert not set(first) & set(a.pending_items())


def test_adaptive_design_waits_for_its_pending_stage(pool_csv, tmp_path):
    path, _, _ = pool_csv
    with Session.create(tmp_path / "a.bae", path, SPEC, Design("f1", kind="adaptive")) as s:
        s.next(10, annotator="alice")
        with pytest.raises(SessionError, match=r"leased to another annotator .*alice until"):
            s.next(10, annotator="bob")


def test_second_annotation_is_kept_and_agreement_is_reported(pool_csv, tmp_path):
    from sklearn.metrics import cohen_kappa_score

    path, _, truth = pool_csv
    with Session.create(tmp_path / "s.bae", path, SPEC, Design("accuracy", seed=2)) as s:
        ids = label_all(s, truth, "alice", n=40)
        est = s.estimate().value
        bob = [truth[i] if k % 4 else 1 - truth[i] for k, i in enumerate(ids)]  # 10 disagree
        res = s.record(ids, bob, annotator="bob")  # stored, not refused
        assert res.recorded == 40
        assert s.n_labels == 40 and s.estimate().value == est  # the first label counts
        assert len(s.annotations()) == 80
        ag = s.agreement()
        assert ag["items"] == 40 and ag["pairs"] == 40 and ag["agree"] == pytest.approx(0.75)
        k, n = ag["kappa"][("alice", "bob")]
        ref = cohen_kappa_score([str(truth[i]) for i in ids], [str(y) for y in bob])
        assert n == 40 and k == pytest.approx(ref, abs=1e-12)
        st = s.status()
        assert st["agreement"]["items"] == 40 and st["annotators"] == {"alice": 40, "bob": 40}
        # the same annotator again with the same labels: skipped; a different one: refused
        assert s.record(ids, bob, annotator="bob").skipped == 40
        with pytest.raises(ValueError, match=r"already has your label .*bae relabel"):
            s.record(ids[:1], [1 - bob[0]], annotator="bob")


def test_cohen_kappa_edge_cases():
    assert cohen_kappa([("a", "a"), ("b", "b")]) == 1.0
    assert np.isnan(cohen_kappa([("a", "a"), ("a", "a")]))


@pytest.mark.parametrize("kind", ["static", "adaptive"])
def test_relabel_supersedes_and_the_estimate_follows(pool_csv, tmp_path, kind):
    """A correction is a new row (never an update or a deletion); the estimate and an adaptive
    evaluator's state (oracle model, proposal) follow the corrected label, across processes."""
    path, sp, truth = pool_csv
    f = tmp_path / "s.bae"
    opts = {"estimator": "ipw"} if kind == "adaptive" else {}  # the estimate is bae.estimate's
    Session.create(f, path, SPEC, Design("f1", kind=kind, oracle="dirichlet-tree" if kind ==
                   "adaptive" else "model", seed=5, options=opts)).close()  # fmt: skip
    n_labeled = 0  # a static stage may redraw an item labeled before: it costs no label
    for _ in range(3):
        with Session.open(f) as s:
            n_labeled += len(label_all(s, truth, "alice", n=25))
    with Session.open(f) as s:
        target = s.labels()["id"].iloc[3]
        wrong = 1 - truth[target]
        with pytest.raises(ValueError, match="needs a reason"):
            s.relabel(target, wrong, reason=" ")
        assert s.relabel(target, wrong, reason="second look", annotator="carol")
        assert not s.relabel(target, wrong, reason="again", annotator="carol")  # no-op
    with Session.open(f) as s:
        a = s.annotations()
        assert len(a) == n_labeled + 1 and a["kind"].tolist().count("correction") == 1
        row = a.iloc[-1]
        assert (row["annotator"], row["reason"], row["label"]) == ("carol", "second look",
                                                                   str(wrong))  # fmt: skip
        assert s.labels().set_index("id").loc[target, "label"] == str(wrong)
        draws, labels = s.labeled_draws()
        corrected = sp.labels[draws.indices].copy()
        corrected[draws.indices == s.pool_file.index_of([target])[0]] = wrong
        np.testing.assert_array_equal(labels, corrected)
        ref = bae.estimate(sp.pool, "f1", draws, corrected)
        assert s.estimate().value == pytest.approx(ref.value, rel=1e-12)
        if kind == "adaptive":
            ev = s._design.evaluator(s, 3)
            it = s.pool_file.index_of([target])[0]
            assert ev.get_state()["known"]["y"][list(ev.get_state()["known"]["idx"]).index(it)] \
                == wrong  # fmt: skip
            # the same as an evaluator fed the stored draws with the corrected labels
            from bayes_activeeval.session.designs import with_pending

            ref_ev = bae.ActiveEvaluator(
                sp.pool, "f1", oracle="dirichlet-tree", rng=5, mix=0.05, estimator="ipw"
            )
            lab = s.label_map()
            for st in range(3):
                ref_ev.query(1)
                ref_ev = with_pending(ref_ev, s.stage_draws(st), sp.pool)
                new = [int(i) for i in dict.fromkeys(s.stage_draws(st).indices.tolist())
                       if not ref_ev.known[i]]  # fmt: skip
                ref_ev.update(np.asarray(new), [int(lab[i]) for i in new])
            np.testing.assert_allclose(ev.proposal.q, ref_ev.proposal.q, rtol=1e-12)
        label_all(s, truth, "alice", n=25)  # the session goes on after the correction
        assert np.isfinite(s.estimate().value)
    con = sqlite3.connect(f)
    with pytest.raises(sqlite3.DatabaseError, match="never"):
        con.execute("DELETE FROM annotations")
    with pytest.raises(sqlite3.DatabaseError, match="never"):
        con.execute("UPDATE annotations SET label='0'")
    con.close()


def test_record_with_holder_accepts_only_leased_items(pool_csv, tmp_path):
    path, _, truth = pool_csv
    with Session.create(tmp_path / "s.bae", path, SPEC, Design("accuracy", seed=4)) as s:
        mine = s.next(5, annotator="web", holder="browser-1", stage_size=20)
        other = s.next(5, annotator="web", holder="browser-2")
        i = s.pool_file.ids[other[0]]
        with pytest.raises(ValueError, match="not leased to you"):
            s.record([i], [truth[i]], annotator="web", holder="browser-1")
        j = s.pool_file.ids[mine[0]]
        assert s.record([j], [truth[j]], annotator="web", holder="browser-1").recorded == 1
        assert s.annotations()["batch"].iloc[0].startswith("web:")


def test_released_items_go_to_the_next_who_asks(pool_csv, tmp_path):
    """`release` ends a holder's leases at once (its latest lease row decides, not the first)."""
    path, _, _ = pool_csv
    with Session.create(tmp_path / "s.bae", path, SPEC, Design("accuracy", seed=2)) as s:
        mine = s.next(5, annotator="web", holder="browser-1", stage_size=10)
        s.release("browser-1")
        assert s.leases().empty
        np.testing.assert_array_equal(s.next(5, annotator="bob"), mine)


def test_a_second_release_leaves_the_next_holders_leases(pool_csv, tmp_path):
    """A holder that releases twice (a browser's second "release") ends nothing the second
    time: its old lease rows are superseded by the next holder's, whose leases stay (before,
    the second release copied the old rows, which had not expired, over bob's leases)."""
    path, _, truth = pool_csv
    with Session.create(tmp_path / "s.bae", path, SPEC, Design("accuracy", seed=2)) as s:
        mine = s.next(5, annotator="web", holder="browser-A", stage_size=10)
        s.release("browser-A")
        theirs = s.next(5, annotator="web", holder="browser-B")
        np.testing.assert_array_equal(theirs, mine)
        s.release("browser-A")
        assert sorted(s.leases()["item"].tolist()) == sorted(theirs.tolist())
        i = s.pool_file.ids[theirs[0]]
        assert s.record([i], [truth[i]], annotator="web", holder="browser-B").recorded == 1


def test_own_undo_never_reverts_another_annotators_correction(pool_csv, tmp_path):
    # the labeling page's undo (relabel own=True) superseded the head of the label's chain, so
    # it silently reverted a reviewer's later correction of the same label
    path, _, truth = pool_csv
    f = tmp_path / "s.bae"
    Session.create(f, path, SPEC, Design("f1", kind="static", seed=2)).close()
    with Session.open(f) as s:
        label_all(s, truth, "alice", n=10)
        target = s.labels()["id"].iloc[0]
        right = str(truth[target])
        wrong = 1 - truth[target]
        assert s.relabel(target, wrong, reason="review", annotator="bob")
        with pytest.raises(SessionError, match="bob corrected alice's label"):
            s.relabel(target, truth[target], reason="undo", annotator="alice", own=True)
        assert s.labels().set_index("id").loc[target, "label"] == str(wrong)  # bob's stays
        other = s.labels()["id"].iloc[1]  # an undo of a label nobody else touched still works
        assert s.relabel(other, 1 - truth[other], reason="undo", annotator="alice", own=True)
        assert s.relabel(target, right, reason="overrule", annotator="alice")  # plain correction
