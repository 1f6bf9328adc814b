"""membench membership-inference metric: ROC AUC and TPR at low FPR of membership scores.

A thin `evaluate` wrapper of `harness.metrics.memorization` (roc_auc, tpr_at_fpr, bootstrap_auc_interval): the
numbers equal those of membench's `mink_membership` task for the same labels and scores.
"""

from __future__ import annotations

import datasets
import evaluate
import numpy as np

from harness.metrics.memorization import bootstrap_auc_interval, roc_auc, tpr_at_fpr

_CITATION = """\
@inproceedings{shi2024detecting,
  title     = {Detecting Pretraining Data from Large Language Models},
  author    = {Weijia Shi and Anirudh Ajith and Mengzhou Xia and Yangsibo Huang and Daogao Liu and
               Terra Blevins and Danqi Chen and Luke Zettlemoyer},
  booktitle = {The Twelfth International Conference on Learning Representations (ICLR)},
  year      = {2024},
  url       = {https://openreview.net/forum?id=zWqr3MQuNs}
}
"""

_DESCRIPTION = """\
Membership-inference detection metrics of membench: how well a membership score separates texts
that were in a model's training data (label 1) from texts that were not (label 0). The score can be
any membership score oriented so that higher means "more likely a member": LOSS (negative mean NLL),
zlib-normalised loss, Min-K% Prob (Shi et al. 2024), Min-K%++, or your own. Reports the ROC AUC and
the true-positive rate at fixed low false-positive rates (TPR@FPR), optionally with a percentile
bootstrap interval of the AUC. AUC 0.5 is chance; higher AUC / TPR means more detectable membership.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `float`): membership scores, higher = more likely a training member.
    references (`list` of `int`): labels, 1 = member, 0 = non-member; both classes must occur.
    fpr_levels (`tuple` of `float`, default `(0.1, 0.01)`): FPR levels in (0, 1) for TPR@FPR.
    bootstrap_resamples (`int`, default `0`): resamples of the percentile bootstrap interval of the
        AUC; 0 gives no interval.
    confidence (`float`, default `0.95`): confidence level of the bootstrap interval.
    seed (`int`, default `0`): seed of the bootstrap resampling.
Returns:
    auc (`float`, 0..1): ROC AUC (ties count one half); 0.5 = chance, higher = more detectable.
    tpr@{level:g}fpr (`float`, 0..1), one per level, e.g. `tpr@0.1fpr`, `tpr@0.01fpr`: the TPR of the
        last point of scikit-learn's ROC curve whose FPR is < level, as MIMIR and the Min-K% code
        compute it (`tpr[np.where(fpr < level)[0][-1]]`).
    tpr@{level:g}fpr_inclusive (`float`, 0..1), one per level: the same with FPR <= level (the
        Min-K%++ code's reading); differs when a threshold has FPR exactly `level`.
    auc_ci_low, auc_ci_high (`float`, 0..1): the bootstrap interval, only if bootstrap_resamples > 0.
Examples:
    >>> import evaluate
    >>> from harness.interop.evaluate_modules import module_path
    >>> membership = evaluate.load(module_path("membench_membership"))
    >>> membership.compute(predictions=[0.9, 0.4, 0.6, 0.1], references=[1, 1, 0, 0])
    {'auc': 0.75, 'tpr@0.1fpr': 0.5, 'tpr@0.1fpr_inclusive': 0.5, 'tpr@0.01fpr': 0.5, 'tpr@0.01fpr_inclusive': 0.5}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class MembenchMembership(evaluate.Metric):
    """ROC AUC and TPR@FPR of membership scores (membench `harness.metrics.memorization`)."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            # labels stored as float64 and checked in _compute: an int32 feature would silently
            # truncate a label such as 0.7 to 0
            features=datasets.Features({"predictions": datasets.Value("float64"),
                                        "references": datasets.Value("float64")}),
            reference_urls=["https://arxiv.org/abs/2310.16789"],
        )

    def _compute(self, predictions, references, fpr_levels=(0.1, 0.01), bootstrap_resamples: int = 0,
                 confidence: float = 0.95, seed: int = 0) -> dict[str, float]:
        scores = np.asarray(predictions, dtype=np.float64)
        values = np.asarray(references, dtype=np.float64)
        if set(np.unique(values).tolist()) != {0.0, 1.0}:
            raise ValueError(f"references must be 0/1 labels with both classes present; got the values "
                             f"{sorted(set(values.tolist()))[:10]}")
        labels = values.astype(np.int64)
        if not np.all(np.isfinite(scores)):
            raise ValueError("predictions (membership scores) must be finite numbers")
        levels = tuple(float(level) for level in np.atleast_1d(fpr_levels))
        if not all(0 < level < 1 for level in levels):
            raise ValueError(f"fpr_levels must lie strictly between 0 and 1; got {levels}")
        if bootstrap_resamples < 0:
            raise ValueError(f"bootstrap_resamples must be >= 0; got {bootstrap_resamples}")
        out = {"auc": roc_auc(labels, scores)}
        for level in levels:
            out[f"tpr@{level:g}fpr"] = tpr_at_fpr(labels, scores, level)
            out[f"tpr@{level:g}fpr_inclusive"] = tpr_at_fpr(labels, scores, level, inclusive=True)
        if bootstrap_resamples > 0:
            out["auc_ci_low"], out["auc_ci_high"] = bootstrap_auc_interval(labels, scores, int(bootstrap_resamples),
                                                                           confidence, seed)
        return out
