"""The membership report shared by the tasks that score texts for membership (mink_membership per prefix
length, finetune_memorization per checkpoint): each score's detection metrics over the texts it scored,
and the names of the scores. Pure: the tasks' reporting stages call it on their records.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from harness.core.results import Metric
from harness.metrics.detection import detection_metrics, finite_only

# Every attack, in the order cards and results list them; `ref` and `ne` need a second model.
ATTACK_ORDER = ("loss", "zlib", "min_k", "min_k_pp", "ref", "ne", "recall", "dc_pdd", "gradnorm")


def score_names(k_percents: tuple[int, ...], attacks: tuple[str, ...] = ATTACK_ORDER) -> list[str]:
    """The score names of the selected attacks, in `ATTACK_ORDER` (Min-K% and Min-K%++ once per k)."""
    names = []
    for attack in ATTACK_ORDER:
        if attack in attacks:
            names += [f"{attack}_{k}" for k in k_percents] if attack in ("min_k", "min_k_pp") else [attack]
    return names


def score_detection(labels: Sequence[int], rows: Sequence[dict[str, float]], names: Sequence[str],
                    tags: dict[str, str], fpr_levels: tuple[float, ...], resamples: int,
                    seed: int) -> tuple[list[Metric], dict[str, int]]:
    """AUC and TPR@FPR with bootstrap intervals (`detection.detection_metrics`) of each score in `names`
    over the texts that have it (`rows[i]`: text i's scores, `labels[i]` its label), finite scores only;
    and, per score, how many non-finite scores were left out (where any were). Tags: `score` and `tags`."""
    metrics, dropped_by_name = [], {}
    for name in names:
        have = [(label, values[name]) for label, values in zip(labels, rows) if name in values]
        if not have:
            continue
        kept_labels, scores, dropped = finite_only(np.array([label for label, _ in have], dtype=int),
                                                   np.array([value for _, value in have]))
        if dropped:
            dropped_by_name[name] = dropped
        metrics += detection_metrics(kept_labels, scores, {"score": name, **tags}, fpr_levels, resamples, seed)
    return metrics, dropped_by_name
