"""``bae serve``'s application driven in-process through ASGI (no browser, no socket): cookies and
leases, second annotations, refused annotator names, a session file replaced under the server.
The defects of review 4 (C, I, M, A) each have a test here."""

from __future__ import annotations

import asyncio
import os
import re
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pandas as pd
import pytest
from cli_helpers import labeled_pool_csv

from bayes_activeeval.io import PoolSpec
from bayes_activeeval.serve import ServeConfig, create_app
from bayes_activeeval.session import Design, Session, SessionError

PORT = 8765
SPEC = PoolSpec(pred="pred", prob="p", id_col="id", text_cols=("text",))


class Client:
    """A minimal browser for an ASGI app: requests, a cookie jar (``keep=False``: none)."""

    def __init__(self, app, keep: bool = True):
        self.app, self.keep, self.jar = app, keep, {}

    def request(self, method: str, url: str, body: bytes = b"", follow: bool = True,
                host: str = f"127.0.0.1:{PORT}", extra=()):  # fmt: skip
        parts = urlsplit(url)
        headers = [(b"host", host.encode()), *((k.encode(), v.encode()) for k, v in extra)]
        if self.jar:
            headers.append((b"cookie", "; ".join(f"{k}={v}" for k, v in self.jar.items()).encode()))
        if method == "POST":
            headers += [
                (b"content-type", b"application/x-www-form-urlencoded"),
                (b"origin", f"http://127.0.0.1:{PORT}".encode()),
            ]
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": method, "scheme": "http", "path": parts.path or "/",
            "raw_path": (parts.path or "/").encode(), "query_string": parts.query.encode(),
            "root_path": "", "headers": headers, "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", PORT),
        }  # fmt: skip
        inbox = [{"type": "http.request", "body": body, "more_body": False}]
        out = {"status": 0, "headers": [], "body": b""}

        async def receive():
            return inbox.pop(0) if inbox else {"type": "http.disconnect"}

        async def send(message):
            if message["type"] == "http.response.start":
                out["status"], out["headers"] = message["status"], message["headers"]
            elif message["type"] == "http.response.body":
                out["body"] += message.get("body", b"")

        asyncio.run(self.app(scope, receive, send))
        cookies = [v.decode() for k, v in out["headers"] if k.lower() == b"set-cookie"]
        if self.keep:
            for c in cookies:
                jar = SimpleCookie()
                jar.load(c)
                self.jar.update({k: m.value for k, m in jar.items()})
        location = next((v.decode() for k, v in out["headers"] if k == b"location"), None)
        res = {"status": out["status"], "text": out["body"].decode(), "cookies": cookies,
               "location": location}  # fmt: skip
        if follow and method == "GET" and out["status"] == 303 and location:
            return self.request("GET", location, follow=False)
        return res

    def get(self, url: str = "/", follow: bool = True):
        return self.request("GET", url, follow=follow)

    def post(self, path: str, **form):
        return self.request("POST", path, urlencode(form).encode())


def item_of(page: str) -> str | None:
    m = re.search(r"id='item-id'>([^<]*)<", page)
    return m.group(1) if m else None


def csrf_of(page: str) -> str:
    return re.search(r"name='csrf' value='([0-9a-f]+)'", page).group(1)


@pytest.fixture(scope="module")
def pool_csv(tmp_path_factory):
    d = tmp_path_factory.mktemp("serveapp")
    return labeled_pool_csv(d / "pool.csv", seed=5, prefix="s", text="t{}")


def make_app(pool_csv, tmp_path, budget=None, **cfg):
    path = tmp_path / "s.bae"
    Session.create(path, pool_csv[0], SPEC, Design("accuracy", seed=2, budget=budget)).close()
    app = create_app(ServeConfig(session=str(path), port=PORT, annotator="web", **cfg))
    return app, path


def leases(path: Path) -> pd.DataFrame:
    with Session.open(path, readonly=True) as s:
        return s.leases()


def test_a_request_without_the_cookie_leases_nothing(pool_csv, tmp_path):
    """Review 4, C: a cookie-less page load leased items to a holder nobody would ever be again,
    and the browser cookie ended with the browser."""
    app, path = make_app(pool_csv, tmp_path, stage_size=10, batch=5, lease=1800.0)
    try:
        for _ in range(3):  # link previews, curl: no cookie kept
            res = Client(app, keep=False).get("/", follow=False)
            assert res["status"] == 303 and "cookie=1" in res["location"]
        assert leases(path).empty
        res = Client(app, keep=False).get("/?cookie=1")  # came back without the cookie
        assert (
            res["status"] == 200 and "needs cookies" in res["text"] and item_of(res["text"]) is None
        )
        assert leases(path).empty
        browser = Client(app)
        res = browser.get("/?annotator=alice")
        assert res["status"] == 200 and item_of(res["text"])
        cookie = next(c for c in res["cookies"] + browser_cookies(browser) if "bae_browser" in c)
        age = int(re.search(r"Max-Age=(\d+)", cookie, re.I).group(1))
        assert age >= 1800  # outlives the lease
        act = leases(path)
        assert len(act) == 5 and set(act["annotator"]) == {"alice"}
        assert act["holder"].nunique() == 1
    finally:
        app.state.session.close()


def browser_cookies(browser: Client) -> list[str]:
    """The Set-Cookie lines of a fresh page load without following the redirect."""
    fresh = Client(browser.app)
    return fresh.get("/", follow=False)["cookies"]


def test_budget_held_by_leases_says_who_holds_the_items(pool_csv, tmp_path):
    """Review 4, C: with the budget committed to items leased to others, the page said "nothing
    more to label" instead of who holds the items and until when."""
    app, _ = make_app(pool_csv, tmp_path, budget=10, stage_size=10, batch=5)
    try:
        for name in ("alice", "bob"):
            assert item_of(Client(app).get(f"/?annotator={name}")["text"])
        res = Client(app).get("/?annotator=carol")
        done = re.search(r"id='done'><p>([^<]*)<", res["text"]).group(1)
        assert "nothing more to label" not in done
        assert "alice until" in done and "bob until" in done and "UTC" in done
    finally:
        app.state.session.close()


def test_answer_to_a_leased_item_labeled_meanwhile_is_a_second_annotation(pool_csv, tmp_path):
    """Review 4, I: the page refused (409) the answer to an item leased to the browser when
    someone else labeled it meanwhile, and the answer was lost."""
    app, path = make_app(pool_csv, tmp_path)
    try:
        carol = Client(app)
        page = carol.get("/?annotator=carol")["text"]
        x = item_of(page)
        with Session.open(path) as s:  # bob labels it at his desk meanwhile
            s.record([x], [0], annotator="bob")
        res = carol.post("/label", csrf=csrf_of(page), item=x, label="1")
        assert res["status"] == 303, res["text"]
        with Session.open(path, readonly=True) as s:
            a = s.annotations()
            assert sorted(zip(a["annotator"], a["label"], strict=True)) == [
                ("bob", "0"), ("carol", "1")]  # fmt: skip
            assert s.labels().set_index("id").loc[x, "label"] == "0"  # the first counts
        # an item of the stage that was never leased to this browser is still refused
        with Session.open(path, readonly=True) as s:
            held = set(s.leases()["id"])
            other = next(str(i) for i in s.pool_file.ids[s.pending_items()] if i not in held)
        res = carol.post("/label", csrf=csrf_of(page), item=other, label="1")
        assert res["status"] == 409 and "not leased to you" in res["text"]
    finally:
        app.state.session.close()


def test_reserved_annotator_name_is_refused_with_a_message(pool_csv, tmp_path):
    """Review 4, M: ``/?annotator=(before annotators)`` was an HTTP 500."""
    app, path = make_app(pool_csv, tmp_path)
    try:
        res = Client(app).get("/?annotator=(before annotators)")
        assert res["status"] == 400 and "reserved" in res["text"]
        assert leases(path).empty
    finally:
        app.state.session.close()


def test_server_stops_accepting_answers_when_its_file_was_replaced(pool_csv, tmp_path):
    """Review 4, A: a session file replaced under the server (here by a rename, as an older
    ``bae init --overwrite`` did) took answers into the deleted file."""
    app, path = make_app(pool_csv, tmp_path)
    try:
        browser = Client(app)
        page = browser.get("/?annotator=carol")["text"]
        x = item_of(page)
        other = tmp_path / "other.bae"
        Session.create(other, pool_csv[0], SPEC, Design("accuracy", seed=9)).close()
        os.replace(other, path)
        res = browser.post("/label", csrf=csrf_of(page), item=x, label="1")
        assert res["status"] == 409 and "replaced" in res["text"]
        res = browser.get("/")
        assert res["status"] == 409 and "replaced" in res["text"] and item_of(res["text"]) is None
        with Session.open(path, readonly=True) as s:
            assert s.n_labels == 0 and s.annotations().empty
        with pytest.raises(SessionError, match="replaced"):
            app.state.session.record([x], [1], annotator="carol")
    finally:
        app.state.session.close()


def test_a_link_from_another_site_changes_nothing(pool_csv, tmp_path):
    """Session 31 review: a link on another site opened ``/?annotator=mallory``; the browser
    withholds its strict cookies on such a navigation, so the server gave it a new browser id
    and stored the new annotator name (both cookies), through a GET with no CSRF check."""
    app, path = make_app(pool_csv, tmp_path)
    try:
        alice = Client(app)
        first = alice.get("/?annotator=alice")["text"]
        held = set(leases(path)["id"])
        # the cross-site navigation: no cookie sent, Sec-Fetch-Site says where it came from
        res = Client(app, keep=False).request(
            "GET", "/?annotator=mallory", extra=[("sec-fetch-site", "cross-site")]
        )
        assert res["status"] == 200 and "another site" in res["text"]
        assert res["cookies"] == [] and res["location"] is None
        assert set(leases(path)["id"]) == held
        again = alice.get("/")["text"]  # alice's browser keeps its id, its name and its items
        assert item_of(again) == item_of(first) and "alice" in again and "mallory" not in again
    finally:
        app.state.session.close()


@pytest.mark.parametrize(("host", "ok"), [
    ("127.0.0.1", True), ("localhost:80", True), ("[::1]:9999", True), (f"LOCALHOST:{PORT}", True),
    (f"evil.example:{PORT}", False), ("127.0.0.1.evil.example", False), ("", False),
])  # fmt: skip
def test_loopback_host_check_reads_the_name_not_the_port(pool_csv, tmp_path, host, ok):
    """Session 31 review: the allowed Host values carried the configured port, so a server on
    port 80 (browsers send no port) or started with port 0 refused every request."""
    app, _ = make_app(pool_csv, tmp_path)
    try:
        res = Client(app).request("GET", "/", host=host, follow=False)
        assert (res["status"] != 403) == ok, res
    finally:
        app.state.session.close()


def off_loopback_app(pool_csv, tmp_path, token):
    path = tmp_path / "s.bae"
    Session.create(path, pool_csv[0], SPEC, Design("accuracy", seed=2)).close()
    cfg = ServeConfig(session=str(path), host="0.0.0.0", port=PORT, annotator="web", token=token)
    return create_app(cfg)


def test_a_new_token_in_the_url_wins_over_an_old_cookie(pool_csv, tmp_path):
    """Session 31 review: after a restart off loopback (a new token), the 30-day cookie of the
    old token was read first and the printed URL was refused."""
    app = off_loopback_app(pool_csv, tmp_path, "NEW-token")
    try:
        browser = Client(app)
        browser.jar["bae_token"] = "OLD-token"
        res = browser.get("/?token=NEW-token", follow=False)
        assert res["status"] == 303, res
        assert any("bae_token=NEW-token" in c for c in res["cookies"])
        assert Client(app).get("/?token=OLD-token", follow=False)["status"] == 403
        assert Client(app).get("/", follow=False)["status"] == 403
    finally:
        app.state.session.close()


def test_non_ascii_tokens_are_refused_not_a_server_error(pool_csv, tmp_path):
    """Session 31 review: ``hmac.compare_digest`` raises on non-ASCII text, so a token or CSRF
    token with an accent was an HTTP 500; an undecodable body too."""
    app = off_loopback_app(pool_csv, tmp_path, "tok")
    try:
        assert Client(app).get("/?token=%C3%A9", follow=False)["status"] == 403
    finally:
        app.state.session.close()
    (tmp_path / "loop").mkdir()
    app, _ = make_app(pool_csv, tmp_path / "loop")
    try:
        browser = Client(app)
        browser.get("/?annotator=alice")
        res = browser.post("/label", csrf="é", item="x", label="1")
        assert res["status"] == 403 and "CSRF" in res["text"]
        res = browser.request("POST", "/label", b"csrf=\xff\xfe&item=x&label=1")
        assert res["status"] == 403
    finally:
        app.state.session.close()
