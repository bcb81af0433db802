"""A persisted labeling session for ranking evaluation (``bae init --task ranking``).

One SQLite file holds the pool file's path, SHA-256 and read options, the design (measure,
rankers, design, budget, seed), the whole budgeted draw sequence (drawn once at creation from the
seed, so a crash never changes what is asked) and every grade. ``next`` releases the next queries
in draw order (every document of each is listed) and returns the pending ones again until they
are fully graded; the estimate uses the longest prefix of the draw sequence whose queries are all
graded, so it is the estimate of a run stopped there.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .io import file_checksum
from .proposals import Draws
from .ranking import RankingPool, draw, estimate, get, proposal, test

__all__ = ["RankingSession", "is_ranking_session"]

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE draws (seq INTEGER PRIMARY KEY, query INTEGER NOT NULL, weight REAL NOT NULL);
CREATE TABLE grades (qid TEXT NOT NULL, doc TEXT NOT NULL, grade INTEGER NOT NULL,
                     time TEXT NOT NULL, PRIMARY KEY (qid, doc));
"""


def is_ranking_session(path: str) -> bool:
    """Whether ``path`` is a ranking session file."""
    if not Path(path).is_file():
        return False
    try:
        # immutable: a read that creates no -wal/-shm file beside a (WAL) session of another kind
        uri = Path(path).resolve().as_uri() + "?mode=ro&immutable=1"
        con = sqlite3.connect(uri, uri=True)
        try:
            row = con.execute("SELECT value FROM meta WHERE key = 'task'").fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return False
    return row is not None and json.loads(row[0]) == "ranking"


def _read(path: str) -> pd.DataFrame:
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"pool file {path!r} does not exist")
    if p.suffix.lower() in (".parquet", ".pq"):
        return pd.read_parquet(p)
    return pd.read_csv(p)


class RankingSession:
    """A ranking labeling session; create with :meth:`create`, reopen with :meth:`open`."""

    def __init__(self, path: str, con: sqlite3.Connection, meta: dict[str, Any]) -> None:
        self.path = path
        self.con = con
        self.meta = meta
        frame = _read(meta["pool_path"])
        self.pool = RankingPool.from_frame(frame, **meta["read"])
        self.measure = get(meta["measure"]).name
        self.models = tuple(meta["models"])

    # -- life cycle -------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str,
        pool_path: str,
        read: dict[str, Any],
        *,
        measure: str,
        models: tuple[str, ...] = (),
        budget: float,
        design: str = "optimal",
        seed: int = 0,
        mix: float = 0.05,
        overwrite: bool = False,
    ) -> RankingSession:
        """Create the session: read and check the pool, draw the budgeted query sequence."""
        if budget is None:
            raise ValueError("a ranking session needs --budget (label cost units)")
        if Path(path).exists():
            if not overwrite:
                raise ValueError(f"session file {path!r} exists; use --overwrite to replace it")
            Path(path).unlink()
        pool = RankingPool.from_frame(_read(pool_path), **read)
        models = tuple(models) or pool.models
        if len(models) not in (1, 2):
            raise ValueError(f"name one ranker to evaluate or two to compare, got {list(models)}")
        rm = get(measure)
        kw = {"model": models[0]} if len(models) == 1 else {"models": models}
        prop = proposal(pool, rm, design=design, mix=mix, rng=seed, **kw)
        d = draw(pool, prop, budget, rng=seed)
        meta = {
            "task": "ranking",
            "pool_path": str(Path(pool_path).resolve()),
            "checksum": file_checksum(pool_path),
            "read": dict(read),
            "measure": rm.name,
            "models": list(models),
            "design": design,
            "budget": float(budget),
            "seed": int(seed),
            "mix": float(mix),
            "released": 0,
        }
        con = sqlite3.connect(path)
        with con:
            con.executescript(_SCHEMA)
            con.executemany(
                "INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()]
            )
            con.executemany(
                "INSERT INTO draws VALUES (?, ?, ?)",
                [
                    (i, int(q), float(w))
                    for i, (q, w) in enumerate(zip(d.indices, d.weights, strict=True))
                ],
            )
        return cls(path, con, meta)

    @classmethod
    def open(cls, path: str) -> RankingSession:
        if not is_ranking_session(path):
            raise ValueError(f"{path!r} is not a ranking session file")
        con = sqlite3.connect(path)
        meta = {k: json.loads(v) for k, v in con.execute("SELECT key, value FROM meta")}
        if file_checksum(meta["pool_path"]) != meta["checksum"]:
            con.close()
            raise ValueError(
                f"the pool file {meta['pool_path']!r} changed since the session was created "
                "(SHA-256 differs)"
            )
        return cls(path, con, meta)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> RankingSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- state ------------------------------------------------------------------------------
    def _draws(self) -> tuple[np.ndarray, np.ndarray]:
        rows = self.con.execute("SELECT query, weight FROM draws ORDER BY seq").fetchall()
        arr = np.array(rows, dtype=float).reshape(-1, 2)
        return arr[:, 0].astype(np.int64), arr[:, 1]

    def _order(self) -> np.ndarray:
        """Distinct queries in order of first draw."""
        idx, _ = self._draws()
        _, first = np.unique(idx, return_index=True)
        return idx[np.sort(first)]

    def _graded(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for qid, doc, g in self.con.execute("SELECT qid, doc, grade FROM grades"):
            out.setdefault(qid, {})[doc] = g
        return out

    def _complete(self, graded) -> np.ndarray:
        """Per pool query: every document graded."""
        pool = self.pool
        done = np.zeros(pool.n_queries, dtype=bool)
        for qi in self._order():
            got = graded.get(str(pool.query_ids[qi]), {})
            done[qi] = all(str(d) in got for d in pool.doc_ids[qi])
        return done

    def next(self, n: int = 10) -> pd.DataFrame:
        """The (query, document) rows to grade: the pending released queries, else ``n`` more."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n!r}")
        order = self._order()
        released = int(self.meta["released"])
        done = self._complete(self._graded())
        pending = [q for q in order[:released] if not done[q]]
        if not pending:
            if released >= order.size:
                raise ValueError("every query of the budget is graded: run `bae report`")
            pending = list(order[released : released + n])
            released += len(pending)
            self.meta["released"] = released
            with self.con:
                self.con.execute(
                    "UPDATE meta SET value = ? WHERE key = 'released'", (json.dumps(released),)
                )
        rows = []
        for q in pending:
            for j, doc in enumerate(self.pool.doc_ids[q]):
                row = {"qid": self.pool.query_ids[q], "doc": doc}
                for m in self.models:
                    r = int(self.pool.positions[m][q, j])
                    row[f"rank_{m}"] = r if r > 0 else None
                row["grade"] = None
                rows.append(row)
        return pd.DataFrame(rows)

    def record(self, frame: pd.DataFrame) -> tuple[int, int]:
        """Record grades from a frame with columns ``qid, doc, grade``; returns (recorded, skipped).

        Everything is checked before anything is written; a grade already recorded with the same
        value is skipped, a different value is an error.
        """
        for col in ("qid", "doc", "grade"):
            if col not in frame.columns:
                raise ValueError(f"the grades file has no column {col!r} (needs qid, doc, grade)")
        frame = frame.dropna(subset=["grade"])
        labels: dict[Any, dict[Any, Any]] = {}
        pool = self.pool
        keys = {str(q): q for q in pool.query_ids.tolist()}
        for qid, doc, g in zip(frame["qid"], frame["doc"], frame["grade"], strict=True):
            if str(qid) not in keys:
                raise ValueError(f"query {qid!r} is not in the pool")
            labels.setdefault(keys[str(qid)], {})[doc] = g
        # validate against the pool (unknown documents, grades out of range)
        for qid, docs in labels.items():
            qi = int(pool.query_index([qid])[0])
            names = {str(d): d for d in pool.doc_ids[qi]}
            fixed = {}
            for doc, g in docs.items():
                if str(doc) not in names:
                    raise ValueError(f"document {doc!r} is not a document of query {qid!r}")
                fixed[names[str(doc)]] = g
            full = dict.fromkeys(pool.doc_ids[qi], 0) | fixed
            pool.grade_matrix({qid: full}, [qi])  # raises on a bad grade
            labels[qid] = fixed
        old = self._graded()
        new, skipped = [], 0
        now = datetime.now(UTC).isoformat(timespec="seconds")
        for qid, docs in labels.items():
            for doc, g in docs.items():
                g = int(float(g))
                prev = old.get(str(qid), {}).get(str(doc))
                if prev is None:
                    new.append((str(qid), str(doc), g, now))
                elif prev == g:
                    skipped += 1
                else:
                    raise ValueError(
                        f"query {qid!r}, document {doc!r} already has grade {prev}, not {g}"
                    )
        with self.con:
            self.con.executemany("INSERT INTO grades VALUES (?, ?, ?, ?)", new)
        return len(new), skipped

    def result(self):
        """The estimate (one ranker) or paired test (two) from the graded prefix, or ``None``."""
        idx, w = self._draws()
        graded = self._graded()
        done = self._complete(graded)
        ok = done[idx]
        k = int(np.argmin(ok)) if not ok.all() else idx.size
        if k == 0:
            return None
        d = Draws(idx[:k], w[:k], np.full(k, np.nan))
        labels = {
            q: {doc: graded[str(q)][str(doc)] for doc in self.pool.doc_ids[qi]}
            for qi in np.unique(d.indices)
            for q in [self.pool.query_ids[qi]]
        }
        if len(self.models) == 1:
            return estimate(self.pool, self.measure, d, labels, model=self.models[0])
        return test(self.pool, self.measure, d, labels, models=self.models)

    def status(self) -> dict[str, Any]:
        order = self._order()
        done = self._complete(self._graded())
        graded_q = [q for q in order if done[q]]
        return {
            "measure": self.measure,
            "models": list(self.models),
            "design": self.meta["design"],
            "budget": self.meta["budget"],
            "queries_in_sample": int(order.size),
            "queries_graded": len(graded_q),
            "cost_graded": float(self.pool.costs[graded_q].sum()) if graded_q else 0.0,
            "released": int(self.meta["released"]),
        }
