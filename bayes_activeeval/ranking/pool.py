"""``RankingPool``: queries, the documents each ranker returns for them, graded relevance, costs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .._validation import show

__all__ = ["RankingPool"]


class RankingPool:
    """A pool of queries for evaluating rankers with graded relevance (Sawade (2012), Sec. 6.1).

    Labeling a query means grading every document of the query in the pool (all documents any
    ranker returns for it), at the query's cost. Arrays are padded to the largest query.

    Parameters
    ----------
    query_ids : array-like (m,)
        Query identifiers.
    doc_ids : list of sequences
        ``doc_ids[q]``: the documents of query ``q``.
    positions : dict of str -> ndarray (m, D)
        Per ranker, the 1-based rank of each document (``0``: not in that ranker's list; ``0``
        on the padding past a query's documents). The ranks of a query must be ``1..L`` without
        gaps or repeats.
    relevance : ndarray (m, D, K), optional
        ``P(grade = k | query, doc)`` for grades ``0..K-1`` (independent given the query,
        Sawade (2012), Eq. 6.3): finite, in ``[0, 1]`` and summing to 1 (within 1e-6) for every
        document (the padding is not checked; the pool keeps a certain grade 0 there). Default:
        uniform over ``0..max_grade``.
    costs : ndarray (m,), optional
        Label cost of each query (default 1).
    max_grade : int, optional
        ``y_max``, a whole number ``>= 1``; default ``K − 1`` from ``relevance``, else 4.

    Raises
    ------
    ValueError
        Ranks that are not whole numbers ``>= 0``, skip or repeat a position within a query or
        are not 0 on the padding; relevance probabilities outside ``[0, 1]``, not finite or not
        summing to 1; shapes that do not match; non-positive costs; duplicate query ids or
        documents within a query; a ``max_grade`` that is not a whole number ``>= 1`` or does
        not match ``relevance``.

    Notes
    -----
    Use :meth:`from_frame` or :meth:`from_parquet` to build one from a long table.
    """

    def __init__(
        self,
        query_ids: Any,
        doc_ids: Sequence[Sequence[Any]],
        positions: Mapping[str, np.ndarray],
        relevance: np.ndarray | None = None,
        costs: Any = None,
        max_grade: int | None = None,
    ) -> None:
        self.query_ids = np.asarray(query_ids, dtype=object)
        m = self.query_ids.size
        if m == 0:
            raise ValueError("the pool has no queries")
        if len(doc_ids) != m:
            raise ValueError(f"doc_ids has {len(doc_ids)} entries but there are {m} queries")
        self.doc_ids = [list(d) for d in doc_ids]
        self.n_docs = np.array([len(d) for d in self.doc_ids], dtype=np.int64)
        D = int(self.n_docs.max()) if m else 0
        if not isinstance(positions, Mapping) or not positions:
            raise ValueError(f"positions must be a non-empty dict of rankers, got {positions!r}")
        self.positions: dict[str, np.ndarray] = {}
        for name, pos in positions.items():
            self.positions[str(name)] = _check_positions(
                name, pos, self.query_ids, self.doc_ids, self.n_docs, D
            )
        if max_grade is not None:
            if (
                isinstance(max_grade, bool)
                or not isinstance(max_grade, (int, np.integer, float, np.floating))
                or not np.isfinite(max_grade)
                or max_grade != int(max_grade)
                or max_grade < 1
            ):
                raise ValueError(
                    f"max_grade must be a whole number >= 1 (grades 0..max_grade), got "
                    f"{max_grade!r}"
                )
            max_grade = int(max_grade)
        if relevance is None:
            K = (4 if max_grade is None else max_grade) + 1
            relevance = np.full((m, D, K), 1.0 / K)
        relevance = np.asarray(relevance, dtype=float)
        if relevance.ndim != 3 or relevance.shape[:2] != (m, D) or relevance.shape[2] < 2:
            raise ValueError(
                f"relevance has shape {relevance.shape}; expected ({m}, {D}, K) with K >= 2 grades"
            )
        self.relevance = check_relevance(relevance, self.query_ids, self.doc_ids, self.n_docs)
        self.max_grade = relevance.shape[2] - 1 if max_grade is None else int(max_grade)
        if self.max_grade != relevance.shape[2] - 1:
            raise ValueError(
                f"max_grade={max_grade!r} but relevance has {relevance.shape[2]} grade columns"
            )
        if costs is None:
            costs = np.ones(m)
        costs = np.asarray(costs, dtype=float)
        if costs.shape != (m,):
            raise ValueError(f"costs has shape {costs.shape}; expected ({m},)")
        bad = np.flatnonzero(~(np.isfinite(costs) & (costs > 0)))
        if bad.size:
            raise ValueError(
                f"cost of query {self.query_ids[bad[0]]!r} is {show(costs[bad[0]])}; "
                "costs must be positive and finite"
            )
        self.costs = costs
        self._index = {q: i for i, q in enumerate(self.query_ids.tolist())}
        if len(self._index) != m:
            raise ValueError("query_ids must be distinct")
        self._doc_index = [{d: j for j, d in enumerate(docs)} for docs in self.doc_ids]
        for q, (docs, index) in enumerate(zip(self.doc_ids, self._doc_index, strict=True)):
            if len(index) != len(docs):
                seen: set = set()
                dup = next(d for d in docs if d in seen or seen.add(d))
                raise ValueError(
                    f"doc_ids of query {self.query_ids[q]!r} repeat document {dup!r}; the "
                    "documents of a query must be distinct"
                )
        self._orders: dict[tuple[str, int | None], np.ndarray] = {}
        self._expected: dict = {}  # expected losses under a relevance model, by measure

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        *,
        query: str = "qid",
        item: str = "doc",
        ranks: Mapping[str, str],
        relevance: Sequence[str] | None = None,
        cost: str | None = None,
        max_grade: int | None = None,
    ) -> RankingPool:
        """A pool from a long table with one row per (query, document).

        Parameters
        ----------
        frame : pandas.DataFrame
        query, item : str
            Columns with the query and document identifiers.
        ranks : dict of str -> str
            Ranker name -> column of 1-based ranks (missing: the document is not in that ranker's
            list), e.g. ``{"a": "rank_a", "b": "rank_b"}``.
        relevance : list of str, optional
            Columns ``P(grade = 0), …, P(grade = K−1)``; each row must sum to 1. Default:
            uniform over ``0..max_grade`` (the thesis's ``active_uniD``).
        cost : str, optional
            Column with the label cost of each query (constant within a query); default 1.
        max_grade : int, optional
            ``y_max`` when ``relevance`` is not given (default 4).

        Raises
        ------
        ValueError
            For unknown columns, duplicate (query, document) rows, ranks that are not whole
            numbers ``>= 1`` or that skip or repeat a position within a query, relevance columns
            outside ``[0, 1]`` or not summing to one, non-positive or varying costs per query.
        """
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
        if not isinstance(ranks, Mapping) or not ranks:
            raise ValueError(f"ranks must be a non-empty dict {{ranker: column}}, got {ranks!r}")
        if relevance is not None and (isinstance(relevance, str) or len(relevance) < 2):
            raise ValueError(
                f"relevance must list at least two columns P(grade=0), P(grade=1), …, got {relevance!r}"
            )
        needed = {"query": query, "item": item}
        needed.update({f"ranks[{k!r}]": v for k, v in ranks.items()})
        for i, col in enumerate(relevance or []):
            needed[f"relevance[{i}]"] = col
        if cost is not None:
            needed["cost"] = cost
        for arg, col in needed.items():
            if col not in frame.columns:
                raise ValueError(f"{arg}={col!r} is not a column of the frame")
        if len(frame) == 0:
            raise ValueError("frame has no rows")
        qcodes, qids = pd.factorize(frame[query], sort=False)
        if (qcodes < 0).any():
            raise ValueError(f"query column {query!r} has missing values")
        if frame[item].isna().any():
            raise ValueError(f"item column {item!r} has missing values")
        dup = frame.duplicated(subset=[query, item])
        if dup.any():
            r = frame.loc[dup.to_numpy()].iloc[0]
            raise ValueError(
                f"duplicate row for query {r[query]!r} and {item} {r[item]!r}: "
                "give one row per (query, document)"
            )
        m = qids.size
        order = np.argsort(qcodes, kind="stable")
        qs = qcodes[order]
        slot = np.arange(qs.size) - np.searchsorted(qs, qs, side="left")
        n_docs = np.bincount(qs, minlength=m)
        D = int(n_docs.max())
        items = frame[item].to_numpy(dtype=object)[order]
        starts = np.concatenate([[0], np.cumsum(n_docs)])
        doc_ids = [items[starts[q] : starts[q + 1]].tolist() for q in range(m)]
        positions = {}
        for name, col in ranks.items():
            positions[str(name)] = _positions(frame[col], order, qs, slot, m, D, name, col, qids)
        rel = None
        if relevance is not None:
            P = frame[list(relevance)].to_numpy(dtype=float)[order]
            bad = np.flatnonzero(~((P >= 0) & (P <= 1)).all(axis=1))
            if bad.size:
                raise ValueError(
                    f"relevance of query {qids[qs[bad[0]]]!r}, {item} {items[bad[0]]!r} is "
                    f"{P[bad[0]].tolist()}; probabilities must be in [0, 1]"
                )
            s = P.sum(axis=1)
            bad = np.flatnonzero(np.abs(s - 1.0) > 1e-6)
            if bad.size:
                raise ValueError(
                    f"relevance of query {qids[qs[bad[0]]]!r}, {item} {items[bad[0]]!r} sums to "
                    f"{s[bad[0]]:.6g}; the columns {list(relevance)} must sum to 1"
                )
            K = P.shape[1]
            rel = np.zeros((m, D, K))
            rel[qs, slot] = P / s[:, None]
        costs = None
        if cost is not None:
            c = frame[cost].to_numpy(dtype=float)[order]
            bad = np.flatnonzero(~(np.isfinite(c) & (c > 0)))
            if bad.size:
                raise ValueError(
                    f"cost={cost!r}: query {qids[qs[bad[0]]]!r} has cost {show(c[bad[0]])}; "
                    "costs must be positive and finite"
                )
            lo = np.full(m, np.inf)
            hi = np.full(m, -np.inf)
            np.minimum.at(lo, qs, c)
            np.maximum.at(hi, qs, c)
            bad = np.flatnonzero(hi - lo > 1e-12 * np.maximum(hi, 1.0))
            if bad.size:
                raise ValueError(
                    f"cost={cost!r}: query {qids[bad[0]]!r} has costs from {lo[bad[0]]:.6g} to "
                    f"{hi[bad[0]]:.6g}; the cost is per query and must be the same on its rows"
                )
            costs = lo
        return cls(list(qids), doc_ids, positions, rel, costs, max_grade)

    @classmethod
    def from_parquet(cls, path: Any, **kwargs: Any) -> RankingPool:
        """:meth:`from_frame` on a Parquet file (same keyword arguments)."""
        return cls.from_frame(pd.read_parquet(path), **kwargs)

    # -- shape ------------------------------------------------------------------------------
    @property
    def n_queries(self) -> int:
        return int(self.query_ids.size)

    @property
    def max_docs(self) -> int:
        return int(self.relevance.shape[1])

    @property
    def n_grades(self) -> int:
        return self.max_grade + 1

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self.positions)

    def check_model(self, model: str | None) -> str:
        """The ranker name (the only one if ``None``), or a ValueError naming the choices."""
        if model is None:
            if len(self.positions) != 1:
                raise ValueError(
                    f"the pool has rankers {list(self.positions)}; name one with model="
                )
            return next(iter(self.positions))
        if model not in self.positions:
            raise ValueError(f"model={model!r} is not a ranker of the pool {list(self.positions)}")
        return model

    def list_lengths(self, model: str) -> np.ndarray:
        """Length of each query's list for ``model``."""
        return (self.positions[self.check_model(model)] > 0).sum(axis=1)

    def truncated_positions(self, model: str, k: int | None = None) -> np.ndarray:
        """Ranks of ``model`` with documents below the cut-off ``k`` set to 0 (not ranked)."""
        pos = self.positions[self.check_model(model)]
        return pos if k is None else np.where(pos <= k, pos, 0)

    def order(self, model: str, k: int | None = None) -> np.ndarray:
        """Document index at each rank ``1..L`` (m, L), ``-1`` past the end of a list."""
        key = (model, k)
        if key not in self._orders:
            pos = self.truncated_positions(model, k)
            L = int(pos.max()) if pos.size else 0
            out = np.full((self.n_queries, L), -1, dtype=np.int64)
            rows, docs = np.nonzero(pos > 0)
            out[rows, pos[rows, docs] - 1] = docs
            self._orders[key] = out
        return self._orders[key]

    def with_relevance(self, relevance: np.ndarray) -> RankingPool:
        """The same pool with other relevance probabilities (m, D, K) (e.g. a fitted model's)."""
        return RankingPool(
            self.query_ids, self.doc_ids, self.positions, relevance, self.costs, None
        )

    def uniform_relevance(self) -> np.ndarray:
        """``P(grade = k) = 1/K`` for every document (the thesis's ``active_uniD``)."""
        K = self.n_grades
        return np.full((*self.relevance.shape[:2], K), 1.0 / K)

    # -- labels -----------------------------------------------------------------------------
    def query_index(self, query_ids: Any) -> np.ndarray:
        """Positions of the given query identifiers in the pool."""
        out = []
        for q in query_ids:
            q = q.item() if isinstance(q, np.generic) else q
            if q not in self._index:
                raise ValueError(f"query {q!r} is not in the pool")
            out.append(self._index[q])
        return np.asarray(out, dtype=np.int64)

    def grade_matrix(self, labels: Mapping[Any, Mapping[Any, Any]], queries: Any) -> np.ndarray:
        """Grades ``{qid: {doc: grade}}`` as an (m, D) array (``-1`` where not labeled).

        Every document of each query in ``queries`` (pool positions) must be graded with a whole
        number in ``0..max_grade``.
        """
        if not isinstance(labels, Mapping):
            raise TypeError(
                f"labels must be a mapping {{query: {{doc: grade}}}}, got {type(labels).__name__}"
            )
        G = np.full((self.n_queries, self.max_docs), -1, dtype=np.int64)
        for qi in np.unique(np.asarray(queries, dtype=np.int64)):
            qid = self.query_ids[qi]
            if qid not in labels:
                raise ValueError(f"labels has no grades for query {qid!r}")
            got = labels[qid]
            if not isinstance(got, Mapping):
                raise TypeError(f"labels[{qid!r}] must be a mapping {{doc: grade}}")
            index = self._doc_index[qi]
            for doc, grade in got.items():
                j = index.get(doc.item() if isinstance(doc, np.generic) else doc)
                if j is None:
                    raise ValueError(
                        f"labels[{qid!r}] grades {doc!r}, not a document of that query"
                    )
                G[qi, j] = _grade(grade, self.max_grade, qid, doc)
            missing = np.flatnonzero(G[qi, : self.n_docs[qi]] < 0)
            if missing.size:
                doc = self.doc_ids[qi][missing[0]]
                raise ValueError(
                    f"labels[{qid!r}] has no grade for document {doc!r} "
                    f"({missing.size} of {self.n_docs[qi]} missing); grade every document of the query"
                )
        return G

    def labeling_batch(self, queries: Any) -> dict[Any, list[Any]]:
        """``{qid: [doc, …]}``: what to grade for the given pool positions."""
        return {self.query_ids[q]: list(self.doc_ids[q]) for q in np.unique(queries)}

    def __repr__(self) -> str:
        return (
            f"RankingPool(n_queries={self.n_queries}, rankers={list(self.positions)}, "
            f"max_docs={self.max_docs}, grades=0..{self.max_grade})"
        )


def _check_positions(name, pos, query_ids, doc_ids, n_docs, D) -> np.ndarray:
    """``positions[name]`` as int64 (m, D): whole numbers ``>= 0``, ``0`` on the padding, and the
    ranks of each query ``1..L`` without gaps or repeats."""
    m = query_ids.size
    try:
        arr = np.asarray(pos, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"positions[{name!r}] must be an array of ranks (whole numbers)") from exc
    if arr.shape != (m, D):
        raise ValueError(f"positions[{name!r}] has shape {arr.shape}; expected {(m, D)}")
    real = np.arange(D)[None, :] < n_docs[:, None]
    with np.errstate(invalid="ignore"):
        whole = np.isfinite(arr) & (arr == np.round(arr)) & (arr >= 0)
    bad = np.argwhere(real & ~whole)
    if bad.size:
        q, j = bad[0]
        raise ValueError(
            f"positions[{name!r}] of query {query_ids[q]!r}, document {doc_ids[q][j]!r} is "
            f"{show(np.asarray(pos)[q, j])}; ranks are whole numbers >= 1 (0: not in the list)"
        )
    bad = np.argwhere(~real & (~whole | (arr != 0)))
    if bad.size:
        q, j = bad[0]
        raise ValueError(
            f"positions[{name!r}] of query {query_ids[q]!r} has {show(np.asarray(pos)[q, j])} in "
            f"slot {j}, past its {n_docs[q]} documents; the padding must be 0"
        )
    out = arr.astype(np.int64)
    q = _first_bad_list(out)
    if q is not None:
        got = sorted(int(x) for x in out[q] if x > 0)
        raise ValueError(
            f"positions[{name!r}] of query {query_ids[q]!r} are the ranks {got}; the ranks of a "
            "list must be 1..L without gaps or repeats"
        )
    return out


def _first_bad_list(pos: np.ndarray) -> int | None:
    """The first query (row) whose positive ranks are not ``1..L`` without gaps or repeats
    (``0`` marks a document not in the list), or ``None``."""
    length = (pos > 0).sum(axis=1)
    srt = np.sort(pos, axis=1)
    repeated = np.any((srt[:, 1:] == srt[:, :-1]) & (srt[:, 1:] > 0), axis=1)
    bad = np.flatnonzero((pos.max(axis=1, initial=0) != length) | repeated)
    return int(bad[0]) if bad.size else None


def check_relevance(relevance, query_ids, doc_ids, n_docs) -> np.ndarray:
    """Relevance probabilities: finite, in ``[0, 1]``, summing to 1 over the grades of every
    document. The padding past a query's documents is not checked: the returned copy holds a
    certain grade 0 there (never ranked, never asked), so that whatever it held (NaN included)
    cannot reach a sum over the grades."""
    D = relevance.shape[1]
    real = np.arange(D)[None, :] < n_docs[:, None]
    with np.errstate(invalid="ignore"):
        inside = np.all(np.isfinite(relevance) & (relevance >= 0) & (relevance <= 1), axis=2)
    bad = np.argwhere(real & ~inside)
    if bad.size:
        q, j = bad[0]
        raise ValueError(
            f"relevance of query {query_ids[q]!r}, document {doc_ids[q][j]!r} is "
            f"{relevance[q, j].tolist()}; probabilities must be finite and in [0, 1]"
        )
    total = relevance.sum(axis=2)
    bad = np.argwhere(real & (np.abs(total - 1.0) > 1e-6))
    if bad.size:
        q, j = bad[0]
        raise ValueError(
            f"relevance of query {query_ids[q]!r}, document {doc_ids[q][j]!r} sums to "
            f"{total[q, j]:.6g}; P(grade = 0..K-1) must sum to 1"
        )
    out = np.array(relevance, dtype=float, copy=True)
    out[~real] = 0.0
    out[~real, 0] = 1.0
    return out


def _grade(value: Any, max_grade: int, qid: Any, doc: Any) -> int:
    try:
        g = float(value)
    except (TypeError, ValueError):
        g = np.nan
    if not (np.isfinite(g) and g == int(g) and 0 <= g <= max_grade):
        raise ValueError(
            f"grade of query {qid!r}, document {doc!r} is {show(value)}; grades are whole "
            f"numbers 0..{max_grade}"
        )
    return int(g)


def _positions(col, order, qs, slot, m, D, name, column, qids) -> np.ndarray:
    r = pd.to_numeric(col, errors="coerce").to_numpy(dtype=float)[order]
    raw = col.to_numpy()[order]
    nonnum = np.flatnonzero(np.isnan(r) & ~pd.isna(raw))
    if nonnum.size:
        raise ValueError(
            f"ranks[{name!r}] (column {column!r}) has {show(raw[nonnum[0]])}; ranks are whole numbers >= 1"
        )
    has = ~np.isnan(r)
    with np.errstate(invalid="ignore"):
        bad = np.flatnonzero(has & ~(np.isfinite(r) & (r >= 1) & (r == np.floor(r))))
    if bad.size:
        raise ValueError(
            f"ranks[{name!r}] (column {column!r}) has {show(r[bad[0]])} for query "
            f"{qids[qs[bad[0]]]!r}; ranks are whole numbers >= 1 (missing: not in the list)"
        )
    pos = np.zeros((m, D), dtype=np.int64)
    pos[qs[has], slot[has]] = r[has].astype(np.int64)
    q = _first_bad_list(pos)
    if q is not None:
        got = sorted(int(x) for x in pos[q] if x > 0)
        raise ValueError(
            f"ranks[{name!r}] (column {column!r}) for query {qids[q]!r} are {got}; the ranks of a "
            "list must be 1..L without gaps or repeats"
        )
    return pos
