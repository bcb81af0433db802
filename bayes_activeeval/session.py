"""Persisted, resumable labeling sessions.

A session is one SQLite file holding everything an evaluation needs to survive a crash and to be
audited later: the pool file's path, SHA-256 and read options; the design (measure, design kind,
oracle model, seed, budget, options); every draw (stage, item, ``q`` and importance weight
``p/q``); every label (item, label, time); and, for adaptive designs, snapshots of the evaluator
state. Everything is written in transactions (WAL journal, ``BEGIN IMMEDIATE``), so a process killed
at any point leaves either the state before or the state after each transaction.

The loop (Sawade (2012), Algorithm 2 run in stages; Marchant & Rubinstein (2021), Algorithm 1 for
the adaptive design)::

    session.next(n)          # stage k: draw from the proposal, persist the draws, list new items
    session.record(ids, ys)  # persist labels (idempotent: a label already present is skipped)
    session.estimate()       # the estimate from the draws of completed stages

Determinism: the draws of stage ``k`` depend only on ``(seed, k)`` and the labels of stages
``< k`` (static design: ``Proposal.draw(n, rng=stage_rng(seed, k), unique=True)``), and ``next``
returns the pending stage again until every item of it is labeled, so a crash between ``next`` and
``record`` never changes what is asked. Only completed stages enter the estimate, so the estimate
after a crash and a resume equals that of an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ._validation import check_count, check_level
from .estimators import Estimate, UndefinedEstimateWarning, estimate
from .io import PoolFile, PoolSpec, file_checksum, label_codec, read_pool
from .measures import difference, stack
from .measures import get as get_measure
from .proposals import Draws, Proposal, optimal_proposal

__all__ = ["Design", "RecordResult", "Session", "SessionError", "stage_rng"]

SCHEMA_VERSION = 1
#: Environment variable (tests only): seconds to sleep after each committed label transaction, so
#: a test can kill ``bae record`` in the middle.
DELAY_ENV = "BAE_TEST_RECORD_DELAY"

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE stages (
    stage INTEGER PRIMARY KEY,
    n_requested INTEGER NOT NULL,
    rng TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE draws (
    seq INTEGER PRIMARY KEY,
    stage INTEGER NOT NULL REFERENCES stages(stage),
    item INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    q REAL NOT NULL,
    weight REAL NOT NULL
);
CREATE INDEX draws_stage ON draws(stage);
CREATE INDEX draws_item ON draws(item);
CREATE TABLE labels (
    seq INTEGER PRIMARY KEY,
    item INTEGER NOT NULL UNIQUE,
    item_id TEXT NOT NULL UNIQUE,
    label TEXT NOT NULL,
    stage INTEGER,
    time TEXT NOT NULL,
    source TEXT NOT NULL
);
CREATE TABLE snapshots (stage INTEGER PRIMARY KEY, state BLOB NOT NULL);
"""


class SessionError(ValueError):
    """A session cannot be opened or used as asked (a :class:`ValueError`: the CLI exits 2)."""


class _Raced(Exception):
    """Another process wrote the stage this one was about to write."""


def stage_rng(seed: int, stage: int) -> np.random.Generator:
    """The random generator of stage ``stage``: ``default_rng(SeedSequence([seed, stage]))``.

    Independent streams per stage (SPEC 7), so a stage's draws do not depend on how many random
    numbers earlier stages consumed.
    """
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(stage)]))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Design:
    """How a session chooses the items to label.

    Parameters
    ----------
    measure : str
        A measure name (``"f1"``, ``"accuracy"``, ``"f0.5"``, …).
    kind : {"static", "adaptive"}
        ``"static"``: the optimal proposal under the plug-in belief, fixed for the whole session
        (Sawade (2012), Algorithm 2). ``"adaptive"``: the proposal is refreshed after every stage
        from an oracle model fitted to the labels so far (Marchant & Rubinstein (2021),
        Algorithm 1; needs :class:`bayes_activeeval.ActiveEvaluator`).
    oracle : str
        The oracle model (``"model"`` = the evaluated model's own probabilities; adaptive designs
        accept every name :func:`~bayes_activeeval.oracles.make_oracle` knows).
    seed : int
        Seed of every stage's random generator (:func:`stage_rng`).
    budget : float, optional
        Labels allowed (or total label cost when the pool has costs). ``None``: unlimited.
    models : tuple of str
        The models evaluated (all of the pool's by default). With several, the static proposal is
        :func:`~bayes_activeeval.comparison_proposal`: the power-optimal one for the difference of
        two models (Sawade (2012), Thm. 5.1), the mixture of the pairwise ones for more (Eq. 5.16).
        The adaptive design targets the difference (two models) or the stacked measure (more).
    mix, belief_floor : float
        Defensive mixing weight δ and belief floor of the optimal proposal.
    options : dict
        Extra keyword arguments for the adaptive evaluator, and ``variance`` (``"martingale"``,
        the default, or ``"clt"``) for its standard error
        (:meth:`bayes_activeeval.ActiveEvaluator.estimate`). The martingale form is the default
        because the CLT plug-in under-covered badly in our runs (95% Wald coverage 0.53 against
        0.88 for the martingale form, 40 runs of ``examples/static_vs_adaptive_f1.py``).
    """

    measure: str
    kind: str = "static"
    oracle: str = "model"
    seed: int = 0
    budget: float | None = None
    models: tuple[str, ...] = ()
    mix: float = 0.05
    belief_floor: float = 1e-6
    options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ("static", "adaptive"):
            raise ValueError(f"design must be 'static' or 'adaptive', got {self.kind!r}")
        get_measure(self.measure)  # raises for an unknown measure
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise TypeError(f"seed must be an integer, got {self.seed!r}")
        if self.budget is not None and not (float(self.budget) > 0):
            raise ValueError(f"budget must be positive, got {self.budget!r}")
        object.__setattr__(self, "models", tuple(self.models))
        if self.kind == "static" and self.oracle != "model":
            raise ValueError(
                f"the static design uses the models' own probabilities (oracle 'model'); "
                f"oracle {self.oracle!r} needs design='adaptive'"
            )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["models"] = list(self.models)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Design:
        return cls(**d)


@dataclass(frozen=True)
class RecordResult:
    """What :meth:`Session.record` did: labels written, labels already present (skipped), and
    how many items of the pending stage still wait for a label."""

    recorded: int
    skipped: int
    pending: int


# -- designs: the seam between the session and the sampling strategy -----------------------------
class _StaticDesign:
    """The optimal proposal under the plug-in belief, fixed for the session (Sawade (2012),
    Algorithm 2; Thm. 4.1/5.1). Stage ``k`` draws ``Proposal.draw(n, stage_rng(seed, k),
    unique=True)``."""

    def __init__(self, pool, design: Design) -> None:
        self.pool, self.design = pool, design
        self._proposal: Proposal | None = None

    @property
    def proposal(self) -> Proposal:
        if self._proposal is None:
            d = self.design
            if len(d.models) > 1:  # Sawade (2012), Thm. 5.1 / Eq. 5.16
                from .comparison import comparison_proposal

                self._proposal = comparison_proposal(
                    self.pool, d.measure, d.models, mix=d.mix, belief_floor=d.belief_floor
                )
            else:
                self._proposal = optimal_proposal(
                    self.pool,
                    d.measure,
                    model=_single_model(d),
                    mix=d.mix,
                    belief_floor=d.belief_floor,
                )
        return self._proposal

    def propose(self, session, stage: int, n: int, left: float | None):
        """``(draws, info, snapshot)`` of a new stage."""
        draws = self.proposal.draw(n, rng=stage_rng(self.design.seed, stage), unique=True)
        costs = self.pool.costs
        if left is not None and costs is not None:  # cut at the budget (a prefix stays i.i.d.)
            new = _first_new(draws.indices, set(session._label_map()))
            cum = np.cumsum(np.where(new, costs[draws.indices], 0.0))
            keep = int(np.searchsorted(cum, left, side="right"))
            if keep == 0:
                raise SessionError(
                    f"the budget left ({left:g}) is below the cost of the next item drawn"
                )
            draws = draws[:keep]
        return draws, {"seed_sequence": [int(self.design.seed), int(stage)], "n": n}, None

    def current_q(self, session, n_done: int) -> np.ndarray:
        return self.proposal.q

    def estimates(self, session, n_done: int, draws: Draws, labels) -> dict[str, Estimate]:
        return per_model_estimates(self.pool, self.design, draws, labels)


class _AdaptiveDesign:
    """Adaptive importance sampling with an oracle model (Marchant & Rubinstein (2021),
    Algorithm 1) through :class:`bayes_activeeval.ActiveEvaluator`.

    The evaluator owns its random generator. ``next`` restores the evaluator as it was after the
    last completed stage (a snapshot stored in the session, or a replay of the stages from the
    seed), calls ``query(n)`` and stores the stage's draws together with the snapshot taken just
    before the query, in one transaction. Completing a stage later replays that query from the
    snapshot (same generator state, hence the same draws, checked against the stored ones) and
    calls ``update`` with the stage's labels. So the evaluator is a deterministic function of
    ``(seed, labels so far)``, whatever crashed when.
    """

    def __init__(self, pool, design: Design, validate: bool = False) -> None:
        try:
            from .adaptive import ActiveEvaluator  # noqa: F401
        except ImportError as exc:  # pragma: no cover - the adaptive module ships with bae
            raise SessionError(
                "design 'adaptive' needs bayes_activeeval.ActiveEvaluator; use --design static"
            ) from exc
        self.pool, self.design = pool, design
        self._cache: tuple[int, Any] | None = None
        if validate:
            self._fresh()  # bad options fail now, before a session is written

    def _fresh(self):
        from .adaptive import ActiveEvaluator

        opts = {k: v for k, v in self.design.options.items() if k != "variance"}
        return ActiveEvaluator(
            self.pool,
            _target_measure(self.design),
            oracle=self.design.oracle,
            model=_single_model(self.design),
            rng=self.design.seed,
            mix=self.design.mix,
            belief_floor=self.design.belief_floor,
            **opts,
        )

    def _load(self, blob: bytes):
        from .adaptive import ActiveEvaluator

        with _tempfile(".npz") as tmp:
            Path(tmp).write_bytes(blob)
            return ActiveEvaluator.load(tmp, self.pool)

    @staticmethod
    def _dump(ev) -> bytes:
        with _tempfile(".npz") as tmp:
            ev.save(tmp)
            return Path(tmp).read_bytes()

    def evaluator(self, session, n_done: int):
        """The evaluator after the first ``n_done`` stages (a private copy: callers may use it)."""
        if self._cache is not None and self._cache[0] == n_done:
            return self._cache[1]
        snap = session._snapshot(max_stage=n_done)
        if snap is None:
            ev, start = self._fresh(), 0
        else:
            start, blob = snap
            ev = self._load(blob)
        stages = session._stage_rows()
        for s in range(start, n_done):
            n_req, items, info = stages[s]
            ev.query(n_req, max_cost=info.get("max_cost"))  # as drawn: cut at the cost budget
            got = ev.pending_draws.indices
            if not np.array_equal(got, items):
                raise SessionError(
                    f"replaying stage {s} drew other items than the session recorded; the "
                    "library version or the pool changed since the session was created"
                )
            new = [int(i) for i in dict.fromkeys(items.tolist()) if not ev.known[i]]
            known = session._label_map()
            ev.update(np.asarray(new, dtype=np.int64), [session._codec(known[i]) for i in new])
        self._cache = (n_done, ev)
        return ev

    def propose(self, session, stage: int, n: int, left: float | None):
        ev = self.evaluator(session, stage)
        self._cache = None  # query() advances it
        snapshot = self._dump(ev)
        avail = ev.available()
        if avail == 0:
            raise SessionError("no unlabeled item has positive probability; nothing to label")
        n = min(n, avail)
        max_cost = left if (left is not None and self.pool.costs is not None) else None
        ev.query(n, max_cost=max_cost)  # the evaluator's own cost-budget cut
        draws = ev.pending_draws
        return draws, {"evaluator": "ActiveEvaluator", "n": n, "max_cost": max_cost}, snapshot

    def current_q(self, session, n_done: int) -> np.ndarray:
        return np.asarray(self.evaluator(session, n_done).proposal.q)

    def estimates(self, session, n_done: int, draws: Draws, labels) -> dict[str, Estimate]:
        ev = self.evaluator(session, n_done)
        variance = self.design.options.get("variance", "martingale")
        if len(self.design.models) == 1:
            return {self.design.models[0]: ev.estimate(variance=variance)}
        out = per_model_estimates(self.pool, self.design, draws, labels)
        out[ev.measure.name] = ev.estimate(variance=variance)
        return out


@contextlib.contextmanager
def _tempfile(suffix: str):
    import tempfile

    fd, name = tempfile.mkstemp(suffix=suffix)
    os.close(fd)
    try:
        yield name
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(name)


def _json_default(o: Any) -> Any:
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(type(o).__name__)


def _single_model(design: Design) -> str | None:
    return design.models[0] if len(design.models) == 1 else None


def _target_measure(design: Design):
    """What the proposal optimizes: the measure (one model), the difference of two models
    (Sawade (2012), Thm. 5.1), or the stacked measure of k > 2 models (summed variances)."""
    models = design.models
    if len(models) == 2:
        return difference(design.measure, models[0], models[1])
    if len(models) > 2:
        return stack(design.measure, models)
    return design.measure


def per_model_estimates(pool, design: Design, draws: Draws, labels) -> dict[str, Estimate]:
    out: dict[str, Estimate] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedEstimateWarning)
        for m in design.models:
            out[m] = estimate(pool, design.measure, draws, labels, model=m)
    return out


def _make_design(pool, design: Design, validate: bool = False):
    if design.kind == "static":
        return _StaticDesign(pool, design)
    return _AdaptiveDesign(pool, design, validate=validate)


# -- the session ----------------------------------------------------------------------------------
class Session:
    """A persisted labeling session (one SQLite file). Use :meth:`create` or :meth:`open`.

    Attributes
    ----------
    path : str
        The session file.
    pool_file : PoolFile
        The pool, read with the stored options from the stored path (checksum verified).
    design : Design
    """

    def __init__(self, path: str, con: sqlite3.Connection, pool_file: PoolFile, design: Design):
        self.path = path
        self._con = con
        self.pool_file = pool_file
        self.design = design
        self._design = _make_design(pool_file.pool, design)
        self._codec = label_codec(pool_file.pool)

    # -- lifecycle --------------------------------------------------------------------------------
    @staticmethod
    def _connect(path: str, *, create: bool) -> sqlite3.Connection:
        mode = "rwc" if create else "rw"
        uri = f"file:{Path(path).resolve().as_posix()}?mode={mode}"
        try:
            con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30.0)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")
            con.execute("PRAGMA foreign_keys=ON")
        except sqlite3.DatabaseError as exc:
            raise SessionError(f"{path} is not a bae session (SQLite: {exc})") from exc
        return con

    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        pool_path: str | os.PathLike,
        spec: PoolSpec,
        design: Design,
        *,
        overwrite: bool = False,
    ) -> Session:
        """Create a session file for a pool file and a design.

        The pool is read and checked, and a static design's proposal is computed, before the file
        is written, so a bad pool or design leaves nothing behind.

        Raises
        ------
        ValueError
            Bad pool file or options (see :func:`~bayes_activeeval.io.read_pool`), an unknown
            measure or model, an existing session file (without ``overwrite``).
        """
        path = str(Path(path).expanduser())
        if os.path.exists(path) and not overwrite:
            raise SessionError(
                f"session file {path} already exists; remove it or pick another name"
            )
        pf = read_pool(pool_path, spec)
        pool = pf.pool
        models = design.models or pool.models
        for m in models:
            pool.check_model(m)
        design = Design(**{**design.to_dict(), "models": tuple(models)})
        pool.resolve(design.measure, models[0])  # measure fits the pool?
        strategy = _make_design(pool, design, validate=True)
        if isinstance(strategy, _StaticDesign):
            strategy.proposal  # noqa: B018 - compute now: errors before anything is written
        meta = {
            "schema_version": SCHEMA_VERSION,
            "pool_path": pf.path,
            "pool_sha256": pf.checksum,
            "pool_spec": spec.to_dict(),
            "design": design.to_dict(),
            "created": _now(),
            "bae_version": _version(),
            "n_items": pool.n_items,
        }
        # write a complete file beside the target, then rename it into place: a crash leaves
        # either no session or a whole one
        tmp = f"{path}.tmp-{os.getpid()}"
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp + suffix)
        con = cls._connect(tmp, create=True)
        try:
            con.execute("BEGIN IMMEDIATE")
            for stmt in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                con.execute(stmt)
            con.executemany(
                "INSERT INTO meta(key, value) VALUES (?, ?)",
                [(k, json.dumps(v)) for k, v in meta.items()],
            )
            con.execute("COMMIT")
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            con.close()
            if overwrite:
                for suffix in ("-wal", "-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(path + suffix)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                con.close()
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(tmp + suffix)
            raise
        session = cls(path, cls._connect(path, create=False), pf, design)
        session._design = strategy
        session.meta = meta
        return session

    @classmethod
    def open(
        cls, path: str | os.PathLike, *, pool_path: str | os.PathLike | None = None
    ) -> Session:
        """Open an existing session, re-reading its pool file and verifying its SHA-256.

        Parameters
        ----------
        path : str or path-like
        pool_path : str or path-like, optional
            Where the pool file is now, if it moved (its checksum must still match).

        Raises
        ------
        ValueError
            Missing or foreign file, a pool file that is missing or changed since ``bae init``.
        """
        path = str(Path(path).expanduser())
        if not os.path.exists(path):
            raise SessionError(f"session file {path} does not exist (create one with bae init)")
        con = cls._connect(path, create=False)
        try:
            rows = dict(con.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as exc:
            con.close()
            raise SessionError(f"{path} is not a bae session ({exc})") from exc
        meta = {k: json.loads(v) for k, v in rows.items()}
        if meta.get("schema_version") != SCHEMA_VERSION:
            con.close()
            raise SessionError(
                f"{path} has session format {meta.get('schema_version')!r}; this bae reads "
                f"format {SCHEMA_VERSION}"
            )
        pool_file_path = str(pool_path) if pool_path is not None else meta["pool_path"]
        if not os.path.exists(pool_file_path):
            con.close()
            raise SessionError(
                f"the session's pool file {pool_file_path} is missing; if it moved, pass its new "
                "location with --pool"
            )
        digest = file_checksum(pool_file_path)
        if digest != meta["pool_sha256"]:
            con.close()
            raise SessionError(
                f"pool file {pool_file_path} changed since the session was created (sha256 "
                f"{digest[:12]}… != {meta['pool_sha256'][:12]}…); refusing to continue: restore "
                "the original file or start a new session"
            )
        try:
            pf = read_pool(pool_file_path, PoolSpec.from_dict(meta["pool_spec"]))
            if pf.checksum != meta["pool_sha256"]:  # changed while being read
                raise SessionError(f"pool file {pool_file_path} changed while it was being read")
        except ValueError:
            con.close()
            raise
        session = cls(path, con, pf, Design.from_dict(meta["design"]))
        session.meta = meta
        return session

    def close(self) -> None:
        """Checkpoint the WAL into the main file and close."""
        if self._con is not None:
            with contextlib.suppress(sqlite3.Error):
                self._con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._con.close()
            self._con = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Session({self.path!r}, measure={self.design.measure!r}, design={self.design.kind!r}, "
            f"labels={self.n_labels}, stages={self.n_stages})"
        )

    @property
    def pool(self):
        return self.pool_file.pool

    # -- reading ----------------------------------------------------------------------------------
    def _q(self, sql: str, args: Sequence = ()) -> list:
        return self._con.execute(sql, args).fetchall()

    @property
    def n_labels(self) -> int:
        """Labels recorded (distinct items)."""
        return int(self._q("SELECT COUNT(*) FROM labels")[0][0])

    @property
    def n_stages(self) -> int:
        return int(self._q("SELECT COUNT(*) FROM stages")[0][0])

    def labels(self) -> pd.DataFrame:
        """Every recorded label: ``item`` (pool index), ``id``, ``label`` (as text), ``stage``,
        ``time``, ``source``; in recording order."""
        return pd.DataFrame(
            self._q("SELECT item, item_id, label, stage, time, source FROM labels ORDER BY seq"),
            columns=["item", "id", "label", "stage", "time", "source"],
        )

    def draws(self) -> pd.DataFrame:
        """Every draw: ``seq``, ``stage``, ``item``, ``id``, ``q``, ``weight`` (``p/q``)."""
        return pd.DataFrame(
            self._q("SELECT seq, stage, item, item_id, q, weight FROM draws ORDER BY seq"),
            columns=["seq", "stage", "item", "id", "q", "weight"],
        )

    def _label_map(self) -> dict[int, str]:
        return dict(self._q("SELECT item, label FROM labels"))

    def _stage_table(self) -> list[tuple[int, np.ndarray]]:
        d = self.draws()
        return [(int(s), g["item"].to_numpy(np.int64)) for s, g in d.groupby("stage", sort=True)]

    def _complete(self) -> tuple[list[int], int | None]:
        """Completed stages, and the pending (incomplete) one if any."""
        known = set(self._label_map())
        done, pending = [], None
        for s, items in self._stage_table():
            if _first_new(items, known).any():
                pending = s
            else:
                done.append(s)
        return done, pending

    def pending_items(self) -> np.ndarray:
        """Pool indices of the items of the pending stage that still need a label (first-draw
        order); empty when no stage is pending."""
        _, pending = self._complete()
        if pending is None:
            return np.zeros(0, dtype=np.int64)
        items = np.asarray(
            [
                r[0]
                for r in self._q("SELECT item FROM draws WHERE stage=? ORDER BY seq", (pending,))
            ],
            dtype=np.int64,
        )
        return items[_first_new(items, set(self._label_map()))]

    def _stage_rows(self) -> list[tuple[int, np.ndarray, dict]]:
        """Per stage (in order): the ``n`` its query asked for, its drawn items and how it was
        drawn (the ``rng`` column)."""
        req = {
            st: (n, info) for st, n, info in self._q("SELECT stage, n_requested, rng FROM stages")
        }
        return [
            (int(req[st][0]), items, json.loads(req[st][1])) for st, items in self._stage_table()
        ]

    def _snapshot(self, max_stage: int) -> tuple[int, bytes] | None:
        """The latest evaluator snapshot taken after at most ``max_stage`` completed stages."""
        rows = self._q(
            "SELECT stage, state FROM snapshots WHERE stage <= ? ORDER BY stage DESC LIMIT 1",
            (max_stage,),
        )
        return (int(rows[0][0]), bytes(rows[0][1])) if rows else None

    def labeled_draws(self) -> tuple[Draws, np.ndarray]:
        """The draws of completed stages and their labels (class values), aligned."""
        done, _ = self._complete()
        d = self.draws()
        d = d[d["stage"].isin(done)]
        known = self._label_map()
        labels = np.asarray([self._codec(known[int(i)]) for i in d["item"]])
        return (
            Draws(
                d["item"].to_numpy(np.int64),
                d["weight"].to_numpy(float),
                d["q"].to_numpy(float),
            ),
            labels,
        )

    def budget_used(self) -> float:
        """Labels recorded, or their total cost when the pool has label costs."""
        costs = self.pool.costs
        if costs is None:
            return float(self.n_labels)
        items = [r[0] for r in self._q("SELECT item FROM labels")]
        return float(costs[np.asarray(items, dtype=np.int64)].sum()) if items else 0.0

    def _pending_cost(self) -> float:
        pend = self.pending_items()
        costs = self.pool.costs
        return float(pend.size if costs is None else costs[pend].sum())

    def budget_left(self) -> float | None:
        """Budget not yet spent or committed to pending items (``None``: unlimited)."""
        if self.design.budget is None:
            return None
        return max(float(self.design.budget) - self.budget_used() - self._pending_cost(), 0.0)

    # -- asking -----------------------------------------------------------------------------------
    def next(self, n: int = 20) -> np.ndarray:
        """Items to label next (pool indices, first-draw order).

        If a stage is pending (some of its items unlabeled), its unlabeled items are returned
        again and ``n`` is ignored. Otherwise a new stage is drawn — ``n`` draws with distinct
        items (Sawade (2012), Algorithm 2; repeats of already-labeled items are kept as draws but
        cost nothing), cut to the budget — and persisted in one transaction before it is returned.

        Raises
        ------
        ValueError
            If the budget is used up, or no unlabeled item is left to draw.
        """
        n = check_count(n, "n")
        pend = self.pending_items()
        if pend.size:
            return pend
        known = set(self._label_map())
        left = self.budget_left()
        if left is not None and left < (1.0 if self.pool.costs is None else self.pool.costs.min()):
            raise SessionError(
                f"the budget of {self.design.budget:g} is used up "
                f"({self.budget_used():g} spent); nothing more to label"
            )
        if len(known) >= self.pool.n_items:
            raise SessionError("every item of the pool is labeled; nothing more to label")
        if left is not None and self.pool.costs is None:
            n = max(1, min(n, int(left)))
        stage = self.n_stages
        rows, stages, snaps = [], [], []
        for _attempt in range(50):
            draws, info, snap = self._design.propose(self, stage, n, left)
            stages.append((stage, int(info["n"]), json.dumps(info, default=_json_default), _now()))
            ids = self.pool_file.ids
            rows.extend(
                (stage, int(it), str(ids[it]), float(q), float(w))
                for it, q, w in zip(draws.indices, draws.q, draws.weights, strict=True)
            )
            if snap is not None:
                snaps.append((stage, snap))
            if _first_new(draws.indices, known).any():
                break
            # every item drawn is labeled already: that stage is complete; draw the next one
            stage += 1
        else:
            raise SessionError("50 stages in a row drew only labeled items; the pool is exhausted")

        first = stages[0][0]

        def tx(con):
            if con.execute("SELECT COUNT(*) FROM stages").fetchone()[0] != first:
                raise _Raced  # another process drew this stage meanwhile: show that one
            con.executemany(
                "INSERT INTO stages(stage, n_requested, rng, created) VALUES (?, ?, ?, ?)", stages
            )
            con.executemany(
                "INSERT INTO draws(stage, item, item_id, q, weight) VALUES (?, ?, ?, ?, ?)", rows
            )
            if snaps:
                con.executemany(
                    "INSERT OR REPLACE INTO snapshots(stage, state) VALUES (?, ?)", snaps
                )
                con.execute("DELETE FROM snapshots WHERE stage < ?", (snaps[-1][0],))

        try:
            self._write(tx)
        except _Raced:
            self._design = _make_design(self.pool, self.design)  # drop a stale evaluator cache
        return self.pending_items()

    def _write(self, fn: Callable[[sqlite3.Connection], Any]) -> None:
        con = self._con
        con.execute("BEGIN IMMEDIATE")
        try:
            fn(con)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    # -- labels -----------------------------------------------------------------------------------
    def check_labels(self, ids: Sequence[Any], labels: Sequence[Any]) -> tuple[np.ndarray, list]:
        """Validate labels without writing: returns ``(items, labels)`` of the *new* ones.

        Raises
        ------
        ValueError
            Unknown item ids, duplicate ids, labels outside the classes, items that were never
            drawn (``bae next`` lists the items to label), or an item that already has a
            different label.
        """
        ids = [str(i).strip() for i in ids]
        if len(ids) != len(labels):
            raise ValueError(f"{len(ids)} ids but {len(labels)} labels")
        seen: dict[str, int] = {}
        for row, i in enumerate(ids):
            if i in seen:
                raise ValueError(f"item id {i!r} appears twice (rows {seen[i] + 1} and {row + 1})")
            seen[i] = row
        idx = self.pool_file.index_of(ids)
        values = [
            self._codec(y, f" for item {i!r} (row {r + 1})")
            for r, (i, y) in enumerate(zip(ids, labels, strict=True))
        ]
        known = self._label_map()
        drawn = {r[0] for r in self._q("SELECT DISTINCT item FROM draws")}
        new_idx, new_vals = [], []
        for r, (it, i, v) in enumerate(zip(idx.tolist(), ids, values, strict=True)):
            if it in known:
                if known[it] != str(v):
                    raise ValueError(
                        f"item {i!r} (row {r + 1}) already has label {known[it]!r}; got {str(v)!r} "
                        "(a recorded label is never changed)"
                    )
                continue
            if it not in drawn:
                raise ValueError(
                    f"item {i!r} (row {r + 1}) was not asked for: it is in no draw of this "
                    "session (bae next lists the items to label)"
                )
            new_idx.append(it)
            new_vals.append(v)
        return np.asarray(new_idx, dtype=np.int64), new_vals

    def record(
        self,
        ids: Sequence[Any],
        labels: Sequence[Any],
        *,
        batch_size: int = 50,
        source: str = "api",
        progress: Callable[[int], None] | None = None,
    ) -> RecordResult:
        """Validate, then persist labels in transactions of ``batch_size`` labels.

        All labels are checked before anything is written (bad input leaves the session
        untouched). Labels already present with the same value are skipped, so re-running the
        same ``record`` after a crash counts nothing twice.

        Parameters
        ----------
        ids : sequence
            Item ids (as in the pool file's id column).
        labels : sequence
            Their labels (class values or their text form).
        batch_size : int
            Labels per transaction (1 = each label committed on its own).
        source : str
            Stored with each label (``"csv:FILE"``, ``"interactive"``, …).
        progress : callable, optional
            Called with the number of labels written after each transaction.
        """
        batch_size = check_count(batch_size, "batch_size")
        new_idx, new_vals = self.check_labels(ids, labels)
        skipped = len(ids) - new_idx.size
        stage_of = self._draw_stage_of()
        delay = float(os.environ.get(DELAY_ENV, "0") or 0)
        written = 0
        for start in range(0, new_idx.size, batch_size):
            chunk = list(
                zip(
                    new_idx[start : start + batch_size].tolist(),
                    new_vals[start : start + batch_size],
                    strict=True,
                )
            )
            wrote = self._write_labels(chunk, stage_of, source)
            written += wrote
            skipped += len(chunk) - wrote
            if progress is not None:
                progress(len(chunk))
            if delay:
                time.sleep(delay)
        return RecordResult(written, skipped, int(self.pending_items().size))

    def _draw_stage_of(self) -> dict[int, int]:
        return dict(self._q("SELECT item, MIN(stage) FROM draws GROUP BY item"))

    def _write_labels(self, chunk, stage_of, source: str) -> int:
        ids = self.pool_file.ids
        now = _now()
        count = 0

        def tx(con):
            nonlocal count
            for it, v in chunk:
                row = con.execute("SELECT label FROM labels WHERE item=?", (it,)).fetchone()
                if row is not None:
                    if row[0] != str(v):
                        raise SessionError(
                            f"item {ids[it]!r} was labeled {row[0]!r} meanwhile; got {str(v)!r}"
                        )
                    continue
                con.execute(
                    "INSERT INTO labels(item, item_id, label, stage, time, source) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (it, str(ids[it]), str(v), stage_of.get(it), now, source),
                )
                count += 1

        self._write(tx)
        return count

    # -- answers ----------------------------------------------------------------------------------
    def estimates(self) -> dict[str, Estimate]:
        """Per-model estimates from the completed stages; an adaptive design with several models
        adds the evaluator's own estimate of its target under the target's name (the difference
        ``"f1[a]-f1[b]"`` of two models, the stacked measure of more). Empty before any stage
        completes."""
        draws, labels = self.labeled_draws()
        if len(draws) == 0:
            return {}
        done, _ = self._complete()
        return self._design.estimates(self, len(done), draws, labels)

    def estimate(self, model: str | None = None) -> Estimate:
        """The estimate for one model (the only one by default)."""
        est = self.estimates()
        if not est:
            raise SessionError("no completed stage yet: label the items of bae next first")
        if model is None:
            if len(self.design.models) != 1:
                raise ValueError(f"the session has models {list(self.design.models)}; name one")
            model = self.design.models[0]
        if model not in est:
            raise ValueError(f"model {model!r} is not in the session; models are {list(est)}")
        return est[model]

    def difference(self, a: str, b: str) -> Estimate:
        """Estimate of ``G[a] − G[b]`` from the completed stages (Sawade (2012), Eq. 3.21)."""
        draws, labels = self.labeled_draws()
        if len(draws) == 0:
            raise SessionError("no completed stage yet")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedEstimateWarning)
            return estimate(self.pool, difference(self.design.measure, a, b), draws, labels)

    def proposal_q(self) -> np.ndarray:
        """The proposal the next stage would draw from."""
        done, _ = self._complete()
        return self._design.current_q(self, len(done))

    def posterior(self, method: str = "conjugate", draws: int = 1000, **kwargs: Any):
        """The posterior of the measure on the pool (an :class:`xarray.DataTree`), from the
        contingency-table model fitted to the labeled draws of the completed stages with their
        design weights (:func:`~bayes_activeeval.posterior.contingency_posterior`);
        ``None`` before any stage completes or for regression pools.

        Several models: the stacked measure, one output per model.
        """
        d, labels = self.labeled_draws()
        if len(d) == 0 or self.pool.task == "regression":
            return None
        from .posterior import contingency_posterior

        models = self.design.models
        measure = self.design.measure if len(models) == 1 else stack(self.design.measure, models)
        return contingency_posterior(
            self.pool,
            measure,
            d.indices,
            labels,
            d.weights,
            model=models[0] if len(models) == 1 else None,
            method=method,
            draws=draws,
            rng=self.design.seed,
            **kwargs,
        )

    def status(self, level: float = 0.95) -> dict[str, Any]:
        """A summary: labels, stages, budget, pending items and the estimates with intervals."""
        level = check_level(level)
        done, _ = self._complete()
        rows = []
        for name, est in self.estimates().items():
            low, high = est.confidence_interval(level)
            rows.append(
                {
                    "model": name,
                    "estimate": est.value,
                    "stderr": est.stderr,
                    "low": low,
                    "high": high,
                    "draws": est.n_draws,
                }
            )
        return {
            "measure": self.design.measure,
            "design": self.design.kind,
            "oracle": self.design.oracle,
            "n_items": self.pool.n_items,
            "labels": self.n_labels,
            "stages_completed": len(done),
            "pending": int(self.pending_items().size),
            "budget": self.design.budget,
            "budget_used": self.budget_used(),
            "budget_left": self.budget_left(),
            "level": level,
            "estimates": rows,
        }


def _first_new(idx: np.ndarray, known: set) -> np.ndarray:
    """Mask of draws that are the first draw of an item not labeled yet."""
    _, first = np.unique(idx, return_index=True)
    mask = np.zeros(idx.size, dtype=bool)
    mask[first] = True
    if known:
        mask &= ~np.isin(idx, np.fromiter(known, dtype=np.int64, count=len(known)))
    return mask


def _version() -> str:
    from . import __version__

    return __version__
