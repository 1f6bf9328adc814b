"""The share bound (`harness.metrics.dataset_share`): Clopper-Pearson bounds by hand, and on simulated mixtures
of trained-on and unseen texts it holds the true share in at least 95% of draws and comes close to it where
the two are far apart."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from harness.metrics import dataset_inference as di
from harness.metrics.dataset_share import binomial_bounds, share_lower_bound


def test_clopper_pearson_by_hand():
    low, high = binomial_bounds(np.array([0, 3, 10]), 10, 0.025)
    assert low[0] == 0.0 and high[2] == 1.0
    assert binom.sf(2, 10, low[1]) == pytest.approx(0.025)  # P(X >= 3 | low) = level
    assert binom.cdf(3, 10, high[1]) == pytest.approx(0.025)  # P(X <= 3 | high) = level


def mixture(rng: np.random.Generator, share: float, shift: float, per_side: int, splits: int = 5):
    """Scores of `per_side` suspect texts (a `share` of them shifted by `shift`) and as many unseen ones, with
    `splits` random halves of each side as training rows (the score stands in for a fitted classifier's)."""
    members = round(share * per_side)
    scores = np.r_[rng.normal(shift, 1, members), rng.normal(0, 1, 2 * per_side - members)]
    labels = np.repeat([1, 0], per_side)
    train = di.split_mask(np.repeat(labels[None], splits, axis=0), per_side // 2, rng)
    return np.repeat(scores[None], splits, axis=0), labels, train


@pytest.mark.parametrize("share", [0.0, 0.25, 0.5, 1.0])
def test_the_bound_holds_the_true_share(share):
    rng = np.random.default_rng(int(100 * share))
    bounds = np.array([share_lower_bound(*mixture(rng, share, 1.0, 60)) for _ in range(200)])
    assert (bounds <= share + 1e-12).mean() >= 0.95 and ((bounds >= 0) & (bounds <= 1)).all()


def test_the_bound_comes_close_where_trained_texts_stand_apart():
    rng = np.random.default_rng(5)
    assert 0.8 < share_lower_bound(*mixture(rng, 1.0, 8.0, 400)) <= 1.0
    assert 0.35 < share_lower_bound(*mixture(rng, 0.5, 8.0, 400)) <= 0.5
    assert share_lower_bound(*mixture(rng, 1.0, 0.0, 400)) < 0.1  # a model that learnt nothing shows nothing


def test_dataset_inference_reports_the_bound():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(200, 3))
    labels = np.repeat([1, 0], 100)
    x[labels == 1, 0] += 6.0
    found = di.dataset_inference(x, labels, ["loss", "zlib", "min_k_20"], curve_sizes=None)
    assert found.rejected and 0.6 < found.share_lower <= 1.0
