"""Pools beyond memory and beyond one machine: a lazy :class:`~bayes_activeeval.Pool` on dask.

A :class:`LazyPool` holds no per-item array. It holds, for each *chunk* of consecutive items, a
dask task that loads that chunk's columns (a few Parquet row groups, a block of Zarr or dask
arrays, a partition of a dask DataFrame). Every pool-wide quantity the package needs is a sum over
items, so every step is a dask reduction over chunks, run on the threaded scheduler or on a
``dask.distributed`` cluster (the ``client`` the pool was given, else the ambient one):

- intrinsic risk ``R = Σ_x p(x) E_π[ℓ(x, y)]`` (Sawade (2012), Eq. 4.21-4.22): per-chunk sums;
- optimal proposal ``q*(x) ∝ p(x) c(x)^(-1/2) sqrt(u(x))``, ``u(x) = E_π‖Dg(R)(ℓ(x, y) − R)‖²``
  (Sawade (2012), Thm. 4.1, Eq. 4.6; Thm. 4.2, Eq. 4.25): per-chunk sums ``S_k = Σ_{x∈k} s(x)``
  give the normalizer ``S = Σ_k S_k``; ``q`` of a chunk is then recomputed on demand,
  ``q(x) = (1 − δ) s(x)/S + δ p(x)``, never stored for the whole pool;
- draws: two-level inverse-CDF sampling — a uniform number picks a chunk by its mass
  ``Q_k = (1 − δ) S_k/S + δ P_k``, then an item by the cumulative sum of ``q`` inside that chunk.
  This is exactly the in-memory :meth:`Proposal.draw` (``searchsorted`` on the cumulative sum of
  ``q``), split in two, so the same ``rng`` gives the same items;
- estimates (Sawade (2012), Eq. 3.11/3.31) only read the drawn items, gathered chunk by chunk.

Each chunk is turned into a small in-memory :class:`Pool` (validated and encoded exactly as an
in-memory pool would be) and the package's own NumPy kernels run on it, so the lazy results equal
the in-memory ones up to the order of floating-point summation (``q`` to ~1e-15 relative).

Peak memory is a few chunks per worker thread: ``chunk_size`` items (default ``2**20``) of every
column the measure reads plus the kernels' temporaries, about 100 bytes per item of a binary pool
with one model.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._validation import check_count, check_fraction, check_rng, show
from .beliefs import CategoricalBelief, as_belief
from .kernel import (
    DEFAULT_BELIEF_FLOOR,
    DEFAULT_MIX,
    deviation_integrand,
    intrinsic_risk,
    loss_table,
    proposal_scores,
    support_needed,
)
from .measures import Measure
from .pool import DEFAULT_MODEL, Pool
from .proposals import Draws, Proposal, ProposalInfo, default_scores

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "LazyPool",
    "LazyProposal",
    "is_lazy",
]

#: Default items per chunk: 2**20 items of a binary one-model pool is ~16 MB of columns and
#: ~100 MB of kernel temporaries; large enough that per-task overhead (~1 ms) is negligible.
DEFAULT_CHUNK_SIZE = 1 << 20


def is_lazy(pool: Any) -> bool:
    """Whether ``pool`` is a dask-backed :class:`LazyPool`."""
    return isinstance(pool, LazyPool)


def _import_dask():
    try:
        import dask
    except ImportError as exc:  # pragma: no cover - dask is a dependency of the [dask] extra
        raise ImportError("lazy pools need dask: pip install 'bayes-activeeval[dask]'") from exc
    return dask


# ------------------------------------------------------------------------------------------------
# chunk sources: each yields, per chunk, a dict of NumPy columns keyed "pred/<model>",
# "prob/<model>", "std/<model>", "score/<model>", "cost", "weight", "item_id".
def _role_columns(value: Any, name: str, models: tuple[str, ...] | None) -> dict[str, Any]:
    """``{model: column spec}`` from a column name/array, or a dict of them."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        if not value:
            raise ValueError(f"{name} is an empty dict; give at least one model")
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"{name} keys must be model names (str), got {key!r}")
        out = dict(value)
    else:
        out = {DEFAULT_MODEL: value}
    if models is not None and set(out) != set(models):
        raise ValueError(
            f"{name} names models {sorted(out)} but predictions names {sorted(models)}"
        )
    return out


def _frame_to_parts(frame, mapping: dict[str, Any]) -> dict[str, np.ndarray]:
    """Columns of a pandas DataFrame / pyarrow Table chunk, by role."""
    out = {}
    for key, col in mapping.items():
        if isinstance(col, (list, tuple)):
            out[key] = np.stack([_column(frame, c) for c in col], axis=1).astype(float, copy=False)
        else:
            out[key] = _column(frame, col)
    return out


def _column(frame, name: str) -> np.ndarray:
    try:
        col = frame[name] if not hasattr(frame, "column") else frame.column(name)
    except KeyError as exc:
        raise ValueError(f"the pool file has no column {name!r}") from exc
    if hasattr(col, "to_numpy") and not hasattr(col, "index"):  # pyarrow ChunkedArray
        if col.null_count:
            raise ValueError(f"column {name!r} has {col.null_count} missing values")
        return col.to_numpy()
    arr = col.to_numpy()
    if arr.dtype == object or arr.dtype.kind == "f":
        import pandas as pd

        missing = pd.isna(arr)
        if arr.dtype == object and missing.any():
            raise ValueError(f"column {name!r} has {int(missing.sum())} missing values")
    return arr


def _read_parquet_chunk(
    pieces: list[tuple[str, list[int]]], columns: list[str], mapping: dict[str, Any]
) -> dict[str, np.ndarray]:
    """Read whole row groups of one or more Parquet files: one chunk."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.ParquetFile(path).read_row_groups(rgs, columns=columns) for path, rgs in pieces]
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
    return _frame_to_parts(table, mapping)


def _assemble(keys: tuple[str, ...], *blocks: np.ndarray) -> dict[str, np.ndarray]:
    return {k: np.asarray(b) for k, b in zip(keys, blocks, strict=True)}


def _pandas_parts(frame, mapping: dict[str, Any]) -> dict[str, np.ndarray]:
    return _frame_to_parts(frame, mapping)


def _parquet_files(path: Any) -> list[str]:
    if isinstance(path, (list, tuple)):
        files = [os.fspath(p) for p in path]
    else:
        path = os.fspath(path)
        if os.path.isdir(path):
            files = sorted(glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True))
        elif any(ch in path for ch in "*?["):
            files = sorted(glob.glob(path))
        else:
            files = [path]
    if not files:
        raise ValueError(f"no Parquet files found at {path!r}")
    for f in files:
        if not os.path.exists(f):
            raise FileNotFoundError(f"pool file {f!r} does not exist")
    return files


# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Spec:
    """What every chunk task needs to turn raw columns into an in-memory :class:`Pool`: small and
    picklable, so it travels to distributed workers."""

    models: tuple[str, ...]
    task: str
    classes: Any
    pos_label: Any
    n_items: int
    weight_total: float | None  # Σ raw weights (None: uniform p = 1/N)
    has_probs: bool
    has_std: bool
    has_scores: bool
    has_costs: bool

    def p(self, parts: dict[str, np.ndarray], n: int) -> np.ndarray:
        if self.weight_total is None:
            return np.full(n, 1.0 / self.n_items)
        return np.asarray(parts["weight"], dtype=float) / self.weight_total

    def pool(self, parts: dict[str, np.ndarray], offset: int, p: Any = None) -> Pool:
        """The chunk as an in-memory pool whose ``p`` is the chunk's slice of the global ``p``
        (or ``p``, when given)."""
        ms = self.models

        def role(r):
            return {m: parts[f"{r}/{m}"] for m in ms}

        try:
            cp = Pool(
                predictions=role("pred"),
                probs=role("prob") if self.has_probs else None,
                predictive_std=role("std") if self.has_std else None,
                scores=role("score") if self.has_scores else None,
                costs=parts["cost"] if self.has_costs else None,
                classes=self.classes,
                pos_label=self.pos_label,
                task="regression" if self.task == "regression" else "classification",
            )
        except (ValueError, TypeError) as exc:
            n = len(next(iter(parts.values())))
            where = (
                "among the items read (indices are within them)"
                if p is not None
                else f"in the chunk of items {offset}..{offset + n - 1}; indices are within it"
            )
            raise type(exc)(f"{exc} ({where})") from exc
        n = cp.n_items
        if p is not None:
            cp._weights = p
            return cp
        if self.weight_total is not None:
            w = np.asarray(parts["weight"], dtype=float)
            bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
            if bad.size:
                raise ValueError(
                    f"weights[{offset + bad[0]}] = {show(w[bad[0]])}; item weights must be "
                    "finite and >= 0"
                )
        cp._weights = self.p(parts, n)  # the global p(x) on this chunk (not renormalized)
        return cp


# ------------------------------------------------------------------------------------------------
class LazyPool(Pool):
    """A pool on dask: the same public calls as :class:`Pool`, with nothing of size ``n`` in memory.

    Build one with :meth:`Pool.from_parquet`, :meth:`Pool.from_zarr`, :meth:`Pool.from_dask` or
    :meth:`Pool.from_dask_dataframe`. It supports ``optimal_proposal``, ``passive_proposal``,
    ``Proposal.draw``, ``estimate`` and ``compare``; item-level reads (``view`` on index arrays,
    ``take``) gather only the requested items, chunk by chunk.

    Attributes
    ----------
    chunk_sizes : ndarray of int
        Items per chunk, in item order.
    offsets : ndarray of int
        Index of each chunk's first item (``len(chunk_sizes) + 1`` entries, the last is ``n``).
    client : distributed.Client or None
        The cluster computations run on (``None``: the ambient client if any, else dask's threads).
    """

    is_lazy = True

    def __init__(
        self,
        parts: Sequence[Any],
        sizes: Sequence[int],
        *,
        models: tuple[str, ...],
        has_probs: bool,
        has_std: bool = False,
        has_scores: bool = False,
        has_costs: bool = False,
        has_weights: bool = False,
        has_item_ids: bool = False,
        prob_ndim: int = 1,
        n_prob_cols: int | None = None,
        classes: Any = None,
        pos_label: Any = None,
        task: str | None = None,
        client: Any = None,
    ) -> None:
        _import_dask()
        self._parts = list(parts)
        self.chunk_sizes = np.asarray(sizes, dtype=np.int64)
        if self.chunk_sizes.size != len(self._parts):
            raise ValueError("one size per chunk is needed")
        if np.any(self.chunk_sizes <= 0):
            keep = self.chunk_sizes > 0
            self._parts = [p for p, k in zip(self._parts, keep, strict=True) if k]
            self.chunk_sizes = self.chunk_sizes[keep]
        self.offsets = np.concatenate([[0], np.cumsum(self.chunk_sizes)]).astype(np.int64)
        n = int(self.offsets[-1])
        if n == 0:
            raise ValueError("the pool is empty: predictions has no items")
        self.n_items = n
        self.models = tuple(models)
        self.client = client
        self._has = {
            "prob": has_probs,
            "std": has_std,
            "score": has_scores,
            "cost": has_costs,
            "weight": has_weights,
            "item_id": has_item_ids,
        }
        # the task and the classes: from the arguments, else from the data (one cheap pass)
        if has_std or task == "regression":
            if has_probs:
                raise ValueError(
                    "probs is for classification; a regression pool takes predictive_std"
                )
            self.task = "regression"
        elif task not in (None, "binary", "multiclass", "classification"):
            raise ValueError(f"task must be 'binary', 'multiclass' or 'regression', got {task!r}")
        else:
            self.task = "classification"
            if task is None and not has_probs:
                first = self._compute_parts([0], _first_predictions, self.models)[0]
                if first.dtype.kind == "f" and np.any(first != np.round(first)):
                    self.task = "regression"
        if self.task == "regression":
            self.classes = None
            self.pos_label, self.pos = None, None
        else:
            # the classes and the positive class exactly as an in-memory pool infers them: from a
            # probe pool over the distinct predictions (or the given classes)
            values = self._unique_predictions() if classes is None else np.asarray(classes)
            probe_probs = None
            if has_probs:
                probe_probs = (
                    np.full(values.size, 0.5)
                    if prob_ndim == 1
                    else np.full((values.size, n_prob_cols), 1.0 / n_prob_cols)
                )
            probe = Pool(
                predictions=values,
                probs=probe_probs,
                classes=classes,
                pos_label=pos_label,
                task="classification",
            )
            self.classes = probe.classes
            self.task = probe.task
            self.pos_label, self.pos = probe.pos_label, probe.pos
        weight_total = None
        if has_weights:
            weight_total = float(sum(self._compute_parts(None, _weight_sum)))
            if not np.isfinite(weight_total) or weight_total <= 0:
                raise ValueError("weights sum to zero; at least one item needs positive weight")
        self._spec = _Spec(
            self.models,
            self.task,
            self.classes,
            self.pos_label,
            n,
            weight_total,
            has_probs,
            has_std,
            has_scores,
            has_costs,
        )
        # Pool attributes that are per-item arrays in memory: None here (read through chunks)
        self.scores = None
        self.costs = None
        self.item_ids = None
        self._pred = {}
        self._prob = None
        self._std = None
        self._weights = None
        self._uniform = None
        self._take_cache: tuple[bytes, Pool] | None = None

    # -- basic properties ---------------------------------------------------------------------
    @property
    def n_chunks(self) -> int:
        return len(self._parts)

    @property
    def has_uniform_weights(self) -> bool:
        return not self._has["weight"]

    def has_probs(self) -> bool:
        return self._has["prob"]

    def has_std(self) -> bool:
        return self._has["std"]

    @property
    def has_costs(self) -> bool:
        return self._has["cost"]

    @property
    def p(self):
        """The test distribution ``p(x)`` as a lazy dask array (computing it materializes ``n``
        floats)."""
        return self.column(None, _chunk_p)

    def __repr__(self) -> str:
        extra = f", classes={show(self.classes)}" if self.classes is not None else ""
        return (
            f"LazyPool(n_items={self.n_items}, n_chunks={self.n_chunks}, task={self.task!r}, "
            f"models={list(self.models)}{extra})"
        )

    # -- running chunk tasks ----------------------------------------------------------------------
    def _compute(self, tasks: list[Any]) -> list[Any]:
        """Compute delayed tasks on the pool's client (or the ambient scheduler)."""
        dask = _import_dask()
        if not tasks:
            return []
        if self.client is not None:
            return list(dask.compute(*tasks, scheduler=self.client))
        return list(dask.compute(*tasks))

    def _chunk_task(self, k: int, fn: Callable, *args: Any) -> Any:
        """``fn(chunk_pool_or_parts, k-th offset, *args)`` as a delayed task on chunk ``k``."""
        dask = _import_dask()
        # pure=False: no hashing of the arguments (a belief array would be hashed per chunk)
        return dask.delayed(_run_chunk, pure=False)(
            self._spec, self._parts[k], int(self.offsets[k]), fn, *args
        )

    def _compute_parts(self, chunks: Sequence[int] | None, fn: Callable, *args: Any) -> list[Any]:
        """``[fn(parts_k, offset_k, *args) for k in chunks]`` on raw columns, computed."""
        dask = _import_dask()
        ks = range(self.n_chunks) if chunks is None else chunks
        tasks = [
            dask.delayed(fn, pure=True)(self._parts[k], int(self.offsets[k]), *args) for k in ks
        ]
        return self._compute(tasks)

    def map_chunks(
        self, fn: Callable, *args: Any, chunks: Sequence[int] | None = None
    ) -> list[Any]:
        """``[fn(chunk_pool, offset, *args) for every chunk]``, computed on the cluster.

        ``chunk_pool`` is the chunk as an in-memory :class:`Pool` whose ``p`` is the chunk's slice
        of the global test distribution; ``fn`` should return something small (per-chunk sums).
        """
        ks = range(self.n_chunks) if chunks is None else chunks
        return self._compute([self._chunk_task(k, fn, *args) for k in ks])

    def column(self, key: str | None, fn: Callable | None = None, *args: Any, dtype=float):
        """A lazy dask array over all items: a raw column (``"pred/model"``, ``"cost"``, …) or
        ``fn(chunk_pool, offset, *args)`` per chunk (an array of the chunk's length)."""
        dask = _import_dask()
        import dask.array as da

        blocks = []
        for k in range(self.n_chunks):
            if fn is None:
                task = dask.delayed(_get_column, pure=True)(self._parts[k], key)
            else:
                task = self._chunk_task(k, fn, *args)
            blocks.append(da.from_delayed(task, shape=(int(self.chunk_sizes[k]),), dtype=dtype))
        return da.concatenate(blocks)

    def _unique_predictions(self) -> np.ndarray:
        seen = self._compute_parts(None, _unique_preds, self.models)
        try:
            return np.unique(np.concatenate(seen))
        except TypeError as exc:
            raise TypeError("predictions have values that cannot be compared") from exc

    # -- item-level reads -----------------------------------------------------------------------
    def chunk_of(self, indices: np.ndarray) -> np.ndarray:
        """The chunk holding each item index."""
        return np.searchsorted(self.offsets, indices, side="right") - 1

    def _check_indices(self, idx: Any) -> np.ndarray:
        if isinstance(idx, slice):
            idx = np.arange(self.n_items)[idx] if self.n_items <= 1 << 16 else None
            if idx is None:
                raise ValueError(
                    "a lazy pool reads items by index arrays; a slice over the whole pool would "
                    "materialize it (use map_chunks)"
                )
        arr = np.asarray(idx)
        if arr.dtype.kind == "b":
            raise TypeError("a lazy pool takes index arrays, not boolean masks")
        arr = arr.astype(np.int64, copy=False).reshape(-1)
        bad = np.flatnonzero((arr < 0) | (arr >= self.n_items))
        if bad.size:
            raise ValueError(
                f"item index {int(arr[bad[0]])} is outside the pool (0..{self.n_items - 1})"
            )
        return arr

    def take(self, indices: Any) -> Pool:
        """The items ``indices`` (repeats allowed, in the order given) as an in-memory pool.

        Only the chunks holding them are read. The returned pool's ``p`` is the global ``p(x)`` of
        each item (not renormalized).
        """
        idx = self._check_indices(indices)
        if idx.size == 0:
            raise ValueError("no items to take")
        cache_key = idx.tobytes()
        if self._take_cache is not None and self._take_cache[0] == cache_key:
            return self._take_cache[1]
        dask = _import_dask()
        chunk = self.chunk_of(idx)
        ks = np.unique(chunk)
        # gather the raw columns of the rows only; validation and encoding run on those rows
        got = self._compute(
            [
                dask.delayed(_take_raw, pure=False)(
                    self._parts[k], idx[chunk == k] - self.offsets[k], self._spec
                )
                for k in ks
            ]
        )
        cols = got[0].keys()
        out = {c: np.empty((idx.size, *got[0][c].shape[1:]), got[0][c].dtype) for c in cols}
        for k, g in zip(ks, got, strict=True):
            sel = chunk == k
            for c in cols:
                out[c][sel] = g[c]
        p = out.pop("__p")
        pool = self._spec.pool(out, 0, p=p)
        self._take_cache = (cache_key, pool)  # views of several models read the items once
        return pool

    def view(self, model: str | None = None, idx: Any = None):
        """A :class:`~bayes_activeeval.measures.ModelView` of one model on the items ``idx``
        (an index array: only their chunks are read)."""
        model = self.check_model(model)
        if idx is None:
            raise ValueError(
                "a lazy pool gives views of selected items only (pass an index array); "
                "pool-wide sums run chunk by chunk (map_chunks)"
            )
        return self.take(idx).view(model)

    def to_dataset(self):
        """The pool as an :class:`xarray.Dataset` backed by dask arrays (nothing is loaded)."""
        import xarray as xr

        data: dict[str, Any] = {}
        for r in ("pred", "std", "score"):
            if r == "pred" or self._has[r]:
                cols = [self.column(f"{r}/{m}", dtype=self._column_dtype(r)) for m in self.models]
                name = {"pred": "prediction", "std": "predictive_std", "score": "score"}[r]
                import dask.array as da

                data[name] = (("item", "model"), da.stack(cols, axis=1))
        if self._has["cost"]:
            data["cost"] = (("item",), self.column("cost"))
        data["p"] = (("item",), self.p)
        coords: dict[str, Any] = {"model": list(self.models)}
        if self.classes is not None:
            coords["class"] = self.classes
        attrs = {"task": self.task, "lazy": 1}
        if self.pos_label is not None:
            attrs["pos_label"] = str(self.pos_label)
        return xr.Dataset(data, coords=coords, attrs=attrs)

    def _column_dtype(self, role: str):
        if role == "pred" and self.classes is not None:
            return self.classes.dtype
        return float

    # -- pool-wide sums -------------------------------------------------------------------------
    def intrinsic_risk(
        self, measure: Measure, model: str | None, belief: Any = None, belief_floor: float = 0.0
    ) -> np.ndarray:
        """``R = Σ_x p(x) E_π[ℓ(x, y)]`` (Sawade (2012), Eq. 4.21-4.22) as a sum of per-chunk sums."""
        parts = self.map_chunks(_risk_chunk, measure, model, belief, belief_floor)
        return np.sum(parts, axis=0)


# ------------------------------------------------------------------------------------------------
# chunk tasks (module level: picklable for distributed workers)
def _run_chunk(spec: _Spec, parts, offset: int, fn: Callable, *args: Any) -> Any:
    return fn(spec.pool(parts, offset), offset, *args)


def _get_column(parts, key):
    return parts[key]


def _chunk_p(cp: Pool, offset: int) -> np.ndarray:
    return cp.p


def _first_predictions(parts, offset, models):
    return np.asarray(parts[f"pred/{models[0]}"])


def _unique_preds(parts, offset, models):
    return np.unique(np.concatenate([np.unique(np.asarray(parts[f"pred/{m}"])) for m in models]))


def _weight_sum(parts, offset):
    w = np.asarray(parts["weight"], dtype=float)
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if bad.size:
        raise ValueError(
            f"weights[{offset + bad[0]}] = {show(w[bad[0]])}; item weights must be finite and >= 0"
        )
    return float(w.sum())


def _take_raw(parts, local: np.ndarray, spec: _Spec) -> dict[str, np.ndarray]:
    """The raw columns of the rows ``local`` of a chunk, and their global ``p``."""
    out = {k: np.asarray(v)[local] for k, v in parts.items() if k != "weight"}
    if spec.weight_total is None:
        out["__p"] = np.full(local.size, 1.0 / spec.n_items)
    else:
        out["__p"] = np.asarray(parts["weight"], dtype=float)[local] / spec.weight_total
    return out


def _chunk_belief(cp: Pool, offset: int, measure: Measure, model, belief, floor: float):
    """The belief on a chunk: the plug-in from the chunk's own columns, or the chunk's slice of a
    user belief (an array, sliced; or a callable ``belief(chunk_pool, offset)``)."""
    models = cp.models_of(measure, model)
    if belief is None:
        b = as_belief(cp, None, models)
    elif callable(belief):
        b = belief(cp, offset)
    else:
        sl = slice(offset, offset + cp.n_items)
        b = as_belief(cp, np.asarray(belief[sl]), models)
    return b.floored(floor)


def _resolve(cp: Pool, measure, model):
    m, views = cp.resolve(measure, model)
    return m, views


def _risk_chunk(cp: Pool, offset: int, measure, model, belief, floor) -> np.ndarray:
    m, views = _resolve(cp, measure, model)
    b = _chunk_belief(cp, offset, m, model, belief, floor)
    table = loss_table(cp, m, views) if isinstance(b, CategoricalBelief) else None
    return intrinsic_risk(cp, m, views, b, table=table)


@dataclass(frozen=True)
class _OptimalParams:
    """Everything a chunk needs to recompute its ``u``, ``s`` and ``q`` of the optimal proposal."""

    measure: Any
    model: str | None
    belief: Any
    floor: float
    R: np.ndarray
    J: np.ndarray
    estimator: str
    costs: bool
    uniform: bool
    mix: float = 0.0
    S: float = 1.0  # Σ_x s(x) over the pool (set after the first pass)
    passive: bool = False  # Σ s = 0: the proposal falls back to p


def _u_chunk(cp: Pool, offset: int, prm: _OptimalParams) -> np.ndarray:
    """``u(x) = E_π‖Dg(R)(ℓ(x, y) − R)‖²`` on a chunk (Sawade (2012), Thm. 4.1, the integrand of
    Eq. 4.6), or the belief's conditional variance for the model-assisted estimator: the core
    kernel's :func:`~bayes_activeeval.kernel.deviation_integrand` at the pool-wide ``R``."""
    m, _ = _resolve(cp, prm.measure, prm.model)
    b = _chunk_belief(cp, offset, m, prm.model, prm.belief, 0.0)  # the kernel floors it
    itg = deviation_integrand(
        cp,
        prm.measure,
        model=prm.model,
        belief=b,
        risk=prm.R,
        belief_floor=prm.floor,
        estimator=prm.estimator,
    )
    return itg.u


def _s_chunk(cp: Pool, offset: int, prm: _OptimalParams) -> np.ndarray:
    """``s(x) = p(x) c(x)^(-1/2) sqrt(u(x))`` (``p`` dropped when uniform: it cancels), the
    unnormalized optimal proposal of Sawade (2012), Thm. 4.1 / Thm. 4.2 (Eq. 4.25)."""
    p = cp.p
    if prm.passive:
        return p.copy()
    u = _u_chunk(cp, offset, prm)
    return proposal_scores(
        np.sqrt(np.maximum(u, 0.0)), p, cp.costs if prm.costs else None, uniform_p=prm.uniform
    )


def _mass_chunk(cp: Pool, offset: int, prm: _OptimalParams, check_support: bool):
    """``(S_k, P_k, first item needing mass but having none or -1, how many)`` of one chunk."""
    s = _s_chunk(cp, offset, prm)
    first, count = -1, 0
    if check_support:
        m, views = _resolve(cp, prm.measure, prm.model)
        bad = np.flatnonzero(support_needed(cp, m, views) & (s <= 0))
        if bad.size:
            first, count = offset + int(bad[0]), int(bad.size)
    return float(s.sum()), float(cp.p.sum()), first, count


def _q_chunk(cp: Pool, offset: int, prm: _OptimalParams) -> np.ndarray:
    """``q(x) = (1 − δ) s(x)/S + δ p(x)`` on a chunk: the mixed optimal proposal, with the same
    operations as :func:`~bayes_activeeval.kernel.mix_proposal` but the pool-wide ``S``."""
    s = _s_chunk(cp, offset, prm)
    s *= (1.0 - prm.mix) / prm.S
    if prm.mix:
        s += prm.mix * cp.p
    return s


def _draw_chunk(
    cp: Pool,
    offset: int,
    qfn: Callable,
    prm: Any,
    targets: np.ndarray,
    itemfn: Callable | None = None,
):
    """Items of a chunk at the cumulative-``q`` positions ``targets`` (the second level of the
    two-level draw): ``(local indices, q, p, records)`` at them; ``records`` is what
    ``itemfn(cp, offset, prm, local)`` keeps of the drawn items (or None)."""
    q = qfn(cp, offset, prm)
    cdf = np.cumsum(q)
    local = np.minimum(np.searchsorted(cdf, targets, side="right"), q.size - 1).astype(np.int64)
    recs = None if itemfn is None else itemfn(cp, offset, prm, local)
    return local, q[local], cp.p[local], recs


def _pred_var_chunk(cp: Pool, offset: int, prm: _OptimalParams) -> float:
    u = _u_chunk(cp, offset, prm)
    q = _q_chunk(cp, offset, prm)
    p = cp.p
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p * u > 0, p**2 * u / q, 0.0)
    return float(terms.sum())


def _cost_chunk(cp: Pool, offset: int, qfn: Callable, prm: Any) -> float:
    q = qfn(cp, offset, prm)
    return float(q @ cp.costs) if cp.costs is not None else float(q.sum())


def _passive_q(cp: Pool, offset: int, prm: Any) -> np.ndarray:
    return cp.p.copy()


def _passive_mass(cp: Pool, offset: int) -> float:
    return float(cp.p.sum())


# ------------------------------------------------------------------------------------------------
class LazyProposal(Proposal):
    """A proposal over a :class:`LazyPool`: ``q`` is recomputed chunk by chunk when needed.

    Attributes
    ----------
    q, p : dask.array.Array
        Lazy views of the proposal and the test distribution (computing them materializes ``n``
        floats; the draws never do).
    chunk_mass : ndarray (n_chunks,)
        ``Q_k``, the proposal's mass in each chunk: the first level of the two-level draw.
    kind, info
        As for :class:`Proposal`; ``info`` (a :class:`~bayes_activeeval.proposals.ProposalInfo`)
        has no per-item ``u``, ``a`` or ``strata`` (see :meth:`predicted_variance`).
    normalizer, edges, support
        The optimal proposal's ``S = Σ_x s(x)``; a stratified proposal's stratum edges; an
        adaptive proposal's number of items with ``q > 0`` (else ``None``).
    """

    def __init__(
        self,
        pool: LazyPool,
        kind: str,
        qfn: Callable,
        params: Any,
        chunk_mass: np.ndarray,
        info: dict[str, Any] | None = None,
    ) -> None:
        # no Proposal.__post_init__: q is never materialized
        self.pool = pool
        self.kind = kind
        extra = dict(info or {})
        #: pool-wide numbers that are not per-item: the optimal proposal's normalizer ``Σ s``,
        #: a stratified proposal's stratum edges, an adaptive proposal's support size
        self.normalizer = extra.pop("normalizer", None)
        self.edges = extra.pop("edges", None)
        self.support = extra.pop("support", None)
        self.info = ProposalInfo(**extra)
        self._qfn = qfn
        self._params = params
        self.chunk_mass = np.asarray(chunk_mass, dtype=float)
        self._cdf = np.cumsum(self.chunk_mass)
        self._q = None
        self._itemfn: Callable | None = None  # what a draw also returns of each item

    @property
    def q(self):
        if self._q is None:
            self._q = self.pool.column(None, self._qfn, self._params)
        return self._q

    @q.setter
    def q(self, value):  # dataclass fields of the base class
        self._q = value

    @property
    def p(self):
        return self.pool.p

    @p.setter
    def p(self, value):
        pass

    @property
    def n_items(self) -> int:
        return self.pool.n_items

    def q_chunk(self, k: int) -> np.ndarray:
        """``q`` on chunk ``k`` (in memory: ``chunk_sizes[k]`` floats)."""
        return self.pool.map_chunks(self._qfn, self._params, chunks=[k])[0]

    def weights(self, indices: np.ndarray) -> np.ndarray:
        """Importance weights ``p/q`` of the given items (only their chunks are read)."""
        _, q, p = self._at(np.asarray(indices, dtype=np.int64))
        return p / q

    def _at(self, idx: np.ndarray):
        pool = self.pool
        idx = pool._check_indices(idx)
        chunk = pool.chunk_of(idx)
        ks = np.unique(chunk)
        q = np.empty(idx.size)
        p = np.empty(idx.size)
        tasks = [
            pool._chunk_task(
                int(k), _qp_at, self._qfn, self._params, idx[chunk == k] - pool.offsets[k]
            )
            for k in ks
        ]
        for k, (qk, pk) in zip(ks, pool._compute(tasks), strict=True):
            sel = chunk == k
            q[sel], p[sel] = qk, pk
        return idx, q, p

    def draw(self, n: int, rng: Any = None, *, unique: bool = False) -> Draws:
        """Draw items i.i.d. with replacement (Sawade (2012), Algorithm 2, lines 2-3), two-level.

        A uniform ``t ∈ [0, Σ_k Q_k)`` picks the chunk ``k`` whose cumulative mass interval holds
        it, then the item whose cumulative ``q`` within the chunk holds ``t − Σ_{j<k} Q_j``: the
        inverse-CDF draw of the in-memory :meth:`Proposal.draw`, so the same ``rng`` gives the
        same items (up to rounding at the ~1e-16 level). Only chunks that receive draws are read.

        Parameters
        ----------
        n : int
            Number of draws; with ``unique=True``, distinct items to reach (as in memory).
        rng : None, int or numpy.random.Generator
        unique : bool
        """
        n = check_count(n, "n")
        rng = check_rng(rng)
        if not unique:
            idx, q, p = self._sample(n, rng)
            return Draws(idx, p / q, q)
        if n > self.pool.n_items:
            raise ValueError(
                f"n={n} distinct items requested but the pool has only {self.pool.n_items} items"
            )
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        idx = np.empty(0, dtype=np.int64)
        n_distinct = 0
        while n_distinct < n:
            got = self._sample(max(n - n_distinct, 16), rng)
            parts.append(got)
            idx = np.concatenate([idx, got[0]])
            _, first = np.unique(idx, return_index=True)
            n_distinct = first.size
        cut = np.sort(first)[n - 1] + 1
        q = np.concatenate([g[1] for g in parts])[:cut]
        p = np.concatenate([g[2] for g in parts])[:cut]
        idx = idx[:cut]
        return Draws(idx, p / q, q)

    def _sample(self, n: int, rng: np.random.Generator, records: bool = False):
        pool = self.pool
        t = rng.random(n) * self._cdf[-1]
        chunk = np.minimum(np.searchsorted(self._cdf, t, side="right"), pool.n_chunks - 1)
        ks = np.unique(chunk)
        start = np.concatenate([[0.0], self._cdf[:-1]])
        itemfn = self._itemfn if records else None
        tasks = [
            pool._chunk_task(
                int(k), _draw_chunk, self._qfn, self._params, t[chunk == k] - start[k], itemfn
            )
            for k in ks
        ]
        idx = np.empty(n, dtype=np.int64)
        q = np.empty(n)
        p = np.empty(n)
        recs: dict[str, np.ndarray] = {}
        for k, (local, qk, pk, rk) in zip(ks, pool._compute(tasks), strict=True):
            sel = chunk == k
            idx[sel] = local + pool.offsets[k]
            q[sel], p[sel] = qk, pk
            for key, val in (rk or {}).items():
                if key not in recs:
                    recs[key] = np.empty((n, *val.shape[1:]), dtype=val.dtype)
                recs[key][sel] = val
        if records:
            return idx, q, p, recs
        return idx, q, p

    def predicted_variance(self, u: Any = None) -> float:
        """``Σ_x p(x)² u(x)/q(x)`` (Sawade (2012), Lemma 3.4), as a sum over chunks."""
        if u is not None:
            raise ValueError("a lazy proposal evaluates its own u(x) chunk by chunk; pass no u")
        if not isinstance(self._params, _OptimalParams):
            raise ValueError(
                "this proposal has no expected deviations u(x); build it with a measure"
            )
        return float(sum(self.pool.map_chunks(_pred_var_chunk, self._params)))

    def expected_cost(self, costs: Any = None) -> float:
        """Expected label cost of one draw, ``E_q[c]`` with the pool's costs."""
        if costs is not None and costs is not True:
            raise ValueError("a lazy proposal uses the pool's own costs")
        if not self.pool.has_costs:
            return 1.0
        return float(sum(self.pool.map_chunks(_cost_chunk, self._qfn, self._params)))

    def __repr__(self) -> str:
        return (
            f"LazyProposal(kind={self.kind!r}, n_items={self.n_items}, "
            f"n_chunks={self.pool.n_chunks})"
        )


def _qp_at(cp: Pool, offset: int, qfn: Callable, prm: Any, local: np.ndarray):
    q = qfn(cp, offset, prm)
    return q[local], cp.p[local]


# ------------------------------------------------------------------------------------------------
# the public calls on a lazy pool (dispatched to from proposals / estimators)
def optimal_proposal(
    pool: LazyPool,
    measure: str | Measure,
    *,
    model: str | None = None,
    belief: Any = None,
    risk: Any = None,
    costs: Any = None,
    belief_floor: float | str = "auto",
    mix: float = DEFAULT_MIX,
    estimator: str = "ipw",
) -> LazyProposal:
    """:func:`~bayes_activeeval.optimal_proposal` on a lazy pool, in two passes over the chunks.

    Pass 1 sums ``p(x) E_π[ℓ(x, y)]`` per chunk into the intrinsic risk ``R`` (Sawade (2012),
    Eq. 4.21-4.22; skipped when ``risk`` is given). Pass 2 sums
    ``s(x) = p(x) c(x)^(-1/2) sqrt(E_π‖Dg(R)(ℓ(x, y) − R)‖²)`` per chunk (Sawade (2012), Thm. 4.1,
    Eq. 4.6; Thm. 4.2, Eq. 4.25; Thm. 5.1 for differences), giving the chunk masses of
    ``q = (1 − δ) s/Σs + δ p``. ``q`` itself is recomputed per chunk when drawn from.

    ``belief`` may be ``None`` (the pool's models, per chunk), an array aligned with the pool
    (NumPy or dask; sliced per chunk) or a callable ``belief(chunk_pool, offset) -> Belief``.
    ``costs`` may be ``None``/``True`` (the pool's) or ``False``. ``belief_floor="auto"`` (the
    default) is the fixed ``1e-6`` here: the in-memory scaled floor
    (:func:`~bayes_activeeval.kernel.scaled_belief_floor`) needs one more pass, not implemented
    on lazy pools yet.
    """
    m0, _ = _resolve_meta(pool, measure, model)
    if isinstance(belief_floor, str):
        if belief_floor != "auto":
            raise ValueError(f"belief_floor must be a number or 'auto', got {belief_floor!r}")
        belief_floor = DEFAULT_BELIEF_FLOOR
    floor = check_fraction(belief_floor, "belief_floor")
    mix = check_fraction(mix, "mix", allow_one=True)
    if estimator not in ("ipw", "model_assisted"):
        raise ValueError(f"estimator must be 'ipw' or 'model_assisted', got {estimator!r}")
    if costs is not None and costs is not True and costs is not False:
        raise ValueError("on a lazy pool costs must be None/True (the pool's) or False")
    use_costs = pool.has_costs and costs is not False
    if pool.task == "regression" and belief is None and not pool.has_std():
        raise ValueError(
            "the pool has no predictive_std, so there is no belief about the labels; "
            "give the pool predictive_std= or pass belief="
        )
    if pool.task != "regression" and belief is None and not pool.has_probs():
        raise ValueError(
            "the pool has no probs, so there is no belief about the labels; "
            "give the pool probs= or pass belief="
        )
    if risk is None:
        R = pool.intrinsic_risk(measure, model, belief, floor)
    else:
        R = np.asarray(risk, dtype=float).reshape(-1)
        if R.size != m0.dim:
            raise ValueError(
                f"risk has {R.size} entries; measure {m0.name!r} has {m0.dim} components"
            )
    J = m0.jacobian(R)
    if not np.all(np.isfinite(J)):
        raise ValueError(
            f"measure {m0.name!r} is undefined at the intrinsic risk R={np.round(R, 6).tolist()} "
            "(e.g. no item predicted or believed positive); cannot build the optimal proposal"
        )
    prm = _OptimalParams(
        measure, model, belief, floor, R, J, estimator, use_costs, pool.has_uniform_weights
    )
    sums = pool.map_chunks(_mass_chunk, prm, mix == 0)
    S_k = np.array([s[0] for s in sums])
    P_k = np.array([s[1] for s in sums])
    S = float(S_k.sum())
    passive = S <= 0
    if passive:  # the belief says every label is known exactly: sample passively
        S_k = P_k.copy()
        S = float(S_k.sum())
    if mix == 0:
        bad = [(f, c) for _, _, f, c in sums if f >= 0]
        if bad and not passive:
            raise ValueError(
                f"the proposal gives zero mass to item {bad[0][0]} (and "
                f"{sum(c for _, c in bad) - 1} more) whose label could change the estimate; use "
                "mix > 0 or belief_floor > 0"
            )
    prm = _replace(prm, mix=mix, S=S, passive=passive)
    chunk_mass = S_k * ((1.0 - mix) / S) + mix * P_k
    info = {
        "risk": R,
        "jacobian": J,
        "mix": mix,
        "belief_floor": floor,
        "measure": m0.name,
        "estimator": estimator,
        "normalizer": S,
    }
    return LazyProposal(pool, "optimal", _q_chunk, prm, chunk_mass, info)


def _replace(prm, **kw):
    """A copy of a frozen parameter set with some fields changed."""
    from dataclasses import replace

    return replace(prm, **kw)


def _resolve_meta(pool: LazyPool, measure, model):
    """Resolve a measure against the pool's metadata (no items read)."""
    m = pool.resolve(measure, model)[0]
    return m, None


def passive_proposal(pool: LazyPool) -> LazyProposal:
    """``q = p`` on a lazy pool (chunk masses from one pass of per-chunk sums of ``p``)."""
    if pool.has_uniform_weights:
        mass = pool.chunk_sizes / pool.n_items
    else:
        mass = np.array(pool.map_chunks(_passive_mass))
    return LazyProposal(pool, "passive", _passive_q, None, mass, {})


def model_assisted_terms(pool: LazyPool, m: Measure, model, belief, indices: np.ndarray):
    """``M = Σ_x p(x) m(x)`` over the pool and ``m(x_i)`` at the drawn items, for the
    model-assisted estimate on a lazy pool."""
    M = pool.intrinsic_risk(m, model, belief, 0.0)
    sub = pool.take(indices)
    if belief is None:
        b = as_belief(sub, None, sub.models_of(m, model))
    elif callable(belief) or not hasattr(belief, "__getitem__"):
        raise ValueError("a model-assisted estimate on a lazy pool takes belief=None or an array")
    else:
        b = as_belief(sub, np.asarray(belief)[np.asarray(indices)], sub.models_of(m, model))
    _, views = sub.resolve(m, model)
    ar = np.arange(sub.n_items)
    mm = b.expect(lambda yy, s: m.loss(yy, views(ar)), ar)
    return M, mm


# ------------------------------------------------------------------------------------------------
# constructors (Pool.from_parquet, from_zarr, from_dask, from_dask_dataframe)
def _roles(
    predictions, probs, predictive_std, scores, costs, weights
) -> tuple[dict[str, Any], tuple[str, ...], int, int | None]:
    """``{"pred/a": spec, "prob/a": spec, …}`` and the models, from the user's arguments."""
    preds = _role_columns(predictions, "predictions", None)
    if not preds:
        raise TypeError("predictions is required")
    models = tuple(preds)
    out = {f"pred/{m}": v for m, v in preds.items()}
    prob_ndim, n_cols = 1, None
    for role, value, name in (
        ("prob", probs, "probs"),
        ("std", predictive_std, "predictive_std"),
        ("score", scores, "scores"),
    ):
        for m, v in _role_columns(value, name, models).items():
            out[f"{role}/{m}"] = v
            if role == "prob":
                if isinstance(v, (list, tuple)):
                    prob_ndim, n_cols = 2, len(v)
                elif getattr(v, "ndim", 1) == 2:
                    prob_ndim, n_cols = 2, int(v.shape[1])
    if costs is not None:
        out["cost"] = costs
    if weights is not None:
        out["weight"] = weights
    return out, models, prob_ndim, n_cols


def _lazy_pool(parts, sizes, roles: dict[str, Any], models, prob_ndim, n_cols, **kw) -> LazyPool:
    has = {
        r: any(k.startswith(r + "/") or k == r for k in roles)
        for r in ("prob", "std", "score", "cost", "weight")
    }
    return LazyPool(
        parts,
        sizes,
        models=models,
        has_probs=has["prob"],
        has_std=has["std"],
        has_scores=has["score"],
        has_costs=has["cost"],
        has_weights=has["weight"],
        prob_ndim=prob_ndim,
        n_prob_cols=n_cols,
        **kw,
    )


def from_parquet(
    path: Any,
    predictions: Any = "pred",
    probs: Any = "p",
    *,
    predictive_std: Any = None,
    scores: Any = None,
    costs: str | None = None,
    weights: str | None = None,
    classes: Any = None,
    pos_label: Any = None,
    task: str | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    client: Any = None,
) -> LazyPool:
    """A lazy pool reading Parquet row groups (see :meth:`Pool.from_parquet`)."""
    import pyarrow.parquet as pq

    dask = _import_dask()
    chunk_size = check_count(chunk_size, "chunk_size")
    roles, models, prob_ndim, n_cols = _roles(
        predictions, probs, predictive_std, scores, costs, weights
    )
    columns: list[str] = []
    for spec in roles.values():
        for c in spec if isinstance(spec, (list, tuple)) else [spec]:
            if not isinstance(c, str):
                raise TypeError(f"from_parquet takes column names, got {c!r}")
            if c not in columns:
                columns.append(c)
    files = _parquet_files(path)
    chunks: list[list[tuple[str, list[int]]]] = []
    sizes: list[int] = []
    cur: list[tuple[str, list[int]]] = []
    cur_n = 0
    for f in files:
        meta = pq.ParquetFile(f)
        names = set(meta.schema_arrow.names)
        missing = [c for c in columns if c not in names]
        if missing:
            raise ValueError(f"{f!r} has no column {missing[0]!r}; its columns are {sorted(names)}")
        for rg in range(meta.metadata.num_row_groups):
            rows = meta.metadata.row_group(rg).num_rows
            if rows == 0:
                continue
            if cur and cur_n + rows > chunk_size:
                chunks.append(cur)
                sizes.append(cur_n)
                cur, cur_n = [], 0
            if cur and cur[-1][0] == f:
                cur[-1][1].append(rg)
            else:
                cur.append((f, [rg]))
            cur_n += rows
    if cur:
        chunks.append(cur)
        sizes.append(cur_n)
    parts = [
        dask.delayed(_read_parquet_chunk, pure=True)(pieces, columns, roles) for pieces in chunks
    ]
    return _lazy_pool(
        parts,
        sizes,
        roles,
        models,
        prob_ndim,
        n_cols,
        classes=classes,
        pos_label=pos_label,
        task=task,
        client=client,
    )


def from_dask(
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
    chunk_size: int | None = None,
    client: Any = None,
) -> LazyPool:
    """A lazy pool over dask (or NumPy) arrays (see :meth:`Pool.from_dask`)."""
    _import_dask()
    import dask.array as da

    roles, models, prob_ndim, n_cols = _roles(
        predictions, probs, predictive_std, scores, costs, weights
    )
    arrays = {}
    for key, value in roles.items():
        arr = value if isinstance(value, da.Array) else da.asarray(np.asarray(value))
        if arr.ndim not in (1, 2) or (arr.ndim == 2 and not key.startswith("prob/")):
            raise ValueError(f"{_role_name(key)} has shape {arr.shape}; expected a vector")
        arrays[key] = arr
    first = arrays[f"pred/{models[0]}"]
    n = first.shape[0]
    if n is None or np.isnan(n):
        raise ValueError("predictions has unknown chunk sizes; call compute_chunk_sizes() first")
    for key, arr in arrays.items():
        if arr.shape[0] != n:
            raise ValueError(f"{_role_name(key)} has {arr.shape[0]} items but predictions has {n}")
    item_chunks = first.chunks[0] if chunk_size is None else check_count(chunk_size, "chunk_size")
    for key, arr in arrays.items():
        arrays[key] = arr.rechunk({0: item_chunks, 1: -1} if arr.ndim == 2 else {0: item_chunks})
    item_chunks = arrays[f"pred/{models[0]}"].chunks[0]
    keys = tuple(arrays)
    blocks = {key: arr.to_delayed().ravel() for key, arr in arrays.items()}
    import dask

    parts = [
        dask.delayed(_assemble, pure=True)(keys, *[blocks[key][k] for key in keys])
        for k in range(len(item_chunks))
    ]
    return _lazy_pool(
        parts,
        item_chunks,
        roles,
        models,
        prob_ndim,
        n_cols,
        classes=classes,
        pos_label=pos_label,
        task=task,
        client=client,
    )


def _role_name(key: str) -> str:
    role, _, model = key.partition("/")
    name = {
        "pred": "predictions",
        "prob": "probs",
        "std": "predictive_std",
        "score": "scores",
        "cost": "costs",
        "weight": "weights",
    }[role]
    return f"{name}[{model!r}]" if model and model != DEFAULT_MODEL else name


def from_zarr(
    store: Any,
    predictions: Any = "pred",
    probs: Any = "p",
    *,
    predictive_std: Any = None,
    scores: Any = None,
    costs: str | None = None,
    weights: str | None = None,
    classes: Any = None,
    pos_label: Any = None,
    task: str | None = None,
    chunk_size: int | None = DEFAULT_CHUNK_SIZE,
    client: Any = None,
) -> LazyPool:
    """A lazy pool over arrays of a Zarr group (see :meth:`Pool.from_zarr`)."""
    _import_dask()
    import dask.array as da

    def open_(name):
        if name is None:
            return None
        if isinstance(name, Mapping):
            return {m: open_(v) for m, v in name.items()}
        if isinstance(name, (list, tuple)):
            return da.stack([open_(v) for v in name], axis=1)
        return da.from_zarr(store, component=name)

    return from_dask(
        open_(predictions),
        open_(probs),
        predictive_std=open_(predictive_std),
        scores=open_(scores),
        costs=open_(costs),
        weights=open_(weights),
        classes=classes,
        pos_label=pos_label,
        task=task,
        chunk_size=chunk_size,
        client=client,
    )


def from_dask_dataframe(
    frame: Any,
    predictions: Any = "pred",
    probs: Any = "p",
    *,
    predictive_std: Any = None,
    scores: Any = None,
    costs: str | None = None,
    weights: str | None = None,
    classes: Any = None,
    pos_label: Any = None,
    task: str | None = None,
    client: Any = None,
) -> LazyPool:
    """A lazy pool over the partitions of a dask DataFrame (see :meth:`Pool.from_dask_dataframe`)."""
    dask = _import_dask()
    roles, models, prob_ndim, n_cols = _roles(
        predictions, probs, predictive_std, scores, costs, weights
    )
    columns: list[str] = []
    for spec in roles.values():
        for c in spec if isinstance(spec, (list, tuple)) else [spec]:
            if c not in frame.columns:
                raise ValueError(
                    f"the frame has no column {c!r}; its columns are {list(frame.columns)}"
                )
            if c not in columns:
                columns.append(c)
    sub = frame[columns]
    lengths = sub.map_partitions(len).compute(
        **({"scheduler": client} if client is not None else {})
    )
    parts = [dask.delayed(_pandas_parts, pure=True)(d, roles) for d in sub.to_delayed()]
    return _lazy_pool(
        parts,
        list(np.asarray(lengths)),
        roles,
        models,
        prob_ndim,
        n_cols,
        classes=classes,
        pos_label=pos_label,
        task=task,
        client=client,
    )


# ------------------------------------------------------------------------------------------------
# stratified proposals: score strata found exactly, in a few passes of per-chunk histograms
#: Values gathered to the client at most when pinning down an order statistic exactly.
GATHER_LIMIT = 1 << 20
#: Bins per histogram pass of the exact quantile search.
QUANTILE_BINS = 4096


def _chunk_scores(cp: Pool, offset: int, model) -> np.ndarray:
    """The scores of a chunk: the pool's default scores of ``model``, or, when ``model`` is a
    tuple ``(fn, *args)``, ``fn(chunk_pool, offset, *args)``."""
    if isinstance(model, tuple):
        s = np.asarray(model[0](cp, offset, *model[1:]), dtype=float)
    else:
        s = np.asarray(default_scores(cp, model), dtype=float)
    bad = np.flatnonzero(~np.isfinite(s))
    if bad.size:
        raise ValueError(f"scores[{offset + bad[0]}] = {show(s[bad[0]])}; scores must be finite")
    return s


def _minmax_chunk(cp: Pool, offset: int, model):
    s = _chunk_scores(cp, offset, model)
    return float(s.min()), float(s.max())


def _in(s: np.ndarray, a: float, b: float, closed: bool) -> np.ndarray:
    return (s >= a) & ((s < b) | (closed & (s == b)))


def _select_chunk(cp: Pool, offset: int, model, todo: list[tuple]):
    """For each interval ``(a, b, closed, gather)``: its values (gather) or histogram counts and
    the min/max of its members."""
    s = _chunk_scores(cp, offset, model)
    out = []
    for a, b, closed, gather in todo:
        v = s[_in(s, a, b, closed)]
        if gather:
            out.append(v)
        else:
            edges = np.linspace(a, b, QUANTILE_BINS + 1)
            j = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, QUANTILE_BINS - 1)
            mn = float(v.min()) if v.size else np.inf
            mx = float(v.max()) if v.size else -np.inf
            out.append((np.bincount(j, minlength=QUANTILE_BINS), mn, mx))
    return out


def _order_statistics(pool: LazyPool, model, ranks: np.ndarray, lo: float, hi: float):
    """The values of the scores at sorted positions ``ranks`` (exact), in passes over the chunks.

    An interval of score values holding some of the wanted positions is histogrammed into
    :data:`QUANTILE_BINS` bins (the bin of each position found from the counts) until it holds
    at most :data:`GATHER_LIMIT` values, which are then gathered and sorted.
    """
    n = pool.n_items
    # active intervals: (a, b, closed, below, count, ranks)
    active = [(lo, hi, True, 0, n, np.asarray(ranks, dtype=np.int64))]
    found: dict[int, float] = {}
    while active:
        todo = [(a, b, c, cnt <= GATHER_LIMIT) for a, b, c, _, cnt, _ in active]
        got = pool.map_chunks(_select_chunk, model, todo)
        nxt = []
        for i, (a, b, closed, below, _cnt, rs) in enumerate(active):
            parts = [g[i] for g in got]
            if todo[i][3]:
                v = np.sort(np.concatenate(parts))
                for r in rs.tolist():
                    found[r] = float(v[r - below])
                continue
            counts = np.sum([pt[0] for pt in parts], axis=0)
            mn = min(pt[1] for pt in parts)
            mx = max(pt[2] for pt in parts)
            if mn == mx:  # every value in the interval is the same
                for r in rs.tolist():
                    found[r] = mn
                continue
            edges = np.linspace(a, b, QUANTILE_BINS + 1)
            cum = below + np.cumsum(counts)
            j = np.searchsorted(cum, rs, side="right")  # the bin holding each position
            for jj in np.unique(j).tolist():
                sel = rs[j == jj]
                start = int(cum[jj - 1]) if jj > 0 else below
                last = jj == QUANTILE_BINS - 1
                nxt.append(
                    (
                        float(edges[jj]),
                        float(edges[jj + 1]) if not last else b,
                        closed if last else False,
                        start,
                        int(counts[jj]),
                        sel,
                    )
                )
        active = nxt
    return np.array([found[int(r)] for r in ranks])


def _np_quantile_from(n: int, probs: np.ndarray, stat) -> np.ndarray:
    """``np.quantile(s, probs)`` (method "linear") from the order statistics ``stat(ranks)``,
    with NumPy's own index and interpolation arithmetic, so the result is bit-identical."""
    probs = np.asarray(probs, dtype=float)
    virtual = n * probs + (1 + probs * (1 - 1 - 1)) - 1
    prev = np.floor(virtual)
    gamma = virtual - prev
    i0 = np.clip(prev.astype(np.int64), 0, n - 1)
    i1 = np.clip(prev.astype(np.int64) + 1, 0, n - 1)
    ranks = np.unique(np.concatenate([i0, i1]))
    vals = dict(zip(ranks.tolist(), stat(ranks).tolist(), strict=True))
    a = np.array([vals[i] for i in i0.tolist()])
    b = np.array([vals[i] for i in i1.tolist()])
    diff = b - a
    out = a + diff * gamma
    hi = gamma >= 0.5
    out[hi] = (b - diff * (1 - gamma))[hi]
    return out


def _hist_chunk(cp: Pool, offset: int, model, edges: np.ndarray) -> np.ndarray:
    return np.histogram(_chunk_scores(cp, offset, model), bins=edges)[0]


def _strata_labels_chunk(cp: Pool, offset: int, model, inner: np.ndarray):
    """Raw stratum of every item (before empty strata are dropped) and ``Σ p`` per stratum."""
    labels = np.searchsorted(inner, _chunk_scores(cp, offset, model), side="right")
    return np.bincount(labels, minlength=inner.size + 1), np.bincount(
        labels, weights=cp.p, minlength=inner.size + 1
    )


def lazy_score_strata(pool: LazyPool, n_strata: int, *, method: str, model=None):
    """Stratum boundaries of :func:`~bayes_activeeval.strata.score_strata` on a lazy pool, exact.

    ``"csf"``: one pass for the score range, one for the histogram (histograms add over chunks).
    ``"quantile"``: the order statistics behind ``np.quantile`` found by :func:`_order_statistics`.
    ``model`` names the model whose default scores are stratified, or is a tuple
    ``(fn, *args)`` with ``fn(chunk_pool, offset, *args)`` the scores of a chunk.

    Returns
    -------
    inner : ndarray
        Inner boundaries (an item's raw stratum is ``searchsorted(inner, score, "right")``;
        strata left empty are dropped by the caller, as ``score_strata`` does).
    lo, hi : float
        The smallest and largest score.
    """
    if isinstance(n_strata, bool) or not isinstance(n_strata, (int, np.integer)) or n_strata < 1:
        raise ValueError(f"n_strata must be a positive integer, got {n_strata!r}")
    mm = pool.map_chunks(_minmax_chunk, model)
    lo, hi = min(m[0] for m in mm), max(m[1] for m in mm)
    n = pool.n_items
    if method == "quantile":
        qs = _np_quantile_from(
            n,
            np.linspace(0, 1, n_strata + 1),
            lambda r: _order_statistics(pool, model, r, lo, hi),
        )
        inner = np.unique(qs[1:-1])
    elif method == "csf":
        nb = int(min(max(64 * n_strata, 4096), max(n, 1)))
        if hi == lo:
            inner = np.array([])
        else:
            bin_edges = np.linspace(lo, hi, nb + 1)
            counts = np.sum(pool.map_chunks(_hist_chunk, model, bin_edges), axis=0)
            cum = np.cumsum(np.sqrt(counts))
            targets = cum[-1] * np.arange(1, n_strata) / n_strata
            cut = np.searchsorted(cum, targets, side="left")
            inner = np.unique(bin_edges[np.clip(cut + 1, 1, nb - 1)])
    else:
        raise ValueError(f"method must be 'csf' or 'quantile', got {method!r}")
    inner = inner[(inner > lo) & (inner <= hi)]
    return inner, lo, hi


@dataclass(frozen=True)
class _StrataParams:
    model: Any
    inner: np.ndarray
    relabel: np.ndarray  # raw stratum -> 0..H-1
    a: np.ndarray
    P: np.ndarray
    mix: float
    total: float  # Σ_x q(x) before mixing


def _strat_labels(cp: Pool, offset: int, prm: _StrataParams) -> np.ndarray:
    raw = np.searchsorted(prm.inner, _chunk_scores(cp, offset, prm.model), side="right")
    return prm.relabel[raw]


def _strat_q(cp: Pool, offset: int, prm: _StrataParams) -> np.ndarray:
    """``q(x) = a_h p(x)/P_h`` on a chunk, then the mixture with ``p``."""
    labels = _strat_labels(cp, offset, prm)
    p = cp.p
    P, a = prm.P, prm.a
    with np.errstate(invalid="ignore", divide="ignore"):
        q = np.where(P[labels] > 0, a[labels] * p / P[labels], 0.0)
    q *= (1.0 - prm.mix) / prm.total
    if prm.mix:
        q += prm.mix * p
    return q


def _strat_u_chunk(cp: Pool, offset: int, prm: _StrataParams, opt: _OptimalParams, H: int):
    labels = _strat_labels(cp, offset, prm)
    return np.bincount(labels, weights=cp.p * _u_chunk(cp, offset, opt), minlength=H)


def _strat_mass_chunk(cp: Pool, offset: int, prm: _StrataParams) -> float:
    return float(_strat_q(cp, offset, _replace(prm, mix=0.0, total=1.0)).sum())


def stratified_proposal(
    pool: LazyPool,
    measure=None,
    *,
    strata: Any = 10,
    allocation: str = "proportional",
    model: str | None = None,
    scores: Any = None,
    belief: Any = None,
    method: str = "quantile",
    mix: float = 0.0,
) -> LazyProposal:
    """:func:`~bayes_activeeval.stratified_proposal` on a lazy pool.

    The score strata are found exactly as in memory (:func:`lazy_score_strata`); the stratum
    masses ``P_h`` (and for Neyman allocation ``Σ_h p u``, with ``u`` the integrand of Sawade
    (2012), Thm. 4.1) are per-chunk sums; ``q(x) = a_h p(x)/P_h`` is recomputed per chunk.
    ``strata`` must be a number of strata and the scores the pool's (``scores=None``).
    """
    if allocation not in ("proportional", "neyman"):
        raise ValueError(f"allocation must be 'proportional' or 'neyman', got {allocation!r}")
    mix = check_fraction(mix, "mix", allow_one=True)
    if scores is not None or not (
        isinstance(strata, (int, np.integer)) and not isinstance(strata, bool)
    ):
        raise ValueError(
            "on a lazy pool stratified_proposal takes a number of strata and stratifies on the "
            "pool's own scores (scores=None)"
        )
    model = pool.check_model(model)
    inner, lo, hi = lazy_score_strata(pool, int(strata), method=method, model=model)
    prm0 = _StrataParams(
        model, inner, np.arange(inner.size + 1), np.zeros(0), np.zeros(0), 0.0, 1.0
    )
    sums = pool.map_chunks(_strata_labels_chunk, model, inner)
    counts = np.sum([s[0] for s in sums], axis=0)
    used = np.flatnonzero(counts > 0)
    relabel = np.zeros(inner.size + 1, dtype=np.int64)
    relabel[used] = np.arange(used.size)
    H = used.size
    P = np.sum([s[1] for s in sums], axis=0)[used]
    full_edges = np.concatenate([[lo], inner, [hi]])
    edges = np.concatenate([full_edges[used], [hi]])
    info: dict[str, Any] = {}
    if allocation == "proportional":
        a = P.copy()
    else:
        if measure is None:
            raise ValueError("allocation='neyman' needs a measure")
        opt = optimal_proposal(pool, measure, model=model, belief=belief, mix=0.0, costs=False)
        prm0 = _replace(prm0, relabel=relabel)
        pu = np.sum(pool.map_chunks(_strat_u_chunk, prm0, opt._params, H), axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            Ubar = pu / P
        a = P * np.sqrt(np.nan_to_num(Ubar))
        if a.sum() <= 0:
            a = P.copy()
        info = {"risk": opt.info["risk"]}
    a = a / a.sum()
    prm = _StrataParams(model, inner, relabel, a, P, 0.0, 1.0)
    chunk_raw = np.array(pool.map_chunks(_strat_mass_chunk, prm))
    total = float(chunk_raw.sum())
    prm = _replace(prm, mix=mix, total=total)
    if pool.has_uniform_weights:
        P_k = pool.chunk_sizes / pool.n_items
    else:
        P_k = np.array(pool.map_chunks(_passive_mass))
    mass = chunk_raw * ((1.0 - mix) / total) + mix * P_k
    info.update({"allocation": a, "stratum_mass": P, "edges": edges, "mix": mix})
    return LazyProposal(pool, "stratified", _strat_q, prm, mass, info)
