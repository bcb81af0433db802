"""``bae serve``: a local web page on which annotators label the items of a session.

One page per browser: the item's fields (every text column of the pool, HTML-escaped), one button
per class with a keyboard shortcut, undo of the last answer, progress toward the budget and the
live estimate with its interval and a small plot of the estimate against the labels spent.

For a ranking session (``bae init --task ranking``) a batch is a query: the page shows the query
(its text columns) and every document to grade, each with one radio button per grade ``0..y_max``
(keys: a digit grades the highlighted document and moves on, Enter saves), and the grades of the
query are recorded together through :meth:`bayes_activeeval.ranking_session.RankingSession.record`
as soon as they are saved; undo brings the last query back with its grades, and saving it again is
a correction (:meth:`~bayes_activeeval.ranking_session.RankingSession.relabel`).

Every browser is a lease *holder* of its own (a random id in a persistent cookie that outlives
its leases), so several browsers at once each get their own items
(:meth:`bayes_activeeval.session.Session.next` with ``holder``), and a browser can only record
items leased to it. A request without that cookie leases nothing: it is given the cookie and sent
back to the page, and only a request that carries the cookie is handed items (a client that keeps
no cookies — a link preview, ``curl`` — never holds items others are waiting for). Annotators are
named by ``--annotator`` or, per browser, by opening ``/?annotator=NAME`` once.

The server checks at every request that the session file is still the one it opened: when it was
replaced or removed (``bae init --overwrite`` from an older bae, a ``mv``), it stops accepting
answers and says so, rather than writing to a file nobody will read again.

Security (``DESIGN.md``): the server binds 127.0.0.1 unless told otherwise and then only answers
requests addressed to that host (no DNS rebinding); on any other address it requires an access
token, printed at start, that the first request carries as ``?token=`` and that is then kept in
an HttpOnly, SameSite=Strict cookie; every field shown is HTML-escaped and the page forbids
inline code other than its own (Content-Security-Policy with a nonce); state-changing requests
are POSTs carrying a CSRF token bound to the browser (an HMAC of its id) and are refused from
another origin.

Built on Starlette (routing, requests, responses) and served by Uvicorn. All session work runs
on the event loop's thread, one request at a time, so the SQLite connection is never shared
between threads; other processes (``bae next``, ``bae record``) may write the session meanwhile.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import ipaddress
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlencode

__all__ = ["ServeConfig", "create_app", "is_loopback", "serve"]

COOKIE_BROWSER = "bae_browser"
COOKIE_ANNOTATOR = "bae_annotator"
COOKIE_TOKEN = "bae_token"
#: Query parameter of the redirect that gives a new browser its cookie (a second visit without the
#: cookie: the browser keeps no cookies, and the page says so instead of leasing items).
COOKIE_CHECK = "cookie"
#: Lifetime of the browser and annotator cookies (seconds): 30 days, or the lease if longer, so a
#: browser keeps its id (and its leased items) across restarts of the browser.
COOKIE_DAYS = 30
UNDO_REASON = "undo on the labeling page"
NO_COOKIES = (
    "This page needs cookies: each browser holds its own items through a cookie. Allow cookies "
    "for this address and reload; nothing was handed out to this browser."
)

#: What a link from another site gets (no cookie set, nothing leased, ``?annotator=`` ignored).
CROSS_SITE_PAGE = (
    "<!doctype html><html><head><meta charset='utf-8'><title>bae labeling page</title></head>"
    "<body><p>This page was opened from another site, so it does not know which browser is "
    "asking; nothing was handed out or changed. Open <a href='/'>the labeling page</a> from "
    "here (your items and your annotator name are kept).</p></body></html>"
)


def host_name(host: str) -> str:
    """The name part of an HTTP ``Host`` header, lower-cased (``"[::1]:8765"`` → ``"[::1]"``,
    ``"127.0.0.1"`` → ``"127.0.0.1"``).

    Parameters
    ----------
    host : str
        The header's value.

    Returns
    -------
    str
    """
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end >= 0 else host
    return host.split(":", 1)[0]


def same_secret(given: str, secret: str) -> bool:
    """Constant-time comparison of a token a request carries with the server's, for any text
    (``hmac.compare_digest`` refuses non-ASCII ``str``: a request could make it raise).

    Parameters
    ----------
    given, secret : str

    Returns
    -------
    bool
    """
    return hmac.compare_digest(given.encode("utf-8", "replace"), secret.encode("utf-8", "replace"))


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (``127.0.0.1``, ``::1``, ``localhost``).

    Parameters
    ----------
    host : str
        A host name or IP address; an IPv6 address may be in brackets (``"[::1]"``). Only the
        name ``"localhost"`` is recognized; other names are not resolved and count as not
        loopback.

    Returns
    -------
    bool
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class ServeConfig:
    """What ``bae serve`` was started with.

    Parameters
    ----------
    session : str
        Path of the session file (a labeling or a ranking session).
    pool_path : str, optional
        Where the pool file is now, if it moved (``Session.open``, ``RankingSession.open``).
    host : str
        Address to bind (default ``"127.0.0.1"``); anything but loopback requires ``token``.
    port : int
        TCP port (default 8765).
    annotator : str, optional
        Default annotator name of every browser (default: the login name); a browser may set
        its own with ``/?annotator=NAME``.
    stage_size : int
        Draws of a new stage (default 20; not used for a ranking session).
    batch : int
        Items (queries, for a ranking session) leased to one browser at a time (default 5).
    lease : float
        Seconds a browser's leased items stay reserved for it (default 1800).
    level : float
        Confidence level of the live estimate's interval (default 0.95).
    token : str, optional
        Access token required off loopback; :func:`serve` generates one when it is ``None``.
    secret : bytes
        Key of the HMAC that binds CSRF tokens to a browser (default: 32 random bytes).
    """

    session: str
    pool_path: str | None = None
    host: str = "127.0.0.1"
    port: int = 8765
    annotator: str | None = None
    stage_size: int = 20
    batch: int = 5
    lease: float = 1800.0
    level: float = 0.95
    token: str | None = None
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))


class _State:
    """Per-browser memory of the server: the last answers (for undo) and an undo in progress."""

    def __init__(self) -> None:
        self.answered: dict[str, list[str]] = {}
        self.undo: dict[str, str] = {}


def _csrf(cfg: ServeConfig, browser: str) -> str:
    return hmac.new(cfg.secret, browser.encode(), hashlib.sha256).hexdigest()


def create_app(cfg: ServeConfig):
    """The Starlette application of ``bae serve`` (opens the session, writable).

    Parameters
    ----------
    cfg : ServeConfig
        The session to open and how to serve it.

    Returns
    -------
    starlette.applications.Starlette
        The app (routes ``/``, ``/label``, ``/undo``, ``/release``, ``/api/status``); the open
        session is ``app.state.session``.
    """
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    from .io import jsonable
    from .ranking_session import RankingSession, is_ranking_session
    from .session import Session, SessionError, default_annotator
    from .session.annotations import check_annotator

    ranking = is_ranking_session(cfg.session)
    if ranking:
        session = RankingSession.open(cfg.session, pool_path=cfg.pool_path)
    else:
        session = Session.open(cfg.session, pool_path=cfg.pool_path)
    state = _State()
    default_name = cfg.annotator or default_annotator()
    loopback = is_loopback(cfg.host)
    # the Host header's name, whatever the port (port 80 is sent without one): a loopback
    # server answers only to loopback names, which is what stops DNS rebinding
    allowed_hosts = {"127.0.0.1", "localhost", "[::1]", cfg.host.lower()}

    def guard(request: Request) -> Response | None:
        """Host check (loopback) or access token (elsewhere); ``None`` when the request may
        go on."""
        if loopback:
            if host_name(request.headers.get("host", "")) not in allowed_hosts:
                return PlainTextResponse("unknown host", status_code=403)
            return None
        # any token the request carries may be the right one: a cookie left by an earlier run
        # (another token) must not hide the one in the URL bae serve printed this time
        given = (
            request.query_params.get("token"),
            request.headers.get("x-bae-token"),
            request.cookies.get(COOKIE_TOKEN),
        )
        if not cfg.token or not any(t and same_secret(t, cfg.token) for t in given):
            return PlainTextResponse(
                "an access token is required (the URL bae serve printed)", status_code=403
            )
        return None

    def browser_of(request: Request) -> tuple[str, bool]:
        b = request.cookies.get(COOKIE_BROWSER, "")
        if len(b) >= 16 and b.replace("-", "").replace("_", "").isalnum():
            return b, False
        return secrets.token_urlsafe(16), True

    def annotator_of(request: Request) -> str:
        """The browser's annotator name (``ValueError`` for a name no annotator may have)."""
        name = request.query_params.get("annotator") or request.cookies.get(COOKIE_ANNOTATOR)
        name = (name or default_name).strip()
        name = name[:100] if name else default_name
        return check_annotator(name)

    max_age = int(max(COOKIE_DAYS * 86400, cfg.lease))

    def finish(response: Response, request: Request, browser: str, new: bool, name: str):
        opts: dict[str, Any] = {
            "httponly": True,
            "samesite": "strict",
            "path": "/",
            "max_age": max_age,  # outlives the leases: a restarted browser keeps its items
        }
        if new:
            response.set_cookie(COOKIE_BROWSER, browser, **opts)
        if request.query_params.get("annotator"):
            response.set_cookie(COOKIE_ANNOTATOR, name, **opts)
        if not loopback and request.query_params.get("token"):
            response.set_cookie(COOKIE_TOKEN, cfg.token, **opts)
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        return response

    def replaced() -> str | None:
        """Why answers are no longer accepted: the session file was replaced or removed."""
        try:
            session.store.check_unchanged()
        except SessionError as exc:
            return str(exc)
        return None

    async def page(request: Request) -> Response:
        if (bad := guard(request)) is not None:
            return bad
        if request.headers.get("sec-fetch-site") == "cross-site":
            # a link from another site: the browser withholds the (strict) cookies, so this
            # request cannot tell who is asking; it sets no cookie, leases nothing and ignores
            # ?annotator=, or any page could rename a browser's annotator or replace its id
            resp = HTMLResponse(CROSS_SITE_PAGE)
            resp.headers["X-Frame-Options"] = "DENY"
            resp.headers["Cache-Control"] = "no-store"
            resp.headers["Referrer-Policy"] = "no-referrer"
            resp.headers["Content-Security-Policy"] = "default-src 'none'; frame-ancestors 'none'"
            return resp
        browser, new = browser_of(request)
        try:
            name = annotator_of(request)
        except ValueError as exc:
            return finish(PlainTextResponse(f"refused: {exc}", status_code=400), request,
                          browser, new, default_name)  # fmt: skip
        if new and request.query_params.get(COOKIE_CHECK) is None:
            # no browser cookie yet: give one and come back; nothing is leased to a client
            # that keeps no cookies (a link preview, curl)
            query = [(k, v) for k, v in request.query_params.multi_items() if k != COOKIE_CHECK]
            target = "/?" + urlencode([*query, (COOKIE_CHECK, "1")])
            return finish(Response(status_code=303, headers={"location": target}), request,
                          browser, new, name)  # fmt: skip
        nonce = secrets.token_urlsafe(12)
        if (why := replaced()) is not None:
            body = _page("session replaced", name, 0, str(session.path), 0.0,
                         "answers are no longer accepted",
                         f"<div class='item' id='done'><p>{html.escape(why)}</p></div>", "")  # fmt: skip
            status_code = 409
        elif new:
            body = _page("cookies needed", name, 0, str(session.path), 0.0,
                         "nothing handed out to this browser",
                         f"<div class='item' id='done'><p>{NO_COOKIES}</p></div>", "")  # fmt: skip
            status_code = 200
        else:
            render = _render_ranking if ranking else _render
            body = render(session, cfg, state, browser, name, nonce)
            status_code = 200
        resp = HTMLResponse(body, status_code=status_code)
        resp.headers["Content-Security-Policy"] = (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; "
            "img-src data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
            "frame-ancestors 'none'"
        )
        return finish(resp, request, browser, new, name)

    async def post(request: Request) -> Response:
        if (bad := guard(request)) is not None:
            return bad
        origin = request.headers.get("origin")
        if (
            origin
            and origin != "null"
            and origin.split("://", 1)[-1] != request.headers.get("host")
        ):
            return PlainTextResponse("cross-origin request refused", status_code=403)
        browser, new = browser_of(request)
        body = (await request.body()).decode("utf-8", errors="replace")
        form = {k: v[0] for k, v in parse_qs(body).items()}
        if new or not same_secret(form.get("csrf", ""), _csrf(cfg, browser)):
            return PlainTextResponse("missing or wrong CSRF token; reload the page", 403)
        if (why := replaced()) is not None:
            return PlainTextResponse(f"refused: {why}", status_code=409)
        try:
            name = annotator_of(request)
            if request.url.path == "/label" and ranking:
                _answer_ranking(session, state, browser, name, form)
            elif request.url.path == "/label":
                _answer(session, state, browser, name, form.get("item", ""), form.get("label", ""))
            elif request.url.path == "/undo":
                done = state.answered.get(browser) or []
                if done:
                    state.undo[browser] = done[-1]
            elif request.url.path == "/release":
                session.release(browser)
        except (ValueError, SessionError) as exc:
            return PlainTextResponse(f"refused: {exc}", status_code=409)
        return finish(Response(status_code=303, headers={"location": "/"}), request, browser,
                      False, name)  # fmt: skip

    async def status(request: Request) -> Response:
        if (bad := guard(request)) is not None:
            return bad
        if (why := replaced()) is not None:
            return JSONResponse({"error": why}, status_code=409)
        st = session.summary(cfg.level) if ranking else session.status(cfg.level)
        return JSONResponse(jsonable(st))

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/label", post, methods=["POST"]),
        Route("/undo", post, methods=["POST"]),
        Route("/release", post, methods=["POST"]),
        Route("/api/status", status, methods=["GET"]),
    ]
    app = Starlette(routes=routes)
    app.state.session = session
    return app


def _answer(session, state: _State, browser: str, name: str, item_id: str, label: str) -> None:
    """Record an answer: a new annotation of a leased item, or — while undoing — a correction of
    this annotator's own earlier answer (never a deletion)."""
    if state.undo.get(browser) == item_id:
        session.relabel(item_id, label, reason=UNDO_REASON, annotator=name, own=True, source="web")
        del state.undo[browser]
        return
    session.record(
        [item_id], [label], batch_size=1, source="web", annotator=name, holder=browser, rows=False
    )
    state.answered.setdefault(browser, []).append(item_id)


def _current_item(session, cfg: ServeConfig, state: _State, browser: str, name: str):
    """``(item index, undo note)`` to show, or ``(None, message)``."""
    from .session import SessionError

    if browser in state.undo:
        iid = state.undo[browser]
        it = int(session.pool_file.index_of([iid])[0])
        mine = session.annotator_labels(name).get(it)
        return it, f"You answered {mine!r} for this item; your new answer replaces it (audited)."
    try:
        items = session.next(
            cfg.batch, annotator=name, holder=browser, lease=cfg.lease, stage_size=cfg.stage_size
        )
    except SessionError as exc:
        return None, str(exc)
    return int(items[0]), None


def _keys(classes: list[str]) -> list[str]:
    if all(len(c) == 1 for c in classes) and len(set(c.lower() for c in classes)) == len(classes):
        return classes
    return [str(k + 1) for k in range(len(classes))][:9] + [""] * max(0, len(classes) - 9)


def _plot_svg(session, level: float) -> str:
    """A small inline SVG: the estimate against the labels spent, with its interval band."""
    from .report import estimate_path

    try:
        path = estimate_path(session, level)
    except Exception:  # nothing to plot is never an error of the page
        return ""
    if path.empty:
        return "<p class='note'>The plot appears once a stage is complete.</p>"
    w, h, pad = 320, 120, 24
    x0, x1 = float(path["labels"].min()), float(path["labels"].max())
    y0 = float(path["low"].replace([float("inf"), float("-inf")], float("nan")).min())
    y1 = float(path["high"].replace([float("inf"), float("-inf")], float("nan")).max())
    if not (y1 > y0):
        y0, y1 = y0 - 0.5, y0 + 0.5
    if not (x1 > x0):
        x0, x1 = x0 - 1, x0 + 1

    def px(x, y):
        return (
            pad + (x - x0) / (x1 - x0) * (w - 2 * pad),
            h - pad - (y - y0) / (y1 - y0) * (h - 2 * pad),
        )

    parts = [f"<svg id='plot' width='{w}' height='{h}' viewBox='0 0 {w} {h}' role='img'>"]
    colors = ["#3b5bdb", "#e8590c", "#2b8a3e", "#862e9c"]
    for k, (m, g) in enumerate(path.groupby("model", sort=False)):
        c = colors[k % len(colors)]
        up = [px(x, y) for x, y in zip(g["labels"], g["high"], strict=True)]
        lo = [px(x, y) for x, y in zip(g["labels"], g["low"], strict=True)][::-1]
        band = " ".join(f"{a:.1f},{b:.1f}" for a, b in up + lo)
        line = " ".join(
            f"{a:.1f},{b:.1f}"
            for a, b in (px(x, y) for x, y in zip(g["labels"], g["estimate"], strict=True))
        )
        parts.append(f"<polygon points='{band}' fill='{c}' fill-opacity='0.18'/>")
        parts.append(f"<polyline points='{line}' fill='none' stroke='{c}' stroke-width='2'/>")
        parts.append(
            f"<text x='{pad}' y='{12 + 12 * k}' font-size='10' fill='{c}'>{html.escape(str(m))}</text>"
        )
    parts.append(
        f"<text x='{pad}' y='{h - 6}' font-size='10'>{x0:g}</text>"
        f"<text x='{w - pad}' y='{h - 6}' font-size='10' text-anchor='end'>{x1:g} labels</text>"
        f"<text x='2' y='{pad}' font-size='10'>{y1:.3g}</text>"
        f"<text x='2' y='{h - pad}' font-size='10'>{y0:.3g}</text></svg>"
    )
    return "".join(parts)


_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 900px; color: #222; }
.bar { background: #eee; height: 10px; border-radius: 5px; overflow: hidden; }
.bar > div { background: #3b5bdb; height: 100%; }
.item { border: 1px solid #ccc; border-radius: 6px; padding: 1em; margin: 1em 0; }
.item th { text-align: left; padding-right: 1em; vertical-align: top; color: #555; }
.item td { white-space: pre-wrap; }
button { font-size: 1.1em; margin: 0.2em; padding: 0.4em 1em; }
kbd { border: 1px solid #aaa; border-radius: 3px; padding: 0 4px; font-size: 0.8em; }
.note { color: #666; font-size: 0.9em; } .undo { color: #a61e4d; }
.side { display: flex; gap: 2em; align-items: flex-start; flex-wrap: wrap; }
.docs td, .docs th { padding: 0.2em 0.6em; border-bottom: 1px solid #eee; }
.docs tr.current { background: #edf2ff; } .grades label { margin-right: 0.6em; }
"""


def _render(session, cfg: ServeConfig, state: _State, browser: str, name: str, nonce: str) -> str:
    esc = html.escape
    it, note = _current_item(session, cfg, state, browser, name)
    st = session.status(cfg.level)
    csrf = _csrf(cfg, browser)
    budget = st["budget"]
    used = st["budget_used"]
    if budget:
        frac = min(used / budget, 1.0)
        progress = f"{used:g} of {budget:g} labels ({frac:.0%})"
    else:
        frac = 0.0
        progress = f"{used:g} labels (no budget set)"
    est_lines = []
    for r in st["estimates"]:
        est_lines.append(
            f"<li><b>{esc(str(st['measure']))} [{esc(str(r['model']))}]</b> = "
            f"<span class='estimate'>{r['estimate']:.4f}</span>, {st['level']:.0%} interval "
            f"[{r['low']:.4f}, {r['high']:.4f}] ({r['draws']} draws)</li>"
        )
    estimate = (
        "<ul>" + "".join(est_lines) + "</ul>"
        if est_lines
        else ("<p class='note'>No estimate yet: it appears once a stage is complete.</p>")
    )
    mine = len(state.answered.get(browser, []))
    classes = [str(c) for c in session.pool.classes] if session.pool.classes is not None else []
    keys = _keys(classes)
    if it is None:
        item_html = f"<div class='item' id='done'><p>{esc(note or '')}</p></div>"
    else:
        iid = str(session.pool_file.ids[it])
        rows = "".join(
            f"<tr><th>{esc(str(c))}</th><td>{esc(str(session.pool_file.text[c].iloc[it]))}</td></tr>"
            for c in session.pool_file.text.columns
        )
        buttons = "".join(
            f"<button type='submit' name='label' value='{esc(c, quote=True)}' "
            f"data-key='{esc(k, quote=True)}'>{esc(c)} <kbd>{esc(k)}</kbd></button>"
            for c, k in zip(classes, keys, strict=True)
        )
        undo_note = f"<p class='undo'>{esc(note)}</p>" if note else ""
        item_html = (
            f"<div class='item' id='item' data-item='{esc(iid, quote=True)}'>{undo_note}"
            f"<p>item <code id='item-id'>{esc(iid)}</code></p><table>{rows}</table>"
            f"<form method='post' action='/label' id='answer'>"
            f"<input type='hidden' name='csrf' value='{csrf}'>"
            f"<input type='hidden' name='item' value='{esc(iid, quote=True)}'>"
            f"{buttons}</form></div>"
        )
    undo_form = _undo_form(csrf, "answer") if mine and browser not in state.undo else ""
    script = f"""<script nonce='{nonce}'>
document.addEventListener('keydown', (e) => {{
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const key = e.key.toLowerCase();
  if (key === 'u' || e.key === 'Backspace') {{
    const f = document.getElementById('undo'); if (f) {{ e.preventDefault(); f.submit(); }}
    return;
  }}
  for (const b of document.querySelectorAll('#answer button')) {{
    if (b.dataset.key && b.dataset.key.toLowerCase() === key) {{
      e.preventDefault(); b.click(); return;
    }}
  }}
}});
{_live_script(_LIVE_ITEMS)}</script>"""
    body = (
        f"{item_html}{undo_form}<div class='side'><div><h2>Estimate</h2>{estimate}"
        f"<p class='note' id='live'></p></div><div>{_plot_svg(session, cfg.level)}</div></div>"
    )
    progress += f"; {st['pending']} items of the current stage to label"
    return _page(str(st["measure"]), name, mine, str(session.path), frac, progress, body, script)


#: The ``#live`` line from ``/api/status`` (``st``): a classification session's estimates …
_LIVE_ITEMS = """`live: ${st.labels} labels; ` + ((parts) => parts.length ? parts.join('; ')
      : 'no estimate yet')(st.estimates.map(r => `${st.measure} [${r.model}] = `
      + `${r.estimate.toFixed(4)} [${r.low.toFixed(4)}, ${r.high.toFixed(4)}]`))"""
#: … and a ranking session's estimate (or difference of two rankers).
_LIVE_QUERIES = """`live: ${st.queries_graded} queries graded; ` + ((st.estimate === undefined
      || st.estimate === null) ? 'no estimate yet' : `${st.measure} = `
      + `${st.estimate.toFixed(4)} [${st.low.toFixed(4)}, ${st.high.toFixed(4)}]`)"""


def _live_script(text: str) -> str:
    """Script that refreshes the page's ``#live`` line every 5 s (the estimate stays live while
    others label); ``text`` is the JavaScript expression of the line from the status ``st``."""
    return f"""// the estimate stays live while others label: refresh it every few seconds
async function refresh() {{
  try {{
    const st = await (await fetch('/api/status', {{credentials: 'same-origin'}})).json();
    document.getElementById('live').textContent = {text};
  }} catch (err) {{ /* the server stopped: keep the page as it is */ }}
}}
refresh();
setInterval(refresh, 5000);
"""


def _undo_form(csrf: str, what: str) -> str:
    """The undo button (key ``u``) of the page."""
    return (
        f"<form method='post' action='/undo' id='undo'><input type='hidden' name='csrf' "
        f"value='{csrf}'><button type='submit'>undo last {what} <kbd>u</kbd></button></form>"
    )


def _page(title: str, name: str, mine: int, path: str, frac: float, progress: str,
          body: str, script: str) -> str:  # fmt: skip
    """The page around the item: title, annotator, progress bar and line, then ``body``."""
    esc = html.escape
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>bae: label {esc(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>Labeling: {esc(title)}</h1>"
        f"<p class='note'>annotator <b id='annotator'>{esc(name)}</b>; {mine} answers in this "
        f"browser; session {esc(path)}</p>"
        f"<div class='bar' title='{esc(progress, quote=True)}'><div style='width:{frac:.1%}'></div>"
        f"</div><p id='progress'>{esc(progress)}</p>{body}{script}</body></html>"
    )


# -- ranking sessions -----------------------------------------------------------------------------
def _query_index(rs, qid: str) -> int:
    """The pool index of query ``qid`` (as text) of a ranking session."""
    for i, q in enumerate(rs.pool.query_ids.tolist()):
        if str(q) == qid:
            return i
    raise ValueError(f"query {qid!r} is not in the pool")


def _answer_ranking(rs, state: _State, browser: str, name: str, form: dict[str, str]) -> None:
    """Record the grades of one query from the page's form (``item``: the query id, ``g<j>``:
    the grade of its ``j``-th document): new annotations of a query leased to this browser or —
    while undoing — a correction of this annotator's own earlier grades (never a deletion)."""
    import pandas as pd

    qid = form.get("item", "")
    qi = _query_index(rs, qid)
    docs = rs.pool.doc_ids[qi]
    top = int(rs.pool.max_grade)
    grades = {}
    for j, doc in enumerate(docs):
        raw = form.get(f"g{j}", "").strip()
        if not raw:
            raise ValueError(f"document {doc!r} has no grade: grade every document of the query")
        if not (raw.isdigit() and int(raw) <= top):
            raise ValueError(f"document {doc!r}: a grade is a whole number 0..{top}, got {raw!r}")
        grades[str(doc)] = int(raw)
    if state.undo.get(browser) == qid:
        rs.relabel(qid, grades, reason=UNDO_REASON, annotator=name, own=True, source="web")
        del state.undo[browser]
        return
    frame = pd.DataFrame({"qid": qid, "doc": list(grades), "grade": list(grades.values())})
    rs.record(frame, annotator=name, holder=browser, source="web")
    state.answered.setdefault(browser, []).append(qid)


def _current_query(rs, cfg: ServeConfig, state: _State, browser: str, name: str):
    """``(query index, grades to preselect, undo note)`` to show, or ``(None, None, message)``."""
    import json

    from .session import SessionError
    from .session.annotations import annotator_labels

    if browser in state.undo:
        qi = _query_index(rs, state.undo[browser])
        mine = annotator_labels(rs.store.con, name).get(qi)
        preset = None if mine is None else json.loads(mine)
        return qi, preset, "You graded this query; your new grades replace yours (audited)."
    try:
        queries = rs.lease(cfg.batch, annotator=name, holder=browser, lease=cfg.lease)
    except SessionError as exc:
        return None, None, str(exc)
    return int(queries[0]), None, None


def _render_ranking(rs, cfg: ServeConfig, state: _State, browser: str, name: str, nonce: str):
    """The labeling page of a ranking session: one query and every one of its documents."""
    esc = html.escape
    qi, preset, note = _current_query(rs, cfg, state, browser, name)
    st = rs.summary(cfg.level)
    csrf = _csrf(cfg, browser)
    budget, used = float(st["budget"]), float(st["cost_graded"])
    frac = min(used / budget, 1.0) if budget > 0 else 0.0
    progress = (
        f"{st['queries_graded']} of {st['queries_in_sample']} queries graded; cost {used:.4g} "
        f"of the budget {budget:g} ({frac:.0%})"
    )
    target = f"{st['measure']} [{' − '.join(st['models'])}]"
    if "estimate" in st:
        test = f"; paired Wald test p = {st['pvalue']:.3g}" if "pvalue" in st else ""
        estimate = (
            f"<ul><li><b>{esc(target)}</b> = <span class='estimate'>{st['estimate']:.4f}</span>, "
            f"{st['level']:.0%} interval [{st['low']:.4f}, {st['high']:.4f}]{esc(test)}</li></ul>"
        )
    else:
        estimate = "<p class='note'>No estimate yet: it appears once the first query is graded.</p>"
    mine = len(state.answered.get(browser, []))
    top = int(rs.pool.max_grade)
    if qi is None:
        item_html = f"<div class='item' id='done'><p>{esc(note or '')}</p></div>"
    else:
        qid = str(rs.pool.query_ids[qi])
        per_query, per_doc = rs.text_columns()
        docs = rs.documents([qi], ranks=False)
        head = "".join(
            f"<tr><th>{esc(str(c))}</th><td>{esc(str(docs[c].iloc[0]))}</td></tr>"
            for c in per_query
        )
        cols = "".join(f"<th>{esc(str(c))}</th>" for c in per_doc)
        rows = []
        for j in range(len(docs)):
            doc = str(docs["doc"].iloc[j])
            cells = "".join(f"<td>{esc(str(docs[c].iloc[j]))}</td>" for c in per_doc)
            given = None if preset is None else preset.get(doc)
            radios = "".join(
                f"<label><input type='radio' name='g{j}' value='{g}' required"
                f"{' checked' if given == g else ''}> {g}</label> "
                for g in range(top + 1)
            )
            rows.append(
                f"<tr class='doc' data-doc='{esc(doc, quote=True)}'><td>{j + 1}</td>"
                f"<td><code>{esc(doc)}</code></td>{cells}<td class='grades'>{radios}</td></tr>"
            )
        undo_note = f"<p class='undo'>{esc(note)}</p>" if note else ""
        item_html = (
            f"<div class='item' id='query' data-item='{esc(qid, quote=True)}'>{undo_note}"
            f"<p>query <code id='query-id'>{esc(qid)}</code>: grade each of its {len(docs)} "
            f"documents 0..{top}</p><table>{head}</table>"
            f"<form method='post' action='/label' id='answer'>"
            f"<input type='hidden' name='csrf' value='{csrf}'>"
            f"<input type='hidden' name='item' value='{esc(qid, quote=True)}'>"
            f"<table class='docs'><tr><th>#</th><th>document</th>{cols}<th>grade</th></tr>"
            f"{''.join(rows)}</table><button type='submit' id='save'>save the grades of this "
            f"query <kbd>Enter</kbd></button></form>"
            "<p class='note'>Keys: a digit grades the highlighted document and moves on; "
            "↑/↓ move; Enter saves once every document is graded.</p></div>"
        )
    undo_form = _undo_form(csrf, "query") if mine and browser not in state.undo else ""
    script = f"""<script nonce='{nonce}'>
const rows = Array.from(document.querySelectorAll('tr.doc'));
let cur = Math.max(0, rows.findIndex(r => !r.querySelector('input:checked')));
function show() {{ rows.forEach((r, i) => r.classList.toggle('current', i === cur)); }}
show();
document.addEventListener('keydown', (e) => {{
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const key = e.key.toLowerCase();
  if (key === 'u') {{
    const f = document.getElementById('undo'); if (f) {{ e.preventDefault(); f.submit(); }}
    return;
  }}
  if (!rows.length) return;
  if (key === 'enter') {{ e.preventDefault(); document.getElementById('answer').requestSubmit(); return; }}
  if (key === 'arrowdown') {{ e.preventDefault(); cur = Math.min(cur + 1, rows.length - 1); show(); return; }}
  if (key === 'arrowup') {{ e.preventDefault(); cur = Math.max(cur - 1, 0); show(); return; }}
  const b = rows[cur].querySelector(`input[value="${{key}}"]`);
  if (b) {{ e.preventDefault(); b.checked = true; cur = Math.min(cur + 1, rows.length - 1); show(); }}
}});
rows.forEach((r, i) => r.addEventListener('click', () => {{ cur = i; show(); }}));
{_live_script(_LIVE_QUERIES)}</script>"""
    body = (
        f"{item_html}{undo_form}<div class='side'><div><h2>Estimate</h2>{estimate}"
        "<p class='note' id='live'></p></div></div>"
    )
    return _page(str(st["measure"]), name, mine, str(rs.path), frac, progress, body, script)


def serve(cfg: ServeConfig, *, echo=print) -> None:
    """Run the server until interrupted (prints the address, and the token when one is needed).

    Parameters
    ----------
    cfg : ServeConfig
        The session and how to serve it; off loopback, a missing ``cfg.token`` is set to a new
        random one.
    echo : callable
        Called with each message to the user (default ``print``).
    """
    import uvicorn

    if not is_loopback(cfg.host) and not cfg.token:
        cfg.token = secrets.token_urlsafe(24)
    app = create_app(cfg)
    host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
    url = f"http://{host}:{cfg.port}/"
    if cfg.token and not is_loopback(cfg.host):
        url += f"?token={cfg.token}"
        echo(f"serving {cfg.session} on {cfg.host} (not loopback): the access token is required")
    echo(f"open {url} (annotators: add ?annotator=NAME once per browser); Ctrl-C stops")
    try:
        uvicorn.run(app, host=cfg.host, port=cfg.port, log_level="warning", access_log=False)
    finally:
        app.state.session.close()
