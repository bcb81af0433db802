import json

import numpy as np
import pytest
from scipy import special

from bayes_activeeval import benchmark
from bayes_activeeval.datasets import make_classification_pool, make_regression_pool


@pytest.fixture(scope="session")
def rare_pool():
    """20,000 items, 1% positives, a reasonable model (session-wide, read-only)."""
    return make_classification_pool(20_000, 0.01, separation=5.0, noise=0.25, threshold=0.3, rng=11)


@pytest.fixture(scope="session")
def balanced_pool():
    return make_classification_pool(20_000, 0.10, separation=3.0, noise=0.3, rng=12)


@pytest.fixture(scope="session")
def regression_pool():
    return make_regression_pool(20_000, rng=13)


@pytest.fixture(scope="session")
def json_round_trip():
    """Serialize a state to JSON text and back: arrays become plain lists, as an oracle model's
    ``set_state`` must accept."""

    def default(o):
        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.generic):
            return o.item()
        raise TypeError(type(o))

    def round_trip(state):
        return json.loads(json.dumps(state, default=default))

    return round_trip


@pytest.fixture
def rng():
    return np.random.default_rng(2024)


@pytest.fixture(scope="session")
def world():
    """A small skewed pool, a calibrated guess, random and informative rules."""
    sp = make_classification_pool(6000, 0.04, rng=3)
    s = sp.pool.view().prob[:, 1]
    y = sp.labels.astype(np.int8)
    rng = np.random.default_rng(5)
    z = special.logit(s)
    random_rules = rng.random((3, y.size)) < np.array([[0.02], [0.05], [0.1]])
    informative = (z + rng.normal(0, 1.0, (3, y.size))) > np.array([[-3.0], [-2.0], [-1.0]])
    rules = np.vstack([random_rules, informative]).astype(np.int8)
    truth = benchmark.population_measures(y, rules).values
    return sp, s, y, rules, truth
