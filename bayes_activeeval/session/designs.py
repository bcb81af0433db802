"""How a session chooses its items: the :class:`Design` record and the two strategies behind it.

The strategies are the seam between the session and the sampling: ``propose`` draws a new stage,
``current_q`` is the proposal the next stage would draw from, ``estimates`` the per-model
estimates from the completed stages. :class:`StaticDesign` is the optimal proposal under the
plug-in belief (Sawade (2012), Algorithm 2); :class:`AdaptiveDesign` runs
:class:`~bayes_activeeval.ActiveEvaluator` (Marchant & Rubinstein (2021), Algorithm 1) and is
rebuilt from the session's stored draws, snapshots and labels, so it is a deterministic function of
``(seed, labels so far)`` whatever crashed when.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._validation import check_budget
from ..estimators import Estimate, UndefinedEstimateWarning, estimate
from ..io import label_codec
from ..kernel import resolve_defences
from ..measures import difference, stack
from ..measures import get as get_measure
from ..proposals import DEFAULT_BELIEF_FLOOR, Draws, Proposal, optimal_proposal
from .store import SessionError, first_new


def stage_rng(seed: int, stage: int) -> np.random.Generator:
    """The random generator of stage ``stage``: ``default_rng(SeedSequence([seed, stage]))``.

    Independent streams per stage (SPEC 7), so a stage's draws do not depend on how many random
    numbers earlier stages consumed.

    Parameters
    ----------
    seed : int
        The design's seed (``Design.seed``).
    stage : int
        The stage number (0 for the first stage).

    Returns
    -------
    numpy.random.Generator
        The same stream for the same ``(seed, stage)``.
    """
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(stage)]))


def budget_cut(indices: np.ndarray, costs: np.ndarray, new: np.ndarray, left: float) -> int:
    """How many leading draws fit in a cost budget: those before the first new item that does
    not fit.

    A new item (``new``: the first draw of an item not labeled yet) is charged its cost, a
    repeat nothing; the draws are kept while the cumulative charge stays within ``left``.

    Why this rule, with the session's drawing ending at that first item that does not fit
    (:meth:`StaticDesign.propose`): the draws are i.i.d. from the fixed proposal and the number
    kept, ``N``, is the number of draws before the cumulative cost first exceeds the budget
    ``B``. ``N`` depends on the costs drawn, so where costs go with losses the estimate sees
    fewer draws exactly when it sees dear (say, wrong) items; alone that biases the
    self-normalized estimate by about ``+Cov_p(c, ℓ)/B`` (first order in ``1/B``; renewal
    theory). Dropping the draw that crosses the budget compensates: the crossing draw is a
    size-biased pick (dear items cross more often), and leaving it out shifts the sum
    ``Σ v_i (ℓ_i − R)`` by ``−E_q[c v (ℓ − R)]/E_q[c] = −Cov_p(c, ℓ)/E_q[c]``, i.e. the
    estimate by ``−Cov_p(c, ℓ)/B``. The two cancel; the estimate keeps only the ratio bias a
    fixed number of draws has too. The alternatives measured worse (300-item pool, costs 1 and
    4 following the error, ``q = p``, budget 40, 6,000 runs each, bias of the estimate;
    ``benchmarks/results/session_cost_cut.md``): this rule ``−0.003 ± 0.002``; stopping
    *before* a draw once the budget left is below the dearest label (a stopping time with an
    unbiased sum, but the same ``+Cov/B`` from ``N``) ``+0.016 ± 0.002``; this cut with the
    session drawing on past it in a new stage (the rule before) ``−0.018 ± 0.002``; keeping the
    crossing draw (over-spending) ``+0.015 ± 0.002``, ``+Cov/B`` too (``Cov_p(c, ℓ)/B =
    0.019``). At budget 120 the four are ``+0.0004``, ``+0.0063``, ``−0.0042``, ``+0.0060``
    (each ``± 0.0009``; ``Cov_p(c, ℓ)/B = 0.006``). The first-order term vanishes where cost
    and loss are uncorrelated under ``p``.

    Parameters
    ----------
    indices : numpy.ndarray (k,)
        The draws (pool indices) in draw order.
    costs : numpy.ndarray (n_items,)
        Label cost of every item.
    new : numpy.ndarray of bool (k,)
        Whether each draw is the first draw of an item not labeled yet.
    left : float
        Budget left before the first draw.

    Returns
    -------
    int
        Number of leading draws kept (``len(indices)`` when all fit).
    """
    charge = np.where(new, np.asarray(costs, dtype=float)[indices], 0.0)
    return int(np.searchsorted(np.cumsum(charge), left, side="right"))


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
    oracle : str, optional
        The oracle model (``"model"`` = the evaluated model's own probabilities; adaptive designs
        accept every name :func:`~bayes_activeeval.oracles.make_oracle` knows). Default: ``"model"``
        for a static design; for an adaptive one the :class:`~bayes_activeeval.ActiveEvaluator`
        default, :func:`~bayes_activeeval.adaptive.default_oracle` (``"auto"`` on a binary
        pool), which :meth:`Session.create` writes into the design, so a session keeps its oracle.
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
        Defensive mixing weight δ and belief floor of the optimal proposal. ``belief_floor``
        defaults to ``"auto"`` (:func:`~bayes_activeeval.kernel.scaled_belief_floor`, as
        :func:`~bayes_activeeval.optimal_proposal`); the comparison and adaptive designs take
        ``1e-6`` for ``"auto"``. ``mix`` defaults to ``None``, resolved and stored by
        :meth:`Session.create` (:func:`resolve_design_defences`).
    defensive_floor : float, optional
        Defensive floor ``λ`` of a static design's optimal proposal (``q ← max(q, λ p)/Z``;
        :func:`~bayes_activeeval.kernel.floor_proposal`). Default ``None``, resolved and stored
        by :meth:`Session.create`; a session file written before the option existed has none
        and keeps its mixture.
    options : dict
        Extra keyword arguments for the adaptive evaluator, and ``variance`` (``"martingale"``,
        the default, or ``"clt"``, which needs ``estimator="ipw"``) for its standard error
        (:meth:`bayes_activeeval.ActiveEvaluator.estimate`). The martingale form is the default
        because the CLT plug-in under-covered badly in our runs (95% Wald coverage 0.53 against
        0.88 for the martingale form, 40 runs of ``examples/static_vs_adaptive_f1.py``).
    """

    measure: str
    kind: str = "static"
    oracle: str | None = None
    seed: int = 0
    budget: float | None = None
    models: tuple[str, ...] = ()
    mix: float | None = None
    belief_floor: float | str = "auto"
    options: dict = field(default_factory=dict)
    defensive_floor: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("static", "adaptive"):
            raise ValueError(f"design must be 'static' or 'adaptive', got {self.kind!r}")
        get_measure(self.measure)  # raises for an unknown measure
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise TypeError(f"seed (--seed) must be an integer, got {self.seed!r}")
        if self.seed < 0:  # numpy's SeedSequence takes no negative seed
            raise ValueError(f"seed (--seed) must be a non-negative integer, got {self.seed!r}")
        if self.budget is not None:
            check_budget(self.budget, "budget (--budget)")
        if self.kind == "adaptive" and self.options.get("variance") == "clt":
            from ..adaptive.evaluator import default_estimator

            est = self.options.get("estimator") or default_estimator(get_measure(self.measure))
            if est != "ipw":
                raise ValueError(
                    f"options variance='clt' needs estimator='ipw' (the CLT plug-in of the AIS "
                    f"estimate, Marchant & Rubinstein (2021), Thm. 2); the {est!r} estimate has "
                    "only the martingale variance"
                )
        object.__setattr__(self, "models", tuple(self.models))
        if self.kind == "static" and self.oracle is None:
            object.__setattr__(self, "oracle", "model")
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


def resolve_design_defences(design: Design, models: tuple[str, ...]) -> tuple[float, float]:
    """``(mix, defensive_floor)`` of a design, its ``None`` resolved by
    :func:`~bayes_activeeval.kernel.resolve_defences`: a static design of one model and a
    generalized measure takes :func:`~bayes_activeeval.optimal_proposal`'s default (the
    defensive floor, no mixture, unless a mixture is given); every other design keeps the
    mixture (the sessions' default before the defensive floor)."""
    from ..threshold_free import rank_measure

    static_one = design.kind == "static" and len(models) <= 1
    return resolve_defences(
        design.mix,
        design.defensive_floor,
        keeps_mixture=not (static_one and rank_measure(design.measure) is None),
    )


def fixed_floor(design: Design) -> float:
    """The design's belief floor as a number (``"auto"`` → the fixed default ``1e-6``)."""
    if isinstance(design.belief_floor, str):
        return DEFAULT_BELIEF_FLOOR
    return design.belief_floor


class StaticDesign:
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
                from ..comparison import comparison_proposal

                self._proposal = comparison_proposal(
                    self.pool,
                    d.measure,
                    d.models,
                    mix=resolve_design_defences(d, d.models)[0],
                    belief_floor=fixed_floor(d),
                )
            else:  # None: optimal_proposal's default (a legacy file has a mix and no floor)
                self._proposal = optimal_proposal(
                    self.pool,
                    d.measure,
                    model=_single_model(d),
                    mix=d.mix,
                    belief_floor=d.belief_floor,
                    defensive_floor=d.defensive_floor,
                )
        return self._proposal

    def propose(self, session, stage: int, n: int, left: float | None):
        """``(draws, info, snapshot)`` of a new stage, cut at the cost budget left.

        With label costs and a budget, the stage keeps its draws while the cumulative cost of
        its new items fits in the budget left (:func:`budget_cut`); the first draw that does not
        fit, and every later one, is dropped, and that ends the session's drawing: no later
        stage is drawn (the rest of the budget, less than that label, stays unspent and
        ``budget_left`` reports it). Why this rule and not another is in :func:`budget_cut`.

        Parameters
        ----------
        session : Session
            Gives the labeled items (``label_map``) and the stored stages (``stage_rows``).
        stage : int
            The stage number (its generator is :func:`stage_rng`).
        n : int
            Distinct items to draw (``Proposal.draw(n, unique=True)``) before the cut.
        left : float or None
            Budget not yet spent or committed to pending items (``None``: unlimited).

        Returns
        -------
        tuple
            ``(draws, info, None)``: the kept draws, how they were drawn (stored with the stage;
            ``budget_cut`` when the budget cut it) and no evaluator snapshot.

        Raises
        ------
        SessionError
            If an earlier stage was cut at the budget, or the first new item drawn does not fit.
        """
        info: dict[str, Any] = {"seed_sequence": [int(self.design.seed), int(stage)], "n": n}
        costs = self.pool.costs
        budgeted = left is not None and costs is not None
        if budgeted:
            cut_at = self._cut_stage(session)
            if cut_at is not None:
                raise SessionError(
                    f"the budget is reached: stage {cut_at} was cut at a label that did not fit "
                    f"in it; the {left:g} left stays unspent (drawing on past that label would "
                    "favour the cheap items)"
                )
        draws = self.proposal.draw(n, rng=stage_rng(self.design.seed, stage), unique=True)
        if budgeted:
            # items of pending stages are charged already (``left`` has their cost): over the
            # whole sequence of draws, an item is charged at its first draw
            known = set(session.label_map()) | set(session.pending_items().tolist())
            new = first_new(draws.indices, known)
            keep = budget_cut(draws.indices, costs, new, left)
            if keep < draws.indices.size:
                if not new[:keep].any():  # only repeats before the label that does not fit
                    raise SessionError(
                        f"the budget is reached: the budget left ({left:g}) is below the cost "
                        "of the next item drawn; it stays unspent"
                    )
                draws = draws[:keep]
                info["budget_cut"] = True  # a cut stage has new items: the session stores it
        return draws, info, None

    def _cut_stage(self, session) -> int | None:
        """The stored stage cut at the budget, if any: marked ``budget_cut``, or, in a session
        written before the mark existed, with fewer distinct items than it asked for (an uncut
        static stage has exactly ``n``)."""
        for s, (n_req, items, info) in enumerate(session.stage_rows()):
            if info.get("budget_cut") or np.unique(items).size < n_req:
                return s
        return None

    def current_q(self, session, n_done: int) -> np.ndarray:
        return self.proposal.q

    def estimates(self, session, n_done: int, draws: Draws, labels) -> dict[str, Estimate]:
        return per_model_estimates(self.pool, self.design, draws, labels)


class AdaptiveDesign:
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
            from ..adaptive import ActiveEvaluator  # noqa: F401
        except ImportError as exc:  # pragma: no cover - the adaptive module ships with bae
            raise SessionError(
                "design 'adaptive' needs bayes_activeeval.ActiveEvaluator; use --design static"
            ) from exc
        self.pool, self.design = pool, design
        self._codec = label_codec(pool)
        self._cache: tuple[int, Any] | None = None
        if validate:
            self._fresh()  # bad options fail now, before a session is written

    def _fresh(self):
        from ..adaptive import ActiveEvaluator

        opts = {k: v for k, v in self.design.options.items() if k != "variance"}
        opts.setdefault("estimator", "ipw")  # a session written before the option existed
        opts.setdefault("relative_floor", 0.0)  # likewise
        return ActiveEvaluator(
            self.pool,
            _target_measure(self.design),
            oracle=self.design.oracle,
            model=_single_model(self.design),
            rng=self.design.seed,
            mix=resolve_design_defences(self.design, self.design.models)[0],
            belief_floor=fixed_floor(self.design),
            **opts,
        )

    def _load(self, blob: bytes):
        from ..adaptive import ActiveEvaluator

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
        key = (n_done, session.n_corrections())
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        snap = session.snapshot(max_stage=n_done)
        if snap is None:
            ev, start = self._fresh(), 0
        else:
            start, blob = snap
            ev = self._load(blob)
        stages = session.stage_rows()
        corrected = key[1] > 0
        known = session.label_map()
        for s in range(start, n_done):
            n_req, items, info = stages[s]
            if not _query_as_stored(ev, n_req, items, info):
                if not corrected:
                    raise SessionError(
                        f"replaying stage {s} drew other items than the session recorded; the "
                        "library version or the pool changed since the session was created"
                    )
                ev = with_pending(ev, session.stage_draws(s), self.pool)
            self._label_stage(ev, items, known)
        self._cache = (key, ev)
        return ev

    def _label_stage(self, ev, items: np.ndarray, labels: dict[int, str]) -> bool:
        """``update`` the evaluator with the labels of a replayed stage's new items; ``False``
        (nothing done) when some of them have no label yet (the open stage)."""
        labeled = _labeled_items(ev)
        new = [int(i) for i in dict.fromkeys(items.tolist()) if i not in labeled]
        if any(i not in labels for i in new):
            return False
        ev.update(np.asarray(new, dtype=np.int64), [self._codec(labels[i]) for i in new])
        return True

    def replays_with(self, session, labels: dict[int, str]) -> int | None:
        """The first drawn stage whose query draws other items than the session stored when the
        stages are replayed from the seed with ``labels`` (``{pool index: label}``, as
        :meth:`Session.label_map`), or ``None`` when every stage replays. A session on a lazy
        pool keeps no evaluator state, so it can only continue where this is ``None``
        (:func:`with_pending`); :meth:`Session.relabel` asks before it writes a correction.
        """
        ev = self._fresh()
        for s, (n_req, items, info) in enumerate(session.stage_rows()):
            if not _query_as_stored(ev, n_req, items, info):
                return s
            if not self._label_stage(ev, items, labels):  # the open stage
                break
        return None

    def propose(self, session, stage: int, n: int, left: float | None):
        ev = self.evaluator(session, stage)
        self._cache = None  # query() advances it
        # a lazy evaluator keeps no saved state: it is replayed from the seed instead
        snapshot = None if getattr(self.pool, "is_lazy", False) else self._dump(ev)
        avail = ev.available()
        if avail == 0:
            raise SessionError("no unlabeled item has positive probability; nothing to label")
        n = min(n, avail)
        max_cost = left if (left is not None and self.pool.costs is not None) else None
        ev.query(n, max_cost=max_cost)  # the evaluator's own cost-budget cut
        draws = ev.pending_draws
        return draws, {"evaluator": "ActiveEvaluator", "n": n, "max_cost": max_cost}, snapshot

    def current_q(self, session, n_done: int) -> np.ndarray:
        return self.evaluator(session, n_done).proposal.q  # lazily: a dask array

    def estimates(self, session, n_done: int, draws: Draws, labels) -> dict[str, Estimate]:
        ev = self.evaluator(session, n_done)
        variance = self.design.options.get("variance", "martingale")
        if len(self.design.models) == 1:
            return {self.design.models[0]: ev.estimate(variance=variance)}
        out = per_model_estimates(self.pool, self.design, draws, labels)
        out[ev.measure.name] = ev.estimate(variance=variance)
        return out


def _query_as_stored(ev, n_req: int, items: np.ndarray, info: dict) -> bool:
    """Replay a stage's query (as drawn: cut at the budget); whether it drew the stored items."""
    try:
        ev.query(n_req, max_cost=info.get("max_cost"))
    except ValueError:
        return False
    return bool(np.array_equal(ev.pending_draws.indices, items))


def with_pending(ev, draws: Draws, pool):
    """The evaluator with its pending query replaced by the stored draws of a stage (same
    generator state, labels and oracle model)."""
    from ..adaptive import ActiveEvaluator

    if getattr(pool, "is_lazy", False):
        raise SessionError(
            "a corrected label changed what an adaptive stage draws; replaying it with its stored "
            "draws needs the evaluator's saved state, which a lazy pool does not keep yet"
        )
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


def _labeled_items(ev) -> set[int]:
    """The items with a label: the evaluator's ``known`` is a mask in memory and the sorted
    labeled indices on a lazy pool."""
    known = np.asarray(ev.known)
    return set((np.flatnonzero(known) if known.dtype == bool else known).tolist())


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
    """Each evaluated model's estimate of the design's measure from the same labeled draws.

    :func:`~bayes_activeeval.estimate` with its defaults (deterministic oracle, importance-weighted
    estimate), once per model of ``design.models``; :class:`UndefinedEstimateWarning` is silenced.

    Parameters
    ----------
    pool : Pool
        The session's pool.
    design : Design
        Gives the measure (``design.measure``) and the models (``design.models``).
    draws : Draws
        The labeled draws.
    labels : array-like (len(draws),) or mapping
        The label of each draw, aligned with ``draws.indices``, or ``{item: label}`` covering
        every drawn item.

    Returns
    -------
    dict of str to Estimate
        One estimate per model, in the order of ``design.models``.
    """
    out: dict[str, Estimate] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedEstimateWarning)
        for m in design.models:
            out[m] = estimate(pool, design.measure, draws, labels, model=m)
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


def make_design(pool, design: Design, validate: bool = False):
    if design.kind == "static":
        return StaticDesign(pool, design)
    return AdaptiveDesign(pool, design, validate=validate)
