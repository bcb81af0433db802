"""Chunk sources: lazy pools from Parquet files, Zarr groups, dask arrays and dask DataFrames.

Each constructor maps the user's column names (or arrays) to *roles* and builds, per chunk, a
dask task that loads the chunk's columns as a dict of NumPy arrays keyed ``"pred/<model>"``,
``"prob/<model>"``, ``"std/<model>"``, ``"score/<model>"``, ``"cost"``, ``"weight"``: a few
Parquet row groups, a block of dask or Zarr arrays, a partition of a dask DataFrame. Only
metadata is read here; :class:`~bayes_activeeval.lazy.pool.LazyPool` reads the chunks when a
computation needs them.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._validation import check_count
from ..pool import DEFAULT_MODEL
from .pool import DEFAULT_CHUNK_SIZE, LazyPool, import_dask

__all__ = ["from_dask", "from_dask_dataframe", "from_parquet", "from_zarr"]


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


def _column_names(roles: dict[str, Any], caller: str) -> list[str]:
    """The distinct column names the roles read, in order of first use."""
    columns: list[str] = []
    for spec in roles.values():
        for name in spec if isinstance(spec, (list, tuple)) else [spec]:
            if not isinstance(name, str):
                raise TypeError(f"{caller} takes column names, got {name!r}")
            if name not in columns:
                columns.append(name)
    return columns


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
    """A lazy pool reading Parquet row groups (see :meth:`Pool.from_parquet`).

    Parameters
    ----------
    path : str, path, glob or list of them
        A Parquet file, a directory of them (searched recursively, read in sorted order), a glob
        or a list. Items are numbered in file order, then row order.
    predictions : str or dict of str, optional
        Column name of ``f(x)`` (default ``"pred"``); a dict ``{"a": "pred_a", "b": "pred_b"}``
        names several models.
    probs : str, list of str or dict of them, optional
        One column of ``P(y = pos_label | x)`` (binary) or a list of one column per class, per
        model as for ``predictions`` (default ``"p"``; ``None`` for none).
    predictive_std, scores : str or dict, optional
        Column names, as for ``predictions`` (default ``None``: none).
    costs, weights : str, optional
        Column names of the label costs ``c(x)`` and of the item weights (``p(x)`` after
        normalizing); default ``None``: none (uniform ``p``).
    classes, pos_label : optional
        As for :class:`~bayes_activeeval.Pool`; the classes are read from the predictions (one
        pass over the chunks) when not given.
    task : {"binary", "multiclass", "regression"}, optional
        As for :class:`~bayes_activeeval.Pool` (inferred when not given).
    chunk_size : int, optional
        Items per chunk (default ``2**20``): whole row groups are grouped up to this many rows
        (a row group larger than it is a chunk of its own).
    client : distributed.Client, optional
        Where to compute (default ``None``: the ambient client if any, else dask's threads).

    Returns
    -------
    LazyPool
    """
    import pyarrow.parquet as pq

    dask = import_dask()
    chunk_size = check_count(chunk_size, "chunk_size")
    roles, models, prob_ndim, n_cols = _roles(
        predictions, probs, predictive_std, scores, costs, weights
    )
    columns = _column_names(roles, "from_parquet")
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
    """A lazy pool over dask (or NumPy) arrays (see :meth:`Pool.from_dask`).

    Parameters
    ----------
    predictions : array-like (n,) or dict of them
        The models' predictions ``f(x)``; a dict ``{"a": ya, "b": yb}`` holds several models.
    probs : array-like (n,) or (n, C), or dict of them, optional
        Class probabilities (default ``None``: none).
    predictive_std, scores, costs, weights : array-like (n,) or dict, optional
        As for :class:`~bayes_activeeval.Pool` (``costs`` and ``weights`` one array; default
        ``None``: none).
    classes, pos_label : optional
        As for :class:`~bayes_activeeval.Pool`; the classes are read from the predictions (one
        pass over the chunks) when not given.
    task : {"binary", "multiclass", "regression"}, optional
        As for :class:`~bayes_activeeval.Pool` (inferred when not given).
    chunk_size : int, optional
        Items per chunk (default ``None``: the chunks of the first predictions array); every
        array is rechunked to match.
    client : distributed.Client, optional
        Where to compute (default ``None``: the ambient client if any, else dask's threads).

    Returns
    -------
    LazyPool
    """
    import_dask()
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
    """A lazy pool over arrays of a Zarr group (see :meth:`Pool.from_zarr`).

    Parameters
    ----------
    store : str or zarr store
        The Zarr group (anything :func:`dask.array.from_zarr` opens).
    predictions : str or dict of str, optional
        Array name of ``f(x)`` (default ``"pred"``); a dict ``{"a": "pred_a", "b": "pred_b"}``
        names several models.
    probs : str, list of str or dict of them, optional
        One array of ``P(y = pos_label | x)`` (binary) or of shape ``(n, C)``, or a list of one
        array per class, per model as for ``predictions`` (default ``"p"``; ``None`` for none).
    predictive_std, scores : str or dict, optional
        Array names, as for ``predictions`` (default ``None``: none).
    costs, weights : str, optional
        Array names of the label costs ``c(x)`` and of the item weights (``p(x)`` after
        normalizing); default ``None``: none (uniform ``p``).
    classes, pos_label : optional
        As for :class:`~bayes_activeeval.Pool`; the classes are read from the predictions (one
        pass over the chunks) when not given.
    task : {"binary", "multiclass", "regression"}, optional
        As for :class:`~bayes_activeeval.Pool` (inferred when not given).
    chunk_size : int, optional
        Items per chunk (default ``2**20``; ``None``: the chunks of the predictions array).
    client : distributed.Client, optional
        Where to compute (default ``None``: the ambient client if any, else dask's threads).

    Returns
    -------
    LazyPool
    """
    import_dask()
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
    """A lazy pool over the partitions of a dask DataFrame (see :meth:`Pool.from_dask_dataframe`).

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
        The items, one chunk per partition (their lengths are computed once).
    predictions : str or dict of str, optional
        Column name of ``f(x)`` (default ``"pred"``); a dict ``{"a": "pred_a", "b": "pred_b"}``
        names several models.
    probs : str, list of str or dict of them, optional
        One column of ``P(y = pos_label | x)`` (binary) or a list of one column per class, per
        model as for ``predictions`` (default ``"p"``; ``None`` for none).
    predictive_std, scores : str or dict, optional
        Column names, as for ``predictions`` (default ``None``: none).
    costs, weights : str, optional
        Column names of the label costs ``c(x)`` and of the item weights (``p(x)`` after
        normalizing); default ``None``: none (uniform ``p``).
    classes, pos_label : optional
        As for :class:`~bayes_activeeval.Pool`; the classes are read from the predictions (one
        pass over the chunks) when not given.
    task : {"binary", "multiclass", "regression"}, optional
        As for :class:`~bayes_activeeval.Pool` (inferred when not given).
    client : distributed.Client, optional
        Where to compute (default ``None``: the ambient client if any, else dask's threads).

    Returns
    -------
    LazyPool
    """
    dask = import_dask()
    roles, models, prob_ndim, n_cols = _roles(
        predictions, probs, predictive_std, scores, costs, weights
    )
    columns = _column_names(roles, "from_dask_dataframe")
    for name in columns:
        if name not in frame.columns:
            raise ValueError(
                f"the frame has no column {name!r}; its columns are {list(frame.columns)}"
            )
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
