"""How much of the suspect set did the model train on? A lower confidence bound on the share, from the
held-out scores of dataset inference's splits.

Under dataset inference's alternative the suspect texts are a mixture: a share pi of them trained on (their
scores drawn from some distribution M) and the rest not (drawn from V, the validation texts' distribution).
For any threshold t on a split's classifier score s, fitted without the held-out texts,

    P_S(s > t) = pi P_M(s > t) + (1 - pi) P_V(s > t) <= pi + (1 - pi) P_V(s > t),

so pi >= (P_S(s > t) - P_V(s > t)) / (1 - P_V(s > t)), whatever M is. This is mixture proportion
estimation's lower bound with V as the known component (Blanchard, Lee & Scott 2010, *Semi-supervised
novelty detection*, JMLR 11:2973; Scott 2015, *A rate of convergence for mixture proportion estimation*,
AISTATS): the share of the suspect set that the model treats unlike unseen texts. It equals pi only where
some trained-on texts score above every unseen one; where the model barely learnt them (M close to V) it is
far below pi. pi itself is not identifiable from a suspect and a validation set alone: DUCI (Tong, Ye,
Zarifzadeh & Shokri 2025, *How much of my dataset did you use?*, ICLR) estimates it by debiasing membership
guesses with the true-positive rate that reference models trained with known membership give, which these
tasks do not have.

`share_lower_bound` makes the bound hold with the stated confidence: on each held-out half, P_S(s > t) gets
a one-sided Clopper-Pearson lower bound and P_V(s > t) an upper bound, each at level (1 - confidence) /
(2 K) for K = splits x thresholds (Bonferroni), so the largest of the K bounds holds with at least that
confidence. The thresholds are quantiles of the training half's validation scores (`QUANTILES`), chosen
without the held-out texts.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import beta

QUANTILES = (0.5, 0.75, 0.9)  # thresholds: these quantiles of each split's training validation scores


def binomial_bounds(hits: np.ndarray, count: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper-Pearson bounds of a binomial share at confidence 1 - level each: the lower bound
    (0 with no hits) and the upper (1 with every trial a hit)."""
    with np.errstate(invalid="ignore"):
        low = np.where(hits > 0, beta.ppf(level, hits, count - hits + 1), 0.0)
        high = np.where(hits < count, beta.ppf(1 - level, hits + 1, count - hits), 1.0)
    return low, high


def share_lower_bound(scores: np.ndarray, labels: np.ndarray, train: np.ndarray, confidence: float = 0.95,
                      quantiles: tuple[float, ...] = QUANTILES) -> float:
    """The lower confidence bound, in [0, 1], on the share of suspect texts trained on (module docstring).
    `scores`: splits x texts, each split's classifier score of every text; `labels`: texts (1 suspect) or
    splits x texts; `train`: splits x texts, True where a text fitted that split's classifier (only the
    others are counted)."""
    labels = np.broadcast_to(labels, scores.shape)
    level = (1 - confidence) / (2 * len(scores) * len(quantiles))
    best = 0.0
    for split_scores, split_labels, fit in zip(scores, labels, train):
        thresholds = np.quantile(split_scores[fit & (split_labels == 0)], quantiles)
        held = ~fit
        suspect, validation = split_scores[held & (split_labels == 1)], split_scores[held & (split_labels == 0)]
        low_s, _ = binomial_bounds((suspect[:, None] > thresholds).sum(axis=0), len(suspect), level)
        _, high_v = binomial_bounds((validation[:, None] > thresholds).sum(axis=0), len(validation), level)
        with np.errstate(divide="ignore", invalid="ignore"):
            bounds = np.where(high_v < 1, (low_s - high_v) / (1 - high_v), 0.0)
        best = max(best, float(bounds.max()))
    return min(best, 1.0)
