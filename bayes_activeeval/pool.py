"""The pool: unlabeled items, the models evaluated on them, and what is known about each item.

A :class:`Pool` holds, for ``n`` items and one or more models, the predictions (class labels or
real values), the models' class probabilities or Gaussian predictive standard deviations,
optional raw scores, per-item label costs ``c(x)`` and item weights ``p(x)`` (the test
distribution; uniform by default, i.e. the empirical pool distribution of Sawade (2012), Eq. 2.29).

Labels are encoded internally: class indices ``0..C-1`` (in the order of ``pool.classes``) for
classification, floats for regression. :meth:`Pool.encode_labels` and :meth:`Pool.decode_labels`
translate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from ._validation import MissingInput, as_1d, as_array, check_finite, check_probabilities, show
from .measures import Measure, ModelView
from .measures import get as get_measure

__all__ = ["Pool"]

DEFAULT_MODEL = "model"
_BINARY_DEFAULTS = ({0, 1}, {False, True}, {-1, 1})


def _as_model_dict(value: Any, name: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        if not value:
            raise ValueError(f"{name} is an empty dict; give at least one model")
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"{name} keys must be model names (str), got {key!r}")
        return dict(value)
    return {DEFAULT_MODEL: value}


class Pool:
    """Unlabeled items and the model(s) to evaluate on them.

    Parameters
    ----------
    predictions : array-like (n,) or dict of them
        The models' predictions ``f(x)``: class labels (any hashable values) or, for regression,
        real predictive means. A dict ``{"a": ya, "b": yb}`` holds several models.
    probs : array-like (n,) or (n, C), or dict of them, optional
        Class probabilities as ``predict_proba`` returns them (columns ordered as ``classes``), or
        for binary problems the vector ``P(y = pos_label | x)``.
    predictive_std : array-like (n,) or dict, optional
        Regression only: the models' predictive standard deviation ``τ_x`` (Gaussian predictive
        ``N(f(x), τ_x²)``, Sawade (2012), Eq. 2.27).
    scores : array-like (n,) or dict, optional
        Raw scores (e.g. SVM margins), used for stratification and calibration.
    costs : array-like (n,), optional
        Positive label costs ``c(x)`` (Sawade (2012), Sec. 4.3).
    weights : array-like (n,), optional
        Non-negative item weights ``p(x)``; normalized to sum to one. Default uniform.
    classes : array-like, optional
        The label values, in the order of the columns of ``probs``. Inferred when possible.
    pos_label : optional
        The positive class for binary measures (precision, recall, F1, …). Defaults to ``1``
        (or ``True``) when that is one of the classes, as in scikit-learn.
    task : {"binary", "multiclass", "regression"}, optional
        Inferred: regression when ``predictive_std`` is given or the predictions are non-integer
        floats without ``probs``; classification otherwise.
    item_ids : array-like (n,), optional
        External identifiers of the items (default ``0..n-1``).

    Raises
    ------
    ValueError, TypeError
        With the argument and the offending value named: empty pools, shape mismatches,
        probabilities outside ``[0, 1]`` or NaN, rows not summing to one, predictions outside
        ``classes``, non-positive costs, negative or all-zero weights.
    """

    def __init__(
        self,
        predictions: Any,
        probs: Any = None,
        *,
        predictive_std: Any = None,
        scores: Any = None,
        costs: Any = None,
        weights: Any = None,
        classes: Any = None,
        pos_label: Any = None,
        task: str | None = None,
        item_ids: Any = None,
    ) -> None:
        preds = _as_model_dict(predictions, "predictions")
        if preds is None:
            raise TypeError("predictions is required")
        prob_d = _as_model_dict(probs, "probs")
        std_d = _as_model_dict(predictive_std, "predictive_std")
        score_d = _as_model_dict(scores, "scores")
        self.models: tuple[str, ...] = tuple(preds)
        for name, other in (("probs", prob_d), ("predictive_std", std_d), ("scores", score_d)):
            if other is not None and set(other) != set(self.models):
                raise ValueError(
                    f"{name} names models {sorted(other)} but predictions names "
                    f"{sorted(self.models)}"
                )

        raw = {m: as_1d(v, f"predictions[{m!r}]") for m, v in preds.items()}
        n = len(next(iter(raw.values())))
        if n == 0:
            raise ValueError("the pool is empty: predictions has no items")
        for m, v in raw.items():
            if len(v) != n:
                raise ValueError(
                    f"predictions[{m!r}] has {len(v)} items but the first model has {n}"
                )
        self.n_items = n

        self.task = _infer_task(task, raw, prob_d, std_d)
        self._prob: dict[str, np.ndarray] | None = None
        self._std: dict[str, np.ndarray] | None = None
        if self.task == "regression":
            if prob_d is not None:
                raise ValueError(
                    "probs is for classification; a regression pool takes predictive_std"
                )
            self.classes = None
            self.pos_label = None
            self.pos = None
            self._pred = {
                m: check_finite(_numbers(v, f"predictions[{m!r}]"), f"predictions[{m!r}]")
                for m, v in raw.items()
            }
            if std_d is not None:
                self._std = {}
                for m, v in std_d.items():
                    s = check_finite(
                        as_1d(v, f"predictive_std[{m!r}]", n=n, dtype=float),
                        f"predictive_std[{m!r}]",
                    )
                    bad = np.flatnonzero(s < 0)
                    if bad.size:
                        raise ValueError(
                            f"predictive_std[{m!r}][{bad[0]}] = {show(s[bad[0]])} is negative"
                        )
                    self._std[m] = s
        else:
            if std_d is not None:
                raise ValueError(
                    "predictive_std is for regression; a classification pool takes probs"
                )
            self.classes = _infer_classes(classes, raw, prob_d)
            C = len(self.classes)
            self.task = "binary" if C == 2 else "multiclass"
            self.pos_label, self.pos = _infer_pos(pos_label, self.classes)
            self._pred = {m: self._encode(v, f"predictions[{m!r}]") for m, v in raw.items()}
            if prob_d is not None:
                self._prob = {m: self._check_probs(v, m) for m, v in prob_d.items()}

        self.scores = None
        if score_d is not None:
            self.scores = {
                m: check_finite(as_1d(v, f"scores[{m!r}]", n=n, dtype=float), f"scores[{m!r}]")
                for m, v in score_d.items()
            }
        self.costs = None
        if costs is not None:
            c = check_finite(as_1d(costs, "costs", n=n, dtype=float), "costs")
            bad = np.flatnonzero(c <= 0)
            if bad.size:
                raise ValueError(
                    f"costs[{bad[0]}] = {show(c[bad[0]])}; label costs must be positive"
                )
            self.costs = c
        self._weights = None
        self._uniform: np.ndarray | None = None
        if weights is not None:
            w = check_finite(as_1d(weights, "weights", n=n, dtype=float), "weights")
            bad = np.flatnonzero(w < 0)
            if bad.size:
                raise ValueError(
                    f"weights[{bad[0]}] = {show(w[bad[0]])}; item weights must be >= 0"
                )
            top = w.max() if w.size else 0.0
            if top <= 0:
                raise ValueError("weights sum to zero; at least one item needs positive weight")
            w = w / top  # finite weights whose sum overflows (1e308 + 1e308) still normalize
            self._weights = w / w.sum()
        self.item_ids = None if item_ids is None else as_1d(item_ids, "item_ids", n=n)
        if self.item_ids is not None and len(np.unique(self.item_ids)) != n:
            raise ValueError("item_ids contains duplicates")

    # -- pools beyond memory (lazy, on dask) ---------------------------------------------------
    @classmethod
    def from_parquet(cls, path: Any, predictions: Any = "pred", probs: Any = "p", **kwargs: Any):
        """A lazy pool reading Parquet files chunk by chunk (needs the ``[dask]`` extra).

        Parameters
        ----------
        path : str, path, glob or list of them
            A Parquet file, a directory of them (read in sorted order), a glob or a list. Items are
            numbered in file order, then row order.
        predictions, probs : str, list of str, or dict of them
            Column names: ``predictions`` holds ``f(x)``; ``probs`` one column of
            ``P(y = pos_label | x)`` (binary) or a list of one column per class; a dict
            ``{"a": "pred_a", "b": "pred_b"}`` names several models. ``probs=None`` for none.
        **kwargs
            The keyword arguments below.

        Other Parameters
        ----------------
        predictive_std, scores : str or dict, optional
            Column names, as for ``probs``.
        costs, weights : str, optional
            Column names of label costs ``c(x)`` and item weights (``p(x)`` after normalizing).
        classes, pos_label, task : optional
            As for :class:`Pool`; the classes are read from the predictions (one pass over that
            column) when not given.
        chunk_size : int
            Items per chunk (default ``2**20``): whole row groups are grouped up to this many rows,
            so write files with row groups no larger than it. Memory is bounded by a few chunks.
        client : distributed.Client, optional
            Where to compute; default the ambient client, if any, else dask's threads.

        Returns
        -------
        LazyPool
            A :class:`~bayes_activeeval.lazy.LazyPool`: ``optimal_proposal``, ``passive_proposal``,
            ``Proposal.draw``, ``estimate`` and ``compare`` work on it unchanged.
        """
        from .lazy import from_parquet

        return from_parquet(path, predictions, probs, **kwargs)

    @classmethod
    def from_zarr(cls, store: Any, predictions: Any = "pred", probs: Any = "p", **kwargs: Any):
        """A lazy pool over the arrays of a Zarr group, named as in :meth:`from_parquet` (``probs``
        may name one ``(n, C)`` array). ``chunk_size`` rechunks (default ``2**20`` items)."""
        from .lazy import from_zarr

        return from_zarr(store, predictions, probs, **kwargs)

    @classmethod
    def from_dask(cls, predictions: Any, probs: Any = None, **kwargs: Any):
        """A lazy pool over dask arrays, with the arguments of :class:`Pool` (arrays instead of
        columns). The chunks of the first predictions array are used unless ``chunk_size`` is
        given."""
        from .lazy import from_dask

        return from_dask(predictions, probs, **kwargs)

    @classmethod
    def from_dask_dataframe(
        cls, frame: Any, predictions: Any = "pred", probs: Any = "p", **kwargs: Any
    ):
        """A lazy pool over a dask DataFrame's partitions (one chunk per partition), columns named
        as in :meth:`from_parquet`."""
        from .lazy import from_dask_dataframe

        return from_dask_dataframe(frame, predictions, probs, **kwargs)

    # -- basic properties ---------------------------------------------------------------------
    @property
    def n_classes(self) -> int:
        """Number of classes (0 for regression)."""
        return 0 if self.classes is None else len(self.classes)

    @property
    def is_classification(self) -> bool:
        return self.task != "regression"

    @property
    def p(self) -> np.ndarray:
        """The test distribution ``p(x)`` over items, shape ``(n,)``, summing to one."""
        if self._weights is None:
            if self._uniform is None:
                self._uniform = np.full(self.n_items, 1.0 / self.n_items)
                self._uniform.flags.writeable = False
            return self._uniform
        return self._weights

    @property
    def has_uniform_weights(self) -> bool:
        return self._weights is None

    def has_probs(self) -> bool:
        return self._prob is not None

    def has_std(self) -> bool:
        return self._std is not None

    def __len__(self) -> int:
        return self.n_items

    def __repr__(self) -> str:
        extra = f", classes={show(self.classes)}" if self.classes is not None else ""
        return (
            f"Pool(n_items={self.n_items}, task={self.task!r}, models={list(self.models)}{extra})"
        )

    # -- models and views -----------------------------------------------------------------------
    def check_model(self, model: str | None) -> str:
        """Return a valid model name (the only model if ``model`` is None)."""
        if model is None:
            if len(self.models) == 1:
                return self.models[0]
            raise ValueError(
                f"the pool has several models {list(self.models)}; name one with model="
            )
        if model not in self.models:
            raise ValueError(f"model {model!r} is not in the pool; models are {list(self.models)}")
        return model

    def view(self, model: str | None = None, idx: np.ndarray | slice | None = None) -> ModelView:
        """A :class:`~bayes_activeeval.measures.ModelView` of one model on items ``idx``."""
        model = self.check_model(model)
        sel = slice(None) if idx is None else idx
        return ModelView(
            pred=self._pred[model][sel],
            prob=None if self._prob is None else self._prob[model][sel],
            std=None if self._std is None else self._std[model][sel],
            score=None if self.scores is None else self.scores[model][sel],
            pos=self.pos,
            n_classes=self.n_classes,
        )

    def resolve(self, measure: str | Measure, model: str | None = None) -> tuple[Measure, Any]:
        """Resolve a measure for this pool.

        Returns the measure (sized for the number of classes and checked against the task) and a
        function ``views(idx)`` giving what its loss reads: one :class:`ModelView`, or a dict of
        them for a measure bound to several models.
        """
        m = get_measure(measure)
        if m.task == "regression" and self.task != "regression":
            raise ValueError(f"measure {m.name!r} is for regression but the pool is {self.task}")
        if m.task in ("binary", "classification") and self.task == "regression":
            raise ValueError(f"measure {m.name!r} is for classification but the pool is regression")
        if m.task == "binary" and self.task != "binary":
            raise ValueError(
                f"measure {m.name!r} is binary but the pool has {self.n_classes} classes; "
                f"use a macro/micro average such as '{m.name}_macro'"
            )
        if m.task == "binary" and self.pos is None:
            raise ValueError(
                f"measure {m.name!r} needs a positive class: give the pool pos_label= "
                f"(one of {show(self.classes)})"
            )
        m = m.resolve(self.n_classes)
        if m.models is not None:
            if model is not None and tuple(m.models) != (model,):
                raise ValueError(
                    f"measure {m.name!r} is bound to models {m.models}, but model={model!r} "
                    "was passed; leave model= out (or name the model the measure is bound to)"
                )
            for name in m.models:
                self.check_model(name)

            def views(idx=None):
                return {name: self.view(name, idx) for name in m.models}

        else:
            name = self.check_model(model)

            def views(idx=None):
                return self.view(name, idx)

        if getattr(m, "averaged", False):  # a Measure averaging per-class ratios
            read = m.models if m.models is not None else (name,)
            m = m.with_predicted(self.predicted_classes(read))
        return m, views

    def predicted_classes(self, models: Sequence[str]) -> np.ndarray | None:
        """Whether each model predicts each class on some item of positive weight: ``(k, C)``
        bool, one row per model in ``models`` (``None`` for regression; a lazy pool reads it in
        one pass over its chunks).

        The labels are unknown but the predictions are not: a class a model never predicts has
        precision, recall and F1 exactly 0 (scikit-learn's ``zero_division=0``), and the
        intervals of the macro averages and balanced accuracy use that
        (:class:`~bayes_activeeval.measures.ClassParts`)."""
        pred = getattr(self, "_pred", None)
        if self.classes is None or not pred:
            return None
        cache = self.__dict__.setdefault("_predicted_classes", {})
        rows = []
        for name in models:
            if name not in cache:
                w = getattr(self, "_weights", None)
                mass = np.bincount(pred[name], weights=w, minlength=self.n_classes)
                cache[name] = mass[: self.n_classes] > 0
            rows.append(cache[name])
        return np.stack(rows)

    def agreeing_classes(self, a: str, b: str) -> np.ndarray | None:
        """Whether models ``a`` and ``b`` predict each class on exactly the same items of
        positive weight: ``(C,)`` bool (``None`` for regression; a lazy pool reads it in one
        pass over its chunks).

        On such a class every per-class ratio (its precision, recall, F1) is the same for both
        models whatever the labels, so its part of their difference is exactly 0 and a
        comparison needs no allowance for it
        (:func:`~bayes_activeeval.comparison.results.class_allowance`)."""
        if self.classes is None:
            return None
        cache = self.__dict__.setdefault("_agreeing_classes", {})
        key = tuple(sorted((self.check_model(a), self.check_model(b))))  # symmetric
        if key not in cache:
            cache[key] = self._agree_by_class(*key)
        return cache[key]

    def _agree_by_class(self, a: str, b: str) -> np.ndarray:
        """:meth:`agreeing_classes` computed from the predictions in memory."""
        pa, pb = self._pred[a], self._pred[b]
        w = getattr(self, "_weights", None)
        off = pa != pb
        if w is not None:
            off &= np.asarray(w) > 0
        C = self.n_classes
        told = np.bincount(pa[off], minlength=C)[:C] + np.bincount(pb[off], minlength=C)[:C]
        return told == 0

    def __getstate__(self) -> dict:
        """The pool for pickling, without the comparison's disagreement cache (rebuilt on
        demand; it may hold a measure object that does not pickle)."""
        state = self.__dict__.copy()
        state.pop("_disagreement_mass", None)
        return state

    def models_of(self, measure: Measure, model: str | None = None) -> tuple[str, ...]:
        """The models a (resolved) measure reads."""
        if measure.models is not None:
            return measure.models
        return (self.check_model(model),)

    # -- labels ---------------------------------------------------------------------------------
    def _encode(self, values: np.ndarray, name: str) -> np.ndarray:
        classes = self.classes
        C = len(classes)
        if (
            values.dtype.kind in "iub"
            and classes.dtype.kind in "iub"
            and np.array_equal(classes, np.arange(C))
        ):
            idx = values.astype(np.int64, copy=False)
            bad = np.flatnonzero((idx < 0) | (idx >= C))
        else:
            try:
                idx = np.searchsorted(classes, values)
            except TypeError as exc:
                raise TypeError(f"{name} has values that cannot be compared with classes") from exc
            idx = np.clip(idx, 0, C - 1)
            bad = np.flatnonzero(classes[idx] != values)
        if bad.size:
            raise ValueError(
                f"{name}[{bad[0]}] = {show(values[bad[0]])} is not one of the classes {show(classes)}"
            )
        return idx.astype(np.int32 if C < 2**31 else np.int64)

    def encode_labels(self, labels: Any, name: str = "labels") -> np.ndarray:
        """Encode user labels: class indices for classification, floats for regression.

        Raises
        ------
        ValueError
            For labels outside the classes, or non-finite regression labels.
        """
        arr = as_1d(labels, name)
        if self.task == "regression":
            try:
                arr = arr.astype(float)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{name} must be numbers for a regression pool") from exc
            return check_finite(arr, name)
        if arr.dtype.kind == "f" and self.classes.dtype.kind in "iub":
            bad = np.flatnonzero(~np.isfinite(arr))
            if bad.size:
                i = int(bad[0])
                what = "NaN" if np.isnan(arr[i]) else show(arr[i])
                raise ValueError(
                    f"{name}[{i}] is {what}; labels must be one of {show(self.classes)}"
                )
            lo, hi = float(np.min(self.classes)), float(np.max(self.classes))
            far = np.flatnonzero((arr < lo) | (arr > hi))
            if far.size:  # before any cast: a float beyond int64 would come out as garbage
                i = int(far[0])
                raise ValueError(
                    f"{name}[{i}] = {show(arr[i])} is not one of the classes {show(self.classes)}"
                )
            if np.all(arr == np.round(arr)):
                arr = arr.astype(np.int64)
        return self._encode(arr, name)

    def decode_labels(self, encoded: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`encode_labels`."""
        if self.task == "regression":
            return np.asarray(encoded, dtype=float)
        return self.classes[np.asarray(encoded, dtype=np.int64)]

    def _check_probs(self, value: Any, model: str) -> np.ndarray:
        name = f"probs[{model!r}]" if len(self.models) > 1 or model != DEFAULT_MODEL else "probs"
        arr = as_array(value, name)
        C = self.n_classes
        if arr.ndim == 1:
            if C != 2:
                raise ValueError(
                    f"{name} is a vector, which only works for binary pools; give shape "
                    f"({self.n_items}, {C}) for {C} classes"
                )
            if self.pos is None:
                raise ValueError(
                    f"{name} is a vector of P(y = pos_label), but the classes {show(self.classes)} "
                    "have no default positive class: give pos_label="
                )
            check_probabilities(arr, name, n=self.n_items)
            out = np.empty((self.n_items, 2))
            out[:, self.pos] = arr
            out[:, 1 - self.pos] = 1.0 - arr
            return out
        if arr.ndim != 2 or arr.shape != (self.n_items, C):
            raise ValueError(
                f"{name} has shape {arr.shape}; expected ({self.n_items}, {C}) or a vector"
            )
        check_probabilities(arr, name, n=self.n_items)
        sums = arr.sum(axis=1)
        bad = np.flatnonzero(np.abs(sums - 1.0) > 1e-6)
        if bad.size:
            raise ValueError(
                f"{name}[{bad[0]}] sums to {show(sums[bad[0]])}; each row must sum to 1"
            )
        return arr

    # -- xarray ---------------------------------------------------------------------------------
    def to_dataset(self) -> xr.Dataset:
        """The pool as an :class:`xarray.Dataset` with dims ``item``, ``model`` and ``class``."""
        coords: dict[str, Any] = {
            "item": np.arange(self.n_items) if self.item_ids is None else self.item_ids,
            "model": list(self.models),
        }
        data: dict[str, Any] = {}
        pred = np.stack([self._pred[m] for m in self.models], axis=1)
        if self.task == "regression":
            data["prediction"] = (("item", "model"), pred)
        else:
            coords["class"] = self.classes
            data["prediction"] = (("item", "model"), self.classes[pred])
        if self._prob is not None:
            data["prob"] = (
                ("item", "model", "class"),
                np.stack([self._prob[m] for m in self.models], 1),
            )
        if self._std is not None:
            data["predictive_std"] = (
                ("item", "model"),
                np.stack([self._std[m] for m in self.models], 1),
            )
        if self.scores is not None:
            data["score"] = (("item", "model"), np.stack([self.scores[m] for m in self.models], 1))
        if self.costs is not None:
            data["cost"] = (("item",), self.costs)
        data["p"] = (("item",), self.p)
        attrs = {"task": self.task}
        if self.pos_label is not None:
            attrs["pos_label"] = str(self.pos_label)
        return xr.Dataset(data, coords=coords, attrs=attrs)


def _infer_task(task, raw, prob_d, std_d) -> str:
    if task is not None:
        if task not in ("binary", "multiclass", "classification", "regression"):
            raise ValueError(f"task must be 'binary', 'multiclass' or 'regression', got {task!r}")
        return "regression" if task == "regression" else "classification"
    if std_d is not None:
        return "regression"
    if prob_d is not None:
        return "classification"
    first = next(iter(raw.values()))
    if first.dtype.kind == "f" and np.any(first != np.round(first)):
        return "regression"
    return "classification"


def _numbers(values: np.ndarray, name: str) -> np.ndarray:
    """``values`` as floats, or a ``ValueError`` naming the argument and the first value that is
    not a number."""
    try:
        return values.astype(float)
    except (TypeError, ValueError):
        import pandas as pd

        coerced = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy()
        i = int(np.flatnonzero(pd.isna(coerced) & ~pd.isna(values))[0])
        raise ValueError(
            f"{name}[{i}] = {str(values[i])!r}; a regression pool's predictions are numbers"
        ) from None


def _infer_classes(classes, raw, prob_d) -> np.ndarray:
    if classes is not None:
        cls = as_1d(classes, "classes")
        if len(np.unique(cls)) != len(cls):
            raise ValueError(f"classes contains duplicates: {show(cls)}")
        if len(cls) < 2:
            raise ValueError(f"classes needs at least two values, got {show(cls)}")
        order = np.argsort(cls, kind="stable")
        if not np.array_equal(order, np.arange(len(cls))):
            raise ValueError(f"classes must be sorted (as np.unique returns them), got {show(cls)}")
        return cls
    for m, v in raw.items():
        none = np.flatnonzero(np.equal(v, None)) if v.dtype.kind == "O" else ()
        if len(none):
            raise ValueError(
                f"predictions[{m!r}][{int(none[0])}] is None; every item needs a prediction"
            )
    seen = np.unique(np.concatenate([np.unique(v) for v in raw.values()]))
    n_cols = None
    if prob_d is not None:
        first = np.asarray(next(iter(prob_d.values())))
        n_cols = 2 if first.ndim == 1 else first.shape[-1]
    if n_cols is None or len(seen) == n_cols:
        if len(seen) >= 2:
            return seen
    values = set(seen.tolist())
    if (n_cols in (None, 2)) and len(seen) <= 2:
        for default in _BINARY_DEFAULTS:
            if values <= default:
                return np.array(
                    sorted(default), dtype=seen.dtype if seen.dtype.kind != "b" else bool
                )
    if n_cols is not None and seen.dtype.kind in "iu" and values <= set(range(n_cols)):
        return np.arange(n_cols)
    raise MissingInput(
        f"cannot infer the classes from predictions {show(seen[:10])}"
        + (f" and probs with {n_cols} columns" if n_cols else "")
        + "; ",
        "classes",
    )


def _infer_pos(pos_label, classes) -> tuple[Any, int | None]:
    if len(classes) != 2:
        if pos_label is not None:
            raise ValueError(f"pos_label is for binary pools; the pool has classes {show(classes)}")
        return None, None
    if pos_label is None:
        for candidate in (1, True):
            hits = np.flatnonzero(classes == candidate)
            if hits.size:
                return classes[hits[0]], int(hits[0])
        return None, None
    hits = np.flatnonzero(classes == pos_label)
    if not hits.size:
        raise ValueError(f"pos_label={pos_label!r} is not one of the classes {show(classes)}")
    return classes[hits[0]], int(hits[0])
