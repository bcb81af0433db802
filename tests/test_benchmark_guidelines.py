"""benchmark.guidelines: the paper's guidelines (Valizadegan et al., Eqs. 3.19-3.29) and the square-root rules."""

from __future__ import annotations

import numpy as np
import pytest

from bayes_activeeval import benchmark as bm

# ------------------------------------------------------------------------------------------------
# guideline functions against hand-computed numbers
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pi", "r", "a322", "a325"),
    [
        (0.01, 0.01, 0.0102, 0.0102),
        (0.01, 0.3, 0.216, 0.00024),
        (0.04, 0.01, 0.0112, 0.178),
        (0.04, 0.04, 0.0433, 0.0433),
        (0.04, 0.1, 0.101, 0.0163),
        (0.04, 0.5, 0.279, 0.00181),
        (0.0955, 0.01, 0.0134, 1.09),
        (0.25, 0.1, 0.203, 1.00),
        (0.5, 0.5, 1.00, 1.00),
    ],
)
def test_paper_alpha_table(pi, r, a322, a325):
    """alpha from Eq. 3.22 / Eq. 3.25 against a hand-computed table (3 significant digits)."""
    got322 = bm.paper_alpha(pi, r, pair="precision-specificity")
    got325 = bm.paper_alpha(pi, r, pair="sensitivity-specificity")
    assert got322 == pytest.approx(a322, rel=0.006, abs=1e-5)
    assert got325 == pytest.approx(a325, rel=0.006, abs=1e-5)


@pytest.mark.parametrize(("pi", "alpha"), [(0.01, 0.0102), (0.04, 0.0433), (0.0955, 0.115)])
def test_odds_squared_rule(pi, alpha):
    """Eq. 3.29: odds(p) = odds(pi)^2; hand-computed alpha values."""
    p = bm.equalizing_rate(pi)
    assert p / (1 - p) == pytest.approx((pi / (1 - pi)) ** 2, rel=1e-12)
    assert bm.paper_alpha(pi) == pytest.approx(alpha, rel=0.006)
    # r = pi in Eq. 3.22 and 3.25 is not Eq. 3.29 in general, but Eq. 3.25 with r = pi is
    assert bm.equalizing_rate(pi, pi, pair="sensitivity-specificity") == pytest.approx(p)


def test_equalized_bounds_are_equal():
    """At p from Eq. 3.22 (3.25) the precision (sensitivity) and specificity bounds coincide."""
    N, n, pi, r = 500_000, 2000, 0.04, 0.07
    p = bm.equalizing_rate(pi, r, pair="precision-specificity")
    assert bm.error_bound("precision", pi, r, p, N, n) == pytest.approx(
        bm.error_bound("specificity", pi, r, p, N, n), rel=1e-12
    )
    p = bm.equalizing_rate(pi, r, pair="sensitivity-specificity")
    assert bm.error_bound("sensitivity", pi, r, p, N, n) == pytest.approx(
        bm.error_bound("specificity", pi, r, p, N, n), rel=1e-12
    )
    # Eqs. 3.26 = 3.27: with r = pi the precision and sensitivity bounds are the same
    assert bm.error_bound("precision", pi, pi, 0.01, N, n) == pytest.approx(
        bm.error_bound("sensitivity", pi, pi, 0.01, N, n), rel=1e-12
    )
    # hand value of Eq. 3.19: N=10^4, n=10^3, pi=r=0.1, p=0.05, delta=0.05
    hand = 2 * np.sqrt(9000 * 0.05**2 * 0.95 * np.log(40) / (1e8 * 0.1 * 0.1))
    assert bm.error_bound("precision", 0.1, 0.1, 0.05, 10_000, 1000) == pytest.approx(hand)


def test_positives_needed_and_saturation():
    """Eq. 3.23 and the saturation budget (Eq. 3.23 at |L_O^+| = |L|; covtype: ~22,287)."""
    assert bm.positives_needed(0.3, 1000, 100, 0.25) == pytest.approx(75.0)
    assert bm.positives_needed(0.3, 1000, 100, 0.4) == 0.0
    N, Np = 581_012, 23_257
    pi = Np / N
    p = bm.equalizing_rate(pi)
    assert bm.positives_needed(pi, N, 2000, p) == 2000  # saturated at the paper's budget
    n_sat = bm.saturation_budget(pi, N, p)
    assert n_sat == pytest.approx(22_287, rel=0.003)
    assert bm.positives_needed(pi, N, int(n_sat) - 1, p) == int(n_sat) - 1
    assert bm.positives_needed(pi, N, int(n_sat) + 50, p) < int(n_sat) + 50


@pytest.mark.parametrize(
    ("pi", "se", "sp", "f_pr", "f_sesp", "f_all", "f_eq", "ratio"),
    [
        (0.04, 0.8, 0.99, 0.048, 0.80, 0.19, 0.94, 0.637),
        (0.04, 0.6, 0.9, 0.21, 0.62, 0.47, 0.73, 0.170),
        (0.10, 0.8, 0.99, 0.048, 0.80, 0.31, 0.94, 0.678),
        (0.30, 0.8, 0.99, 0.048, 0.80, 0.58, 0.94, 0.730),
        (0.01, 0.8, 0.99, 0.048, 0.80, 0.15, 0.94, 0.351),
    ],
)
def test_minority_share_table(pi, se, sp, f_pr, f_sesp, f_all, f_eq, ratio):
    """Square-root shares (precision only, Se + Sp, all three, minimax) and the variance ratio,
    against a hand-computed table (docs/benchmark.md, Sec. 2)."""
    kw = {"sensitivity": se, "specificity": sp}
    assert bm.minority_share(pi, "precision", **kw) == pytest.approx(f_pr, abs=0.006)
    assert bm.minority_share(pi, ("sensitivity", "specificity"), **kw) == pytest.approx(
        f_sesp, abs=0.006
    )
    assert bm.minority_share(pi, **kw) == pytest.approx(f_all, abs=0.006)
    eq = bm.minority_share(pi, ("recall", "specificity"), criterion="minimax", **kw)
    assert eq == pytest.approx(f_eq, abs=0.006)
    # D7 closed form: n+/n- = Se(1-Se) / (Sp(1-Sp))
    ratio_d7 = se * (1 - se) / (sp * (1 - sp))
    assert eq == pytest.approx(ratio_d7 / (1 + ratio_d7), abs=1e-6)
    # D5 closed form
    d5 = np.sqrt((1 - se) * (1 - sp) / (se * sp))
    assert bm.minority_share(pi, "precision", **kw) == pytest.approx(d5 / (1 + d5), rel=1e-9)
    assert bm.variance_ratio(pi, **kw) == pytest.approx(ratio, abs=0.0015)


@pytest.mark.parametrize("pi", [0.01, 0.04, 0.0955, 0.3])
def test_uninformative_rule_half_and_gain(pi):
    """D9: every criterion gives 1/2 and the variance ratio 4 pi (1 - pi)."""
    for t in ("precision", ("sensitivity", "specificity"), ("sensitivity", "specificity", "pr")):
        assert bm.minority_share(pi, t) == pytest.approx(0.5, abs=1e-9)
        assert bm.variance_ratio(pi, t) == pytest.approx(4 * pi * (1 - pi), rel=1e-9)
    # a suboptimal share is worse
    assert bm.variance_ratio(pi, share=0.9) > 4 * pi * (1 - pi)


@pytest.mark.parametrize(
    ("c", "g", "ratio"),
    [(1.0, 1.0, 0.04), (0.9, 1.0, 0.24), (0.95, 0.5, 0.23), (0.95, 0.2, 0.39), (0.7, 0.5, 0.53)],
)
def test_imperfect_guess_dg1(c, g, ratio):
    """D-G1: sensitivity variance ratio with a guess of recall c and precision g (pi = 0.04)."""
    pi = 0.04
    got = bm.variance_ratio(pi, "sensitivity", guess_recall=c, guess_precision=g)
    closed = (c * np.sqrt(pi / g) + np.sqrt((1 - c) * (1 - c * pi / g))) ** 2
    assert got == pytest.approx(closed, rel=1e-9)
    assert got == pytest.approx(ratio, abs=0.006)
    share = bm.minority_share(pi, "sensitivity", guess_recall=c, guess_precision=g)
    a = c * np.sqrt(pi / g)
    assert share == pytest.approx(a / (a + np.sqrt((1 - c) * (1 - c * pi / g))), rel=1e-9)


def test_d10_perfect_guess_share():
    """D10 with a perfect 0/1 guess, pi = 0.04, rbar = 0.017: every label is known, proportional.

    (Was: about half the labels positive, from the influence of the plain ratio estimator, which
    keeps the rule's noise. evaluate() post-stratifies on the rule output, so the influence is
    the label variance s(1 - s) = 0 for every item of a perfect guess: see
    test_benchmark_review.py.)
    """
    N = 25_000
    guess = np.zeros(N)
    guess[:1000] = 1
    d = bm.design(
        guess,
        budget=1000,
        prevalence=0.04,
        guess_precision=1.0,
        rule_rate=0.017,
        defensive=0.0,
    )
    share = d.allocation[1] / d.budget
    assert share == pytest.approx(1000 / N, abs=1e-9)
