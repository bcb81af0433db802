"""The ``bae`` command end to end: sessions on the demo pool, bad input, interactive labeling, the
HTML report in headless Chromium, model comparison."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_helpers import ok, run

import bayes_activeeval as bae
from bayes_activeeval.datasets import load_demo, make_classification_pool
from bayes_activeeval.demo import export_demo
from bayes_activeeval.session import Session, stage_rng

ROOT = Path(__file__).resolve().parents[1]
POOL_OPTS = ["--id-col", "id", "--pred-col", "pred", "--prob-col", "p", "--score-col", "score"]


def _ids(n: int) -> list[str]:
    return [f"d{i}" for i in range(n)]


@pytest.fixture(scope="module")
def demo_csv(tmp_path_factory):
    """``load_demo()`` written to CSV by ``export_demo`` (what ``bae demo --export`` writes), and
    its true labels by id."""
    pool_csv, truth_csv = export_demo(tmp_path_factory.mktemp("demo") / "demo.csv")
    t = pd.read_csv(truth_csv, dtype={"id": str})
    truth = dict(zip(t["id"], t["label"].tolist(), strict=True))
    return Path(pool_csv), load_demo(), truth


def label_batch(batch_csv: Path, truth, out: Path) -> Path:
    b = pd.read_csv(batch_csv, dtype=str)
    pd.DataFrame({"id": b["id"], "label": [truth[i] for i in b["id"]]}).to_csv(out, index=False)
    return out


def session_state(path: Path) -> tuple[str, list[str]]:
    raw = hashlib.sha256(path.read_bytes()).hexdigest()
    con = sqlite3.connect(path)
    dump = list(con.iterdump())
    con.close()
    return raw, dump


def run_rounds(session: Path, sizes, truth, tmp: Path, exact: bool = False) -> int:
    """Rounds of next/record; returns the labels recorded. A static stage draws n distinct items,
    some possibly labeled already (free repeats), so up to n are listed; adaptive: exactly n."""
    total = 0
    for k, n in enumerate(sizes):
        batch = tmp / f"{session.stem}-batch{k}.csv"  # --out never replaces a file silently
        ok("next", session, "--n", n, "--out", batch)
        listed = len(pd.read_csv(batch))
        assert (listed == n) if exact else (0 < listed <= n)
        res = ok(
            "record", session, label_batch(batch, truth, tmp / f"{session.stem}-labels{k}.csv")
        )
        assert f"recorded {listed} labels" in res.stdout
        total += listed
    return total


# -- (a) end to end -------------------------------------------------------------------------------
def test_static_session_end_to_end_equals_python_api(demo_csv, tmp_path):
    path, demo, truth = demo_csv
    session, seed, sizes = tmp_path / "s.bae", 7, (40, 60, 50)
    ok("init", path, "--measure", "f1", "--session", session, *POOL_OPTS, "--text-col", "text",
       "--budget", 500, "--seed", seed)  # fmt: skip
    out = ok("next", session, "--n", 3).stdout.splitlines()
    assert out[0] == "id,text" and out[1].split(",")[1].startswith("demo item ")
    # the 3 listed above are pending: the first round returns them (n ignored) …
    pending = tmp_path / "pending.csv"
    ok("next", session, "--n", 40, "--out", pending)
    assert len(pd.read_csv(pending)) == 3
    ok("record", session, label_batch(pending, truth, tmp_path / "l.csv"))
    n_labels = 3 + run_rounds(session, sizes, truth, tmp_path)

    st = json.loads(ok("status", session, "--json").stdout)
    assert st["labels"] == n_labels and st["budget_left"] == 500 - n_labels
    assert st["stages_completed"] == 4
    assert "posterior" in st and "measure[f1]" in st["posterior"]
    text = ok("status", session).stdout
    assert "f1 [model] = " in text and "95% interval" in text and "r_hat" in text

    # the same with the Python API
    proposal = bae.optimal_proposal(demo.pool, "f1")
    draws = None
    for k, n in enumerate((3, *sizes)):
        d = proposal.draw(n, rng=stage_rng(seed, k), unique=True)
        draws = d if draws is None else draws + d
    ref = bae.estimate(demo.pool, "f1", draws, demo.labeler(draws.indices))
    got = st["estimates"][0]
    assert got["estimate"] == pytest.approx(ref.value, rel=1e-12)
    assert got["stderr"] == pytest.approx(ref.stderr, rel=1e-12)
    low, high = ref.confidence_interval(0.95)
    assert (got["low"], got["high"]) == pytest.approx((low, high), rel=1e-12)
    # errors no label has seen: the same as bae.unseen_errors on the same labels
    seen = bae.unseen_errors(demo.pool, "f1", draws, ref)
    assert [g["max_hidden"] for g in got["unseen"]["regions"]] == [
        r.max_hidden for r in seen.regions
    ]
    assert got["unseen"]["value"] == pytest.approx(float(seen.values[0]), rel=1e-12)
    assert "errors no label has seen (95%): up to " in text

    report = tmp_path / "report.html"
    ok("report", session, "--out", report)
    html = report.read_text()
    assert html.count("data:image/png;base64,") == 3
    assert "Frequentist answer" in html and "Bayesian answer" in html and "ess_bulk" in html
    assert "errors no label has seen (95%): up to " in html


def test_adaptive_session_end_to_end_equals_active_evaluator(demo_csv, tmp_path):
    path, demo, truth = demo_csv
    session, seed, sizes = tmp_path / "a.bae", 3, (30, 40, 30)
    ok("init", path, "--measure", "f1", "--session", session, *POOL_OPTS, "--design", "adaptive",
       "--seed", seed)  # fmt: skip
    first = tmp_path / "first.csv"
    ok("next", session, "--n", sizes[0], "--out", first)
    # a crash between next and record: the next `next` lists the same items
    again = tmp_path / "again.csv"
    ok("next", session, "--n", 5, "--out", again)
    assert pd.read_csv(first)["id"].tolist() == pd.read_csv(again)["id"].tolist()
    ok("record", session, label_batch(first, truth, tmp_path / "l0.csv"))
    run_rounds(session, sizes[1:], truth, tmp_path, exact=True)
    st = json.loads(ok("status", session, "--json").stdout)

    # the CLI's adaptive design takes ActiveEvaluator's default oracle and estimator
    assert st["oracle"] == "auto"
    ev = bae.ActiveEvaluator(demo.pool, "f1", rng=seed, mix=0.05)
    for n in sizes:
        idx = ev.query(n)
        ev.update(idx, demo.labeler(idx))
    ref = ev.estimate(variance="martingale")  # the session's default standard error
    got = st["estimates"][0]
    assert st["labels"] == ev.n_labels == sum(sizes)
    assert got["draws"] == ref.n_draws
    assert got["estimate"] == pytest.approx(ref.value, rel=1e-12)
    assert got["stderr"] == pytest.approx(ref.stderr, rel=1e-12)
    ok("report", session, "--out", tmp_path / "a.html")


# -- (c) bad input --------------------------------------------------------------------------------
@pytest.fixture
def labeled_session(demo_csv, tmp_path):
    path, _, truth = demo_csv
    session = tmp_path / "s.bae"
    ok("init", path, "--measure", "f1", "--session", session, *POOL_OPTS, "--seed", 1)
    batch = tmp_path / "batch.csv"
    ok("next", session, "--n", 10, "--out", batch)
    ids = pd.read_csv(batch, dtype=str)["id"].tolist()
    first = tmp_path / "first.csv"
    pd.DataFrame({"id": ids[:3], "label": [truth[i] for i in ids[:3]]}).to_csv(first, index=False)
    ok("record", session, first)
    return session, ids, truth


def _write(tmp: Path, name: str, text: str) -> Path:
    f = tmp / name
    f.write_text(text)
    return f


def test_bad_labels_give_one_line_exit_2_and_leave_session_untouched(labeled_session, tmp_path):
    session, ids, truth = labeled_session
    y = [truth[i] for i in ids]
    not_drawn = next(i for i in _ids(100_000) if i not in ids)
    cases = {
        "malformed CSV": (f"id,label\n{ids[4]},{y[4]},9,9\n{ids[5]},{y[5]}\n", "well-formed CSV"),
        "unterminated quote": (f'id,label\n"{ids[4]},{y[4]}\n', "well-formed CSV"),
        "unknown id": (f"id,label\n{ids[4]},{y[4]}\nno-such-item,1\n", "unknown item id"),
        "label outside classes": (f"id,label\n{ids[4]},{y[4]}\n{ids[5]},yes\n", "not one of the classes"),
        "duplicate ids": (f"id,label\n{ids[4]},{y[4]}\n{ids[4]},{y[4]}\n", "twice"),
        "never drawn": (f"id,label\n{ids[4]},{y[4]}\n{not_drawn},0\n", "was not asked for"),
        "relabel": (f"id,label\n{ids[0]},{1 - y[0]}\n", "already has your label"),
        "missing column": (f"item,label\n{ids[4]},{y[4]}\n", "no column 'id'"),
        "empty": ("", "is empty"),
        "missing label": (f"id,label\n{ids[4]},\n", "empty label"),
    }  # fmt: skip
    before = session_state(session)
    for name, (content, message) in cases.items():
        f = _write(tmp_path, "bad.csv", content)
        res = run("record", session, f)
        assert res.exit_code == 2, name
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (name, res.stderr)
        assert message in lines[0], (name, lines[0])
        assert session_state(session) == before, name
    for args in (["next", session, "--n", 0], ["status", session, "--level", 1.5]):
        res = run(*args)
        assert res.exit_code == 2 and res.stderr.count("\n") == 1, (args, res.stderr)
        assert session_state(session) == before
    res = run("record", session, tmp_path / "does-not-exist.csv")
    assert res.exit_code == 2 and "does not exist" in res.stderr
    assert session_state(session) == before


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("id,pred,p,score\na,1,0.9,2\nb,0,nan,-1\n", "missing (NaN) at row 2 (id 'b')"),
        ("id,pred,p,score\na,1,0.9,2\nb,0,,-1\n", "missing (NaN)"),
        ("id,pred,p,score\n", "the pool is empty"),
        ("id,pred,p,score\na,1,0.9,2\na,0,0.2,-1\n", "duplicate item id 'a'"),
        ("id,pred,prob,score\na,1,0.9,2\n", "column 'p' (--prob) is not in"),
        ('id,pred,p,score\na,1,0.9,2\nb,0,"0.2,-1\n', "well-formed CSV"),
        ("id,pred,p,score\na,1,0.9,2\nb,0,0.2,-1,5,5\n", "well-formed CSV"),
    ],
)
def test_bad_pool_files_give_one_line_exit_2_and_no_session(tmp_path, content, message):
    pool = _write(tmp_path, "pool.csv", content)
    session = tmp_path / "s.bae"
    res = run("init", pool, "--measure", "f1", "--session", session, *POOL_OPTS)
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pool.csv"]  # no session, no temp file


def test_help_and_version():
    assert "bae init" in ok().stdout  # plain `bae`: the help
    assert "version" in ok("--version").stdout
    res = run("nope")
    assert res.exit_code == 2 and res.stderr == "error: No such command 'nope'.\n"


def test_changed_pool_and_bad_options_are_refused(demo_csv, tmp_path):
    path, _, _ = demo_csv
    pool = tmp_path / "pool.csv"
    shutil.copy(path, pool)
    session = tmp_path / "s.bae"
    ok("init", pool, "--measure", "f1", "--session", session, *POOL_OPTS)
    res = run("init", pool, "--measure", "f1", "--session", session, *POOL_OPTS)
    assert res.exit_code == 2 and "already exists" in res.stderr
    res = run("init", pool, "--measure", "nope", "--session", tmp_path / "x.bae", *POOL_OPTS)
    assert res.exit_code == 2 and "unknown measure 'nope'" in res.stderr
    res = run("init", pool, "--measure", "f1", "--session", tmp_path / "x.bae")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1  # click usage errors: one line too
    before = session_state(session)
    with pool.open("a") as fh:
        fh.write("d-extra,0,0.01,-9.0,extra\n")
    for cmd in (
        ["status", session],
        ["next", session],
        ["report", session, "--out", tmp_path / "r.html"],
    ):
        res = run(*cmd)
        assert res.exit_code == 2, cmd
        assert res.stderr.count("\n") == 1 and "changed since the session was created" in res.stderr
    assert session_state(session) == before


def test_pos_label_and_classes_take_the_predictions_type(tmp_path):
    # --pos-label 1 failed on a 0/1 pool ("pos_label='1' is not one of the classes [0, 1]"),
    # --classes 0,1 on float predictions, and the label "1" on float classes
    from bayes_activeeval.io import PoolSpec, label_codec, read_pool

    rng = np.random.default_rng(0)
    p = rng.uniform(size=40)
    pred = (p > 0.5).astype(int)
    opts = ["--id-col", "id", "--pred-col", "pred", "--prob-col", "prob", "--measure", "f1"]
    pools = {
        "int": pred,
        "float": pred.astype(float),
        "bool": pred.astype(bool),
        "text": np.where(pred == 1, "spam", "ham"),
    }
    for name, values in pools.items():
        frame = pd.DataFrame({"id": _ids(40), "pred": values, "prob": p})
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
    cases = [
        ("int", ["--pos-label", "1"], 1),
        ("int", ["--pos-label", "0", "--classes", "0,1"], 0),
        ("float", ["--pos-label", "1"], 1.0),
        ("float", ["--classes", "0,1"], 1.0),
        ("bool", ["--pos-label", "false"], False),
        ("bool", ["--pos-label", "0", "--classes", "false,true"], False),
        ("text", ["--pos-label", "spam"], "spam"),
    ]
    for k, (name, extra, pos) in enumerate(cases):
        session = tmp_path / f"s{k}.bae"
        ok("init", tmp_path / f"{name}.csv", "--session", session, *opts, *extra)
        with Session.open(str(session), readonly=True) as s:
            assert s.pool.pos_label == pos and type(s.pool.pos_label.item()) is type(pos), extra
    res = run("init", tmp_path / "int.csv", "--session", tmp_path / "x.bae", *opts,
              "--pos-label", "2")  # fmt: skip
    assert res.exit_code == 2 and "pos_label=2 is not one of the classes [0, 1]" in res.stderr
    res = run("init", tmp_path / "int.csv", "--session", tmp_path / "x.bae", *opts,
              "--pos-label", "yes")  # fmt: skip
    assert res.exit_code == 2 and "pos_label 'yes' is not a whole number" in res.stderr
    # labels typed as text: "1" and "1.0" are the class 1.0 of float predictions
    pf = read_pool(tmp_path / "float.csv", PoolSpec(pred="pred", prob="prob", id_col="id"))
    parse = label_codec(pf.pool)
    assert parse("1") == parse("1.0") == parse(" 1e0 ") == 1.0 and parse("0") == 0.0
    with pytest.raises(ValueError, match="label '2' is not one of the classes"):
        parse("2")
    batch = tmp_path / "b.csv"
    ok("next", tmp_path / "s2.bae", "--n", 3, "--out", batch)
    ids = pd.read_csv(batch, dtype=str)["id"]
    labels = _write(tmp_path, "l.csv", "id,label\n" + "".join(f"{i},1\n" for i in ids))
    assert "recorded 3" in ok("record", tmp_path / "s2.bae", labels).output


# -- interactive labeling -------------------------------------------------------------------------
def test_label_interactive_saves_each_answer(demo_csv, tmp_path):
    path, _, _truth = demo_csv
    session = tmp_path / "s.bae"
    ok("init", path, "--measure", "f1", "--session", session, *POOL_OPTS, "--text-col", "text")
    res = ok("label", session, "--n", 4, input="1\nmaybe\n0\ns\nq\n")
    assert "demo item " in res.stdout  # the text column is shown
    assert "not one of the classes" in res.stdout  # a bad answer is asked again
    with Session.open(session) as s:
        got = s.labels()
        assert got["label"].tolist() == ["1", "0"]
        assert (got["source"] == "interactive").all()
        pending = s.pending_items()
    assert pending.size == 2  # the skipped item and the one never reached
    # end of input (Ctrl-D) stops cleanly too, keeping what was saved
    res = ok("label", session, input="1\n")
    with Session.open(session) as s:
        assert s.n_labels == 3


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pty")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_label_in_a_real_terminal_survives_sigkill(demo_csv, tmp_path):
    pexpect = pytest.importorskip("pexpect")
    path, _, _ = demo_csv
    session = tmp_path / "s.bae"
    ok("init", path, "--measure", "f1", "--session", session, *POOL_OPTS, "--text-col", "text")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "bayes_activeeval.cli", "label", str(session), "--n", "5"],
        env=env,
        timeout=60,
        encoding="utf-8",
    )
    for answer in ("1", "0"):
        child.expect(r"label \(0/1; s=skip, q=quit\)")
        child.sendline(answer)
    child.expect(r"\[3/5\] item")
    child.expect(r"label \(0/1")  # asked for the third label: the first two are saved
    child.kill(signal.SIGKILL)
    child.wait()
    with Session.open(session) as s:
        assert s.labels()["label"].tolist() == ["1", "0"]


# -- (d) the report in a browser ------------------------------------------------------------------
def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    return None


_CHECK = """<script>
window.addEventListener('load', () => {
  const imgs = Array.from(document.images);
  const pre = document.createElement('pre'); pre.id = 'imgcheck';
  pre.textContent = JSON.stringify(imgs.map(i => [i.complete, i.naturalWidth, i.naturalHeight]));
  document.body.appendChild(pre);
});
</script></body>"""


@pytest.mark.skipif(_chromium() is None, reason="no Chromium installed")
def test_report_renders_in_headless_chromium(labeled_session, tmp_path):
    import matplotlib.image as mpimg

    session, ids, truth = labeled_session
    rest = tmp_path / "rest.csv"
    pd.DataFrame({"id": ids[3:], "label": [truth[i] for i in ids[3:]]}).to_csv(rest, index=False)
    ok("record", session, rest)
    report = tmp_path / "report.html"
    ok("report", session, "--out", report)
    flags = [
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={tempfile.mkdtemp()}",
    ]  # fmt: skip
    png = tmp_path / "shot.png"
    subprocess.run(
        [_chromium(), *flags, f"--screenshot={png}", "--window-size=1200,2000", report.as_uri()],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert png.exists(), "chromium wrote no screenshot"
    img = mpimg.imread(png)[..., :3]
    assert img.shape[:2] == (2000, 1200)
    assert img.std() > 0.05  # not blank
    assert np.mean(img.min(axis=2) < 0.95) > 0.02  # a fair share of non-white pixels

    checked = tmp_path / "checked.html"
    checked.write_text(report.read_text().replace("</body>", _CHECK))
    dom = subprocess.run(
        [_chromium(), *flags, "--dump-dom", checked.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    ).stdout
    start = dom.index('<pre id="imgcheck">') + len('<pre id="imgcheck">')
    images = json.loads(dom[start : dom.index("</pre>", start)])
    assert len(images) == 3
    for complete, width, height in images:  # every embedded PNG decoded
        assert complete and width > 300 and height > 150


# -- compare --------------------------------------------------------------------------------------
def test_compare_two_models(tmp_path):
    sp = make_classification_pool(20_000, 0.05, separation=4.0, n_models=2, rng=5)
    pool = sp.pool
    ids = _ids(pool.n_items)
    frame = pd.DataFrame({"id": ids})
    for m in pool.models:
        frame[f"pred_{m}"] = pool.view(m).pred
        frame[f"p_{m}"] = pool.view(m).positive_prob()
    frame.to_csv(tmp_path / "pool.csv", index=False)
    truth = dict(zip(ids, sp.labels.tolist(), strict=True))
    session = tmp_path / "c.bae"
    ok("init", tmp_path / "pool.csv", "--measure", "accuracy", "--session", session,
       "--id-col", "id", "--pred", "m0=pred_m0", "--pred", "m1=pred_m1",
       "--prob", "m0=p_m0", "--prob", "m1=p_m1", "--seed", 2)  # fmt: skip
    run_rounds(session, (150, 150), truth, tmp_path)
    out = ok("compare", session).stdout
    assert "m0" in out and "m1" in out and "pvalue" in out

    with Session.open(session) as s:
        draws, labels = s.labeled_draws()
    ref = bae.compare(pool, "accuracy", draws, labels, models=("m0", "m1"))
    row = next(ln for ln in out.splitlines() if ln.strip().startswith("m0") and "m1" in ln)
    assert f"{ref.pvalue:.4g}" in row.split() and f"{ref.statistic:.4g}" in row.split()
    # three models: the simultaneous all-pairs test
    sp3 = make_classification_pool(5_000, 0.2, n_models=3, rng=6)
    frame = pd.DataFrame({"id": _ids(5_000)})
    opts = []
    for m in sp3.pool.models:
        frame[f"pred_{m}"] = sp3.pool.view(m).pred
        frame[f"p_{m}"] = sp3.pool.view(m).positive_prob()
        opts += ["--pred", f"{m}=pred_{m}", "--prob", f"{m}=p_{m}"]
    frame.to_csv(tmp_path / "pool3.csv", index=False)
    s3 = tmp_path / "c3.bae"
    ok("init", tmp_path / "pool3.csv", "--measure", "accuracy", "--session", s3, "--id-col", "id",
       *opts)  # fmt: skip
    truth3 = dict(zip(_ids(5_000), sp3.labels.tolist(), strict=True))
    run_rounds(s3, (100,), truth3, tmp_path)
    out3 = ok("compare", s3).stdout
    assert (
        "raw_pvalue" in out3 and len([ln for ln in out3.splitlines() if " m2 " in f" {ln} "]) >= 2
    )


# -- issue 13: intervals at the boundary, one interval everywhere ----------------------------------
def _boundary_pool(tmp_path: Path, n: int = 5_000) -> tuple[Path, dict]:
    """Two models; m0 is right on every item but its probabilities say 60-99% (underconfident)."""
    rng = np.random.default_rng(0)
    y = (rng.random(n) < 0.3).astype(int)
    conf = rng.uniform(0.6, 0.99, n)
    flip = rng.random(n) < 0.1
    frame = pd.DataFrame(
        {
            "id": _ids(n),
            "pred_m0": y,
            "p_m0": np.where(y == 1, conf, 1 - conf),
            "pred_m1": np.where(flip, 1 - y, y),
            "p_m1": np.where(flip, 1 - y, y) * 0.8 + 0.1,
        }
    )
    frame.to_csv(tmp_path / "pool.csv", index=False)
    return tmp_path / "pool.csv", dict(zip(frame["id"], y.tolist(), strict=True))


def test_status_at_the_boundary_is_never_a_point_and_compare_agrees(tmp_path):
    pool_csv, truth = _boundary_pool(tmp_path)
    session = tmp_path / "b.bae"
    ok("init", pool_csv, "--measure", "accuracy", "--session", session, "--id-col", "id",
       "--pred", "m0=pred_m0", "--pred", "m1=pred_m1", "--prob", "m0=p_m0", "--prob", "m1=p_m1",
       "--seed", 1)  # fmt: skip
    run_rounds(session, (20,), truth, tmp_path)
    st = json.loads(ok("status", session, "--json").stdout)
    m0 = next(r for r in st["estimates"] if r["model"] == "m0")
    assert m0["estimate"] == pytest.approx(1.0) and m0["stderr"] < 1e-9  # every label correct
    # the issue printed [1.0000, 1.0000]: now a score interval reaching down by ~z²/(n + z²)
    assert m0["high"] == 1.0 and 0.75 < m0["low"] < 0.95
    assert "interval [1.0000, 1.0000]" not in ok("status", session).stdout
    # `bae compare` shows the models with the interval `bae status` prints
    from bayes_activeeval.report import comparison_table

    with Session.open(session) as s:
        est, tests = comparison_table(s, 0.95)
    for r in st["estimates"]:
        row = est.set_index("model").loc[r["model"]]
        assert (row["low"], row["high"]) == pytest.approx((r["low"], r["high"]), rel=1e-12)
    lo, hi = tests.loc[0, "low"], tests.loc[0, "high"]
    assert -1.0 <= lo < hi <= 1.0


def test_adaptive_default_session_status_and_report_share_the_interval(tmp_path):
    """The default adaptive design (the difference estimate): `bae status`, the estimate and the
    report's estimate path give one interval; every label correct puts the estimate on the bound
    with a rule-of-three interval of positive width (issue 13)."""
    from bayes_activeeval.report import estimate_path

    pool_csv, truth = _boundary_pool(tmp_path, n=2_000)
    session = tmp_path / "a.bae"
    ok("init", pool_csv, "--measure", "accuracy", "--session", session, "--id-col", "id",
       "--pred-col", "pred_m0", "--prob-col", "p_m0", "--design", "adaptive", "--seed", 0)  # fmt: skip
    run_rounds(session, (30, 30), truth, tmp_path, exact=True)
    r = json.loads(ok("status", session, "--json").stdout)["estimates"][0]
    assert r["estimate"] == 1.0 and r["high"] == 1.0 and 0.8 < r["low"] < 1.0
    with Session.open(session) as s:
        est = s.estimate()
        assert est.estimator == "difference" and est.event_weight is not None
        assert est.confidence_interval(0.95) == pytest.approx((r["low"], r["high"]), rel=1e-12)
        path = estimate_path(s, 0.95)
    assert len(path) == 2
    last = path.iloc[-1]
    assert (last["low"], last["high"]) == pytest.approx((r["low"], r["high"]), rel=1e-12)
    assert last["estimate"] == r["estimate"]


def test_status_posterior_at_the_boundary_and_the_conflict_note(tmp_path):
    """The issue's 219-of-219 case: an underconfident model right on every labeled item. With the
    model's own probabilities as the cells' prior (``prior="model"``, the default before) the
    posterior follows them and excludes the truth, and the conflict note says so; the default
    prior (recalibrated from the labels) agrees with the confidence interval, and `bae status`
    gives no note."""
    from bayes_activeeval.report import posterior_conflicts, posterior_summary

    pool_csv, truth = _boundary_pool(tmp_path)
    session = tmp_path / "u.bae"
    ok("init", pool_csv, "--measure", "accuracy", "--session", session, "--id-col", "id",
       "--pred-col", "pred_m0", "--prob-col", "p_m0", "--seed", 0)  # fmt: skip
    run_rounds(session, (110, 110), truth, tmp_path)
    st = json.loads(ok("status", session, "--json").stdout)
    r = st["estimates"][0]
    post = st["posterior"]["measure[accuracy]"]
    assert r["estimate"] == pytest.approx(1.0) and r["high"] == 1.0 and r["low"] > 0.97
    assert post["eti89_ub"] > r["low"] and post["mean"] > r["low"]  # the two answers agree
    assert st["notes"] == []
    assert "do not overlap" not in ok("status", session).stdout
    with Session.open(str(session), readonly=True) as s:
        old = posterior_summary(s.posterior(prior="model"))
        rows = s.status()["estimates"]
    assert old.loc["measure[accuracy]", "eti89_ub"] < r["low"]  # the contradiction, reproduced
    notes = posterior_conflicts(rows, old, "accuracy")
    assert len(notes) == 1 and "do not overlap" in notes[0]
    assert "Trust the confidence interval" in notes[0]
