"""The Dirichlet-tree oracle model: priors, EM toward the MAP, stochastic updates, state.

The model, its priors and the within-leaf tilt are described in
:mod:`bayes_activeeval.oracles.dirichlet_tree`; the tree is built in :mod:`.tree`, the tilt solved
in :mod:`.tilt` and the full posteriors computed in :mod:`.posterior`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from ..._validation import check_rng
from ...beliefs import CategoricalBelief
from ...strata import score_strata
from .._common import (
    LabelCache,
    check_config,
    check_update,
    common_state,
    log_odds,
    prior_probs,
    restore_common_state,
    stratification_scores,
)
from ..base import OracleModel, register_oracle
from . import posterior as dt_posterior
from .tilt import LOGIT_CLIP, WITHIN_LEAF, leaf_ranges, tilt_offsets, tilt_offsets_binary
from .tree import TreeOps, build_tree, log_normalize_siblings, lse, lse_rows

__all__ = ["DirichletTreeOracle"]


class DirichletTreeOracle(OracleModel):
    """Dirichlet-tree model of the oracle (Marchant & Rubinstein (2021), Sec. 4, App. F, H).

    Parameters
    ----------
    n_strata : int
        Score strata (leaves) requested, cut by the cumulative-sqrt(F) rule (Sec. 5.2:
        ``K = 2^8``). Fewer result where bins are empty or (``histogram="fd"``) the walk runs
        out of bins.
    depth : int
        Tree depth (8: complete binary tree over 256 strata; 1: flat partition).
    deterministic : bool
        ``True``: one fixed label per item, EM/MAP updates and point masses (Sec. 4, App. F).
        ``False``: stochastic oracle, importance-weighted posterior predictive (App. H).
    prior_strength : float, optional
        Total prior weight of the model's probabilities, ``κ = prior_strength / K`` per stratum
        (default ``K``, as in the paper's experiments).
    tree_smoothing : float
        ``λ`` in ``β_{yc} = λ level(c)² + …``. Default ``0.01``; the paper's value is 1
        (Sec. 5.2). The ``λ level(c)²`` pseudo-counts are the same for every class, so for a rare
        class (a few dozen expected positives in the pool) ``λ = 1`` outweighs the model's own
        expected counts ``κ Σ s(y|k)`` and spreads the class evenly over the leaves a priori;
        ``benchmarks/results/adaptive_f1.md`` shows the effect. The paper's model is
        ``within_leaf="flat", tree_smoothing=1``.
    model : str, optional
        Which model of the pool supplies scores and prior probabilities.
    method : {"csf", "quantile"}
        Stratification rule (:func:`~bayes_activeeval.strata.score_strata`).
    histogram : {"fine", "fd"}
        ``"csf"``'s histogram (:func:`~bayes_activeeval.strata.score_strata`). ``"fd"``: the
        Freedman–Diaconis histogram and the walk over its bins with which the paper's
        experiments cut the leaves (their ``activeeval``; the peers' Ours-8). ``"fine"``
        (default): ``max(64 K, 4096)`` bins, which on a pool of 100,000 items gives nearly
        equal-size leaves (on ``febrl4_sub100_state_svm`` one leaf holds every predicted match
        and some predicted non-matches; ``"fd"`` gives them 19). The paper's model on the
        paper's leaves is ``within_leaf="flat", tree_smoothing=1, histogram="fd"``. Measured as
        the ``"auto"`` default's member, ``"fd"`` moved the real-pool MSE both ways
        (``docs/design.md``, "The tree's leaves"), so the default stays ``"fine"``.
    em_tol : float
        EM stops when no log-parameter moves more than this in an iteration (default ``1e-8``).
        EM converges linearly, so the distance left to the fixed point is about
        ``step / (1 − ρ)`` for a rate ``ρ``; where most of the information is missing ``ρ`` is
        close to 1, the step bounds the distance only loosely, and an update can stop at
        ``em_max_iter`` instead (the first timed update of ``test_stage_speed_large_pool``: 100
        labels on a pool of 10⁶ items).
    em_max_iter : int
        Cap on EM iterations per update (default 10000; SQUAREM-accelerated iterations count;
        ``em_iterations`` holds the last update's count).
    accelerate : bool
        Use SQUAREM extrapolation (Varadhan & Roland 2008) with a monotonicity safeguard. EM on a
        pool with few labels converges slowly (most of the information is missing); SQUAREM
        reaches the same fixed point in far fewer iterations.
    within_leaf : {"tilt", "flat"}
        How a leaf's predictive ``π(y | k)`` becomes item beliefs. ``"flat"``: every item of the
        leaf gets ``π(y | k)`` (Eq. 13, the paper). ``"tilt"`` (default): the leaf's mass over
        its unlabeled items, ``|U_k| π(y | k)``, is shared in proportion to the model's own
        probabilities, ``π_i(y) ∝ s_i(y) exp(c_{ky})`` (binary: ``σ(c_k + logit s_i)``), so the
        model's ordering inside a leaf is kept while the leaf-level model learns each leaf's
        level. Leaf totals, the EM/MAP, the stochastic updates and :meth:`posterior` are the
        same for both (the tilt concerns the predictive belief only).

    Attributes
    ----------
    strata : ndarray (n,)
        Stratum (leaf) of each pool item after :meth:`initialize`.
    stratum_probs : ndarray (K, C)
        Current ``π(y | k)`` per stratum.
    within_offsets : ndarray (K,) or (K, C)
        The tilt's per-leaf offsets ``c_k`` (binary) or ``c_{ky}`` (``within_leaf="tilt"``).
    """

    name = "dirichlet-tree"

    def __init__(
        self,
        n_strata: int = 256,
        depth: int = 8,
        *,
        deterministic: bool = True,
        prior_strength: float | None = None,
        tree_smoothing: float = 0.01,
        model: str | None = None,
        method: str = "csf",
        histogram: str = "fine",
        em_tol: float = 1e-8,
        em_max_iter: int = 10_000,
        accelerate: bool = True,
        within_leaf: str = "tilt",
    ) -> None:
        if (
            isinstance(n_strata, bool)
            or not isinstance(n_strata, (int, np.integer))
            or n_strata < 1
        ):
            raise ValueError(f"n_strata must be a positive integer, got {n_strata!r}")
        if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
            raise ValueError(f"depth must be a positive integer, got {depth!r}")
        if prior_strength is not None and not (np.isfinite(prior_strength) and prior_strength > 0):
            raise ValueError(f"prior_strength must be positive, got {prior_strength!r}")
        if not (np.isfinite(tree_smoothing) and tree_smoothing > 0):
            raise ValueError(f"tree_smoothing must be positive, got {tree_smoothing!r}")
        if method not in ("csf", "quantile"):
            raise ValueError(f"method must be 'csf' or 'quantile', got {method!r}")
        if histogram not in ("fine", "fd"):
            raise ValueError(f"histogram must be 'fine' or 'fd', got {histogram!r}")
        if within_leaf not in WITHIN_LEAF:
            raise ValueError(f"within_leaf must be 'tilt' or 'flat', got {within_leaf!r}")
        if not (np.isfinite(em_tol) and em_tol > 0):
            raise ValueError(f"em_tol must be positive, got {em_tol!r}")
        if (
            isinstance(em_max_iter, bool)
            or not isinstance(em_max_iter, (int, np.integer))
            or em_max_iter < 1
        ):
            raise ValueError(f"em_max_iter must be a positive integer, got {em_max_iter!r}")
        self.n_strata = int(n_strata)
        self.depth = int(depth)
        self.deterministic = bool(deterministic)
        self.prior_strength = None if prior_strength is None else float(prior_strength)
        self.tree_smoothing = float(tree_smoothing)
        self.model = model
        self.method = method
        self.histogram = histogram
        self.em_tol = float(em_tol)
        self.em_max_iter = int(em_max_iter)
        self.accelerate = bool(accelerate)
        self.within_leaf = within_leaf

    # -- set-up ---------------------------------------------------------------------------------
    def initialize(self, pool, model: str | None = None) -> None:
        """Stratify the pool, build the tree and set the priors (Marchant & Rubinstein (2021), Sec. 5.2 and App. I)."""
        model = self.model if model is None else model
        self.model = pool.check_model(model)
        scores = stratification_scores(pool, self.model)
        s = prior_probs(pool, self.model)
        strata, edges = score_strata(
            scores, self.n_strata, method=self.method, histogram=self.histogram
        )
        self._init_arrays(strata, s, classes=pool.classes)
        self.edges = edges

    def _init_arrays(self, strata: np.ndarray, s: np.ndarray, classes=None) -> None:
        strata = np.asarray(strata, dtype=np.int64)
        K = int(strata.max()) + 1
        n, C = s.shape
        self.strata = strata
        self.n_items, self.n_classes, self.K = n, C, K
        self.classes = np.arange(C) if classes is None else np.asarray(classes)
        self.tree = build_tree(K, self.depth)
        self._ops = TreeOps(self.tree)
        self.sizes = np.bincount(strata, minlength=K).astype(float)
        # s(y|k): mean model probability per stratum
        flat = strata[:, None] * C + np.arange(C)[None, :]
        sk = np.bincount(flat.ravel(), weights=s.ravel(), minlength=K * C).reshape(K, C)
        sk = sk / np.maximum(self.sizes, 1.0)[:, None]
        # keep every class possible a priori (a model that never predicts a class would otherwise
        # give θ_y = 0 and rule the class out before any label)
        sk = np.maximum(sk, 1e-9)
        self.stratum_prior_probs = sk / sk.sum(axis=1, keepdims=True)
        strength = float(K) if self.prior_strength is None else self.prior_strength
        kappa = strength / K
        leaf_extra = kappa * self.stratum_prior_probs  # c_{yk} - 1
        self.alpha = 1.0 + leaf_extra.sum(axis=0)  # α_y
        lv = self.tree.level[1:].astype(float)
        # a_{yc} = β_{yc} - #leaves(c) = λ level(c)^2 + κ Σ_{k under c} s(y|k)   (MAP weight)
        self.a_map = self.tree_smoothing * lv[:, None] ** 2 + self.tree.path @ leaf_extra
        self.beta = self.a_map + self.tree.leaves_under[:, None]  # β_{yc}
        self._a_sib = self._ops.sibling_sum(self.a_map)
        self.obs = np.zeros((K, C))  # labeled counts (deterministic) / weighted counts (stochastic)
        self.cache = LabelCache(n)
        if self.within_leaf == "tilt":
            if C == 2:
                self._item_logit = np.clip(log_odds(s, 1), -LOGIT_CLIP, LOGIT_CLIP)
                self._logit_min, self._logit_max = leaf_ranges(strata, self._item_logit, K)
                self.within_offsets = np.zeros(K)
            else:
                self._item_log_s = np.maximum(np.log(np.maximum(s, 1e-300)), -2 * LOGIT_CLIP)
                self.within_offsets = np.zeros((K, C))
            # 1 for items sharing their leaf's mass (unlabeled; every item if stochastic)
            self._unlabeled_mask = np.ones(n) if self.deterministic else None
        self.n_updates = 0
        self.n_draws = 0
        self.em_iterations = 0
        self._ready = True
        if self.deterministic:
            self.log_theta, self.log_branch = self._prior_mode()
            self._run_em()
        else:
            self._stochastic_refresh()

    # -- deterministic oracle: EM toward the MAP (App. F) ---------------------------------------
    def _prior_mode(self) -> tuple[np.ndarray, np.ndarray]:
        log_theta = np.log(self.alpha - 1.0 + 1e-300)
        log_theta -= lse(log_theta)
        log_b = log_normalize_siblings(self._ops, np.log(self.a_map + 1e-300))
        return log_theta, log_b

    def _log_joint(self, log_theta, log_b) -> np.ndarray:
        """``log θ_y ψ_{yk}``, shape (K, C) (Eq. 10)."""
        if log_b.size:
            return self._ops.path_t @ log_b + log_theta[None, :]
        return np.zeros((self.K, self.n_classes)) + log_theta[None, :]

    def _unlabeled(self) -> np.ndarray:
        return self.sizes - self.obs.sum(axis=1)

    def _em_map(self, lt, lb, u, objective: bool = True):
        """One EM iteration (App. F: E-step Eq. 12, M-step Eq. 10-11) from normalized
        parameters; also returns the log posterior at the input (it shares the E-step's work)."""
        lj = self._log_joint(lt, lb)
        lse = lse_rows(lj)
        f = (
            float(
                np.sum(self.obs * lj)
                + u @ lse[:, 0]
                + (self.alpha - 1.0) @ lt
                + np.sum(self.a_map * lb)
            )
            if objective
            else np.nan
        )
        N = self.obs + u[:, None] * np.exp(lj - lse)
        t = (self.alpha - 1.0) + N.sum(axis=0)
        new_theta = np.log(t) - np.log(t.sum())
        if lb.size:
            ops = self._ops
            cs = ops.cumulative(N)
            w = self.a_map + (cs[ops.hi] - cs[ops.lo])
            new_b = np.log(w) - np.log(self._a_sib + (cs[ops.phi] - cs[ops.plo]))
        else:
            new_b = lb
        return new_theta, new_b, f

    def _em_step(self, log_theta, log_b):
        """One EM iteration (App. F)."""
        nt, nb, _ = self._em_map(log_theta, log_b, self._unlabeled())
        return nt, nb

    def log_posterior(self, log_theta=None, log_branch=None) -> float:
        """Observed-data log posterior of ``(θ, ψ)`` up to a constant (deterministic oracle).

        ``Σ_{k,y} n^obs_{ky} log θ_y ψ_{yk} + Σ_k u_k log Σ_y θ_y ψ_{yk} + Σ_y (α_y − 1) log θ_y +
        Σ_{c,y} (β_{yc} − #leaves(c)) log b_{yc}`` with ``u_k`` the unlabeled items of stratum
        ``k``: the density (in ``ψ``-space, Minka's Dirichlet-tree density) whose mode EM finds
        (Marchant & Rubinstein (2021), App. F).
        """
        self.check_ready()
        lt = self.log_theta if log_theta is None else np.asarray(log_theta, dtype=float)
        lb = self.log_branch if log_branch is None else np.asarray(log_branch, dtype=float)
        lj = self._log_joint(lt, lb)
        val = float(np.sum(self.obs * lj))
        val += float(np.sum(self._unlabeled() * lse(lj, axis=1)))
        val += float(np.sum((self.alpha - 1.0) * lt)) + float(np.sum(self.a_map * lb))
        return val

    def _run_em(self) -> None:
        """EM to convergence from the current (warm-start) parameters, SQUAREM-accelerated
        (Varadhan & Roland 2008, scheme S3, with the extrapolated point rejected whenever its log
        posterior falls below the cycle's start, so the iteration stays monotone like EM)."""
        lt, lb = self.log_theta, self.log_branch
        u = self._unlabeled()
        C = self.n_classes
        it = 0
        if not self.accelerate:
            while it < self.em_max_iter:
                nt, nb, _ = self._em_map(lt, lb, u)
                it += 1
                delta = max(np.max(np.abs(nt - lt)), np.max(np.abs(nb - lb), initial=0.0))
                lt, lb = nt, nb
                if delta < self.em_tol:
                    break
        else:
            while it < self.em_max_iter:
                t1, b1, f0 = self._em_map(lt, lb, u)
                t2, b2, _ = self._em_map(t1, b1, u, objective=False)
                it += 2
                r = np.concatenate([t1 - lt, (b1 - lb).ravel()])
                if np.max(np.abs(r)) < self.em_tol:
                    lt, lb = t1, b1
                    break
                v = np.concatenate([t2 - t1, (b2 - b1).ravel()]) - r
                nv = np.linalg.norm(v)
                alpha = min(-np.linalg.norm(r) / nv, -1.0) if nv > 0 else -1.0
                x0 = np.concatenate([lt, lb.ravel()])
                xs = x0 - 2 * alpha * r + alpha**2 * v
                ts = xs[:C] - lse(xs[:C])
                bs = log_normalize_siblings(self._ops, xs[C:].reshape(-1, C))
                tn, bn, fs = self._em_map(ts, bs, u)
                it += 1
                if not np.isfinite(fs) or fs < f0:
                    tn, bn = t2, b2  # rejected extrapolation: keep the plain EM iterate
                step = max(np.max(np.abs(tn - lt)), np.max(np.abs(bn - lb), initial=0.0))
                lt, lb = tn, bn
                if step < self.em_tol:
                    break
        self.log_theta, self.log_branch = lt, lb
        self.em_iterations = it
        lj = self._log_joint(lt, lb)
        self.stratum_probs = np.exp(lj - lse(lj, axis=1, keepdims=True))
        self._fit_within()

    # -- stochastic oracle: weighted posterior predictive (App. H) -------------------------------
    def _stochastic_refresh(self) -> None:
        """Posterior predictive (Marchant & Rubinstein (2021), App. H, Eq. 14) per stratum."""
        at = self.alpha + self.obs.sum(axis=0)
        if self.tree.n_nodes > 1:
            bt = self.beta + self._ops.path @ self.obs
            log_b = np.log(bt) - np.log(self._ops.sibling_sum(bt))
        else:
            log_b = np.zeros((0, self.n_classes))
        self.log_theta = np.log(at) - np.log(at.sum())
        self.log_branch = log_b
        lj = self._log_joint(self.log_theta, log_b)
        self.stratum_probs = np.exp(lj - lse(lj, axis=1, keepdims=True))
        self._fit_within()

    # -- within-leaf belief ------------------------------------------------------------------------
    def _fit_within(self) -> None:
        """Solve the tilt's offsets for the current ``π(y | k)`` (warm-started)."""
        if self.within_leaf != "tilt":
            return
        if self.n_classes == 2:
            self.within_offsets = tilt_offsets_binary(
                self._item_logit,
                self.strata,
                self._unlabeled_mask,
                self.stratum_probs[:, 1],
                self._logit_min,
                self._logit_max,
                start=self.within_offsets,
            )
        else:
            self.within_offsets = tilt_offsets(
                self._item_log_s,
                self.strata,
                self._unlabeled_mask,
                self.stratum_probs,
                start=self.within_offsets,
            )

    def _item_probs(self) -> np.ndarray:
        """Item-level ``π_i(y)`` before the point masses of labeled items, shape (n, C)."""
        if self.within_leaf == "flat":
            return self.stratum_probs[self.strata]
        if self.n_classes == 2:
            p1 = special.expit(self.within_offsets[self.strata] + self._item_logit)
            return np.stack([1.0 - p1, p1], axis=1)
        z = self._item_log_s + self.within_offsets[self.strata]
        z -= z.max(axis=1, keepdims=True)
        P = np.exp(z)
        P /= P.sum(axis=1, keepdims=True)
        return P

    # -- the OracleModel interface ----------------------------------------------------------------
    def update(self, indices, labels, weights=None) -> None:
        """Condition on labeled draws.

        Deterministic oracle: new items' labels enter the counts once (repeats are free and carry
        no new information), then EM runs to convergence warm-started from the last stage
        (App. F); ``weights`` are checked but not needed (ignorable selection, Sec. 4.2, given
        the strata; with ``within_leaf="tilt"`` and coarse strata the selection within a leaf
        also depends on the model's scores, which the leaf likelihood ignores: see
        :mod:`bayes_activeeval.oracles.dirichlet_tree`).
        Stochastic oracle: every draw adds its importance weight ``p/q`` to the counts of its
        label along its path (App. H, bias-corrected Eq. 15).
        """
        self.check_ready()
        idx, y, w = check_update(indices, labels, weights, self.n_items, self.n_classes)
        if self.deterministic:  # a conflicting label is refused before anything changes
            new_i, new_y = self.cache.add(idx, y)
        self.n_updates += 1
        self.n_draws += int(idx.size)
        C = self.n_classes
        if self.deterministic:
            if new_i.size and self.within_leaf == "tilt":
                self._unlabeled_mask[new_i] = 0.0
            if new_i.size:
                self.obs += np.bincount(
                    self.strata[new_i] * C + new_y, minlength=self.K * C
                ).reshape(self.K, C)
                self._run_em()
        else:
            if idx.size:
                self.obs += np.bincount(
                    self.strata[idx] * C + y, weights=w, minlength=self.K * C
                ).reshape(self.K, C)
            self._stochastic_refresh()

    def belief(self) -> CategoricalBelief:
        """The item beliefs: ``π(y | k_x)`` (Eq. 13/14) for ``within_leaf="flat"``, the tilted
        ``π_i(y) ∝ s_i(y) exp(c_{k_x y})`` (same leaf totals) for ``"tilt"``; point masses on
        labeled items (deterministic oracle)."""
        self.check_ready()
        probs = self._item_probs()
        if self.deterministic:
            self.cache.point_masses(probs)
        return CategoricalBelief(probs)

    @property
    def theta(self) -> np.ndarray:
        """Current ``θ`` (MAP for a deterministic oracle, posterior mean for a stochastic one)."""
        return np.exp(self.log_theta)

    def epsilon_factor(self) -> float:
        """The ``ε_t/ε_0`` of Marchant & Rubinstein (2021): the unlabeled fraction (Prop. 3) for a
        deterministic oracle, ``1/(t + 1)`` after ``t`` updates (Prop. 5) for a stochastic one."""
        self.check_ready()
        if self.deterministic:
            return 1.0 - self.cache.n_labeled / self.n_items
        return 1.0 / (self.n_updates + 1)

    # -- state ------------------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return {
            "n_strata": self.n_strata,
            "depth": self.depth,
            "deterministic": self.deterministic,
            "prior_strength": self.prior_strength,
            "tree_smoothing": self.tree_smoothing,
            "method": self.method,
            "histogram": self.histogram,
            "model": self.model,
            "within_leaf": self.within_leaf,
            "n_items": self.n_items,
            "n_leaves": self.K,
            "n_classes": self.n_classes,
        }

    def get_state(self) -> dict[str, Any]:
        """Everything :meth:`set_state` needs: config, labels or weighted counts, EM parameters."""
        state = common_state(self)
        state["n_draws"] = self.n_draws
        state["em_iterations"] = self.em_iterations
        state["log_theta"] = self.log_theta.copy()
        state["log_branch"] = self.log_branch.copy()
        if self.within_leaf == "tilt":
            state["within_offsets"] = self.within_offsets.copy()
        if not self.deterministic:
            state["counts"] = self.obs.copy()
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state` output on a model initialized with the same pool and options.

        A state saved with other options that change the leaf-level model is refused with the
        option named: the pool's size, leaves, classes, ``depth``, ``deterministic``,
        ``n_strata``, ``method``, ``histogram`` and ``model`` (the strata), ``prior_strength``
        (``None`` counts as its default ``K``) and ``tree_smoothing`` (the priors: the saved MAP
        under other priors, continued under these, is the MAP of neither). A state saved before
        an option was stored skips its check. ``within_leaf`` may differ: the saved leaf-level
        fit is the same for ``"tilt"`` and ``"flat"``, and a ``"tilt"`` model restoring a state
        without offsets solves them afresh.
        """
        self.check_ready()
        cfg = state.get("config", {})
        keys = (  # the options first: a state from other strata names them, not n_leaves
            "n_items",
            "n_classes",
            "depth",
            "deterministic",
            "n_strata",
            "method",
            "histogram",
            "model",
            "tree_smoothing",
            "n_leaves",
        )
        check_config(state, self.config(), keys)  # before anything is restored
        if "prior_strength" in cfg and "n_leaves" in cfg:
            mine = self.K if self.prior_strength is None else self.prior_strength
            saved = cfg["n_leaves"] if cfg["prior_strength"] is None else cfg["prior_strength"]
            if float(saved) != float(mine):
                raise ValueError(
                    f"state has prior_strength={cfg['prior_strength']!r} but this oracle model "
                    f"has prior_strength={self.prior_strength!r} (total prior weight {saved!r} "
                    f"against {mine!r}); initialize it with the same pool and options"
                )
        restore_common_state(self, state, keys)
        C = self.n_classes
        self.n_draws = int(state.get("n_draws", 0))
        self.em_iterations = int(state.get("em_iterations", 0))
        if self.deterministic:
            items = self.cache.items
            self.obs = (
                np.bincount(self.strata[items] * C + self.cache.label[items], minlength=self.K * C)
                .reshape(self.K, C)
                .astype(float)
            )
        else:
            self.obs = np.asarray(state["counts"], dtype=float).reshape(self.K, C).copy()
        self.log_theta = np.asarray(state["log_theta"], dtype=float).copy()
        self.log_branch = np.asarray(state["log_branch"], dtype=float).reshape(-1, C).copy()
        lj = self._log_joint(self.log_theta, self.log_branch)
        self.stratum_probs = np.exp(lj - lse(lj, axis=1, keepdims=True))
        if self.within_leaf == "tilt":
            if self.deterministic:
                self._unlabeled_mask = np.ones(self.n_items)
                self._unlabeled_mask[self.cache.items] = 0.0
            saved = state.get("within_offsets")
            shape = self.within_offsets.shape
            self.within_offsets = np.zeros(shape)
            if saved is not None and np.asarray(saved).size == self.within_offsets.size:
                self.within_offsets = np.asarray(saved, dtype=float).reshape(shape).copy()
            else:  # a state saved without the tilt (e.g. by a "flat" oracle): solve afresh
                self._fit_within()

    # -- full posteriors --------------------------------------------------------------------------
    def pymc_model(self):
        """The same model in PyMC: ``θ ~ Dirichlet(α)``, a Dirichlet per internal node and class
        on the branch probabilities (the Dirichlet-tree, Eq. 10), and the data as a potential.

        Deterministic oracle: the observed-data likelihood ``Σ n^obs_{ky} log θ_y ψ_{yk} +
        Σ_k u_k log Σ_y θ_y ψ_{yk}`` (the unobserved labels summed out). Stochastic oracle: the
        importance-weighted counts ``Σ w_{ky} log θ_y ψ_{yk}`` (App. H), which is conjugate.
        """
        self.check_ready()
        return dt_posterior.pymc_model(
            self.tree,
            self.alpha,
            self.beta,
            self.obs,
            self.classes,
            unlabeled=self._unlabeled() if self.deterministic else None,
        )

    def posterior(
        self,
        draws: int = 1000,
        rng: Any = None,
        *,
        method: str = "auto",
        tune: int | None = None,
        chains: int = 2,
    ):
        """The full posterior of ``θ``, the branch probabilities and ``π(y | k)`` as a DataTree.

        This is the posterior of the leaf-level model, the same function of the labels for
        ``within_leaf="tilt"`` and ``"flat"``: the tilt only maps the leaf-level predictive to
        item beliefs (a deterministic redistribution that preserves each leaf's total), so it
        changes no likelihood term. It does change which items get labeled: under the tilt the
        proposal varies within a leaf with the model's scores, which this likelihood does not
        condition on, so the selection is not ignorable for it and the posterior leans towards
        the items the tilt favours — no effect measured at the default 256 strata, a clear one
        with 4 (:mod:`bayes_activeeval.oracles.dirichlet_tree`, "Deterministic oracle").

        Parameters
        ----------
        draws : int
            Posterior draws per chain.
        rng : None, int or Generator
        method : {"auto", "nuts", "exact"}
            ``"exact"``: independent Dirichlet draws from the conjugate posterior (stochastic
            oracle only: ``θ ~ Dir(α̃)``, ``b_ν ~ Dir(β̃_ν)``, App. H Eq. 15) wrapped with
            :func:`arviz_base.from_dict`. ``"nuts"``: :meth:`pymc_model` sampled with
            ``pm.sample``. ``"auto"``: exact when conjugate (stochastic), NUTS otherwise.
        tune : int, optional
            NUTS tuning steps (default ``draws``).
        chains : int
            Chains (run sequentially, ``cores=1``).

        Returns
        -------
        xarray.DataTree
            Group ``posterior`` with ``theta`` (class), ``branch`` (node, class) and ``pi``
            (stratum, class); ``arviz.summary`` works on it.
        """
        self.check_ready()
        if method not in ("auto", "nuts", "exact"):
            raise ValueError(f"method must be 'auto', 'nuts' or 'exact', got {method!r}")
        if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 1:
            raise ValueError(f"draws must be a positive integer, got {draws!r}")
        if method == "auto":
            method = "nuts" if self.deterministic else "exact"
        gen = check_rng(rng)
        if method == "exact":
            if self.deterministic:
                raise ValueError(
                    "the deterministic-oracle posterior is not conjugate (unlabeled items are a "
                    "mixture); use method='nuts'"
                )
            return dt_posterior.exact_posterior(
                self.tree,
                self.alpha,
                self.beta,
                self.obs,
                self.classes,
                int(draws),
                int(chains),
                gen,
            )
        import pymc as pm

        seed = int(gen.integers(2**31 - 1))
        with self.pymc_model():
            return pm.sample(
                draws=int(draws),
                tune=int(draws if tune is None else tune),
                chains=int(chains),
                cores=1,
                random_seed=seed,
                progressbar=False,
                compute_convergence_checks=False,
            )

    def exact_posterior_mean(self) -> dict[str, np.ndarray]:
        """Closed-form posterior quantities (stochastic oracle; conjugate): the means of ``θ`` and
        of the branch probabilities, and the posterior predictive ``p(y | k, L) ∝ E[θ_y ψ_{yk}] =
        E[θ_y] Π_c E[b_{yc}]^{δ_c(k)}`` (App. H, Eq. 14), which is what :meth:`belief` returns."""
        self.check_ready()
        if self.deterministic:
            raise ValueError("closed-form posterior means exist for the stochastic oracle only")
        at = self.alpha + self.obs.sum(axis=0)
        out = {"theta": at / at.sum(), "predictive": self.stratum_probs.copy()}
        if self.tree.n_nodes > 1:
            bt = self.beta + self.tree.path @ self.obs
            out["branch"] = bt / (self.tree.siblings @ bt)
        return out

    def __repr__(self) -> str:
        kind = "deterministic" if self.deterministic else "stochastic"
        extra = f", n_leaves={self.K}, n_labeled={self.cache.n_labeled}" if self._ready else ""
        return (
            f"DirichletTreeOracle(n_strata={self.n_strata}, depth={self.depth}, {kind}, "
            f"within_leaf={self.within_leaf!r}{extra})"
        )


register_oracle("dirichlet-tree", DirichletTreeOracle)
