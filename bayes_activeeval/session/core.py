"""The :class:`Session` class: the labeling workflow over one session file.

``next`` leases the items of the pending stage or draws a new one (through the design strategy of
:mod:`.designs`), ``record`` and ``relabel`` persist annotations (the team rules of
:mod:`.annotations`), and the estimates, the proposal and the posterior are read from the completed
stages. The file format and its safety checks are in :mod:`.store`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import check_count, check_level
from ..estimators import Estimate, UndefinedEstimateWarning, estimate
from ..io import PoolFile, PoolSpec, file_checksum, jsonable, read_pool
from ..measures import difference, stack
from ..measures import get as get_measure
from ..threshold_free import RankMeasure
from ..unseen import applies_to, unseen_errors
from . import annotations as team
from .designs import Design, StaticDesign, make_design, resolve_design_defences
from .records import SessionRecords
from .store import (
    SCHEMA_VERSION,
    Raced,
    SessionError,
    check_new_path,
    connect,
    first_new,
    migrate_if_v1,
    now,
    package_version,
    read_meta,
    refuse_same_file,
    tune,
    write_new,
)

__all__ = ["DELAY_ENV", "RecordResult", "Session"]

#: Environment variable (tests only): seconds to sleep after each committed label transaction, so
#: a test can kill ``bae record`` in the middle.
DELAY_ENV = "BAE_TEST_RECORD_DELAY"


@dataclass(frozen=True)
class RecordResult:
    """What :meth:`Session.record` did: labels written, labels already present (skipped), and
    how many items of the pending stage still wait for a label.

    Parameters
    ----------
    recorded : int
        Number of labels written.
    skipped : int
        Number of labels not written because the annotator had already given them.
    pending : int
        Number of distinct items of the pending stages still without a label after the call.
    """

    recorded: int
    skipped: int
    pending: int


class _NothingMore(SessionError):
    """No new stage can be drawn: ``reason`` says why (the message adds "nothing more to
    label")."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}; nothing more to label")
        self.reason = reason


class Session(SessionRecords):
    """A persisted labeling session (one SQLite file). Use :meth:`create` or :meth:`open`.

    Parameters
    ----------
    path : str
        The session file.
    con : sqlite3.Connection
        An open connection to it (:func:`~bayes_activeeval.session.store.connect`).
    pool_file : PoolFile
        The pool file read with the session's stored options.
    design : Design
        The session's design; its sampling strategy is built from it for the pool.
    readonly : bool
        Refuse every write (default ``False``).
    schema : int
        The file's format version (default the current one, 2; a format-1 file is read as it
        is).

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
        super().__init__(path, con, pool_file, design, readonly=readonly, schema=schema)
        self._design = make_design(pool_file.pool, design)

    # -- lifecycle --------------------------------------------------------------------------------
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
        is written, so a bad pool or design leaves nothing behind. With ``overwrite`` an existing
        bae session is replaced only when it holds no labels and no other connection has it open
        (an exclusive lock; its contents are replaced in one transaction, the file and its
        journal files stay where they are), and any other existing file only when it is no
        database and holds no labels (:func:`~bayes_activeeval.session.store.write_new`).

        Raises
        ------
        ValueError
            Bad pool file or options (see :func:`~bayes_activeeval.io.read_pool`), an unknown
            measure or model, an existing file (without ``overwrite``; with it: a session holding
            labels or open elsewhere, a file holding labels, another database), a directory that
            does not exist.
        """
        path = str(Path(path).expanduser())
        refuse_same_file(path, pool_path, "the pool file")
        check_new_path(path, overwrite=overwrite)  # before the pool is read; the file: write_new
        pf = read_pool(pool_path, spec)
        pool = pf.pool
        models = design.models or pool.models
        for m in models:
            pool.check_model(m)
        oracle = design.oracle
        if oracle is None:  # the adaptive default, resolved for this pool and stored
            from ..adaptive import default_oracle

            oracle = default_oracle(pool)
        options = dict(design.options)
        if design.kind == "adaptive" and "estimator" not in options:
            # the adaptive default, resolved and stored: a session keeps its estimator (sessions
            # written before the option existed replay with "ipw", the default then)
            from ..adaptive import default_estimator

            lazy = getattr(pool, "is_lazy", False)
            meas = pool.resolve(design.measure, models[0])[0]
            options["estimator"] = "ipw" if lazy else default_estimator(meas)
        if design.kind == "adaptive" and "relative_floor" not in options:
            # resolved and stored likewise: sessions written before it replay with 0
            from ..adaptive import default_relative_floor

            options["relative_floor"] = default_relative_floor(options.get("estimator"))
        # the defences, resolved and stored likewise (files written before the defensive floor
        # have a mix and no floor, and keep their mixture)
        mix, defensive_floor = resolve_design_defences(design, tuple(models))
        design = Design(
            **{
                **design.to_dict(),
                "models": tuple(models),
                "oracle": oracle,
                "options": options,
                "mix": mix,
                "defensive_floor": defensive_floor,
            }
        )
        pool.resolve(design.measure, models[0])  # measure fits the pool?
        strategy = make_design(pool, design, validate=True)
        if isinstance(strategy, StaticDesign):
            strategy.proposal  # noqa: B018 - compute now: errors before anything is written
        meta = {
            "schema_version": SCHEMA_VERSION,
            "pool_path": pf.path,
            "pool_sha256": pf.checksum,
            "pool_spec": spec.to_dict(),
            "design": design.to_dict(),
            "created": now(),
            "bae_version": package_version(),
            "n_items": pool.n_items,
        }
        write_new(path, meta, overwrite=overwrite)
        con = connect(path)
        tune(con)
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
            (:func:`~bayes_activeeval.session.store.migrate_v1`, one transaction, every label kept).

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
        con = connect(path, readonly=readonly)
        meta = read_meta(con, path)
        schema = meta["schema_version"]
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
            tune(con)
            if schema == 1:
                migrate_if_v1(con)
                schema = SCHEMA_VERSION
                meta["schema_version"] = SCHEMA_VERSION
        session = cls(path, con, pf, Design.from_dict(meta["design"]), readonly=readonly,
                      schema=schema)  # fmt: skip
        session.meta = meta
        return session

    def _lease(self, n: int, annotator: str, holder: str, seconds: float) -> np.ndarray:
        got: list[np.ndarray] = []
        self.store.transaction(
            lambda con: got.append(team.lease_tx(con, n, annotator, holder, seconds))
        )
        return got[0]

    def release(self, holder: str) -> None:
        """End the holder's active leases now (their unlabeled items go to others)."""
        self.store.transaction(lambda con: team.release_tx(con, holder))

    # -- asking -----------------------------------------------------------------------------------
    def next(
        self,
        n: int = 20,
        *,
        annotator: str | None = None,
        holder: str | None = None,
        lease: float = team.DEFAULT_LEASE,
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
        annotator = team.check_annotator(annotator)
        holder = annotator if holder is None else str(holder)
        lease = team.check_lease(lease)
        self.store.require_writable("next")
        got = self._lease(n, annotator, holder, lease)
        if got.size:
            return got
        pend = self.pending_items()
        if pend.size and self.design.kind == "adaptive":
            raise SessionError(self._all_leased_message(pend))
        try:
            self._draw_stage(stage_size)
        except SessionError as exc:
            if pend.size:  # no new stage (budget, pool): the items left are held by others
                why = getattr(exc, "reason", str(exc))
                raise SessionError(self._all_leased_message(pend, why=why)) from None
            raise
        got = self._lease(n, annotator, holder, lease)
        if got.size == 0:
            raise SessionError(self._all_leased_message(self.pending_items()))
        return got

    def _all_leased_message(self, pend: np.ndarray, why: str | None = None) -> str:
        """Who holds the unlabeled items of the pending stages, and until when (``why``: why no
        new stage is drawn instead)."""
        act = self.leases()
        act = act[act["item"].isin(pend.tolist())]
        who = ", ".join(
            f"{a} until {g['expires'].max()[11:16]} UTC ({len(g)} item{'s' if len(g) != 1 else ''})"
            for a, g in act.groupby("annotator", sort=True)
        )
        text = (
            f"every one of the {pend.size} unlabeled items of the current stage is leased to "
            f"another annotator ({who or 'nobody now'}); ask again when they are labeled or the "
            "leases expire"
        )
        if why:  # there is something more to label: the items others hold
            text += f" (no new stage: {why.rstrip('.')})"
        return text

    def _draw_stage(self, n: int) -> None:
        known = set(self.label_map())
        left = self.budget_left()
        if left is not None and left < (1.0 if self.pool.costs is None else self.pool.costs.min()):
            raise _NothingMore(
                f"the budget of {self.design.budget:g} is used up "
                f"({self.budget_used():g} spent"
                + (f", {self.pending_cost():g} leased or pending" if self.pending_cost() else "")
                + ")"
            )
        if len(known) >= self.pool.n_items:
            raise _NothingMore("every item of the pool is labeled")
        if left is not None and self.pool.costs is None:
            n = max(1, min(n, int(left)))
        stage = self.n_stages
        rows, stages, snaps = [], [], []
        for _attempt in range(50):
            draws, info, snap = self._design.propose(self, stage, n, left)
            stages.append((stage, int(info["n"]), json.dumps(jsonable(info)), now()))
            ids = self.pool_file.ids
            rows.extend(
                (stage, int(it), str(ids[it]), float(q), float(w))
                for it, q, w in zip(draws.indices, draws.q, draws.weights, strict=True)
            )
            if snap is not None:
                snaps.append((stage, snap))
            if first_new(draws.indices, known).any():
                break
            # every item drawn is labeled already: that stage is complete; draw the next one
            stage += 1
        else:
            raise SessionError("50 stages in a row drew only labeled items; the pool is exhausted")

        first = stages[0][0]

        def tx(con):
            if con.execute("SELECT COUNT(*) FROM stages").fetchone()[0] != first:
                raise Raced  # another process drew this stage meanwhile: show that one
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
            self.store.transaction(tx)
        except Raced:
            self._design = make_design(self.pool, self.design)  # drop a stale evaluator cache

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
        ids : sequence
            Item ids (as in the pool file's id column).
        labels : sequence
            Their labels (class values or their text form).
        annotator : str, optional
            Who gave the labels (default: the login name).
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
        annotator = team.check_annotator(annotator)
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
            self.parse_label(y, f" for item {i!r}{where(r)}")
            for r, (i, y) in enumerate(zip(ids, labels, strict=True))
        ]
        mine = self.annotator_labels(annotator)
        drawn = {r[0] for r in self.store.rows("SELECT DISTINCT item FROM draws")}
        leased = None
        if holder is not None:  # the items whose lease this holder has now, labeled since or not
            leased = team.held_items(self.leases(active_only=False), holder)
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
        rows : bool
            Name the rows of the input in messages (``False`` for one typed answer).
        progress : callable, optional
            Called with the number of labels written after each transaction.
        """
        batch_size = check_count(batch_size, "batch_size")
        annotator = team.check_annotator(annotator)
        self.store.require_writable("record")
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
        return dict(self.store.rows("SELECT item, MIN(stage) FROM draws GROUP BY item"))

    def _write_labels(self, chunk, stage_of, source: str, annotator: str) -> int:
        t = now()
        got: list[int] = []
        self.store.transaction(
            lambda con: got.append(
                team.write_labels_tx(
                    con,
                    chunk,
                    ids=self.pool_file.ids,
                    stage_of=stage_of,
                    source=source,
                    annotator=annotator,
                    time=t,
                )
            )
        )
        return got[0]

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
        undo): it changes the count only when that annotation is the one the item counts with,
        and it is refused when another annotator has corrected that label since (the undo would
        silently revert their correction; a correction without ``own`` is the way to overrule
        it).

        Returns
        -------
        bool
            ``False`` when the label is already the one given (nothing written).

        Raises
        ------
        ValueError
            No reason, an unknown item, an item without a label, a label outside the classes.
        SessionError
            With ``own=True``: another annotator corrected this annotator's label since.
        """
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("a correction needs a reason (--reason '…'): it is kept for audits")
        annotator = team.check_annotator(annotator)
        self.store.require_writable("relabel")
        iid = str(item_id).strip()
        it = int(self.pool_file.index_of([iid])[0])
        value = str(self.parse_label(label, f" for item {iid!r}"))
        self._check_lazy_correction(it, iid, value, annotator, own)
        done: list[bool] = []
        self.store.transaction(
            lambda con: done.append(
                team.relabel_tx(
                    con, it, iid, value, reason=reason, annotator=annotator, own=own, source=source
                )
            )
        )
        self._design = make_design(self.pool, self.design)  # drop a cached evaluator
        return done[0]

    def _check_lazy_correction(self, it: int, iid: str, value: str, annotator: str, own: bool):
        """On a lazy pool an adaptive session replays its stages from the seed (no evaluator
        state is kept), so a correction that makes a later stage draw other items would leave
        the session unusable (:func:`~.designs.with_pending`): refuse it before anything is
        written. (A correction that changes nothing, or an undo of an annotation the item does
        not count with, is not checked.)"""
        if not getattr(self.pool, "is_lazy", False) or not hasattr(self._design, "replays_with"):
            return
        row = self.store.rows("SELECT label, annotator FROM labels WHERE item=?", (it,))
        if not row or row[0][0] == value or (own and row[0][1] != annotator):
            return
        labels = self.label_map()
        labels[it] = value
        stage = make_design(self.pool, self.design).replays_with(self, labels)
        if stage is not None:
            raise SessionError(
                f"item {iid!r}: with label {value!r} stage {stage} would draw other items than it "
                "did, and a session on a lazy pool cannot replay that yet (it keeps no evaluator "
                "state); nothing was written. A correction is possible on the same pool in "
                "memory (without --lazy), or for an item of the last stage drawn"
            )

    # -- answers ----------------------------------------------------------------------------------
    def estimates(self, stages: int | None = None) -> dict[str, Estimate]:
        """Per-model estimates from the completed stages; an adaptive design with several models
        adds the evaluator's own estimate of its target under the target's name (the difference
        ``"f1[a]-f1[b]"`` of two models, the stacked measure of more). Empty before any stage
        completes.

        ``stages``: from the first ``stages`` completed stages only (the report's estimate
        path), the estimate the session gave then — for an adaptive design the evaluator's own
        (:meth:`bayes_activeeval.ActiveEvaluator.estimate`), as `bae status` prints it.
        """
        draws, labels = self.labeled_draws()
        if len(draws) == 0:
            return {}
        done, _ = self.stage_progress()
        if stages is not None and 0 < stages < len(done):
            d = self.draws()
            upto = d.loc[d["stage"].isin(done), "stage"].to_numpy() <= done[stages - 1]
            return self._design.estimates(self, stages, draws[upto], labels[upto])
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
        done, _ = self.stage_progress()
        return self._design.current_q(self, len(done))

    def posterior(self, method: str | None = None, draws: int = 1000, **kwargs: Any):
        """The posterior of the measure on the pool (an :class:`xarray.DataTree`), from the
        contingency-table model fitted to the labeled draws of the completed stages with their
        design weights (:func:`~bayes_activeeval.posterior.contingency_posterior`,
        ``method="conjugate"`` by default) or, for the threshold-free measures (ROC AUC, average
        precision, recall at a false-positive rate), the item-level calibration posterior
        (``method="calibration"``, the only one they have); ``None`` before any stage completes,
        for regression pools, for lazy pools and for a threshold-free measure of several models
        (its label model calibrates one model's scores, which would favour that model).

        Several models: the stacked measure, one output per model.
        """
        d, labels = self.labeled_draws()
        if len(d) == 0 or self.pool.task == "regression":
            return None
        if getattr(self.pool, "is_lazy", False):  # the cell model reads every item's prediction
            return None
        rank = isinstance(get_measure(self.design.measure), RankMeasure)
        models = self.design.models
        if rank and len(models) > 1:  # its label model calibrates one model's scores
            return None
        from ..posterior import contingency_posterior

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

    def _unseen(self, model: str, labeled, est: Estimate, level: float) -> dict | None:
        """``unseen_errors`` of one model's estimate as a dict (``None`` where it does not apply:
        a multiclass or dask pool, a measure not of the confusion matrix, the difference target)."""
        measure = self.design.measure
        if model not in self.pool.models or not applies_to(self.pool, measure, model):
            return None
        u = unseen_errors(self.pool, measure, labeled, est, level=level, model=model)
        return {
            "regions": [
                {
                    "predicted": r.predicted,
                    "actual": r.actual,
                    "kind": r.kind,
                    "items": r.n_items,
                    "labeled": r.n_labeled,
                    "max_hidden": r.max_hidden,
                    "value": float(r.values[0]),
                    "joint_hidden": r.joint_hidden,
                }
                for r in u.regions
            ],
            "value": float(u.values[0]),
        }

    def status(self, level: float = 0.95) -> dict[str, Any]:
        """A summary: labels, stages, budget, pending items and the estimates with intervals."""
        level = check_level(level)
        with self.store.reading():  # one state of the file, while others write
            return self._status(level)

    def _status(self, level: float) -> dict[str, Any]:
        done, _ = self.stage_progress()
        rows = []
        ests = self.estimates()
        labeled = np.unique(self.labeled_draws()[0].indices) if ests else None
        for name, est in ests.items():
            low, high = est.confidence_interval(level)
            rows.append(
                {
                    "model": name,
                    "estimate": est.value,
                    "stderr": est.stderr,
                    "low": low,
                    "high": high,
                    "draws": est.n_draws,
                    "unseen": self._unseen(name, labeled, est, level),
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
            "annotators": team.annotator_counts(self.annotations()),
            "corrections": self.n_corrections(),
            "leased": len(self.leases()),
            "agreement": team.agreement_json(self.agreement()),
            "rule": "first label of each item, or its latest correction (bae relabel)",
        }
