"""Serializing an evaluator's state: measures as JSON specs, arrays beside JSON."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..measures import Measure
from ..measures import difference as _difference
from ..measures import get as get_measure
from ..measures import stack as _stack

STATE_VERSION = 1


def measure_spec(measure: str | Measure) -> Any:
    """A JSON description of a measure that :func:`measure_from_spec` rebuilds, or None."""
    if isinstance(measure, str):
        return measure
    m = measure
    if m.models is None:
        try:
            if get_measure(m.name).name == m.name and type(get_measure(m.name)) is type(m):
                return m.name
        except ValueError:
            return None
        return None
    for kind in ("difference", "stack"):
        base = m.name.split("[", 1)[0]
        try:
            rebuilt = measure_from_spec({"kind": kind, "base": base, "models": list(m.models)})
        except (ValueError, TypeError):
            continue
        if rebuilt.name == m.name and rebuilt.outputs == m.outputs:
            return {"kind": kind, "base": base, "models": list(m.models)}
    return None


def measure_from_spec(spec: Any) -> str | Measure:
    if isinstance(spec, str):
        return spec
    if spec["kind"] == "difference":
        a, b = spec["models"]
        return _difference(spec["base"], a, b)
    return _stack(spec["base"], spec["models"])


def jsonable(obj: Any, arrays: dict[str, np.ndarray] | None, prefix: str = "a") -> Any:
    """Make a state JSON-serializable: arrays go to ``arrays`` (npz) or become tagged lists."""
    if isinstance(obj, np.ndarray):
        if arrays is None:
            return {"__ndarray__": obj.tolist(), "dtype": str(obj.dtype), "shape": list(obj.shape)}
        key = f"{prefix}{len(arrays)}"
        arrays[key] = obj
        return {"__npz__": key}
    if isinstance(obj, dict):
        return {str(k): jsonable(v, arrays, prefix) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v, arrays, prefix) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def unjsonable(obj: Any, arrays: Any = None) -> Any:
    if isinstance(obj, dict):
        if "__ndarray__" in obj:
            return np.asarray(obj["__ndarray__"], dtype=obj["dtype"]).reshape(obj["shape"])
        if "__npz__" in obj:
            return np.asarray(arrays[obj["__npz__"]])
        return {k: unjsonable(v, arrays) for k, v in obj.items()}
    if isinstance(obj, list):
        return [unjsonable(v, arrays) for v in obj]
    return obj
