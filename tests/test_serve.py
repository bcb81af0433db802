"""``bae serve`` in a real headless browser (Debian's chromium through chromium-driver and
Selenium), together with annotators working through ``bae next``/``bae record``: the scripted
team session of issue 14, and the page's security rules (escaping, CSRF, leases, token)."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from cli_helpers import ok

from bayes_activeeval.datasets import make_classification_pool
from bayes_activeeval.session import Session

ROOT = Path(__file__).resolve().parents[1]
POOL_OPTS = ["--id-col", "id", "--pred-col", "pred", "--prob-col", "p", "--score-col", "score"]
BUDGET = 40


def _browser() -> tuple[str, str] | None:
    chromium = next(
        (shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None
    )
    driver = shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


pytestmark = pytest.mark.skipif(
    _browser() is None, reason="no chromium (and chromium-driver) installed"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(session: Path, port: int, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bayes_activeeval.cli",
            "serve",
            str(session),
            "--port",
            str(port),
            *extra,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_ready(proc: subprocess.Popen, port: int) -> str:
    line = ""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if line.startswith("open ") or proc.poll() is not None:
            break
    assert line.startswith("open "), (line, proc.poll())
    url = line.split()[1]
    while time.monotonic() < deadline:  # the socket is bound a moment after the line
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return url
        except OSError:
            time.sleep(0.1)
    raise AssertionError("server did not start")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """A pool whose text fields hold markup, a session (static design, budget 40) and its server
    on loopback; beside it a second session served on 0.0.0.0 (token required) for the checks
    of forged requests. Both servers start at once (one start-up wait)."""
    d = tmp_path_factory.mktemp("serve")
    sp = make_classification_pool(3_000, 0.2, separation=3.0, rng=31)
    v = sp.pool.view()
    ids = [f"s{i}" for i in range(sp.pool.n_items)]
    pd.DataFrame(
        {
            "id": ids,
            "pred": v.pred,
            "p": v.positive_prob(),
            "score": sp.pool.scores["model"],
            "text": [f"<script>window.pwned=1</script><b>item {i}</b> & co" for i in range(3_000)],
            "source": [f"=HYPERLINK('x{i}')" for i in range(3_000)],
        }
    ).to_csv(d / "pool.csv", index=False)
    truth = dict(zip(ids, sp.labels.tolist(), strict=True))
    session, other = d / "team.bae", d / "other.bae"
    ok("init", d / "pool.csv", "--measure", "accuracy", "--session", session, *POOL_OPTS,
       "--text-col", "text", "--text-col", "source", "--budget", BUDGET, "--seed", 4)  # fmt: skip
    ok("init", d / "pool.csv", "--measure", "accuracy", "--session", other, *POOL_OPTS)
    port, port2 = free_port(), free_port()
    procs = [
        launch(session, port, "--n", str(BUDGET), "--batch", "4", "--annotator", "web"),
        launch(other, port2, "--host", "0.0.0.0", "--batch", "2"),
    ]
    try:
        url, url2 = wait_ready(procs[0], port), wait_ready(procs[1], port2)
        yield {"dir": d, "session": session, "truth": truth, "url": url, "port": port,
               "other": other, "url2": url2, "port2": port2}  # fmt: skip
    finally:
        for p in procs:
            stop(p)


@pytest.fixture(scope="module")
def browsers():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = _browser()
    out = []
    for _ in range(2):
        opts = webdriver.ChromeOptions()
        opts.binary_location = chromium
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--no-first-run", "--disable-background-networking", "--disable-sync",
                     f"--user-data-dir={tempfile.mkdtemp()}"):  # fmt: skip
            opts.add_argument(flag)
        out.append(webdriver.Chrome(options=opts, service=Service(executable_path=driver)))
    yield out
    for b in out:
        b.quit()


def shown_item(driver) -> str | None:
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.ID, "item")
    return found[0].get_attribute("data-item") if found else None


def gone(page):
    """``staleness_of`` that also counts chromium's "node does not belong to the document"
    (a WebDriverException raised instead of StaleElementReferenceException while the old page
    is torn down) as the page being replaced."""
    from selenium.common.exceptions import WebDriverException

    def check(_driver) -> bool:
        try:
            page.is_enabled()
        except WebDriverException:  # StaleElementReferenceException is a subclass
            return True
        return False

    return check


def press(driver, key: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    page = driver.find_element(By.TAG_NAME, "html")
    driver.find_element(By.TAG_NAME, "body").send_keys(key)
    WebDriverWait(driver, 30).until(gone(page))


def batch_ids(path: Path) -> list[str]:
    return pd.read_csv(path, dtype=str, keep_default_na=False)["id"].tolist()


def labels_csv(path: Path, rows: list[tuple[str, int]]) -> Path:
    pd.DataFrame(rows, columns=["id", "label"]).to_csv(path, index=False)
    return path


def test_two_annotators_and_two_browsers_label_one_session_at_once(team, browsers):
    """Alice and Bob work through `bae next`/`bae record`, Carol and Dave in two browsers on
    `bae serve`, at the same time; Alice mistypes one label (fixed by `bae relabel`), Carol
    mistypes one (fixed with undo on the page), Bob labels one of Alice's items differently (a
    disagreement). At the end every annotation is there exactly once and the estimate equals
    that of the same labels recorded by one person."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    d, s, truth = team["dir"], team["session"], team["truth"]
    expected: list[tuple[str, str, str, str]] = []  # (item, annotator, kind, label)

    ok("next", s, "--n", 8, "--stage-size", BUDGET, "--annotator", "alice", "--out", d / "a.csv")
    ok("next", s, "--n", 8, "--annotator", "bob", "--out", d / "b.csv")
    alice, bob = batch_ids(d / "a.csv"), batch_ids(d / "b.csv")
    assert len(alice) == len(bob) == 8 and not set(alice) & set(bob)

    carol, dave = browsers
    carol.get(team["url"] + "?annotator=carol")
    dave.get(team["url"] + "?annotator=dave")
    assert carol.find_element(By.ID, "annotator").text == "carol"
    # the fields are shown escaped: markup is text, the injected script never ran
    cell = carol.find_element(By.CSS_SELECTOR, "#item td")
    assert cell.text.startswith("<script>window.pwned=1</script><b>item ")
    assert carol.execute_script("return window.pwned === undefined")

    seen = {"carol": [], "dave": []}
    mistyped = False
    recorded_cli = False
    while True:
        progressed = False
        for name, drv in (("carol", carol), ("dave", dave)):
            item = shown_item(drv)
            if item is None:
                continue
            progressed = True
            assert (
                item not in alice
                and item not in bob
                and item not in seen["dave" if name == "carol" else "carol"]
            )
            y = truth[item]
            if name == "carol" and not mistyped and len(seen["carol"]) == 1:
                mistyped = True
                press(drv, str(1 - y))  # a slip of the finger …
                expected.append((item, "carol", "label", str(1 - y)))
                press(drv, "u")  # … undone: the same item comes back
                assert shown_item(drv) == item
                assert "your new answer replaces it" in drv.find_element(By.ID, "item").text
                press(drv, str(y))
                expected.append((item, "carol", "correction", str(y)))
            else:
                press(drv, str(y))
                expected.append((item, name, "label", str(y)))
            seen[name].append(item)
        if not recorded_cli and len(seen["carol"]) >= 3:
            # meanwhile, at their desks: Alice (one slip) and Bob record their batches
            recorded_cli = True
            slip = alice[2]
            rows = [(i, 1 - truth[i] if i == slip else truth[i]) for i in alice]
            ok("record", s, labels_csv(d / "la.csv", rows), "--annotator", "alice")
            expected += [(i, "alice", "label", str(y)) for i, y in rows]
            rows = [(i, truth[i]) for i in bob] + [(alice[5], 1 - truth[alice[5]])]
            ok("record", s, labels_csv(d / "lb.csv", rows), "--annotator", "bob")
            expected += [(i, "bob", "label", str(y)) for i, y in rows]
            ok("relabel", s, slip, truth[slip], "--reason", "checked the slip", "--annotator",
               "lead")  # fmt: skip
            expected.append((slip, "lead", "correction", str(truth[slip])))
        if not progressed:
            break
    assert recorded_cli and mistyped
    assert len(seen["carol"]) + len(seen["dave"]) == BUDGET - 16
    assert seen["carol"] and seen["dave"]
    carol.refresh()  # (she may have finished while Dave still held items)
    done = carol.find_element(By.ID, "done").text
    assert "budget of 40 is used up" in done
    # the page shows progress and the live estimate with its interval and plot
    assert "40 of 40 labels (100%)" in carol.find_element(By.ID, "progress").text
    assert carol.find_elements(By.CSS_SELECTOR, "svg#plot polyline")
    assert "95% interval" in carol.page_source
    WebDriverWait(carol, 30).until(lambda d: "live: 40 labels; accuracy" in d.find_element(
        By.ID, "live").text)  # fmt: skip

    with Session.open(s, readonly=True) as ss:
        got = sorted((r.id, r.annotator, r.kind, r.label) for r in ss.annotations().itertuples())
        st = ss.status()
    assert got == sorted(expected)  # every annotation, each exactly once
    assert st["labels"] == BUDGET and st["pending"] == 0 and st["corrections"] == 2
    assert st["agreement"]["items"] == 1 and st["agreement"]["agree"] == 0.0

    # the same labels recorded by one person
    ref = d / "ref.bae"
    ok("init", d / "pool.csv", "--measure", "accuracy", "--session", ref, *POOL_OPTS,
       "--budget", BUDGET, "--seed", 4)  # fmt: skip
    ok("next", ref, "--n", BUDGET, "--out", d / "ref.csv")
    ids = batch_ids(d / "ref.csv")
    ok("record", ref, labels_csv(d / "rl.csv", [(i, truth[i]) for i in ids]))
    want = json.loads(ok("status", ref, "--json").stdout)["estimates"]
    have = json.loads(ok("status", s, "--json").stdout)["estimates"]
    assert [(r["estimate"], r["stderr"]) for r in have] == [
        (r["estimate"], r["stderr"]) for r in want
    ]


def _client():
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    return opener, jar


def _call(opener, url, data=None, headers=None):
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with opener.open(req, timeout=20) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_page_refuses_forged_requests_and_items_of_others(team):
    # a loopback server answers only requests addressed to it (no DNS rebinding)
    port = team["port"]
    assert _call(_client()[0], team["url"], headers={"Host": f"evil.example:{port}"})[0] == 403
    # any other address: the printed token is required, then carried by a cookie
    s, url = team["other"], team["url2"]
    assert "token=" in url
    base = f"http://127.0.0.1:{team['port2']}/"
    assert _call(_client()[0], base)[0] == 403
    assert _call(_client()[0], base + "?token=wrong")[0] == 403
    opener, _ = _client()
    code, page = _call(opener, base + "?" + url.split("?", 1)[1])
    assert code == 200
    code, page = _call(opener, base)
    assert code == 200  # the cookie carries the token from now on
    csrf = re.search(r"name='csrf' value='([0-9a-f]+)'", page).group(1)
    mine = re.search(r"data-item='([^']+)'", page).group(1)
    with Session.open(s, readonly=True) as ss:
        leased = set(ss.leases()["id"])
        other = next(str(i) for i in ss.pool_file.ids[ss.pending_items()] if i not in leased)
    post = f"{base}label"
    # no CSRF token, a wrong one, another origin, another browser: refused, nothing written
    assert _call(opener, post, f"item={mine}&label=1".encode())[0] == 403
    assert _call(opener, post, f"item={mine}&label=1&csrf=00".encode())[0] == 403
    code, _ = _call(opener, post, f"item={mine}&label=1&csrf={csrf}".encode(),
                    {"Origin": "http://evil.example"})  # fmt: skip
    assert code == 403
    stranger, _ = _client()
    assert _call(stranger, base + "?" + url.split("?", 1)[1])[0] == 200
    assert _call(stranger, post, f"item={mine}&label=1&csrf={csrf}".encode())[0] == 403
    # an item not leased to this browser: refused
    code, body = _call(opener, post, f"item={other}&label=1&csrf={csrf}".encode())
    assert code == 409 and "not leased to you" in body
    with Session.open(s, readonly=True) as ss:
        assert ss.n_labels == 0
    code, _ = _call(opener, post, f"item={mine}&label=1&csrf={csrf}".encode())
    assert code == 200  # redirected to the next item
    with Session.open(s, readonly=True) as ss:
        assert list(ss.labels()["id"]) == [mine]
    assert json.loads(_call(opener, base + "api/status")[1])["labels"] == 1


# ------------------------------------------------------------------------------------------------
# a ranking session on the page: a batch is a query with every document to grade
# ------------------------------------------------------------------------------------------------
RANKING_OPTS = ["--task", "ranking", "--measure", "err", "--rank", "a=rank_a", "--rank",
                "b=rank_b", "--relevance-cols", "p0,p1,p2,p3,p4", "--cost-col", "cost",
                "--budget", "6", "--seed", "3"]  # fmt: skip


@pytest.fixture(scope="module")
def ranking_team(tmp_path_factory):
    """A ranking pool whose query text holds markup, a session comparing rankers a and b on
    ERR (budget 6 cost units) and its server on loopback (two queries leased per browser)."""
    from bayes_activeeval import ranking

    d = tmp_path_factory.mktemp("serve_ranking")
    data = ranking.make_ranking_pool(80, min_docs=3, max_docs=5, changed=0.5, rng=7)
    frame = data.frame.drop(columns=["grade"])
    frame["query"] = [f"<script>window.pwned=1</script>what is {q}?" for q in frame.qid]
    frame["title"] = [f"<i>page {x}</i>" for x in frame.doc]
    frame.to_csv(d / "runs.csv", index=False)
    g = data.frame
    truth = {(q, x): int(y) for q, x, y in zip(g.qid, g.doc, g.grade, strict=True)}
    session = d / "r.bae"
    ok("init", d / "runs.csv", "--session", session, *RANKING_OPTS, "--text-col", "query",
       "--text-col", "title")  # fmt: skip
    port = free_port()
    proc = launch(session, port, "--batch", "2", "--annotator", "web")
    try:
        yield {"dir": d, "session": session, "truth": truth, "port": port,
               "url": wait_ready(proc, port)}  # fmt: skip
    finally:
        stop(proc)


def _grades_csv(batch: Path, truth, out: Path) -> Path:
    b = pd.read_csv(batch, dtype={"qid": str, "doc": str})
    b["grade"] = [truth[(q, x)] for q, x in zip(b.qid, b.doc, strict=True)]
    b[["qid", "doc", "grade"]].to_csv(out, index=False)
    return out


def test_ranking_session_graded_in_a_browser_and_at_a_desk(ranking_team, browsers):
    """Alice grades two queries through `bae next`/`bae record` while Carol grades the others on
    the page: digits grade the highlighted document, Enter saves the query; she undoes her first
    query (saved with wrong grades) and saves it again (a correction). A script holding two
    queries is refused grades of a query it does not hold and a half-graded query, then
    releases them. At the end every annotation is there once and the estimate equals that of
    the same grades recorded by one person."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    d, s, truth = ranking_team["dir"], ranking_team["session"], ranking_team["truth"]
    url = ranking_team["url"]
    expected: list[tuple[str, str, str, dict]] = []  # (query, annotator, kind, grades)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None  # a release answers 303 → /; following it would lease queries again

    # a script: its two queries are leased to it; forged grades are refused, nothing written
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), NoRedirect()
    )
    assert _call(opener, url)[0] == 303  # the first visit only gives the browser its cookie
    code, page = _call(opener, url)
    assert code == 200
    csrf = re.search(r"name='csrf' value='([0-9a-f]+)'", page).group(1)
    held = re.search(r"data-item='([^']+)'", page).group(1)
    docs = re.findall(r"<tr class='doc' data-doc='([^']+)'", page)
    from bayes_activeeval.ranking_session import RankingSession

    with RankingSession.open(str(s), readonly=True) as rs:
        drawn = [str(rs.pool.query_ids[q]) for q in rs._order()]
    other = drawn[-1]  # drawn, not leased to the script
    every = "&".join(f"g{j}=1" for j in range(5))
    code, body = _call(opener, url + "label", f"item={other}&{every}&csrf={csrf}".encode())
    assert code == 409 and "not leased to you" in body
    code, body = _call(opener, url + "label", f"item={held}&g0=1&csrf={csrf}".encode())
    assert code == 409 and "has no grade" in body
    assert _call(opener, url + "release", f"csrf={csrf}".encode())[0] == 303

    ok("next", s, "--n", 2, "--annotator", "alice", "--out", d / "a.csv")
    alice = pd.read_csv(d / "a.csv", dtype=str).qid.unique().tolist()
    assert held in alice  # the released queries went to the next who asked

    carol = browsers[0]
    carol.get(url + "?annotator=carol")
    assert carol.find_element(By.ID, "annotator").text == "carol"
    head = carol.find_element(By.CSS_SELECTOR, "#query td").text
    assert head.startswith("<script>window.pwned=1</script>what is q")  # escaped, shown once
    assert carol.execute_script("return window.pwned === undefined")
    assert carol.find_element(By.CSS_SELECTOR, "tr.doc td:nth-child(3)").text.startswith("<i>page")

    undone = recorded = False
    seen: list[str] = []
    while carol.find_elements(By.ID, "query"):
        q = carol.find_element(By.ID, "query").get_attribute("data-item")
        assert q not in alice and q not in seen
        rows = carol.find_elements(By.CSS_SELECTOR, "tr.doc")
        want = {r.get_attribute("data-doc"): truth[(q, r.get_attribute("data-doc"))] for r in rows}
        if not undone:  # keyboard, with wrong grades; then undo and fix them with the mouse
            wrong = {x: (g + 1) % 5 for x, g in want.items()}
            carol.find_element(By.TAG_NAME, "body").send_keys("".join(map(str, wrong.values())))
            press(carol, Keys.ENTER)
            expected.append((q, "carol", "label", wrong))
            press(carol, "u")
            assert carol.find_element(By.ID, "query").get_attribute("data-item") == q
            assert "your new grades replace yours" in carol.find_element(By.ID, "query").text
            checked = [e.get_attribute("value") for e in
                       carol.find_elements(By.CSS_SELECTOR, "tr.doc input:checked")]  # fmt: skip
            assert checked == [str(g) for g in wrong.values()]  # her grades, preselected
            expected.append((q, "carol", "correction", want))
            undone = True
        else:
            expected.append((q, "carol", "label", want))
        for j, g in enumerate(want.values()):
            carol.find_element(By.CSS_SELECTOR, f"input[name='g{j}'][value='{g}']").click()
        page = carol.find_element(By.TAG_NAME, "html")
        carol.find_element(By.ID, "save").click()
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(carol, 30).until(gone(page))
        seen.append(q)
        if not recorded:  # meanwhile, at her desk, Alice records her two queries
            ok("record", s, _grades_csv(d / "a.csv", truth, d / "ga.csv"), "--annotator", "alice")
            recorded = True
            for qq, grp in pd.read_csv(d / "ga.csv", dtype={"qid": str, "doc": str}).groupby(
                "qid", sort=False
            ):
                expected.append((qq, "alice", "label", dict(zip(grp.doc, grp.grade, strict=True))))
    assert undone and recorded and seen
    assert len(docs) >= 3
    assert "every query of the budget is graded" in carol.find_element(By.ID, "done").text
    assert "queries graded" in carol.find_element(By.ID, "progress").text
    assert "95% interval" in carol.page_source
    live = f"live: {len(seen) + 2} queries graded; err = "
    WebDriverWait(carol, 30).until(lambda d: live in d.find_element(By.ID, "live").text)

    with RankingSession.open(str(s), readonly=True) as rs:
        got = sorted((r.id, r.annotator, r.kind, json.dumps(json.loads(r.label), sort_keys=True))
                     for r in rs.annotations().itertuples())  # fmt: skip
        st = rs.status()
    assert got == sorted((q, a, k, json.dumps({str(x): int(g) for x, g in v.items()},
                                              sort_keys=True)) for q, a, k, v in expected)  # fmt: skip
    assert st["queries_graded"] == st["queries_in_sample"] and st["corrections"] == 1
    assert json.loads(_call(opener, url + "api/status")[1])["queries_graded"] == len(seen) + 2

    ref = d / "ref.bae"  # the same grades recorded by one person
    ok("init", d / "runs.csv", "--session", ref, *RANKING_OPTS)
    ok("next", ref, "--n", 100, "--out", d / "ref.csv")
    ok("record", ref, _grades_csv(d / "ref.csv", truth, d / "gref.csv"))
    want = json.loads(ok("status", ref, "--json").stdout)
    have = json.loads(ok("status", s, "--json").stdout)
    assert (have["estimate"], have["stderr"], have["pvalue"]) == (
        want["estimate"], want["stderr"], want["pvalue"])  # fmt: skip
