"""Generalized performance measures ``G = g(R)``, ``R = E_p[ℓ(x, y)]``.

Every target the package estimates is a *generalized measure* (Marchant & Rubinstein (2021),
Def. 1): a vector loss ``ℓ(x, y) ∈ R^d`` averaged over the test distribution and mapped through a
smooth ``g: R^d → R^m`` with Jacobian ``Dg``.  Sawade's generalized risk (Sawade (2012), Eq. 3.27),
a weighted loss ``E[w·loss]/E[w]``, is the special case ``ℓ = (w·loss, w)``, ``g = R1/R2``.

The built-in measures give ``ℓ``, ``g`` and ``Dg`` in closed form (Marchant & Rubinstein (2021),
Tables 1-2); a custom measure needs only ``ℓ`` and ``g`` (the Jacobian then comes from central
finite differences).

A loss is called as ``loss(y, view)``: ``y`` holds candidate labels as the pool encodes them
(class indices ``0..C-1`` for classification, floats for regression) and ``view`` is a
:class:`ModelView` of the evaluated model on the same items.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validation import MissingInput, check_model_names

__all__ = [
    "ClassParts",
    "FBeta",
    "Measure",
    "ModelView",
    "available",
    "difference",
    "get",
    "stack",
]


UNIT = (0.0, 1.0)
NONNEG = (0.0, np.inf)


@dataclass(frozen=True)
class ModelView:
    """What a loss function may read about one model on a set of items.

    Parameters
    ----------
    pred : ndarray, shape (n,)
        The model's predictions on the items: class indices or real values.
    prob : ndarray, shape (n, C), optional
        The model's class probabilities (default ``None``: not available).
    std : ndarray, shape (n,), optional
        The model's predictive standard deviation, for regression (default ``None``).
    score : ndarray, shape (n,), optional
        The model's raw scores (default ``None``).
    pos : int, optional
        Index of the positive class among the pool's classes (default ``None``: none).
    n_classes : int, optional
        Number of classes (default ``0``, as for regression).

    Attributes
    ----------
    pred : ndarray, shape (n,)
        Predictions: class indices ``0..C-1`` (classification) or real values (regression).
    prob : ndarray, shape (n, C) or None
        The model's class probabilities, columns ordered as ``pool.classes``.
    std : ndarray, shape (n,) or None
        The model's predictive standard deviation (regression).
    score : ndarray, shape (n,) or None
        Raw scores, if the pool has them.
    pos : int or None
        Index of the positive class (binary measures).
    n_classes : int
        Number of classes (0 for regression).
    """

    pred: np.ndarray
    prob: np.ndarray | None = None
    std: np.ndarray | None = None
    score: np.ndarray | None = None
    pos: int | None = None
    n_classes: int = 0

    def positive_prob(self) -> np.ndarray:
        """``P(y = pos | x)`` according to the model (binary measures such as Brier)."""
        if self.prob is None:
            raise MissingInput("this measure needs the model's probabilities: ", "probs")
        return self.prob[:, self._pos()]

    def _pos(self) -> int:
        if self.pos is None:
            raise ValueError(
                "this measure needs a positive class: give the pool pos_label= "
                "(binary classes other than {0, 1} have no default)"
            )
        return self.pos


@dataclass(frozen=True)
class ClassParts:
    """The per-class ratios an averaged measure is a linear combination of, at one ``R``.

    Balanced accuracy and the macro averages are means of per-class ratios
    ``θ_k = R_tp[k] / R_den[k]`` (recall, precision, one-vs-rest F1). Their interval combines an
    interval per class (MOVER, Zou & Donner (2008);
    :func:`~bayes_activeeval.intervals.mover`), which needs the ratios themselves, not only
    their average: a class whose ratio sits at 0 or 1 has zero delta-method variance and would
    otherwise drop out of the interval.

    Parameters
    ----------
    values : ndarray (K,)
        ``θ̂_k``, each part at ``R`` (a class with a zero denominator: the value ``g`` gives it —
        0 for the macro averages, scikit-learn's ``zero_division=0``; the mean of the other
        classes for balanced accuracy, which averages over the classes present).
    jacobian : ndarray (K, d)
        ``Dθ_k(R)``; NaN on the components a part reads where its denominator is 0 (no draw
        carries it: its interval is ``[low_k, high_k]``).
    average : ndarray (m, K)
        How the outputs move with the parts: ``G_o − Ĝ_o ≈ Σ_k average[o, k] (θ_k − θ̂_k)``
        (``1/C`` for a macro mean; ``± 1/C`` blocks for a difference of two models). For
        balanced accuracy with classes no draw carries, the ``P`` carried classes weigh ``1/P``
        (``Ĝ`` is their mean, and a class no draw carries is filled with it) and each class no
        draw carries ``1/(P + 1)``, what it would weigh if it occurred.
    bounds : tuple of float
        The range of each part (default ``(0, 1)``).
    low, high : ndarray (K,), optional
        What the pool already tells about each part: it lies in ``[low_k, high_k]`` (default
        ``bounds``). A class the model predicts nowhere in the pool has precision, recall and
        F1 exactly 0 (``low = high = 0``); its balanced-accuracy part, when no draw carries the
        class, lies in ``[0, θ̄]`` (recall 0 if the class occurs, dropped if not). Set by
        :meth:`Measure.class_parts` from the pool's predictions (:meth:`Measure.with_predicted`).
    kind : {"precision", "recall", "f1"} or None, optional
        Which one-vs-rest ratio every part is: set by the macro averages (``"recall"`` also by
        balanced accuracy, macro recall over the classes present) and kept by their stacks and
        differences; ``None`` (the default) for a measure's own parts. A part of kind ``"f1"``
        at 0 has the upper limit ``2J_U/(1 + J_U)``, ``F1 = 2J/(1 + J)`` at the upper limit
        ``J_U`` of its true-positive share (:meth:`Estimate.confidence_interval
        <bayes_activeeval.Estimate.confidence_interval>`).
    """

    values: np.ndarray
    jacobian: np.ndarray
    average: np.ndarray
    bounds: tuple[float, float] = (0.0, 1.0)
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    kind: str | None = None

    def limits(self) -> tuple[np.ndarray, np.ndarray]:
        """``(low, high)`` as arrays ``(K,)`` (``bounds`` where not set)."""
        K = np.asarray(self.values).size
        lo = np.full(K, self.bounds[0]) if self.low is None else np.asarray(self.low, float)
        hi = np.full(K, self.bounds[1]) if self.high is None else np.asarray(self.high, float)
        return lo, hi


LossFn = Callable[[np.ndarray, Any], np.ndarray]
GFn = Callable[[np.ndarray], np.ndarray]


class Measure:
    """A generalized measure ``G = g(R)``, ``R = E_p[ℓ]`` (Marchant & Rubinstein (2021), Def. 1).

    Parameters
    ----------
    name : str
        Short name (``"f1"``).
    loss : callable
        ``loss(y, view) -> ndarray (n, d)``: the vector loss of every item for the candidate labels
        ``y`` (shape ``(n,)``). ``view`` is a :class:`ModelView` (or, for a measure bound to several
        models, a dict of them keyed by model name).
    g : callable, optional
        ``g(R) -> ndarray (m,)`` for ``R`` of shape ``(d,)``. Default: identity.
    jacobian : callable, optional
        ``jacobian(R) -> ndarray (m, d)``. Default: central finite differences of ``g``.
    components : sequence of str or callable
        Names of the ``d`` loss components, or ``components(n_classes) -> sequence`` for measures
        whose ``d`` depends on the number of classes (resolved by :meth:`resolve`).
    outputs : sequence of str, optional
        Names of the ``m`` outputs of ``g``. Default: ``[name]``.
    task : {"binary", "classification", "regression", "any"}
        Which pools the measure applies to ("classification" covers binary and multiclass).
    greater_is_better : bool
        ``True`` for scores (accuracy, F1), ``False`` for errors and losses.
    scale_invariant : bool
        ``True`` when ``g(cR) = g(R)`` for ``c > 0`` (ratios such as precision). For such measures
        items whose loss is zero for every label carry no information, and a proposal may give
        them zero mass.
    models : tuple of str, optional
        Set by :func:`difference` and :func:`stack`: the models this measure is bound to.
    bounds : tuple of float
        The range of ``g`` (e.g. ``(0, 1)`` for F1), used by transformed-scale intervals.
    tabular : bool
        ``True`` when the loss depends on an item only through the predicted class(es) and the
        label (``view.pred``, ``view.pos``, ``view.n_classes``): the loss is then a small table
        over (prediction, label) and the proposal kernels take an exact O(n·C) fast path.
    affine : bool, optional
        ``True`` when ``g`` is affine (``Dg`` constant): a plain risk such as accuracy or the error
        rate, their stacks and differences. Default: ``True`` exactly when ``g`` is the identity.
        The adaptive difference estimate of such a measure is a weighted count of labeled events
        plus a control variate, which its bound rule and gamma interval rely on
        (:func:`~bayes_activeeval.estimators.difference_estimate`); declare it for a custom
        affine ``g``.
    class_parts : callable, optional
        ``class_parts(R, predicted) -> ClassParts``: for a measure that is an average of
        per-class ratios (balanced accuracy, the macro averages, their stacks and differences),
        those ratios and the averaging weights; the score-type intervals then combine per-class
        intervals by MOVER (:func:`~bayes_activeeval.intervals.mover`). ``predicted`` is
        :attr:`predicted` (``None`` until a pool resolves the measure). Default ``None``.

    Attributes
    ----------
    predicted : ndarray of bool (k, C) or None
        For an averaged measure resolved by a pool (:meth:`Pool.resolve
        <bayes_activeeval.Pool.resolve>`): whether each of the ``k`` models it reads (one for a
        measure not bound to models) predicts class ``c`` on some item of positive weight. The
        labels are unknown but the predictions are not: a class a model never predicts has
        precision, recall and F1 exactly 0, and :meth:`class_parts` says so.
    base : Measure or None
        For a measure made by :func:`stack`: the measure it evaluates for each model (output
        block ``i`` is ``base`` on model ``i``'s block of the loss components); ``None`` for
        any other measure, a :func:`difference` or a measure built by hand among them.
    registered : str or None
        Set by :func:`get`: the registered name the measure was built from (``"f1"``,
        ``"f2.0"``), so that pool-wide computations on its losses can be cached under the name
        (:func:`get` builds a new object per call); ``None`` for a measure built by hand,
        :func:`stack` or :func:`difference`.

    Notes
    -----
    The optimal proposal and the delta-method variance only ever use ``ℓ``, ``g`` and ``Dg``;
    see :func:`bayes_activeeval.optimal_proposal` and :func:`bayes_activeeval.estimate`.
    """

    #: class-level defaults (:func:`stack` sets ``base``, :func:`get` sets ``registered``), so
    #: that a measure unpickled from before an attribute existed (or a subclass that does not
    #: call ``Measure.__init__``) still has them
    base: Measure | None = None
    registered: str | None = None

    def __init__(
        self,
        name: str,
        loss: LossFn,
        g: GFn | None = None,
        jacobian: Callable[[np.ndarray], np.ndarray] | None = None,
        *,
        components: Sequence[str] | Callable[[int], Sequence[str]] = ("loss",),
        outputs: Sequence[str] | None = None,
        task: str = "any",
        greater_is_better: bool = False,
        scale_invariant: bool = False,
        models: tuple[str, ...] | None = None,
        bounds: tuple[float, float] = (-np.inf, np.inf),
        tabular: bool = False,
        affine: bool | None = None,
        class_parts: Callable[[np.ndarray], ClassParts] | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty string, got {name!r}")
        if not callable(loss):
            raise TypeError(f"loss must be callable, got {loss!r}")
        if g is not None and not callable(g):
            raise TypeError(f"g must be callable or None, got {g!r}")
        if jacobian is not None and not callable(jacobian):
            raise TypeError(f"jacobian must be callable or None, got {jacobian!r}")
        if task not in ("binary", "classification", "regression", "any"):
            raise ValueError(
                f"task must be 'binary', 'classification', 'regression' or 'any', got {task!r}"
            )
        self.name = name
        self._loss = loss
        self._g = g
        self._jacobian = jacobian
        self._components = components
        self.components = None if callable(components) else tuple(components)
        self.outputs = tuple(outputs) if outputs is not None else (name,)
        self.task = task
        self.greater_is_better = bool(greater_is_better)
        self.scale_invariant = bool(scale_invariant)
        self.models = models
        lo, hi = (float(b) for b in bounds)
        if not lo < hi:
            raise ValueError(f"bounds must be (low, high) with low < high, got {bounds!r}")
        self.bounds = (lo, hi)
        self.tabular = bool(tabular)
        self.affine = g is None if affine is None else bool(affine)
        self._class_parts = class_parts
        self.predicted: np.ndarray | None = None

    # -- the three maps ---------------------------------------------------------------------
    @property
    def dim(self) -> int:
        """``d``, the number of loss components."""
        if self.components is None:
            raise ValueError(
                f"measure {self.name!r} must be resolved for a number of classes first"
            )
        return len(self.components)

    def resolve(self, n_classes: int) -> Measure:
        """This measure with its components sized for ``n_classes`` (a copy if they were lazy)."""
        if self.components is not None:
            return self
        out = copy.copy(self)
        out.components = tuple(self._components(n_classes))
        return out

    @property
    def n_outputs(self) -> int:
        """``m``, the number of outputs of ``g``."""
        return len(self.outputs)

    def loss(self, y: np.ndarray, view: Any) -> np.ndarray:
        """Vector loss ``ℓ(x, y)``, shape ``(n, d)``."""
        out = np.asarray(self._loss(y, view), dtype=float)
        if out.ndim == 1:
            out = out[:, None]
        if out.ndim != 2 or out.shape[1] != self.dim:
            raise ValueError(
                f"loss of measure {self.name!r} returned shape {out.shape}; "
                f"expected (n, {self.dim}) for components {self.components}"
            )
        return out

    @property
    def plain_risk(self) -> bool:
        """``g`` is the identity and the measure is not bound to models (the error rate, MSE, …)."""
        return self._g is None and self.models is None

    def g(self, R: np.ndarray) -> np.ndarray:
        """The map ``g(R)``, shape ``(m,)``."""
        R = np.asarray(R, dtype=float)
        if self._g is None:
            return R.copy()
        return np.atleast_1d(np.asarray(self._g(R), dtype=float))

    def jacobian(self, R: np.ndarray) -> np.ndarray:
        """``Dg(R)``, shape ``(m, d)``; finite differences if none was given."""
        R = np.asarray(R, dtype=float)
        if self._g is None:
            return np.eye(self.dim)
        if self._jacobian is not None:
            return np.atleast_2d(np.asarray(self._jacobian(R), dtype=float))
        return _numeric_jacobian(self.g, R, self.n_outputs)

    @property
    def averaged(self) -> bool:
        """``True`` when the measure is an average of per-class ratios (:meth:`class_parts`)."""
        return self._class_parts is not None

    def class_parts(self, R: np.ndarray) -> ClassParts | None:
        """The per-class ratios at ``R`` and how the outputs average them (:class:`ClassParts`),
        or ``None`` for a measure that is no such average."""
        if self._class_parts is None:
            return None
        return self._class_parts(np.asarray(R, dtype=float), self.predicted)

    def with_predicted(self, predicted: Any) -> Measure:
        """A copy carrying :attr:`predicted` (``(k, C)`` bool: model ``i`` predicts class ``c``
        somewhere in the pool); this measure itself if it is no average of per-class ratios."""
        if self._class_parts is None:
            return self
        out = copy.copy(self)
        out.predicted = None if predicted is None else np.atleast_2d(np.asarray(predicted, bool))
        return out

    def __repr__(self) -> str:
        bound = f", models={self.models}" if self.models else ""
        return f"Measure({self.name!r}, components={self.components}{bound})"


def _numeric_jacobian(g: GFn, R: np.ndarray, m: int) -> np.ndarray:
    """Central differences with a step scaled to each coordinate."""
    J = np.empty((m, R.size))
    for j in range(R.size):
        h = 1e-6 * max(1.0, abs(R[j]))
        e = np.zeros_like(R)
        e[j] = h
        J[:, j] = (g(R + e) - g(R - e)) / (2 * h)
    return J


# --------------------------------------------------------------------------------------------
# helpers for ratio measures
# --------------------------------------------------------------------------------------------
def _ratio(R: np.ndarray) -> np.ndarray:
    return np.array([R[0] / R[1]]) if R[1] != 0 else np.array([np.nan])


def _ratio_jac(R: np.ndarray) -> np.ndarray:
    if R[1] == 0:
        return np.full((1, 2), np.nan)
    return np.array([[1.0 / R[1], -R[0] / R[1] ** 2]])


def _binary(y: np.ndarray, view: ModelView) -> tuple[np.ndarray, np.ndarray]:
    pos = view._pos()
    return (y == pos).astype(float), (view.pred == pos).astype(float)


def _loss_zero_one(y, view):
    return (y != view.pred).astype(float)


def _loss_correct(y, view):
    return (y == view.pred).astype(float)


def _loss_precision(y, view):
    yy, ff = _binary(y, view)
    return np.stack([yy * ff, ff], axis=1)


def _loss_recall(y, view):
    yy, ff = _binary(y, view)
    return np.stack([yy * ff, yy], axis=1)


def _loss_tp_y_f(y, view):
    yy, ff = _binary(y, view)
    return np.stack([yy * ff, yy, ff], axis=1)


class FBeta(Measure):
    """F_β score, ``ℓ = [y f, (β² y + f)/(1 + β²)]``, ``g = R1/R2``.

    Marchant & Rubinstein (2021), Table 1; equals Sawade's ``F_η`` (Sawade (2012), Eq. 3.26) with
    ``η = 1/(1 + β²)``.  ``FBeta(1)`` is F1; ``β → 0`` is precision and ``β → ∞`` recall.

    Parameters
    ----------
    beta : float
        Weight of recall relative to precision, ``β > 0``.
    """

    def __init__(self, beta: float = 1.0) -> None:
        beta = float(beta)
        if not np.isfinite(beta) or beta <= 0:
            raise ValueError(f"beta must be a positive finite number, got {beta!r}")
        self.beta = beta
        b2 = beta * beta

        def loss(y, view):
            yy, ff = _binary(y, view)
            return np.stack([yy * ff, (b2 * yy + ff) / (1.0 + b2)], axis=1)

        name = "f1" if beta == 1.0 else f"f{beta:g}"
        super().__init__(
            name,
            loss,
            _ratio,
            _ratio_jac,
            components=("tp", "weight"),
            task="binary",
            greater_is_better=True,
            scale_invariant=True,
            bounds=UNIT,
            tabular=True,
        )

    @property
    def eta(self) -> float:
        """Sawade's harmonic weight ``η = 1/(1+β²)`` (Sawade (2012), Eq. 3.26)."""
        return 1.0 / (1.0 + self.beta**2)


def _g_balanced(R):
    # R = [tp, y, f] (binary) — (TPR + TNR) / 2
    tp, yy, ff = R
    den = 2 * yy * (1 - yy)
    return np.array([(tp + yy * (1 - yy - ff)) / den]) if den != 0 else np.array([np.nan])


def _jac_balanced(R):
    tp, yy, ff = R
    den = 2 * yy * (1 - yy)
    if den == 0:
        return np.full((1, 3), np.nan)
    num = tp + yy * (1 - yy - ff)
    d_tp = 1 / den
    d_y = ((1 - 2 * yy - ff) * den - num * 2 * (1 - 2 * yy)) / den**2
    d_f = -yy / den
    return np.array([[d_tp, d_y, d_f]])


def _g_mcc(R):
    tp, yy, ff = R
    den2 = yy * ff * (1 - yy) * (1 - ff)
    if den2 <= 0:
        return np.array([np.nan])
    return np.array([(tp - yy * ff) / np.sqrt(den2)])


def _jac_mcc(R):
    tp, yy, ff = R
    den2 = yy * ff * (1 - yy) * (1 - ff)
    if den2 <= 0:
        return np.full((1, 3), np.nan)
    s = np.sqrt(den2)
    num = tp - yy * ff
    d_den2_y = ff * (1 - ff) * (1 - 2 * yy)
    d_den2_f = yy * (1 - yy) * (1 - 2 * ff)
    d_y = -ff / s - num * d_den2_y / (2 * s**3)
    d_f = -yy / s - num * d_den2_f / (2 * s**3)
    return np.array([[1 / s, d_y, d_f]])


def _g_fm(R):
    tp, yy, ff = R
    return np.array([tp / np.sqrt(yy * ff)]) if yy * ff > 0 else np.array([np.nan])


def _jac_fm(R):
    tp, yy, ff = R
    if yy * ff <= 0:
        return np.full((1, 3), np.nan)
    s = np.sqrt(yy * ff)
    return np.array([[1 / s, -tp / (2 * yy * s), -tp / (2 * ff * s)]])


def _loss_brier(y, view):
    if view.prob is None:
        raise MissingInput("brier needs the model's probabilities: ", "probs")
    if view.n_classes == 2:
        p1 = view.positive_prob()
        return (p1 - (y == view._pos())) ** 2
    onehot = y[:, None] == np.arange(view.n_classes)[None, :]
    return ((view.prob - onehot) ** 2).sum(axis=1)


class _Brier(Measure):
    """The Brier score, whose range depends on the number of classes: ``(p̂₁ − y)² ≤ 1`` on a
    binary pool, ``Σ_c (p̂_c − 1[y=c])² ≤ 2`` on a multiclass one. Unresolved it has the
    multiclass range ``(0, 2)``; :meth:`resolve` gives ``(0, 1)`` for two classes (with
    ``(0, 2)`` a one-draw interval reached 1.99 for a binary loss that cannot exceed 1)."""

    def resolve(self, n_classes: int) -> Measure:
        if n_classes != 2 or self.bounds == (0.0, 1.0):
            return super().resolve(n_classes)
        out = copy.copy(super().resolve(n_classes))
        out.bounds = (0.0, 1.0)
        return out


def _loss_mse(y, view):
    return (y - view.pred) ** 2


def _loss_mae(y, view):
    return np.abs(y - view.pred)


def _loss_r2(y, view):
    f = view.pred
    return np.stack([y, y * y, y * f, f * f], axis=1)


def _g_r2(R):
    r1, r2, r3, r4 = R
    var = r2 - r1 * r1
    return np.array([1 - (r2 - 2 * r3 + r4) / var]) if var > 0 else np.array([np.nan])


def _jac_r2(R):
    r1, r2, r3, r4 = R
    var = r2 - r1 * r1
    if var <= 0:
        return np.full((1, 4), np.nan)
    sse = r2 - 2 * r3 + r4
    return np.array([[-sse * 2 * r1 / var**2, -1 / var + sse / var**2, 2 / var, -1 / var]])


# --------------------------------------------------------------------------------------------
# multiclass averages: ℓ = [1(y=c, f=c)]_c ++ [1(f=c)]_c ++ [1(y=c)]_c   (d = 3C)
# --------------------------------------------------------------------------------------------
def _per_class_counts(y, view):
    C = view.n_classes
    cls = np.arange(C)[None, :]
    yc = (y[:, None] == cls).astype(float)
    fc = (view.pred[:, None] == cls).astype(float)
    return np.concatenate([yc * fc, fc, yc], axis=1)


def _split3(R):
    C = R.size // 3
    return R[:C], R[C : 2 * C], R[2 * C :]


def _safe_div(a, b):
    out = np.zeros_like(a, dtype=float)
    np.divide(a, b, out=out, where=b != 0)
    return out


def _class_ratios(
    tp: np.ndarray, den: np.ndarray, den_cols: Sequence[tuple[int, float]], d: int, fill: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Per-class ratios ``θ_k = tp_k / den_k`` and their Jacobian ``(C, d)`` for
    :class:`ClassParts`; ``tp_k`` is column ``k`` of ``R`` and ``den_k = Σ_s a_s R[s + k]``
    over ``den_cols = [(s, a_s), …]``. A class with ``den_k = 0`` gets ``fill`` and a NaN row on
    the columns it reads."""
    C = tp.size
    ok = den != 0
    values = np.where(ok, _safe_div(tp, den), fill)
    J = np.zeros((C, d))
    k = np.arange(C)
    inv = _safe_div(np.ones_like(den), den)
    J[k, k] = np.where(ok, inv, np.nan)
    for start, coef in den_cols:
        J[k, start + k] = np.where(ok, -coef * _safe_div(tp, den * den), np.nan)
    return values, J


def _make_averaged(kind: str, average: str):
    """Build g and Dg for macro/micro precision, recall, F1 (scikit-learn's ``average=``).

    Classes with a zero denominator contribute 0 (scikit-learn's ``zero_division=0``).
    """

    def parts(R):
        tp, f, y = _split3(R)
        if kind == "precision":
            den, dden = f, ("f",)
        elif kind == "recall":
            den, dden = y, ("y",)
        else:  # f1: 2 tp / (f + y)
            den, dden = (f + y) / 2, ("f", "y")
        return tp, f, y, den, dden

    def g(R):
        tp, _, _, den, _ = parts(R)
        if average == "macro":
            return np.array([_safe_div(tp, den).mean()])
        tot = den.sum()
        return np.array([tp.sum() / tot if tot != 0 else 0.0])

    def jac(R):
        tp, _, _, den, dden = parts(R)
        C = tp.size
        J = np.zeros((1, 3 * C))
        if average == "macro":
            inv = _safe_div(np.ones_like(den), den)
            d_tp = inv / C
            d_den = -_safe_div(tp, den**2) / C
        else:
            tot = den.sum()
            if tot == 0:
                return J
            d_tp = np.full(C, 1.0 / tot)
            d_den = np.full(C, -tp.sum() / tot**2)
        J[0, :C] = d_tp
        share = 1.0 / len(dden)
        if "f" in dden:
            J[0, C : 2 * C] = d_den * share
        if "y" in dden:
            J[0, 2 * C :] = d_den * share
        return J

    def class_parts(R, predicted=None):
        # macro only: the mean of the C per-class ratios (a class with a zero denominator is 0);
        # a class the model predicts nowhere in the pool has TP = 0: precision, recall and F1
        # exactly 0 (zero_division=0), whatever the labels
        tp, _, _, den, dden = parts(R)
        C = tp.size
        cols = [(C if s == "f" else 2 * C, 1.0 / len(dden)) for s in dden]
        values, J = _class_ratios(tp, den, cols, 3 * C, 0.0)
        low, high = np.zeros(C), np.ones(C)
        if predicted is not None:
            never = ~np.asarray(predicted, bool).reshape(-1)[:C]
            values = np.where(never, 0.0, values)
            high = np.where(never, 0.0, high)
        return ClassParts(values, J, np.full((1, C), 1.0 / C), UNIT, low, high, kind)

    return g, jac, (class_parts if average == "macro" else None)


def _averaged(kind: str, average: str) -> Measure:
    g, jac, class_parts = _make_averaged(kind, average)
    return Measure(
        f"{kind}_{average}",
        _per_class_counts,
        g,
        jac,
        components=lambda C: [f"{p}[{c}]" for p in ("tp", "pred", "true") for c in range(C)],
        task="classification",
        greater_is_better=True,
        scale_invariant=True,
        bounds=UNIT,
        tabular=True,
        class_parts=class_parts,
    )


def _balanced_multiclass() -> Measure:
    # macro recall (scikit-learn's balanced_accuracy_score), ℓ = [1(y=c,f=c)]_c ++ [1(y=c)]_c
    def loss(y, view):
        C = view.n_classes
        cls = np.arange(C)[None, :]
        yc = (y[:, None] == cls).astype(float)
        fc = (view.pred[:, None] == cls).astype(float)
        return np.concatenate([yc * fc, yc], axis=1)

    def g(R):
        C = R.size // 2
        tp, yy = R[:C], R[C:]
        present = yy > 0
        if not present.any():
            return np.array([np.nan])
        return np.array([np.mean(tp[present] / yy[present])])

    def jac(R):
        C = R.size // 2
        tp, yy = R[:C], R[C:]
        present = yy > 0
        k = present.sum()
        J = np.zeros((1, 2 * C))
        if k == 0:
            return np.full((1, 2 * C), np.nan)
        J[0, :C][present] = 1.0 / (k * yy[present])
        J[0, C:][present] = -tp[present] / (k * yy[present] ** 2)
        return J

    def class_parts(R, predicted=None):
        # the per-class recalls; g averages the P classes the labels show, so a class not yet
        # labeled is filled with their mean θ̄ (the average of all C parts is then g). Such a
        # class either does not occur (dropped: G = θ̄) or occurs with an unknown recall r
        # (G ≈ θ̄ + (r − θ̄)/(P + 1)): the carried classes weigh 1/P, as in θ̄, and the class
        # weighs 1/(P + 1) with r anywhere in [0, 1]. A class the model predicts nowhere in the
        # pool has recall exactly 0 if it occurs: [0, 0] once a draw carries it, [0, θ̄]
        # (recall 0, or dropped) until then
        C = R.size // 2
        tp, yy = R[:C], R[C:]
        present = yy > 0
        P = int(present.sum())
        fill = np.mean(tp[present] / yy[present]) if P else np.nan
        values, J = _class_ratios(tp, yy, [(C, 1.0)], 2 * C, fill)
        average = np.where(present, 1.0 / max(P, 1), 1.0 / (P + 1))[None, :]
        low, high = np.zeros(C), np.ones(C)
        if predicted is not None:
            never = ~np.asarray(predicted, bool).reshape(-1)[:C]
            values = np.where(never & present, 0.0, values)
            high = np.where(never, np.where(present, 0.0, fill), high)
        return ClassParts(values, J, average, UNIT, low, high, "recall")

    return Measure(
        "balanced_accuracy",
        loss,
        g,
        jac,
        components=lambda C: [f"{p}[{c}]" for p in ("tp", "true") for c in range(C)],
        task="classification",
        greater_is_better=True,
        scale_invariant=True,
        bounds=UNIT,
        tabular=True,
        class_parts=class_parts,
    )


def _registry() -> dict[str, Callable[[], Measure]]:
    def binary_ratio(name, loss, comps):
        return Measure(
            name,
            loss,
            _ratio,
            _ratio_jac,
            components=comps,
            task="binary",
            greater_is_better=True,
            scale_invariant=True,
            bounds=UNIT,
            tabular=True,
        )

    return {
        "accuracy": lambda: Measure(
            "accuracy",
            _loss_correct,
            components=("correct",),
            task="classification",
            greater_is_better=True,
            bounds=UNIT,
            tabular=True,
        ),
        "error_rate": lambda: Measure(
            "error_rate",
            _loss_zero_one,
            components=("error",),
            task="classification",
            bounds=UNIT,
            tabular=True,
        ),
        "precision": lambda: binary_ratio("precision", _loss_precision, ("tp", "pred_pos")),
        "recall": lambda: binary_ratio("recall", _loss_recall, ("tp", "true_pos")),
        "f1": lambda: FBeta(1.0),
        "balanced_accuracy": _balanced_multiclass,
        "mcc": lambda: Measure(
            "mcc",
            _loss_tp_y_f,
            _g_mcc,
            _jac_mcc,
            components=("tp", "true_pos", "pred_pos"),
            task="binary",
            greater_is_better=True,
            bounds=(-1.0, 1.0),
            tabular=True,
        ),
        "fowlkes_mallows": lambda: Measure(
            "fowlkes_mallows",
            _loss_tp_y_f,
            _g_fm,
            _jac_fm,
            components=("tp", "true_pos", "pred_pos"),
            task="binary",
            greater_is_better=True,
            scale_invariant=True,
            bounds=UNIT,
            tabular=True,
        ),
        "brier": lambda: _Brier(
            "brier", _loss_brier, components=("brier",), task="classification", bounds=(0.0, 2.0)
        ),
        "mse": lambda: Measure(
            "mse", _loss_mse, components=("sq_error",), task="regression", bounds=NONNEG
        ),
        "mae": lambda: Measure(
            "mae", _loss_mae, components=("abs_error",), task="regression", bounds=NONNEG
        ),
        "r2": lambda: Measure(
            "r2",
            _loss_r2,
            _g_r2,
            _jac_r2,
            components=("y", "y2", "yf", "f2"),
            task="regression",
            greater_is_better=True,
            bounds=(-np.inf, 1.0),
        ),
        **{
            f"{kind}_{avg}": (lambda kind=kind, avg=avg: _averaged(kind, avg))
            for kind in ("f1", "precision", "recall")
            for avg in ("macro", "micro")
        },
    }


_ALIASES = {
    "error": "error_rate",
    "zero_one": "error_rate",
    "f1_score": "f1",
    "precision_score": "precision",
    "recall_score": "recall",
    "accuracy_score": "accuracy",
    "balanced_accuracy_score": "balanced_accuracy",
    "matthews_corrcoef": "mcc",
    "brier_score_loss": "brier",
    "mean_squared_error": "mse",
    "mean_absolute_error": "mae",
    "r2_score": "r2",
}


#: Threshold-free measures (:mod:`bayes_activeeval.threshold_free`), also accepted by :func:`get`;
#: ``"recall@fpr=0.01"`` names the recall at a false-positive rate.
RANK_NAMES = ("average_precision", "roc_auc")


def available() -> list[str]:
    """Names of the generalized measures accepted by :func:`get` (aliases such as ``"f1_score"``
    also work). :func:`get` also accepts the threshold-free :data:`RANK_NAMES` and
    ``"recall@fpr=α"``, which are not of the form ``g(E_p[ℓ])``."""
    return sorted(_registry())


def _rank(measure: Any):
    """The threshold-free measure for a name or object, else None (imported here: the
    threshold-free package builds on this module)."""
    from .threshold_free.kernels import RankMeasure, rank_measure

    return measure if isinstance(measure, RankMeasure) else rank_measure(measure)


def get(measure: str | Measure) -> Measure:
    """Return the :class:`Measure` for a name, or the measure itself.

    Parameters
    ----------
    measure : str or Measure
        A built-in name (see :func:`available`) or a :class:`Measure`.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the known ones).
    TypeError
        For anything that is neither a string nor a :class:`Measure`.
    """
    if isinstance(measure, Measure):
        return measure
    rank = _rank(measure)
    if rank is not None:  # ROC AUC, average precision, recall@FPR: a RankMeasure
        return rank
    if not isinstance(measure, str):
        raise TypeError(f"measure must be a name or a Measure, got {type(measure).__name__}")
    key = measure.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    reg = _registry()
    if key in reg:
        out = reg[key]()
    elif key.startswith("f") and key[1:].replace(".", "", 1).isdigit():
        out = FBeta(float(key[1:]))
        key = f"f{float(key[1:])!r}"  # "f2" and "f2.0" are one measure
    else:
        raise ValueError(
            f"unknown measure {measure!r}; known measures: {', '.join(available())}; threshold-free: "
            f"{', '.join(RANK_NAMES)}, recall@fpr=α (α a number in (0, 1), e.g. recall@fpr=0.01); "
            "precision at k is built as a measure object, "
            "threshold_free.precision_at_k(pool, k, model)"
        )
    out.registered = key
    return out


def _views_of(view, models):
    if not isinstance(view, dict):
        raise TypeError(
            f"a measure bound to models {models} needs a dict of ModelView, got {type(view)}"
        )
    return [view[m] for m in models]


def stack(measure: str | Measure, models: Sequence[str]) -> Measure:
    """One measure evaluated for several models on the same labels: ``G = (g(R_1), …, g(R_k))``.

    The loss is the concatenation of the models' losses and the Jacobian is block-diagonal, so the
    delta-method covariance (Marchant & Rubinstein (2021), Thm. 2) of the stacked estimate is the
    joint covariance of the k estimates used by simultaneous tests (Sawade (2012), Sec. 3.2.3).

    Parameters
    ----------
    measure : str or Measure
        The measure to stack: a name accepted by :func:`get` or a :class:`Measure` not yet bound
        to models. A threshold-free measure (``"roc_auc"``, …) is bound to ``models`` instead.
    models : sequence of str
        The models' names, at least one and all distinct (a bare string is refused).

    Returns
    -------
    Measure or RankMeasure
        Bound to ``models``: its loss reads a dict of :class:`ModelView` keyed by model name and
        has ``k·d`` components, ``g`` has ``k·m`` outputs named ``"output[model]"``, and
        :attr:`Measure.base` is the stacked measure. For a threshold-free measure, the
        ``RankMeasure`` bound to ``models`` (it has no ``base``).
    """
    base = get(measure)
    if _rank(base) is not None:
        return base.bind(models)
    models = _check_models(base, models, minimum=1)
    k, m = len(models), base.n_outputs

    def loss(y, views):
        parts = [base.resolve(v.n_classes).loss(y, v) for v in _views_of(views, models)]
        return np.concatenate(parts, axis=1)

    def g(R):
        return np.concatenate([base.g(part) for part in np.split(R, k)])

    def jac(R):
        parts = np.split(R, k)
        d = parts[0].size
        J = np.zeros((m * k, d * k))
        for i, part in enumerate(parts):
            J[i * m : (i + 1) * m, i * d : (i + 1) * d] = base.jacobian(part)
        return J

    out = Measure(
        f"{base.name}[{','.join(models)}]",
        loss,
        g,
        jac,
        components=_bound_components(base, models),
        outputs=tuple(f"{o}[{mod}]" for mod in models for o in base.outputs),
        task=base.task,
        greater_is_better=base.greater_is_better,
        scale_invariant=base.scale_invariant,
        models=models,
        bounds=base.bounds,
        tabular=base.tabular,
        affine=base.affine,
        class_parts=_blocks_parts(base, k, _block_diagonal) if base.averaged else None,
    )
    out.base = base
    return out


def _block_diagonal(averages: list[np.ndarray]) -> np.ndarray:
    out = np.zeros((sum(a.shape[0] for a in averages), sum(a.shape[1] for a in averages)))
    r = c = 0
    for a in averages:
        out[r : r + a.shape[0], c : c + a.shape[1]] = a
        r, c = r + a.shape[0], c + a.shape[1]
    return out


def _blocks_parts(base: Measure, k: int, combine: Callable[[list[np.ndarray]], np.ndarray]):
    """``class_parts`` of a measure on ``k`` models' stacked losses: the base measure's parts on
    each model's block of ``R``, averaged as ``combine`` says (block-diagonal for :func:`stack`,
    ``[A_a, −A_b]`` for :func:`difference`)."""

    def class_parts(R, predicted=None):
        # model i's block of R with model i's row of ``predicted``
        blocks = [
            base._class_parts(part, None if predicted is None else predicted[i : i + 1])
            for i, part in enumerate(np.split(R, k))
        ]
        d = R.size // k
        values = np.concatenate([b.values for b in blocks])
        J = np.zeros((values.size, R.size))
        row = 0
        for i, b in enumerate(blocks):
            J[row : row + b.values.size, i * d : (i + 1) * d] = b.jacobian
            row += b.values.size
        low, high = (np.concatenate(x) for x in zip(*(b.limits() for b in blocks), strict=True))
        return ClassParts(
            values,
            J,
            combine([b.average for b in blocks]),
            blocks[0].bounds,
            low,
            high,
            blocks[0].kind,
        )

    return class_parts


def difference(measure: str | Measure, a: str, b: str) -> Measure:
    """The difference ``g(R_a) − g(R_b)`` of one measure between models ``a`` and ``b``.

    Stacks the two models' losses, ``ℓ = (ℓ_a, ℓ_b)``, with ``Dg = [Dg_a, −Dg_b]``: the
    comparison target of Sawade (2012), Eq. 3.21 generalized to any measure (ratio measures such as
    F1 through the delta method).

    Parameters
    ----------
    measure : str or Measure
        A scalar measure (``g`` with one output): a name accepted by :func:`get` or a
        :class:`Measure` not yet bound to models. A threshold-free measure is bound to ``(a, b)``
        as the difference ``T_a − T_b`` instead.
    a, b : str
        The two models' names (distinct); the difference is ``a``'s value minus ``b``'s.

    Returns
    -------
    Measure
        Bound to ``(a, b)``, with one output named ``"name[a]-name[b]"`` and bounds
        ``(low − high, high − low)`` from those of ``measure`` (for a threshold-free measure, its
        bound ``RankMeasure``).
    """
    base = get(measure)
    if _rank(base) is not None:
        return base.bind((a, b), difference=True)
    models = _check_models(base, (a, b), minimum=2)
    if base.n_outputs != 1:
        raise ValueError(f"difference needs a scalar measure; {base.name!r} has {base.n_outputs}")
    st = stack(base, models)

    def g(R):
        ra, rb = np.split(R, 2)
        return np.array([base.g(ra)[0] - base.g(rb)[0]])

    def jac(R):
        ra, rb = np.split(R, 2)
        return np.concatenate([base.jacobian(ra), -base.jacobian(rb)], axis=1)

    name = f"{base.name}[{a}]-{base.name}[{b}]"
    return Measure(
        name,
        st._loss,
        g,
        jac,
        components=_bound_components(base, models),
        outputs=(name,),
        task=base.task,
        greater_is_better=base.greater_is_better,
        scale_invariant=base.scale_invariant,
        models=models,
        bounds=(base.bounds[0] - base.bounds[1], base.bounds[1] - base.bounds[0]),
        tabular=base.tabular,
        affine=base.affine,
        class_parts=(
            _blocks_parts(base, 2, lambda a: np.concatenate([a[0], -a[1]], axis=1))
            if base.averaged
            else None
        ),
    )


def _bound_components(base: Measure, models: tuple[str, ...]):
    def names(comps):
        return tuple(f"{c}[{mod}]" for mod in models for c in comps)

    if base.components is None:
        return lambda C: names(base.resolve(C).components)
    return names(base.components)


def _check_models(base: Measure, models: Sequence[str], minimum: int) -> tuple[str, ...]:
    if base.models is not None:
        raise ValueError(f"measure {base.name!r} is already bound to models {base.models}")
    return check_model_names(models, minimum)
