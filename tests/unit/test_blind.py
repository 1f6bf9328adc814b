"""Blind baselines (`harness.metrics.blind`) and the low-FPR metrics (`harness.metrics.memorization`):
hand-computed cases, and the vectorised bootstrap TPR against `tpr_at_fpr` resample by resample."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.metrics import blind as b
from harness.metrics import memorization as m


def test_bag_of_words_multinomial_by_hand():
    # counts with Laplace smoothing (alpha 1) over {apple, pear, plum}: members 4/7, 2/7, 1/7, non-members
    # 1/7, 4/7, 2/7; "apple plum": P(member) = (4/7 * 1/7) / (4/7 * 1/7 + 1/7 * 2/7) = 2/3
    train = ["apple apple", "apple pear", "pear pear", "pear plum"]
    [p] = b.bag_of_words_fold(train, np.array([1, 1, 0, 0]), ["apple plum"], None, "count", "multinomial_nb")
    assert p == pytest.approx(2 / 3, rel=1e-12)


def test_bag_of_words_default_by_hand():
    # TF-IDF rows of one-word texts are one-hot after L2 normalisation; Gaussian NB per class and
    # feature: members apple (1, 1, 0), pear (0, 0, 1): means 2/3, 1/3; non-members the reverse; every
    # variance 2/9. For "apple" = (1, 0) the log-likelihood ratio is ((2/3)^2 + (2/3)^2 - 2 (1/3)^2) /
    # (2 * 2/9) = 1.5, so P(member) = e^1.5 / (1 + e^1.5) (up to scikit-learn's var_smoothing, 1e-9 * 0.25)
    train = ["apple", "apple", "pear", "pear", "pear", "apple"]
    [p] = b.bag_of_words_fold(train, np.array([1, 1, 1, 0, 0, 0]), ["apple"])
    assert p == pytest.approx(math.exp(1.5) / (1 + math.exp(1.5)), rel=1e-6)
    # no word of two characters or more anywhere: nothing to fit, 0.5
    assert b.bag_of_words_fold(["a", "b", "c", "d"], np.array([1, 1, 0, 0]), ["a"]).tolist() == [0.5]
    # every training text the same: no variance for Gaussian NB to divide by, 0.5 (not NaN)
    assert b.bag_of_words_fold(["same text"] * 4, np.array([1, 1, 0, 0]), ["same", "text"]).tolist() == [0.5, 0.5]


def test_bag_of_words_scores_are_out_of_fold():
    rng = np.random.default_rng(0)
    members = [f"the match ended {w} goal" for w in rng.choice(["late", "early"], 20)]
    others = [f"a recipe needs {w} flour" for w in rng.choice(["white", "brown"], 20)]
    labels = np.array([1] * 20 + [0] * 20)
    scores = b.bag_of_words_scores(members + others, labels, folds=5, seed=0)
    assert m.roc_auc(labels, scores) == 1.0
    noise = b.bag_of_words_scores([f"word{i % 7} text{i % 3}" for i in range(40)], labels, folds=5, seed=0)
    assert abs(m.roc_auc(labels, noise) - 0.5) < 0.3
    assert b.bag_of_words_scores(["x y", "y z", "z x"], np.array([1, 0, 0])) is None  # one member: no folds


def test_stratified_folds():
    labels = np.array([1, 1, 1, 0, 0, 0, 0, 0])
    folds = b.stratified_folds(labels, 5, 0)
    assert len(folds) == 3  # lowered to the 3 members
    assert sorted(np.concatenate([test for _, test in folds]).tolist()) == list(range(8))
    assert all(labels[test].sum() == 1 for _, test in folds)
    assert b.stratified_folds(np.array([1, 0, 0]), 5, 0) == []


def test_years_and_date_scores_as_das_et_al():
    assert b.latest_year("In 1999 and 2016 there were 12345 cases") == 2016  # 1234 from 12345, as their regex
    assert b.latest_year("no year here, 99 or 123") is None
    assert b.date_scores([2016, 2017, None], 2017).tolist() == [1.0, 0.0, 0.5]


def test_best_cutoff_and_cross_validated_dates():
    # candidates 2000 (every year after), 2001, 2003, 2006, 2009: AUCs 0.5, 0.75, 1.0, 0.75, 0.5
    assert b.best_cutoff([2000, 2002, 2005, 2008], np.array([1, 1, 0, 0])) == 2003
    assert b.best_cutoff([None, None], np.array([1, 0])) is None
    years = [2000 + i % 5 for i in range(10)] + [2010 + i % 5 for i in range(10)]
    scores, cutoffs = b.date_scores_cv(years, np.array([1] * 10 + [0] * 10), folds=5, seed=0)
    assert m.roc_auc(np.array([1] * 10 + [0] * 10), scores) == 1.0
    assert all(2005 <= c <= 2010 for c in cutoffs)


def test_the_most_frequent_terms_break_ties_by_the_term():
    """Counts: the 3, cat 2, dog 2, sat 1, mat 1: the top 3 at a tie take `cat` and `dog` over nothing
    else, the top 2 take `cat` (before `dog`) beside `the`, laid out alphabetically; on any machine."""
    texts = ["the cat sat", "the dog", "the cat dog mat"]
    assert b.most_frequent_terms(texts, 2) == ["cat", "the"]
    assert b.most_frequent_terms(texts, 3) == ["cat", "dog", "the"]
    assert b.most_frequent_terms(texts, 4) == ["cat", "dog", "mat", "the"]
    assert b.most_frequent_terms(texts, None) is None


def test_a_chosen_cutoff_is_a_plausible_year():
    """Four-digit numbers outside 1970 to 2030 are no candidate cutoffs (a count, 4953; a far future, 2046),
    though they still count as a text's latest year, as Das et al. read it: here the members hold
    4953 and the best plausible cutoff, 2013, scores them 0 as it scores the non-members of 2013 on."""
    years = [2010, 2011, 2012, 4953, 2046, 2013, 2014, 2015]
    labels = np.array([1, 1, 1, 1, 1, 0, 0, 0])
    assert b.best_cutoff(years, labels) == 2013
    assert b.best_cutoff([4953, 1969, 2031], np.array([1, 0, 0])) is None
    assert b.best_cutoff([1970, 2030], np.array([1, 0])) == 1971


def test_resampled_tpr_equals_tpr_at_fpr_on_every_resample():
    # three groups of tied scores, one member and one non-member each: scikit-learn's curve drops the
    # middle point (1/2 of each), so at FPR < 0.7 it reads 1/3, not 2/3
    labels, scores = np.array([1, 0, 1, 0, 1, 0]), np.array([3.0, 3, 2, 2, 1, 1])
    assert m.tpr_at_fpr(labels, scores, 0.7) == pytest.approx(1 / 3)
    assert m.resampled_tpr_at_fpr(labels, scores, np.arange(6)[None], (0.7,))[0, 0, 0] == pytest.approx(1 / 3)
    rng = np.random.default_rng(1)
    levels = (0.01, 0.1, 0.25, 1 / 3, 0.7)  # small n: some resample's FPR is exactly the level
    for trial in range(21):
        n = int(rng.integers(2, 30))
        labels = rng.integers(0, 2, n)
        scores = (rng.integers(0, 1 + trial % 3 * 3, n) if trial % 3 < 2 else rng.normal(size=n)).astype(float)
        draws = m.bootstrap_draws(n, 10, trial)
        got = m.resampled_tpr_at_fpr(labels, scores, draws, levels)
        for row, draw in enumerate(draws):
            y, s = labels[draw], scores[draw]
            for j, level in enumerate(levels):
                for k, inclusive in enumerate((False, True)):
                    if y.min() == y.max():
                        assert math.isnan(got[row, j, k])
                    else:
                        assert got[row, j, k] == m.tpr_at_fpr(y, s, level, inclusive), (trial, row, level, inclusive)


def test_resampled_auc_equals_the_rank_auc_of_every_resample_bit_for_bit():
    # by hand: members {3, 2}, non-members {2, 1}: 3 beats both, 2 beats 1 and ties 2: U = 3.5, AUC 7/8;
    # drawing the tied member twice and the top one never: U = 2 * 1.5, AUC 3/4
    labels, scores = np.array([1, 1, 0, 0]), np.array([3.0, 2, 2, 1])
    assert m.resampled_auc(labels, scores, np.array([[0, 1, 2, 3], [1, 1, 2, 3]])).tolist() == [7 / 8, 3 / 4]
    rng = np.random.default_rng(2)
    for trial in range(30):
        n = int(rng.integers(2, 40)) if trial % 3 else 400
        labels = rng.integers(0, 2, n)
        scores = rng.integers(0, 4, n).astype(float) if trial % 2 else rng.normal(size=n)
        draws = m.bootstrap_draws(n, 50, trial)
        expected = m.rank_auc(labels[draws], scores[draws])
        assert np.array_equal(m.resampled_auc(labels, scores, draws), expected, equal_nan=True), trial
    assert m.bootstrap_auc_interval(np.array([1, 0, 1, 0]), np.array([1.0, np.nan, 2, 0]), 50) == (None, None)


def test_bootstrap_tpr_intervals():
    labels = np.array([1] * 30 + [0] * 30)
    separated = np.r_[np.arange(30) + 100.0, np.arange(30)]
    assert m.bootstrap_tpr_intervals(labels, separated, (0.1, 0.001), 200) == [((1.0, 1.0), (1.0, 1.0))] * 2
    rng = np.random.default_rng(0)
    scores = rng.normal(size=60) + labels
    (strict, inclusive), = m.bootstrap_tpr_intervals(labels, scores, (0.1,), 500)
    assert 0 <= strict[0] <= m.tpr_at_fpr(labels, scores, 0.1) <= strict[1] <= 1
    assert inclusive[0] >= strict[0] and inclusive[1] >= strict[1]


def test_false_positives_allowed():
    assert m.false_positives_allowed(500, 0.001) == 0  # 0.1% of 500: the single highest non-member decides
    assert (m.false_positives_allowed(1000, 0.001), m.false_positives_allowed(1000, 0.001, True)) == (0, 1)
    assert (m.false_positives_allowed(200, 0.01), m.false_positives_allowed(200, 0.01, True)) == (1, 2)
    assert (m.false_positives_allowed(100, 0.1), m.false_positives_allowed(100, 0.1, True)) == (9, 10)
