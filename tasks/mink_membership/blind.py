"""Blind baselines beside the attacks (Das, Zhang & Tramèr 2024): the same cut texts at each length L,
scored without the model (`harness.metrics.blind`); the warning when they already tell members from
non-members; the low-FPR support of TPR@FPR; the Min-K% k chosen on the evaluation data."""

from __future__ import annotations

from typing import Hashable

import numpy as np

from harness.core.results import Metric
from harness.metrics import blind as b
from harness.metrics import memorization as m

BLIND = ("bag_of_words", "date")
SCORE = {"bag_of_words": "blind_bow", "date": "blind_date"}
# Das et al.'s reading: a blind AUC this high means the member and non-member sets differ in distribution.
WARN_AUC = 0.6
DISTINGUISHABLE = ("members and non-members are distinguishable without the model: attack AUCs here are not "
                   "evidence of memorization")


def blind_scores(texts: dict[Hashable, str], labels: dict[Hashable, int], config,
                 seed: int) -> tuple[dict[Hashable, dict[str, float]], dict]:
    """The selected blind baselines' out-of-fold scores of the texts of one length, key -> {score name:
    value}, and facts about them (texts with a year, the date cutoffs; why a baseline did not run)."""
    keys = list(texts)
    cut = [texts[k] for k in keys]
    y = np.array([labels[k] for k in keys], dtype=int)
    out: dict[Hashable, dict[str, float]] = {k: {} for k in keys}
    facts: dict = {}
    if "bag_of_words" in config.blind_baselines:
        scores = b.bag_of_words_scores(cut, y, config.blind_folds, seed, config.blind_max_features,
                                       config.blind_vectorizer, config.blind_classifier, config.blind_ngrams)
        if scores is None:
            facts["bag_of_words"] = "not run: fewer than 2 texts of a class"
        for k, value in zip(keys, scores if scores is not None else ()):
            out[k][SCORE["bag_of_words"]] = float(value)
    if "date" in config.blind_baselines:
        years = [b.latest_year(text) for text in cut]
        with_year = sum(year is not None for year in years)
        facts["texts_with_year"] = with_year
        scores, cutoffs = None, None
        if not with_year:
            facts["date"] = "not applicable: no text holds a year (four digits)"
        elif config.blind_date_cutoff is not None:
            scores, cutoffs = b.date_scores(years, config.blind_date_cutoff), config.blind_date_cutoff
        else:
            found = b.date_scores_cv(years, y, config.blind_folds, seed)
            if found is None:
                facts["date"] = "not run: fewer than 2 texts of a class"
            else:
                scores, cutoffs = found
        if cutoffs is not None:
            facts["date_cutoffs"] = cutoffs
        for k, value in zip(keys, scores if scores is not None else ()):
            out[k][SCORE["date"]] = float(value)
    return out, facts


def blind_warning(metrics: list[Metric]) -> str | None:
    """The warning when the best blind AUC at some length reaches `WARN_AUC`, naming where, else None."""
    best: dict[str, Metric] = {}
    for metric in metrics:
        if metric.name == "auc" and metric.tags.get("score") in SCORE.values() and metric.value is not None:
            length = metric.tags["length"]
            if length not in best or metric.value > best[length].value:
                best[length] = metric
    high = {length: metric for length, metric in best.items() if metric.value >= WARN_AUC}
    if not high:
        return None
    where = ", ".join(f"{metric.tags['score']} {metric.value:.3f} at {length} words" for length, metric in high.items())
    return f"blind baseline AUC >= {WARN_AUC} ({where}): {DISTINGUISHABLE}"


def best_k_metrics(metrics: list[Metric], k_percents: tuple[int, ...]) -> list[Metric]:
    """Per length, the Min-K% and Min-K%++ AUC of the k with the highest AUC (the smallest k among ties):
    `auc` with tags score `min_k_best` / `min_k_pp_best` and `k`. Selected on the evaluation data, so
    optimistic: no interval; the headline stays at the k declared before (20)."""
    out = []
    for attack in ("min_k", "min_k_pp"):
        names = {f"{attack}_{k}": k for k in k_percents}
        by_length: dict[str, list[tuple[float, int, Metric]]] = {}
        for metric in metrics:
            if metric.name == "auc" and metric.tags.get("score") in names and metric.value is not None:
                by_length.setdefault(metric.tags["length"], []).append(
                    (-metric.value, names[metric.tags["score"]], metric))
        for length, found in by_length.items():
            _, k, metric = min(found, key=lambda item: item[:2])
            out.append(Metric(name="auc", value=metric.value, n=metric.n,
                              tags={"score": f"{attack}_best", "length": length, "k": str(k)}))
    return out


def low_fpr_support(nonmembers: dict[int, int], levels: tuple[float, ...]) -> dict:
    """For each FPR level and length: the non-members a TPR@FPR rests on and the false positives its
    threshold may have (FPR < level, and <= level for `_inclusive`); 0 false positives means the TPR
    is the share of members above the single highest-scoring non-member."""
    out = {}
    for level in levels:
        rows = {}
        for length, n in nonmembers.items():
            if n:
                allowed = m.false_positives_allowed(n, level)
                rows[str(length)] = {"nonmembers": n, "false_positives": allowed,
                                     "false_positives_inclusive": m.false_positives_allowed(n, level, True)}
        fewest = min((row["false_positives"] for row in rows.values()), default=None)
        note = None
        if fewest is not None and fewest < 10:
            note = ("rests on the single highest-scoring non-member at some length: read the interval, not the number"
                    if fewest == 0 else f"rests on as few as {fewest + 1} non-member scores: read the interval")
        out[f"{level:g}"] = {"per_length": rows, **({"note": note} if note else {})}
    return out
