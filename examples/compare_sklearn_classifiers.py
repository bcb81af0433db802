"""Which of two scikit-learn classifiers is better on a pool, from a few hundred labels?

Two classifiers (logistic regression and a random forest) are trained on a small labeled set from
``sklearn.datasets.make_classification`` (bundled, nothing downloaded) and face a pool of 40,000
unlabeled items with 5% positives. The power-optimal comparison proposal (Sawade (2012),
Thm. 5.1) picks 400 items to label; the paired Wald test (Sawade (2012), Eqs. 3.21-3.24) says
which model has the higher F1, and the true difference (known here) shows it was right.

``BAE_EXAMPLE_FAST=1`` uses a smaller pool and budget.
"""

from __future__ import annotations

import os
import time

import numpy as np
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score

import bayes_activeeval as bae

FAST = bool(os.environ.get("BAE_EXAMPLE_FAST"))
N_POOL = 10_000 if FAST else 40_000
BUDGET = 200 if FAST else 400


def main() -> None:
    start = time.perf_counter()
    X, y = make_classification(
        n_samples=3_000 + N_POOL,
        n_features=20,
        n_informative=6,
        weights=[0.95],
        flip_y=0.02,
        class_sep=0.8,
        random_state=0,
    )
    X_train, y_train, X_pool, y_pool = X[:3_000], y[:3_000], X[3_000:], y[3_000:]
    models = {
        "logreg": LogisticRegression(max_iter=1000).fit(X_train, y_train),
        "forest": RandomForestClassifier(n_estimators=100, random_state=0, n_jobs=1).fit(
            X_train, y_train
        ),
    }
    pool = bae.Pool(
        predictions={m: clf.predict(X_pool) for m, clf in models.items()},
        probs={m: clf.predict_proba(X_pool) for m, clf in models.items()},
    )
    proposal = bae.comparison_proposal(pool, "f1", models=("logreg", "forest"))
    draws = proposal.draw(BUDGET, rng=0, unique=True)
    labels = y_pool[draws.indices]  # in real use: ask an expert for these items
    res = bae.compare(pool, "f1", draws, labels, models=("logreg", "forest"))

    true = {m: f1_score(y_pool, clf.predict(X_pool)) for m, clf in models.items()}
    print(f"pool: {pool.n_items:,} items, {y_pool.mean():.1%} positives; {BUDGET} labels")
    print(res.to_frame().round(4))
    lo, hi = res.confidence_interval(0.95)
    print(
        f"\nF1[logreg] - F1[forest] = {res.estimate:+.4f}, 95% CI [{lo:+.4f}, {hi:+.4f}], "
        f"p = {res.pvalue:.3g}; better: {res.better}"
    )
    print(
        f"true F1 (all {pool.n_items:,} labels): logreg {true['logreg']:.4f}, "
        f"forest {true['forest']:.4f}, difference {true['logreg'] - true['forest']:+.4f}"
    )
    print(f"\n({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
