"""The cumulative-sqrt(F) strata: the paper's histogram against the fine one."""

import numpy as np
import pytest

from bayes_activeeval.strata import fd_bins, score_strata


def _activeeval_csf(scores, n_strata):
    """``activeeval.pools._stratified.csf_bin_edges`` with ``bins_hist="fd"`` and the fallback
    of Marchant & Rubinstein's experiments, written as their loop, then ``np.digitize`` and the
    removal of empty strata as ``StratifiedPool`` does. Except where the walk runs out of bins:
    there ``activeeval`` overwrites the last cut with ``+inf`` and the package keeps it
    (``csf_boundaries``); the pools below do not run out (checked)."""
    counts, score_bins = np.histogram(scores, bins="fd")
    if counts.size <= n_strata:
        counts, score_bins = np.histogram(scores, bins=4 * n_strata)
    csf = np.cumsum(np.sqrt(counts))
    targets = np.arange(n_strata + 1) * csf[-1] / n_strata
    j, bins = 0, []
    for idx, value in enumerate(csf):
        if j == n_strata:
            break
        if value >= targets[j]:
            bins.append(score_bins[idx])
            j += 1
    assert j == n_strata  # the walk did not run out of bins
    bins[0] = -np.inf
    bins.append(np.inf)
    return np.unique(np.digitize(scores, bins), return_inverse=True)[1]


def _skewed_scores(rng, n):
    """An SVM-like margin on a record-linkage pool: a dense bulk of negatives and a sparse,
    long upper tail holding 0.1 % of the items."""
    bulk = rng.normal(-3.0, 1.0, n - n // 1000)
    tail = rng.uniform(0.0, 6.0, n // 1000)
    return np.concatenate([bulk, tail])


@pytest.mark.parametrize("n, k", [(100_000, 256), (20_000, 64), (3_000, 16)])
def test_fd_histogram_is_the_papers_partition(n, k):
    """At 100,000 items Freedman–Diaconis gives no more bins than strata (the 4 K fallback); at
    20,000 several parts fall in one bin and the walk moves them up (without it the partition
    differs); at 3,000 a small pool."""
    s = _skewed_scores(np.random.default_rng(n), n)
    mine, edges = score_strata(s, k, histogram="fd")
    np.testing.assert_array_equal(mine, _activeeval_csf(s, k))
    assert edges.size == mine.max() + 2 and np.all(np.diff(edges) > 0)


def test_fd_histogram_refines_the_sparse_tail_where_the_fine_one_does_not():
    """On 100,000 items the fine histogram's bins hold one item or none in the tail and a few
    dozen in the bulk, so ``sqrt`` hardly evens them out: the strata are within a factor 3 of
    equal size and the 100 tail items share three. The paper's histogram cuts the tail more
    than twice as finely."""
    n = 100_000
    s = _skewed_scores(np.random.default_rng(1), n)
    tail = s >= 0.0
    fine, _ = score_strata(s, 256, histogram="fine")
    fd, _ = score_strata(s, 256, histogram="fd")
    sizes = np.bincount(fine)
    assert sizes.max() / np.median(sizes) < 3  # nearly equal-size strata
    assert np.unique(fd[tail]).size > 2 * np.unique(fine[tail]).size


def test_histogram_is_checked():
    for method in ("csf", "quantile"):
        with pytest.raises(ValueError, match="histogram must be 'fine' or 'fd'"):
            score_strata(np.arange(10.0), 3, method=method, histogram="auto")


def test_n_bins_sets_either_histogram():
    s = _skewed_scores(np.random.default_rng(2), 20_000)
    ref, _ = score_strata(s, 64, histogram="fd")
    q25, q75 = np.quantile(s, [0.25, 0.75])
    nb = fd_bins(64, s.size, q75 - q25, s.max() - s.min())
    assert nb == np.histogram(s, bins="fd")[0].size  # NumPy's Freedman–Diaconis count
    assert np.array_equal(score_strata(s, 64, histogram="fd", n_bins=nb)[0], ref)
    assert not np.array_equal(score_strata(s, 64, histogram="fd", n_bins=4096)[0], ref)


def test_fd_bins_fallback_and_caps():
    """Freedman–Diaconis with no more bins than strata falls back to ``4 n_strata`` equal bins;
    a heavy tail cannot ask for more than the fine histogram's ``max(64 n_strata, 4096)``, nor
    for more bins than items."""
    assert fd_bins(16, 10_000, iqr=1.0, span=1.0) == 64  # FD alone: 11 bins for 16 strata
    assert fd_bins(16, 10**6, iqr=1e-3, span=1e3) == 4096
    assert fd_bins(100, 10**6, iqr=1e-3, span=1e3) == 6400
    assert fd_bins(16, 50, iqr=1e-3, span=1e3) == 50
    assert fd_bins(16, 10_000, iqr=0.0, span=5.0) == 64  # no spread in the middle half
    assert fd_bins(4, 10**6, iqr=1.0, span=30.0) == int(np.ceil(30.0 / (2.0 * 1e-2)))
