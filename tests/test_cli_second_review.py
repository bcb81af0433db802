"""The ``bae`` command, second review (session 31): a labels CSV with a byte-order mark or a
Latin-1 cell is never overwritten; ``bae next`` on a ranking session takes ``--text-col`` (checked
before anything is leased) and refuses ``--stage-size``; ``bae relabel`` refuses a document named
twice; bad ``--n``, ``--max``, ``--batch-size``, ``--stage-size``, ``--port``, ``--host`` and
``--annotator`` values are one error line naming the option, exit 2."""

from __future__ import annotations

import pandas as pd
import pytest
from cli_helpers import fails, init_static, labeled_pool_csv, ok

from bayes_activeeval import ranking


@pytest.fixture(autouse=True)
def no_server(monkeypatch):
    """A bad option must be refused before the server starts: starting it fails the test
    (instead of serving forever)."""
    import bayes_activeeval.serve as serve_module

    def refuse(*args, **kwargs):
        raise AssertionError("bae serve started the server")

    monkeypatch.setattr(serve_module, "serve", refuse)


@pytest.fixture
def static_session(tmp_path):
    path, truth = labeled_pool_csv(tmp_path / "pool.csv", seed=3, prefix="i")
    sess = tmp_path / "s.bae"
    init_static(path, sess)
    return sess, truth


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("bom.csv", b"\xef\xbb\xbflabel,id\n1,i5\n0,i6\n"),
        ("latin1.csv", b"id,text,label\ni5,caf\xe9,1\ni6,x,0\n"),
    ],
)
def test_a_labels_file_is_never_overwritten(static_session, tmp_path, name, raw):
    sess, _ = static_session
    out = tmp_path / name
    out.write_bytes(raw)
    fails("next", sess, "--n", 5, "--out", out, "--overwrite", message="holds 2 labels")
    assert out.read_bytes() == raw


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("next", "{s}", "--n", 0), "--n must be >= 1"),
        (("next", "{s}", "--stage-size", 0), "--stage-size must be >= 1"),
        (("label", "{s}", "--max", -1), "--max must be >= 1"),
        (("label", "{s}", "--n", 0), "--n must be >= 1"),
        (("record", "{s}", "{labels}", "--batch-size", 0), "--batch-size must be >= 1"),
        (("serve", "{s}", "--port", 0), "--port must be in 1..65535"),
        (("serve", "{s}", "--annotator", "(before annotators)"), "--annotator"),
        (("serve", "{s}", "--annotator", "   "), "--annotator"),
        (("serve", "{s}", "--host", "999.1.1.1"), "--host '999.1.1.1' cannot be bound"),
    ],
)
def test_bad_options_are_one_line_naming_the_option(static_session, tmp_path, args, message):
    sess, _ = static_session
    labels = tmp_path / "l.csv"
    labels.write_text("id,label\n")
    before = sess.read_bytes()
    fails(*(str(a).format(s=sess, labels=labels) for a in args), message=message)
    assert sess.read_bytes() == before


@pytest.fixture
def ranking_session(tmp_path):
    data = ranking.make_ranking_pool(60, min_docs=3, max_docs=6, changed=0.5, rng=2)
    frame = data.frame.drop(columns=["grade"]).assign(title=lambda f: "t-" + f["doc"].astype(str))
    path = tmp_path / "runs.csv"
    frame.to_csv(path, index=False)
    sess = tmp_path / "r.bae"
    ok("init", path, "--task", "ranking", "--measure", "dcg", "--session", sess,
       "--rank", "a=rank_a", "--budget", 20)  # fmt: skip
    return sess


def test_ranking_next_takes_text_columns_and_checks_them_first(ranking_session, tmp_path):
    sess = ranking_session
    fails("next", sess, "--n", 2, "--annotator", "alice", "--text-col", "nosuch",
          message="column 'nosuch' (--text-col)")  # fmt: skip
    out = tmp_path / "b.csv"
    ok("next", sess, "--n", 2, "--annotator", "alice", "--text-col", "title", "--out", out)
    b = pd.read_csv(out, dtype=str)
    assert "title" in b.columns and (b["title"] == "t-" + b["doc"]).all()
    fails("next", sess, "--n", 2, "--stage-size", 5, message="--stage-size is for labeling")


def test_ranking_nothing_leased_after_a_bad_text_column(ranking_session):
    from bayes_activeeval.ranking_session import RankingSession

    fails("next", ranking_session, "--n", 2, "--annotator", "bob", "--text-col", "nosuch",
          message="--text-col")  # fmt: skip
    with RankingSession.open(str(ranking_session)) as rs:
        assert rs.leases().empty


def test_ranking_relabel_refuses_a_document_named_twice(ranking_session, tmp_path):
    out = tmp_path / "b.csv"
    ok("next", ranking_session, "--n", 1, "--annotator", "alice", "--out", out)
    b = pd.read_csv(out, dtype={"qid": str, "doc": str})
    b["grade"] = 1
    b[["qid", "doc", "grade"]].to_csv(tmp_path / "g.csv", index=False)
    ok("record", ranking_session, tmp_path / "g.csv")
    q, d = b.qid.iloc[0], b.doc.iloc[0]
    before = ranking_session.read_bytes()
    fails("relabel", ranking_session, q, f"{d}=1,{d}=2", "--reason", "fix",
          message=f"document '{d}' is given twice")  # fmt: skip
    assert ranking_session.read_bytes() == before
