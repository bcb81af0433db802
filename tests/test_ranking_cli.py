"""``bae init --task ranking``, ``next``, ``record``, ``status``, ``report`` on a ranking session."""

import json

import numpy as np
import pandas as pd
import pytest
from cli_helpers import ok, run

from bayes_activeeval import ranking


@pytest.fixture
def pool_csv(tmp_path):
    data = ranking.make_ranking_pool(120, min_docs=5, max_docs=15, changed=0.5, rng=4)
    path = tmp_path / "runs.csv"
    data.frame.drop(columns=["grade"]).to_csv(path, index=False)
    truth = {
        (q, d): int(g)
        for q, d, g in zip(data.frame.qid, data.frame.doc, data.frame.grade, strict=True)
    }
    return path, truth


def _grade(batch_csv, truth, out):
    b = pd.read_csv(batch_csv, dtype={"qid": str, "doc": str})
    b["grade"] = [truth[(q, d)] for q, d in zip(b.qid, b.doc, strict=True)]
    b[["qid", "doc", "grade"]].to_csv(out, index=False)
    return out


@pytest.mark.parametrize("rankers", [("a",), ("a", "b")])
def test_ranking_session_end_to_end(pool_csv, tmp_path, rankers):
    path, truth = pool_csv
    sess = tmp_path / "r.bae"
    models = [x for m in rankers for x in ("--model", m)]
    res = ok("init", path, "--task", "ranking", "--measure", "err", "--session", sess,
             "--rank", "a=rank_a", "--rank", "b=rank_b", "--relevance-cols", "p0,p1,p2,p3,p4",
             "--cost-col", "cost", "--budget", 12, *models)  # fmt: skip
    assert "queries drawn" in res.output
    res = ok("status", sess)
    assert "no estimate yet" in res.output
    for k in range(100):
        batch = tmp_path / f"b{k}.csv"
        res = run("next", sess, "--n", 3, "--out", batch)
        if res.exit_code != 0:
            assert "every query of the budget is graded" in res.stderr
            break
        frame = pd.read_csv(batch, dtype={"qid": str, "doc": str})
        # a batch lists every document of each query
        for q, grp in frame.groupby("qid"):
            assert len(grp) == sum(1 for (qq, _) in truth if qq == q)
        graded = _grade(batch, truth, tmp_path / f"g{k}.csv")
        ok("record", sess, graded)
        ok("record", sess, graded)  # idempotent
    st = json.loads(ok("status", sess, "--json").output)
    assert st["queries_graded"] == st["queries_in_sample"] > 0
    assert st["cost_graded"] <= 12
    out = tmp_path / "report.txt"
    res = ok("report", sess, "--out", out)
    assert "interval" in res.output and out.exists()
    # the session's estimate equals the Python API on the same draws
    from bayes_activeeval.ranking_session import RankingSession

    with RankingSession.open(str(sess)) as rs:
        r = rs.result()
    value = r.value if len(rankers) == 1 else r.estimate
    assert np.isfinite(value)
    assert st["estimate"] == pytest.approx(value)


def test_ranking_session_errors_are_one_line(pool_csv, tmp_path):
    path, _ = pool_csv
    sess = tmp_path / "r.bae"
    res = run("init", path, "--task", "ranking", "--measure", "dcg", "--session", sess,
              "--rank", "a=nope", "--budget", 5)  # fmt: skip
    assert res.exit_code == 2 and "column 'nope' (--rank a=…)" in res.stderr
    ok("init", path, "--task", "ranking", "--measure", "dcg", "--session", sess,
       "--rank", "a=rank_a", "--budget", 5)  # fmt: skip
    batch = tmp_path / "b.csv"
    ok("next", sess, "--n", 2, "--out", batch)
    b = pd.read_csv(batch, dtype={"qid": str, "doc": str})
    b["grade"] = 7
    b[["qid", "doc", "grade"]].to_csv(tmp_path / "bad.csv", index=False)
    res = run("record", sess, tmp_path / "bad.csv")
    assert res.exit_code == 2 and "grades are whole numbers 0..4" in res.stderr


# ------------------------------------------------------------------------------------------------
# annotators, leases, corrections and agreement (the session machinery of format 2)
# ------------------------------------------------------------------------------------------------
def _init(path, sess, *extra):
    ok("init", path, "--task", "ranking", "--measure", "dcg", "--session", sess,
       "--rank", "a=rank_a", "--rank", "b=rank_b", "--relevance-cols", "p0,p1,p2,p3,p4",
       "--cost-col", "cost", "--budget", 15, *extra)  # fmt: skip


def _next(sess, who, out, n=2, *extra):
    ok("next", sess, "--n", n, "--annotator", who, "--out", out, "--overwrite", *extra)
    return pd.read_csv(out, dtype={"qid": str, "doc": str})


def test_annotators_get_their_own_queries_and_keep_them(pool_csv, tmp_path):
    path, truth = pool_csv
    sess = tmp_path / "r.bae"
    _init(path, sess, "--model", "a")
    alice = _next(sess, "alice", tmp_path / "a.csv")
    bob = _next(sess, "bob", tmp_path / "b.csv")
    assert alice.qid.nunique() == bob.qid.nunique() == 2
    assert not set(alice.qid) & set(bob.qid)  # leased: each gets other queries
    again = _next(sess, "alice", tmp_path / "a2.csv", 5)  # asking again: the same two queries
    assert list(again.qid.unique()) == list(alice.qid.unique())
    # alice grades hers; her next batch is new queries, not bob's
    res = ok("record", sess, _grade(tmp_path / "a.csv", truth, tmp_path / "ga.csv"),
             "--annotator", "alice")  # fmt: skip
    assert "recorded 2 queries" in res.output and "as alice" in res.output
    nxt = _next(sess, "alice", tmp_path / "a3.csv")
    assert not set(nxt.qid) & (set(alice.qid) | set(bob.qid))
    st = json.loads(ok("status", sess, "--json").output)
    assert st["annotators"] == {"alice": 2}
    assert st["leased"] == 4  # bob's two and alice's two new ones


def test_expired_leases_go_to_others(pool_csv, tmp_path):
    import time

    path, _ = pool_csv
    sess = tmp_path / "r.bae"
    _init(path, sess, "--model", "a")
    first = _next(sess, "alice", tmp_path / "a.csv", 2, "--lease", 0.001)  # 60 ms
    time.sleep(0.1)
    bob = _next(sess, "bob", tmp_path / "b.csv")
    assert list(bob.qid.unique()) == list(first.qid.unique())


def test_second_annotator_agreement_and_relabel(pool_csv, tmp_path):
    from bayes_activeeval.ranking_session import RankingSession

    path, truth = pool_csv
    sess = tmp_path / "r.bae"
    _init(path, sess, "--model", "a")
    batch = _next(sess, "alice", tmp_path / "a.csv", 3)
    ga = _grade(tmp_path / "a.csv", truth, tmp_path / "ga.csv")
    ok("record", sess, ga, "--annotator", "alice")
    ok("record", sess, ga, "--annotator", "alice")  # the same file again: skipped
    # bob grades the same queries; one document differently
    gb = pd.read_csv(ga, dtype={"qid": str, "doc": str})
    q0, d0, g0 = gb.qid[0], gb.doc[0], int(gb.grade[0])
    gb.loc[0, "grade"] = (g0 + 1) % 5
    gb.to_csv(tmp_path / "gb.csv", index=False)
    ok("record", sess, tmp_path / "gb.csv", "--annotator", "bob")
    st = json.loads(ok("status", sess, "--json").output)
    assert st["annotators"] == {"alice": 3, "bob": 3}
    ag = st["agreement"]
    assert ag["items"] == len(batch)  # documents graded by both
    assert ag["agree"] == pytest.approx((len(batch) - 1) / len(batch))
    assert ag["kappa"][0]["annotators"] == ["alice", "bob"] and ag["kappa"][0]["items"] == len(
        batch
    )
    text = ok("status", sess).output
    assert "agreement:" in text and "Cohen's kappa alice–bob" in text
    # each query counts with alice's (first) grades
    with RankingSession.open(str(sess), readonly=True) as rs:
        assert rs.graded()[int(rs.pool.query_index([q0])[0])][d0] == g0
    # the same annotator changing a grade is refused (exit 2, one line): correct it instead
    res = run("record", sess, tmp_path / "gb.csv", "--annotator", "alice")
    assert res.exit_code == 2 and "bae relabel" in res.stderr
    res = run("relabel", sess, q0, f"{d0}={(g0 + 1) % 5}")
    assert res.exit_code == 2 and "--reason" in res.stderr
    res = ok("relabel", sess, q0, f"{d0}={(g0 + 1) % 5}", "--reason", "adjudicated",
             "--annotator", "carol")  # fmt: skip
    assert "correction by carol" in res.output
    res = ok("relabel", sess, q0, f"{d0}={(g0 + 1) % 5}", "--reason", "again")
    assert "nothing written" in res.output
    st = json.loads(ok("status", sess, "--json").output)
    assert st["corrections"] == 1
    with RankingSession.open(str(sess), readonly=True) as rs:
        qi = int(rs.pool.query_index([q0])[0])
        assert rs.graded()[qi][d0] == (g0 + 1) % 5
        a = rs.annotations()
        assert list(a.kind) == ["label"] * 6 + ["correction"]
        assert a.reason.iloc[-1] == "adjudicated"
        # the estimate follows the correction
        r = rs.result()
    if r is not None:
        assert st["estimate"] == pytest.approx(r.value)
    res = run("relabel", sess, q0, "nodoc=1", "--reason", "x")
    assert res.exit_code == 2 and "not a document of query" in res.stderr
    res = run("relabel", sess, q0, "garbage", "--reason", "x")
    assert res.exit_code == 2 and "DOC=GRADE" in res.stderr


def test_partial_query_grades_are_refused_and_status_is_read_only(pool_csv, tmp_path):
    import os

    path, truth = pool_csv
    sess = tmp_path / "r.bae"
    _init(path, sess, "--model", "a")
    _next(sess, "alice", tmp_path / "a.csv", 2)
    g = pd.read_csv(_grade(tmp_path / "a.csv", truth, tmp_path / "g.csv"), dtype=str)
    g.loc[0, "grade"] = None
    g.to_csv(tmp_path / "partial.csv", index=False)
    res = run("record", sess, tmp_path / "partial.csv", "--annotator", "alice")
    assert res.exit_code == 2 and "grade every document of a query" in res.stderr
    st = json.loads(ok("status", sess, "--json").output)
    assert st["queries_graded"] == 0  # nothing was written
    # a query whose grades are all empty stays pending; the complete ones are recorded
    q0 = g.qid[0]
    g = g[g.qid != q0]
    g.to_csv(tmp_path / "rest.csv", index=False)
    res = ok("record", sess, tmp_path / "rest.csv", "--annotator", "alice")
    assert "recorded 1 queries" in res.output
    before = (os.path.getmtime(sess), sorted(os.listdir(tmp_path)))
    ok("status", sess)
    ok("report", sess, "--out", tmp_path / "rep.txt")
    after = (os.path.getmtime(sess), sorted(x for x in os.listdir(tmp_path) if x != "rep.txt"))
    assert before == after


def test_development_format_is_refused_not_replaced(pool_csv, tmp_path):
    import sqlite3

    path, _ = pool_csv
    sess = tmp_path / "old.bae"
    con = sqlite3.connect(sess)
    with con:
        con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        con.execute("INSERT INTO meta VALUES ('task', ?)", (json.dumps("ranking"),))
        con.execute("CREATE TABLE grades (qid TEXT, doc TEXT, grade INTEGER, time TEXT)")
        con.execute("INSERT INTO grades VALUES ('q00000', 'd0', 1, 'now')")
    con.close()
    res = run("status", sess)
    assert res.exit_code == 2 and "development version" in res.stderr
    res = run("init", path, "--task", "ranking", "--measure", "dcg", "--session", sess,
              "--rank", "a=rank_a", "--budget", 5, "--overwrite")  # fmt: skip
    assert res.exit_code == 2 and "never replaces it" in res.stderr
    assert sess.exists()


def test_numeric_query_and_document_ids(tmp_path):
    data = ranking.make_ranking_pool(60, min_docs=4, max_docs=8, rng=5)
    frame = data.frame.drop(columns=["grade"])
    frame["qid"] = frame["qid"].str[1:].astype(int) + 1000
    frame["doc"] = frame["doc"].str[1:].astype(int)
    path = tmp_path / "num.csv"
    frame.to_csv(path, index=False)
    truth = {
        (str(q), str(d)): int(g)
        for q, d, g in zip(frame.qid, frame.doc, data.frame.grade, strict=True)
    }
    sess = tmp_path / "r.bae"
    ok("init", path, "--task", "ranking", "--measure", "err", "--session", sess,
       "--rank", "a=rank_a", "--relevance-cols", "p0,p1,p2,p3,p4", "--budget", 4)  # fmt: skip
    ok("next", sess, "--n", 50, "--out", tmp_path / "b.csv")
    ok("record", sess, _grade(tmp_path / "b.csv", truth, tmp_path / "g.csv"))
    st = json.loads(ok("status", sess, "--json").output)
    assert st["queries_graded"] == st["queries_in_sample"] and np.isfinite(st["estimate"])
    g = pd.read_csv(tmp_path / "g.csv", dtype=str)
    q, d, old = g.qid[0], g.doc[0], int(g.grade[0])
    res = ok("relabel", sess, q, f"{d}={(old + 1) % 5}", "--reason", "typo")
    assert "correction by" in res.output


def _text_pool(tmp_path, n=40):
    """A pool file with a query text column and a document title column (markup inside)."""
    data = ranking.make_ranking_pool(n, min_docs=3, max_docs=5, changed=0.5, rng=6)
    frame = data.frame.drop(columns=["grade"])
    frame["query"] = [f"<b>what is {q}</b>" for q in frame.qid]
    frame["title"] = [f"=title of {d}" for d in frame.doc]
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    return path


def test_label_grades_queries_in_the_terminal(tmp_path):
    from bayes_activeeval.ranking_session import RankingSession

    path = _text_pool(tmp_path)
    sess = tmp_path / "r.bae"
    ok("init", path, "--task", "ranking", "--measure", "dcg", "--session", sess,
       "--rank", "a=rank_a", "--relevance-cols", "p0,p1,p2,p3,p4", "--budget", 6,
       "--text-col", "query", "--text-col", "title")  # fmt: skip
    with RankingSession.open(str(sess), readonly=True) as rs:
        order = [(str(rs.pool.query_ids[q]), [str(d) for d in rs.pool.doc_ids[q]])
                 for q in rs._order()]  # fmt: skip
    assert len(order) >= 4
    (q1, d1), (q2, d2), (q3, d3), (q4, _) = order[:4]
    # query 1: a bad answer, a slip undone with 'b'; query 2 graded straight through
    keys = ["x", "3", "b", "2"] + ["1"] * (len(d1) - 1) + [str(j % 5) for j in range(len(d2))]
    res = run("label", sess, "--n", 2, "--max", 2, "--annotator", "alice", "--show-prediction",
              input="\n".join(keys) + "\n")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert f"query {q1}: {len(d1)} documents to grade 0..4" in res.output
    assert f"query: <b>what is {q1}</b>" in res.output  # the query's text, once
    assert f"title: =title of {d1[0]}" in res.output and "rank_a:" in res.output
    assert "a grade is a whole number 0..4, got 'x'" in res.output
    assert "2 queries saved; 2 of" in res.output
    # query 3 skipped (stays leased and pending); query 4 half graded, then quit: not saved
    res = run("label", sess, "--n", 1, "--annotator", "alice", input="s\n")
    assert res.exit_code == 0 and "1 queries skipped" in res.output
    res = run("label", sess, "--n", 1, "--annotator", "bob", input="1\nq\n")
    assert res.exit_code == 0 and f"query {q4} not saved" in res.output
    res = run("label", sess, "--n", 1, "--max", 1, "--annotator", "alice", input="0\n" * len(d3))
    assert res.exit_code == 0 and f"query {q3} saved" in res.output
    with RankingSession.open(str(sess), readonly=True) as rs:
        a = rs.annotations()
        assert list(zip(a.id, a.annotator, a.source, strict=True)) == [
            (q1, "alice", "interactive"), (q2, "alice", "interactive"),
            (q3, "alice", "interactive")]  # fmt: skip
        assert json.loads(a.label[0]) == dict(zip(d1, [2] + [1] * (len(d1) - 1), strict=True))
        assert json.loads(a.label[1]) == {d: j % 5 for j, d in enumerate(d2)}
        assert set(rs.leases()["id"]) == {q4}  # bob's lease on the query he left
    # the CSV of `bae next` carries the text columns, spreadsheet-safe, and records back
    out = tmp_path / "b.csv"
    ok("next", sess, "--n", 1, "--annotator", "bob", "--out", out)
    b = pd.read_csv(out, dtype=str)
    assert list(b.qid.unique()) == [q4] and b.title.str.startswith("'=title").all()
    b["grade"] = 1
    b.to_csv(out, index=False)
    assert "recorded 1 queries" in ok("record", sess, out, "--annotator", "bob").output


def test_label_text_columns_can_be_chosen(tmp_path):
    path = _text_pool(tmp_path, n=20)
    sess = tmp_path / "r.bae"
    ok("init", path, "--task", "ranking", "--measure", "err", "--session", sess,
       "--rank", "a=rank_a", "--budget", 3)  # fmt: skip
    res = run("label", sess, "--text-col", "nope")
    assert res.exit_code == 2 and "'nope' (--text-col) is not in the pool file" in res.stderr
    res = run("label", sess, "--text-col", "title", "--max", 1, input="q\n")
    assert res.exit_code == 0 and "title: =title of" in res.output and "query: " not in res.output


def test_a_moved_pool_file_is_found_with_pool(pool_csv, tmp_path):
    # --pool was ignored for a ranking session, which then could not be opened at all once its
    # pool file had moved
    path, truth = pool_csv
    sess = tmp_path / "r.bae"
    ok("init", path, "--task", "ranking", "--measure", "err", "--session", sess,
       "--rank", "a=rank_a", "--relevance-cols", "p0,p1,p2,p3,p4", "--cost-col", "cost",
       "--budget", 6, "--model", "a")  # fmt: skip
    ok("next", sess, "--n", 2, "--out", tmp_path / "b.csv")
    moved = tmp_path / "elsewhere.csv"
    path.rename(moved)
    res = run("status", sess)
    assert res.exit_code != 0 and "--pool" in res.stderr
    before = sess.read_bytes()
    ok("status", sess, "--pool", moved)
    assert sess.read_bytes() == before  # status reads only
    ok("record", sess, _grade(tmp_path / "b.csv", truth, tmp_path / "g.csv"), "--pool", moved)
    ok("report", sess, "--out", tmp_path / "r.txt", "--pool", moved)
    ok("next", sess, "--n", 1, "--out", tmp_path / "b2.csv", "--pool", moved)
    res = run("compare", sess, "--pool", moved)  # said "not a bae session" before
    assert res.exit_code != 0 and "bae status" in res.stderr
    moved.write_text(moved.read_text() + "\n")  # other bytes: refused, as for a labeling session
    res = run("status", sess, "--pool", moved)
    assert res.exit_code != 0 and "changed" in res.stderr


# ------------------------------------------------------------------------------------------------
# fixes: empty draws, duplicate rows, the undo of one's own grades, files never overwritten
# ------------------------------------------------------------------------------------------------
_READ = {"query": "qid", "item": "doc", "ranks": {"a": "rank_a"}, "cost": "cost"}


def _small(tmp_path, n=40):
    """A pool of ``n`` queries of 2-5 documents (file, true grades, read options)."""
    data = ranking.make_ranking_pool(n, min_docs=2, max_docs=5, changed=0.5, rng=4)
    path = tmp_path / "runs.csv"
    data.frame.drop(columns=["grade"]).to_csv(path, index=False)
    truth = {
        (q, d): int(g)
        for q, d, g in zip(data.frame.qid, data.frame.doc, data.frame.grade, strict=True)
    }
    return path, truth, {**_READ, "relevance": [f"p{k}" for k in range(5)]}


def test_a_session_always_has_queries(tmp_path, monkeypatch):
    # the first query drawn cost more than the whole budget: the session had 0 queries
    import bayes_activeeval.ranking_session as rsm
    from bayes_activeeval.ranking_session import RankingSession

    f = pd.DataFrame(
        {"qid": ["q0", "q1", "q2", "q3"], "doc": "d", "rank_a": 1, "cost": [0.5, 5, 5, 5]}
    )
    f.to_csv(tmp_path / "runs.csv", index=False)
    for seed in range(4):
        with pytest.warns(UserWarning, match="no draw can include them"):
            rs = RankingSession.create(
                str(tmp_path / "s.bae"), str(tmp_path / "runs.csv"), _READ, measure="dcg",
                budget=1.0, seed=seed, design="passive", overwrite=True,
            )  # fmt: skip
        with rs:
            assert rs.meta["n_draws"] >= 1 and rs.status()["queries_in_sample"] == 1
            assert not rs.finished()
    # and a draw without queries (never returned now) is refused, no file written
    monkeypatch.setattr(rsm, "draw", lambda *a, **k: rsm.Draws(*(np.zeros(0),) * 3))
    with pytest.raises(ValueError, match="buys no query"):
        RankingSession.create(str(tmp_path / "t.bae"), str(tmp_path / "runs.csv"), _READ,
                              measure="dcg", budget=1.0, design="passive")  # fmt: skip
    assert not (tmp_path / "t.bae").exists()


def test_record_refuses_a_document_graded_twice(tmp_path):
    from bayes_activeeval.ranking_session import RankingSession

    path, _, read = _small(tmp_path)
    with RankingSession.create(str(tmp_path / "s.bae"), str(path), read, measure="dcg",
                               models=("a",), budget=8.0) as rs:  # fmt: skip
        fr = rs.next(1, annotator="ann")
        fr["grade"] = 1
        qid, doc = fr.qid.iloc[0], fr.doc.iloc[0]
        dup = pd.concat([fr, fr.iloc[[0]].assign(grade=4)], ignore_index=True)
        with pytest.raises(
            ValueError,
            match=rf"query '{qid}', document '{doc}' is graded twice \(rows 1 and {len(fr) + 1}, "
            r"grades 1 and 4\)",
        ):
            rs.record(dup, annotator="ann")
        assert rs.graded() == {} and len(rs.annotations()) == 0  # nothing recorded
        # the same grade twice is refused too; an empty duplicate row is no grade
        with pytest.raises(ValueError, match="graded twice"):
            rs.record(pd.concat([fr, fr.iloc[[0]]], ignore_index=True), annotator="ann")
        empty = fr.iloc[[0]].assign(grade=None)
        assert rs.record(pd.concat([fr, empty], ignore_index=True), annotator="ann").recorded == 1


def test_undo_of_own_grades_keeps_others_corrections(tmp_path):
    from bayes_activeeval.ranking_session import RankingSession
    from bayes_activeeval.session import SessionError

    path, _, read = _small(tmp_path)
    with RankingSession.create(str(tmp_path / "s.bae"), str(path), read, measure="dcg",
                               models=("a",), budget=8.0) as rs:  # fmt: skip
        fr = rs.next(1, annotator="alice")
        fr["grade"] = 0
        rs.record(fr, annotator="alice")
        carol = fr.assign(grade=2)
        rs.record(carol, annotator="carol")  # a second annotation (does not count)
        (qi,) = rs.graded()
        qid = rs.pool.query_ids[qi]
        d1, d2 = (str(d) for d in rs.pool.doc_ids[qi][:2])
        rs.relabel(qid, {d1: 3}, reason="review", annotator="bob")
        # changing the document bob corrected since would undo his correction: refused
        mine = {str(d): 0 for d in rs.pool.doc_ids[qi]}
        with pytest.raises(SessionError, match=rf"document '{d1}'.*corrected to 3 by bob"):
            rs.relabel(qid, {**mine, d1: 2}, reason="undo", annotator="alice", own=True)
        # alice's undo sends every document, as the labeling page does: only d2 changed
        assert rs.relabel(qid, {**mine, d2: 1}, reason="undo", annotator="alice", own=True)
        assert rs.graded()[qi][d1] == 3 and rs.graded()[qi][d2] == 1  # bob's fix is kept
        # her answer is now the grades counted (the page shows them on the next undo);
        # sending them again writes nothing
        n = len(rs.annotations())
        again = {**mine, d1: 3, d2: 1}
        assert not rs.relabel(qid, again, reason="undo", annotator="alice", own=True)
        assert len(rs.annotations()) == n
        # a second annotator's undo changes their own answer only
        rs.relabel(qid, {d2: 4}, reason="undo", annotator="carol", own=True)
        assert rs.graded()[qi][d2] == 1
        last = json.loads(rs.annotations().label.iloc[-1])
        assert last == {**{d: 2 for d in mine}, d2: 4}
        # every grade ever recorded is still there
        labels = [json.loads(x) for x in rs.annotations().label]
        assert labels[3][d1] == 3 and len(labels) == 5


def test_next_and_report_never_overwrite_grades_or_the_pool(tmp_path):
    path, truth, _ = _small(tmp_path)
    sess = tmp_path / "s.bae"
    ok("init", path, "--task", "ranking", "--measure", "dcg", "--session", sess,
       "--rank", "a=rank_a", "--relevance-cols", "p0,p1,p2,p3,p4", "--cost-col", "cost",
       "--budget", 8, "--model", "a")  # fmt: skip
    batch = tmp_path / "batch.csv"
    ok("next", sess, "--n", 2, "--out", batch)
    b = pd.read_csv(batch, dtype=str)
    b["grade"] = [truth[(q, d)] for q, d in zip(b.qid, b.doc, strict=True)]
    b.to_csv(batch, index=False)  # grades typed in, not recorded yet
    before = batch.read_bytes(), path.read_bytes(), sess.read_bytes()
    res = run("next", sess, "--n", 2, "--out", batch, "--overwrite")
    assert res.exit_code == 2 and f"holds {len(b)} grades (column 'grade')" in res.stderr
    res = run("report", sess, "--out", path, "--overwrite")
    assert res.exit_code == 2 and "is the pool file" in res.stderr
    res = run("next", sess, "--n", 2, "--out", path, "--overwrite")
    assert res.exit_code == 2 and "is the pool file" in res.stderr
    res = run("report", sess, "--out", sess, "--overwrite")
    assert res.exit_code == 2 and "is the session file" in res.stderr
    assert (batch.read_bytes(), path.read_bytes(), sess.read_bytes()) == before
    ok("status", sess)
    # an empty grade column is no grades: a fresh batch may replace it
    ok("next", sess, "--n", 2, "--out", tmp_path / "fresh.csv")
    ok("next", sess, "--n", 2, "--out", tmp_path / "fresh.csv", "--overwrite")
