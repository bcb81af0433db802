"""kernel: the deviation integrand and the proposal-from-scores step every proposal calls."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import bayes_activeeval as bae
from bayes_activeeval.kernel import (
    deviation_integrand,
    label_costs,
    mix_proposal,
    proposal_from_scores,
    proposal_scores,
)
from bayes_activeeval.proposals import Proposal, ProposalInfo


@pytest.mark.parametrize("measure", ["f1", "accuracy", "precision", "recall"])
@pytest.mark.parametrize("estimator", ["ipw", "model_assisted"])
def test_optimal_proposal_is_integrand_then_scores(rare_pool, measure, estimator):
    pool = rare_pool.pool
    costs = np.random.default_rng(0).uniform(0.5, 2.0, pool.n_items)
    prop = bae.optimal_proposal(pool, measure, estimator=estimator, costs=costs, mix=0.05)
    # the proposal's default floor is "auto" (scaled_belief_floor); the kernel takes the number
    floor = prop.info.belief_floor
    assert 0 < floor <= bae.proposals.DEFAULT_BELIEF_FLOOR
    itg = deviation_integrand(pool, measure, estimator=estimator, belief_floor=floor)
    np.testing.assert_array_equal(itg.u, prop.info.u)
    np.testing.assert_array_equal(itg.risk, prop.info.risk)
    q = proposal_from_scores(
        np.sqrt(np.maximum(itg.u, 0.0)), pool.p, costs, 0.05, uniform_p=pool.has_uniform_weights
    )
    np.testing.assert_array_equal(q, prop.q)


def test_proposal_from_scores_formula():
    rng = np.random.default_rng(1)
    s, p, c = rng.random(50), rng.dirichlet(np.ones(50)), rng.uniform(1, 4, 50)
    q = proposal_from_scores(s, p, c, 0.1)
    ref = p * s / np.sqrt(c)
    np.testing.assert_allclose(q, 0.9 * ref / ref.sum() + 0.1 * p, rtol=1e-13)
    assert q.sum() == pytest.approx(1.0)
    # no mass anywhere: passive
    np.testing.assert_allclose(proposal_from_scores(np.zeros(50), p, None, 0.0), p)
    # the scores are not modified in place
    s0 = s.copy()
    proposal_from_scores(s, p, None, 0.2, uniform_p=True)
    np.testing.assert_array_equal(s, s0)
    np.testing.assert_allclose(proposal_scores(s, p, c), ref)


def test_mix_and_costs(rare_pool):
    pool = rare_pool.pool
    assert label_costs(pool, False) is None
    with pytest.raises(ValueError, match="costs"):
        label_costs(pool, np.zeros(pool.n_items))
    s = np.ones(4)
    out = mix_proposal(s, np.full(4, 0.25), 0.5)
    np.testing.assert_allclose(out, 0.25)


def test_proposal_info_is_typed_and_readable_by_key(rare_pool):
    prop = bae.optimal_proposal(rare_pool.pool, "f1")
    info = prop.info
    assert isinstance(info, ProposalInfo)
    assert info["u"] is info.u and info.get("a") is None and "u" in info and "a" not in info
    assert set(info.keys()) >= {"u", "risk", "jacobian", "mix", "measure", "estimator"}
    with pytest.raises(KeyError):
        info["a"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.u = None
    # a mapping is still accepted and becomes the typed object
    p = rare_pool.pool.p
    assert Proposal(p.copy(), p, "custom", {"mix": 0.1}).info.mix == 0.1
    with pytest.raises(TypeError):
        Proposal(p.copy(), p, "custom", {"nonsense": 1})


def test_inverse_cdf_never_returns_a_zero_mass_tail_item():
    """Targets at or above the total (rounding at the top) go to the last item with mass, not
    to the zero-mass items after it; inside the range it is the usual inverse CDF."""
    from bayes_activeeval.kernel import inverse_cdf

    cdf = np.cumsum([0.2, 0.0, 0.5, 0.3, 0.0, 0.0])
    out = inverse_cdf(cdf, np.array([0.0, 0.1, 0.2, 0.65, 0.99, 1.0, 1.0 + 1e-15]))
    np.testing.assert_array_equal(out, [0, 0, 2, 2, 3, 3, 3])
    assert inverse_cdf(np.cumsum([0.0, 1.0]), np.array([1.0]))[0] == 1
