"""Adaptive evaluation on a lazy pool: every stage in cell-level sufficient statistics.

:class:`~bayes_activeeval.ActiveEvaluator` on a :class:`~bayes_activeeval.lazy.LazyPool` becomes a
:class:`LazyActiveEvaluator`. For a *tabular* measure (the loss depends on an item only through its
prediction key ``k(x)``, e.g. F1, precision, recall, error rate and their differences) and the
plug-in belief ``π`` (the model's probabilities, floored, labeled items a point mass), everything a
stage needs is linear in ``π`` per cell ``(k, c)``:

- the plug-in risk ``R_t = Σ_{k,c} W[k, c] ℓ[k, c]`` with ``W[k, c] = Σ_x p(x) π_c(x) 1[k(x) = k]``
  (Sawade (2012), Eq. 4.21);
- the practical proposal of Marchant & Rubinstein (2021), Prop. 2 (deterministic oracle),
  ``q_t(x) ∝ p(x) c(x)^(-1/2) Σ_c π_c(x) max{‖Dg(R_t)(ℓ[k(x), c] − R_t)‖, ε'_t 1[ℓ ≠ 0]}``, whose
  normalizer and per-chunk masses are ``Σ_{k,c} W_j[k, c] n_t[k, c]`` over chunks ``j``.

One pass over the pool at the start computes ``W_j`` (and its cost-weighted twin) per chunk. A
label changes ``π`` at one item, so ``W`` is corrected in place by ``p(x)(e_y − π(x))``. A stage
(new ``R_t``, ``J_t``, ``ε_t``, normalizer, chunk masses) therefore costs ``O(chunks × cells)``,
independent of ``n``, and the labeled items' losses are table look-ups.

Draws (``draws="reservoir"``, the default) never read the pool either: for unlabeled items
``q_t`` is a *mixture of fixed distributions*, ``q_t = Σ_{k,c} w_kc r_kc + δ p`` with
``r_kc(x) ∝ p(x) π_c(x) c(x)^(-1/2) 1[k(x) = k]`` and stage weights ``w_kc ∝ n_t[k, c]``. Each
``r_kc`` is sampled once, in one pass, into a reservoir of pre-drawn items (refilled by another
pass when used up); a draw picks a component by its weight and takes its next item. Labeled items,
whose belief is a point mass, are handled exactly by rejection (:meth:`_sample_reservoir`). The
draws follow ``q_t`` exactly and are reproducible from ``rng``, but are not the in-memory
evaluator's items. ``draws="exact"`` instead draws by inverse CDF over the chunks, reading every
chunk a draw lands in: then the same ``rng`` gives the in-memory evaluator's queries and
estimates (up to the order of floating-point summation), which the tests check.

The calibration oracle (``oracle="calibration"``, the default on a binary pool, as in memory)
changes ``π`` at every item when it is refitted, so its ``W`` is not corrected in place: at the
end of a stage with new labels the oracle is refitted on the labeled items only (their covariate
and score stratum are kept in their records) and one pass over the chunks recomputes ``W_j``
under the new belief (:mod:`.lazy_belief`). Its draws are ``"exact"``: a stage costs that pass
plus the chunks the draws land in, and gives the in-memory evaluator's queries, proposal and
estimates.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._validation import check_count, check_fraction, check_items, check_rng, distinct_labels
from ..estimators import Estimate, UndefinedEstimateWarning, weighted_estimate
from ..kernel import (
    DEFAULT_BELIEF_FLOOR,
    cell_deviation_norms,
    cell_mass,
    inverse_cdf,
    loss_table,
    mix_proposal,
    proposal_scores,
    risk_jacobian,
)
from ..lazy import LazyPool, LazyProposal
from ..threshold_free.estimates import check_not_lazy
from ..threshold_free.kernels import rank_measure
from .evaluator import (
    DEFAULT_STAGE_GROWTH,
    MAX_DRAWS_PER_QUERY,
    ActiveEvaluator,
    cost_cut,
    default_oracle,
    draw_count,
)
from .lazy_belief import LabeledCalibration, PluginBelief, calibration_statistics
from .proposal import DEFAULT_EPSILON, epsilon_schedule

__all__ = ["LazyActiveEvaluator"]


def _keys(cp, measure, model) -> tuple[np.ndarray, np.ndarray]:
    m, views = cp.resolve(measure, model)
    table = loss_table(cp, m, views)
    return table.keys, table.table


def _point_masses(probs, offset, n, known_idx, known_y) -> np.ndarray:
    """``probs`` with the chunk's labeled items set to a point mass at their label."""
    lo, hi = np.searchsorted(known_idx, [offset, offset + n])
    if hi > lo:
        local = known_idx[lo:hi] - offset
        probs[local] = 0.0
        probs[local, known_y[lo:hi]] = 1.0
    return probs


def _stats_chunk(cp, offset, measure, model, belief, known_idx=None, known_y=None):
    """Per-chunk sufficient statistics: ``W[k, c] = Σ p π_c``, the same with ``p/sqrt(c)``, the
    number of items with ``p > 0`` per key, ``Σ p`` and ``Σ c`` (labeled items ``known_idx``:
    point masses)."""
    keys, table = _keys(cp, measure, model)
    K = table.shape[0]
    probs = belief.probs(belief.features(cp))
    if known_idx is not None:
        probs = _point_masses(probs.copy(), offset, cp.n_items, known_idx, known_y)
    p = cp.p
    W = cell_mass(keys, p, probs, K)
    if cp.costs is not None:
        Wc = cell_mass(keys, p / np.sqrt(cp.costs), probs, K)
        total_cost = float(cp.costs.sum())
    else:
        Wc, total_cost = W, float(cp.n_items)
    count = np.bincount(keys[p > 0], minlength=K)
    return W, Wc, count, float(p.sum()), total_cost, table


@dataclass(frozen=True)
class _StageParams:
    """What a chunk needs to recompute ``q_t`` of its items."""

    measure: Any
    model: str | None
    belief: Any  # PluginBelief or CalibrationBelief (floored)
    nf: np.ndarray  # (K, C): the floored cell norms max{‖Dg(R)(ℓ − R)‖, ε' 1[ℓ ≠ 0]}
    S: float
    mix: float
    costs: bool
    known_idx: np.ndarray  # sorted global indices of labeled items
    known_y: np.ndarray
    passive: bool = False


def _stage_q(cp, offset, prm: _StageParams) -> np.ndarray:
    """``q_t`` on a chunk (Marchant & Rubinstein (2021), Prop. 2, with the mixture of Sec. 3.3.1)."""
    keys, _ = _keys(cp, prm.measure, prm.model)
    p = cp.p
    if prm.passive:
        s = p.copy()
    else:
        probs = prm.belief.probs(prm.belief.features(cp)).copy()
        probs = _point_masses(probs, offset, cp.n_items, prm.known_idx, prm.known_y)
        nf = prm.nf[keys]  # (n, C)
        a = probs[:, 0] * nf[:, 0]
        for c in range(1, probs.shape[1]):
            a += probs[:, c] * nf[:, c]
        s = proposal_scores(a, p, cp.costs if prm.costs else None)
    return mix_proposal(s, p, prm.mix, total=prm.S)


def _item_records(cp, offset, prm: _StageParams, local: np.ndarray) -> dict[str, np.ndarray]:
    """What the evaluator keeps of a drawn item: key, belief features (:mod:`.lazy_belief`),
    ``p`` and cost."""
    keys, _ = _keys(cp, prm.measure, prm.model)
    return {
        "key": keys[local].astype(np.int64),
        "feat": prm.belief.features(cp)[local],
        "p": cp.p[local],
        "cost": cp.costs[local] if cp.costs is not None else np.ones(local.size),
    }


def _reservoir_chunk(cp, offset, measure, model, belief, want: dict, seed: int):
    """Draws from the fixed component distributions on one chunk: for cell ``(k, c)``
    ``r_kc(x) ∝ p(x) π_c(x) c(x)^(-1/2) 1[k(x) = k]``, for ``"p"`` ``r(x) ∝ p(x)``; ``want`` maps
    a component to its number of draws here. Returns the drawn items' records per component."""
    rng = np.random.default_rng(seed)
    keys, _ = _keys(cp, measure, model)
    probs = belief.features(cp)  # the plug-in: its features are the floored probabilities
    p = cp.p
    pc = p / np.sqrt(cp.costs) if cp.costs is not None else p
    costs = cp.costs if cp.costs is not None else np.ones(cp.n_items)
    out = {}
    for comp, m in want.items():
        w = p if comp == "p" else np.where(keys == comp[0], pc * probs[:, comp[1]], 0.0)
        cdf = np.cumsum(w)
        # a target rounded up to cdf[-1] goes to the last item with positive mass, never to a
        # zero-mass item after it (as every draw of the package)
        local = inverse_cdf(cdf, rng.random(m) * cdf[-1])
        out[comp] = (
            local + offset,
            keys[local].astype(np.int64),
            probs[local],
            p[local],
            costs[local],
        )
    return out


class _Costs:
    """Stands in for the pool's cost vector where :class:`ActiveEvaluator` only sums it."""

    def __init__(self, total: float) -> None:
        self.total = total

    def sum(self) -> float:
        return self.total


class LazyActiveEvaluator(ActiveEvaluator):
    """:class:`~bayes_activeeval.ActiveEvaluator` on a lazy pool (created by it for a
    :class:`~bayes_activeeval.lazy.LazyPool`; same parameters and methods).

    Supported: a tabular classification measure; the oracles ``"calibration"`` (the default on
    a binary pool, as in memory; ``predictive="map"``, its default) and ``"model"`` (the
    plug-in, the default elsewhere); a deterministic oracle and ``belief_floor > 0``. Per stage
    the work is ``O(chunks × cells)`` with the plug-in, one pass over the chunks with the
    calibration oracle; the label cache is sparse (labeled items only). ``posterior()``,
    ``get_state()``/``save()`` and the other oracle models need the in-memory pool.

    Parameters
    ----------
    draws : {"reservoir", "exact"}, optional
        ``"reservoir"`` (the plug-in's default): draws from pre-drawn samples of the fixed
        mixture components of ``q_t`` (no pass over the pool per stage; one pass per refill).
        ``"exact"`` (the calibration oracle's default and only choice): inverse-CDF draws over
        the chunks, identical to the in-memory evaluator's, reading the chunks the draws land in
        at every stage.
    reservoir : int
        Items pre-drawn per mixture component and refill (default ``2**14``).

    Notes
    -----
    The other parameters are as for :class:`~bayes_activeeval.ActiveEvaluator`.
    """

    def __init__(
        self,
        pool: LazyPool,
        measure,
        *,
        oracle: Any = None,
        model: str | None = None,
        deterministic: bool = True,
        epsilon: float = DEFAULT_EPSILON,
        mix: float = 0.0,
        batch_size: int = 50,
        rng: Any = None,
        oracle_options: dict[str, Any] | None = None,
        belief_floor: float = DEFAULT_BELIEF_FLOOR,
        stage_growth: float = DEFAULT_STAGE_GROWTH,
        _restore: dict[str, Any] | None = None,
        draws: str | None = None,
        reservoir: int = 1 << 14,
        estimator: str | None = None,
        relative_floor: float | None = None,
    ) -> None:
        if rank_measure(measure) is not None:  # ROC AUC, AP, recall@FPR: not lazy yet
            check_not_lazy(pool, rank_measure(measure), "ActiveEvaluator")
        if estimator not in (None, "ipw"):
            raise NotImplementedError(
                "on a lazy pool ActiveEvaluator uses the AIS estimate (estimator='ipw'); got "
                f"estimator={estimator!r}"
            )
        self.estimator = "ipw"
        if relative_floor is not None and check_fraction(relative_floor, "relative_floor"):
            raise ValueError(
                f"relative_floor={relative_floor!r} applies to estimator='model_assisted' only, "
                "which a lazy pool does not use"
            )
        self.relative_floor = 0.0
        if draws not in (None, "reservoir", "exact"):
            raise ValueError(f"draws must be 'reservoir' or 'exact', got {draws!r}")
        self.reservoir_size = check_count(reservoir, "reservoir")
        self._res: dict[Any, list] = {}  # component -> [records..., next position]
        if pool.task == "regression":
            raise ValueError(
                "ActiveEvaluator needs a classification pool (oracle models give class "
                "probabilities); for regression use optimal_proposal with a GaussianBelief"
            )
        if oracle is None:  # the in-memory default: calibration on a binary pool
            oracle = default_oracle(pool)
        if oracle not in ("model", "calibration"):
            raise NotImplementedError(
                "on a lazy pool ActiveEvaluator supports the oracles 'calibration' and 'model' "
                f"(the plug-in); got oracle={oracle!r}"
            )
        if oracle_options is not None and not isinstance(oracle_options, dict):
            raise TypeError(f"oracle_options must be a dict, got {type(oracle_options).__name__}")
        if oracle == "model" and oracle_options:
            raise TypeError("the plug-in oracle takes no oracle_options")
        if draws is None:  # a calibration belief changes with every stage: no fixed components
            draws = "reservoir" if oracle == "model" else "exact"
        if draws == "reservoir" and oracle != "model":
            raise ValueError(
                "draws='reservoir' needs the plug-in oracle (a belief fixed for the run); the "
                "calibration oracle draws with draws='exact'"
            )
        self.draws_mode = draws
        if deterministic is not True:
            raise NotImplementedError("on a lazy pool ActiveEvaluator needs deterministic=True")
        if _restore is not None:
            raise NotImplementedError("a lazy ActiveEvaluator cannot be restored from a state")
        eps = float(epsilon) if isinstance(epsilon, (int, float, np.number)) else None
        if eps is None or not np.isfinite(eps) or eps < 0:
            raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
        self.pool = pool
        self.measure, self._views = pool.resolve(measure, model)
        if not self.measure.tabular:
            raise NotImplementedError(
                f"on a lazy pool ActiveEvaluator needs a measure whose loss depends on an item "
                f"only through its prediction(s) (tabular); {self.measure.name!r} is not"
            )
        if oracle == "model" and not pool.has_probs():
            raise ValueError("the plug-in oracle needs the pool's probs")
        self._measure_arg = measure
        self.model = model
        self.deterministic = True
        self.epsilon0 = eps
        self.mix = check_fraction(mix, "mix", allow_one=True)
        self.batch_size = check_count(batch_size, "batch_size")
        sg = float(stage_growth) if isinstance(stage_growth, (int, float, np.number)) else None
        if sg is None or not np.isfinite(sg) or sg < 0:
            raise ValueError(f"stage_growth must be a finite number >= 0, got {stage_growth!r}")
        self.stage_growth = sg
        self.belief_floor = check_fraction(belief_floor, "belief_floor")
        if self.belief_floor <= 0:
            raise NotImplementedError("on a lazy pool ActiveEvaluator needs belief_floor > 0")
        self.rng = check_rng(rng)
        self.oracle_options = dict(oracle_options or {})
        self._oracle_name = oracle
        self._chunk_model = None if self.measure.models is not None else model
        self._stage_measure = self.measure if self.measure.models is not None else measure
        if oracle == "model":
            self.oracle = None
            models = (
                pool.models_of(self.measure, model)
                if self.measure.models is None
                else tuple(pool.models)
            )
            self._belief: Any = PluginBelief(models, self.belief_floor)
        else:  # fitted on the labeled items; x̄ and the strata from passes over the chunks
            self.oracle = LabeledCalibration.from_options(self.oracle_options)
            self._belief = calibration_statistics(
                pool, self.oracle, self._calibrated_model(model), self.belief_floor
            )
        self._labeled: list[int] = []  # labeled items in order of first labeling
        stats = pool.map_chunks(_stats_chunk, self._stage_measure, self._chunk_model, self._belief)
        self._W = np.stack([s[0] for s in stats])  # (chunks, K, C)
        self._Wc = np.stack([s[1] for s in stats]) if pool.has_costs else self._W
        # the fixed mixture components (no label corrections): cell (k, c) has mass A0[k, c]
        self._A0 = (self._Wc if pool.has_costs else self._W).copy()
        self._count = np.stack([s[2] for s in stats])  # (chunks, K)
        self._P = np.array([s[3] for s in stats])
        self._table = stats[0][5]  # (K, C, d)
        self._costs = _Costs(float(sum(s[4] for s in stats))) if pool.has_costs else None
        # sparse label cache: labeled and requested items with what q_t needs of them
        self._known: dict[int, int] = {}
        self._rec: dict[int, tuple[int, np.ndarray, float, float]] = {}
        self._req: set[int] = set()
        self._p_known = 0.0
        self._stage = 0
        self._n_labels = 0
        self._cost = 0.0
        self._d_idx, self._d_w, self._d_q, self._d_y = [], [], [], []
        self._d_stage, self._d_loss = [], []
        self._pending = self._empty_pending()
        self._history = []
        self._epsilon_t = 0.0
        self._refresh()

    def _calibrated_model(self, model: str | None) -> str:
        """The model whose scores the calibration oracle recalibrates, chosen as the in-memory
        evaluator does (``CalibrationOracle.initialize``): ``model``, else the oracle's own
        ``oracle_options["model"]``; for a measure bound to models the oracle's model, else the
        pool's only model, else the measure's first."""
        own = self.oracle_options.get("model")
        if self.measure.models is None:
            return self.pool.check_model(model if model is not None else own)
        try:
            return self.pool.check_model(own)
        except ValueError:
            return self.pool.check_model(self.measure.models[0])

    def _update_belief(self, new_items: np.ndarray) -> None:
        """Refit the calibration oracle on the labeled items (when some are new) and recompute
        the cell statistics under its belief: one pass over the chunks."""
        if self.oracle is None or new_items.size == 0:
            return
        self._labeled.extend(int(i) for i in new_items.tolist())
        feat = np.array([self._rec[i][1] for i in self._labeled])
        y = np.array([self._known[i] for i in self._labeled], dtype=np.int64)
        params = self.oracle.refit(self._belief, feat[:, 0], feat[:, 1].astype(np.int64), y)
        self._belief = replace(
            self._belief, params=params, asymptotes=tuple(float(v) for v in self.oracle.lam)
        )
        known_idx = np.array(sorted(self._known), dtype=np.int64)
        known_y = np.array([self._known[i] for i in known_idx.tolist()], dtype=np.int64)
        stats = self.pool.map_chunks(
            _stats_chunk, self._stage_measure, self._chunk_model, self._belief, known_idx, known_y
        )
        self._W = np.stack([s[0] for s in stats])
        self._Wc = np.stack([s[1] for s in stats]) if self.pool.has_costs else self._W

    # -- the stage: O(chunks × cells) -------------------------------------------------------------
    @property
    def known(self) -> np.ndarray:
        """Indices of the labeled items (sorted); a lazy pool keeps no per-item mask."""
        return np.array(sorted(self._known), dtype=np.int64)

    def _unlabeled_fraction(self) -> float:
        return float(np.clip(1.0 - self._p_known, 0.0, 1.0))

    def _refresh(self) -> None:
        """New ``R_t``, ``ε_t``, normalizer and chunk masses from the cell statistics."""
        m = self.measure
        T = self._table
        self._epsilon_t = epsilon_schedule(
            self.epsilon0,
            stage=self._stage,
            unlabeled_fraction=self._unlabeled_fraction(),
            deterministic=True,
        )
        W = self._W.sum(axis=0)
        R = np.einsum("kc,kcd->d", W, T)
        J = risk_jacobian(m, R, risk_name="plug-in risk", purpose="the proposal")
        norms = cell_deviation_norms(T, m, R, J)
        nz = np.any(T != 0, axis=2)
        floor_all = not m.scale_invariant
        sbar = float(np.sum(W * norms))
        eps_abs = 0.0
        nf = norms
        if self._epsilon_t > 0 and sbar > 0:
            eps_abs = self._epsilon_t * sbar
            nf = np.maximum(norms, eps_abs)
            if not floor_all:
                nf = np.where(nz, nf, norms)
        S_k = np.einsum("jkc,kc->j", self._Wc, nf)
        S = float(S_k.sum())
        passive = S <= 0
        if passive:
            S_k, S = self._P.copy(), float(self._P.sum())
        known_idx = np.array(sorted(self._known), dtype=np.int64)
        known_y = np.array([self._known[i] for i in known_idx.tolist()], dtype=np.int64)
        prm = _StageParams(
            self._stage_measure,
            self._chunk_model,
            self._belief,
            nf,
            S,
            self.mix,
            self.pool.has_costs,
            known_idx,
            known_y,
            passive,
        )
        mass = mix_proposal(S_k.copy(), self._P, self.mix, total=S)
        # items with q > 0: every item with p > 0 when mixing; else those whose key has a
        # positive floored norm (π is floored, so every class counts)
        if self.mix > 0 or passive:
            support = int(self._count.sum())
        else:
            support = int(self._count[:, np.any(nf > 0, axis=1)].sum())
        info = {
            "risk": R,
            "jacobian": J,
            "epsilon": self._epsilon_t,
            "epsilon_abs": eps_abs,
            "mix": self.mix,
            "deterministic": True,
            "measure": m.name,
            "support": support,
        }
        self._proposal = LazyProposal(
            self.pool, "adaptive", _stage_q, prm, mass, info, item_records=_item_records
        )

    def _q_of(self, items: np.ndarray) -> np.ndarray:
        """``q_t`` of recorded items (drawn before), from their records: no chunk is read."""
        if items.size == 0:
            return np.empty(0)
        recs = [self._rec[i] for i in items.tolist()]
        key = np.array([r[0] for r in recs], dtype=np.int64)
        probs = self._belief.probs(np.array([r[1] for r in recs]))
        p = np.array([r[2] for r in recs])
        cost = np.array([r[3] for r in recs])
        return self._q_records(key, probs, p, cost, items)

    # -- draws in O(cells + chunks): a mixture of fixed distributions --------------------------------
    def _q_records(self, key, probs, p, cost, items) -> np.ndarray:
        """``q_t`` from item records (vectorized ``_q_of``)."""
        prm: _StageParams = self._proposal.params
        if prm.passive:
            return mix_proposal(p.copy(), p, prm.mix, total=prm.S)
        probs = probs.copy()
        lab = np.array([self._known.get(i, -1) for i in items.tolist()], dtype=np.int64)
        known = lab >= 0
        if known.any():
            probs[known] = 0.0
            probs[np.flatnonzero(known), lab[known]] = 1.0
        return self._q_base(key, probs, p, cost)

    def _q_base(self, key, probs, p, cost) -> np.ndarray:
        """``q`` of the stage's mixture at item records, with the beliefs ``probs`` as given."""
        prm: _StageParams = self._proposal.params
        s = proposal_scores(
            np.einsum("ic,ic->i", probs, prm.nf[key]), p, cost if prm.costs else None
        )
        return mix_proposal(s, p, prm.mix, total=prm.S)

    def _fill(self, need: dict) -> None:
        """Refill the reservoirs of the components in ``need`` (one pass over the chunks)."""
        pool = self.pool
        want_total = {comp: max(self.reservoir_size, 2 * m) for comp, m in need.items() if m > 0}
        per_chunk: list[dict] = [{} for _ in range(pool.n_chunks)]
        for comp, m in want_total.items():
            mass = self._P if comp == "p" else self._A0[:, comp[0], comp[1]]
            counts = self.rng.multinomial(m, mass / mass.sum())
            for j in np.flatnonzero(counts).tolist():
                per_chunk[j][comp] = int(counts[j])
        seeds = self.rng.integers(0, 2**63 - 1, size=pool.n_chunks)
        ks = [j for j in range(pool.n_chunks) if per_chunk[j]]
        got = pool.compute(
            [
                pool.chunk_task(
                    j,
                    _reservoir_chunk,
                    self._stage_measure,
                    self._chunk_model,
                    self._belief,
                    per_chunk[j],
                    int(seeds[j]),
                )
                for j in ks
            ]
        )
        for comp in want_total:
            parts = [g[comp] for g in got if comp in g]
            recs = [np.concatenate([pt[f] for pt in parts]) for f in range(5)]
            order = self.rng.permutation(recs[0].size)  # chunk order -> i.i.d. order
            old = self._res.get(comp)
            recs = [r[order] for r in recs]
            if old is not None:  # keep the unused ones first
                pos = old[5]
                recs = [np.concatenate([o[pos:], r]) for o, r in zip(old[:5], recs, strict=True)]
            self._res[comp] = [*recs, 0]

    def _sample_reservoir(self, n: int):
        """``n`` i.i.d. draws from ``q_t``, exactly, without reading the pool.

        For unlabeled items ``q_t`` is a mixture of fixed distributions,
        ``q_t = Σ_{k,c} w_kc r_kc + δ p`` with ``w_kc = (1 − δ) n_t[k, c] A_kc / S_t`` (the cell
        masses ``A_kc`` of :func:`_stats_chunk` before any label), so a draw picks a component by
        its weight and takes the next of that component's pre-drawn items (drawn in one pass,
        refilled when used up). A labeled item's ``q_t`` differs from the mixture's ``q_base``;
        draws come from ``g = max(q_base, q_t)`` (extra point masses at labeled items) and are
        accepted with probability ``q_t/g``: rejection sampling, exact.
        """
        prm: _StageParams = self._proposal.params
        K, C = prm.nf.shape
        A = self._A0.sum(axis=0)
        comps: list[Any] = [(k, c) for k in range(K) for c in range(C)]
        if prm.passive:
            w = [0.0] * len(comps) + [1.0]
        else:
            w = [(1.0 - prm.mix) / prm.S * prm.nf[k, c] * A[k, c] for k, c in comps] + [prm.mix]
        comps.append("p")
        # extra mass at labeled items where q_t exceeds the mixture's q_base
        kn = np.array(sorted(self._known), dtype=np.int64)
        extra = np.zeros(0)
        if kn.size and not prm.passive:
            key = np.array([self._rec[i][0] for i in kn.tolist()], dtype=np.int64)
            probs = np.array([self._rec[i][1] for i in kn.tolist()])
            p = np.array([self._rec[i][2] for i in kn.tolist()])
            cost = np.array([self._rec[i][3] for i in kn.tolist()])
            q_t = self._q_records(key, probs, p, cost, kn)
            q_base = self._q_base(key, probs, p, cost)
            extra = np.maximum(q_t - q_base, 0.0)
        weights = np.concatenate([np.asarray(w, dtype=float), extra])
        weights /= weights.sum()
        out_idx, out_recs = [], []
        got = 0
        while got < n:
            m = n - got
            pick = self.rng.choice(weights.size, size=m, p=weights)
            need = {}
            for j in np.unique(pick[pick < len(comps)]).tolist():
                comp = comps[j]
                cnt = int(np.count_nonzero(pick == j))
                r = self._res.get(comp)
                if r is None or r[0].size - r[5] < cnt:
                    need[comp] = cnt
            if need:
                self._fill(need)
            idx = np.empty(m, dtype=np.int64)
            key = np.empty(m, dtype=np.int64)
            probs = np.empty((m, C))
            p = np.empty(m)
            cost = np.empty(m)
            for j in np.unique(pick).tolist():
                sel = np.flatnonzero(pick == j)
                if j < len(comps):
                    r = self._res[comps[j]]
                    lo, hi = r[5], r[5] + sel.size
                    idx[sel], key[sel], probs[sel], p[sel], cost[sel] = (
                        r[0][lo:hi],
                        r[1][lo:hi],
                        r[2][lo:hi],
                        r[3][lo:hi],
                        r[4][lo:hi],
                    )
                    r[5] = hi
                else:
                    i = int(kn[j - len(comps)])
                    rk, rp, rpp, rc = self._rec[i]
                    idx[sel], key[sel], probs[sel], p[sel], cost[sel] = i, rk, rp, rpp, rc
            q = self._q_records(key, probs, p, cost, idx)
            accept = np.ones(m, dtype=bool)
            lab = np.array([i in self._known for i in idx.tolist()], dtype=bool)
            if lab.any() and not prm.passive:
                q_base = self._q_base(key[lab], probs[lab], p[lab], cost[lab])
                g = np.maximum(q_base, q[lab])
                with np.errstate(invalid="ignore", divide="ignore"):
                    ratio = np.where(g > 0, q[lab] / g, 0.0)
                accept[lab] = self.rng.random(int(lab.sum())) < ratio
            a = np.flatnonzero(accept)
            out_idx.append(idx[a])
            out_recs.append((key[a], probs[a], p[a], cost[a], q[a]))
            got += a.size
        idx = np.concatenate(out_idx)
        key, probs, p, cost, q = (np.concatenate([r[f] for r in out_recs]) for f in range(5))
        return idx, q, p, {"key": key, "feat": probs, "p": p, "cost": cost}

    # -- the loop ----------------------------------------------------------------------------------
    def available(self) -> int:
        """Items a query can still return (positive probability and no label)."""
        prm: _StageParams = self._proposal.params
        positive_key = np.any(prm.nf > 0, axis=1)
        n_taken = 0
        for i in self._known.keys() | self._req:  # those the support count includes
            key, _, p, _ = self._rec[i]
            n_taken += p > 0 and (self.mix > 0 or prm.passive or bool(positive_key[key]))
        return self._proposal.support - n_taken

    def _query(self, n: int, max_cost: float | None) -> np.ndarray:
        prop = self._proposal
        n_avail = self.available()
        if n > n_avail:
            raise ValueError(
                f"n={n} new labels requested but only {n_avail} unlabeled items have positive "
                "probability under the current proposal"
            )
        taken = np.fromiter(self._known.keys() | self._req, dtype=np.int64)
        mass = float(1.0 - self._q_of(taken).sum()) if taken.size else 1.0
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
            if self.draws_mode == "exact":
                ind, qd, pd_, recs = prop.sample(k, self.rng, records=True)
            else:
                ind, qd, pd_, recs = self._sample_reservoir(k)
            w = pd_ / qd
            for j, i in enumerate(ind.tolist()):
                if i not in self._rec:
                    self._rec[i] = (
                        int(recs["key"][j]),
                        recs["feat"][j].copy(),
                        float(recs["p"][j]),
                        float(recs["cost"][j]),
                    )
            fresh = np.array(
                [i not in self._known and i not in self._req for i in ind.tolist()], dtype=bool
            )
            pos = np.flatnonzero(fresh)
            _, first = np.unique(ind[pos], return_index=True)
            firstpos = np.sort(pos[first])
            take = firstpos[:need]
            cut = None
            if max_cost is not None and self._costs is not None and take.size:
                item_costs = np.array([self._rec[i][3] for i in ind[take].tolist()])
                take, cut, spent = cost_cut(take, item_costs, spent, max_cost)
            if cut is not None:
                need = take.size  # the budget is reached: finish after this batch
            else:
                cut = int(take[-1]) + 1 if take.size >= need else ind.size
            ind_c = ind[:cut]
            new = ind[take]
            mass -= float(qd[take].sum())
            self._req.update(new.tolist())
            ylab = np.array([self._known.get(i, -1) for i in ind_c.tolist()], dtype=np.int64)
            self._add_pending(ind_c, w[:cut], qd[:cut], ylab)
            new_items.append(new)
            need -= take.size
        return np.concatenate(new_items) if new_items else np.empty(0, dtype=np.int64)

    def update(self, indices: Any, labels: Any) -> None:
        """Record labels; at the end of a stage, correct the cell statistics and refresh ``q_t``
        (see :meth:`ActiveEvaluator.update`)."""
        idx = np.asarray(indices)
        if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
            raise ValueError(f"indices must be a 1-D array of item indices, got {indices!r}")
        idx = idx.astype(np.int64)
        y = self.pool.encode_labels(labels)
        if y.shape != idx.shape:
            raise ValueError(f"labels has {y.size} entries but indices has {idx.size}")
        check_items(idx, self.pool.n_items)
        y = y.astype(np.int64)
        distinct_labels(idx, y, why="; a deterministic oracle gives one label per item")
        for i, lab in zip(idx.tolist(), y.tolist(), strict=True):
            if i in self._known:
                if self._known[i] != lab:
                    raise ValueError(
                        f"item {i} already has label "
                        f"{self.pool.decode_labels([self._known[i]])[0]!r}; a deterministic "
                        "oracle gives one label per item"
                    )
                continue
            if i not in self._req:
                raise ValueError(f"item {i} was not returned by query(); label queried items only")
        for i, lab in zip(idx.tolist(), y.tolist(), strict=True):
            if i in self._known:
                continue
            self._known[i] = lab
            self._req.discard(i)
            self._n_labels += 1
            key, probs, p, cost = self._rec[i]
            self._p_known += p
            if self._costs is not None:
                self._cost += cost
            if self.oracle is not None:  # a fitted belief: W is recomputed at the stage's end
                continue
            # the plug-in belief at i becomes a point mass: correct W (and its cost-weighted twin)
            j = int(self.pool.chunk_of(np.array([i]))[0])
            delta = -probs.copy()
            delta[lab] += 1.0
            self._W[j, key] += p * delta
            if self._Wc is not self._W:
                self._Wc[j, key] += p / math.sqrt(cost) * delta
        P = self._pending
        P["y"] = np.where(P["y"] < 0, [self._known.get(i, -1) for i in P["idx"].tolist()], P["y"])
        if P["idx"].size and not np.any(P["y"] < 0):
            self._end_stage()

    def _end_stage(self) -> None:
        P = self._pending
        self._pending = self._empty_pending()
        idx, w, q, y = P["idx"], P["w"], P["q"], P["y"]
        keys = np.array([self._rec[i][0] for i in idx.tolist()], dtype=np.int64)
        L = self._table[keys, y] if idx.size else np.empty((0, self.measure.dim))
        self._d_idx.append(idx)
        self._d_w.append(w)
        self._d_q.append(q)
        self._d_y.append(y)
        self._d_stage.append(np.full(idx.size, self._stage, dtype=np.int64))
        self._d_loss.append(L)
        sel = np.flatnonzero(P["new"])  # draws of items first labeled in this stage
        _, first = np.unique(idx[sel], return_index=True)
        self._update_belief(idx[np.sort(sel[first])])
        self._stage += 1
        self._refresh()
        self._record()

    def _estimate(
        self, warn: bool, variance: str = "martingale", bias_correction: bool = False
    ) -> Estimate:
        import warnings

        idx, w, L, _ = self._arrays()
        winf = w
        if variance == "clt":  # p/q_N at the drawn items, from their records (no chunk read)
            p = np.array([self._rec[i][2] for i in idx.tolist()])
            with np.errstate(divide="ignore", invalid="ignore"):
                winf = p / self._q_of(idx) if idx.size else w
            winf = np.where(np.isfinite(winf), winf, 0.0)
        with warnings.catch_warnings():
            if not warn:
                warnings.simplefilter("ignore", UndefinedEstimateWarning)
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

    def posterior(self, method: str | None = None, **kwargs: Any):
        raise NotImplementedError("posterior() needs an in-memory pool")

    def get_state(self) -> dict[str, Any]:
        raise NotImplementedError("a lazy ActiveEvaluator has no saved state yet")

    def __repr__(self) -> str:
        return (
            f"LazyActiveEvaluator(measure={self.measure.name!r}, stage={self._stage}, "
            f"n_labels={self._n_labels}, n_draws={self.n_draws}, n_chunks={self.pool.n_chunks})"
        )
