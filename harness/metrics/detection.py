"""How well one membership score tells members from non-members, as results-file metrics: ROC AUC and
TPR at each FPR level, each with its bootstrap interval (the same resamples). Shared by every task
that detects members (mink_membership, finetune_memorization). Formulas: `harness.metrics.memorization`."""

from __future__ import annotations

import numpy as np

from harness.core.results import Metric
from harness.metrics import memorization as m


def detection_metrics(labels: np.ndarray, scores: np.ndarray, tags: dict[str, str], fpr_levels: tuple[float, ...],
                      resamples: int, seed: int) -> list[Metric]:
    """`auc` and `tpr@{level}fpr` at each FPR level (FPR < level, MIMIR's reading, and FPR <= level as
    `..._inclusive`), each with its 95% bootstrap interval over `resamples` resamples drawn with
    `seed`. Scores must be finite; with one class only, `auc` without a value."""
    n = len(labels)
    if len(set(labels.tolist())) < 2:
        return [Metric(name="auc", value=None, n=n, tags=tags)]
    low, high = m.bootstrap_auc_interval(labels, scores, resamples, 0.95, seed)
    out = [Metric(name="auc", value=m.roc_auc(labels, scores), ci_low=low, ci_high=high, n=n, tags=tags)]
    intervals = m.bootstrap_tpr_intervals(labels, scores, fpr_levels, resamples, 0.95, seed)
    values = m.tprs_at_fpr(labels, scores, fpr_levels)
    for level, (strict, inclusive), (below, at_most) in zip(fpr_levels, intervals, values):
        out.append(Metric(name=f"tpr@{level:g}fpr", value=below, ci_low=strict[0], ci_high=strict[1], n=n, tags=tags))
        out.append(Metric(name=f"tpr@{level:g}fpr_inclusive", value=at_most, ci_low=inclusive[0],
                          ci_high=inclusive[1], n=n, tags=tags))
    return out


def finite_only(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The (label, score) pairs whose score is finite, and how many were dropped (NaN or +-inf, as
    from a model that emits NaN logits: AUC and TPR are undefined on them; MIMIR drops NaN scores too)."""
    finite = np.isfinite(scores)
    return labels[finite], scores[finite], int(len(scores) - finite.sum())
