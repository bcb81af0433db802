"""Sessions that are never lost, read-only commands that never write, and clear errors: the
defects of review 4 (A, B, D, E, F, G, H, J, K, L, M) each have a test here (the labeling page's
are in ``test_serve_app.py``)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from cli_helpers import fails, labeled_pool_csv, ok

from bayes_activeeval.io import PoolSpec
from bayes_activeeval.session import Design, Session, SessionError

ROOT = Path(__file__).resolve().parents[1]
POOL_OPTS = ["--id-col", "id", "--pred-col", "pred", "--prob-col", "p"]
SPEC = PoolSpec(pred="pred", prob="p", id_col="id", text_cols=("text",))


def files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def env() -> dict[str, str]:
    """The environment of a child Python: the package this test imports comes first."""
    paths = [p for p in (os.environ.get("PYTHONPATH"), str(ROOT)) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    d = tmp_path_factory.mktemp("safety")
    return labeled_pool_csv(d / "pool.csv", seed=3, prefix="i", text="t {}")


def new_session(pool, where: Path, name: str = "s.bae", *extra) -> Path:
    s = where / name
    ok("init", pool[0], "--measure", "accuracy", "--session", s, *POOL_OPTS, "--text-col",
       "text", "--seed", 1, *extra)  # fmt: skip
    return s


def label_some(path: Path, truth, n: int = 5, annotator: str = "al") -> list[str]:
    with Session.open(path) as s:
        ids = [str(i) for i in s.pool_file.ids[s.next(n, annotator=annotator)]]
        s.record(ids, [truth[i] for i in ids], annotator=annotator)
    return ids


# -- A: --overwrite while another process has the session open ------------------------------------
HOLDER = """
import sys
from bayes_activeeval.session import Session
s = Session.open(sys.argv[1])
s.status()
print("open", flush=True)
sys.stdin.readline()                      # the test runs bae init --overwrite meanwhile
ids = [str(i) for i in s.pool_file.ids[s.next(3, annotator="web")]]
s.record(ids, ["0"] * 3, annotator="web")
s.close()
print("recorded", flush=True)
"""


def test_overwrite_is_refused_while_another_process_has_the_session_open(pool, tmp_path):
    s = new_session(pool, tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(s)], env=env(), text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    try:
        assert proc.stdout.readline().strip() == "open"
        before = files(tmp_path)
        assert "s.bae-wal" in before and "s.bae-shm" in before
        fails("init", pool[0], "--measure", "accuracy", "--session", s, *POOL_OPTS, "--budget",
              7, "--overwrite", message="open in another process")  # fmt: skip
        assert files(tmp_path) == before  # its journal files were left alone
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "recorded"
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    with Session.open(s, readonly=True) as ss:  # nothing the holder recorded was lost
        assert ss.n_labels == 3 and ss.design.budget is None


def test_overwrite_is_refused_while_this_process_has_it_open(pool, tmp_path):
    s = new_session(pool, tmp_path)
    with Session.open(s) as w:
        w.status()
        fails("init", pool[0], "--measure", "accuracy", "--session", s, *POOL_OPTS,
              "--overwrite", message="open in another process")  # fmt: skip
        ids = [str(i) for i in w.pool_file.ids[w.next(2)]]
        w.record(ids, ["0", "1"])
    with Session.open(s, readonly=True) as ss:
        assert ss.n_labels == 2


def test_overwrite_replaces_an_idle_session_in_place(pool, tmp_path):
    s = new_session(pool, tmp_path)
    os.chmod(s, 0o640)
    ino = os.stat(s).st_ino
    ok("init", pool[0], "--measure", "accuracy", "--session", s, *POOL_OPTS, "--budget", 30,
       "--overwrite")  # fmt: skip
    st = os.stat(s)
    assert stat.S_IMODE(st.st_mode) == 0o640 and st.st_ino == ino  # the file kept, not swapped
    assert files(tmp_path) == ["s.bae"]
    with Session.open(s) as ss:
        assert ss.design.budget == 30 and ss.n_labels == 0
        ss.next(3)


def test_a_writer_refuses_to_write_to_a_replaced_file(pool, tmp_path):
    s = new_session(pool, tmp_path)
    w = Session.open(s)
    try:
        ids = [str(i) for i in w.pool_file.ids[w.next(2)]]
        other = new_session(pool, tmp_path, "other.bae")
        os.replace(other, s)  # what a rename-based overwrite did
        with pytest.raises(SessionError, match="replaced"):
            w.record(ids, ["0", "1"])
    finally:
        w.close()
    with Session.open(s, readonly=True) as ss:
        assert ss.n_labels == 0


# -- B: --overwrite replaces only a bae session -----------------------------------------------------
def test_overwrite_never_replaces_a_labels_csv_or_another_database(pool, tmp_path):
    labels = tmp_path / "labels.csv"
    labels.write_text("id,label\ni1,0\ni2,1\n")
    fails("init", pool[0], "--measure", "accuracy", "--session", labels, *POOL_OPTS,
          "--overwrite", message="holds 2 labels")  # fmt: skip
    assert labels.read_text() == "id,label\ni1,0\ni2,1\n"
    import sqlite3

    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    before = db.read_bytes()
    fails("init", pool[0], "--measure", "accuracy", "--session", db, *POOL_OPTS, "--overwrite",
          message="not a bae session")  # fmt: skip
    assert db.read_bytes() == before
    notes = tmp_path / "notes.txt"  # no database, no labels: the output rule lets it go
    notes.write_text("scratch\n")
    ok("init", pool[0], "--measure", "accuracy", "--session", notes, *POOL_OPTS, "--overwrite")
    with Session.open(notes, readonly=True) as ss:
        assert ss.n_labels == 0


# -- D, L: read-only opens stay fresh and create no file --------------------------------------------
WRITER = """
import sys
from bayes_activeeval.session import Session
with Session.open(sys.argv[1]) as s:
    for _ in range(int(sys.argv[2])):
        ids = [str(i) for i in s.pool_file.ids[s.next(10, annotator="b")]]
        s.record(ids, ["0"] * len(ids), annotator="b")
"""


def test_readonly_session_sees_later_writes_and_creates_no_file(pool, tmp_path):
    s = new_session(pool, tmp_path)
    label_some(s, pool[1], 5)
    assert files(tmp_path) == ["s.bae"]
    ro = Session.open(s, readonly=True)
    try:
        assert ro.n_labels == 5
        assert files(tmp_path) == ["s.bae"]  # no -wal, no -shm
        subprocess.run([sys.executable, "-c", WRITER, str(s), "12"], env=env(), check=True)
        with Session.open(s, readonly=True) as fresh:
            n, stages = fresh.n_labels, fresh.n_stages
        assert n > 100 and stages == 13
        assert ro.n_labels == n and ro.n_stages == stages  # not the state it was opened in
        st = ro.status()
        assert st["labels"] == n and st["stages_completed"] == stages
        assert ro.store.rows("PRAGMA integrity_check") == [("ok",)]
    finally:
        ro.close()
    assert files(tmp_path) == ["s.bae"]


KILLED = """
import os, sys
from bayes_activeeval.session import Session
s = Session.open(sys.argv[1])
ids = [str(i) for i in s.pool_file.ids[s.next(8, annotator="k")]]
s.record(ids, ["0"] * len(ids), annotator="k")
os._exit(0)                              # killed: its -wal stays behind
"""


def test_status_reads_a_left_behind_wal_without_creating_shm(pool, tmp_path):
    s = new_session(pool, tmp_path)
    subprocess.run([sys.executable, "-c", KILLED, str(s)], env=env(), check=True)
    (tmp_path / "s.bae-shm").unlink(missing_ok=True)
    assert files(tmp_path) == ["s.bae", "s.bae-wal"]
    before = {p: Path(tmp_path / p).read_bytes() for p in files(tmp_path)}
    assert json.loads(ok("status", s, "--json").stdout)["labels"] == 8  # the -wal's labels count
    assert files(tmp_path) == ["s.bae", "s.bae-wal"]
    assert {p: Path(tmp_path / p).read_bytes() for p in files(tmp_path)} == before


# -- E: ranking ids are text -----------------------------------------------------------------------
def test_ranking_ids_are_read_as_text(tmp_path):
    from bayes_activeeval import ranking

    data = ranking.make_ranking_pool(8, min_docs=3, max_docs=4, changed=0.5, rng=2)
    frame = data.frame.drop(columns=["grade"])
    codes = {q: f"{k + 1:03d}" for k, q in enumerate(dict.fromkeys(frame["qid"]))}
    frame["qid"] = frame["qid"].map(codes)
    frame.loc[frame["qid"] == "002", "qid"] = "NA"
    frame.loc[frame["qid"] == "003", "qid"] = "1"  # distinct from 001 as text
    frame["doc"] = [f"0{j}" for j in frame.groupby("qid", sort=False).cumcount()]
    pool_csv = tmp_path / "rk.csv"
    frame.to_csv(pool_csv, index=False)
    sess = tmp_path / "r.bae"
    ok("init", pool_csv, "--task", "ranking", "--rank", "a=rank_a", "--rank", "b=rank_b",
       "--relevance-cols", "p0,p1,p2,p3,p4", "--measure", "dcg", "--budget", 100,
       "--session", sess)  # fmt: skip
    fails(
        "init",
        pool_csv,
        "--task",
        "ranking",
        "--rank",
        "a=rank_a",
        "--rank",
        "b=rank_b",
        "--relevance-cols",
        "p0,p1,p2,p3,p4",
        "--measure",
        "dcg",
        "--budget",
        100,
        "--seed",
        -1,
        "--session",
        tmp_path / "neg.bae",
        message="--seed",
    )  # G, fmt: skip
    from bayes_activeeval.ranking_session import RankingSession

    with RankingSession.open(str(sess), readonly=True) as rs:
        qids = [str(q) for q in rs.pool.query_ids]
        assert {"001", "NA", "1"} <= set(qids) and len(qids) == 8
        assert all(str(d).startswith("0") for docs in rs.pool.doc_ids for d in docs)
    batch = tmp_path / "g.csv"
    ok("next", sess, "--n", 8, "--out", batch)
    g = pd.read_csv(batch, dtype=str, keep_default_na=False)
    assert set(g["qid"]) <= set(qids) and all(d.startswith("0") for d in g["doc"])
    g["grade"] = "1"
    g[["qid", "doc", "grade"]].to_csv(tmp_path / "grades.csv", index=False)
    res = ok("record", sess, tmp_path / "grades.csv")
    assert f"recorded {g['qid'].nunique()} queries" in res.stdout

    def no_constants(c):
        raise AssertionError(f"{c} is not JSON")

    st = json.loads(ok("status", sess, "--json").stdout, parse_constant=no_constants)  # H
    assert st["agreement"]["agree"] is None


# -- F: a bad --text-col writes nothing -------------------------------------------------------------
def test_next_with_an_unknown_text_column_writes_nothing(pool, tmp_path):
    s = new_session(pool, tmp_path)
    before = s.read_bytes()
    fails("next", s, "--n", 5, "--text-col", "nope", message="'nope' (--text-col)")
    assert s.read_bytes() == before
    with Session.open(s, readonly=True) as ss:
        assert ss.n_stages == 0 and ss.leases().empty


# -- G: budget and seed ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("option", "value", "message"),
    [("--budget", "inf", "--budget"), ("--budget", "nan", "--budget"), ("--seed", "-1", "--seed")],
)
def test_init_refuses_a_budget_or_seed_the_session_cannot_use(pool, tmp_path, option, value,
                                                              message):  # fmt: skip
    s = tmp_path / "x.bae"
    line = fails("init", pool[0], "--measure", "accuracy", "--session", s, *POOL_OPTS, option,
                 value, message=message)  # fmt: skip
    assert value in line
    assert not s.exists()
    with pytest.raises(ValueError, match="budget"):
        Design("f1", budget=float("inf"))
    with pytest.raises(ValueError, match="seed"):
        Design("f1", seed=-3)


# -- H: status --json is JSON ----------------------------------------------------------------------
def test_status_json_is_strict_json(pool, tmp_path):
    s = new_session(pool, tmp_path)
    label_some(s, pool[1], 4)

    def no_constants(c):
        raise AssertionError(f"{c} is not JSON")

    st = json.loads(ok("status", s, "--json").stdout, parse_constant=no_constants)
    assert st["agreement"]["agree"] is None and st["labels"] == 4


# -- J: the report says how the session estimated ---------------------------------------------------
def test_report_describes_the_estimator_the_session_used(pool, tmp_path):
    from bayes_activeeval.report import render_html

    _, truth = pool
    a = tmp_path / "a.bae"
    ok("init", pool[0], "--measure", "accuracy", "--session", a, *POOL_OPTS, "--design",
       "adaptive", "--oracle", "model", "--seed", 1)  # fmt: skip
    for _ in range(2):
        label_some(a, truth, 10)
    with Session.open(a, readonly=True) as s:
        assert s.design.options["estimator"] == "model_assisted"
        page = render_html(s)
    assert "Self-normalized importance-weighted estimate, delta-method" not in page
    assert "Model-assisted (difference) estimate" in page and "martingale standard error" in page
    st = new_session(pool, tmp_path, "st.bae")
    label_some(st, truth, 10)
    with Session.open(st, readonly=True) as s:
        page = render_html(s)
    assert "Self-normalized importance-weighted estimate" in page and "delta-method" in page


# -- K: output files get the usual permissions ------------------------------------------------------
def test_batch_and_report_files_get_the_usual_permissions(pool, tmp_path):
    old = os.umask(0o022)
    try:
        s = new_session(pool, tmp_path)
        ok("next", s, "--n", 3, "--out", tmp_path / "b.csv")
        label_some(s, pool[1], 3)
        ok("report", s, "--out", tmp_path / "r.html")
        for name in ("b.csv", "r.html"):
            assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o644, name
        os.chmod(tmp_path / "r.html", 0o640)  # a replaced file keeps its mode
        ok("report", s, "--out", tmp_path / "r.html", "--overwrite")
        assert stat.S_IMODE(os.stat(tmp_path / "r.html").st_mode) == 0o640
    finally:
        os.umask(old)


# -- M: errors are one line naming the option and the value ----------------------------------------
def test_errors_name_the_option_and_the_value(pool, tmp_path):
    s = new_session(pool, tmp_path)
    fails("record", s, tmp_path, message="is a directory")
    fails("init", tmp_path, "--measure", "f1", "--session", tmp_path / "x.bae", "--pred-col",
          "pred", message="is a directory")  # fmt: skip
    fails("next", s, "--lease", "1e12", message="--lease")
    line = fails("next", s, "--lease", "-1", message="--lease")
    assert "got -1" in line and "-60" not in line
    line = fails("init", pool[0], "--measure", "accuracy", "--session", tmp_path / "nodir/x.bae",
                 *POOL_OPTS, message="does not exist")  # fmt: skip
    assert "nodir" in line and ".tmp-" not in line
    assert not (tmp_path / "nodir").exists()
    frame = pd.read_csv(pool[0]).head(50)
    frame["pred"] = "neg"  # one text class: the classes cannot be inferred
    frame.to_csv(tmp_path / "txt.csv", index=False)
    fails("init", tmp_path / "txt.csv", "--measure", "f1", "--session", tmp_path / "t.bae",
          "--pred-col", "pred", "--prob-col", "p", message="--classes")  # fmt: skip
    fails("init", pool[0], "--measure", "f1", "--session", tmp_path / "t.bae", "--pred-col",
          "pred", message="--prob-col")  # fmt: skip
    with Session.open(s) as ss, pytest.raises(ValueError, match="lease"):
        ss.next(3, lease=1e13)


def test_design_refuses_clt_variance_without_the_ipw_estimator():
    # the model-assisted estimate (the adaptive default) has only the martingale variance: the
    # option used to be ignored when the session was made and to fail at every estimate after
    from bayes_activeeval.session.designs import Design

    with pytest.raises(ValueError, match="variance='clt' needs estimator='ipw'"):
        Design("f1", kind="adaptive", options={"variance": "clt"})
    Design("f1", kind="adaptive", options={"variance": "clt", "estimator": "ipw"})
    Design("f1", kind="adaptive", options={"variance": "martingale"})
