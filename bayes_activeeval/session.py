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

__all__ = ["Design", "RecordResult", "Session", "SessionError", "default_annotator", "stage_rng"]

SCHEMA_VERSION = 2
#: Environment variable (tests only): seconds to sleep after each committed label transaction, so
#: a test can kill ``bae record`` in the middle.
DELAY_ENV = "BAE_TEST_RECORD_DELAY"
#: How long items handed out by :meth:`Session.next` stay leased to their annotator (seconds).
DEFAULT_LEASE = 3600.0

_SCHEMA_CORE = """
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
CREATE TABLE snapshots (stage INTEGER PRIMARY KEY, state BLOB NOT NULL);
"""

# Format 2: every annotation is a row (who, when, which batch); corrections are rows that point at
# the annotation they supersede; ``labels`` is a view of the label each item counts with.
_SCHEMA_TEAM = """
CREATE TABLE annotations (
    seq INTEGER PRIMARY KEY,
    item INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    label TEXT NOT NULL,
    annotator TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('label', 'correction')),
    root INTEGER REFERENCES annotations(seq),
    supersedes INTEGER REFERENCES annotations(seq),
    reason TEXT,
    stage INTEGER,
    batch TEXT,
    time TEXT NOT NULL,
    source TEXT NOT NULL,
    CHECK ((kind = 'label') = (root IS NULL))
);
CREATE UNIQUE INDEX annotations_first ON annotations(item, annotator) WHERE kind = 'label';
CREATE INDEX annotations_item ON annotations(item);
CREATE INDEX annotations_root ON annotations(root);
CREATE TRIGGER annotations_never_change BEFORE UPDATE ON annotations
    BEGIN SELECT RAISE(ABORT, 'annotations are never changed; add a correction'); END;
CREATE TRIGGER annotations_never_deleted BEFORE DELETE ON annotations
    BEGIN SELECT RAISE(ABORT, 'annotations are never deleted; add a correction'); END;
CREATE TABLE leases (
    seq INTEGER PRIMARY KEY,
    item INTEGER NOT NULL,
    annotator TEXT NOT NULL,
    holder TEXT NOT NULL,
    batch TEXT NOT NULL,
    granted TEXT NOT NULL,
    expires TEXT NOT NULL
);
CREATE INDEX leases_item ON leases(item, expires);
CREATE VIEW labels AS
SELECT f.seq AS seq, f.item AS item, f.item_id AS item_id,
       COALESCE((SELECT c.label FROM annotations c WHERE c.root = f.seq ORDER BY c.seq DESC LIMIT 1),
                f.label) AS label,
       f.stage AS stage, f.time AS time, f.source AS source, f.annotator AS annotator
FROM annotations f
WHERE f.kind = 'label'
  AND f.seq = (SELECT MIN(g.seq) FROM annotations g WHERE g.item = f.item AND g.kind = 'label');
"""
_SCHEMA = _SCHEMA_CORE + _SCHEMA_TEAM
#: Who recorded the labels of a format-1 session (it did not store annotators).
LEGACY_ANNOTATOR = "(before annotators)"


def _statements(script: str) -> list[str]:
    """The statements of a schema script (triggers hold ``;`` inside ``BEGIN … END``)."""
    out, buf = [], []
    for line in script.strip().splitlines():
        buf.append(line)
        text = "\n".join(buf).strip()
        if text.endswith(";") and (
            not text.upper().startswith("CREATE TRIGGER") or text.endswith("END;")
        ):
            out.append(text)
            buf = []
    if "".join(buf).strip():
        out.append("\n".join(buf))
    return out


def _migrate_v1(con: sqlite3.Connection) -> int:
    """Format 1 → 2 in one transaction: every stored label becomes an annotation (annotator
    :data:`LEGACY_ANNOTATOR`, same item, label, stage, time and source, in the same order); the
    old table is kept, renamed ``labels_v1``. Returns the number of labels carried over."""
    con.execute("ALTER TABLE labels RENAME TO labels_v1")
    for stmt in _statements(_SCHEMA_TEAM):
        con.execute(stmt)
    con.execute(
        "INSERT INTO annotations(item, item_id, label, annotator, kind, stage, batch, time, source) "
        "SELECT item, item_id, label, ?, 'label', stage, NULL, time, source FROM labels_v1 "
        "ORDER BY seq",
        (LEGACY_ANNOTATOR,),
    )
    n_old = con.execute("SELECT COUNT(*) FROM labels_v1").fetchone()[0]
    n_new = con.execute("SELECT COUNT(*) FROM labels").fetchone()[0]
    if n_old != n_new:  # pragma: no cover - a unique item per row in format 1
        raise SessionError(f"migration would keep {n_new} of {n_old} labels; nothing changed")
    con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (json.dumps(SCHEMA_VERSION),))
    con.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('migrated_from', ?)",
        (json.dumps({"schema_version": 1, "time": _now()}),),
    )
    return int(n_old)


def default_annotator() -> str:
    """The login name (the default ``--annotator``)."""
    import getpass

    try:
        return getpass.getuser() or "unknown"
    except Exception:  # no login name (some containers)
        return "unknown"


def _check_annotator(name: Any) -> str:
    if name is None:
        return default_annotator()
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise ValueError(f"annotator must be a non-empty name, got {name!r}")
    if name.strip() == LEGACY_ANNOTATOR:
        raise ValueError(f"annotator name {name!r} is reserved")
    return name.strip()


def _sqlite_uri(path: str, **params: str) -> str:
    """A SQLite URI for a file whose name may hold any character (``#``, ``%``, ``?``, spaces)."""
    from urllib.parse import quote, urlencode

    return f"file:{quote(str(Path(path).resolve().as_posix()), safe='/')}?{urlencode(params)}"


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


def _later(seconds: float) -> str:
    from datetime import timedelta

    return (datetime.now(UTC) + timedelta(seconds=float(seconds))).isoformat(
        timespec="microseconds"
    )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _cohen_kappa(pairs: Sequence[tuple[str, str]]) -> float:
    """Cohen's kappa of two raters' labels on the same items (Cohen, 1960)."""
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    n = len(pairs)
    cats = sorted(set(a) | set(b))
    po = sum(x == y for x, y in pairs) / n
    pe = sum((a.count(c) / n) * (b.count(c) / n) for c in cats)
    return float("nan") if pe >= 1.0 else (po - pe) / (1.0 - pe)


def _same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _refuse_same_file(path: str | os.PathLike, other: str | os.PathLike, what: str) -> None:
    if _same_file(path, other):
        raise SessionError(f"{path} is {what}; choose another file name")


def _refuse_overwriting_labels(path: str) -> None:
    """An existing file about to be replaced by a new session: refuse if it holds labels."""
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head != b"SQLite format 3\x00":
        return
    try:
        con = sqlite3.connect(_sqlite_uri(path, mode="ro"), uri=True)
        try:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
            n = 0
            for table in ("annotations", "labels"):
                if table in names:
                    n = max(n, con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return
    if n:
        raise SessionError(
            f"{path} holds {n} recorded labels; --overwrite never replaces labels: remove the "
            "file yourself or pick another name"
        )


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
        """The evaluator after the first ``n_done`` stages (a private copy: callers may use it).

        Replays each stage's query (same generator, so the same draws) and updates with the
        stage's labels as they count now. After a correction (:meth:`Session.relabel`) a replayed
        query may draw other items than the stage did (the oracle model saw another label):
        then the stored draws of the stage — items, ``q`` and weights as they were drawn — are
        put in its place, so the evaluator is a deterministic function of the seed, the stored
        draws and the labels as corrected.
        """
        key = (n_done, session._n_corrections())
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        snap = session._snapshot(max_stage=n_done)
        if snap is None:
            ev, start = self._fresh(), 0
        else:
            start, blob = snap
            ev = self._load(blob)
        stages = session._stage_rows()
        corrected = key[1] > 0
        known = session._label_map()
        for s in range(start, n_done):
            n_req, items, info = stages[s]
            try:
                ev.query(n_req, max_cost=info.get("max_cost"))  # as drawn: cut at the budget
                got = ev.pending_draws.indices
            except ValueError:
                if not corrected:
                    raise
                got = None
            if got is None or not np.array_equal(got, items):
                if not corrected:
                    raise SessionError(
                        f"replaying stage {s} drew other items than the session recorded; the "
                        "library version or the pool changed since the session was created"
                    )
                ev = _with_pending(ev, session._stage_draws(s), self.pool)
            new = [int(i) for i in dict.fromkeys(items.tolist()) if not ev.known[i]]
            ev.update(np.asarray(new, dtype=np.int64), [session._codec(known[i]) for i in new])
        self._cache = (key, ev)
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


def _with_pending(ev, draws: Draws, pool):
    """The evaluator with its pending query replaced by the stored draws of a stage (same
    generator state, labels and oracle model)."""
    from .adaptive import ActiveEvaluator

    state = ev.get_state()
    label = np.full(pool.n_items, -1, dtype=np.int64)
    label[np.asarray(state["known"]["idx"], dtype=np.int64)] = state["known"]["y"]
    y = label[draws.indices]
    state["pending"] = {
        "idx": draws.indices.copy(),
        "w": np.asarray(draws.weights, dtype=float).copy(),
        "q": np.asarray(draws.q, dtype=float).copy(),
        "y": y,
        "new": y < 0,
    }
    state["requested"] = np.unique(draws.indices[y < 0])
    return ActiveEvaluator.from_state(pool, state)


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
        self._con = con
        self.pool_file = pool_file
        self.design = design
        self.readonly = readonly
        self._schema = schema
        self._design = _make_design(pool_file.pool, design)
        self._codec = label_codec(pool_file.pool)

    # -- lifecycle --------------------------------------------------------------------------------
    @staticmethod
    def _connect(path: str, *, create: bool = False, readonly: bool = False) -> sqlite3.Connection:
        """Open the SQLite file. Nothing is written here (the WAL journal is switched on only
        once the file is known to be a session): read-only opens use ``mode=ro``, or
        ``immutable=1`` when no writer's journal is beside the file, so they create no file
        either (and work on read-only storage)."""
        if readonly:
            wal = os.path.exists(f"{path}-wal")
            uri = _sqlite_uri(path, mode="ro") if wal else _sqlite_uri(path, immutable="1")
        else:
            uri = _sqlite_uri(path, mode="rwc" if create else "rw")
        try:
            con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30.0)
            con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.DatabaseError as exc:
            raise SessionError(f"{path} is not a bae session (SQLite: {exc})") from exc
        return con

    @staticmethod
    def _tune(con: sqlite3.Connection) -> None:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=FULL")
        con.execute("PRAGMA foreign_keys=ON")

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
        _refuse_same_file(path, pool_path, "the pool file")
        if os.path.exists(path):
            if not overwrite:
                raise SessionError(
                    f"session file {path} already exists; remove it or pick another name"
                )
            _refuse_overwriting_labels(path)
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
            cls._tune(con)
            con.execute("BEGIN IMMEDIATE")
            for stmt in _statements(_SCHEMA):
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
        con = cls._connect(path)
        cls._tune(con)
        session = cls(path, con, pf, design)
        session._design = strategy
        session.meta = meta
        return session

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        *,
        pool_path: str | os.PathLike | None = None,
        readonly: bool = False,
    ) -> Session:
        """Open an existing session, re-reading its pool file and verifying its SHA-256.

        Parameters
        ----------
        path : str or path-like
        pool_path : str or path-like, optional
            Where the pool file is now, if it moved (its checksum must still match).
        readonly : bool
            Open without ever writing (``bae status``, ``report``, ``compare``): not a byte of the
            file changes and no file is created beside it, so it works on read-only storage. A
            format-1 session is read as it is; a writable open migrates it to format 2 first
            (:func:`_migrate_v1`, one transaction, every label kept).

        Raises
        ------
        ValueError
            Missing or foreign file, a pool file that is missing or changed since ``bae init``.
        """
        path = str(Path(path).expanduser())
        if not os.path.exists(path):
            raise SessionError(f"session file {path} does not exist (create one with bae init)")
        if os.path.isdir(path):
            raise SessionError(f"{path} is a directory, not a bae session")
        con = cls._connect(path, readonly=readonly)
        try:
            rows = dict(con.execute("SELECT key, value FROM meta").fetchall())
            meta = {k: json.loads(v) for k, v in rows.items()}
            for key in ("schema_version", "pool_path", "pool_sha256", "pool_spec", "design"):
                if key not in meta:
                    raise SessionError(
                        f"{path} is not a bae session (no {key!r} in its meta table)"
                    )
        except (sqlite3.DatabaseError, ValueError) as exc:
            con.close()
            if isinstance(exc, SessionError):
                raise
            raise SessionError(f"{path} is not a bae session ({_one_line(exc)})") from exc
        schema = meta.get("schema_version")
        if schema not in (1, SCHEMA_VERSION):
            con.close()
            raise SessionError(
                f"{path} has session format {schema!r}; this bae reads formats 1 and "
                f"{SCHEMA_VERSION}"
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
        if not readonly:
            cls._tune(con)
            if schema == 1:
                con.execute("BEGIN IMMEDIATE")
                try:
                    if (
                        con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[
                            0
                        ]
                        == "1"
                    ):  # not migrated by another process meanwhile
                        _migrate_v1(con)
                except BaseException:
                    con.execute("ROLLBACK")
                    con.close()
                    raise
                con.execute("COMMIT")
                schema = SCHEMA_VERSION
                meta["schema_version"] = SCHEMA_VERSION
        session = cls(path, con, pf, Design.from_dict(meta["design"]), readonly=readonly,
                      schema=schema)  # fmt: skip
        session.meta = meta
        return session

    def close(self) -> None:
        """Checkpoint the WAL into the main file (writable sessions) and close."""
        if self._con is not None and not self.readonly:
            with contextlib.suppress(sqlite3.Error):
                self._con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if self._con is not None:
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
        """Items with a label (distinct items; second annotations and corrections not counted)."""
        return int(self._q("SELECT COUNT(*) FROM labels")[0][0])

    @property
    def n_stages(self) -> int:
        return int(self._q("SELECT COUNT(*) FROM stages")[0][0])

    def labels(self) -> pd.DataFrame:
        """The label each item counts with: ``item`` (pool index), ``id``, ``label`` (as text),
        ``stage``, ``time``, ``source``, ``annotator`` (of the first annotation); in recording
        order. The rule: an item's first annotation, or the latest correction of it
        (:meth:`relabel`); later annotations by others only enter :meth:`agreement`."""
        who = "annotator" if self._schema >= 2 else f"'{LEGACY_ANNOTATOR}'"
        return pd.DataFrame(
            self._q(
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
        if self._schema < 2:
            sql = (
                f"SELECT seq, item, item_id, label, '{LEGACY_ANNOTATOR}', 'label', NULL, NULL, "
                "NULL, stage, NULL, time, source FROM labels ORDER BY seq"
            )
        else:
            sql = (
                "SELECT seq, item, item_id, label, annotator, kind, root, supersedes, reason, "
                "stage, batch, time, source FROM annotations ORDER BY seq"
            )
        return pd.DataFrame(self._q(sql), columns=cols)

    def draws(self) -> pd.DataFrame:
        """Every draw: ``seq``, ``stage``, ``item``, ``id``, ``q``, ``weight`` (``p/q``)."""
        return pd.DataFrame(
            self._q("SELECT seq, stage, item, item_id, q, weight FROM draws ORDER BY seq"),
            columns=["seq", "stage", "item", "id", "q", "weight"],
        )

    def _label_map(self) -> dict[int, str]:
        return dict(self._q("SELECT item, label FROM labels"))

    def _n_corrections(self) -> int:
        if self._schema < 2:
            return 0
        return int(self._q("SELECT COUNT(*) FROM annotations WHERE kind='correction'")[0][0])

    def _stage_table(self) -> list[tuple[int, np.ndarray]]:
        d = self.draws()
        return [(int(s), g["item"].to_numpy(np.int64)) for s, g in d.groupby("stage", sort=True)]

    def _complete(self) -> tuple[list[int], list[int]]:
        """Completed stages, and the pending (incomplete) ones (a static design may have several
        when annotators hold the items of one stage and others ask for work)."""
        known = set(self._label_map())
        done, pending = [], []
        for s, items in self._stage_table():
            if _first_new(items, known).any():
                pending.append(s)
            else:
                done.append(s)
        return done, pending

    def pending_items(self) -> np.ndarray:
        """Pool indices of the items of the pending stages that still need a label (first-draw
        order, without repeats); empty when no stage is pending."""
        known = set(self._label_map())
        rows = self._q("SELECT item FROM draws ORDER BY seq")
        items = np.asarray([r[0] for r in rows], dtype=np.int64)
        if items.size == 0:
            return items
        return items[_first_new(items, known)]

    def _stage_rows(self) -> list[tuple[int, np.ndarray, dict]]:
        """Per stage (in order): the ``n`` its query asked for, its drawn items and how it was
        drawn (the ``rng`` column)."""
        req = {
            st: (n, info) for st, n, info in self._q("SELECT stage, n_requested, rng FROM stages")
        }
        return [
            (int(req[st][0]), items, json.loads(req[st][1])) for st, items in self._stage_table()
        ]

    def _stage_draws(self, stage: int) -> Draws:
        rows = self._q("SELECT item, weight, q FROM draws WHERE stage=? ORDER BY seq", (stage,))
        arr = np.asarray(rows, dtype=float).reshape(-1, 3)
        return Draws(arr[:, 0].astype(np.int64), arr[:, 1], arr[:, 2])

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
        """Labels recorded (distinct items), or their total cost when the pool has label costs."""
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

    # -- leases -----------------------------------------------------------------------------------
    def leases(self, active_only: bool = True) -> pd.DataFrame:
        """Leases (``item``, ``id``, ``annotator``, ``holder``, ``batch``, ``granted``,
        ``expires``): by default the active ones (not expired, item not labeled yet)."""
        cols = ["item", "id", "annotator", "holder", "batch", "granted", "expires"]
        if self._schema < 2:
            return pd.DataFrame(columns=cols)
        rows = self._q(
            "SELECT item, annotator, holder, batch, granted, expires FROM leases ORDER BY seq"
        )
        frame = pd.DataFrame(rows, columns=[c for c in cols if c != "id"])
        frame.insert(1, "id", [str(self.pool_file.ids[i]) for i in frame["item"]])
        if active_only:
            labeled = set(self._label_map())
            now = _now()
            frame = frame[(frame["expires"] > now) & ~frame["item"].isin(labeled)]
            frame = frame.drop_duplicates("item", keep="last")
        return frame.reset_index(drop=True)

    def _lease_tx(self, con, n: int, annotator: str, holder: str, seconds: float) -> np.ndarray:
        """Inside a write transaction: the holder's active leases on pending items, or, when it
        has none, new leases on up to ``n`` pending items nobody else holds."""
        known = {r[0] for r in con.execute("SELECT item FROM labels")}
        items = np.asarray(
            [r[0] for r in con.execute("SELECT item FROM draws ORDER BY seq")], dtype=np.int64
        )
        pend = items[_first_new(items, known)] if items.size else items
        now = _now()
        active: dict[int, str] = {}
        for it, h in con.execute(
            "SELECT item, holder FROM leases WHERE expires > ? ORDER BY seq", (now,)
        ):
            active[int(it)] = h
        mine = [int(i) for i in pend if active.get(int(i)) == holder]
        if mine:
            return np.asarray(mine, dtype=np.int64)
        free = [int(i) for i in pend if int(i) not in active][:n]
        if free:
            import secrets

            batch = f"{annotator}:{now[:19]}:{secrets.token_hex(3)}"
            expires = _later(seconds)
            con.executemany(
                "INSERT INTO leases(item, annotator, holder, batch, granted, expires) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(i, annotator, holder, batch, now, expires) for i in free],
            )
        return np.asarray(free, dtype=np.int64)

    def _lease(self, n: int, annotator: str, holder: str, seconds: float) -> np.ndarray:
        got: list[np.ndarray] = []
        self._write(lambda con: got.append(self._lease_tx(con, n, annotator, holder, seconds)))
        return got[0]

    def release(self, holder: str) -> None:
        """End the holder's active leases now (their unlabeled items go to others)."""
        now = _now()
        self._write(
            lambda con: con.execute(
                "INSERT INTO leases(item, annotator, holder, batch, granted, expires) "
                "SELECT item, annotator, holder, batch, ?, ? FROM leases "
                "WHERE holder=? AND expires > ?",
                (now, now, holder, now),
            )
        )

    # -- asking -----------------------------------------------------------------------------------
    def next(
        self,
        n: int = 20,
        *,
        annotator: str | None = None,
        holder: str | None = None,
        lease: float = DEFAULT_LEASE,
        stage_size: int | None = None,
    ) -> np.ndarray:
        """Items for one annotator to label next (pool indices, first-draw order), leased to them.

        The items are those of the pending stage(s) leased to ``holder`` and not labeled yet;
        if it holds none, up to ``n`` pending items nobody else holds are leased to it for
        ``lease`` seconds (asking twice never changes what is asked). When no pending item is
        free, a new stage is drawn — ``stage_size`` (default ``n``) draws with distinct items
        (Sawade (2012), Algorithm 2; repeats of already-labeled items are kept as draws but cost
        nothing), cut to the budget — and persisted in one transaction before it is leased. An
        adaptive design has one pending stage at a time (its next proposal needs the labels).

        Parameters
        ----------
        n : int
            Items to lease at most.
        annotator : str, optional
            Who asks (default: the login name).
        holder : str, optional
            Who holds the leases (default: the annotator; ``bae serve`` uses one per browser).
        lease : float
            Seconds until the leases expire and the items go to others.
        stage_size : int, optional
            Draws of a new stage (default ``n``).

        Raises
        ------
        ValueError
            If the budget is used up, no unlabeled item is left to draw, or (adaptive designs)
            every unlabeled item of the pending stage is leased to someone else.
        """
        n = check_count(n, "n")
        stage_size = n if stage_size is None else check_count(stage_size, "stage_size")
        annotator = _check_annotator(annotator)
        holder = annotator if holder is None else str(holder)
        if not (float(lease) > 0):
            raise ValueError(f"lease must be a positive number of seconds, got {lease!r}")
        self._require_writable("next")
        got = self._lease(n, annotator, holder, lease)
        if got.size:
            return got
        pend = self.pending_items()
        if pend.size and self.design.kind == "adaptive":
            raise SessionError(self._all_leased_message(pend))
        self._draw_stage(stage_size)
        got = self._lease(n, annotator, holder, lease)
        if got.size == 0:
            raise SessionError(self._all_leased_message(self.pending_items()))
        return got

    def _all_leased_message(self, pend: np.ndarray) -> str:
        act = self.leases()
        who = ", ".join(
            f"{a} until {e[11:16]} UTC"
            for a, e in act.groupby("annotator")["expires"].max().items()
        )
        return (
            f"every one of the {pend.size} unlabeled items of the current stage is leased to "
            f"another annotator ({who}); ask again when they are labeled or the leases expire"
        )

    def _draw_stage(self, n: int) -> None:
        known = set(self._label_map())
        left = self.budget_left()
        if left is not None and left < (1.0 if self.pool.costs is None else self.pool.costs.min()):
            raise SessionError(
                f"the budget of {self.design.budget:g} is used up "
                f"({self.budget_used():g} spent"
                + (f", {self._pending_cost():g} leased or pending" if self._pending_cost() else "")
                + "); nothing more to label"
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

    def _require_writable(self, what: str) -> None:
        if self.readonly:
            raise SessionError(f"{what} needs a writable session; {self.path} was opened read-only")

    def _write(self, fn: Callable[[sqlite3.Connection], Any]) -> None:
        self._require_writable("writing")
        con = self._con
        con.execute("BEGIN IMMEDIATE")
        try:
            fn(con)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    # -- labels -----------------------------------------------------------------------------------
    def check_labels(
        self,
        ids: Sequence[Any],
        labels: Sequence[Any],
        *,
        annotator: str | None = None,
        holder: str | None = None,
        rows: bool = True,
    ) -> tuple[np.ndarray, list]:
        """Validate labels without writing: returns ``(items, labels)`` of the *new* ones.

        An item the annotator labeled already with the same label is skipped; an item somebody
        else labeled is a new (second) annotation.

        Parameters
        ----------
        holder : str, optional
            When given, every item must be leased to this holder (``bae serve``).
        rows : bool
            Name the rows of the input in messages (``False`` for one typed answer).

        Raises
        ------
        ValueError
            Unknown item ids, duplicate ids, labels outside the classes, items that were never
            drawn (``bae next`` lists the items to label), an item the annotator already labeled
            differently (``bae relabel`` corrects it), an item not leased to ``holder``.
        """
        annotator = _check_annotator(annotator)
        ids = [str(i).strip() for i in ids]
        if len(ids) != len(labels):
            raise ValueError(f"{len(ids)} ids but {len(labels)} labels")

        def where(r: int) -> str:
            return f" (row {r + 1})" if rows else ""

        seen: dict[str, int] = {}
        for row, i in enumerate(ids):
            if i in seen:
                raise ValueError(f"item id {i!r} appears twice (rows {seen[i] + 1} and {row + 1})")
            seen[i] = row
        idx = self.pool_file.index_of(ids)
        values = [
            self._codec(y, f" for item {i!r}{where(r)}")
            for r, (i, y) in enumerate(zip(ids, labels, strict=True))
        ]
        mine = self._annotator_labels(annotator)
        drawn = {r[0] for r in self._q("SELECT DISTINCT item FROM draws")}
        leased = None
        if holder is not None:
            act = self.leases()
            leased = set(act.loc[act["holder"] == holder, "item"].tolist())
        new_idx, new_vals = [], []
        for r, (it, i, v) in enumerate(zip(idx.tolist(), ids, values, strict=True)):
            if it in mine:
                if mine[it] != str(v):
                    raise ValueError(
                        f"item {i!r}{where(r)} already has your label {mine[it]!r} "
                        f"(annotator {annotator}); got {str(v)!r}: to correct it, "
                        f"bae relabel SESSION {i} {v} --reason '…'"
                    )
                continue
            if it not in drawn:
                raise ValueError(
                    f"item {i!r}{where(r)} was not asked for: it is in no draw of this "
                    "session (bae next lists the items to label)"
                )
            if leased is not None and it not in leased:
                raise ValueError(f"item {i!r} is not leased to you (or its lease expired)")
            new_idx.append(it)
            new_vals.append(v)
        return np.asarray(new_idx, dtype=np.int64), new_vals

    def _annotator_labels(self, annotator: str, con=None) -> dict[int, str]:
        """The annotator's own latest answer per item (their first label or their own latest
        correction of it)."""
        if self._schema < 2:
            return {}
        q = (con or self._con).execute(
            "SELECT a.item, COALESCE((SELECT c.label FROM annotations c WHERE c.root = a.seq "
            "AND c.annotator = a.annotator ORDER BY c.seq DESC LIMIT 1), a.label) "
            "FROM annotations a WHERE a.kind='label' AND a.annotator=?",
            (annotator,),
        )
        return dict(q.fetchall())

    def record(
        self,
        ids: Sequence[Any],
        labels: Sequence[Any],
        *,
        batch_size: int = 50,
        source: str = "api",
        annotator: str | None = None,
        holder: str | None = None,
        rows: bool = True,
        progress: Callable[[int], None] | None = None,
    ) -> RecordResult:
        """Validate, then persist annotations in transactions of ``batch_size``.

        All labels are checked before anything is written (bad input leaves the session
        untouched). Labels the annotator already gave are skipped, so re-running the same
        ``record`` after a crash counts nothing twice. An item another annotator labeled already
        gets a second annotation (kept, shown in :meth:`agreement`; the item keeps counting with
        its first label).

        Parameters
        ----------
        ids : sequence
            Item ids (as in the pool file's id column).
        labels : sequence
            Their labels (class values or their text form).
        batch_size : int
            Labels per transaction (1 = each label committed on its own).
        source : str
            Stored with each label (``"csv:FILE"``, ``"interactive"``, ``"web"``, …).
        annotator : str, optional
            Who gave the labels (default: the login name).
        holder : str, optional
            Accept only items leased to this holder (``bae serve``).
        progress : callable, optional
            Called with the number of labels written after each transaction.
        """
        batch_size = check_count(batch_size, "batch_size")
        annotator = _check_annotator(annotator)
        self._require_writable("record")
        new_idx, new_vals = self.check_labels(
            ids, labels, annotator=annotator, holder=holder, rows=rows
        )
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
            wrote = self._write_labels(chunk, stage_of, source, annotator)
            written += wrote
            skipped += len(chunk) - wrote
            if progress is not None:
                progress(len(chunk))
            if delay:
                time.sleep(delay)
        return RecordResult(written, skipped, int(self.pending_items().size))

    def _draw_stage_of(self) -> dict[int, int]:
        return dict(self._q("SELECT item, MIN(stage) FROM draws GROUP BY item"))

    def _write_labels(self, chunk, stage_of, source: str, annotator: str) -> int:
        ids = self.pool_file.ids
        now = _now()
        count = 0

        def tx(con):
            nonlocal count
            mine = self._annotator_labels(annotator, con)
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
                    (it, str(ids[it]), str(v), annotator, stage_of.get(it), batches.get(it), now,
                     source),
                )  # fmt: skip
                count += 1

        self._write(tx)
        return count

    def relabel(
        self,
        item_id: Any,
        label: Any,
        *,
        reason: str,
        annotator: str | None = None,
        own: bool = False,
        source: str = "api",
    ) -> bool:
        """Correct a label: a new annotation that supersedes the old one, never a deletion.

        By default the correction supersedes the label the item counts with (its first
        annotation, or the latest correction of it), so the estimate — and, for adaptive
        designs, the oracle model and the proposals of later stages — follow the corrected
        label. ``own=True`` corrects the annotator's own annotation instead (the labeling page's
        undo): it changes the count only when that annotation is the one the item counts with.

        Returns
        -------
        bool
            ``False`` when the label is already the one given (nothing written).

        Raises
        ------
        ValueError
            No reason, an unknown item, an item without a label, a label outside the classes.
        """
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("a correction needs a reason (--reason '…'): it is kept for audits")
        annotator = _check_annotator(annotator)
        self._require_writable("relabel")
        iid = str(item_id).strip()
        it = int(self.pool_file.index_of([iid])[0])
        value = str(self._codec(label, f" for item {iid!r}"))
        done: list[bool] = []

        def tx(con):
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
                    raise SessionError(
                        f"item {iid!r} has no label yet: record one (bae record, bae label)"
                    )
            root = int(root[0])
            head, current = con.execute(
                "SELECT seq, label FROM annotations WHERE seq=? OR root=? ORDER BY seq DESC "
                "LIMIT 1",
                (root, root),
            ).fetchone()
            if current == value:
                done.append(False)
                return
            stage = con.execute("SELECT MIN(stage) FROM draws WHERE item=?", (it,)).fetchone()[0]
            con.execute(
                "INSERT INTO annotations(item, item_id, label, annotator, kind, root, supersedes, "
                "reason, stage, batch, time, source) "
                "VALUES (?, ?, ?, ?, 'correction', ?, ?, ?, ?, NULL, ?, ?)",
                (it, iid, value, annotator, root, head, reason.strip(), stage, _now(), source),
            )
            if stage is not None:  # evaluator snapshots that used the old label are stale
                con.execute("DELETE FROM snapshots WHERE stage > ?", (stage,))
            done.append(True)

        self._write(tx)
        self._design = _make_design(self.pool, self.design)  # drop a cached evaluator
        return done[0]

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
        a = self.annotations()
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
                    kappa[(names[x], names[y])] = (_cohen_kappa(common), len(common))
        return {
            "items": len(multi),
            "pairs": pairs,
            "agree": agree / pairs if pairs else float("nan"),
            "kappa": kappa,
        }

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
            "annotators": self._annotator_counts(),
            "corrections": self._n_corrections(),
            "leased": len(self.leases()),
            "agreement": _agreement_json(self.agreement()),
            "rule": "first label of each item, or its latest correction (bae relabel)",
        }

    def _annotator_counts(self) -> dict[str, int]:
        a = self.annotations()
        if a.empty:
            return {}
        return {
            str(k): int(v) for k, v in a[a["kind"] == "label"]["annotator"].value_counts().items()
        }


def _agreement_json(ag: dict[str, Any]) -> dict[str, Any]:
    return {
        **ag,
        "kappa": [
            {"annotators": [a, b], "kappa": k, "items": n} for (a, b), (k, n) in ag["kappa"].items()
        ],
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
