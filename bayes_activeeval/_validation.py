"""Input checks shared by the package: each error names the argument and the offending value."""

from __future__ import annotations

from typing import Any

import numpy as np

# the library's words for giving a missing input, which end a MissingInput's message
_GIVE = {
    "probs": "give the pool probs=",
    "predictive_std": "give the pool predictive_std=",
    "classes": "give classes=",
}


class MissingInput(ValueError):
    """A ``ValueError`` for an input the call cannot do without (the pool's probabilities, its
    predictive standard deviations, the classes), with the missing input named in ``needs``.

    The message is ``reason`` followed by the library's words for giving the input
    (``give the pool probs=``, and `` or pass belief=`` when a belief would do instead); a front
    end with other words for it (the ``bae`` command line names its options) reads ``needs``,
    ``or_belief`` and ``reason`` instead of rewriting the message.

    Parameters
    ----------
    reason : str
        The message up to the words for the missing input, its separator included
        (``"the pool has no probs, so there is no belief about the labels; "``).
    needs : {"probs", "predictive_std", "classes"}, optional
        The missing input. ``None`` (a plain message, e.g. re-raised as ``type(exc)(text)`` with
        context appended): the message is ``reason`` alone.
    or_belief : bool
        Whether passing ``belief=`` would do instead.
    """

    def __init__(self, reason: str, needs: str | None = None, or_belief: bool = False):
        if needs is not None and needs not in _GIVE:
            raise ValueError(f"needs must be one of {sorted(_GIVE)} or None, got {needs!r}")
        self.reason = reason
        self.needs = needs
        self.or_belief = bool(or_belief)
        words = "" if needs is None else _GIVE[needs] + (" or pass belief=" if or_belief else "")
        super().__init__(reason + words)

    def __reduce__(self):  # pickling and copying keep needs (the default rebuilds from args)
        return type(self), (self.reason, self.needs, self.or_belief), self.__dict__


def show(value: Any) -> str:
    """``repr`` of a value as a user wrote it: NumPy scalars and arrays as plain Python."""
    if isinstance(value, np.ndarray):
        return repr(value.tolist())
    if isinstance(value, np.generic):
        return repr(value.item())
    return repr(value)


def check_model_names(models: Any, minimum: int, name: str = "models") -> tuple[str, ...]:
    """A tuple of at least ``minimum`` distinct model names (a bare string is refused)."""
    if isinstance(models, str):
        raise TypeError(f"{name} must be a sequence of model names, got the string {models!r}")
    models = tuple(models)
    if len(models) < minimum:
        raise ValueError(f"{name} must name at least {minimum} model(s), got {models!r}")
    if len(set(models)) != len(models):
        raise ValueError(f"{name} must be distinct, got {models!r}")
    return models


def as_array(value: Any, name: str, dtype: Any = float) -> np.ndarray:
    """``np.asarray(value, dtype)``, or a ``TypeError`` naming the argument when it cannot be
    converted (text where numbers are needed)."""
    try:
        return np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"{name} must be array-like{' of numbers' if dtype else ''}: {exc}"
        ) from exc


def as_1d(value: Any, name: str, *, n: int | None = None, dtype: Any = None) -> np.ndarray:
    """Return ``value`` as a 1-D array, checking its length against ``n``."""
    arr = as_array(value, name, dtype)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but the pool has {n} items")
    return arr


def check_finite(arr: np.ndarray, name: str) -> np.ndarray:
    """Raise if ``arr`` has NaN or infinite entries, naming the first one."""
    if arr.dtype.kind in "fc":
        bad = np.flatnonzero(~np.isfinite(arr.ravel()))
        if bad.size:
            i = np.unravel_index(bad[0], arr.shape)
            where = i[0] if len(i) == 1 else tuple(int(k) for k in i)
            raise ValueError(
                f"{name}[{where}] = {show(arr.ravel()[bad[0]])}; values must be finite"
            )
    return arr


def check_probabilities(arr: np.ndarray, name: str, *, n: int | None = None) -> np.ndarray:
    """Raise unless every entry is a probability in ``[0, 1]`` (NaN included in the check)."""
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} rows but the pool has {n} items")
    flat = arr.ravel()
    bad = np.flatnonzero(~((flat >= 0.0) & (flat <= 1.0)))
    if bad.size:
        i = np.unravel_index(bad[0], arr.shape)
        where = int(i[0]) if len(i) == 1 else tuple(int(k) for k in i)
        raise ValueError(f"{name}[{where}] = {show(flat[bad[0]])} is not a probability in [0, 1]")
    return arr


def check_binary_labels(values: Any, name: str = "y_true") -> np.ndarray:
    """``values`` (one-dimensional) as a float array of 0/1 labels, 1 the positive class; the
    error names the first other value (labels in {-1, 1} or {1, 2} would otherwise be read as
    weights of the positive class)."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    try:
        y = arr.astype(float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must hold 0/1 labels, got dtype {arr.dtype}") from exc
    bad = np.flatnonzero((y != 0) & (y != 1))
    if bad.size:
        raise ValueError(f"{name}[{bad[0]}] = {show(arr[bad[0]])}; expected 0 or 1")
    return y


def check_encoded_labels(values: Any, n_classes: int, name: str = "labels") -> np.ndarray:
    """``values`` as int64 class indices ``0..n_classes-1`` (whole floats accepted)."""
    y = np.asarray(values)
    if y.size and y.dtype.kind not in "iub":
        if y.dtype.kind == "f" and np.all(np.isfinite(y)) and np.all(y == np.round(y)):
            y = y.astype(np.int64)
        else:
            raise TypeError(
                f"{name} must be encoded class indices (pool.encode_labels), got dtype {y.dtype}"
            )
    y = y.astype(np.int64, copy=False)
    bad = np.flatnonzero((y < 0) | (y >= n_classes))
    if bad.size:
        raise ValueError(
            f"{name}[{bad[0]}] = {y[bad[0]]} is not an encoded class index 0..{n_classes - 1}"
        )
    return y


#: Why :func:`distinct_labels` refuses an item with two different labels (the default).
ONE_LABEL = (
    " but deterministic=True gives one label per item; pass deterministic=False for a labeler "
    "whose label may change from draw to draw"
)


def distinct_labels(
    idx: np.ndarray, y: np.ndarray, *, hint: str = "", why: str = ONE_LABEL
) -> tuple[np.ndarray, np.ndarray]:
    """The distinct labeled items (sorted) and their one label, under a deterministic oracle.

    An item drawn several times with the same label counts once; an item with two different
    labels is refused: a deterministic oracle gives one label per item, and keeping the first
    would drop the other silently.

    Parameters
    ----------
    idx : ndarray of int (n,)
        The labeled draws' items (repeats allowed).
    y : ndarray of int (n,)
        Their encoded labels.
    hint : str, optional
        Appended to the error message (default ``""``).
    why : str, optional
        The reason the error gives after the item and its two labels (default
        :data:`ONE_LABEL`).

    Returns
    -------
    items, labels : ndarray of int64
        Each labeled item once, sorted, and its label.

    Raises
    ------
    ValueError
        If an item has two different labels.
    """
    items, first, inv = np.unique(idx, return_index=True, return_inverse=True)
    labels = y[first]
    clash = np.flatnonzero(labels[inv] != y)
    if clash.size:
        j = int(clash[0])
        raise ValueError(
            f"item {int(idx[j])} has two different labels ({int(labels[inv[j]])} and "
            f"{int(y[j])}){why}{hint}"
        )
    return items.astype(np.int64, copy=False), labels


def check_rng(rng: Any) -> np.random.Generator:
    """SPEC 7: accept None, a seed, a SeedSequence or a Generator."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, np.random.RandomState):
        raise TypeError(
            "rng must be a numpy Generator or a seed; legacy RandomState is not accepted"
        )
    try:
        return np.random.default_rng(rng)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"rng must be None, an int seed or a numpy Generator, got {rng!r}") from exc


def check_level(level: Any, name: str = "level") -> float:
    """A confidence level strictly between 0 and 1."""
    try:
        lv = float(level)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number in (0, 1), got {level!r}") from exc
    if not 0.0 < lv < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {level!r}")
    return lv


def check_fraction(
    value: Any, name: str, *, allow_zero: bool = True, allow_one: bool = False
) -> float:
    """A number in [0, 1) (or the bounds the caller allows)."""
    try:
        v = float(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number, got {value!r}") from exc
    lo_ok = v >= 0 if allow_zero else v > 0
    hi_ok = v <= 1 if allow_one else v < 1
    if not (np.isfinite(v) and lo_ok and hi_ok):
        lo = "[0" if allow_zero else "(0"
        hi = "1]" if allow_one else "1)"
        raise ValueError(f"{name} must be in {lo}, {hi}, got {value!r}")
    return v


def check_number(value: Any, name: str) -> float:
    """``value`` as a finite float: a bool, a string or ``None`` is refused (``TypeError``), as is
    a NaN or infinite number (``ValueError``), naming the argument and the value."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        raise TypeError(f"{name} must be a number, got {value!r}")
    v = float(value)
    if not np.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return v


def check_budget(value: Any, name: str = "budget") -> float:
    """A label budget (labels, or label cost): a positive, finite number, as a float."""
    try:
        b = float(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a number, got {value!r}") from exc
    if not (np.isfinite(b) and b > 0):
        raise ValueError(f"{name} must be positive and finite, got {show(value)}")
    return b


def check_items(indices: Any, n_items: int, name: str = "indices", why: str = "") -> np.ndarray:
    """``indices`` as an int64 array of items of a pool of ``n_items``, or a ``ValueError``
    naming the first index outside ``0..n_items-1`` (``why`` is appended to the message)."""
    idx = np.asarray(indices)
    bad = np.flatnonzero((idx < 0) | (idx >= n_items))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{name}[{i}] = {int(idx[i])} is not an item of the pool (0..{n_items - 1}){why}"
        )
    return idx.astype(np.int64, copy=False)


def check_count(value: Any, name: str, *, minimum: int = 1) -> int:
    """A whole number >= minimum."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)


def check_weights(values: Any, name: str = "sample_weight", *, n: int | None = None) -> np.ndarray:
    """``values`` as a one-dimensional float array of finite, non-negative weights (of length
    ``n`` if given); the error names the argument, the first bad index and its value."""
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries; expected {n}")
    check_finite(arr, name)
    bad = np.flatnonzero(arr < 0)
    if bad.size:
        raise ValueError(f"{name}[{bad[0]}] = {show(arr[bad[0]])}; weights must be >= 0")
    return arr
