"""The Dirichlet-tree oracle model of Marchant & Rubinstein (2021), Sec. 4 and App. F-I.

The pool is cut into score strata (cumulative-sqrt(F) rule, 256 strata by default) that become the
leaves of a tree (a complete binary tree of depth 8 by default), ordered by score so that
neighbouring strata share a parent. The generative model (Sec. 4.1) is::

    θ ~ Dirichlet(α)                       global label distribution
    y_i | θ ~ Categorical(θ)               every pool item i
    ψ_y ~ DirichletTree(β_y; T)            a distribution over leaves for every class y
    k_i | y_i ~ Categorical(ψ_{y_i})       the stratum of item i

so that ``π(y | k) ∝ θ_y ψ_{yk}`` (Eq. 13). A Dirichlet-tree puts independent Dirichlet
distributions on the branch probabilities ``b_{yc}`` of every internal node; ``ψ_{yk}`` is the
product of the ``b`` along the path to leaf ``k`` (Eq. 10).

Priors (Sec. 5.2 with the reference code's +1 per leaf): with ``s(y|k)`` the
mean model probability of class ``y`` over stratum ``k`` and ``κ = prior_strength / K``,

- leaf pseudo-counts ``c_{yk} = κ s(y|k) + 1``;
- ``α_y = 1 + Σ_k (c_{yk} − 1)``;
- ``β_{yc} = λ level(c)² + Σ_{k under c} c_{yk}`` for every non-root node ``c`` (``λ`` the tree
  smoothing, 1 in the paper).

Deterministic oracle (App. F): EM toward the MAP of ``(θ, ψ)`` given the observed labels and the
strata of *all* pool items. E-step (Eq. 12): an unlabeled item of stratum ``k`` has expected label
``π(y|k)``; M-step: ``θ_y ∝ α̃_y − 1`` and ``b_{yc} ∝ β̃_{yc} − #leaves(c)`` (Eq. 11), which with the
+1 per leaf is ``λ level(c)² + κ Σ_{k under c} s(y|k) + counts`` — always positive. Labeled items
get a point mass in the belief. Inference conditions on the labels actually observed; with the
flat belief (``within_leaf="flat"``, the paper's) the selection of items depends only on the
strata and on labels already observed, so it is ignorable (Sec. 4.2): the importance weights are
not needed. With the tilt (the default, below) the proposal also varies *within* a leaf with the
model's own probability ``s_i``, which the leaf-level likelihood does not condition on: the
labeled items of a leaf are then not a random sample of it, and the MAP and posterior of
``π(y | k)`` lean towards the items the tilt favours. With the default 256 strata ``s`` hardly
varies within a leaf and no effect was seen; with coarse strata (4 strata in a scratch run) the
tilted MAP's expected positives in the pool were well above the flat one's and the truth.
The estimate is not affected (its importance weights keep it consistent whatever the belief);
the belief, hence the proposal's efficiency, and :meth:`~DirichletTreeOracle.posterior` are.

Stochastic oracle (App. H, Eq. 14-15): each draw carries a fresh label, the pool items are not the
units; the posterior predictive ``p(y | k, L) ∝ α̃_y Π_c (β̃_{yc} / Σ_{c'} β̃_{yc'})^{δ_c(k)}`` uses
importance-weighted counts ``α̃_y = α_y + Σ w 1[y' = y]``, ``β̃_{yc} = β_{yc} + Σ w 1[y' = y] δ_c(k')``,
so that ``α̃/N`` and ``β̃/N`` converge to the pool quantities ``E_p[1{Y = y}]`` and
``E_p[1{Y = y} δ_c(k_X)]`` although the draws come from ``q``.

Within-leaf belief (``within_leaf``). The model above is about leaves: every item of leaf ``k``
has the same predictive ``π(y | k)`` (``within_leaf="flat"``, the paper's Eq. 13), which throws
away the evaluated model's ordering of the items *inside* a leaf. ``within_leaf="tilt"`` (the
default) keeps the leaf-level model, its priors, its EM/MAP and stochastic updates and its full
posterior unchanged, and only redistributes each leaf's predictive mass among the leaf's unlabeled
items in proportion to the model's own probabilities ``s_i``: an exponential tilt

    π_i(y) ∝ s_i(y) exp(c_{ky}),   with   Σ_{i ∈ U_k} π_i(y) = |U_k| π(y | k)

(binary: ``π_i(1) = σ(c_k + logit s_i)``, ``c_k`` by safeguarded Newton over all leaves at
once; multiclass: per-class offsets by iterative proportional fitting). ``U_k`` is the leaf's
unlabeled items (all its items for a stochastic oracle). Leaf totals, hence the E-step of the EM
(Eq. 12, which only uses ``u_k π(y | k)``), the MAP and the posterior are exactly those of the flat
model; the tilt is the minimum-KL redistribution of each leaf's mass relative to ``s``. Whatever
the belief, the importance weights ``p/q`` keep the estimator consistent (Marchant & Rubinstein
(2021), Thm. 1), so the tilt can only change the variance.

Every per-stage operation is on stratum-level arrays (``K × C``) plus a few gathers and
``bincount`` reductions over the pool; no Python loop runs over pool items.

Layout: :mod:`.tree` (the tree over the strata), :mod:`.tilt` (the within-leaf tilt),
:mod:`.posterior` (the PyMC model and the exact conjugate posterior) and :mod:`.oracle`
(:class:`DirichletTreeOracle`: priors, EM, updates, state).
"""

from .oracle import DirichletTreeOracle
from .tilt import WITHIN_LEAF, tilt_offsets, tilt_offsets_binary
from .tree import Tree, build_tree

__all__ = [
    "WITHIN_LEAF",
    "DirichletTreeOracle",
    "Tree",
    "build_tree",
    "tilt_offsets",
    "tilt_offsets_binary",
]
