"""Each metric in harness.metrics.memorization against a hand-computed case."""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from harness.metrics import memorization as metrics

TEN = np.array([-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0, -9.0, -10.0])


# ---------------------------------------------------------------- membership scores

def test_loss_score_is_mean_logprob():
    assert metrics.loss_score(np.array([-1.0, -2.0, -3.5])) == pytest.approx(-6.5 / 3)
    assert metrics.loss_score(np.array([-0.25])) == pytest.approx(-0.25)


@pytest.mark.parametrize("text", ["hello hello hello hello hello", "吾輩は猫である。名前はまだ無い。"])
def test_zlib_score_divides_mean_logprob_by_compressed_utf8_length(text):
    logprobs = np.array([-1.0, -2.0, -3.0])
    zlib_bytes = len(zlib.compress(text.encode("utf-8")))
    assert metrics.zlib_score(text, logprobs) == pytest.approx(-2.0 / zlib_bytes)


def test_zlib_score_penalizes_incompressible_text_less():
    # Same loss, more compressible (repetitive) text -> smaller zlib length -> more negative score.
    logprobs = np.array([-2.0, -2.0])
    repetitive = "abc " * 50
    varied = "".join(chr(ord("a") + (i * 7) % 26) for i in range(200))
    assert len(zlib.compress(repetitive.encode())) < len(zlib.compress(varied.encode()))
    assert metrics.zlib_score(repetitive, logprobs) < metrics.zlib_score(varied, logprobs)


def test_lowest_k_count():
    assert metrics.lowest_k_count(10, 20) == 2
    assert metrics.lowest_k_count(10, 25) == 2  # int(2.5)
    assert metrics.lowest_k_count(10, 29) == 2  # truncated, not rounded
    assert metrics.lowest_k_count(7, 50) == 3
    assert metrics.lowest_k_count(5, 10) == 1   # int(0.5) = 0, raised to 1
    assert metrics.lowest_k_count(1, 1) == 1
    assert metrics.lowest_k_count(10, 100) == 10


def test_min_k_score_hand_cases():
    assert metrics.min_k_score(TEN, 20) == pytest.approx(-9.5)
    # order of the input must not matter
    shuffled = TEN[[3, 9, 0, 7, 1, 8, 2, 6, 5, 4]]
    assert metrics.min_k_score(shuffled, 20) == pytest.approx(-9.5)
    assert metrics.min_k_score(TEN, 30) == pytest.approx(-9.0)  # -8, -9, -10
    assert metrics.min_k_score(TEN, 29) == pytest.approx(-9.5)  # int(2.9) = 2 tokens
    assert metrics.min_k_score(TEN, 100) == pytest.approx(-5.5)
    # k=10% of 5 tokens rounds down to 0: at least one token (the lowest) is used
    assert metrics.min_k_score(np.array([-0.5, -3.0, -1.0, -2.0, -0.1]), 10) == pytest.approx(-3.0)


def test_min_k_plus_plus_hand_standardization():
    logprobs = np.array([-1.0, -2.0, -5.0, -4.0])
    dist_mean = np.array([-2.0, -2.0, -2.0, -2.0])
    dist_std = np.array([1.0, 2.0, 0.0, 4.0])
    # standardized: (-1+2)/1 = 1, (-2+2)/2 = 0, sigma=0 -> 0 (not -inf), (-4+2)/4 = -0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no divide-by-zero warning either
        assert metrics.min_k_plus_plus_score(logprobs, dist_mean, dist_std, 100) == pytest.approx(0.5 / 4)
        assert metrics.min_k_plus_plus_score(logprobs, dist_mean, dist_std, 50) == pytest.approx(-0.25)
        assert metrics.min_k_plus_plus_score(logprobs, dist_mean, dist_std, 25) == pytest.approx(-0.5)


def test_min_k_plus_plus_zero_sigma_position_contributes_zero():
    # Only point-mass positions: every standardized value is 0 whatever the log-prob.
    logprobs = np.array([-7.0, -0.0, -3.0])
    score = metrics.min_k_plus_plus_score(logprobs, np.array([-1.0, 0.0, -2.0]), np.zeros(3), 100)
    assert score == 0.0
    # A large negative raw deviation at a sigma=0 position must not become the minimum.
    logprobs = np.array([-30.0, -3.0])
    score = metrics.min_k_plus_plus_score(logprobs, np.array([-1.0, -1.0]), np.array([0.0, 4.0]), 50)
    assert score == pytest.approx(-0.5)


def test_nan_log_probs_give_nan_scores_not_a_finite_part():
    # np.sort puts NaN last: without the check the lowest 20% of these would be -9.0, a finite score
    logprobs = np.array([-1.0, np.nan, -9.0, -2.0, -3.0])
    assert np.isnan(metrics.min_k_score(logprobs, 20))
    assert np.isnan(metrics.loss_score(logprobs))
    # a NaN sigma must not pass for a point mass (which contributes 0)
    ok = np.array([-1.0, -2.0])
    assert np.isnan(metrics.min_k_plus_plus_score(ok, np.array([-1.0, -1.0]), np.array([np.nan, 1.0]), 100))
    assert np.isnan(metrics.min_k_plus_plus_score(ok, np.array([np.nan, -1.0]), np.array([1.0, 1.0]), 100))


# ---------------------------------------------------------------- detection metrics

def test_roc_auc_hand_case():
    labels = np.array([1, 1, 0, 0])
    # pairs (pos, neg): 0.9>0.5, 0.9>0.1, 0.4<0.5, 0.4>0.1 -> 3 of 4
    assert metrics.roc_auc(labels, np.array([0.9, 0.4, 0.5, 0.1])) == pytest.approx(0.75)
    # a tie counts one half: 0.9>0.5, 0.9>0.1, 0.5=0.5, 0.5>0.1 -> 3.5 of 4
    assert metrics.roc_auc(labels, np.array([0.9, 0.5, 0.5, 0.1])) == pytest.approx(0.875)
    assert metrics.roc_auc(labels, np.array([0.1, 0.2, 0.3, 0.4])) == pytest.approx(0.0)


def test_tpr_at_fpr_uses_fpr_below_the_level_or_at_most_it_when_inclusive():
    # descending scores 7..1 with labels: P N P P N N N (3 positives, 4 negatives)
    labels = np.array([1, 0, 1, 1, 0, 0, 0])
    scores = np.array([7, 6, 5, 4, 3, 2, 1], dtype=float)
    # threshold >= 7: tpr 1/3 fpr 0; >= 4: tpr 1 fpr 1/4; >= 3: tpr 1 fpr 2/4
    assert metrics.tpr_at_fpr(labels, scores, 0.2499) == pytest.approx(1 / 3)
    assert metrics.tpr_at_fpr(labels, scores, 0.25) == pytest.approx(1 / 3)  # fpr < t (MIMIR, Min-K%)
    assert metrics.tpr_at_fpr(labels, scores, 0.25, inclusive=True) == pytest.approx(1.0)  # fpr <= t (Min-K%++)
    assert metrics.tpr_at_fpr(labels, scores, 0.2501) == pytest.approx(1.0)
    assert metrics.tpr_at_fpr(labels, scores, 0.5) == metrics.tpr_at_fpr(labels, scores, 0.5, True) == 1.0
    with pytest.raises(ValueError, match="between 0 and 1"):
        metrics.tpr_at_fpr(labels, scores, 0.0)


def test_tpr_at_fpr_zero_fpr_with_top_negative():
    labels = np.array([0, 1, 1, 0])
    scores = np.array([0.9, 0.8, 0.7, 0.1])
    # no threshold above the top negative catches a positive
    assert metrics.tpr_at_fpr(labels, scores, 0.01) == metrics.tpr_at_fpr(labels, scores, 0.01, True) == 0.0
    # both positives come with exactly one false positive (FPR 1/2)
    assert metrics.tpr_at_fpr(labels, scores, 0.5) == 0.0
    assert metrics.tpr_at_fpr(labels, scores, 0.5, inclusive=True) == 1.0


def test_tpr_at_fpr_is_the_public_codes_expression_on_their_roc_curve():
    # MIMIR / Min-K%: tpr[np.where(fpr < t)[0][-1]]; Min-K%++: fpr <= t; both on roc_curve's default
    # curve, whose drop_intermediate=True removes a point between two equal diagonal steps (ties):
    # scores 3, 3, 2, 2, 1, 1 (one member and one non-member each) give (0, 0), (1/3, 1/3), [(2/3, 2/3)],
    # (1, 1), so at FPR 0.7 the TPR read is 1/3, not the 2/3 that threshold 2 reaches
    labels, scores = np.array([1, 0, 1, 0, 1, 0]), np.array([3.0, 3.0, 2.0, 2.0, 1.0, 1.0])
    assert metrics.tpr_at_fpr(labels, scores, 0.7) == metrics.tpr_at_fpr(labels, scores, 0.7, True) == 1 / 3
    rng = np.random.default_rng(4)
    for _ in range(50):
        labels = rng.integers(0, 2, 60)
        labels[:2] = [0, 1]
        scores = np.round(rng.normal(labels, 1.0), 1)  # ties, and FPR levels hit exactly
        fpr, tpr, _ = roc_curve(labels, scores)
        for level in (0.05, 0.1, 0.2, 0.5):
            assert metrics.tpr_at_fpr(labels, scores, level) == tpr[np.where(fpr < level)[0][-1]]
            assert metrics.tpr_at_fpr(labels, scores, level, True) == tpr[np.where(fpr <= level)[0][-1]]


def test_rank_auc_matches_sklearn_on_resamples_with_ties():
    rng = np.random.default_rng(123)
    labels = rng.integers(0, 2, size=(50, 25))
    labels[:, 0], labels[:, 1] = 0, 1  # every row has both classes
    scores = rng.integers(0, 5, size=(50, 25))  # few distinct values -> many ties
    got = metrics.rank_auc(labels, scores)
    assert got.shape == (50,)
    expected = np.array([roc_auc_score(y, s) for y, s in zip(labels, scores)])
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert len(np.unique(expected)) > 10  # the cases really differ


def test_rank_auc_one_dimensional_and_single_class():
    one = metrics.rank_auc(np.array([1, 1, 0, 0]), np.array([0.9, 0.4, 0.5, 0.1]))
    assert one.shape == (1,) and one[0] == pytest.approx(0.75)
    rows = metrics.rank_auc(np.array([[1, 1, 1], [0, 1, 0], [0, 0, 1]]), np.array([[1, 2, 3]] * 3))
    assert np.isnan(rows[0])
    assert rows[1] == pytest.approx(0.5)  # 2 > 1, 2 < 3
    assert rows[2] == pytest.approx(1.0)


def _separated_sample(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = np.repeat([1, 0], n // 2)
    scores = rng.normal(size=n) + labels * 1.0
    return labels, scores


def test_bootstrap_auc_interval_without_a_two_class_resample_is_none():
    # one member and one non-member: a resample holds both with probability 1/2, so all 10 resamples
    # of seed 3 holding one class only is rare but reachable; none at all means no interval
    labels, scores = np.array([1, 0]), np.array([0.7, 0.2])
    seeds = [seed for seed in range(3000) if metrics.bootstrap_auc_interval(labels, scores, 10, seed=seed)[0] is None]
    assert seeds and all(metrics.bootstrap_auc_interval(labels, scores, 10, seed=s) == (None, None) for s in seeds)
    assert metrics.bootstrap_auc_interval(labels, scores, 10, seed=0) == (1.0, 1.0)


def test_bootstrap_auc_interval_is_deterministic_for_a_seed():
    labels, scores = _separated_sample(120, seed=1)
    first = metrics.bootstrap_auc_interval(labels, scores, n_resamples=300, seed=7)
    assert first == metrics.bootstrap_auc_interval(labels, scores, n_resamples=300, seed=7)
    assert first != metrics.bootstrap_auc_interval(labels, scores, n_resamples=300, seed=8)


def test_bootstrap_auc_interval_contains_point_auc():
    labels, scores = _separated_sample(200, seed=2)
    point = metrics.roc_auc(labels, scores)
    low, high = metrics.bootstrap_auc_interval(labels, scores, n_resamples=500, seed=0)
    assert 0.0 <= low < point < high <= 1.0
    assert 0.5 < low  # a clear unit shift is detected


def test_bootstrap_auc_interval_narrows_with_more_data():
    small = metrics.bootstrap_auc_interval(*_separated_sample(60, seed=3), n_resamples=500, seed=0)
    large = metrics.bootstrap_auc_interval(*_separated_sample(2000, seed=3), n_resamples=500, seed=0)
    width_small, width_large = small[1] - small[0], large[1] - large[0]
    assert width_large < width_small / 3  # ~ 1/sqrt(n): sqrt(2000/60) ~ 5.8


def test_bootstrap_confidence_level_orders_intervals():
    labels, scores = _separated_sample(150, seed=4)
    narrow = metrics.bootstrap_auc_interval(labels, scores, n_resamples=400, confidence=0.5, seed=0)
    wide = metrics.bootstrap_auc_interval(labels, scores, n_resamples=400, confidence=0.99, seed=0)
    assert wide[0] < narrow[0] < narrow[1] < wide[1]
