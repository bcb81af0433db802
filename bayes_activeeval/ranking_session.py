"""A persisted labeling session for ranking evaluation (``bae init --task ranking``).

One SQLite file in the session format 2 of :mod:`bayes_activeeval.session` (the same schema,
store, transactions, annotators, leases, corrections and agreement; :mod:`.session.store` and
:mod:`.session.annotations`) with a query as the item: the pool file's path, SHA-256 and read
options, the design (measure, rankers, design, estimator, budget, seed), the whole budgeted draw
sequence (drawn once at creation from the seed as stage 0, so a crash never changes what is
asked) and every annotation. A query's label is the grades of all its documents, stored as one
JSON object ``{doc: grade}`` in the pool's document order.

``next`` leases the next ungraded queries in draw order to one annotator (every document of each
is listed) and returns them again until they are graded or the lease expires; others get other
queries meanwhile. A query counts with its first annotation or the latest correction of it
(``relabel``); a second annotator's grades of the same query only enter the agreement, which is
computed per document (Cohen's kappa on the grades). The estimate uses the longest prefix of the
draw sequence whose queries are all graded, so it is the estimate of a run stopped there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._validation import check_budget, check_count, check_fraction, show
from .io import file_checksum
from .proposals import Draws
from .ranking import RankingPool, draw, estimate, get, proposal, test
from .session import annotations as team
from .session.store import (
    SCHEMA_VERSION,
    SessionError,
    Store,
    check_new_path,
    connect,
    now,
    package_version,
    peek_meta,
    refuse_same_file,
    tune,
    write_new,
)

__all__ = ["RankingRecordResult", "RankingSession", "is_ranking_session", "seeded_streams"]

#: How :meth:`RankingSession.create` seeds its random streams (``meta["seeding"]``; a session
#: without the key was created with seeding 1). See :func:`seeded_streams`.
SEEDING = 2


def seeded_streams(
    seed: int, seeding: int = SEEDING
) -> tuple[np.random.Generator, np.random.Generator]:
    """The random generators a ranking session's creation used: ``(proposal_rng, draw_rng)``.

    Seeding 2 (sessions created since ``meta["seeding"]`` exists): the draws use
    ``default_rng(seed)`` and the proposal's Monte Carlo (the grade vectors of NDCG@k, whose
    moments have no closed form) the seed's first spawned child,
    ``default_rng(SeedSequence(seed).spawn(1)[0])`` — independent streams. Seeding 1 (sessions
    without the key): both were ``default_rng(seed)``, the same stream read twice, so the draws
    reused the very uniforms the Monte Carlo had used. The draws stream is the same in both, so
    a DCG, ERR or precision@k session (whose proposal draws no random number) draws the same
    queries under either; only NDCG@k sessions differ. A session stores its whole draw sequence
    at creation and never redraws it, so every session stays valid whatever its seeding; this
    function reproduces either for audits.

    Parameters
    ----------
    seed : int
        The session's seed (``meta["seed"]``).
    seeding : {1, 2}
        The session's seeding (``meta.get("seeding", 1)``; default: the current one).

    Returns
    -------
    (numpy.random.Generator, numpy.random.Generator)
        The proposal's and the draws' generators.
    """
    if seeding not in (1, 2):
        raise ValueError(f"seeding must be 1 or 2, got {seeding!r}")
    seed = int(seed)
    if seeding == 1:
        return np.random.default_rng(seed), np.random.default_rng(seed)
    child = np.random.SeedSequence(seed).spawn(1)[0]
    return np.random.default_rng(child), np.random.default_rng(seed)


def _meta_value(path: str, key: str) -> Any:
    """One value of a session file's meta table (``None``: no such key), read without writing a
    byte or creating a file (:func:`~bayes_activeeval.session.store.peek_meta`)."""
    return peek_meta(path, key)


def is_ranking_session(path: str) -> bool:
    """Whether ``path`` is a ranking session file.

    Parameters
    ----------
    path : str
        Path of the file to inspect (read-only: nothing is written, no file is created).

    Returns
    -------
    bool
        ``True`` when ``path`` is an SQLite file whose meta table has ``task = "ranking"``;
        ``False`` otherwise, also for a missing or unreadable file.
    """
    if not Path(path).is_file():
        return False
    try:
        return _meta_value(path, "task") == "ranking"
    except Exception:
        return False


def _format(path: str) -> Any:
    """The ``schema_version`` in a ranking session file's meta table (``None``: none)."""
    return _meta_value(path, "schema_version")


def _id_columns(read: Mapping[str, Any]) -> list[str]:
    """The query and document id columns named by ``RankingPool.from_frame`` options."""
    return [str(read.get("query", "qid")), str(read.get("item", "doc"))]


def _read(path: str, read: Mapping[str, Any]) -> pd.DataFrame:
    """The ranking pool file, its query and document ids as text (``001`` stays ``001``; ``NA``
    is an ordinary id: only an empty cell is missing, as for every pool file,
    :func:`~bayes_activeeval.io.read_text_csv`); Parquet id columns are cast to text."""
    from .io import read_text_csv

    p = Path(path)
    if p.is_dir():
        raise ValueError(f"pool file {path!r} is a directory, not a CSV or Parquet file")
    if not p.is_file():
        raise ValueError(f"pool file {path!r} does not exist")
    ids = _id_columns(read)
    if p.suffix.lower() not in (".parquet", ".pq"):
        return read_text_csv(p, "pool file", ids)
    frame = pd.read_parquet(p)
    for col in ids:
        if col in frame.columns:
            missing = frame[col].isna()
            frame[col] = frame[col].astype(str).astype(object).where(~missing, None)
    return frame


def _check_columns(frame: pd.DataFrame, read: Mapping[str, Any], text_cols: list[str]) -> None:
    """Refuse a column the session reads that the pool file lacks, naming the ``bae init``
    option that names it (:meth:`RankingPool.from_frame` checks the rest of ``read``)."""
    named = [(c, "--text-col") for c in text_cols]
    named += [(read.get("query", "qid"), "--query-col"), (read.get("item", "doc"), "--item-col")]
    ranks = read.get("ranks")
    if isinstance(ranks, Mapping):
        named += [(c, f"--rank {name}=…") for name, c in ranks.items()]
    if isinstance(read.get("relevance"), (list, tuple)):
        named += [(c, "--relevance-cols") for c in read["relevance"]]
    if read.get("cost") is not None:
        named.append((read["cost"], "--cost-col"))
    for col, option in named:
        if col not in frame.columns:
            raise ValueError(
                f"column {col!r} ({option}) is not in the pool file; its columns are: "
                + ", ".join(map(str, frame.columns))
            )


def read_grades(path: str | os.PathLike) -> pd.DataFrame:
    """A grades CSV (``qid``, ``doc``, ``grade``) with its ids as text, read as the pool file's
    ids are (:func:`_read`) and unescaped as ``bae next`` wrote them
    (:func:`~bayes_activeeval.io.unescape_cell`)."""
    from .io import read_text_csv, unescape_cell

    grades = read_text_csv(path, "grades file", ["qid", "doc"])
    for col in ("qid", "doc"):
        if col in grades.columns:
            grades[col] = grades[col].map(unescape_cell)
    return grades


@dataclass(frozen=True)
class RankingRecordResult:
    """What :meth:`RankingSession.record` did: queries whose grades were written, queries the
    annotator had already graded the same way (skipped), and drawn queries still ungraded.

    Parameters
    ----------
    recorded : int
        Number of queries whose grades were written.
    documents : int
        Number of document grades written (over the recorded queries).
    skipped : int
        Number of queries the annotator had already graded the same way (not written again).
    pending : int
        Number of distinct drawn queries still without grades after the call.
    """

    recorded: int
    documents: int
    skipped: int
    pending: int


def _as_given(key: str, keys: Mapping[str, Any], missing: str) -> str:
    """The id ``key`` of :meth:`RankingSession.relabel` as the pool has it: exactly as given
    (as :meth:`RankingSession.record` matches), so ``'q1 '`` and ``'q1'`` stay two queries. Only
    when nothing matches exactly is surrounding whitespace ignored, and only if that leaves one
    id (``"d1=2, d2=1"`` on the command line still finds ``d2``): it never picks another item
    than the one named exactly, and never guesses between two."""
    if key in keys:
        return key
    near = [k for k in keys if k.strip() == key.strip()]
    if len(near) == 1 and key.strip():
        return near[0]
    if len(near) > 1:
        raise ValueError(
            f"{missing}; without its surrounding spaces it could be any of "
            + ", ".join(map(repr, near))
            + ": give the id exactly"
        )
    raise ValueError(missing)


def _corrected(
    con: Any, qi: int, iid: str, fixed: dict[str, int], annotator: str, own: bool
) -> dict[str, int]:
    """The grades a correction of query ``qi`` writes (see :meth:`RankingSession.relabel`)."""
    row = con.execute("SELECT seq, label FROM labels WHERE item=?", (qi,)).fetchone()
    if not own:
        if row is None:
            raise SessionError(f"query {iid!r} has no grades yet: record them first")
        return {d: fixed.get(d, g) for d, g in json.loads(row[1]).items()}
    mine = team.annotator_labels(con, annotator).get(qi)
    if mine is None:
        raise SessionError(f"query {iid!r} has no grades by {annotator} yet: record them first")
    mine = json.loads(mine)
    root = con.execute(
        "SELECT seq FROM annotations WHERE item=? AND annotator=? AND kind='label'",
        (qi, annotator),
    ).fetchone()[0]
    changes = {d: g for d, g in fixed.items() if mine[d] != g}
    if int(row[0]) != int(root):  # a second annotation: the annotator's own answer only
        return {d: changes.get(d, g) for d, g in mine.items()}
    # the answer the query counts with: change only what the annotator changes, on the grades
    # counted now (which hold any correction others made since the annotator's latest answer)
    counted = json.loads(row[1])
    for d, g in changes.items():
        if counted[d] != mine[d] and counted[d] != g:
            who = con.execute(
                "SELECT annotator FROM annotations WHERE root=? AND annotator<>? "
                "ORDER BY seq DESC LIMIT 1",
                (int(root), annotator),
            ).fetchone()
            by = f" by {who[0]}" if who else ""
            raise SessionError(
                f"query {iid!r}, document {d!r}: you graded it {mine[d]}, then it was corrected "
                f"to {counted[d]}{by}; changing it to {g} would undo that correction: correct it "
                "with bae relabel (not an undo of your own grades)"
            )
    return {d: changes.get(d, g) for d, g in counted.items()}


class RankingSession:
    """A ranking labeling session; create with :meth:`create`, reopen with :meth:`open`.

    Parameters
    ----------
    path : str
        Path of the session file.
    store : bayes_activeeval.session.store.Store
        The open session file.
    meta : dict
        The file's meta table, decoded (``pool_path``, ``read``, ``measure``, ``models``,
        ``estimator``, …); the pool file at ``meta["pool_path"]`` is read with the
        ``RankingPool.from_frame`` options ``meta["read"]``.

    Attributes
    ----------
    path : str
    pool : RankingPool
    store : bayes_activeeval.session.store.Store
        The open file (transactions, read-only guard).
    meta : dict
    """

    def __init__(self, path: str, store: Store, meta: dict[str, Any]) -> None:
        self.path = path
        self.store = store
        self.meta = meta
        self.frame = _read(meta["pool_path"], meta["read"])
        self.pool = RankingPool.from_frame(self.frame, **meta["read"])
        self._row_index: list[list[int]] | None = None
        self.measure = get(meta["measure"]).name
        self.models = tuple(meta["models"])
        self.estimator = meta.get("estimator", "model_assisted")

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
        estimator: str = "model_assisted",
        seed: int = 0,
        mix: float = 0.05,
        text_cols: tuple[str, ...] = (),
        overwrite: bool = False,
    ) -> RankingSession:
        """Create the session: read and check the pool, draw the budgeted query sequence, and
        write the file in one piece (a crash leaves no session or a whole one).

        Parameters
        ----------
        path : str
            The session file to write.
        pool_path : str
            The pool file (CSV or Parquet, one row per query and document).
        read : dict
            :meth:`RankingPool.from_frame` options (``query``, ``item``, ``ranks``,
            ``relevance``, ``cost``, ``max_grade``); stored, and used again at every open.
        measure : str
            ``"dcg"``, ``"err"``, ``"ndcg@k"``, … (:func:`~bayes_activeeval.ranking.get`).
        models : tuple of str
            One ranker to evaluate or two to compare (default: the pool's rankers).
        budget : float
            Label cost to spend (the draw sequence is cut at it).
        design, estimator, mix
            As for :func:`~bayes_activeeval.ranking.proposal`.
        seed : int
            Seeds the draws and, on an independent stream, the proposal's Monte Carlo
            (:func:`seeded_streams`; stored with ``meta["seeding"]``).
        text_cols : tuple of str
            Columns of the pool file shown to graders (``bae next``, ``bae label``,
            ``bae serve``): the query's text, a document's title or snippet.
        overwrite : bool
            Replace an existing session file: never one holding labels or open in another
            process, never a file that is no session but holds labels or is another database
            (:func:`~bayes_activeeval.session.store.write_new`).

        Returns
        -------
        RankingSession
            The new session, open.
        """
        # checked before the pool is read; the errors name the argument and its CLI option
        if budget is None:
            raise ValueError("a ranking session needs --budget (label cost units)")
        check_budget(budget, "budget (--budget)")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed (--seed) must be a non-negative integer, got {seed!r}")
        check_fraction(mix, "mix (--mix)", allow_one=True)
        try:
            rm = get(measure)
        except ValueError as exc:
            raise ValueError(f"--measure: {exc}") from None
        ranks = list(read.get("ranks") or ())
        unknown = [m for m in models if ranks and m not in ranks]
        if unknown:
            raise ValueError(f"models (--model) {unknown[0]!r} is not a ranker of the pool {ranks}")
        path = str(Path(path).expanduser())
        refuse_same_file(path, pool_path, "the pool file")
        if os.path.exists(path) and overwrite and is_ranking_session(path):
            if _format(path) != SCHEMA_VERSION:
                raise SessionError(
                    f"{path} is a ranking session of a development version (grades table); "
                    "--overwrite never replaces it: remove the file yourself or pick another name"
                )
        check_new_path(path, overwrite=overwrite)  # before the pool is read; the file: write_new
        frame = _read(pool_path, read)
        text_cols = [str(c) for c in text_cols]
        _check_columns(frame, read, text_cols)
        pool = RankingPool.from_frame(frame, **read)
        models = tuple(models) or pool.models
        if len(models) not in (1, 2):
            raise ValueError(f"name one ranker to evaluate or two to compare, got {list(models)}")
        kw = {"model": models[0]} if len(models) == 1 else {"models": models}
        prop_rng, draw_rng = seeded_streams(seed)  # independent streams (seeding 2)
        prop = proposal(pool, rm, design=design, mix=mix, estimator=estimator, rng=prop_rng, **kw)
        d = draw(pool, prop, budget, rng=draw_rng)
        if len(d) == 0:  # draw never returns none; a session without queries is useless
            raise ValueError(
                f"--budget {float(budget):g} buys no query (the cheapest costs "
                f"{float(pool.costs.min()):.6g}); no session written"
            )
        meta = {
            "task": "ranking",
            "schema_version": SCHEMA_VERSION,
            "created": now(),
            "package_version": package_version(),
            "pool_path": str(Path(pool_path).resolve()),
            "checksum": file_checksum(pool_path),
            "read": dict(read),
            "measure": rm.name,
            "models": list(models),
            "design": design,
            "estimator": estimator,
            "budget": float(budget),
            "seed": int(seed),
            "seeding": SEEDING,
            "mix": float(mix),
            "n_draws": len(d),
            "text_cols": text_cols,
        }
        ids = pool.query_ids
        rows = [
            (0, int(i), str(ids[i]), float(q), float(w))
            for i, q, w in zip(d.indices, prop.q[d.indices], d.weights, strict=True)
        ]

        def fill(con):
            con.execute(
                "INSERT INTO stages(stage, n_requested, rng, created) VALUES (0, ?, ?, ?)",
                (len(d), json.dumps({"seed": int(seed), "budget": float(budget)}), now()),
            )
            con.executemany(
                "INSERT INTO draws(stage, item, item_id, q, weight) VALUES (?, ?, ?, ?, ?)", rows
            )

        write_new(path, meta, overwrite=overwrite, fill=fill)
        return cls.open(path)

    @classmethod
    def open(
        cls, path: str, *, readonly: bool = False, pool_path: str | None = None
    ) -> RankingSession:
        """Open a ranking session (``readonly``: never write a byte, as ``bae status``).

        Parameters
        ----------
        path : str
            The session file.
        readonly : bool, optional
            Open without writing (default ``False``).
        pool_path : str, optional
            Where the pool file is now, if it moved since ``bae init`` (its checksum must match
            the one recorded; the session file is not changed).

        Returns
        -------
        RankingSession
        """
        path = str(Path(path).expanduser())
        if not is_ranking_session(path):
            raise SessionError(f"{path!r} is not a ranking session file")
        con = connect(path, readonly=readonly)
        meta = {k: json.loads(v) for k, v in con.execute("SELECT key, value FROM meta")}
        if meta.get("schema_version") != SCHEMA_VERSION:
            con.close()
            raise SessionError(
                f"{path} is a ranking session of a development version without annotators "
                "(grades table); create it again with bae init --task ranking"
            )
        if pool_path is not None:
            meta["pool_path"] = str(Path(pool_path).expanduser().resolve())
        if not os.path.exists(meta["pool_path"]):
            con.close()
            hint = "" if pool_path is not None else " (if it moved, give its new path: --pool)"
            raise SessionError(f"the session's pool file {meta['pool_path']} is missing{hint}")
        if file_checksum(meta["pool_path"]) != meta["checksum"]:
            con.close()
            raise SessionError(
                f"the pool file {meta['pool_path']!r} changed since the session was created "
                "(SHA-256 differs)"
            )
        if not readonly:
            tune(con)
        return cls(path, Store(path, con, readonly=readonly), meta)

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> RankingSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- state ------------------------------------------------------------------------------
    def _draws(self) -> tuple[np.ndarray, np.ndarray]:
        rows = self.store.rows("SELECT item, weight FROM draws ORDER BY seq")
        arr = np.array(rows, dtype=float).reshape(-1, 2)
        return arr[:, 0].astype(np.int64), arr[:, 1]

    def _order(self) -> np.ndarray:
        """Distinct queries in order of first draw."""
        idx, _ = self._draws()
        _, first = np.unique(idx, return_index=True)
        return idx[np.sort(first)]

    def graded(self) -> dict[int, dict[str, int]]:
        """The grades each graded query counts with (its first annotation or the latest
        correction of it), by pool query index: ``{query: {doc: grade}}``."""
        return {
            int(it): json.loads(lab)
            for it, lab in self.store.rows("SELECT item, label FROM labels")
        }

    def annotations(self) -> pd.DataFrame:
        """Every annotation ever recorded (one row per query and annotator or correction):
        ``seq``, ``item`` (pool query index), ``id`` (query id), ``label`` (the grades as JSON),
        ``annotator``, ``kind``, ``root``, ``supersedes``, ``reason``, ``stage``, ``batch``,
        ``time``, ``source``."""
        cols = ["seq", "item", "id", "label", "annotator", "kind", "root", "supersedes", "reason",
                "stage", "batch", "time", "source"]  # fmt: skip
        sql = (
            "SELECT seq, item, item_id, label, annotator, kind, root, supersedes, reason, "
            "stage, batch, time, source FROM annotations ORDER BY seq"
        )
        return pd.DataFrame(self.store.rows(sql), columns=cols)

    def leases(self, active_only: bool = True) -> pd.DataFrame:
        """Leases (``item``, ``id``, ``annotator``, ``holder``, ``batch``, ``granted``,
        ``expires``): by default the active ones (not expired, query not graded yet)."""
        rows = self.store.rows(
            "SELECT item, annotator, holder, batch, granted, expires FROM leases ORDER BY seq"
        )
        frame = pd.DataFrame(
            rows, columns=["item", "annotator", "holder", "batch", "granted", "expires"]
        )
        frame.insert(1, "id", [str(self.pool.query_ids[i]) for i in frame["item"]])
        if active_only:
            frame = team.active_leases(frame, set(self.graded()))
        return frame.reset_index(drop=True)

    def agreement(self) -> dict[str, Any]:
        """Agreement between annotators per document, on the queries two or more of them graded
        (:meth:`bayes_activeeval.session.Session.agreement`'s rules and Cohen's kappa on the
        grades): ``items`` counts documents."""
        a = self.annotations()
        rows = []
        width = int(self.pool.max_docs)
        for r in a.itertuples():
            for j, (_doc, g) in enumerate(json.loads(r.label).items()):
                rows.append(
                    {
                        "seq": int(r.seq) * width + j,
                        "item": int(r.item) * width + j,
                        "annotator": r.annotator,
                        "label": str(g),
                        "kind": r.kind,
                        "root": None if pd.isna(r.root) else int(r.root) * width + j,
                    }
                )
        frame = pd.DataFrame(rows, columns=["seq", "item", "annotator", "label", "kind", "root"])
        return team.agreement(frame)

    # -- asking -----------------------------------------------------------------------------
    def lease(
        self,
        n: int = 10,
        *,
        annotator: str | None = None,
        holder: str | None = None,
        lease: float = team.DEFAULT_LEASE,
    ) -> np.ndarray:
        """Lease the next queries to grade to one annotator: their pool indices.

        The queries are those leased to ``holder`` (default: the annotator) and not graded
        yet; if it holds none, up to ``n`` ungraded queries of the draw sequence that nobody
        else holds are leased to it for ``lease`` seconds (asking twice never changes what is
        asked; :func:`bayes_activeeval.session.annotations.lease_tx`).

        Parameters
        ----------
        n : int
            Queries to lease when the holder holds none.
        annotator : str, optional
            Who grades (default: the login name).
        holder : str, optional
            Who holds the leases (default: the annotator; ``bae serve``: the browser).
        lease : float
            Seconds the new leases last.

        Returns
        -------
        numpy.ndarray of int
            Pool indices of the queries, in draw order.

        Raises
        ------
        SessionError
            When every query of the budget is graded, or every ungraded one is leased to
            another holder.
        """
        n = check_count(n, "n")
        annotator = team.check_annotator(annotator)
        holder = annotator if holder is None else str(holder)
        lease = team.check_lease(lease)
        self.store.require_writable("next")
        got: list[np.ndarray] = []
        self.store.transaction(
            lambda con: got.append(team.lease_tx(con, n, annotator, holder, float(lease)))
        )
        queries = got[0]
        if queries.size == 0:
            if self.finished():
                raise SessionError("every query of the budget is graded: run `bae report`")
            act = self.leases()
            who = ", ".join(
                f"{a} until {e[11:16]} UTC"
                for a, e in act.groupby("annotator")["expires"].max().items()
            )
            raise SessionError(
                "every ungraded query of the budget is leased to another annotator "
                f"({who}); ask again when they are graded or the leases expire"
            )
        return queries

    def finished(self) -> bool:
        """Whether every drawn query is graded."""
        done = set(self.graded())
        return all(int(q) in done for q in self._order())

    def next(
        self,
        n: int = 10,
        *,
        annotator: str | None = None,
        holder: str | None = None,
        lease: float = team.DEFAULT_LEASE,
        text: Any = None,
    ) -> pd.DataFrame:
        """The (query, document) rows for one annotator to grade next, leased to them
        (:meth:`lease`; the frame of :meth:`documents`, with the text columns ``text``, default
        the session's — checked before anything is leased)."""
        text = self._text(text)
        return self.documents(
            self.lease(n, annotator=annotator, holder=holder, lease=lease), text=text
        )

    def documents(self, queries: Any, *, ranks: bool = True, text: Any = None) -> pd.DataFrame:
        """One row per (query, document) of ``queries`` (pool indices), in the pool's document
        order: ``qid``, ``doc``, ``rank_<ranker>`` (``ranks``; ``None`` when the ranker does not
        list the document), the text columns (``text``; default the session's, ``bae init
        --text-col``) and an empty ``grade``."""
        text = self._text(text)
        rows = []
        for q in np.asarray(queries, dtype=np.int64).tolist():
            for j, doc in enumerate(self.pool.doc_ids[q]):
                row = {"qid": self.pool.query_ids[q], "doc": doc}
                if ranks:
                    for m in self.models:
                        r = int(self.pool.positions[m][q, j])
                        row[f"rank_{m}"] = r if r > 0 else None
                if text:
                    cells = self.frame.iloc[self._rows[q][j]]
                    row.update({c: cells[c] for c in text})
                row["grade"] = None
                rows.append(row)
        return pd.DataFrame(rows)

    @property
    def _rows(self) -> list[list[int]]:
        """Row numbers in the pool file of each query's documents (pool order)."""
        if self._row_index is None:
            fr, read = self.frame, self.meta["read"]
            at = {
                (str(q), str(d)): i
                for i, (q, d) in enumerate(
                    zip(fr[read.get("query", "qid")], fr[read.get("item", "doc")], strict=True)
                )
            }
            self._row_index = [
                [at[(str(q), str(d))] for d in docs]
                for q, docs in zip(self.pool.query_ids, self.pool.doc_ids, strict=True)
            ]
        return self._row_index

    def _text(self, text: Any = None) -> list[str]:
        """Text columns: ``text`` if given (checked against the pool file), else the session's."""
        if not text:
            return list(self.meta.get("text_cols") or [])
        text = [str(c) for c in ([text] if isinstance(text, str) else text)]
        missing = [c for c in text if c not in self.frame.columns]
        if missing:
            raise ValueError(
                f"column {missing[0]!r} (--text-col) is not in the pool file; its columns are: "
                + ", ".join(map(str, self.frame.columns))
            )
        return text

    def text_columns(self, text: Any = None) -> tuple[list[str], list[str]]:
        """The text columns (``text``, default the session's) split into those constant within
        every query (shown once with the query) and those of the documents."""
        text = self._text(text)
        q = self.meta["read"].get("query", "qid")
        if not text:
            return [], []
        same = self.frame.groupby(q, sort=False)[text].nunique(dropna=False).max()
        per_query = [c for c in text if int(same[c]) <= 1]
        return per_query, [c for c in text if c not in per_query]

    def release(self, holder: str) -> None:
        """End the holder's active leases now (their ungraded queries go to others)."""
        self.store.transaction(lambda con: team.release_tx(con, holder))

    # -- grades -----------------------------------------------------------------------------
    def _checked(self, qi: int, docs: Mapping[Any, Any]) -> dict[str, int]:
        """Check grades of one query's documents against the pool: ``{doc: grade}`` of the
        documents given, in the pool's order (ids as text)."""
        pool = self.pool
        qid = pool.query_ids[qi]
        names = {str(d): d for d in pool.doc_ids[qi]}
        fixed = {}
        for doc, g in docs.items():
            if str(doc) not in names:
                raise ValueError(f"document {doc!r} is not a document of query {qid!r}")
            fixed[names[str(doc)]] = g
        full = dict.fromkeys(pool.doc_ids[qi], 0) | fixed
        G = pool.grade_matrix({qid: full}, [qi])  # raises on a bad grade
        return {str(d): int(G[qi, j]) for j, d in enumerate(pool.doc_ids[qi]) if d in fixed}

    def record(
        self,
        frame: pd.DataFrame,
        *,
        annotator: str | None = None,
        holder: str | None = None,
        source: str = "api",
    ) -> RankingRecordResult:
        """Record grades from a frame with columns ``qid, doc, grade``.

        A query is recorded when every one of its documents has a grade; a query with some
        documents graded and others not is an error (grade all or none). Everything is checked
        before anything is written. Grades the annotator already gave the same way are skipped
        (the same file can be recorded again); different ones are an error (use
        :meth:`relabel`). A query another annotator graded gets these grades as a second
        annotation: it keeps counting with the first, and both enter :meth:`agreement`.

        Parameters
        ----------
        frame : pandas.DataFrame
            Columns ``qid``, ``doc``, ``grade`` (other columns are ignored; rows with an empty
            grade are dropped). A (query, document) pair may have one graded row only.
        annotator : str, optional
            Who graded (default: the login name).
        holder : str, optional
            When given, every query recorded must be leased to this holder (``bae serve``).
        source : str
            Stored with each annotation (``"csv:FILE"``, ``"interactive"``, ``"web"``).

        Returns
        -------
        RankingRecordResult

        Raises
        ------
        ValueError
            Unknown queries or documents, bad grades, a document graded on two rows, a partly
            graded query, a query that is in no draw of the session, a query not leased to
            ``holder``.
        SessionError
            A grade the annotator already gave differently.
        """
        annotator = team.check_annotator(annotator)
        self.store.require_writable("record")
        for col in ("qid", "doc", "grade"):
            if col not in frame.columns:
                raise ValueError(f"the grades file has no column {col!r} (needs qid, doc, grade)")
        pool = self.pool
        keys = {str(q): i for i, q in enumerate(pool.query_ids.tolist())}
        given: dict[int, dict[Any, Any]] = {}
        row_of: dict[tuple[str, str], int] = {}
        empty = frame["grade"].isna().to_numpy()
        rows = zip(frame["qid"], frame["doc"], frame["grade"], strict=True)
        for row, (qid, doc, g) in enumerate(rows, start=1):
            if empty[row - 1]:
                continue  # an empty grade: not recorded
            key = (str(qid), str(doc))
            if key in row_of:
                raise ValueError(
                    f"query {qid!r}, document {doc!r} is graded twice (rows {row_of[key]} and "
                    f"{row}, grades {show(frame['grade'].iloc[row_of[key] - 1])} and {show(g)}); "
                    "give one grade per document (nothing recorded)"
                )
            row_of[key] = row
            if key[0] not in keys:
                raise ValueError(f"query {qid!r} is not in the pool")
            given.setdefault(keys[key[0]], {})[doc] = g
        drawn = set(self._order().tolist())
        leased = None
        if holder is not None:  # the queries this holder has now, graded by others since or not
            leased = team.held_items(self.leases(active_only=False), str(holder))
        chunk, n_docs = [], 0
        mine = team.annotator_labels(self.store.con, annotator)
        skipped = 0
        for qi, docs in given.items():
            labels = self._checked(qi, docs)
            qid = pool.query_ids[qi]
            missing = [d for d in pool.doc_ids[qi] if str(d) not in labels]
            if missing:
                raise ValueError(
                    f"query {qid!r} has grades for {len(labels)} of its {pool.n_docs[qi]} documents "
                    f"(document {missing[0]!r} has none): grade every document of a query, "
                    "or leave all of its grades empty"
                )
            if qi not in drawn:
                raise ValueError(
                    f"query {qid!r} was not asked for: it is in no draw of this session "
                    "(bae next lists the queries to grade)"
                )
            if qi in mine:
                old = json.loads(mine[qi])
                if old != labels:
                    doc = next(d for d in labels if old.get(d) != labels[d])
                    raise SessionError(
                        f"query {qid!r}, document {doc!r}: {annotator} graded it {old.get(doc)} "
                        f"before, not {labels[doc]}; correct it with bae relabel"
                    )
                skipped += 1
                continue
            if leased is not None and qi not in leased:
                raise ValueError(f"query {qid!r} is not leased to you (or its lease expired)")
            chunk.append((qi, json.dumps(labels)))
            n_docs += len(labels)
        if chunk:
            ids = [str(q) for q in pool.query_ids]
            stage_of = dict.fromkeys(self._order().tolist(), 0)  # every draw is in stage 0
            t = now()
            self.store.transaction(
                lambda con: team.write_labels_tx(
                    con,
                    chunk,
                    ids=ids,
                    stage_of=stage_of,
                    source=source,
                    annotator=annotator,
                    time=t,
                )
            )
        done = set(self.graded())
        pending = sum(int(q) not in done for q in self._order())
        return RankingRecordResult(len(chunk), n_docs, skipped, pending)

    def relabel(
        self,
        qid: Any,
        grades: Mapping[Any, Any],
        *,
        reason: str,
        annotator: str | None = None,
        own: bool = False,
        source: str = "api",
    ) -> bool:
        """Correct grades of a graded query: a new annotation that supersedes the grades it
        counts with — or, ``own=True``, the annotator's own answer
        (:func:`bayes_activeeval.session.annotations.relabel_tx`). Never a deletion.

        ``own=False``: the grades the query counts with, those of ``grades`` changed.
        ``own=True`` (the labeling page's undo): the documents whose grade in ``grades`` differs
        from the annotator's own latest answer are changed — in that answer or, when it is the
        answer the query counts with, in the grades it counts with now, so a correction someone
        else made since (``bae relabel``) is kept. Changing a document someone else corrected
        since is refused (:class:`SessionError`): that is a correction of their grade, for
        ``own=False``.

        Parameters
        ----------
        qid : Any
            The query (its id as in the pool file, matched exactly as :meth:`record` matches;
            surrounding spaces are ignored only when no id matches exactly and one does without
            them).
        grades : mapping
            ``{doc: grade}``: some documents of the query (``own=True``: may be all of them,
            as the labeling page sends); document ids are matched as ``qid`` is.
        reason : str
            Why (kept with the correction, for audits).
        annotator : str, optional
            Who corrects (default: the login name).
        own : bool
            Correct the annotator's own answer (default ``False``: the grades counted).
        source : str
            Stored with the annotation (``"cli"``, ``"web"``, ``"api"``).

        Returns
        -------
        bool
            ``False`` when nothing changes (nothing written).

        Raises
        ------
        ValueError
            No reason, no documents, an unknown query or document, a bad grade.
        SessionError
            A query without grades (by the annotator, ``own=True``); ``own=True``: a change of
            a document someone else corrected after the annotator's latest answer.
        """
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("a correction needs a reason (--reason '…'): it is kept for audits")
        annotator = team.check_annotator(annotator)
        self.store.require_writable("relabel")
        if not grades:
            raise ValueError("name the documents to correct: DOC=GRADE")
        keys = {str(q): i for i, q in enumerate(self.pool.query_ids.tolist())}
        qi = keys[_as_given(str(qid), keys, f"query {qid!r} is not in the pool")]
        iid = str(self.pool.query_ids[qi])
        docs = {str(d): d for d in self.pool.doc_ids[qi]}
        fixed = self._checked(
            qi,
            {
                _as_given(str(d), docs, f"document {d!r} is not a document of query {iid!r}"): g
                for d, g in grades.items()
            },
        )
        done: list[bool] = []

        def tx(con) -> None:
            # read and write in one transaction: a correction committed by someone else in
            # between is never overwritten unseen
            value = _corrected(con, qi, iid, fixed, annotator, own)
            done.append(
                team.relabel_tx(
                    con,
                    qi,
                    iid,
                    json.dumps(value),
                    reason=reason,
                    annotator=annotator,
                    own=own,
                    source=source,
                    merged=True,
                )
            )

        self.store.transaction(tx)
        return done[0]

    # -- answers ----------------------------------------------------------------------------
    def result(self):
        """The estimate (one ranker) or paired test (two) from the graded prefix, or ``None``."""
        idx, w = self._draws()
        graded = self.graded()
        ok = np.array([int(q) in graded for q in idx], dtype=bool)
        k = int(np.argmin(ok)) if not ok.all() else idx.size
        if k == 0:
            return None
        d = Draws(idx[:k], w[:k], np.full(k, np.nan))
        pool = self.pool
        labels = {
            pool.query_ids[qi]: {doc: graded[qi][str(doc)] for doc in pool.doc_ids[qi]}
            for qi in np.unique(d.indices).tolist()
        }
        if len(self.models) == 1:
            return estimate(
                self.pool, self.measure, d, labels, model=self.models[0], estimator=self.estimator
            )
        return test(
            self.pool, self.measure, d, labels, models=self.models, estimator=self.estimator
        )

    def status(self) -> dict[str, Any]:
        with self.store.reading():  # one state of the file, while others write
            return self._status()

    def _status(self) -> dict[str, Any]:
        order = self._order()
        done = set(self.graded())
        graded_q = [int(q) for q in order if int(q) in done]
        a = self.annotations()
        return {
            "measure": self.measure,
            "models": list(self.models),
            "design": self.meta["design"],
            "estimator": self.estimator,
            "budget": self.meta["budget"],
            "queries_in_sample": int(order.size),
            "queries_graded": len(graded_q),
            "cost_graded": float(self.pool.costs[graded_q].sum()) if graded_q else 0.0,
            "annotators": team.annotator_counts(a),
            "corrections": int((a["kind"] == "correction").sum()) if len(a) else 0,
            "leased": len(self.leases()),
            "agreement": team.agreement_json(self.agreement()),
            "rule": "first grades of each query, or their latest correction (bae relabel)",
        }

    def summary(self, level: float = 0.95) -> dict[str, Any]:
        """:meth:`status` with the answer so far (``bae status``, ``bae serve``): ``estimate``,
        ``stderr``, ``low``, ``high`` (the ``level`` interval) of the ranker's measure or of the
        difference of two rankers, and for two also ``pvalue`` (paired Wald test) and
        ``estimates``; none of them before the first query of the draw sequence is graded."""
        with self.store.reading():  # one state of the file, while others write
            return self._summary(level)

    def _summary(self, level: float) -> dict[str, Any]:
        st = self.status()
        st["level"] = float(level)
        res = self.result()
        if res is not None:
            lo, hi = res.confidence_interval(level)
            if len(self.models) == 1:
                st.update(estimate=res.value, stderr=res.stderr, low=lo, high=hi)
            else:
                st.update(estimate=res.estimate, stderr=res.stderr, low=lo, high=hi,
                          pvalue=res.pvalue, estimates=res.estimates)  # fmt: skip
        return st
