"""This package behind the one-function adapter of ``shared/peers/peers.py`` (issue 12, part 2).

``run_method(pool, measure, budgets, seed) -> list[float]`` runs one repetition of this package's
DEFAULT configuration as a new user would call it::

    pool = bae.Pool(predictions=preds, probs=probs, scores=scores)
    ev = bae.ActiveEvaluator(pool, measure, rng=seed)        # no oracle argument
    loop: idx = ev.query(50); ev.update(idx, labels[idx])     # 50-label stages, as the peers

and returns the estimate right after the B-th distinct label for every budget B (the stage before
a budget is shortened so that it ends exactly there; all budgets used here are multiples of 50).
Labels are read only for the items a query returned (``labels[idx]``); the deterministic oracle's
repeated draws reuse the evaluator's cache.

Other configurations, for the same table (``--adapter NAME=benchmarks/peer_adapter.py:FUNC``):

=====================  =====================================================================
``run_method``         the default, or the configuration named by ``$BAE_ADAPTER_CONFIG``
``run_model``          ``oracle="model"`` (the plug-in of the model's probabilities)
``run_dt``             ``oracle="dirichlet-tree"`` (its defaults)
``run_calibration``    ``oracle="calibration"``
``run_static``         ``optimal_proposal(pool, measure)`` (defaults), i.i.d. draws until B
                       distinct items, ``bae.estimate``
``run_documented``     the default through ``ev.run(labeler, budget=B)`` (its own growing
                       stages; configuration ``"default-run"``)
``run_sawade``         Sawade's closed-form F1 proposal (Sawade (2012), Cor. 4.4), from
                       ``probs``, no floor, no mix; the same draws and estimator as static
=====================  =====================================================================

:func:`run_config` returns the :class:`~bayes_activeeval.estimators.Estimate` objects (for the
intervals ``benchmarks/real_pools.py`` records).
"""

from __future__ import annotations

import os
import warnings

import numpy as np

import bayes_activeeval as bae

STAGE = 50
CONFIGS = ("default", "model", "dirichlet-tree", "calibration", "static", "sawade")


def make_pool(pool: dict) -> bae.Pool:
    """The package's Pool from the adapter's dict (never touches ``labels``)."""
    preds = np.asarray(pool["preds"]).astype(np.int64)
    probs = np.asarray(pool["probs"], dtype=float)
    kw = {}
    if "scores" in pool:
        kw["scores"] = np.asarray(pool["scores"], dtype=float)
    return bae.Pool(predictions=preds, probs=probs, classes=[0, 1], **kw)


def _check(measure: str, budgets) -> list[int]:
    if measure not in ("f1", "accuracy"):
        raise NotImplementedError(f"measure {measure!r} is not run by this adapter")
    budgets = [int(b) for b in budgets]
    if any(b <= 0 for b in budgets):
        raise ValueError(f"budgets must be positive, got {budgets}")
    return budgets


def _labeler(pool: dict):
    labels = pool["labels"]

    def labeler(idx: np.ndarray) -> np.ndarray:
        return np.asarray([int(labels[int(i)]) for i in idx], dtype=np.int64)

    return labeler


def _option(text: str):
    for kind in (int, float):  # first: "1e+5" is a number
        try:
            return kind(text)
        except ValueError:
            pass
    if "+" in text:  # "calibration+dirichlet-tree": a tuple (e.g. the ensemble's members)
        return tuple(_option(t) for t in text.split("+"))
    return {"true": True, "false": False, "none": None}.get(text.lower(), text)


def parse_oracle(spec: str) -> tuple[str, dict]:
    """``"name"`` or ``"name:key=value;key=value"`` -> (oracle name, oracle_options).

    ``member.key=value`` sets an option of one member of the ``"auto"`` ensemble
    (``member_options={member: {key: value}}``), e.g.
    ``"auto:dirichlet-tree.tree_smoothing=1;dirichlet-tree.within_leaf=flat"``; ``a+b`` is a
    tuple (``"auto:members=calibration+dirichlet-tree"``)."""
    name, _, opts = spec.partition(":")
    options: dict = {}
    for k, v in (o.split("=", 1) for o in opts.split(";") if o):
        member, dot, key = k.rpartition(".")
        if dot:
            options.setdefault("member_options", {}).setdefault(member, {})[key] = _option(v)
        else:
            options[k] = _option(v)
    return name, options


def run_adaptive(
    pool: dict,
    measure: str,
    budgets,
    seed: int,
    oracle: str | None = None,
    documented: bool = False,
    **ev_options,
):
    """One repetition of ``ActiveEvaluator``; returns one ``Estimate`` per budget.

    ``oracle``: None (the default, no argument) or ``"name[:key=value;...]"`` (any registered
    oracle with its ``oracle_options``). ``documented=True``: the documented loop
    ``ev.run(labeler, budget=B)`` for each budget in turn, with the evaluator's own stage schedule
    (50 labels, growing to 10 % of the labels so far; Getting started, docs/adaptive.md), instead
    of the peers' 50-label stages."""
    budgets = _check(measure, budgets)
    P = make_pool(pool)
    labeler = _labeler(pool)
    kw = {}
    if oracle is not None:
        name, options = parse_oracle(oracle)
        kw = {"oracle": name, **({"oracle_options": options} if options else {})}
    ev = bae.ActiveEvaluator(P, measure, rng=int(seed), **kw, **ev_options)
    out: dict[int, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for B in sorted(set(budgets)):
            if documented:
                out[B] = ev.run(labeler, budget=B, progress=False)
                continue
            while ev.n_labels < B:
                n = int(min(STAGE, B - ev.n_labels, ev.available()))
                if n <= 0:
                    break
                idx = ev.query(n)
                ev.update(idx, labeler(idx))
            out[B] = ev.estimate()
    return [out[b] for b in budgets]


def sawade_f1_proposal(probs, preds) -> bae.Proposal:
    """Sawade's closed-form optimal proposal for F1 (Sawade (2012), Cor. 4.4 with α = 1/2;
    Sawade et al. (2010)) on a uniform pool, under the model's own probabilities ``π``, with no
    floor and no mix:

    ``q*(x) ∝ sqrt(π(x)(1 − F)² + (1 − π(x)) F²/4)`` for predicted positives and
    ``q*(x) ∝ sqrt(π(x)) F/2`` for predicted negatives, ``F = Σ π f / (½ Σ π + ½ Σ f)`` the
    intrinsic F1 (Sawade (2012), Eq. 4.21).
    """
    pi = np.asarray(probs, dtype=float)
    f = (np.asarray(preds) == 1).astype(float)
    F = float(pi @ f) / (0.5 * float(pi.sum()) + 0.5 * float(f.sum()))
    u = np.where(f == 1, np.sqrt(pi * (1 - F) ** 2 + (1 - pi) * F**2 / 4), np.sqrt(pi) * F / 2)
    p = np.full(pi.size, 1.0 / pi.size)
    return bae.Proposal(q=p * u, p=p, kind="sawade-closed-form", info={"risk": F})


def run_static(pool: dict, measure: str, budgets, seed: int, proposal: str = "optimal", **options):
    """One repetition of a static design: draws i.i.d. from ``q`` until the largest budget's
    distinct items, estimates on the prefix that ends at the B-th distinct item. ``options`` go
    to ``optimal_proposal`` (``mix=0.05``: the 5 % defensive mixture, the default before the
    defensive floor)."""
    budgets = _check(measure, budgets)
    P = make_pool(pool)
    if options and proposal != "optimal":
        raise ValueError(f"options {options} are for the optimal proposal, not {proposal!r}")
    if proposal == "optimal":
        prop = bae.optimal_proposal(P, measure, **options)
    elif proposal == "sawade":
        if measure != "f1":
            raise NotImplementedError("the closed form here is Sawade's F1 proposal")
        prop = sawade_f1_proposal(pool["probs"], pool["preds"])
    else:
        raise ValueError(f"unknown static proposal {proposal!r}")
    rng = np.random.default_rng(int(seed))
    bmax = max(budgets)
    draws = prop.draw(bmax, rng, unique=True)
    idx = draws.indices
    _, first = np.unique(idx, return_index=True)
    first = np.sort(first)  # position of each distinct item's first draw
    labeler = _labeler(pool)
    items = idx[first]
    ylab = dict(zip(items.tolist(), labeler(items).tolist(), strict=True))
    y = np.asarray([ylab[int(i)] for i in idx], dtype=np.int64)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for B in budgets:
            cut = int(first[B - 1]) + 1
            out.append(bae.estimate(P, measure, draws[:cut], y[:cut]))
    return out


def run_config(pool: dict, measure: str, budgets, seed: int, config: str = "default"):
    """One repetition of a named configuration; one ``Estimate`` per budget.

    ``"<config>@key=value;..."`` passes evaluator keyword arguments to an adaptive configuration
    (e.g. ``"calibration@estimator=model_assisted"``), and ``optimal_proposal`` options to
    ``"static"`` (``"static@mix=0.05"``)."""
    config, _, ev_opts = config.partition("@")
    options = {k: _option(v) for k, v in (o.split("=", 1) for o in ev_opts.split(";") if o)}
    if config == "default":
        return run_adaptive(pool, measure, budgets, seed, None, **options)
    if config == "default-run":
        return run_adaptive(pool, measure, budgets, seed, None, documented=True, **options)
    if config == "static":  # "static@mix=0.05": optimal_proposal options
        return run_static(pool, measure, budgets, seed, "optimal", **options)
    if config == "sawade":
        return run_static(pool, measure, budgets, seed, "sawade")
    # any registered oracle, with options: "dirichlet-tree:tree_smoothing=1;within_leaf=flat";
    # "<oracle>-run": the same through ev.run (its own growing stages)
    if config.endswith("-run"):
        return run_adaptive(pool, measure, budgets, seed, config[:-4], documented=True, **options)
    return run_adaptive(pool, measure, budgets, seed, config, **options)


def check_config(config: str) -> None:
    """Raise ValueError for a configuration name :func:`run_config` cannot run."""
    config = config.partition("@")[0]
    if config in ("default", "default-run", "static", "sawade"):
        return
    from bayes_activeeval.oracles.base import _REGISTRY

    name, _ = parse_oracle(config.removesuffix("-run"))
    if name not in _REGISTRY:
        raise ValueError(
            f"unknown configuration {config!r}; known: default, default-run, static, sawade or "
            f"an oracle name[:key=value;...][-run] with oracle in {sorted(_REGISTRY)}"
        )


def run_documented(pool: dict, measure: str, budgets, seed: int) -> list[float]:
    """``peers.py`` adapter: the default through ``ev.run`` (``run_adaptive(documented=True)``)."""
    return _values(run_adaptive(pool, measure, budgets, seed, documented=True))


def _values(ests) -> list[float]:
    return [float(e.value) for e in ests]


def run_method(pool, measure, budgets, seed):
    """The adapter of peers.py: the default configuration (or ``$BAE_ADAPTER_CONFIG``)."""
    config = os.environ.get("BAE_ADAPTER_CONFIG", "default")
    return _values(run_config(pool, measure, budgets, seed, config))


def run_model(pool, measure, budgets, seed):
    return _values(run_config(pool, measure, budgets, seed, "model"))


def run_dt(pool, measure, budgets, seed):
    return _values(run_config(pool, measure, budgets, seed, "dirichlet-tree"))


def run_calibration(pool, measure, budgets, seed):
    return _values(run_config(pool, measure, budgets, seed, "calibration"))


def run_static_default(pool, measure, budgets, seed):
    return _values(run_config(pool, measure, budgets, seed, "static"))


def run_sawade(pool, measure, budgets, seed):
    return _values(run_config(pool, measure, budgets, seed, "sawade"))
