"""The ``bae`` command for teams, and the defects of issue 14: every one has a test here."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
from pathlib import Path

import pandas as pd
import pytest
from cli_helpers import fails, ok

from bayes_activeeval.datasets import make_classification_pool
from bayes_activeeval.session import Session

POOL_OPTS = ["--id-col", "id", "--pred-col", "pred", "--prob-col", "p"]


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def tree(d: Path) -> dict[str, str]:
    return {p.name: sha(p) for p in sorted(d.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """800 items; ids include NA, NULL, None, nan and a spreadsheet formula; a text column with
    markup and a formula; labels by id."""
    d = tmp_path_factory.mktemp("clipool")
    sp = make_classification_pool(800, 0.2, separation=3.0, rng=8)
    v = sp.pool.view()
    ids = [f"x{i}" for i in range(800)]
    ids[:6] = ["NA", "NULL", "None", "nan", "=cmd|' /C calc'!A0", "-1"]
    text = [f"<b>item</b> {i} & co" for i in range(800)]
    text[0] = "+SUM(A1)"
    frame = pd.DataFrame({"id": ids, "pred": v.pred, "p": v.positive_prob(), "text": text})
    path = d / "pool.csv"
    frame.to_csv(path, index=False)
    truth = dict(zip(ids, sp.labels.tolist(), strict=True))
    return path, truth


def new_session(pool, where: Path, name="s.bae", *extra) -> Path:
    path, _ = pool
    s = where / name
    ok("init", path, "--measure", "accuracy", "--session", s, *POOL_OPTS, "--text-col", "text",
       "--seed", 1, *extra)  # fmt: skip
    return s


def label_file(batch: Path, truth, out: Path, flip=()) -> Path:
    from bayes_activeeval.io import unescape_cell

    b = pd.read_csv(batch, dtype=str, keep_default_na=False)
    ids = [unescape_cell(i) for i in b["id"]]
    ys = [1 - truth[i] if i in flip else truth[i] for i in ids]
    pd.DataFrame({"id": b["id"], "label": ys}).to_csv(out, index=False)
    return out


# -- 1. annotators and leases ---------------------------------------------------------------------
def test_two_annotators_get_different_items_and_disagreements_are_kept(pool, tmp_path):
    _, truth = pool
    s = new_session(pool, tmp_path)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    ok("next", s, "--n", 10, "--stage-size", 30, "--annotator", "alice", "--out", a)
    ok("next", s, "--n", 10, "--annotator", "bob", "--out", b)
    ia = set(pd.read_csv(a, dtype=str, keep_default_na=False)["id"])
    ib = set(pd.read_csv(b, dtype=str, keep_default_na=False)["id"])
    assert len(ia) == len(ib) == 10 and not ia & ib
    # asking again: the same items
    a2 = tmp_path / "a2.csv"
    ok("next", s, "--n", 10, "--annotator", "alice", "--out", a2)
    assert set(pd.read_csv(a2, dtype=str, keep_default_na=False)["id"]) == ia
    ok("record", s, label_file(a, truth, tmp_path / "la.csv"), "--annotator", "alice")
    # bob labels alice's items too, disagreeing on one: kept, not refused
    one = sorted(ia)[0]
    res = ok("record", s, label_file(a, truth, tmp_path / "lb.csv", flip={one}), "--annotator",
             "bob")  # fmt: skip
    assert "recorded 10 labels" in res.stdout
    st = json.loads(ok("status", s, "--json").stdout)
    assert st["labels"] == 10 and st["annotators"] == {"alice": 10, "bob": 10}
    assert st["agreement"]["items"] == 10 and st["agreement"]["agree"] == pytest.approx(0.9)
    text = ok("status", s).stdout
    assert "agreement: 10 items labeled by two or more annotators, 90.0% of 10 pairs" in text
    assert "Cohen's kappa alice–bob" in text


def test_label_skips_items_others_recorded_meanwhile(pool, tmp_path, monkeypatch):
    """`bae label` used to ask about items another annotator recorded meanwhile and then stop at
    the first disagreement ("already has label … (row 1)")."""
    import bayes_activeeval.cli as cli

    _, truth = pool
    s = new_session(pool, tmp_path)
    ok("next", s, "--n", 4, "--annotator", "alice")
    with Session.open(s) as ss:
        items = [str(i) for i in ss.pool_file.ids[ss.next(4, annotator="alice")]]
    real_ask = cli._ask
    calls = []

    def ask(sess, item_id, choices):
        if not calls:  # meanwhile, bob records the other three items (one against alice)
            with Session.open(s) as other:
                rest = items[1:]
                other.record(rest, [1 - truth[rest[0]], *[truth[i] for i in rest[1:]]],
                             annotator="bob")  # fmt: skip
        calls.append(item_id)
        return truth[item_id]

    monkeypatch.setattr(cli, "_ask", ask)
    res = ok("label", s, "--n", 4, "--annotator", "alice", "--max", 4)
    monkeypatch.setattr(cli, "_ask", real_ask)
    assert calls[0] == items[0] and not set(calls) & set(items[1:])
    assert "3 items were labeled by someone else meanwhile" in res.stdout
    with Session.open(s, readonly=True) as ss:
        assert ss.n_labels == 7  # alice's 4 and bob's 3


def test_relabel_is_audited_and_the_estimate_follows(pool, tmp_path):
    _, truth = pool
    s = new_session(pool, tmp_path)
    batch = tmp_path / "b.csv"
    ok("next", s, "--n", 20, "--out", batch)
    ok("record", s, label_file(batch, truth, tmp_path / "l.csv"))
    before = json.loads(ok("status", s, "--json").stdout)["estimates"][0]["estimate"]
    first = pd.read_csv(batch, dtype=str, keep_default_na=False)["id"].iloc[6]
    fails("relabel", s, first, 1 - truth[first], message="Missing option '--reason'")
    res = ok("relabel", s, first, 1 - truth[first], "--reason", "typo", "--annotator", "carol")
    assert "the old label is kept" in res.stdout
    after = json.loads(ok("status", s, "--json").stdout)
    assert after["corrections"] == 1 and after["estimates"][0]["estimate"] != before
    # the same labels recorded by one person give the same estimate
    ref = new_session(pool, tmp_path, "ref.bae")
    ok("next", ref, "--n", 20, "--out", tmp_path / "rb.csv")
    ok("record", ref, label_file(tmp_path / "rb.csv", truth, tmp_path / "rl.csv", flip={first}))
    want = json.loads(ok("status", ref, "--json").stdout)["estimates"][0]["estimate"]
    assert after["estimates"][0]["estimate"] == want
    with Session.open(s, readonly=True) as ss:
        a = ss.annotations()
        assert len(a) == 21 and a.iloc[-1]["reason"] == "typo"


# -- 4. nothing overwritten, nothing written by a read --------------------------------------------
def test_next_out_never_replaces_a_file_without_overwrite_nor_one_holding_labels(pool, tmp_path):
    _, truth = pool
    s = new_session(pool, tmp_path)
    batch = tmp_path / "batch.csv"
    ok("next", s, "--n", 5, "--out", batch)
    filled = label_file(batch, truth, batch)  # the annotator fills in the batch file itself
    before = sha(filled)
    fails("next", s, "--n", 5, "--out", batch, message="holds 5 labels")
    fails("next", s, "--n", 5, "--out", batch, "--overwrite", message="never overwritten")
    assert sha(batch) == before
    other = tmp_path / "other.txt"
    other.write_text("notes\n")
    fails("next", s, "--out", other, message="exists; pass --overwrite")
    assert other.read_text() == "notes\n"
    ok("next", s, "--out", other, "--overwrite")
    fails("next", s, "--out", s, "--overwrite", message="is the session file")
    fails("next", s, "--out", pool[0], "--overwrite", message="is the pool file")
    fails("next", s, "--out", tmp_path / "missing_dir" / "x.csv", message="does not exist")
    fails("report", s, "--out", tmp_path / "missing_dir" / "x.html", message="does not exist")
    fails("report", s, "--out", batch, "--overwrite", message="never overwritten")
    fails("report", s, "--out", s, "--overwrite", message="is the session file")


def test_init_never_replaces_the_pool_nor_a_session_holding_labels(pool, tmp_path):
    path, truth = pool
    copy = tmp_path / "pool.csv"
    copy.write_bytes(path.read_bytes())
    before = sha(copy)
    fails("init", copy, "--measure", "accuracy", "--session", copy, "--overwrite", *POOL_OPTS,
          message="is the pool file")  # fmt: skip
    assert sha(copy) == before
    s = new_session(pool, tmp_path)
    ok("next", s, "--n", 3, "--out", tmp_path / "b.csv")
    ok("record", s, label_file(tmp_path / "b.csv", truth, tmp_path / "l.csv"))
    kept = sha(s)
    fails("init", path, "--measure", "accuracy", "--session", s, "--overwrite", *POOL_OPTS,
          message="holds 3 recorded labels")  # fmt: skip
    assert sha(s) == kept


@pytest.mark.parametrize("name", ["r#1.bae", "a%20b?.bae", "sp ace&;'\"#%?.bae", "ünï#?%.bae"])
def test_session_paths_with_any_character(pool, tmp_path, name):
    _, truth = pool
    d = tmp_path / "d#%?"
    d.mkdir()
    s = new_session(pool, d, name)
    ok("next", s, "--n", 5, "--out", d / "b.csv")
    ok("record", s, label_file(d / "b.csv", truth, d / "l.csv"))
    assert json.loads(ok("status", s, "--json").stdout)["labels"] == 5
    assert sorted(p.name for p in d.iterdir()) == sorted([name, "b.csv", "l.csv"])


def test_read_commands_never_write(pool, tmp_path):
    _, truth = pool
    d = tmp_path / "ro"
    d.mkdir()
    s = new_session(pool, d)
    ok("next", s, "--n", 30, "--out", tmp_path / "b.csv")
    ok("record", s, label_file(tmp_path / "b.csv", truth, tmp_path / "l.csv"))
    empty = d / "empty.bae"
    empty.write_bytes(b"")
    foreign = d / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    before = tree(d)
    d.chmod(stat.S_IRUSR | stat.S_IXUSR)  # read-only storage (not enforced for root)
    for f in (d / "s.bae", empty, foreign):
        f.chmod(stat.S_IRUSR)
    try:
        st = json.loads(ok("status", s, "--json").stdout)
        assert st["labels"] == 30
        ok("status", s)
        ok("report", s, "--out", tmp_path / "r.html")
        fails("status", empty, message="not a bae session")
        fails("status", foreign, message="not a bae session")
        fails("next", foreign, message="not a bae session")
        fails("compare", s, message="evaluates one model")
    finally:
        d.chmod(0o755)
    assert tree(d) == before  # not a byte changed, no file created
    con = sqlite3.connect(f"file:{foreign}?mode=ro", uri=True)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    con.close()


def test_read_commands_see_what_a_running_writer_committed(pool, tmp_path):
    """A writer (bae serve) holds the session open: status reads its WAL, writing nothing."""
    _, truth = pool
    s = new_session(pool, tmp_path)
    w = Session.open(s)
    try:
        ids = w.pool_file.ids[w.next(5)]
        w.record(ids, [truth[i] for i in ids])
        files = tree(tmp_path)
        assert json.loads(ok("status", s, "--json").stdout)["labels"] == 5
        assert tree(tmp_path).keys() == files.keys()
    finally:
        w.close()


# -- 4. escaping ----------------------------------------------------------------------------------
def test_batch_csv_cells_are_escaped_and_read_back(tmp_path):
    ids = ["=cmd|' /C calc'!A0", "+1", "-2", "@SUM(A1)", "'=quoted", "plain", "Tab"]
    frame = pd.DataFrame(
        {
            "id": ids,
            "pred": [0, 1] * 3 + [0],
            "p": [0.2, 0.8] * 3 + [0.3],
            "text": ["=HYPERLINK(1)", "ok", "+x", "-y", "@z", "w", "v"],
        }
    )
    frame.to_csv(tmp_path / "pool.csv", index=False)
    s = tmp_path / "s.bae"
    ok("init", tmp_path / "pool.csv", "--measure", "accuracy", "--session", s, *POOL_OPTS,
       "--text-col", "text")  # fmt: skip
    batch = tmp_path / "b.csv"
    ok("next", s, "--n", 7, "--out", batch)
    raw = pd.read_csv(batch, dtype=str, keep_default_na=False)
    assert len(raw) == 7
    for col in raw.columns:
        assert not raw[col].str.match(r"^[=+\-@\t]").any(), col
    assert "'=cmd|' /C calc'!A0" in set(raw["id"]) and "''=quoted" in set(raw["id"])
    out = ok("next", s, "--n", 7).stdout  # stdout too
    assert not any(line[:1] in "=+-@" for line in out.splitlines())
    truth = dict.fromkeys(ids, 1)
    ok("record", s, label_file(batch, truth, tmp_path / "l.csv"))
    with Session.open(s, readonly=True) as ss:
        assert set(ss.labels()["id"]) == {i.strip() for i in ids}


def test_na_like_ids_are_ordinary_ids(pool, tmp_path):
    _, truth = pool
    s = new_session(pool, tmp_path)
    with Session.open(s, readonly=True) as ss:
        assert list(ss.pool_file.ids[:4]) == ["NA", "NULL", "None", "nan"]
    labels = tmp_path / "l.csv"
    with Session.open(s) as ss:  # put the NA-like items in a stage: draw until they are
        for _ in range(40):
            idx = ss.next(100)
            ids = [str(i) for i in ss.pool_file.ids[idx]]
            ss.record(ids, [truth[i] for i in ids])
            if {"NA", "NULL"} & set(ss.labels()["id"]):
                break
        mine = [i for i in ("NA", "NULL", "None", "nan") if i in set(ss.labels()["id"])]
    assert mine
    pd.DataFrame({"id": mine, "label": [truth[i] for i in mine]}).to_csv(labels, index=False)
    res = ok("record", s, labels)
    assert f"({len(mine)} already present)" in res.stdout
    bad = tmp_path / "empty_id.csv"
    bad.write_text("id,label\n,1\n")
    fails("record", s, bad, message="empty id at row 1")


def test_model_names_are_shown_literally_in_plots(tmp_path):
    sp = make_classification_pool(2_000, 0.2, n_models=2, rng=3)
    frame = pd.DataFrame({"id": [f"i{k}" for k in range(2_000)]})
    for m in sp.pool.models:
        frame[f"pred_{m}"] = sp.pool.view(m).pred
        frame[f"p_{m}"] = sp.pool.view(m).positive_prob()
    frame.to_csv(tmp_path / "pool.csv", index=False)
    truth = dict(zip(frame["id"], sp.labels.tolist(), strict=True))
    s = tmp_path / "m.bae"
    ok("init", tmp_path / "pool.csv", "--measure", "accuracy", "--session", s, "--id-col", "id",
       "--pred", r"cost$\frac$=pred_m0", "--pred", "_hidden=pred_m1",
       "--prob", r"cost$\frac$=p_m0", "--prob", "_hidden=p_m1")  # fmt: skip
    ok("next", s, "--n", 40, "--out", tmp_path / "b.csv")
    ok("record", s, label_file(tmp_path / "b.csv", truth, tmp_path / "l.csv"))
    ok("report", s, "--out", tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert r"cost$\frac$" in html and html.count("data:image/png;base64,") == 3
    assert os.path.getsize(tmp_path / "r.html") > 10_000
