"""``ActiveEvaluator``: the query → label → update loop (Marchant & Rubinstein (2021), Algorithm 1)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from .._validation import (
    ONE_LABEL,
    check_budget,
    check_count,
    check_fraction,
    check_items,
    check_rng,
    distinct_labels,
)
from ..beliefs import Belief, CategoricalBelief, pool_belief
from ..estimators import Estimate, difference_estimate, weighted_estimate
from ..kernel import DEFAULT_BELIEF_FLOOR, intrinsic_risk
from ..measures import Measure
from ..oracles.base import OracleModel, make_oracle
from ..proposals import Draws, Proposal
from ..threshold_free import (
    RankMeasure,
    measure_models,
    model_scores,
    positive_probs,
    rank_estimate_arrays,
)
from .proposal import DEFAULT_EPSILON, RELATIVE_FLOOR, adaptive_proposal, epsilon_schedule
from .state import EvaluatorState

#: Default oracle model of ``ActiveEvaluator`` (and of the sessions' adaptive designs) on an
#: in-memory binary pool: the prequential stacking of the plug-in, calibration and Dirichlet-tree
#: beliefs, chosen by the labels (docs/adaptive.md has the measured table). Lazy pools use the
#: calibration model, multiclass pools the plug-in ``"model"``.
DEFAULT_ORACLE = "auto"
#: Default growth of the stages in ``run``: a stage buys max(batch_size, 10 % of the labels so far).
DEFAULT_STAGE_GROWTH = 0.1
#: Default defensive mixture of the model-assisted estimate: every weight ``p/q`` is at most
#: ``1/δ = 10``. One draw of an item the belief was sure of (``q`` at the ε floor, weight 100)
#: moved a 2,000-label F1 estimate by 0.2 on ``febrl3_given_name_lr`` with ``δ = 0``.
DEFAULT_MIX_MODEL_ASSISTED = 0.1
#: Default estimator of ``ActiveEvaluator``: the model-assisted (difference) estimate with each
#: stage's belief as control variate (``"ipw"``, Marchant & Rubinstein's AIS estimate, for the
#: threshold-free measures and on lazy pools).
DEFAULT_ESTIMATOR = "model_assisted"
#: Give up on a query when the expected number of draws to find the requested new items exceeds
#: this (the proposal has almost no mass left on unlabeled items).
MAX_DRAWS_PER_QUERY = 10_000_000


def draw_count(need: int, mass: float) -> int:
    """Draws to make for ``need`` new items when the unlabeled items hold ``mass`` of ``q``: 20%
    more than expected, plus 16. The ``1e-9`` keeps the count from depending on the last bits of
    ``mass`` (a sum over the pool, whose rounding differs between in-memory and chunked sums)."""
    return int(min(math.ceil(need / mass * 1.2 - 1e-9) + 16, MAX_DRAWS_PER_QUERY))


def cost_cut(take, item_costs, spent, max_cost):
    """Cut a batch of new items at a cost budget: ``(take, cut, spent)``.

    ``take`` are the positions (in the draws) of the batch's new items in draw order and
    ``item_costs`` their costs; ``spent`` is what the query's earlier batches cost. The item
    whose cost crosses ``max_cost`` is kept (as :meth:`ActiveEvaluator.run`'s last stage): the
    query stops *after* a draw, on what was spent, never by dropping a drawn item because of its
    own cost, which would bias the sample. ``cut`` is ``None`` while the budget is not reached,
    else the number of draws to keep (the query then ends with this batch); ``spent`` includes
    the items kept."""
    cum = spent + np.cumsum(item_costs)
    stop = int(np.searchsorted(cum, max_cost, side="left"))
    if stop >= take.size:
        return take, None, float(cum[-1])
    return take[: stop + 1], int(take[stop]) + 1, float(cum[stop])


def default_oracle(pool) -> str:
    """The oracle name :class:`ActiveEvaluator` uses by default on ``pool``: ``DEFAULT_ORACLE``
    (``"auto"``) on an in-memory binary pool with a positive class, ``"calibration"`` on such a
    pool on dask, the plug-in ``"model"`` otherwise (the calibration model is binary only).

    Parameters
    ----------
    pool : Pool or LazyPool
        The pool to evaluate; only its ``task``, ``pos`` and ``is_lazy`` (whether it is on dask)
        are read.

    Returns
    -------
    str
        An oracle name for :func:`~bayes_activeeval.oracles.make_oracle`.
    """
    if pool.task == "binary" and pool.pos is not None:
        return "calibration" if getattr(pool, "is_lazy", False) else DEFAULT_ORACLE
    return "model"


def default_estimator(measure) -> str:
    """The estimator :class:`ActiveEvaluator` uses by default for ``measure``: ``DEFAULT_ESTIMATOR``
    (``"model_assisted"``), or ``"ipw"`` for the threshold-free measures (ROC AUC, AP, …).

    Parameters
    ----------
    measure : Measure or RankMeasure
        The resolved measure (as returned by ``pool.resolve``, not a name): ``"ipw"`` when it is
        a :class:`~bayes_activeeval.threshold_free.RankMeasure`.

    Returns
    -------
    str
        ``"model_assisted"`` or ``"ipw"``.
    """
    return "ipw" if isinstance(measure, RankMeasure) else DEFAULT_ESTIMATOR


def default_relative_floor(estimator: str) -> float:
    """The ``relative_floor`` :class:`ActiveEvaluator` uses by default with ``estimator``:
    :data:`~bayes_activeeval.adaptive.RELATIVE_FLOOR` for ``"model_assisted"``, 0 for ``"ipw"``
    (which does not take one).

    Parameters
    ----------
    estimator : str
        The estimator name, ``"model_assisted"`` or ``"ipw"``; any other value gets 0 too.

    Returns
    -------
    float
        The default ``relative_floor``.
    """
    return RELATIVE_FLOOR if estimator == "model_assisted" else 0.0


class ActiveEvaluator(EvaluatorState):
    """Adaptive importance-sampling evaluation with a Bayesian oracle model.

    Implements Marchant & Rubinstein (2021), Algorithm 1: stages of i.i.d. draws from the current
    proposal, the practical proposals of Prop. 2 with the ε schedules of Props. 3 (deterministic
    oracle) and 5 (stochastic oracle), a label cache, the self-normalized AIS estimate and the CLT
    variance of Sec. 3.3.2 (Wald intervals).

    Parameters
    ----------
    pool : Pool
        A classification pool.
    measure : str or Measure
        Any measure, including one bound to two models (:func:`~bayes_activeeval.measures.difference`).
    oracle : str or OracleModel
        The oracle model giving ``π_t(y|x)``: ``"auto"`` (the prequential stacking of the
        plug-in, calibration and Dirichlet-tree beliefs, chosen by the labels as they arrive,
        :class:`~bayes_activeeval.oracles.EnsembleOracle`), ``"calibration"`` (a Bayesian
        recalibration of the model's scores, :class:`~bayes_activeeval.oracles.CalibrationOracle`),
        ``"model"`` (the plug-in: the model's own probabilities), ``"dirichlet-tree"``, … (see
        :func:`~bayes_activeeval.oracles.make_oracle`) or an instance. Default (``None``):
        ``"auto"`` on a binary pool, ``"model"`` on a multiclass one (:func:`default_oracle`).
        With the default model-assisted estimator the belief moves only the variance, never the
        mean; the measured table on real pools is in ``docs/adaptive.md``.
    model : str, optional
        Which model, for a pool with several and an unbound measure.
    deterministic : bool
        ``True``: the oracle gives each item one fixed label; labels are cached and a repeated draw
        is free (but enters the estimate). ``False``: every draw gets a fresh (noisy) label.
    epsilon : float
        ``ε_0 >= 0``, the floor of Prop. 2 in units of the mean integrand (default 0.01).
    mix : float, optional
        Defensive mixture weight ``δ`` with ``p`` on the unlabeled items. Default: 0.1 with the
        model-assisted estimate (every weight ``p/q ≤ 10``; Hesterberg's defensive mixture
        bounds the variance by ``1/δ`` times passive sampling's), 0 with ``"ipw"`` (as
        Marchant's "Ours").
    batch_size : int
        Labels per stage in :meth:`run` (default 50, as in the paper's experiments).
    rng : None, int or numpy.random.Generator
        Source of randomness; the evaluator owns it (its state is saved by :meth:`get_state`).
    oracle_options : dict, optional
        Keyword arguments for the oracle model.
    belief_floor : float
        Lower bound on unlabeled items' belief class probabilities (default ``1e-6``). For ROC
        AUC, AP and recall@FPR the cap of the scaled floor the static proposal uses
        (:func:`~bayes_activeeval.threshold_free.scaled_rank_floor`; each stage's value is in
        ``proposal.info["belief_floor"]``).
    relative_floor : float, optional
        With the model-assisted estimate, each unlabeled item's class probabilities are also
        floored at this fraction of the belief's own pool rate of the rarer class before the
        proposal and the control variate are computed (default
        :data:`~bayes_activeeval.adaptive.RELATIVE_FLOOR` = 0.03; 0 with ``"ipw"``, which does
        not take it): a fitted belief that is sure the lowest scores hold no positive still
        sends them draws in proportion to the base rate
        (:func:`~bayes_activeeval.adaptive.model_assisted_proposal`). A restored evaluator keeps
        its own (0 for one saved before the option existed).
    estimator : {None, "model_assisted", "ipw"}
        ``"model_assisted"`` (the default for every measure but the threshold-free ones): the
        difference estimate that uses each stage's belief as a control variate
        (:func:`~bayes_activeeval.estimators.difference_estimate`), with the proposal made for it
        (:func:`~bayes_activeeval.adaptive.model_assisted_proposal`): items whose label is known
        add no variance and get no draws, uncertain items get the draws. ``"ipw"``: Marchant &
        Rubinstein's AIS estimate with the proposal of Prop. 2 (the default before 0.x, and for
        ROC AUC, AP and recall@FPR).
    stage_growth : float
        In :meth:`run`, a stage has ``max(batch_size, stage_growth × labels so far)`` labels
        (default 0.1): the belief moves by ``O(1/n)`` per label, so refreshing it once the labels
        have grown by 10 % keeps the proposal as good at ``O(log n)`` instead of ``O(n)`` stages
        (Algorithm 1 allows any stage sizes; Thms. 1-2 do not depend on them). ``0``: fixed
        stages of ``batch_size``, as in the paper's experiments.

    Examples
    --------
    >>> import bayes_activeeval as bae
    >>> from bayes_activeeval.datasets import make_classification_pool
    >>> data = make_classification_pool(20_000, 0.01, rng=0)
    >>> ev = bae.ActiveEvaluator(data.pool, "f1", rng=0)
    >>> idx = ev.query(50)
    >>> ev.update(idx, data.labeler(idx))
    >>> est = ev.run(data.labeler, budget=300, progress=False)
    >>> est.n_labels
    300
    """

    def __new__(cls, pool=None, *args: Any, **kwargs: Any):
        # a pool on dask gets the evaluator that works in cell-level sufficient statistics
        if cls is ActiveEvaluator and getattr(pool, "is_lazy", False):
            from .lazy import LazyActiveEvaluator

            return super().__new__(LazyActiveEvaluator)
        return super().__new__(cls)

    def __init__(
        self,
        pool,
        measure: str | Measure,
        *,
        oracle: str | OracleModel | None = None,
        model: str | None = None,
        deterministic: bool = True,
        epsilon: float = DEFAULT_EPSILON,
        mix: float | None = None,
        batch_size: int = 50,
        rng: Any = None,
        oracle_options: dict[str, Any] | None = None,
        belief_floor: float = DEFAULT_BELIEF_FLOOR,
        stage_growth: float = DEFAULT_STAGE_GROWTH,
        estimator: str | None = None,
        relative_floor: float | None = None,
        _restore: dict[str, Any] | None = None,
    ) -> None:
        if pool.task == "regression":
            raise ValueError(
                "ActiveEvaluator needs a classification pool (oracle models give class "
                "probabilities); for regression use optimal_proposal with a GaussianBelief"
            )
        if not isinstance(deterministic, (bool, np.bool_)):
            raise TypeError(f"deterministic must be True or False, got {deterministic!r}")
        eps = float(epsilon) if isinstance(epsilon, (int, float, np.number)) else None
        if eps is None or not np.isfinite(eps) or eps < 0:
            raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
        self.pool = pool
        self.measure, self._views = pool.resolve(measure, model)
        self._measure_arg = measure
        self.model = model
        self.deterministic = bool(deterministic)
        self.epsilon0 = eps
        if estimator is None:
            estimator = default_estimator(self.measure)
        if mix is None:  # bounds every weight p/q by 1/δ = 10 under the default estimate
            mix = DEFAULT_MIX_MODEL_ASSISTED if estimator == "model_assisted" else 0.0
        self.mix = check_fraction(mix, "mix", allow_one=True)
        self.batch_size = check_count(batch_size, "batch_size")
        sg = float(stage_growth) if isinstance(stage_growth, (int, float, np.number)) else None
        if sg is None or not np.isfinite(sg) or sg < 0:
            raise ValueError(f"stage_growth must be a finite number >= 0, got {stage_growth!r}")
        self.stage_growth = sg
        self.belief_floor = check_fraction(belief_floor, "belief_floor")
        if estimator not in ("ipw", "model_assisted"):
            raise ValueError(f"estimator must be 'ipw' or 'model_assisted', got {estimator!r}")
        if estimator == "model_assisted" and isinstance(self.measure, RankMeasure):
            raise ValueError(
                f"estimator='model_assisted' is not available for {self.measure.name!r}; "
                "use estimator='ipw'"
            )
        self.estimator = estimator
        if relative_floor is None:
            relative_floor = default_relative_floor(estimator)
        self.relative_floor = check_fraction(relative_floor, "relative_floor")
        if self.relative_floor and estimator != "model_assisted":
            raise ValueError(
                f"relative_floor={relative_floor!r} applies to estimator='model_assisted' only"
            )
        self.rng = check_rng(rng)
        if oracle_options is not None and not isinstance(oracle_options, dict):
            raise TypeError(f"oracle_options must be a dict, got {type(oracle_options).__name__}")
        self.oracle_options = dict(oracle_options or {})
        if oracle is None:
            oracle = default_oracle(pool)
        if isinstance(oracle, OracleModel):
            if self.oracle_options:
                raise TypeError("oracle_options are only accepted with an oracle name")
            if bool(oracle.deterministic) != self.deterministic:
                raise ValueError(
                    f"oracle.deterministic={oracle.deterministic!r} but "
                    f"deterministic={self.deterministic!r}"
                )
            self.oracle = oracle
            self._oracle_name = None
        elif isinstance(oracle, str):
            opts = {"deterministic": self.deterministic, **self.oracle_options}
            self.oracle = make_oracle(oracle, **opts)
            self._oracle_name = oracle
        else:
            raise TypeError(f"oracle must be a name or an OracleModel, got {type(oracle).__name__}")
        if self.measure.models is None:
            self.oracle.initialize(pool, model)
        else:
            try:  # the oracle may combine the models (the plug-in takes their mixture) ...
                self.oracle.initialize(pool, None)
            except ValueError:  # ... or need one model's scores: take the first
                self.oracle.initialize(pool, self.measure.models[0])

        M = pool.n_items
        self._costs = pool.costs
        self._label = np.full(M, -1, dtype=np.int64)  # label cache (deterministic oracle)
        self._requested = np.zeros(M, dtype=bool)  # returned by query, label not yet given
        self._stage = 0
        self._n_labels = 0
        self._cost = 0.0
        # labeled draws, chronological
        self._d_idx: list[np.ndarray] = []
        self._d_w: list[np.ndarray] = []
        self._d_q: list[np.ndarray] = []
        self._d_y: list[np.ndarray] = []
        self._d_stage: list[np.ndarray] = []
        self._d_loss: list[np.ndarray] = []
        # model-assisted estimate: each draw's m_t(x) and its stage's M_t (control variate)
        self._d_m: list[np.ndarray] = []
        self._d_M: list[np.ndarray] = []
        self._d_V: list[np.ndarray] = []
        # the anticipated variance's cache (_model_expectations): the measure under the models'
        # own probabilities, the draws it was computed for and their expected loss under them
        self._model_value: np.ndarray | None = None
        # the rank guard's belief on the pool and how many labeled items it was fitted to (labels
        # only accumulate, so the count names the set)
        self._guard: tuple[int, np.ndarray] | None = None
        self._model_idx = np.empty(0, dtype=np.int64)
        self._model_mean = np.zeros((0, self.measure.dim))
        self._pending = self._empty_pending()
        self._history: list[dict[str, Any]] = []
        self._epsilon_t = 0.0
        if _restore is None:
            self._refresh()
        else:
            self._restore(_restore)

    # -- bookkeeping -----------------------------------------------------------------------------
    @staticmethod
    def _empty_pending() -> dict[str, np.ndarray]:
        return {
            "idx": np.empty(0, dtype=np.int64),
            "w": np.empty(0),
            "q": np.empty(0),
            "y": np.empty(0, dtype=np.int64),
            "new": np.empty(0, dtype=bool),
        }

    @property
    def n_labels(self) -> int:
        """Labels bought so far (distinct items under a deterministic oracle)."""
        return self._n_labels

    @property
    def cost(self) -> float:
        """Label cost spent so far (equals :attr:`n_labels` when the pool has no costs)."""
        return self._cost if self._costs is not None else float(self._n_labels)

    @property
    def n_draws(self) -> int:
        """Labeled draws entering the estimate (repeats included)."""
        return int(sum(a.size for a in self._d_idx))

    @property
    def stage(self) -> int:
        """Completed stages ``t``."""
        return self._stage

    @property
    def epsilon(self) -> float:
        """The floor ``ε_t`` of the current proposal (Props. 3 and 5)."""
        return self._epsilon_t

    @property
    def proposal(self) -> Proposal:
        """The current proposal ``q_t``."""
        return self._proposal

    @property
    def pending_draws(self) -> Draws:
        """The draws of the open stage (queried, not yet all labeled): indices, weights ``p/q``
        and ``q``, in draw order (copies)."""
        P = self._pending
        return Draws(
            np.asarray(P["idx"], dtype=np.int64).copy(),
            np.asarray(P["w"], dtype=float).copy(),
            np.asarray(P["q"], dtype=float).copy(),
        )

    @property
    def known(self) -> np.ndarray:
        """Boolean mask of items with a cached label (deterministic oracle)."""
        return self._label >= 0

    def _unlabeled_fraction(self, known: np.ndarray | None = None) -> float:
        if not self.deterministic:
            return 1.0
        unknown = self._label < 0 if known is None else ~known
        return float(np.clip(self.pool.p[unknown].sum(), 0.0, 1.0))

    def _refresh(self, known: np.ndarray | None = None) -> None:
        """New belief from the oracle model, new ε_t, new proposal (Algorithm 1, 'update q_t').

        ``known`` (default :attr:`known`) is the mask of labeled items the proposal is built
        with; a restored evaluator passes the mask at the start of its open stage (``_restore``).
        """
        known = self.known if known is None else known
        belief = self.oracle.belief()
        if not isinstance(belief, Belief):
            belief = CategoricalBelief(np.asarray(belief, dtype=float))
        self._epsilon_t = epsilon_schedule(
            self.epsilon0,
            stage=self._stage,
            unlabeled_fraction=self._unlabeled_fraction(known),
            deterministic=self.deterministic,
        )
        self._proposal = adaptive_proposal(
            self.pool,
            self.measure,
            belief,
            model=None if self.measure.models is not None else self.model,
            epsilon=self._epsilon_t,
            deterministic=self.deterministic,
            known=known if self.deterministic else None,
            belief_floor=self.belief_floor,
            mix=self.mix,
            estimator=self.estimator,
            relative_floor=self.relative_floor,
        )

    # -- the loop ----------------------------------------------------------------------------------
    def query(self, n: int | None = None, max_cost: float | None = None) -> np.ndarray:
        """Items to label next, drawn from the current proposal ``q_t``.

        Under a deterministic oracle, draws continue until ``n`` *new* items (without a label and
        not already awaiting one) have appeared; draws of items with a cached label, or repeats,
        are free and recorded. Under a stochastic oracle ``n`` draws are made and every one needs
        its own label (indices may repeat). Every draw is recorded as pending with its ``q`` and
        weight ``p/q`` until :meth:`update` gives its label.

        Parameters
        ----------
        n : int, optional
            Labels wanted (default ``batch_size``).
        max_cost : float, optional
            With label costs: stop once the new items' cost reaches this (the item that crosses
            it is kept, as in :meth:`run`'s last stage).

        Returns
        -------
        ndarray of int
            Pool indices to label (in draw order).
        """
        n = self.batch_size if n is None else check_count(n, "n")
        if max_cost is not None and not (np.isfinite(max_cost) and max_cost >= 0):
            raise ValueError(f"max_cost must be a non-negative number, got {max_cost!r}")
        if max_cost is not None and self._costs is None:
            raise ValueError(
                f"max_cost={max_cost!r} needs a pool with label costs (Pool(costs=…)); this "
                "pool has none: ask for n labels instead"
            )
        return self._query(n, None if max_cost is None else float(max_cost))

    def _fresh_mask(self) -> np.ndarray:
        return (self._label < 0) & ~self._requested

    def available(self) -> int:
        """Items a query can still return (positive probability and no label)."""
        if not self.deterministic:
            return int(np.count_nonzero(self._proposal.q))
        return int(np.count_nonzero(self._fresh_mask() & (self._proposal.q > 0)))

    def _query(self, n: int, max_cost: float | None) -> np.ndarray:
        prop = self._proposal
        costs = self._costs
        if not self.deterministic:
            d = prop.draw(n, self.rng)
            idx = d.indices
            if max_cost is not None and costs is not None:
                cum = np.cumsum(costs[idx])
                cut = int(np.searchsorted(cum, max_cost, side="left")) + 1
                idx = idx[:cut]
                d = d[:cut]
            self._add_pending(d.indices, d.weights, d.q, np.full(idx.size, -1, dtype=np.int64))
            return idx.copy()
        fresh = self._fresh_mask()
        q = prop.q
        n_avail = int(np.count_nonzero(fresh & (q > 0)))
        if n > n_avail:
            raise ValueError(
                f"n={n} new labels requested but only {n_avail} unlabeled items have positive "
                "probability under the current proposal"
            )
        mass = float(q[fresh].sum())
        new_items: list[np.ndarray] = []
        need = n
        spent = 0.0
        while need > 0:
            if mass <= 0 or need / mass > MAX_DRAWS_PER_QUERY:
                raise ValueError(
                    f"the proposal has mass {mass:.3g} on unlabeled items; drawing {need} new "
                    "items would take too many draws (use epsilon > 0 or mix > 0)"
                )
            k = draw_count(need, mass)
            d = prop.draw(k, self.rng)
            ind = d.indices
            is_fresh = fresh[ind]
            pos = np.flatnonzero(is_fresh)
            _, first = np.unique(ind[pos], return_index=True)
            firstpos = np.sort(pos[first])
            take = firstpos[:need]
            cut = None
            if max_cost is not None and costs is not None and take.size:
                take, cut, spent = cost_cut(take, costs[ind[take]], spent, max_cost)
            if cut is not None:
                need = take.size  # the budget is reached: finish after this batch
            else:
                cut = int(take[-1]) + 1 if take.size >= need else ind.size
            ind_c = ind[:cut]
            new = ind[take]
            fresh[new] = False
            mass -= float(q[new].sum())
            self._requested[new] = True
            self._add_pending(ind_c, d.weights[:cut], d.q[:cut], self._label[ind_c])
            new_items.append(new)
            need -= take.size
        return np.concatenate(new_items) if new_items else np.empty(0, dtype=np.int64)

    def _add_pending(self, idx, w, q, y) -> None:
        P = self._pending
        self._pending = {
            "idx": np.concatenate([P["idx"], idx]),
            "w": np.concatenate([P["w"], w]),
            "q": np.concatenate([P["q"], q]),
            "y": np.concatenate([P["y"], np.asarray(y, dtype=np.int64)]),
            "new": np.concatenate([P["new"], np.asarray(y) < 0]),
        }

    def update(self, indices: Any, labels: Any) -> None:
        """Record labels; at the end of a stage, update the oracle model and the proposal.

        Parameters
        ----------
        indices : array-like of int
            Items returned by :meth:`query` (each pending draw under a stochastic oracle).
        labels : array-like
            Their labels, as the pool's classes (e.g. ``0/1``).

        Raises
        ------
        ValueError
            For items that were not queried, labels outside the classes, a deterministic item
            given two different labels, or mismatched lengths.

        Notes
        -----
        The stage ends when no pending draw lacks a label: the oracle model is then updated
        (deterministic: each newly labeled item once; stochastic: every draw with its weight
        ``p/q``, Marchant & Rubinstein (2021), App. H), the new belief gives ``R_t`` and the new
        proposal ``q_t`` (Prop. 2), and the estimate is appended to :attr:`history`.
        """
        idx = np.asarray(indices)
        if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
            raise ValueError(f"indices must be a 1-D array of item indices, got {indices!r}")
        idx = idx.astype(np.int64)
        y = self.pool.encode_labels(labels)
        if y.shape != idx.shape:
            raise ValueError(f"labels has {y.size} entries but indices has {idx.size}")
        check_items(idx, self.pool.n_items)
        y = y.astype(np.int64)
        P = self._pending
        if self.deterministic:
            try:  # an item with two different labels is refused, named in the pool's classes
                distinct_labels(idx, y)
            except ValueError:
                _, first, inv = np.unique(idx, return_index=True, return_inverse=True)
                j = int(np.flatnonzero(y[first][inv] != y)[0])
                a, b = self.pool.decode_labels([y[first][inv[j]], y[j]]).tolist()
                raise ValueError(
                    f"item {int(idx[j])} has two different labels ({a!r} and {b!r}){ONE_LABEL}"
                ) from None
            known = self._label[idx] >= 0
            diff = known & (self._label[idx] != y)
            if diff.any():
                i = int(idx[np.flatnonzero(diff)[0]])
                old = self.pool.decode_labels([self._label[i]]).tolist()[0]
                raise ValueError(
                    f"item {i} already has label {old!r}; a deterministic oracle gives one "
                    "label per item"
                )
            new = ~known
            not_asked = new & ~self._requested[idx]
            if not_asked.any():
                i = int(idx[np.flatnonzero(not_asked)[0]])
                raise ValueError(f"item {i} was not returned by query(); label queried items only")
            ni, first = np.unique(idx[new], return_index=True)
            ny = y[new][first]
            self._label[ni] = ny
            self._requested[ni] = False
            self._n_labels += ni.size
            if self._costs is not None:
                self._cost += float(self._costs[ni].sum())
            P["y"] = np.where(P["y"] < 0, self._label[P["idx"]], P["y"])
        else:
            open_pos: dict[int, list[int]] = {}
            for j in np.flatnonzero(P["y"] < 0).tolist():
                open_pos.setdefault(int(P["idx"][j]), []).append(j)
            filled = P["y"].copy()  # kept only if every label finds its draw (else: unchanged)
            for i, lab in zip(idx.tolist(), y.tolist(), strict=True):
                slots = open_pos.get(i)
                if not slots:
                    raise ValueError(f"item {i} has no pending draw awaiting a label")
                filled[slots.pop(0)] = lab
            P["y"] = filled
            self._n_labels += idx.size
            if self._costs is not None:
                self._cost += float(self._costs[idx].sum())
        if P["idx"].size and not np.any(P["y"] < 0):
            self._end_stage()

    def _end_stage(self) -> None:
        P = self._pending
        self._pending = self._empty_pending()
        idx, w, q, y = P["idx"], P["w"], P["q"], P["y"]
        L = self.measure.loss(y, self._views(idx))
        self._d_idx.append(idx)
        self._d_w.append(w)
        self._d_q.append(q)
        self._d_y.append(y)
        self._d_stage.append(np.full(idx.size, self._stage, dtype=np.int64))
        self._d_loss.append(L)
        if self.estimator == "model_assisted":  # the proposal the stage was drawn from
            info = self._proposal.info
            self._d_m.append(info.expected_loss[idx])
            self._d_M.append(np.broadcast_to(info.pool_expected, L.shape).copy())
            d = L.shape[1]
            self._d_V.append(
                np.broadcast_to(info.draw_cov.reshape(1, d * d), (idx.size, d * d)).copy()
            )
        if self.deterministic:
            sel = np.flatnonzero(P["new"])  # draws of items first labeled in this stage
            _, first = np.unique(idx[sel], return_index=True)
            sel = np.sort(sel[first])
            self.oracle.update(idx[sel], y[sel], w[sel])
        else:
            self.oracle.update(idx, y, w)
        self._stage += 1
        self._refresh()
        self._record()

    def _record(self) -> None:
        with np.errstate(all="ignore"):
            est = self._estimate(warn=False)
        for k, out in enumerate(est.outputs):
            self._history.append(
                {
                    "stage": self._stage,
                    "output": out,
                    "n_labels": self._n_labels,
                    "n_draws": est.n_draws,
                    "cost": self.cost,
                    "epsilon": self._epsilon_t,
                    "value": float(est.values[k]),
                    "stderr": float(est.stderrs[k]) if np.isfinite(est.cov[k, k]) else np.nan,
                }
            )

    def _guard_probs(self, idx: np.ndarray, models: tuple[str, ...]) -> np.ndarray | None:
        """``π(y = pos | x)`` at the draws for the guarded variance of a threshold-free measure:
        the Bayesian calibration of the model's scores (:func:`~bayes_activeeval.posterior.
        calibration_map`, the posterior's label model) fitted to the distinct labeled items, at
        its posterior mode and without point masses; for a stack or a difference the Bayesian
        model average of every model's calibration, so the interval does not depend on the
        order of the models — refitted from all labels when they change, so a loaded evaluator
        gives the same interval. A stochastic oracle keeps the models' own probabilities;
        ``None`` without probabilities."""
        from ..posterior.calibration import calibration_map

        known = np.flatnonzero(self._label >= 0)
        if self.deterministic and known.size:
            if self._guard is None or self._guard[0] != known.size:
                pi = calibration_map(self.pool, models, known, self._label[known])
                self._guard = (known.size, pi)
            return self._guard[1][idx]
        if self.pool.has_probs():
            return positive_probs(self.pool, None, models, 0.0)[idx]
        return None

    def _model_expectations(self, idx: np.ndarray):
        """The working model of the difference estimate's anticipated variance
        (``difference_estimate``'s ``model_expected``, ``model_value``): each draw's expected loss
        under the models' own probabilities (:func:`~bayes_activeeval.beliefs.pool_belief`) and
        the measure under them over the pool; ``(None, None)`` where the measure is not affine
        and bounded or the pool has no probabilities. Computed once per draw: the draws only
        grow, so the cache is extended while it is their prefix."""
        m = self.measure
        lo, hi = m.bounds
        if not (m.affine and np.isfinite(hi - lo) and self.pool.has_probs()):
            return None, None
        done = self._model_idx.size
        if done > idx.size or not np.array_equal(self._model_idx, idx[:done]):
            done = 0
            self._model_mean = np.zeros((0, m.dim))
        if self._model_value is None or idx.size > done:  # the pool's belief only when needed
            belief = pool_belief(self.pool, self.pool.models_of(m, self.model))
        if self._model_value is None:
            with np.errstate(all="ignore"):
                R = intrinsic_risk(self.pool, m, self._views, belief)
                self._model_value = np.asarray(m.g(R), dtype=float)
        if idx.size > done:
            new = idx[done:]
            views = self._views(new)
            mean = belief.expect(lambda y, _: m.loss(y, views), new)
            self._model_mean = np.concatenate([self._model_mean, mean])
            self._model_idx = idx.copy()
        return self._model_mean[: idx.size], self._model_value

    def _ma_arrays(self) -> dict[str, np.ndarray]:
        """The model-assisted control variates of the labeled draws (empty for ``"ipw"``)."""
        if self.estimator != "model_assisted":
            return {}
        d = self.measure.dim
        if not self._d_m:
            return {"m": np.empty((0, d)), "M": np.empty((0, d)), "V": np.empty((0, d * d))}
        return {
            "m": np.concatenate(self._d_m),
            "M": np.concatenate(self._d_M),
            "V": np.concatenate(self._d_V),
        }

    # -- results -------------------------------------------------------------------------------------
    def _arrays(self):
        if not self._d_idx:
            d = self.measure.dim
            return (np.empty(0, dtype=np.int64), np.empty(0), np.empty((0, d)), np.empty(0))
        idx = np.concatenate(self._d_idx)
        return (
            idx,
            np.concatenate(self._d_w),
            np.concatenate(self._d_loss),
            np.concatenate(self._d_q),
        )

    def estimate(self, variance: str = "martingale", bias_correction: bool = False) -> Estimate:
        """The AIS estimate with a martingale (default) or the CLT variance of Marchant &
        Rubinstein (2021), Sec. 3.3.2.

        ``Ĝ = g(Σ w_j ℓ_j / Σ w_j)`` over all labeled draws (repeats included). The default
        variance is ``Σ_j w_j² r_j r_jᵀ / (Σ w)²``, ``r_j = Dg(R̂)(ℓ_j − R̂)``; the CLT variance is
        ``Cov(Ĝ) = Σ_j w_j w_∞,j r_j r_jᵀ / (Σ w)²``,
        ``w_∞,j = p(x_j)/q_N(x_j)`` with ``q_N`` the latest proposal (non-finite ``w_∞`` set to 0,
        as the reference code does). For scale-invariant measures this equals Marchant's
        ``Dg[(1/N) Σ w w_∞ ℓℓᵀ − RRᵀ]Dgᵀ / N`` exactly.

        With the default model-assisted estimator the estimate is
        :func:`~bayes_activeeval.estimators.difference_estimate` (each draw's term
        ``φ_j = M_j + w_j(ℓ_j − m_j)`` weighted by its stage's inverse predicted variance) and its
        variance is always the martingale one.

        Parameters
        ----------
        variance : {"clt", "martingale"}
            ``"martingale"`` (default): the sum of the realized squared martingale increments,
            which estimates the variance of the draws actually made (each from its own
            ``q_{j-1}``) rather than the limit; larger when early proposals were poor.
            ``"clt"``: the plug-in for Thm. 2 (``q_∞ ≈ q_N``). It assumes the proposal has
            converged, which at a few thousand labels it has not: in
            the 114-repetition run of ``benchmarks/results/adaptive_f1.md`` (plug-in and paper's
            Dirichlet tree; git history) its 95% intervals covered 0.33-0.90, the martingale ones
            0.91-0.96. Kept for comparison with the paper. ``estimator="ipw"`` only: the
            model-assisted estimate has no ``q_∞`` form (its terms are weighted by each
            stage's own predicted variance), and asking for it raises ``ValueError``.
        bias_correction : bool
            Subtract the estimated second-order bias (Cochran (1977), Sec. 6.8). ``"ipw"``: of
            the ratio and of ``g`` (:func:`~bayes_activeeval.estimators.ratio_bias`);
            ``"model_assisted"``: of ``g`` at the estimate's own covariance of ``R̂``
            (``bias_correction`` of :func:`~bayes_activeeval.estimators.difference_estimate`).
            Default ``False``: Marchant's estimator exactly (``"ipw"``). Not available for a
            threshold-free measure (``ValueError``).

        Returns
        -------
        Estimate
        """
        if variance not in ("clt", "martingale"):
            raise ValueError(f"variance must be 'clt' or 'martingale', got {variance!r}")
        if variance == "clt" and self.estimator == "model_assisted":
            raise ValueError(
                "variance='clt' is the CLT variance of the AIS estimate (estimator='ipw'); "
                "estimator='model_assisted' has the martingale variance only: build the "
                "evaluator with estimator='ipw' for the CLT form"
            )
        if bias_correction and isinstance(self.measure, RankMeasure):
            raise ValueError(
                f"bias_correction=True is not available for the threshold-free measure "
                f"{self.measure.name!r}"
            )
        return self._estimate(warn=True, variance=variance, bias_correction=bias_correction)

    def unseen_errors(self, level: float = 0.95):
        """How many errors could hide among the items no draw has labeled, and the measure if
        they did (:func:`~bayes_activeeval.unseen.unseen_errors` with this evaluator's labeled
        items and :meth:`estimate`).

        Per predicted class, the largest number of errors placed at random among its unlabeled
        items that the labels so far would all have missed with probability above
        ``1 − level`` (the hypergeometric rule of three), and the measure with them added to
        the estimate. The confidence interval is conditional on what the sample has seen; this
        says how far an error the sample could not see could move it.

        Parameters
        ----------
        level : float
            In ``(0, 1)``; default 0.95.

        Returns
        -------
        UnseenErrors
        """
        from ..unseen import unseen_errors

        if getattr(self.pool, "is_lazy", False):
            raise ValueError("unseen_errors needs a pool in memory, not one on dask")
        return unseen_errors(
            self.pool,
            self.measure,
            np.unique(self._arrays()[0]),
            self.estimate(),
            level=level,
            model=None if self.measure.models is not None else self.model,
        )

    def _estimate(
        self, warn: bool, variance: str = "martingale", bias_correction: bool = False
    ) -> Estimate:
        import warnings

        from ..estimators import UndefinedEstimateWarning

        idx, w, L, _ = self._arrays()
        if variance == "clt":
            with np.errstate(divide="ignore", invalid="ignore"):
                winf = self.pool.p[idx] / self._proposal.q[idx]
            winf = np.where(np.isfinite(winf), winf, 0.0)
        else:
            winf = w
        with warnings.catch_warnings():
            if not warn:
                warnings.simplefilter("ignore", UndefinedEstimateWarning)
            if isinstance(self.measure, RankMeasure):
                # the ranking of all draws, not per-draw losses: L holds 1(y = pos)
                models = measure_models(self.pool, self.measure, self.model)
                scores = np.stack([model_scores(self.pool, m)[idx] for m in models], axis=1)
                return rank_estimate_arrays(
                    self.measure,
                    scores,
                    L[:, 0],
                    w,
                    variance_weights=winf,
                    n_labels=self._n_labels,
                    belief=self._guard_probs(idx, models),
                    items=idx,  # a class counted by its distinct items, as rank_estimate does
                )
            if self.estimator == "model_assisted":
                A = self._ma_arrays()
                d = L.shape[1]
                model_mean, model_value = self._model_expectations(idx)
                return difference_estimate(
                    L,
                    w,
                    A["m"],
                    A["M"],
                    self.measure,
                    draw_cov=A["V"].reshape(-1, d, d),
                    n_labels=self._n_labels,
                    model_expected=model_mean,
                    model_value=model_value,
                    bias_correction=bias_correction,
                )
            est = weighted_estimate(
                L,
                w,
                self.measure,
                variance_weights=winf,
                n_labels=self._n_labels,
                bias_correction=bias_correction,
            )
            # the adaptive draws' n* is capped at their number (Estimate.n_max)
            return dataclasses.replace(est, n_max=est.n_draws)

    @property
    def history(self) -> pd.DataFrame:
        """The estimate after each stage: one row per stage (and output)."""
        cols = ["stage", "output", "n_labels", "n_draws", "cost", "epsilon", "value", "stderr"]
        return pd.DataFrame(self._history, columns=cols)

    def draws(self) -> pd.DataFrame:
        """Every labeled draw: item, label, weight ``p/q``, ``q`` and stage."""
        idx, w, _, q = self._arrays()
        y = np.concatenate(self._d_y) if self._d_y else np.empty(0, dtype=np.int64)
        st = np.concatenate(self._d_stage) if self._d_stage else np.empty(0, dtype=np.int64)
        return pd.DataFrame(
            {"item": idx, "label": self.pool.decode_labels(y), "weight": w, "q": q, "stage": st}
        )

    def run(
        self,
        labeler: Callable[[np.ndarray], Any],
        budget: float,
        batch_size: int | None = None,
        progress: bool = True,
    ) -> Estimate:
        """Query, label and update until the budget is spent (Algorithm 1).

        Parameters
        ----------
        labeler : callable
            ``labeler(indices) -> labels``.
        budget : int or float
            *Total* labels for the evaluation (label cost if the pool has costs), including those
            already bought, so a resumed evaluation continues to the same budget. The last label
            may overshoot a cost budget by less than its own cost.
        batch_size : int, optional
            Labels per stage (default the evaluator's); stages grow to ``stage_growth`` times
            the labels so far when that is larger.
        progress : bool
            Show a tqdm progress bar.

        Returns
        -------
        Estimate
        """
        if not callable(labeler):
            raise TypeError(f"labeler must be callable, got {labeler!r}")
        b = check_budget(budget)
        if self._costs is None:
            if b != int(b):
                raise ValueError(f"budget counts labels and must be a whole number, got {budget!r}")
            cap = self.pool.n_items if self.deterministic else np.inf
            if self.deterministic and b > cap:
                raise ValueError(
                    f"budget={budget!r} exceeds the {cap} items of the pool (a deterministic "
                    "oracle labels each item once)"
                )
        elif self.deterministic and b > float(self._costs.sum()):
            raise ValueError(
                f"budget={budget!r} exceeds the cost of labeling the whole pool "
                f"({float(self._costs.sum()):g})"
            )
        bs = self.batch_size if batch_size is None else check_count(batch_size, "batch_size")
        from tqdm.auto import tqdm

        with tqdm(total=b, initial=min(self.cost, b), disable=not progress, unit="label") as bar:
            if self._pending["idx"].size:  # finish a stage left open by a query
                need = self._pending["idx"][self._pending["y"] < 0]
                if self.deterministic:
                    need = np.unique(need)
                before = self.cost
                self.update(need, labeler(need))
                bar.update(self.cost - before)
            while self.cost < b:
                if self.deterministic and self.available() == 0:
                    break
                before = self.cost
                bs_t = max(bs, int(self.stage_growth * self._n_labels))
                cap = self.available() if self.deterministic else bs_t
                if self._costs is None:
                    idx = self._query(int(min(bs_t, b - self.cost, cap)), None)
                else:
                    idx = self._query(int(min(bs_t, cap)), b - self.cost)
                self.update(idx, labeler(idx))
                bar.update(self.cost - before)
        return self.estimate()

    def posterior(self, method: str | None = None, **kwargs: Any):
        """Posterior of the measure on the pool.

        See :func:`bayes_activeeval.posterior.contingency_posterior`; the labeled draws
        (with their weights) are passed for you.

        Parameters
        ----------
        method : {None, "calibration", "conjugate", "pymc"}
            ``None`` (default): ``"calibration"`` — the item-level finite-population posterior
            (Bayesian calibration of the scores fitted to the labeled items, the unlabeled
            items' labels drawn from its posterior predictive) — for a binary pool under a
            deterministic oracle, where the adaptive selection is ignorable given the score
            (Rubin 1976) and a measure of one model; otherwise ``"conjugate"`` with
            design-weighted cell counts (Marchant & Rubinstein (2021), App. H). The calibration
            posterior refuses several models: its label model calibrates one model's scores.
            See ``docs/adaptive.md`` and ``benchmarks/results/contingency_coverage.md`` for the
            coverage of each. The calibration posterior is surer than it should be after
            adaptive runs: in ``benchmarks/results/adaptive_f1.md`` (129 runs per setting) its
            95 % credible interval of F1 covered 0.78-0.91 after the default oracle's runs and
            0.43 after the plug-in's on a calibrated 1:1,000 pool, where the estimate's t
            interval covered 0.95-0.98; for a decision use :meth:`estimate`'s confidence
            interval. A
            threshold-free measure (ROC AUC, average precision, recall at a false-positive rate)
            has only ``"calibration"`` (``docs/threshold-free.md``).
        **kwargs
            Passed to ``contingency_posterior`` (``draws``, ``chains``, ``rng``, ``weighting``, …).

        Returns
        -------
        xarray.DataTree
        """
        from ..posterior import contingency_posterior

        if method is None and not isinstance(self.measure, RankMeasure):
            binary = self.pool.task == "binary" and self.pool.pos is not None
            has_x = self.pool.has_probs() or self.pool.scores is not None
            one_model = self.measure.models is None or len(self.measure.models) == 1
            ok = binary and has_x and self.deterministic and self.n_labels > 0 and one_model
            method = (
                "calibration" if ok and kwargs.get("weighting") in (None, "none") else ("conjugate")
            )
        idx, w, _, _ = self._arrays()
        y = np.concatenate(self._d_y) if self._d_y else np.empty(0, dtype=np.int64)
        return contingency_posterior(
            self.pool,
            self.measure,
            idx,
            y,
            w,
            model=None if self.measure.models is not None else self.model,
            method=method,
            deterministic=self.deterministic,
            encoded=True,
            **kwargs,
        )

    def __repr__(self) -> str:
        return (
            f"ActiveEvaluator(measure={self.measure.name!r}, oracle="
            f"{self._oracle_name or type(self.oracle).__name__!r}, stage={self._stage}, "
            f"n_labels={self._n_labels}, n_draws={self.n_draws})"
        )
