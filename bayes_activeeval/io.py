"""Pool files: read a :class:`~bayes_activeeval.pool.Pool` from CSV or Parquet, with checks.

A pool file has one row per item and columns naming, for each model, its prediction and its
probability (or score), plus an optional item id, label cost, item weight and free-text columns
(shown to a human labeler). :class:`PoolSpec` names those columns; it is what ``bae init``
records in a session, so the same file can be read the same way later. :func:`file_checksum`
gives the SHA-256 that sessions use to refuse a pool file that changed.

Every problem — a malformed CSV, an unknown column, duplicate ids, a missing or NaN probability,
an empty file — raises :class:`ValueError` with one line naming the file, the column and the row.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .pool import DEFAULT_MODEL, Pool

__all__ = [
    "PoolFile",
    "PoolSpec",
    "check_output",
    "escape_cell",
    "file_checksum",
    "jsonable",
    "label_codec",
    "read_labels",
    "read_pool",
    "read_text_csv",
    "unescape_cell",
    "write_new_file",
]

#: Cells starting with one of these are formulas to a spreadsheet (CSV injection); they are
#: written with a leading ``'`` (and so are cells starting with ``'``, to keep the round trip).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "'")
#: Only a truly empty cell is missing: ``NA``, ``NULL``, ``None``, ``nan`` are ordinary text.
_CSV_NA = {"keep_default_na": False, "na_values": [""]}
_NUMERIC_NA = {"nan", "na", "n/a", "null", "none", "-nan", "<na>"}

_CHUNK = 1 << 20


def file_checksum(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes, as a hex string (read in 1 MiB blocks).

    Parameters
    ----------
    path : str or os.PathLike
        The file to hash.

    Returns
    -------
    str
        The 64-character lowercase hex digest.
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_CHUNK):
            h.update(block)
    return h.hexdigest()


def _as_mapping(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    if isinstance(value, str):
        return {DEFAULT_MODEL: value}
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return {DEFAULT_MODEL: list(value)}  # one model's class columns
    raise TypeError(f"{name} must be a column name or a dict model -> column, got {value!r}")


@dataclass(frozen=True)
class PoolSpec:
    """Which columns of a pool file hold what.

    Parameters
    ----------
    pred : str or dict
        The prediction column, or ``{model: column}`` for several models.
    prob : str, sequence of str, or dict, optional
        Binary pools: the column of ``P(y = pos_label | x)``. Multiclass: one column per class, in
        the order of ``classes``. ``{model: column(s)}`` for several models.
    score : str or dict, optional
        Raw score column(s) (used for plots and stratification).
    std : str or dict, optional
        Regression: the predictive standard deviation column(s).
    id_col : str, optional
        Item identifiers (read as text). Default: the row number.
    text_cols : sequence of str
        Columns shown to a labeler and written by ``bae next``.
    cost_col, weight_col : str, optional
        Label costs ``c(x)`` (Sawade (2012), Sec. 4.3) and item weights ``p(x)``.
    classes : sequence, optional
        The label values (default: inferred from the predictions).
    pos_label : optional
        The positive class of binary measures.
    task : {"binary", "multiclass", "regression"}, optional
    format : {"csv", "parquet"}, optional
        Default: from the file suffix (``.parquet``/``.pq`` is Parquet, anything else CSV).
    lazy : bool
        Parquet only: read the pool lazily on dask (:meth:`Pool.from_parquet`), so nothing of the
        pool's size is held in memory; item ids are read when needed (:class:`LazyIds`).
    """

    pred: Any
    prob: Any = None
    score: Any = None
    std: Any = None
    id_col: str | None = None
    text_cols: tuple[str, ...] = ()
    cost_col: str | None = None
    weight_col: str | None = None
    classes: tuple | None = None
    pos_label: Any = None
    task: str | None = None
    format: str | None = None
    lazy: bool = False
    _norm: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pred = _as_mapping(self.pred, "pred")
        if not pred:
            raise ValueError("pred must name the prediction column (pred=COLUMN)")
        prob = _as_mapping(self.prob, "prob")
        prob = {m: (c,) if isinstance(c, str) else tuple(c) for m, c in prob.items()}
        score = _as_mapping(self.score, "score")
        std = _as_mapping(self.std, "std")
        for name, d in (("prob", prob), ("score", score), ("std", std)):
            if d and set(d) != set(pred):
                raise ValueError(
                    f"{name} names models {sorted(d)} but pred names {sorted(pred)}; give one "
                    f"{name} column per model"
                )
        if self.format not in (None, "csv", "parquet"):
            raise ValueError(f"format must be 'csv' or 'parquet', got {self.format!r}")
        if isinstance(self.text_cols, str):
            object.__setattr__(self, "text_cols", (self.text_cols,))
        else:
            object.__setattr__(self, "text_cols", tuple(self.text_cols))
        if self.classes is not None:
            object.__setattr__(self, "classes", tuple(self.classes))
        self._norm.update(pred=pred, prob=prob, score=score, std=std)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self._norm["pred"])

    def columns(self) -> dict[str, str]:
        """Every column the spec reads, mapped to the option that names it (for messages)."""
        out: dict[str, str] = {}
        if self.id_col:
            out[self.id_col] = "id"
        for opt in ("pred", "prob", "score", "std"):
            for cols in self._norm[opt].values():
                for c in (cols,) if isinstance(cols, str) else cols:
                    out[c] = opt
        for c in self.text_cols:
            out[c] = "text"
        if self.cost_col:
            out[self.cost_col] = "cost"
        if self.weight_col:
            out[self.weight_col] = "weight"
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable form (what a session stores)."""
        d = asdict(self)
        d.pop("_norm", None)
        d["pred"], d["prob"] = (
            self._norm["pred"],
            {m: list(c) for m, c in self._norm["prob"].items()},
        )
        d["score"], d["std"] = self._norm["score"], self._norm["std"]
        d["text_cols"] = list(self.text_cols)
        d["classes"] = None if self.classes is None else jsonable(self.classes)
        d["pos_label"] = jsonable(self.pos_label)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PoolSpec:
        """Inverse of :meth:`to_dict`."""
        d = dict(d)
        d["text_cols"] = tuple(d.get("text_cols") or ())
        for key in ("prob", "score", "std"):
            if not d.get(key):
                d[key] = None
        return cls(**d)


def jsonable(o: Any) -> Any:
    """``o`` with what JSON cannot hold made JSON: NaN and infinities become ``null`` (Python's
    ``json`` would write ``NaN``, which no JSON parser reads), NumPy scalars plain numbers, NumPy
    arrays and tuples lists, and keys text. A session's stored options and stages,
    ``/api/status`` and ``bae status --json`` go through it.

    Parameters
    ----------
    o : Any
        Nested dicts, lists, tuples, NumPy arrays, numbers, NumPy scalars, text.

    Returns
    -------
    Any
        The same structure, ready for :func:`json.dumps` with ``allow_nan=False``.
    """
    if isinstance(o, dict):
        return {str(k): jsonable(v) for k, v in o.items()}
    if isinstance(o, np.ndarray):
        return jsonable(o.tolist())
    if isinstance(o, (list, tuple)):
        return [jsonable(v) for v in o]
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if hasattr(o, "item"):
        return jsonable(o.item())
    return o


@dataclass(frozen=True)
class PoolFile:
    """A pool read from a file.

    Made by :func:`read_pool`.

    Parameters
    ----------
    pool : Pool
        The pool built from the file.
    ids : ndarray of str (n,)
        Item identifiers: the id column as stripped text, or the row numbers ``"0"``, ``"1"``, …
    text : pandas.DataFrame
        The text columns, one row per item (no columns without text columns).
    path : str
        Absolute path of the file.
    checksum : str
        SHA-256 of the file's bytes (:func:`file_checksum`).
    spec : PoolSpec
        The columns the file was read with.

    Attributes
    ----------
    pool : Pool
    ids : ndarray of str (n,)
        Item identifiers (the id column as text, or the row numbers).
    text : pandas.DataFrame
        The text columns (indexed like the pool), for labelers and ``bae next``.
    path : str
        Absolute path of the file.
    checksum : str
        SHA-256 of the file.
    spec : PoolSpec
    """

    pool: Pool
    ids: np.ndarray
    text: pd.DataFrame
    path: str
    checksum: str
    spec: PoolSpec

    @functools.cached_property
    def _lookup(self) -> pd.Index:
        return pd.Index(self.ids)

    def index_of(self, ids: Sequence[str], name: str = "id") -> np.ndarray:
        """Pool indices of the given item ids; :class:`ValueError` naming the first unknown id."""
        ids = np.asarray([str(i) for i in ids], dtype=object)
        pos = self._lookup.get_indexer(ids)
        bad = np.flatnonzero(pos < 0)
        if bad.size:
            raise ValueError(
                f"unknown item {name} {ids[bad[0]]!r} (row {bad[0] + 1}): not in the pool file"
                + (f" ({bad.size} unknown ids in all)" if bad.size > 1 else "")
            )
        return pos.astype(np.int64)


def _detect_format(path: Path, fmt: str | None) -> str:
    if fmt is not None:
        return fmt
    return "parquet" if path.suffix.lower() in (".parquet", ".pq") else "csv"


def _read_frame(
    path: Path, fmt: str, id_col: str | None, text_cols: Sequence[str] = ()
) -> pd.DataFrame:
    if not path.exists():
        raise ValueError(f"pool file {str(path)!r} does not exist")
    if path.is_dir():
        raise ValueError(f"pool file {str(path)!r} is a directory, not a CSV or Parquet file")
    if fmt == "parquet":
        try:
            import pyarrow.parquet as pq

            frame = pq.read_table(path).to_pandas()
        except ImportError as exc:  # pragma: no cover - pyarrow is a dependency
            raise ValueError("reading Parquet needs pyarrow (pip install pyarrow)") from exc
        except Exception as exc:
            raise ValueError(f"cannot read {path.name} as Parquet: {_one_line(exc)}") from exc
    else:
        # ids and the columns shown to labelers are text, as written: "007" stays "007"
        as_text = [c for c in (id_col, *text_cols) if c]
        frame = _read_csv(path, "pool file", dtype=dict.fromkeys(as_text, str) or None)
    return frame


def read_pool_frame(
    path: str | Path,
    fmt: str | None = None,
    id_col: str | None = None,
    text_cols: Sequence[str] = (),
) -> pd.DataFrame:
    """The pool file as a DataFrame, all columns (format from ``fmt`` or the file suffix); the
    id column and ``text_cols`` of a CSV are read as text."""
    path = Path(path)
    return _read_frame(path, _detect_format(path, fmt), id_col, tuple(text_cols))


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _read_csv(path: Path, what: str, dtype=None) -> pd.DataFrame:
    if path.is_dir():
        raise ValueError(f"{what} {str(path)!r} is a directory, not a CSV file")
    try:
        with warnings.catch_warnings():
            # rows longer than the header: pandas warns and drops data; that is a malformed file
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(
                path,
                dtype=dtype,
                skipinitialspace=True,
                index_col=False,
                float_precision="round_trip",  # exact floats on pandas 2 too (3 is exact)
                **_CSV_NA,
            )
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{what} {path.name} is empty (no header, no rows)") from exc
    except (pd.errors.ParserError, pd.errors.ParserWarning, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{what} {path.name} is not a well-formed CSV: {_one_line(exc)}") from exc
    except OSError as exc:
        raise ValueError(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from exc
    return frame


def read_text_csv(path: str | os.PathLike, what: str, text_cols: Sequence[str]) -> pd.DataFrame:
    """A CSV with the columns ``text_cols`` read as text, as pool files read their ids: only a
    truly empty cell is missing (``NA``, ``NULL``, ``None`` are ordinary text) and ``001`` stays
    ``001``; the other columns are parsed as usual.

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file.
    what : str
        What the file is, for messages (``"pool file"``, ``"grades file"``).
    text_cols : sequence of str
        Columns kept as text (e.g. a ranking pool's query and document ids).

    Returns
    -------
    pandas.DataFrame

    Raises
    ------
    ValueError
        A missing file, a directory, a malformed CSV.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise ValueError(f"{what} {str(p)!r} does not exist")
    return _read_csv(p, what, dtype=dict.fromkeys(text_cols, str))


def _column(frame: pd.DataFrame, col: str, option: str, path: Path) -> pd.Series:
    if col not in frame.columns:
        known = ", ".join(map(str, frame.columns[:20]))
        raise ValueError(
            f"column {col!r} (--{option}) is not in {path.name}; its columns are: {known}"
        )
    return frame[col]


def _numeric(series: pd.Series, option: str, ids: np.ndarray, path: Path) -> np.ndarray:
    values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        i = int(bad[0])
        raw = series.iloc[i]
        missing = pd.isna(raw) or str(raw).strip().lower() in _NUMERIC_NA
        what = "missing (NaN)" if missing else f"{raw!r}, not a finite number"
        raise ValueError(
            f"column {series.name!r} (--{option}) of {path.name} is {what} at row {i + 1} "
            f"(id {ids[i]!r})" + (f"; {bad.size} bad rows in all" if bad.size > 1 else "")
        )
    return values


def _predictions(series: pd.Series, ids: np.ndarray, path: Path, regression: bool) -> np.ndarray:
    missing = np.flatnonzero(series.isna().to_numpy())
    if missing.size:
        i = int(missing[0])
        raise ValueError(
            f"column {series.name!r} (--pred) of {path.name} is missing at row {i + 1} "
            f"(id {ids[i]!r})"
        )
    if regression:
        return _numeric(series, "pred", ids, path)
    values = series.to_numpy()
    if values.dtype == object:
        # stripped, as labels and ids are: "yes " would be a class no label can ever equal
        values = np.char.strip(values.astype(str))
    return values


def _as_kind(value: Any, kind: str, what: str) -> Any:
    """``value`` (e.g. the text of ``--classes`` or ``--pos-label``) as a value of the predictions'
    dtype kind: an int for integer predictions (``"1"``, ``"1.0"``), a float for float ones, a
    bool for boolean ones (``"1"``/``"true"``, ``"0"``/``"false"``); text stays text."""
    if kind in ("i", "u", "f"):
        try:
            v = float(str(value).strip()) if isinstance(value, str) else float(value)
        except (TypeError, ValueError):
            v = float("nan")
        if kind == "f" and np.isfinite(v):
            return v
        if kind in ("i", "u") and np.isfinite(v) and v == int(v):
            return int(v)
        number = "a whole number" if kind in ("i", "u") else "a number"
        raise ValueError(f"{what} {value!r} is not {number}, but the predictions are")
    if kind == "b":
        text = str(value).strip().lower()
        if text in ("1", "true"):
            return True
        if text in ("0", "false"):
            return False
        raise ValueError(
            f"{what} {value!r} is not a boolean (true/false, 1/0), but the predictions are"
        )
    return value


def _classes_and_pos_label(spec: PoolSpec, kind: str, name: str) -> tuple[Any, Any]:
    """``spec.classes`` and ``spec.pos_label`` (text from the command line) as values of the
    predictions' dtype ``kind``; errors name the file ``name``."""
    try:
        classes = _coerce_classes(spec.classes, kind)
        pos_label = None if spec.pos_label is None else _as_kind(spec.pos_label, kind, "pos_label")
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from exc
    return classes, pos_label


def _coerce_classes(classes: tuple | None, kind: str) -> np.ndarray | None:
    if classes is None:
        return None
    if kind in ("i", "u", "f", "b"):
        return np.array(
            sorted(_as_kind(c, kind, f"class in classes {list(classes)}") for c in classes)
        )
    return np.array(sorted(str(c) for c in classes))


def read_pool(path: str | os.PathLike, spec: PoolSpec) -> PoolFile:
    """Read a pool from a CSV or Parquet file.

    Parameters
    ----------
    path : str or path-like
    spec : PoolSpec
        Which columns hold the predictions, probabilities, scores, ids, texts, costs, weights.

    Returns
    -------
    PoolFile
        The :class:`Pool` with its ids, text columns and the file's SHA-256.

    Raises
    ------
    ValueError
        One line naming the file, option, column and row: malformed CSV or Parquet, an empty pool,
        unknown columns, duplicate or missing ids, NaN or non-numeric probabilities/scores/costs,
        predictions outside ``classes`` (and every check of :class:`Pool`).
    """
    if not isinstance(spec, PoolSpec):
        raise TypeError(f"spec must be a PoolSpec, got {type(spec).__name__}")
    p = Path(path).expanduser().resolve()
    fmt = _detect_format(p, spec.format)
    if spec.lazy:
        return _read_lazy_pool(p, fmt, spec)
    used = spec.columns()  # a text column that is also read as numbers (--pred …) stays numeric
    shown = tuple(c for c in spec.text_cols if used.get(c) == "text")
    frame = _read_frame(p, fmt, spec.id_col, shown)
    for col, option in used.items():
        _column(frame, col, option, p)
    if len(frame) == 0:
        raise ValueError(f"the pool is empty: {p.name} has a header but no rows")

    if spec.id_col:
        id_series = frame[spec.id_col]
        miss = np.flatnonzero(id_series.isna().to_numpy())
        if miss.size:
            raise ValueError(
                f"id column {spec.id_col!r} of {p.name} is missing at row {int(miss[0]) + 1}"
            )
        ids = id_series.astype(str).str.strip().to_numpy(dtype=object)
        lookup = pd.Index(ids)
        dup = np.zeros(0, dtype=bool) if lookup.is_unique else lookup.duplicated(keep=False)
        if dup.any():
            rows = np.flatnonzero(dup)
            first = ids[rows[0]]
            where = np.flatnonzero(ids == first)[:2] + 1
            raise ValueError(
                f"duplicate item id {first!r} in column {spec.id_col!r} of {p.name} "
                f"(rows {where[0]} and {where[1]}); ids must be unique"
            )
    else:
        ids = np.array([str(i) for i in range(len(frame))], dtype=object)
        lookup = None

    norm = spec._norm
    regression = spec.task == "regression" or bool(norm["std"])
    preds = {m: _predictions(frame[c], ids, p, regression) for m, c in norm["pred"].items()}
    probs = None
    if norm["prob"]:
        probs = {}
        for m, cols in norm["prob"].items():
            arrs = [_numeric(frame[c], "prob", ids, p) for c in cols]
            for c, a in zip(cols, arrs, strict=True):
                bad = np.flatnonzero((a < 0) | (a > 1))
                if bad.size:
                    i = int(bad[0])
                    raise ValueError(
                        f"column {c!r} (--prob) of {p.name} has {a[i]!r} at row {i + 1} "
                        f"(id {ids[i]!r}); probabilities must be in [0, 1]"
                    )
            probs[m] = arrs[0] if len(arrs) == 1 else np.stack(arrs, axis=1)
    scores = (
        {m: _numeric(frame[c], "score", ids, p) for m, c in norm["score"].items()}
        if norm["score"]
        else None
    )
    stds = (
        {m: _numeric(frame[c], "std", ids, p) for m, c in norm["std"].items()}
        if norm["std"]
        else None
    )
    costs = _numeric(frame[spec.cost_col], "cost", ids, p) if spec.cost_col else None
    weights = _numeric(frame[spec.weight_col], "weight", ids, p) if spec.weight_col else None
    single = list(preds) == [DEFAULT_MODEL]

    def unwrap(d):
        return d if d is None or not single else d[DEFAULT_MODEL]

    # --classes and --pos-label arrive as text: as values of the predictions' dtype (0/1
    # predictions read as integers or floats take "1"); a regression pool has no classes
    kind = "" if regression else next(iter(preds.values())).dtype.kind
    classes, pos_label = _classes_and_pos_label(spec, kind, p.name)
    try:
        pool = Pool(
            unwrap(preds),
            unwrap(probs),
            predictive_std=unwrap(stds),
            scores=unwrap(scores),
            costs=costs,
            weights=weights,
            classes=classes,
            pos_label=pos_label,
            task=spec.task,
            item_ids=ids,
        )
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{p.name}: {exc}") from exc
    text = frame[list(spec.text_cols)].copy() if spec.text_cols else pd.DataFrame(index=frame.index)
    pf = PoolFile(pool, ids, text.reset_index(drop=True), str(p), file_checksum(p), spec)
    if lookup is not None:
        pf.__dict__["_lookup"] = lookup  # the hash table built for the duplicate check, reused
    return pf


# -- labels ---------------------------------------------------------------------------------------
def label_codec(pool: Pool):
    """A function ``parse(text, where) -> label`` turning typed or CSV label text into a label of
    the pool (a class value, or a float for regression), raising :class:`ValueError` otherwise.

    The text is stripped; a class matches its text case-insensitively (boolean classes also
    ``"0"``/``"1"``), and a number equal to a numeric class's value (``"1.0"`` for class ``1``,
    ``"1"`` for class ``1.0``); a regression label must be a finite number. ``where`` is appended
    to the error message.

    Parameters
    ----------
    pool : Pool
        The pool whose classes (or regression task) the labels must fit.

    Returns
    -------
    callable
        ``parse(text, where="")``.
    """
    if pool.task == "regression":

        def parse_reg(text: Any, where: str = "") -> float:
            try:
                v = float(str(text).strip())
            except ValueError:
                v = float("nan")
            if not np.isfinite(v):
                raise ValueError(f"label {text!r}{where} is not a finite number")
            return v

        return parse_reg

    table: dict[str, Any] = {}
    for c in pool.classes:
        table[str(c)] = c
        table[str(c).lower()] = c
        if isinstance(c, (bool, np.bool_)):
            table["1" if c else "0"] = c
    classes = [str(c) for c in pool.classes]
    # numeric classes (integers or floats): a label is any text of the same number ("1", "1.0")
    kind = np.asarray(pool.classes).dtype.kind
    numeric = {float(c): c for c in pool.classes} if kind in ("i", "u", "f") else {}

    def parse(text: Any, where: str = "") -> Any:
        key = str(text).strip()
        if key in table:
            return table[key]
        if key.lower() in table:
            return table[key.lower()]
        try:
            f = float(key)
        except (ValueError, OverflowError):
            f = None
        if f is not None and f in numeric:
            return numeric[f]
        if f is not None and np.isfinite(f) and f == int(f) and str(int(f)) in table:
            return table[str(int(f))]
        raise ValueError(f"label {key!r}{where} is not one of the classes {classes}")

    return parse


def read_labels(
    path: str | os.PathLike, *, id_col: str = "id", label_col: str = "label"
) -> pd.DataFrame:
    """Read a labels CSV (columns ``id,label``; other columns ignored) as text.

    Parameters
    ----------
    path : str or os.PathLike
        The labels CSV (``~`` is expanded).
    id_col : str, optional
        The column of item ids (default ``"id"``); ids are stripped and unescaped
        (:func:`unescape_cell`).
    label_col : str, optional
        The column of labels (default ``"label"``), kept as text (parse it with
        :func:`label_codec`).

    Returns
    -------
    pandas.DataFrame
        Columns ``id`` and ``label`` (text), one row per row of the file.

    Raises
    ------
    ValueError
        Malformed CSV, missing columns, empty file, missing ids or labels, duplicate ids.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise ValueError(f"labels file {str(p)!r} does not exist")
    if p.is_dir():
        raise ValueError(f"labels file {str(p)!r} is a directory, not a CSV file")
    frame = _read_csv(p, "labels file", dtype=str)
    for col in (id_col, label_col):
        if col not in frame.columns:
            raise ValueError(
                f"labels file {p.name} has no column {col!r}; its columns are: "
                + ", ".join(map(str, frame.columns))
            )
    frame = frame[[id_col, label_col]].rename(columns={id_col: "id", label_col: "label"})
    if len(frame) == 0:
        raise ValueError(f"labels file {p.name} has no rows")
    for col in ("id", "label"):
        miss = np.flatnonzero(frame[col].isna().to_numpy())
        if miss.size:
            raise ValueError(f"labels file {p.name} has an empty {col} at row {int(miss[0]) + 1}")
    frame["id"] = frame["id"].str.strip().map(unescape_cell)
    dup = frame["id"].duplicated(keep=False).to_numpy()
    if dup.any():
        rows = np.flatnonzero(dup)[:2] + 1
        raise ValueError(
            f"labels file {p.name} has item id {frame['id'].iloc[rows[0] - 1]!r} twice "
            f"(rows {rows[0]} and {rows[1]})"
        )
    return frame.reset_index(drop=True)


# -- output files ---------------------------------------------------------------------------------
def escape_cell(value: Any) -> Any:
    """A text cell as a spreadsheet will not run it: a leading ``= + - @`` (or tab, CR, ``'``)
    gets a ``'`` in front (OWASP's advice against CSV injection). :func:`unescape_cell` undoes
    it, so ids written by ``bae next`` are read back by ``bae record`` as they were.

    Parameters
    ----------
    value : Any
        A cell; only a ``str`` is changed.

    Returns
    -------
    Any
        ``value``, or ``"'" + value``.
    """
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def unescape_cell(value: Any) -> Any:
    """Inverse of :func:`escape_cell`.

    Parameters
    ----------
    value : Any
        A cell; only a ``str`` that starts with ``'`` followed by one of the escaped characters
        is changed.

    Returns
    -------
    Any
        ``value`` without its leading ``'``, or ``value`` unchanged.
    """
    if isinstance(value, str) and value.startswith("'") and value[1:].startswith(_FORMULA_START):
        return value[1:]
    return value


def is_sqlite(path: str | Path) -> bool:
    """Whether ``path`` is an SQLite database (its 16-byte header; ``False`` if unreadable).

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    bool
    """
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


#: Columns whose filled-in cells are labels: ``label`` (a batch of ``bae next``) and ``grade``
#: (a ranking batch: one grade per query and document).
_LABEL_COLUMNS = ("label", "grade")


def _holds_labels(path: Path) -> str | None:
    """Why the file must not be replaced (a session, or a CSV with filled-in labels or grades),
    or None."""
    import csv

    if is_sqlite(path):
        return "it is a SQLite database (a session?)"
    try:
        # a byte-order mark is not part of the first name, and a cell that is not UTF-8 (a
        # spreadsheet's Latin-1 export) must not make a file of labels look empty: bae record
        # reads both
        with open(path, newline="", encoding="utf-8-sig", errors="replace") as fh:
            reader = csv.reader(fh)
            header = next(reader, None) or []
            names = [c.strip().lower() for c in header]
            cols = {n: [k for k, c in enumerate(names) if c == n] for n in _LABEL_COLUMNS}
            cols = {n: ks for n, ks in cols.items() if ks}
            if not cols:
                return None
            filled = dict.fromkeys(cols, 0)
            for row in reader:
                for name, ks in cols.items():
                    filled[name] += any(k < len(row) and row[k].strip() for k in ks)
    except OSError:
        return None
    except csv.Error as exc:  # not a CSV we can read: it may hold labels, so it is kept
        return f"it cannot be read as CSV ({exc}), so it may hold labels"
    for name, n in filled.items():
        if n:
            return f"it holds {n} {name}s (column {name!r})"
    return None


def check_output(
    out: str | os.PathLike,
    *,
    overwrite: bool = False,
    protected: Sequence[tuple[str | os.PathLike, str]] = (),
) -> Path:
    """Check that ``out`` may be written: its directory exists; it is none of the ``protected``
    files (``(path, what)``: the session, the pool, an input); an existing file is replaced only
    with ``overwrite``, and never when it holds labels (a session, or a CSV whose ``label``
    column, or ``grade`` column of a ranking batch, is filled in).

    Parameters
    ----------
    out : str or os.PathLike
        The path to be written (``~`` is expanded).
    overwrite : bool, optional
        Allow replacing an existing file that holds no labels (default ``False``).
    protected : sequence of (path, str), optional
        Files ``out`` must not be, each with what it is, used in the message (e.g.
        ``(pool_path, "the pool file")``); a ``None`` path is skipped. Default none.

    Returns
    -------
    pathlib.Path
        ``out`` with ``~`` expanded.

    Raises
    ------
    ValueError
        One line saying which rule the path breaks.
    """
    p = Path(out).expanduser()
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"cannot write {str(p)!r}: directory {str(parent)!r} does not exist")
    for other, what in protected:
        if other is not None and _same_path(p, Path(other)):
            raise ValueError(f"{str(p)!r} is {what}; write the output to another file")
    if p.exists() or p.is_symlink():
        if p.is_dir():
            raise ValueError(f"{str(p)!r} is a directory")
        why = _holds_labels(p)
        if why:
            raise ValueError(
                f"{str(p)!r} exists and {why}; it is never overwritten: record it first "
                "(bae record) or choose another name"
            )
        if not overwrite:
            raise ValueError(f"{str(p)!r} exists; pass --overwrite to replace it")
    return p


def _same_path(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _new_file_mode() -> int:
    """The mode ``open()`` gives a new file: ``0o666`` less the process's umask."""
    try:  # Linux 4.7+: read without changing it
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_new_file(out: str | os.PathLike, text: str, *, overwrite: bool = False) -> None:
    """Write ``text`` to ``out`` atomically (a temporary file beside it, then a rename); without
    ``overwrite`` the rename is a hard link that fails if ``out`` appeared meanwhile.

    Parameters
    ----------
    out : str or os.PathLike
        The file to write (``~`` is expanded); its directory must exist.
    text : str
        The contents, written as UTF-8 with no newline translation.
    overwrite : bool, optional
        Replace ``out`` if it exists (default ``False``: a :class:`ValueError` if it does).
    """
    import stat
    import tempfile

    p = Path(out).expanduser()
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        # mkstemp makes the file 0600: give it the mode a new file gets (0666 less the umask),
        # or, when it replaces a file, that file's mode
        try:
            mode = stat.S_IMODE(os.stat(p).st_mode) if overwrite else None
        except OSError:
            mode = None
        os.chmod(tmp, _new_file_mode() if mode is None else mode)
        if overwrite:
            os.replace(tmp, p)
        else:
            try:
                os.link(tmp, p)
            except FileExistsError:
                raise ValueError(f"{str(p)!r} exists; pass --overwrite to replace it") from None
            except OSError:  # no hard links here: a plain rename after one more check
                if p.exists():
                    raise ValueError(f"{str(p)!r} exists; pass --overwrite to replace it") from None
                os.replace(tmp, p)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


# ------------------------------------------------------------------------------------------------
# lazy pool files (Parquet on dask)
class LazyIds:
    """The item ids of a lazy pool file, read when asked for: ``ids[i]`` or ``ids[array]``.

    Without an id column the ids are the row numbers. With one, the id column of a row group is
    read (and a few row groups kept) when one of its items is asked for; the first
    :meth:`index_of` also checks that no id is held by two rows, as :func:`read_pool` does.
    """

    def __init__(self, path: Path, id_col: str | None, n: int) -> None:
        self.path, self.id_col, self.n = path, id_col, n
        self._groups: np.ndarray | None = None
        self._cache: dict[int, np.ndarray] = {}
        self._unique = id_col is None  # the id column checked for repeated ids (index_of)

    def __len__(self) -> int:
        return self.n

    def _row_groups(self) -> np.ndarray:
        if self._groups is None:
            import pyarrow.parquet as pq

            meta = pq.ParquetFile(self.path).metadata
            sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
            self._groups = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        return self._groups

    def _group(self, g: int) -> np.ndarray:
        if g not in self._cache:
            import pyarrow.parquet as pq

            col = pq.ParquetFile(self.path).read_row_group(g, columns=[self.id_col])
            ids = col.column(self.id_col).to_pandas().astype(str).str.strip().to_numpy(object)
            if len(self._cache) >= 8:
                self._cache.pop(next(iter(self._cache)))
            self._cache[g] = ids
        return self._cache[g]

    def __getitem__(self, idx):
        scalar = np.ndim(idx) == 0
        arr = np.atleast_1d(np.asarray(idx, dtype=np.int64))
        if self.id_col is None:
            out = arr.astype(str).astype(object)
        else:
            starts = self._row_groups()
            g = np.searchsorted(starts, arr, side="right") - 1
            out = np.empty(arr.size, dtype=object)
            for gg in np.unique(g).tolist():
                sel = g == gg
                out[sel] = self._group(gg)[arr[sel] - starts[gg]]
        return out[0] if scalar else out

    def index_of(self, ids: Sequence[str], name: str = "id") -> np.ndarray:
        """Pool indices of the given ids, from one pass over the id column.

        The first pass also checks that the column's ids are unique, as :func:`read_pool` does
        in memory (an id held by two rows would take a label to the wrong item): the ids of each
        row group are hashed (8 bytes per item, the only thing of the pool's size kept) and the
        rows of repeated hashes compared by their text. The check is remembered, so later calls
        stop once every id is found.

        Parameters
        ----------
        ids : sequence of str
            The item ids (stripped of surrounding whitespace); repeats are allowed.
        name : str, optional
            What an id is called in the error message (default ``"id"``).

        Returns
        -------
        ndarray of int64
            The pool index of each id, in the order given.

        Raises
        ------
        ValueError
            For an id not in the file (naming the first), or, on the first call, for an id
            held by two rows of the file (naming the id and both rows, as :func:`read_pool`).
        """
        ids = np.asarray([str(i).strip() for i in ids], dtype=object)
        pos = np.full(ids.size, -1, dtype=np.int64)
        if self.id_col is None:  # the ids are the row numbers, written as str(i) does
            for k, i in enumerate(ids.tolist()):
                if i.isascii() and i.isdigit() and str(int(i)) == i and int(i) < self.n:
                    pos[k] = int(i)
        else:
            want = pd.Index(pd.unique(ids))  # a repeated id is looked up once
            found = np.full(len(want), -1, dtype=np.int64)
            starts = self._row_groups()
            check = not self._unique
            hashes = []
            for g in range(starts.size - 1):
                col = self._group(g)
                hit = want.get_indexer(col)
                rows = np.flatnonzero(hit >= 0)
                found[hit[rows]] = rows + starts[g]
                if check:
                    hashes.append(pd.util.hash_array(col, categorize=False))
                elif np.all(found >= 0):
                    break
            if check:
                self._check_unique(np.concatenate(hashes))
            pos = found[want.get_indexer(ids)]
        bad = np.flatnonzero(pos < 0)
        if bad.size:
            raise ValueError(
                f"unknown item {name} {ids[bad[0]]!r} (row {bad[0] + 1}): not in the pool file"
                + (f" ({bad.size} unknown ids in all)" if bad.size > 1 else "")
            )
        return pos

    def _check_unique(self, hashes: np.ndarray) -> None:
        """Raise the :func:`read_pool` error for the first id held by two rows; ``hashes`` are
        the hashes of every row's id, in row order."""
        srt = np.sort(hashes)
        repeated = srt[1:][srt[1:] == srt[:-1]]
        if repeated.size:  # rows whose hash repeats: compare their ids' text
            cand = np.flatnonzero(np.isin(hashes, repeated))
            text = self[cand]
            dup = pd.Index(text).duplicated(keep=False)
            if dup.any():
                first = text[np.flatnonzero(dup)[0]]
                where = cand[text == first][:2] + 1
                name = Path(self.path).name
                raise ValueError(
                    f"duplicate item id {first!r} in column {self.id_col!r} of {name} "
                    f"(rows {where[0]} and {where[1]}); ids must be unique"
                )
        self._unique = True


@dataclass(frozen=True)
class LazyPoolFile(PoolFile):
    """A pool file read lazily: ``pool`` is a :class:`~bayes_activeeval.lazy.LazyPool`, ``ids`` a
    :class:`LazyIds`; ``text`` is empty (text columns are not read for lazy pools)."""

    def index_of(self, ids: Sequence[str], name: str = "id") -> np.ndarray:
        return self.ids.index_of(ids, name)


def _read_lazy_pool(p: Path, fmt: str, spec: PoolSpec) -> LazyPoolFile:
    """The lazy version of :func:`read_pool`: Parquet only, no text, cost or weight columns."""
    if fmt != "parquet":
        raise ValueError(f"--lazy reads Parquet files; {p.name} is {fmt}")
    for option, value in (
        ("--text-col", spec.text_cols),
        ("--cost-col", spec.cost_col),
        ("--weight-col", spec.weight_col),
    ):
        if value:
            raise ValueError(f"{option} is not supported with --lazy yet")
    if not p.exists():
        raise ValueError(f"pool file {p} does not exist")
    norm = spec._norm

    def one(cols):
        return cols[0] if len(cols) == 1 else list(cols)

    # --classes and --pos-label as values of the predictions' type, as read_pool does: here the
    # type of the first prediction column in the Parquet schema
    kind = ""
    if spec.task != "regression" and not norm["std"]:
        import pyarrow.parquet as pq

        col = next(iter(norm["pred"].values()))
        try:  # the column's numpy kind from the schema (Pool.from_parquet reports a bad file)
            kind = np.dtype(pq.ParquetFile(p).schema_arrow.field(col).type.to_pandas_dtype()).kind
        except Exception:
            kind = ""
    classes, pos_label = _classes_and_pos_label(spec, kind, p.name)

    pool = Pool.from_parquet(
        str(p),
        predictions=norm["pred"],
        probs={m: one(c) for m, c in norm["prob"].items()} or None,
        scores=norm["score"] or None,
        predictive_std=norm["std"] or None,
        classes=None if classes is None else classes.tolist(),
        pos_label=pos_label,
        task=spec.task,
    )
    if spec.id_col:
        import pyarrow.parquet as pq

        if spec.id_col not in pq.ParquetFile(p).schema_arrow.names:
            raise ValueError(f"column {spec.id_col!r} (--id-col) is not in {p.name}")
    ids = LazyIds(p, spec.id_col, pool.n_items)
    return LazyPoolFile(
        pool, ids, pd.DataFrame(index=pd.RangeIndex(0)), str(p), file_checksum(p), spec
    )
