"""An oracle model that chooses among oracle models from the labels: prequential stacking.

No single oracle model wins on every pool: the plug-in (the model's own probabilities) is right
when the scores are calibrated and badly wrong for SVM margins on a skewed pool; the Bayesian
calibration wins on skewed record linkage and can be over-confident on a balanced pool whose
label noise has a plateau the logistic map misses; the Dirichlet tree sits in between. The labels
gathered by the adaptive sampler say which belief predicts them, so this model lets them decide:

    π_t(y|x) = Σ_k w_{t,k} π_{t,k}(y|x),     w_t ∈ simplex

with ``π_{t,k}`` the members' beliefs (each fitted to the labels so far) and the weights chosen by
*prequential stacking* (Dawid 1984; Yao, Vehtari, Simpson & Gelman 2018): every labeled item ``i``
is scored by each member's belief *before* its label was seen, ``P_{ik} = π_{s(i)-1,k}(y_i|x_i)``
(``s(i)`` the stage that labeled it), and

    w_t = argmax_w  Σ_i v_i log Σ_k w_k P_{ik}  +  Σ_k (α − 1) log w_k

(``α = 1 + prior`` a symmetric Dirichlet that keeps every member in the mixture early on).

What is computed is an approximation of that MAP: after each update, 50 EM iterations
(:func:`stacking_weights` with ``max_iter=50``; 200 for the per-cell weights of
``weights_by="prediction"``) started from the previous weights shrunk 1% towards equal
(``0.99 w + 0.01/K``). The weights move towards the MAP from stage to stage but need not reach it
where the objective is flat: EM converges linearly, slowly when members predict alike. In
scratch runs of F1 to 1,000 labels the weights used stayed within about 0.05 of the MAP, and
further from it on contrived cases of near-identical members. Kept so: more iterations would
change every committed result of the default on the real pools.
Prequential scores need no refitting (no leave-one-out loop) and are honest out-of-sample scores:
under the ignorable selection of the adaptive sampler (each item's selection depends on its score
and on *other* items' labels, Rubin 1976) the product of a member's prequential predictives is its
marginal likelihood of the labels (``weighting="bma"`` uses exactly that, i.e. Bayesian model
averaging), and stacking is its M-open counterpart, which keeps a mixture when no member is right.

``v_i``: with ``importance=True`` (default) the items' importance weights ``p/q`` normalized to
mean 1 and capped (``v_cap``): the proposal's variance (Marchant & Rubinstein (2021), Prop. 1;
Sawade (2012), Thm. 4.1) is an average over the *pool*, not over the draws, so the score that picks
the belief should be a pool average too. Items the sampler rarely visits (e.g. confident negatives
that turn out positive) are exactly where an over-confident belief costs variance.

Why a mixture of beliefs rather than the single best: the deterministic-oracle proposal
``q ∝ p E_π‖Dg(R)(ℓ − R)‖`` (Marchant & Rubinstein (2021), Prop. 2) is linear in ``π``, so the
mixture belief gives the mixture of the members' integrands: a member with weight ``w_k`` keeps at
least ``w_k`` of its proposal's mass, a defensive mixture whose components are chosen by the labels.

Cost: the plug-in is free, the calibration and Dirichlet-tree members are refitted only when the
labels have grown by the factor ``1 + refit_growth`` since their last fit (a geometric schedule:
``O(log n)`` refits; between refits their beliefs stay as fitted, the labeled items getting point
masses). The scores and the weights are updated every stage.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..beliefs import CategoricalBelief
from ._common import LabelCache, check_config, check_update
from .base import OracleModel, make_oracle, register_oracle

__all__ = ["EnsembleOracle", "log_pool_weights", "stacking_weights"]

#: Members of the default ensemble, in the order of their weights.
DEFAULT_MEMBERS = ("model", "calibration", "dirichlet-tree")
#: Smallest predictive probability entering a log score (a member that rules a label out is
#: penalized, not excluded, by one such label).
_TINY = 1e-12


def stacking_weights(
    P: np.ndarray,
    v: np.ndarray | None = None,
    *,
    prior: float = 1.0,
    method: str = "stacking",
    max_iter: int = 500,
    tol: float = 1e-8,
    init: np.ndarray | None = None,
) -> np.ndarray:
    """Weights of a mixture of predictive distributions from their scores on held-out labels.

    Parameters
    ----------
    P : ndarray (n, K)
        ``P[i, k]``: member ``k``'s predictive probability of item ``i``'s observed label, made
        before the label was seen (prequential).
    v : ndarray (n,), optional
        Non-negative item weights (default ones).
    prior : float or ndarray (K,)
        ``α − 1 >= 0``: pseudo-counts of the Dirichlet prior on the stacking weights (a scalar
        for a symmetric prior). Ignored by ``"bma"`` (equal prior odds).
    method : {"stacking", "bma"}
        ``"stacking"``: the MAP of ``Σ v_i log Σ_k w_k P_ik + prior Σ log w_k`` (EM, Yao et al.
        (2018), Eq. 3 with a prequential score). ``"bma"``: ``w_k ∝ exp(Σ v_i log P_ik)``, the
        posterior model probabilities under equal prior odds.
    max_iter, tol : int, float
        EM iterations and tolerance on the weights. The result is the MAP only once EM has
        converged: where members predict alike the objective is flat and EM slow.
        :class:`EnsembleOracle` runs 50 per update.
    init : ndarray (K,), optional
        Starting weights (e.g. the previous stage's: the optimum moves little per stage), shrunk
        to ``0.99 init + 0.01/K`` to stay inside the simplex.

    Returns
    -------
    ndarray (K,)
        Weights on the simplex.
    """
    P = np.clip(np.asarray(P, dtype=float), _TINY, None)
    n, K = P.shape
    v = np.ones(n) if v is None else np.asarray(v, dtype=float)
    if method == "bma":
        s = (v[:, None] * np.log(P)).sum(axis=0)
        s -= s.max()
        w = np.exp(s)
        return w / w.sum()
    if method != "stacking":
        raise ValueError(f"method must be 'stacking' or 'bma', got {method!r}")
    w = np.full(K, 1.0 / K)
    if n == 0:
        return w
    if init is not None:  # warm start, kept inside the simplex's interior
        w = 0.99 * np.asarray(init, dtype=float) / np.sum(init) + 0.01 / K
    for _ in range(max_iter):
        wp = P * w
        r = wp / wp.sum(axis=1, keepdims=True)
        new = (v[:, None] * r).sum(axis=0) + np.asarray(prior, dtype=float)
        new /= new.sum()
        if np.max(np.abs(new - w)) < tol:
            w = new
            break
        w = new
    return w


def log_pool_weights(
    logp: np.ndarray,
    y: np.ndarray,
    v: np.ndarray | None = None,
    *,
    prior: float | np.ndarray = 1.0,
    init: np.ndarray | None = None,
) -> np.ndarray:
    """Stacking weights of a *logarithmic* pool ``π_w(y|x) ∝ Π_k π_k(y|x)^{w_k}``.

    Maximizes ``Σ_i v_i log π_w(y_i|x_i) + Σ_k prior_k log w_k`` over the simplex (concave: a
    multinomial logistic log-likelihood in ``w`` plus a log barrier), by L-BFGS on a softmax
    parametrization.

    Parameters
    ----------
    logp : ndarray (n, K, C)
        Members' predictive log-probabilities of every class for each scored item.
    y : ndarray (n,)
        The observed labels.
    v : ndarray (n,), optional
        Item weights.
    prior : float or ndarray (K,)
        Dirichlet pseudo-counts ``α − 1``.
    init : ndarray (K,), optional
        Starting weights.

    Returns
    -------
    ndarray (K,)
    """
    from scipy import optimize, special

    n, K, _ = logp.shape
    v = np.ones(n) if v is None else np.asarray(v, dtype=float)
    a = np.broadcast_to(np.asarray(prior, dtype=float), (K,))
    w0 = np.full(K, 1.0 / K) if init is None else np.asarray(init, dtype=float)
    if n == 0:
        return w0 / w0.sum()
    ly = logp[np.arange(n), :, y]  # (n, K)

    def f(theta):
        w = special.softmax(theta)
        z = np.einsum("ikc,k->ic", logp, w)
        lse = special.logsumexp(z, axis=1)
        obj = v @ (ly @ w - lse) + a @ np.log(np.maximum(w, 1e-300))
        pz = np.exp(z - lse[:, None])  # pooled probabilities
        gw = v @ (ly - np.einsum("ikc,ic->ik", logp, pz)) + a / np.maximum(w, 1e-300)
        gtheta = w * (gw - w @ gw)
        return -obj, -gtheta

    theta0 = np.log(np.clip(0.99 * w0 / w0.sum() + 0.01 / K, 1e-12, None))
    res = optimize.minimize(f, theta0, jac=True, method="L-BFGS-B", options={"maxiter": 200})
    return special.softmax(res.x)


class EnsembleOracle(OracleModel):
    """Prequential stacking of oracle models: the default oracle model of ``ActiveEvaluator``.

    Parameters
    ----------
    deterministic : bool
        One label per item (default) or a fresh label per draw; passed to every member.
    members : tuple of str
        Names of the member oracle models (default plug-in, calibration, Dirichlet tree). Members
        that cannot handle the pool (e.g. calibration on a multiclass pool) are left out.
    member_options : dict, optional
        ``{name: {option: value}}`` passed to the members.
    weighting : {"stacking", "bma"}
        How the prequential scores become weights (:func:`stacking_weights`).
    importance : bool
        Weight each item's score by its importance weight ``p/q`` (normalized to mean 1, capped at
        ``v_cap``), so the score is a pool average; ``False`` scores the draws as they fell.
    v_cap : float
        Cap on the normalized importance weights of the scores (bounds the influence of one item).
    prior : float
        ``α − 1``: pseudo-items of the symmetric Dirichlet prior on the stacking weights (and,
        with ``weights_by="prediction"``, the ``prior × K`` pseudo-items that shrink each cell's
        weights towards the pool-wide ones: a fixed strength, not a fitted hierarchical scale).
    refit_growth : float
        Refit the costly members when the labels have grown by this factor since their last fit
        (``0`` refits every stage).
    prior_weights : dict, optional
        ``{name: weight}``: the weights before any label and the centre of the Dirichlet prior
        (pseudo-counts ``prior × K × w0_k``); default equal. The first stage's labels cannot
        separate the members (all predicted them with the pool's own probabilities), so these
        weights shape the second stage's proposal.
    pooling : {"linear", "log"}
        ``"linear"`` (default): ``Σ_k w_k π_k``; ``"log"``: ``π ∝ Π_k π_k^{w_k}``
        (:func:`log_pool_weights`).
    weights_by : {"pool", "prediction"}
        ``"pool"`` (default): one set of weights for the whole pool. ``"prediction"``: one set
        per cell of the models' predictions (binary, one model: predicted positives and
        predicted negatives), each (200 warm-started EM iterations towards) the stacking MAP on
        the labeled items of its cell with the
        Dirichlet prior centred on the pool-wide weights (pseudo-counts ``prior × K × w_k``):
        hierarchical stacking with the prediction as the input (Yao, Pirš, Vehtari & Gelman
        (2022), "some models are (somewhere) useful"). A member that predicts one cell well
        and another badly then weighs only where it predicts well. With ``pooling="log"`` each
        cell's weights are the log pool's MAP (:func:`log_pool_weights`); ``weighting="bma"``
        has no prior to shrink with and is refused. A regression pool has one cell.
    model : str, optional
        Which model of the pool.

    Attributes
    ----------
    weights_ : ndarray (K,)
        The current pool-wide weights, in the order of :attr:`member_names`: after each update
        50 EM iterations towards the stacking MAP, warm-started from the previous weights
        (``0.99 w + 0.01/K``), an approximation of the MAP that moves towards it across updates
        (module docstring).
    cell_weights_ : ndarray (n_cells, K)
        The weights of each cell (``weights_by="prediction"``; one row, ``weights_``, otherwise).
        Rows follow the distinct tuples of the models' predicted class indices in sorted order:
        for one binary model, row 0 the predicted negatives and row 1 the predicted positives
        (a class no item is predicted to be has no row).
    """

    name = "auto"

    def __init__(
        self,
        *,
        deterministic: bool = True,
        members: tuple[str, ...] = DEFAULT_MEMBERS,
        member_options: dict[str, dict[str, Any]] | None = None,
        weighting: str = "stacking",
        importance: bool = True,
        v_cap: float = 20.0,
        prior: float = 1.0,
        refit_growth: float = 0.25,
        prior_weights: dict[str, float] | None = None,
        pooling: str = "linear",
        weights_by: str = "pool",
        model: str | None = None,
    ) -> None:
        if weighting not in ("stacking", "bma"):
            raise ValueError(f"weighting must be 'stacking' or 'bma', got {weighting!r}")
        if not members or any(not isinstance(m, str) for m in members):
            raise ValueError(f"members must be a non-empty tuple of oracle names, got {members!r}")
        if "auto" in members:
            raise ValueError("an ensemble cannot contain itself")
        for name, val in (("v_cap", v_cap), ("prior", prior), ("refit_growth", refit_growth)):
            if not (np.isfinite(val) and val >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {val!r}")
        if v_cap < 1:
            raise ValueError(f"v_cap must be >= 1, got {v_cap!r}")
        self.deterministic = bool(deterministic)
        self.members = tuple(members)
        self.member_options = {k: dict(v) for k, v in (member_options or {}).items()}
        unknown = set(self.member_options) - set(self.members)
        if unknown:
            raise ValueError(f"member_options for oracles not in members: {sorted(unknown)}")
        self.weighting = weighting
        self.importance = bool(importance)
        self.v_cap = float(v_cap)
        self.prior = float(prior)
        self.refit_growth = float(refit_growth)
        self.prior_weights = None if prior_weights is None else dict(prior_weights)
        if pooling not in ("linear", "log"):
            raise ValueError(f"pooling must be 'linear' or 'log', got {pooling!r}")
        self.pooling = pooling
        if weights_by not in ("pool", "prediction"):
            raise ValueError(f"weights_by must be 'pool' or 'prediction', got {weights_by!r}")
        if weights_by == "prediction" and weighting == "bma":
            raise ValueError(
                "weights_by='prediction' shrinks each cell's weights with the stacking prior, "
                "which weighting='bma' does not have: use weighting='stacking'"
            )
        self.weights_by = weights_by
        self.model = model

    # -- set-up ---------------------------------------------------------------------------------
    def initialize(self, pool, model: str | None = None) -> None:
        """Initialize every member that can handle the pool (at least one must)."""
        model = self.model if model is None else model
        self._members: list[OracleModel] = []
        self.member_names: list[str] = []
        errors = []
        failed: list[ValueError] = []  # chained below: a front end reads them
        for name in self.members:
            m = make_oracle(
                name, deterministic=self.deterministic, **self.member_options.get(name, {})
            )
            try:
                m.initialize(pool, model)
            except ValueError as exc:
                if model is None and len(pool.models) > 1:
                    try:  # a member that needs one model's scores: take the first
                        m.initialize(pool, pool.models[0])
                    except ValueError as exc2:
                        errors.append(f"{name}: {exc2}")
                        failed.append(exc2)
                        continue
                else:
                    errors.append(f"{name}: {exc}")
                    failed.append(exc)
                    continue
            self._members.append(m)
            self.member_names.append(name)
        if not self._members:
            raise ValueError(
                "no member oracle model can handle this pool: " + "; ".join(errors)
            ) from ExceptionGroup("the member oracle models' errors", failed)
        K = len(self._members)
        self.n_items = pool.n_items
        self.n_classes = pool.n_classes
        self.cache = LabelCache(self.n_items)
        self.n_updates = 0
        self._probs = [np.asarray(m.belief().probs, dtype=float) for m in self._members]
        self._scores = np.empty((0, K))  # prequential P_ik
        self._logp = np.empty((0, K, pool.n_classes))  # log-pooling: every class's log-prob
        self._ys = np.empty(0, dtype=np.int64)
        self._v = np.empty(0)  # raw importance weights of the scored items
        self._fit_n = np.zeros(K, dtype=np.int64)  # labels each member had at its last fit
        self._buf_idx = np.empty(0, dtype=np.int64)  # labels not yet given to the lazy members
        self._buf_y = np.empty(0, dtype=np.int64)
        self._buf_w = np.empty(0)
        self._buf_from = np.zeros(K, dtype=np.int64)  # first buffered label each member lacks
        self._n_seen = 0  # labels (deterministic: items; stochastic: draws) given to update
        w0 = np.full(K, 1.0 / K)
        if self.prior_weights is not None:
            w0 = np.array([float(self.prior_weights.get(n, 0.0)) for n in self.member_names])
            if not (np.all(w0 >= 0) and w0.sum() > 0):
                raise ValueError(f"prior_weights must be >= 0 with a positive sum: {w0}")
            w0 = w0 / w0.sum()
        self._w0 = w0
        self.weights_ = w0.copy()
        self._cell = self._cells(pool, model)
        self._n_cells = int(self._cell.max()) + 1
        self._scored_cell = np.empty(0, dtype=np.int64)
        self.cell_weights_ = np.tile(w0, (self._n_cells, 1))
        self._ready = True

    def _cells(self, pool, model: str | None) -> np.ndarray:
        """Each item's cell of the models' predictions (all zero for ``weights_by="pool"``)."""
        if self.weights_by == "pool" or not pool.is_classification:
            return np.zeros(pool.n_items, dtype=np.int64)
        models = pool.models if model is None else (pool.check_model(model),)
        preds = np.stack([np.asarray(pool.view(m).pred, dtype=np.int64) for m in models], axis=1)
        return np.unique(preds, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)

    def _cheap(self, k: int) -> bool:
        return self.member_names[k] == "model"

    # -- the OracleModel interface ------------------------------------------------------------------
    def update(self, indices, labels, weights=None) -> None:
        """Score the new labels under each member's current belief, refit the members that are
        due, and recompute the stacking weights."""
        self.check_ready()
        idx, y, w = check_update(indices, labels, weights, self.n_items, self.n_classes)
        if self.deterministic:
            before = self.cache.label[idx].copy()
            new_i, new_y = self.cache.add(idx, y)  # a conflicting label is refused first
            self.n_updates += 1
            if new_i.size == 0:
                return
            # the importance weight of each new item's first draw in this update
            first = {}
            for j, i in enumerate(idx.tolist()):
                if before[j] < 0 and i not in first:
                    first[i] = w[j]
            nw = np.array([first[i] for i in new_i.tolist()])
        else:
            self.n_updates += 1
            if idx.size == 0:
                return
            new_i, new_y, nw = idx, y, w
        P = np.stack([pr[new_i, new_y] for pr in self._probs], axis=1)
        self._scores = np.concatenate([self._scores, P])
        if self.pooling == "log":
            lp = np.stack([np.log(np.clip(pr[new_i], _TINY, 1.0)) for pr in self._probs], axis=1)
            self._logp = np.concatenate([self._logp, lp])
            self._ys = np.concatenate([self._ys, new_y])
        self._v = np.concatenate([self._v, nw])
        self._scored_cell = np.concatenate([self._scored_cell, self._cell[new_i]])
        self._buf_idx = np.concatenate([self._buf_idx, new_i])
        self._buf_y = np.concatenate([self._buf_y, new_y])
        self._buf_w = np.concatenate([self._buf_w, nw])
        self._n_seen += new_i.size
        self._refit_due()
        self._reweigh()

    def _refit_due(self) -> None:
        n = self._n_seen
        for k, m in enumerate(self._members):
            due = self._cheap(k) or n >= (1.0 + self.refit_growth) * self._fit_n[k]
            if not due or self._buf_from[k] >= n:
                continue
            sl = slice(int(self._buf_from[k]), n)
            m.update(self._buf_idx[sl], self._buf_y[sl], self._buf_w[sl])
            self._buf_from[k] = n
            self._fit_n[k] = n
            self._probs[k] = np.asarray(m.belief().probs, dtype=float)
        # labels every member has seen can leave the buffer
        drop = int(self._buf_from.min())
        if drop:
            self._buf_idx = self._buf_idx[drop:]
            self._buf_y = self._buf_y[drop:]
            self._buf_w = self._buf_w[drop:]
            self._buf_from -= drop

    def _score_weights(self) -> np.ndarray:
        if not self.importance or self._v.size == 0:
            return np.ones(self._v.size)
        v = self._v / self._v.mean()
        return np.minimum(v, self.v_cap)

    def _fit_weights(self, rows, v, centre, init, max_iter) -> np.ndarray:
        prior = self.prior * len(self._w0) * centre
        if self.pooling == "log":
            return log_pool_weights(self._logp[rows], self._ys[rows], v, prior=prior, init=init)
        return stacking_weights(
            self._scores[rows],
            v,
            prior=prior,
            method=self.weighting,
            init=init,
            max_iter=max_iter,
        )

    def _reweigh(self) -> None:
        # 50 (per cell 200) EM iterations from the previous weights: an approximation of the
        # stacking MAP (module docstring); not run to convergence, so that the default's committed
        # results stay reproducible
        v = self._score_weights()
        every = slice(None)
        self.weights_ = self._fit_weights(every, v, self._w0, self.weights_, 50)
        if self._n_cells == 1:
            self.cell_weights_ = self.weights_[None, :].copy()
            return
        for c in range(self.cell_weights_.shape[0]):
            rows = self._scored_cell == c
            if not rows.any():  # no label in the cell yet: the pool-wide weights
                self.cell_weights_[c] = self.weights_
                continue
            self.cell_weights_[c] = self._fit_weights(
                rows, v[rows], self.weights_, self.cell_weights_[c], 200
            )

    def belief(self) -> CategoricalBelief:
        """``Σ_k w_k π_k(y|x)`` (``w`` the weights of the item's cell; the log pool likewise); a
        deterministic oracle's labeled items get point masses."""
        self.check_ready()
        # (K,) pool-wide weights, or (n, K): each item's cell's weights
        w = self.weights_ if self._n_cells == 1 else self.cell_weights_[self._cell]
        w = w[None, :] if w.ndim == 1 else w
        if self.pooling == "log":
            z = w[:, :1] * np.log(np.clip(self._probs[0], _TINY, 1.0))
            for k in range(1, len(self._probs)):
                z += w[:, k : k + 1] * np.log(np.clip(self._probs[k], _TINY, 1.0))
            z -= z.max(axis=1, keepdims=True)
            probs = np.exp(z)
            probs /= probs.sum(axis=1, keepdims=True)
        else:
            probs = w[:, :1] * self._probs[0]
            for k in range(1, len(self._probs)):
                probs = probs + w[:, k : k + 1] * self._probs[k]
        if self.deterministic:
            self.cache.point_masses(probs)
        b = CategoricalBelief.__new__(CategoricalBelief)  # rows are convex combinations
        b.probs = probs
        b.n_items, b.n_classes = probs.shape
        return b

    @property
    def n_labels(self) -> int:
        """Labeled items (deterministic) or draws (stochastic) scored so far."""
        return int(self._scores.shape[0])

    @property
    def member_weights(self) -> dict[str, float]:
        """The current pool-wide weight of each member, by name (:attr:`cell_weights_` holds
        each cell's with ``weights_by="prediction"``)."""
        return {n: float(w) for n, w in zip(self.member_names, self.weights_, strict=True)}

    @property
    def member_oracles(self) -> dict[str, OracleModel]:
        """Each member oracle model, by name, as last fitted (``belief()`` gives its own belief;
        the ensemble's is their mixture with each item's cell's weights, :attr:`member_weights`
        for ``weights_by="pool"``)."""
        return dict(zip(self.member_names, self._members, strict=True))

    # -- state --------------------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return {
            "deterministic": self.deterministic,
            "members": list(self.member_names),
            "weighting": self.weighting,
            "pooling": self.pooling,
            "weights_by": self.weights_by,
            "n_items": self.n_items,
        }

    def get_state(self) -> dict[str, Any]:
        """Config, label cache, prequential scores, buffers and every member's own state."""
        self.check_ready()
        state: dict[str, Any] = {
            "oracle": self.name,
            "config": self.config(),
            "n_updates": self.n_updates,
            "scores": self._scores.copy(),
            "logp": self._logp.copy(),
            "ys": self._ys.copy(),
            "v": self._v.copy(),
            "fit_n": self._fit_n.copy(),
            "buf_idx": self._buf_idx.copy(),
            "buf_y": self._buf_y.copy(),
            "buf_w": self._buf_w.copy(),
            "buf_from": self._buf_from.copy(),
            "n_seen": self._n_seen,
            "weights": self.weights_.copy(),
            "cell_weights": self.cell_weights_.copy(),
            "scored_cell": self._scored_cell.copy(),
            "members": {
                n: m.get_state() for n, m in zip(self.member_names, self._members, strict=True)
            },
        }
        if self.deterministic:
            state.update(self.cache.get_state())
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state` output on a model initialized with the same pool."""
        self.check_ready()
        check_config(state, self.config(), ("n_items", "members", "deterministic", "weighting"))
        saved = state.get("config", {}).get("weights_by", "pool")  # states before the option
        if saved != self.weights_by:
            raise ValueError(
                f"state has weights_by={saved!r} but this oracle model has "
                f"weights_by={self.weights_by!r}; initialize it with the same pool and options"
            )
        self.n_updates = int(state.get("n_updates", 0))
        if self.deterministic:
            self.cache.set_state(state)
        K = len(self._members)
        self._scores = np.asarray(state["scores"], dtype=float).reshape(-1, K).copy()
        C = self.n_classes
        self._logp = np.asarray(state.get("logp", []), dtype=float).reshape(-1, K, C).copy()
        self._ys = np.asarray(state.get("ys", []), dtype=np.int64).copy()
        self._v = np.asarray(state["v"], dtype=float).copy()
        self._fit_n = np.asarray(state["fit_n"], dtype=np.int64).copy()
        self._buf_idx = np.asarray(state["buf_idx"], dtype=np.int64).copy()
        self._buf_y = np.asarray(state["buf_y"], dtype=np.int64).copy()
        self._buf_w = np.asarray(state["buf_w"], dtype=float).copy()
        self._buf_from = np.asarray(state["buf_from"], dtype=np.int64).copy()
        self._n_seen = int(state["n_seen"])
        for name, m in zip(self.member_names, self._members, strict=True):
            m.set_state(state["members"][name])
        self._probs = [np.asarray(m.belief().probs, dtype=float) for m in self._members]
        self.weights_ = np.asarray(state["weights"], dtype=float).copy()
        # a state from before weights_by has one cell (checked above) and none of these keys
        cw = np.asarray(state.get("cell_weights", self.weights_[None, :]), dtype=float)
        sc = state.get("scored_cell", np.zeros(self._scores.shape[0], dtype=np.int64))
        sc = np.asarray(sc, dtype=np.int64)
        if cw.shape != (self._n_cells, K) or sc.shape != (self._scores.shape[0],):
            raise ValueError(
                f"state has {cw.shape[0]} cells of predictions and {sc.size} scored cells, but "
                f"this pool has {self._n_cells} cells and the state {self._scores.shape[0]} "
                "scored labels; initialize it with the same pool and options"
            )
        self.cell_weights_ = cw.reshape(self._n_cells, K).copy()
        self._scored_cell = sc.copy()

    def __repr__(self) -> str:
        if not self._ready:
            return f"EnsembleOracle(members={self.members!r})"
        ws = ", ".join(f"{n}={w:.2f}" for n, w in self.member_weights.items())
        by = "" if self.weights_by == "pool" else f", weights_by={self.weights_by!r} (pool-wide)"
        return f"EnsembleOracle({ws}{by}, n_labels={self.n_labels})"


register_oracle("auto", EnsembleOracle)
