"""Serializing an evaluator's state: measures as JSON specs, arrays beside JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..measures import Measure
from ..measures import difference as _difference
from ..measures import get as get_measure
from ..measures import stack as _stack
from ..proposals import Proposal, ProposalInfo

if TYPE_CHECKING:
    from ..oracles.base import OracleModel
    from .evaluator import ActiveEvaluator

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


def _spec_name(spec: Any) -> str | None:
    """The canonical name of the measure a :func:`measure_spec` describes (None: custom)."""
    if spec is None:
        return None
    try:
        m = measure_from_spec(spec)
        return get_measure(m).name if isinstance(m, str) else m.name
    except (ValueError, TypeError, KeyError):
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


class EvaluatorState:
    """Save and resume for :class:`~bayes_activeeval.ActiveEvaluator`: its state as a dict of
    arrays (:meth:`get_state`), a file (``.npz`` or ``.json``), and back, bit-identically."""

    def get_state(self) -> dict[str, Any]:
        """Everything needed to resume exactly (NumPy arrays inside; see :meth:`save`)."""
        spec = measure_spec(self._measure_arg)
        idx, w, _, q = self._arrays()
        y = np.concatenate(self._d_y) if self._d_y else np.empty(0, dtype=np.int64)
        st = np.concatenate(self._d_stage) if self._d_stage else np.empty(0, dtype=np.int64)
        known = np.flatnonzero(self._label >= 0)
        return {
            "version": STATE_VERSION,
            "n_items": self.pool.n_items,
            "measure": spec,
            "model": self.model,
            "oracle": self._oracle_name,
            "oracle_options": self.oracle_options,
            "deterministic": self.deterministic,
            "epsilon": self.epsilon0,
            "mix": self.mix,
            "batch_size": self.batch_size,
            "stage_growth": self.stage_growth,
            "estimator": self.estimator,
            "belief_floor": self.belief_floor,
            "relative_floor": self.relative_floor,
            "rng": self.rng.bit_generator.state,
            "stage": self._stage,
            "n_labels": self._n_labels,
            "cost": self._cost,
            "epsilon_t": self._epsilon_t,
            "draws": {"idx": idx, "w": w, "q": q, "y": y, "stage": st, **self._ma_arrays()},
            "pending": {k: v.copy() for k, v in self._pending.items()},
            "known": {"idx": known, "y": self._label[known]},
            "requested": np.flatnonzero(self._requested),
            "proposal_q": self._proposal.q.copy(),
            "proposal_info": {
                "risk": np.asarray(self._proposal.info.risk),
                "epsilon_abs": float(self._proposal.info.epsilon_abs),
            },
            "oracle_state": self.oracle.get_state(),
            "history": list(self._history),
        }

    @classmethod
    def from_state(
        cls,
        pool,
        state: dict[str, Any],
        *,
        measure: str | Measure | None = None,
        oracle: OracleModel | None = None,
    ) -> ActiveEvaluator:
        """Rebuild an evaluator from :meth:`get_state`; its next draws and estimates are
        bit-identical to those of the evaluator that was saved.

        Parameters
        ----------
        pool : Pool
            The same pool.
        state : dict
        measure : str or Measure, optional
            Needed only for custom measures (built-ins and ``difference``/``stack`` are stored).
        oracle : OracleModel, optional
            A fresh instance, needed only if the evaluator was built with an instance.
        """
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ValueError("state is not an ActiveEvaluator state (wrong or missing version)")
        if state["n_items"] != pool.n_items:
            raise ValueError(
                f"state is for a pool of {state['n_items']} items; this pool has {pool.n_items}"
            )
        m = measure_from_spec(state["measure"]) if measure is None else measure
        if m is None:
            raise ValueError("the state has a custom measure: pass it as measure=")
        if measure is not None and state["measure"] is not None:
            saved, given = _spec_name(state["measure"]), _spec_name(measure_spec(measure))
            if given is not None and given != saved:
                raise ValueError(
                    f"measure={given!r} but the state was saved for {saved!r}: its draws, "
                    "control variates and history are of that measure"
                )
        if state["oracle"] is None and oracle is None:
            raise ValueError(
                "the evaluator used an OracleModel instance: pass a fresh one as oracle="
            )
        rs = state["rng"]
        bitgen = getattr(np.random, rs["bit_generator"])()
        bitgen.state = rs
        rng = np.random.Generator(bitgen)
        return cls(
            pool,
            m,
            oracle=oracle if oracle is not None else state["oracle"],
            model=state["model"],
            deterministic=state["deterministic"],
            epsilon=state["epsilon"],
            mix=state["mix"],
            batch_size=state["batch_size"],
            rng=rng,
            oracle_options=None if oracle is not None else (state["oracle_options"] or None),
            belief_floor=state["belief_floor"],
            stage_growth=state.get("stage_growth", 0.0),
            estimator=state.get("estimator", "ipw"),
            relative_floor=state.get("relative_floor", 0.0),
            _restore=state,
        )

    def _restore(self, state: dict[str, Any]) -> None:
        self.oracle.set_state(state["oracle_state"])
        self._stage = int(state["stage"])
        self._n_labels = int(state["n_labels"])
        self._cost = float(state["cost"])
        self._epsilon_t = float(state["epsilon_t"])
        D = state["draws"]
        st = np.asarray(D["stage"], dtype=np.int64)
        for t in np.unique(st).tolist():
            sel = st == t
            idx = np.asarray(D["idx"], dtype=np.int64)[sel]
            y = np.asarray(D["y"], dtype=np.int64)[sel]
            self._d_idx.append(idx)
            self._d_w.append(np.asarray(D["w"], dtype=float)[sel])
            self._d_q.append(np.asarray(D["q"], dtype=float)[sel])
            self._d_y.append(y)
            self._d_stage.append(st[sel])
            self._d_loss.append(self.measure.loss(y, self._views(idx)))
            if self.estimator == "model_assisted":
                self._d_m.append(np.asarray(D["m"], dtype=float)[sel])
                self._d_M.append(np.asarray(D["M"], dtype=float)[sel])
                self._d_V.append(np.asarray(D["V"], dtype=float)[sel])
        self._pending = {  # copies: the state given may be restored again
            "idx": np.array(state["pending"]["idx"], dtype=np.int64),
            "w": np.array(state["pending"]["w"], dtype=float),
            "q": np.array(state["pending"]["q"], dtype=float),
            "y": np.array(state["pending"]["y"], dtype=np.int64),
            "new": np.array(state["pending"]["new"], dtype=bool),
        }
        K = state["known"]
        self._label[np.asarray(K["idx"], dtype=np.int64)] = np.asarray(K["y"], dtype=np.int64)
        self._requested[np.asarray(state["requested"], dtype=np.int64)] = True
        if self.estimator == "model_assisted":  # rebuild m_t, M_t, V_t of the open stage
            # with the items known when the stage was drawn: those first labeled in it (pending
            # draws of items that had no label when queried) were not known to its proposal, and
            # counting them changed the stage's V_t and m_t (a restored mid-stage evaluator
            # finished the stage at F1 0.137463 against 0.137137)
            P = self._pending
            at_start = self.known.copy()
            at_start[P["idx"][P["new"]]] = False
            self._refresh(known=at_start)
            self._epsilon_t = float(state["epsilon_t"])
        q = np.asarray(state["proposal_q"], dtype=float)
        info = state.get("proposal_info", {})
        prop = Proposal(
            q,
            self.pool.p,
            "adaptive",
            ProposalInfo(
                risk=np.asarray(info.get("risk", [])),
                epsilon=self._epsilon_t,
                epsilon_abs=info.get("epsilon_abs", 0.0),
                mix=self.mix,
                deterministic=self.deterministic,
            ),
        )
        prop.q = q  # exactly the saved probabilities (no renormalization)
        if self.estimator == "model_assisted":  # the control variate of the open stage
            prop.info = self._proposal.info  # from _refresh with the restored oracle and labels
        self._proposal = prop
        self._history = [dict(h) for h in state["history"]]

    def save(self, path: str | Path) -> Path:
        """Save :meth:`get_state` to ``path``: ``.npz`` (arrays stored natively; recommended for
        large pools) or ``.json``."""
        path = Path(path)
        state = self.get_state()
        if path.suffix == ".json":
            path.write_text(json.dumps(jsonable(state, None)))
        elif path.suffix == ".npz":
            arrays: dict[str, np.ndarray] = {}
            meta = jsonable(state, arrays)
            np.savez_compressed(path, __state__=np.array(json.dumps(meta)), **arrays)
        else:
            raise ValueError(f"path must end in .json or .npz, got {str(path)!r}")
        return path

    @classmethod
    def load(cls, path: str | Path, pool, **kwargs: Any) -> ActiveEvaluator:
        """Resume from a file written by :meth:`save` (see :meth:`from_state`)."""
        path = Path(path)
        if path.suffix == ".json":
            state = unjsonable(json.loads(path.read_text()))
        elif path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["__state__"]))
                state = unjsonable(meta, {k: z[k] for k in z.files if k != "__state__"})
        else:
            raise ValueError(f"path must end in .json or .npz, got {str(path)!r}")
        return cls.from_state(pool, state, **kwargs)
