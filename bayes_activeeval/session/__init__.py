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

Layout: :mod:`.store` (the SQLite schema, connections, format-1 migration, file safety checks,
transactions), :mod:`.designs` (:class:`Design`, :func:`stage_rng`, the static and adaptive
strategies), :mod:`.annotations` (annotators, leases, corrections, agreement), :mod:`.records`
(what the file holds, read back: the base of :class:`Session`) and :mod:`.core` (the
:class:`Session` workflow). Imports go one way: store, then designs and annotations, then records,
then core.
"""

from .annotations import DEFAULT_LEASE, default_annotator
from .core import DELAY_ENV, RecordResult, Session
from .designs import Design, per_model_estimates, stage_rng
from .store import LEGACY_ANNOTATOR, SCHEMA_VERSION, SessionError

__all__ = [
    "DEFAULT_LEASE",
    "DELAY_ENV",
    "LEGACY_ANNOTATOR",
    "SCHEMA_VERSION",
    "Design",
    "RecordResult",
    "Session",
    "SessionError",
    "default_annotator",
    "per_model_estimates",
    "stage_rng",
]
