"""What a session file holds, read back: labels, annotations, draws, stages, budget, leases.

:class:`SessionRecords` is the read side of :class:`~bayes_activeeval.session.Session` (its base
class): it owns the open file (:class:`~.store.Store`) and answers from the stored rows only, so
it works on read-only opens. The workflow that writes (``next``, ``record``, ``relabel``) and the
estimates are in :mod:`.core`.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Self

import numpy as np
import pandas as pd

from ..io import PoolFile, label_codec
from ..proposals import Draws
from . import annotations as team
from .designs import Design
from .store import LEGACY_ANNOTATOR, SCHEMA_VERSION, Store, first_new

__all__ = ["SessionRecords"]


class SessionRecords:
    """The stored records of a session file (the base of
    :class:`~bayes_activeeval.session.Session`).

    Parameters
    ----------
    path : str
        The session file.
    con : sqlite3.Connection
        An open connection to it (:func:`~bayes_activeeval.session.store.connect`).
    pool_file : PoolFile
        The pool file read with the session's stored options.
    design : Design
        The session's design.
    readonly : bool
        Refuse every write (default ``False``).
    schema : int
        The file's format version (default the current one, 2; a format-1 file is read as it
        is).

    Attributes
    ----------
    path : str
        The session file.
    store : Store
        The open file: its connection, queries and write transactions.
    pool_file : PoolFile
        The pool, read with the stored options from the stored path (checksum verified).
    design : Design
    parse_label : callable
        ``parse_label(text, where="")``: the pool's label for a typed or CSV text
        (:func:`~bayes_activeeval.io.label_codec`).
    """

    def __init__(
        self,
        path: str,
        con: sqlite3.Connection,
        pool_file: PoolFile,
        design: Design,
        *,
        readonly: bool = False,
        schema: int = SCHEMA_VERSION,
    ):
        self.path = path
        self.store = Store(path, con, readonly=readonly, schema=schema)
        self.pool_file = pool_file
        self.design = design
        self.parse_label = label_codec(pool_file.pool)

    @property
    def readonly(self) -> bool:
        """Opened read-only (every write refused)."""
        return self.store.readonly

    def close(self) -> None:
        """Checkpoint the WAL into the main file (writable sessions) and close."""
        self.store.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.path!r}, measure={self.design.measure!r}, design={self.design.kind!r}, "
            f"labels={self.n_labels}, stages={self.n_stages})"
        )

    @property
    def pool(self):
        return self.pool_file.pool

    # -- reading ----------------------------------------------------------------------------------
    @property
    def n_labels(self) -> int:
        """Items with a label (distinct items; second annotations and corrections not counted)."""
        return int(self.store.rows("SELECT COUNT(*) FROM labels")[0][0])

    @property
    def n_stages(self) -> int:
        return int(self.store.rows("SELECT COUNT(*) FROM stages")[0][0])

    def labels(self) -> pd.DataFrame:
        """The label each item counts with: ``item`` (pool index), ``id``, ``label`` (as text),
        ``stage``, ``time``, ``source``, ``annotator`` (of the first annotation); in recording
        order. The rule: an item's first annotation, or the latest correction of it
        (:meth:`relabel`); later annotations by others only enter :meth:`agreement`."""
        who = "annotator" if self.store.schema >= 2 else f"'{LEGACY_ANNOTATOR}'"
        return pd.DataFrame(
            self.store.rows(
                f"SELECT item, item_id, label, stage, time, source, {who} FROM labels ORDER BY seq"
            ),
            columns=["item", "id", "label", "stage", "time", "source", "annotator"],
        )

    def annotations(self) -> pd.DataFrame:
        """Every annotation ever recorded, in order, nothing left out: ``seq``, ``item``, ``id``,
        ``label``, ``annotator``, ``kind`` (``label`` or ``correction``), ``root`` (the
        annotation a correction corrects), ``supersedes`` (the row it replaces), ``reason``,
        ``stage``, ``batch``, ``time``, ``source``."""
        cols = ["seq", "item", "id", "label", "annotator", "kind", "root", "supersedes", "reason",
                "stage", "batch", "time", "source"]  # fmt: skip
        if self.store.schema < 2:
            sql = (
                f"SELECT seq, item, item_id, label, '{LEGACY_ANNOTATOR}', 'label', NULL, NULL, "
                "NULL, stage, NULL, time, source FROM labels ORDER BY seq"
            )
        else:
            sql = (
                "SELECT seq, item, item_id, label, annotator, kind, root, supersedes, reason, "
                "stage, batch, time, source FROM annotations ORDER BY seq"
            )
        return pd.DataFrame(self.store.rows(sql), columns=cols)

    def draws(self) -> pd.DataFrame:
        """Every draw: ``seq``, ``stage``, ``item``, ``id``, ``q``, ``weight`` (``p/q``)."""
        return pd.DataFrame(
            self.store.rows("SELECT seq, stage, item, item_id, q, weight FROM draws ORDER BY seq"),
            columns=["seq", "stage", "item", "id", "q", "weight"],
        )

    def label_map(self) -> dict[int, str]:
        """The label each item counts with (as text), by pool index (see :meth:`labels`)."""
        return dict(self.store.rows("SELECT item, label FROM labels"))

    def n_corrections(self) -> int:
        """Corrections recorded (:meth:`relabel`)."""
        if self.store.schema < 2:
            return 0
        return int(
            self.store.rows("SELECT COUNT(*) FROM annotations WHERE kind='correction'")[0][0]
        )

    def _stage_table(self) -> list[tuple[int, np.ndarray]]:
        d = self.draws()
        return [(int(s), g["item"].to_numpy(np.int64)) for s, g in d.groupby("stage", sort=True)]

    def stage_progress(self) -> tuple[list[int], list[int]]:
        """Completed stages, and the pending (incomplete) ones (a static design may have several
        when annotators hold the items of one stage and others ask for work)."""
        known = set(self.label_map())
        done, pending = [], []
        for s, items in self._stage_table():
            if first_new(items, known).any():
                pending.append(s)
            else:
                done.append(s)
        return done, pending

    def pending_items(self) -> np.ndarray:
        """Pool indices of the items of the pending stages that still need a label (first-draw
        order, without repeats); empty when no stage is pending."""
        known = set(self.label_map())
        rows = self.store.rows("SELECT item FROM draws ORDER BY seq")
        items = np.asarray([r[0] for r in rows], dtype=np.int64)
        if items.size == 0:
            return items
        return items[first_new(items, known)]

    def stage_rows(self) -> list[tuple[int, np.ndarray, dict]]:
        """Per stage (in order): the ``n`` its query asked for, its drawn items and how it was
        drawn (the ``rng`` column)."""
        req = {
            st: (n, info)
            for st, n, info in self.store.rows("SELECT stage, n_requested, rng FROM stages")
        }
        return [
            (int(req[st][0]), items, json.loads(req[st][1])) for st, items in self._stage_table()
        ]

    def stage_draws(self, stage: int) -> Draws:
        """The stored draws of one stage (items, weights ``p/q`` and ``q``, in draw order)."""
        rows = self.store.rows(
            "SELECT item, weight, q FROM draws WHERE stage=? ORDER BY seq", (stage,)
        )
        arr = np.asarray(rows, dtype=float).reshape(-1, 3)
        return Draws(arr[:, 0].astype(np.int64), arr[:, 1], arr[:, 2])

    def snapshot(self, max_stage: int) -> tuple[int, bytes] | None:
        """The latest evaluator snapshot taken after at most ``max_stage`` completed stages."""
        rows = self.store.rows(
            "SELECT stage, state FROM snapshots WHERE stage <= ? ORDER BY stage DESC LIMIT 1",
            (max_stage,),
        )
        return (int(rows[0][0]), bytes(rows[0][1])) if rows else None

    def labeled_draws(self) -> tuple[Draws, np.ndarray]:
        """The draws of completed stages and their labels (class values), aligned."""
        done, _ = self.stage_progress()
        d = self.draws()
        d = d[d["stage"].isin(done)]
        known = self.label_map()
        labels = np.asarray([self.parse_label(known[int(i)]) for i in d["item"]])
        return (
            Draws(
                d["item"].to_numpy(np.int64),
                d["weight"].to_numpy(float),
                d["q"].to_numpy(float),
            ),
            labels,
        )

    def budget_used(self) -> float:
        """Labels recorded (distinct items), or their total cost when the pool has label costs."""
        costs = self.pool.costs
        if costs is None:
            return float(self.n_labels)
        items = [r[0] for r in self.store.rows("SELECT item FROM labels")]
        return float(costs[np.asarray(items, dtype=np.int64)].sum()) if items else 0.0

    def pending_cost(self) -> float:
        """Labels (or their cost) committed to pending items, leased or not."""
        pend = self.pending_items()
        costs = self.pool.costs
        return float(pend.size if costs is None else costs[pend].sum())

    def budget_left(self) -> float | None:
        """Budget not yet spent or committed to pending items (``None``: unlimited)."""
        if self.design.budget is None:
            return None
        return max(float(self.design.budget) - self.budget_used() - self.pending_cost(), 0.0)

    # -- leases -----------------------------------------------------------------------------------
    def leases(self, active_only: bool = True) -> pd.DataFrame:
        """Leases (``item``, ``id``, ``annotator``, ``holder``, ``batch``, ``granted``,
        ``expires``): by default the active ones (not expired, item not labeled yet)."""
        cols = ["item", "id", "annotator", "holder", "batch", "granted", "expires"]
        if self.store.schema < 2:
            return pd.DataFrame(columns=cols)
        rows = self.store.rows(
            "SELECT item, annotator, holder, batch, granted, expires FROM leases ORDER BY seq"
        )
        frame = pd.DataFrame(rows, columns=[c for c in cols if c != "id"])
        frame.insert(1, "id", [str(self.pool_file.ids[i]) for i in frame["item"]])
        if active_only:
            frame = team.active_leases(frame, set(self.label_map()))
        return frame.reset_index(drop=True)

    def annotator_labels(self, annotator: str) -> dict[int, str]:
        """The annotator's own latest answer per item (their first label or their own latest
        correction of it), by pool index."""
        if self.store.schema < 2:
            return {}
        return team.annotator_labels(self.store.con, annotator)

    def agreement(self) -> dict[str, Any]:
        """Agreement between annotators on the items two or more of them labeled.

        Each annotator's own latest answer counts (their first label or their own correction of
        it; adjudications by others are left out). Returns ``items`` (items with two or more
        annotators), ``pairs`` (pairs of answers on the same item), ``agree`` (share of those
        pairs that agree) and ``kappa``: Cohen's kappa for each pair of annotators with common
        items, ``{(a, b): (kappa, n_items)}``; ``κ = (p_o − p_e)/(1 − p_e)`` with ``p_o`` the
        observed agreement and ``p_e`` the agreement expected from the two annotators' label
        frequencies (Cohen, 1960); ``nan`` when ``p_e = 1``.
        """
        return team.agreement(self.annotations())
