"""Annotators, leases, corrections and agreement: the team side of a session.

Each function here works on an open SQLite connection inside a write transaction (or on a frame of
annotations) and is called by :class:`~bayes_activeeval.session.Session`, which owns the
transactions. The rules:

- an item counts with its first annotation, or the latest correction of it; later annotations by
  other annotators are kept and only enter :func:`agreement`;
- annotations are never changed or deleted (triggers of :mod:`.store`); a correction is a new row
  that supersedes the old one (:func:`relabel_tx`);
- items handed out are leased to one holder for a while (:func:`lease_tx`), so annotators working
  at once each get their own items.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .store import LEGACY_ANNOTATOR, SessionError, first_new, later, now

#: How long items handed out by :meth:`Session.next` stay leased to their annotator (seconds).
DEFAULT_LEASE = 3600.0
#: The longest lease (seconds): one year.
MAX_LEASE = 366 * 86400.0


def check_lease(value: Any, name: str = "lease", unit: str = "seconds") -> float:
    """A lease length in seconds: ``value`` a positive number of ``unit`` (``"seconds"`` or
    ``"minutes"``, as ``bae``'s ``--lease`` takes it) up to :data:`MAX_LEASE`."""
    scale = {"seconds": 1.0, "minutes": 60.0}[unit]
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number of {unit}, got {value!r}") from None
    if not (0 < v <= MAX_LEASE / scale):  # NaN fails too
        raise ValueError(
            f"{name} must be a positive number of {unit} up to {MAX_LEASE / scale:.0f} (a year), "
            f"got {v:g}"
        )
    return v * scale


def default_annotator() -> str:
    """The login name (the default ``--annotator``)."""
    import getpass

    try:
        return getpass.getuser() or "unknown"
    except Exception:  # no login name (some containers)
        return "unknown"


def check_annotator(name: Any) -> str:
    if name is None:
        return default_annotator()
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ValueError(f"annotator must be a non-empty name, got {name!r}")
    if name.strip() == LEGACY_ANNOTATOR:
        raise ValueError(f"annotator name {name!r} is reserved")
    return name.strip()


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> float:
    """Cohen's kappa of two raters' labels on the same items (Cohen, 1960)."""
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    n = len(pairs)
    cats = sorted(set(a) | set(b))
    po = sum(x == y for x, y in pairs) / n
    pe = sum((a.count(c) / n) * (b.count(c) / n) for c in cats)
    return float("nan") if pe >= 1.0 else (po - pe) / (1.0 - pe)


def agreement_json(ag: dict[str, Any]) -> dict[str, Any]:
    return {
        **ag,
        "kappa": [
            {"annotators": [a, b], "kappa": k, "items": n} for (a, b), (k, n) in ag["kappa"].items()
        ],
    }


def annotator_labels(con: sqlite3.Connection, annotator: str) -> dict[int, str]:
    """The annotator's own latest answer per item (their first label or their own latest
    correction of it); format 2 only."""
    q = con.execute(
        "SELECT a.item, COALESCE((SELECT c.label FROM annotations c WHERE c.root = a.seq "
        "AND c.annotator = a.annotator ORDER BY c.seq DESC LIMIT 1), a.label) "
        "FROM annotations a WHERE a.kind='label' AND a.annotator=?",
        (annotator,),
    )
    return dict(q.fetchall())


def lease_tx(
    con: sqlite3.Connection, n: int, annotator: str, holder: str, seconds: float
) -> np.ndarray:
    """Inside a write transaction: the holder's active leases on pending items, or, when it has
    none, new leases on up to ``n`` pending items nobody else holds."""
    known = {r[0] for r in con.execute("SELECT item FROM labels")}
    items = np.asarray(
        [r[0] for r in con.execute("SELECT item FROM draws ORDER BY seq")], dtype=np.int64
    )
    pend = items[first_new(items, known)] if items.size else items
    t = now()
    latest: dict[int, tuple[str, str]] = {}  # an item's latest lease row decides (release_tx)
    for it, h, e in con.execute("SELECT item, holder, expires FROM leases ORDER BY seq"):
        latest[int(it)] = (h, e)
    active = {it: h for it, (h, e) in latest.items() if e > t}
    mine = [int(i) for i in pend if active.get(int(i)) == holder]
    if mine:
        return np.asarray(mine, dtype=np.int64)
    free = [int(i) for i in pend if int(i) not in active][:n]
    if free:
        import secrets

        batch = f"{annotator}:{t[:19]}:{secrets.token_hex(3)}"
        expires = later(seconds)
        con.executemany(
            "INSERT INTO leases(item, annotator, holder, batch, granted, expires) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [(i, annotator, holder, batch, t, expires) for i in free],
        )
    return np.asarray(free, dtype=np.int64)


def release_tx(con: sqlite3.Connection, holder: str) -> None:
    """Inside a write transaction: end the holder's active leases now — the items whose latest
    lease row is the holder's and not expired. (An older row of the holder's is not a lease
    any more once a newer row for the item exists: ending it again would end the lease someone
    else has taken since.)"""
    t = now()
    con.execute(
        "INSERT INTO leases(item, annotator, holder, batch, granted, expires) "
        "SELECT item, annotator, holder, batch, ?, ? FROM leases "
        "WHERE holder=? AND expires > ? "
        "AND seq IN (SELECT MAX(seq) FROM leases GROUP BY item)",
        (t, t, holder, t),
    )


def active_leases(frame: pd.DataFrame, labeled: set) -> pd.DataFrame:
    """The active rows of a lease table: the latest row per item (a release ends a lease with
    a newer row, :func:`release_tx`), if not expired and the item is not labeled yet."""
    frame = frame.drop_duplicates("item", keep="last")
    return frame[(frame["expires"] > now()) & ~frame["item"].isin(labeled)]


def held_items(frame: pd.DataFrame, holder: str) -> set[int]:
    """The items whose lease ``holder`` has now (the latest lease row per item, not expired),
    whether or not someone labeled them meanwhile: an answer to an item leased to a browser is
    accepted — as a second annotation when another annotator labeled it first."""
    latest = frame.drop_duplicates("item", keep="last")
    mine = latest[(latest["holder"] == holder) & (latest["expires"] > now())]
    return {int(i) for i in mine["item"]}


def write_labels_tx(
    con: sqlite3.Connection,
    chunk: Sequence[tuple[int, Any]],
    *,
    ids: Sequence,
    stage_of: dict[int, int],
    source: str,
    annotator: str,
    time: str,
) -> int:
    """Inside a write transaction: add the annotator's labels of ``chunk`` (``(item, label)``
    pairs) not given yet; returns how many were written. A different answer given meanwhile by
    the same annotator raises :class:`SessionError`."""
    count = 0
    mine = annotator_labels(con, annotator)
    batches = dict(
        con.execute(
            "SELECT item, batch FROM leases WHERE annotator=? ORDER BY seq", (annotator,)
        ).fetchall()
    )
    for it, v in chunk:
        if it in mine:
            if mine[it] != str(v):
                raise SessionError(
                    f"item {ids[it]!r} was labeled {mine[it]!r} by {annotator} "
                    f"meanwhile; got {str(v)!r}"
                )
            continue
        con.execute(
            "INSERT INTO annotations(item, item_id, label, annotator, kind, stage, batch, "
            "time, source) VALUES (?, ?, ?, ?, 'label', ?, ?, ?, ?)",
            (it, str(ids[it]), str(v), annotator, stage_of.get(it), batches.get(it), time, source),
        )
        count += 1
    return count


def relabel_tx(
    con: sqlite3.Connection,
    it: int,
    iid: str,
    value: str,
    *,
    reason: str,
    annotator: str,
    own: bool,
    source: str,
    merged: bool = False,
) -> bool:
    """Inside a write transaction: the correction of :meth:`Session.relabel` (``False`` when the
    label is already ``value``; nothing written). Drops the evaluator snapshots that used the old
    label. With ``own`` (the labeling page's undo) it refuses to supersede another annotator's
    later correction of the same label, which the undo would silently revert — unless
    ``merged``: the value already carries those corrections (a ranking query's grades, merged
    document by document by the ranking session, which refuses a conflicting document itself)."""
    if own:
        root = con.execute(
            "SELECT seq FROM annotations WHERE item=? AND annotator=? AND kind='label'",
            (it, annotator),
        ).fetchone()
        if root is None:
            raise SessionError(f"item {iid!r} has no label by {annotator} to correct")
    else:
        root = con.execute("SELECT seq FROM labels WHERE item=?", (it,)).fetchone()
        if root is None:
            raise SessionError(f"item {iid!r} has no label yet: record one (bae record, bae label)")
    root = int(root[0])
    head, current, by = con.execute(
        "SELECT seq, label, annotator FROM annotations WHERE seq=? OR root=? "
        "ORDER BY seq DESC LIMIT 1",
        (root, root),
    ).fetchone()
    if current == value:
        return False
    if own and not merged and by != annotator:
        # the labeling page's undo must not silently revert a reviewer's later correction
        raise SessionError(
            f"item {iid!r}: {by} corrected {annotator}'s label to {current!r} since; change it "
            "with a correction of the label the item counts with (bae relabel), not an undo"
        )
    stage = con.execute("SELECT MIN(stage) FROM draws WHERE item=?", (it,)).fetchone()[0]
    con.execute(
        "INSERT INTO annotations(item, item_id, label, annotator, kind, root, supersedes, "
        "reason, stage, batch, time, source) "
        "VALUES (?, ?, ?, ?, 'correction', ?, ?, ?, ?, NULL, ?, ?)",
        (it, iid, value, annotator, root, head, reason.strip(), stage, now(), source),
    )
    if stage is not None:  # evaluator snapshots that used the old label are stale
        con.execute("DELETE FROM snapshots WHERE stage > ?", (stage,))
    return True


def agreement(a: pd.DataFrame) -> dict[str, Any]:
    """Agreement between annotators, from the frame of :meth:`Session.annotations` (see
    :meth:`Session.agreement`)."""
    if a.empty:
        return {"items": 0, "pairs": 0, "agree": float("nan"), "kappa": {}}
    first = a[a["kind"] == "label"]
    own = a[(a["kind"] == "correction")]
    latest = {int(r.seq): (int(r.item), r.annotator, r.label) for r in first.itertuples()}
    for r in own.itertuples():
        root = int(r.root)
        if root in latest and latest[root][1] == r.annotator:
            latest[root] = (latest[root][0], r.annotator, r.label)
    by_item: dict[int, dict[str, str]] = {}
    for item, who, lab in latest.values():
        by_item.setdefault(item, {})[who] = lab
    multi = {i: d for i, d in by_item.items() if len(d) >= 2}
    pairs = agree = 0
    for d in multi.values():
        labs = list(d.values())
        for x in range(len(labs)):
            for y in range(x + 1, len(labs)):
                pairs += 1
                agree += labs[x] == labs[y]
    kappa: dict[tuple[str, str], tuple[float, int]] = {}
    names = sorted({w for d in multi.values() for w in d})
    for x in range(len(names)):
        for y in range(x + 1, len(names)):
            common = [(d[names[x]], d[names[y]]) for d in multi.values()
                      if names[x] in d and names[y] in d]  # fmt: skip
            if common:
                kappa[(names[x], names[y])] = (cohen_kappa(common), len(common))
    return {
        "items": len(multi),
        "pairs": pairs,
        "agree": agree / pairs if pairs else float("nan"),
        "kappa": kappa,
    }


def annotator_counts(a: pd.DataFrame) -> dict[str, int]:
    """First labels per annotator, from the frame of :meth:`Session.annotations`."""
    if a.empty:
        return {}
    return {str(k): int(v) for k, v in a[a["kind"] == "label"]["annotator"].value_counts().items()}
