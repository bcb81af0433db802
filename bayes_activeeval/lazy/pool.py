"""The lazy pool: a :class:`~bayes_activeeval.Pool` whose items live in chunks on dask.

A :class:`LazyPool` holds no per-item array. It holds, for each *chunk* of consecutive items, a
dask task that loads that chunk's columns (built by :mod:`~bayes_activeeval.lazy.sources`), and
runs *chunk tasks* (:mod:`~bayes_activeeval.lazy.chunks`) on them: :meth:`LazyPool.map_chunks` for
per-chunk sums, :meth:`LazyPool.column` for lazy per-item arrays, :meth:`LazyPool.take` to gather
chosen items. Computations run on the pool's ``dask.distributed`` client, the ambient one, or
dask's threads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields, is_dataclass, replace
from typing import Any

import numpy as np

from .._validation import show
from ..measures import Measure
from ..pool import Pool
from .chunks import (
    ChunkBlock,
    ChunkSpec,
    chunk_agreeing_classes,
    chunk_p,
    chunk_predicted_classes,
    first_predictions,
    get_column,
    risk_chunk,
    run_chunk,
    take_raw,
    unique_predictions,
    weight_sum,
    whole_and_distinct,
)

__all__ = ["DEFAULT_CHUNK_SIZE", "LazyPool", "import_dask", "is_lazy"]

#: Default items per chunk: 2**20 items of a binary one-model pool is ~16 MB of columns and
#: ~100 MB of kernel temporaries; large enough that per-task overhead (~1 ms) is negligible.
DEFAULT_CHUNK_SIZE = 1 << 20


def is_lazy(pool: Any) -> bool:
    """Whether ``pool`` is a dask-backed :class:`LazyPool`.

    Parameters
    ----------
    pool : object
        Any object.

    Returns
    -------
    bool
    """
    return isinstance(pool, LazyPool)


def import_dask():
    """The ``dask`` module, or an :class:`ImportError` saying how to install it."""
    try:
        import dask
    except ImportError as exc:  # pragma: no cover - dask is a dependency of the [dask] extra
        raise ImportError("lazy pools need dask: pip install 'bayes-activeeval[dask]'") from exc
    return dask


def dataset_block(pool: Pool, offset: int, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """One chunk's rows of the variables ``names`` of :meth:`Pool.to_dataset`, from the chunk as
    an in-memory pool (a task of :meth:`LazyPool.to_dataset`).

    Parameters
    ----------
    pool : Pool
        The chunk (its ``p`` the chunk's slice of the global ``p``).
    offset : int
        Index of the chunk's first item (unused: the rows are the chunk's own).
    names : tuple of str
        Variables of :meth:`Pool.to_dataset`: ``"prediction"``, ``"prob"``,
        ``"predictive_std"``, ``"score"``, ``"cost"``, ``"p"``.

    Returns
    -------
    dict of str to ndarray
        The chunk's rows of each variable, laid out as in memory.
    """
    ds = pool.to_dataset()
    return {name: np.asarray(ds[name].values) for name in names}


class LazyPool(Pool):
    """A pool on dask: the same public calls as :class:`Pool`, with nothing of size ``n`` in memory.

    Build one with :meth:`Pool.from_parquet`, :meth:`Pool.from_zarr`, :meth:`Pool.from_dask` or
    :meth:`Pool.from_dask_dataframe`. It supports ``optimal_proposal``, ``passive_proposal``,
    ``Proposal.draw``, ``estimate`` and ``compare``; item-level reads (``view`` on index arrays,
    ``take``) gather only the requested items, chunk by chunk.

    Parameters
    ----------
    parts : sequence of dask.delayed.Delayed
        One task per chunk, in item order, computing the chunk's raw columns: a dict of ndarray
        keyed ``"pred/<model>"``, ``"prob/<model>"``, ``"std/<model>"``, ``"score/<model>"``,
        ``"cost"``, ``"weight"``, ``"item_id"`` (:mod:`~bayes_activeeval.lazy.sources`).
    sizes : sequence of int
        Items per chunk, one per part; parts of size zero are dropped.
    models : tuple of str
        The model names (the ``<model>`` of the columns).
    has_probs : bool
        Whether the chunks carry ``"prob/<model>"`` columns.
    has_std, has_scores, has_costs, has_weights, has_item_ids : bool, optional
        Whether the chunks carry ``"std/<model>"``, ``"score/<model>"``, ``"cost"``,
        ``"weight"`` and ``"item_id"`` columns (default ``False`` each).
    prob_ndim : int, optional
        ``1`` when a ``"prob/<model>"`` column is the vector ``P(y = pos_label | x)``, ``2``
        when it is an ``(n, C)`` array (default ``1``).
    n_prob_cols : int, optional
        ``C``, the columns of a two-dimensional probability array (default ``None``).
    classes, pos_label : optional
        As for :class:`~bayes_activeeval.Pool`; ``classes`` is read from the distinct
        predictions (one pass over the chunks) when not given.
    task : {"binary", "multiclass", "classification", "regression"}, optional
        Regression with ``has_std`` or ``task="regression"``; otherwise classification, except
        that with ``task=None`` (the default) and no probabilities, float predictions of the
        first model that are not all whole numbers make the pool regression (as an in-memory
        pool).
    client : distributed.Client, optional
        Where to compute (default ``None``: the ambient client if any, else dask's threads).

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
        import_dask()
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
        distinct = None  # the distinct predictions, when the task inference read them
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
                first = self._compute_parts([0], first_predictions, self.models)[0]
                if first.dtype.kind == "f":
                    # as an in-memory pool: regression if any of the first model's predictions
                    # is not a whole number; a first chunk of whole numbers decides nothing, so
                    # one pass reads every chunk and keeps the distinct values for the classes
                    seen = self._compute_parts(None, whole_and_distinct, self.models)
                    if all(whole for whole, _ in seen):
                        distinct = np.unique(np.concatenate([d for _, d in seen]))
                    else:
                        self.task = "regression"
        if self.task == "regression":
            self.classes = None
            self.pos_label, self.pos = None, None
        else:
            # the classes and the positive class exactly as an in-memory pool infers them: from a
            # probe pool over the distinct predictions (or the given classes)
            if classes is not None:
                values = np.asarray(classes)
            else:
                values = distinct if distinct is not None else self._unique_predictions()
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
            weight_total = float(sum(self._compute_parts(None, weight_sum)))
            if not np.isfinite(weight_total) or weight_total <= 0:
                raise ValueError("weights sum to zero; at least one item needs positive weight")
        self._spec = ChunkSpec(
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
        return self.column(None, chunk_p)

    def __repr__(self) -> str:
        extra = f", classes={show(self.classes)}" if self.classes is not None else ""
        return (
            f"LazyPool(n_items={self.n_items}, n_chunks={self.n_chunks}, task={self.task!r}, "
            f"models={list(self.models)}{extra})"
        )

    # -- running chunk tasks ----------------------------------------------------------------------
    def compute(self, tasks: list[Any]) -> list[Any]:
        """Compute delayed tasks on the pool's client (or the ambient scheduler).

        Parameters
        ----------
        tasks : list of dask.delayed.Delayed
            E.g. from :meth:`chunk_task`.

        Returns
        -------
        list
            Their results, in order.
        """
        dask = import_dask()
        if not tasks:
            return []
        if self.client is not None:
            return list(dask.compute(*tasks, scheduler=self.client))
        return list(dask.compute(*tasks))

    def chunk_task(self, k: int, fn: Callable, *args: Any) -> Any:
        """``fn(chunk_pool, offset_k, *args)`` as a delayed task on chunk ``k``.

        Parameters
        ----------
        k : int
            The chunk.
        fn : callable
            A module-level (picklable) task; ``chunk_pool`` is the chunk as an in-memory
            :class:`Pool` (:meth:`~bayes_activeeval.lazy.chunks.ChunkSpec.pool`).
        *args
            Passed on (small: they travel with the task). A dask array over the pool's items
            (a belief), bare or as the ``belief`` field of a dataclass such as
            :class:`~bayes_activeeval.lazy.chunks.OptimalParams`, is cut to the chunk's rows
            first (:meth:`chunk_args`).

        Returns
        -------
        dask.delayed.Delayed
            Compute it (with others) by :meth:`compute`.
        """
        dask = import_dask()
        # pure=False: no hashing of the arguments (a belief array would be hashed per chunk)
        return dask.delayed(run_chunk, pure=False)(
            self._spec, self._parts[k], int(self.offsets[k]), fn, *self.chunk_args(k, args)
        )

    def chunk_args(self, k: int, args: Sequence[Any]) -> tuple[Any, ...]:
        """The arguments of a task on chunk ``k``, with per-item arrays cut to the chunk's rows.

        dask hands a task the *computed value* of every dask collection among its arguments
        (inside dataclasses too): a whole ``(n, C)`` belief array, computed and passed to every
        chunk's task, so the work grew with the square of the number of chunks. Here a dask
        array with one row per item of the pool, given bare, and a ``belief`` field of a
        dataclass argument that is a dask or NumPy array of that length, become the chunk's
        rows wrapped in a :class:`~bayes_activeeval.lazy.chunks.ChunkBlock`: each task depends
        on one block (or the few that overlap the chunk) and
        :func:`~bayes_activeeval.lazy.chunks.chunk_belief` uses it as it is.

        Parameters
        ----------
        k : int
            The chunk.
        args : sequence
            The task's arguments after ``(chunk_pool, offset)``.

        Returns
        -------
        tuple
        """
        lo, hi = int(self.offsets[k]), int(self.offsets[k + 1])
        out = []
        for a in args:
            if self._per_item(a, dask_only=True):
                a = ChunkBlock(a[lo:hi])
            elif is_dataclass(a) and not isinstance(a, type):
                b = getattr(a, "belief", None)
                if "belief" in {f.name for f in fields(a)} and self._per_item(b, dask_only=False):
                    a = replace(a, belief=ChunkBlock(b[lo:hi]))
            out.append(a)
        return tuple(out)

    def _per_item(self, a: Any, dask_only: bool) -> bool:
        """Whether ``a`` is a dask (or, unless ``dask_only``, NumPy) array with one row per item."""
        dask = import_dask()
        if not (dask.is_dask_collection(a) or (not dask_only and isinstance(a, np.ndarray))):
            return False
        shape = getattr(a, "shape", None)
        return bool(shape) and shape[0] == self.n_items

    def check_belief(self, belief: Any) -> None:
        """Check that an array belief has one row per item of the pool (as in memory).

        A longer or shorter belief would otherwise be cut per chunk and silently misaligned.

        Parameters
        ----------
        belief : None, callable, Belief or array-like
            ``None`` and callables (evaluated per chunk) are not checked; a dask array whose
            length is unknown is not either.

        Raises
        ------
        ValueError
            ``"belief covers m items but the pool has n"``.
        """
        if belief is None or callable(belief):
            return
        n = getattr(belief, "n_items", None)
        if n is None:
            shape = getattr(belief, "shape", None)
            if shape is None:
                shape = np.shape(np.asarray(belief, dtype=object))
            if not shape:
                raise ValueError(
                    f"belief must be an array with one row per item, got {show(belief)}"
                )
            n = shape[0]
        if isinstance(n, (int, np.integer)) and int(n) != self.n_items:
            raise ValueError(f"belief covers {int(n)} items but the pool has {self.n_items}")

    def _compute_parts(self, chunks: Sequence[int] | None, fn: Callable, *args: Any) -> list[Any]:
        """``[fn(parts_k, offset_k, *args) for k in chunks]`` on raw columns, computed."""
        dask = import_dask()
        ks = range(self.n_chunks) if chunks is None else chunks
        tasks = [
            dask.delayed(fn, pure=True)(self._parts[k], int(self.offsets[k]), *args) for k in ks
        ]
        return self.compute(tasks)

    def map_chunks(
        self, fn: Callable, *args: Any, chunks: Sequence[int] | None = None
    ) -> list[Any]:
        """``[fn(chunk_pool, offset, *args) for every chunk]``, computed on the cluster.

        ``chunk_pool`` is the chunk as an in-memory :class:`Pool` whose ``p`` is the chunk's slice
        of the global test distribution; ``fn`` should return something small (per-chunk sums).
        """
        ks = range(self.n_chunks) if chunks is None else chunks
        return self.compute([self.chunk_task(k, fn, *args) for k in ks])

    def column(self, key: str | None, fn: Callable | None = None, *args: Any, dtype=float):
        """A lazy dask array over all items: a raw column (``"pred/model"``, ``"cost"``, …) or
        ``fn(chunk_pool, offset, *args)`` per chunk (an array of the chunk's length)."""
        dask = import_dask()
        import dask.array as da

        blocks = []
        for k in range(self.n_chunks):
            if fn is None:
                task = dask.delayed(get_column, pure=True)(self._parts[k], key)
            else:
                task = self.chunk_task(k, fn, *args)
            blocks.append(da.from_delayed(task, shape=(int(self.chunk_sizes[k]),), dtype=dtype))
        return da.concatenate(blocks)

    def predicted_classes(self, models: Sequence[str]) -> np.ndarray | None:
        """Whether each model predicts each class on some item of positive weight, as
        :meth:`Pool.predicted_classes`, from one pass over the chunks (cached per model;
        ``None`` for regression)."""
        if self.classes is None:
            return None
        cache = self.__dict__.setdefault("_predicted_classes", {})
        missing = tuple(dict.fromkeys(m for m in models if m not in cache))
        if missing:
            seen = np.logical_or.reduce(self.map_chunks(chunk_predicted_classes, missing))
            cache.update(zip(missing, seen, strict=True))
        return np.stack([cache[m] for m in models])

    def _agree_by_class(self, a: str, b: str) -> np.ndarray:
        """:meth:`Pool.agreeing_classes` from one pass over the chunks."""
        return np.logical_and.reduce(self.map_chunks(chunk_agreeing_classes, a, b))

    def _unique_predictions(self) -> np.ndarray:
        seen = self._compute_parts(None, unique_predictions, self.models)
        try:
            return np.unique(np.concatenate(seen))
        except TypeError as exc:
            raise TypeError("predictions have values that cannot be compared") from exc

    # -- item-level reads -----------------------------------------------------------------------
    def chunk_of(self, indices: np.ndarray) -> np.ndarray:
        """The chunk holding each item index (an array of chunk numbers)."""
        return np.searchsorted(self.offsets, indices, side="right") - 1

    def check_indices(self, idx: Any) -> np.ndarray:
        """Item indices as a flat int64 array, checked inside the pool.

        Raises
        ------
        ValueError
            For an index outside the pool, or a slice over a large pool (it would materialize it).
        TypeError
            For a boolean mask.
        """
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
        idx = self.check_indices(indices)
        if idx.size == 0:
            raise ValueError("no items to take")
        cache_key = idx.tobytes()
        if self._take_cache is not None and self._take_cache[0] == cache_key:
            return self._take_cache[1]
        dask = import_dask()
        chunk = self.chunk_of(idx)
        ks = np.unique(chunk)
        # gather the raw columns of the rows only; validation and encoding run on those rows
        got = self.compute(
            [
                dask.delayed(take_raw, pure=False)(
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
        """The pool as an :class:`xarray.Dataset` backed by dask arrays (nothing is loaded).

        The variables, coordinates and dimensions of the in-memory :meth:`Pool.to_dataset`:
        ``prediction`` (item, model), ``prob`` (item, model, class) with a pool's
        probabilities, ``predictive_std`` and ``score`` (item, model) and ``cost`` (item) when
        the pool has them, and ``p`` (item); coordinates ``item`` (the item indices), ``model``
        and ``class``. Each chunk is one task (:func:`dataset_block`, the chunk as an in-memory
        pool), so computing the dataset reads every chunk once. The ``item`` coordinate is a
        dask array without an index (an index would load it): select items with ``isel``, or
        ``set_xindex("item")`` to build one. ``attrs`` also holds ``lazy=1``.

        Returns
        -------
        xarray.Dataset
        """
        import dask.array as da
        import xarray as xr

        dims: dict[str, tuple[str, ...]] = {"prediction": ("item", "model")}
        if self._has["prob"]:
            dims["prob"] = ("item", "model", "class")
        if self._has["std"]:
            dims["predictive_std"] = ("item", "model")
        if self._has["score"]:
            dims["score"] = ("item", "model")
        if self._has["cost"]:
            dims["cost"] = ("item",)
        dims["p"] = ("item",)
        n_models = len(self.models)
        n_classes = 0 if self.classes is None else len(self.classes)
        blocks: dict[str, list[Any]] = {name: [] for name in dims}
        for k in range(self.n_chunks):
            task = self.chunk_task(k, dataset_block, tuple(dims))  # one read of the chunk
            size = int(self.chunk_sizes[k])
            for name, d in dims.items():
                shape = (size, n_models, n_classes)[: len(d)]
                dtype = self._column_dtype("pred") if name == "prediction" else float
                blocks[name].append(da.from_delayed(task[name], shape=shape, dtype=dtype))
        data = {name: (d, da.concatenate(blocks[name])) for name, d in dims.items()}
        coords: dict[str, Any] = {"model": list(self.models)}
        if self.classes is not None:
            coords["class"] = self.classes
        attrs = {"task": self.task, "lazy": 1}
        if self.pos_label is not None:
            attrs["pos_label"] = str(self.pos_label)
        ds = xr.Dataset(data, coords=coords, attrs=attrs)
        item = da.arange(self.n_items, chunks=(tuple(int(c) for c in self.chunk_sizes),))
        # no index on ``item``: building one would load it
        return ds.assign_coords(xr.Coordinates({"item": ("item", item)}, indexes={}))

    def _column_dtype(self, role: str):
        if role == "pred" and self.classes is not None:
            return self.classes.dtype
        return float

    # -- pool-wide sums -------------------------------------------------------------------------
    def intrinsic_risk(
        self, measure: Measure, model: str | None, belief: Any = None, belief_floor: float = 0.0
    ) -> np.ndarray:
        """``R = Σ_x p(x) E_π[ℓ(x, y)]`` (Sawade (2012), Eq. 4.21-4.22) as a sum of per-chunk sums.

        Parameters
        ----------
        measure : Measure
            The measure.
        model : str or None
            Which model, for a pool with several and a measure not bound to models.
        belief : None, array-like or callable, optional
            As for :func:`~bayes_activeeval.lazy.chunks.chunk_belief`; an array must have one
            row per item (default ``None``: the plug-in).
        belief_floor : float, optional
            Floor on each class probability (default ``0.0``).

        Returns
        -------
        ndarray (d,)
        """
        self.check_belief(belief)
        parts = self.map_chunks(risk_chunk, measure, model, belief, belief_floor)
        return np.sum(parts, axis=0)
