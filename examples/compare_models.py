"""Compare two models with few labels, then rank five, then plan a study.

Run: ``python examples/compare_models.py`` (a few seconds).
"""

from __future__ import annotations

import numpy as np
from scipy import special

import bayes_activeeval as bae
from bayes_activeeval import planning


def make_pool(m, noises, seed):
    """Binary pool; model i sees a latent feature through noise σ_i (calibrated probabilities)."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(m)
    y = (rng.random(m) < special.expit(-1.3 + 2.5 * u)).astype(int)
    preds, probs = {}, {}
    for k, nz in enumerate(noises):
        obs = u + nz * rng.standard_normal(m)
        mean, var = obs / (1 + nz**2), nz**2 / (1 + nz**2)
        pr = special.expit((-1.3 + 2.5 * mean) / np.sqrt(1 + np.pi * 6.25 * var / 8))
        probs[f"m{k}"], preds[f"m{k}"] = pr, (pr > 0.5).astype(int)
    return bae.Pool(predictions=preds, probs=probs, classes=[0, 1]), y


def main():
    pool, y = make_pool(20_000, (0.4, 0.6), seed=1)
    errors = {m: float(np.mean(pool.view(m).pred != y)) for m in pool.models}
    print("pool error rates (hidden):", {m: round(e, 4) for m, e in errors.items()})

    # two models, 300 draws: power-optimal versus passive sampling
    for kind in ("optimal", "passive"):
        prop = bae.comparison_proposal(pool, "error_rate", ("m0", "m1"), kind=kind)
        draws = prop.draw(300, rng=2)
        res = bae.compare(pool, "error_rate", draws, y[draws.indices], ("m0", "m1"))
        lo, hi = res.confidence_interval(0.95)
        print(
            f"{kind:8s} Δ̂ = {res.estimate:+.4f}, 95% CI ({lo:+.4f}, {hi:+.4f}), p = {res.pvalue:.3g}"
        )

    # five models: simultaneous comparisons and the best model
    pool5, y5 = make_pool(20_000, (0.3, 0.4, 0.45, 0.5, 0.6), seed=3)
    draws = bae.comparison_proposal(pool5, "error_rate").draw(800, rng=4)
    mc = bae.multiple_comparison(pool5, "error_rate", draws, y5[draws.indices], rng=0)
    print(mc)
    print(mc.best(rng=0))

    # planning: labels for power 0.8 at the difference we care about
    for design in ("optimal", "passive"):
        plan = planning.labels_for_power(pool, "error_rate", -0.02, ("m0", "m1"), design=design)
        print(f"power 0.8 at Δ = -0.02 with {design}: {plan.n_draws} draws")


if __name__ == "__main__":
    main()
