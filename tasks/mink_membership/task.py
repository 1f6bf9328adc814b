"""Task `mink_membership`: membership inference with LOSS, zlib, Min-K% Prob and Min-K%++ scores.

Shi et al. 2024 ("Detecting Pretraining Data from Large Language Models"), as used there: each text
cut to its first L words, scored by a causal LM, and each score's ability to tell members from
non-members measured by ROC AUC and TPR at low FPR. Definitions: README.md beside this file.
"""

from __future__ import annotations

import logging
import math
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, PositiveInt

from harness import metrics as m
from harness.models import LoadedModel, ModelKind
from harness.results import Headline, Metric
from harness.scoring import TokenScores, causal_token_logprobs, token_text
from harness.task import MAX_SEED, RunContext, Task, TaskConfig, TaskResult, register
from harness.text import truncate_words
from tasks.mink_membership.data import MembershipData, load_membership_data

log = logging.getLogger(__name__)


class MinkConfig(TaskConfig):
    data: str = Field("reference", description="JSONL file ({text, label}), a hub dataset id "
                      "(text/label columns, WikiMIA's input/label), or a reference corpus: "
                      "'reference' (English XSum) or 'reference:ja' (Japanese)")
    split: str = Field("train", description="split of a hub dataset")
    text_column: str | None = Field(None, description="text column of a hub dataset (default: text or input)")
    label_column: str = Field("label", description="label column of a hub dataset (1 = member)")
    reference_seed: int = Field(0, ge=0, le=MAX_SEED,
                                description="seed of the reference corpus member/non-member split")
    language: Literal["en", "ja"] = Field("en", description="word splitting: whitespace (en) or fugashi (ja)")
    lengths: tuple[PositiveInt, ...] = Field((32, 64, 128, 256, 512), min_length=1,
                                             description="prefix lengths L in words")
    k_percents: tuple[Annotated[int, Field(ge=1, le=100)], ...] = Field((10, 20, 30, 40, 50, 60), min_length=1,
                                                                        description="k of Min-K%% and Min-K%%++")
    fpr_levels: tuple[Annotated[float, Field(gt=0, lt=1)], ...] = Field((0.1, 0.01), min_length=1,
                                                                        description="FPR levels for TPR@FPR")
    bootstrap_resamples: int = Field(1000, ge=10, description="resamples of the AUC bootstrap interval")
    stride: int | None = Field(None, ge=1, description="sliding-window stride for texts longer than the "
                               "context (default: half the context)")
    first_token: Literal["score", "skip"] = Field(
        "score", description="score: prepend the tokenizer's BOS so the first text token is scored too "
        "(lm-eval's convention); skip: prepend nothing, the first token is context only (MIMIR, Min-K%% and "
        "Min-K%%++ code on tokenizers that add no BOS, e.g. GPT-2, Pythia)")


def score_names(k_percents: tuple[int, ...]) -> list[str]:
    return ["loss", "zlib"] + [f"min_k_{k}" for k in k_percents] + [f"min_k_pp_{k}" for k in k_percents]


def text_scores(text: str, scores: TokenScores, k_percents: tuple[int, ...]) -> dict[str, float]:
    """Every membership score of one text, oriented so higher = more likely a member."""
    lp = scores.logprobs
    values = {"loss": m.loss_score(lp), "zlib": m.zlib_score(text, lp)}
    for k in k_percents:
        values[f"min_k_{k}"] = m.min_k_score(lp, k)
    for k in k_percents:
        values[f"min_k_pp_{k}"] = m.min_k_plus_plus_score(lp, scores.dist_mean, scores.dist_std, k)
    return values


def detection_metrics(labels: np.ndarray, scores: np.ndarray, tags: dict[str, str],
                      config: MinkConfig, seed: int) -> list[Metric]:
    """AUC with its bootstrap interval and TPR at each FPR level (FPR < level, MIMIR's reading, and
    FPR <= level as `..._inclusive`), for one (score, L). Scores must be finite."""
    n = len(labels)
    if len(set(labels.tolist())) < 2:
        return [Metric(name="auc", value=None, n=n, tags=tags)]
    low, high = m.bootstrap_auc_interval(labels, scores, config.bootstrap_resamples, 0.95, seed)
    out = [Metric(name="auc", value=m.roc_auc(labels, scores), ci_low=low, ci_high=high, n=n, tags=tags)]
    for level in config.fpr_levels:
        out.append(Metric(name=f"tpr@{level:g}fpr", value=m.tpr_at_fpr(labels, scores, level), n=n, tags=tags))
        out.append(Metric(name=f"tpr@{level:g}fpr_inclusive", value=m.tpr_at_fpr(labels, scores, level, True),
                          n=n, tags=tags))
    return out


def finite_only(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The (label, score) pairs whose score is finite, and how many were dropped (NaN or +-inf, as
    from a model that emits NaN logits: AUC and TPR are undefined on them; MIMIR drops NaN scores too)."""
    finite = np.isfinite(scores)
    return labels[finite], scores[finite], int(len(scores) - finite.sum())


@register
class MinkMembership(Task):
    NAME = "mink_membership"
    VERSION = 2
    DESCRIPTION = "Membership inference: LOSS, zlib, Min-K% Prob and Min-K%++ AUC / TPR@FPR per prefix length"
    MODEL_KINDS = frozenset({ModelKind.CAUSAL_LM})
    HEADLINE = Headline(metric="auc", tags={"score": "min_k_20", "length": "128"},
                        label="Min-K% 20% AUC, 128 words", better="lower")
    SUMMARY = (HEADLINE,
               Headline(metric="auc", tags={"score": "min_k_pp_20", "length": "128"},
                        label="Min-K%++ 20% AUC, 128", better="lower"),
               Headline(metric="auc", tags={"score": "loss", "length": "128"}, label="loss AUC, 128", better="lower"),
               Headline(metric="auc", tags={"score": "zlib", "length": "128"}, label="zlib AUC, 128", better="lower"),
               Headline(metric="tpr@0.1fpr", tags={"score": "min_k_20", "length": "128"},
                        label="Min-K% 20% TPR@10%FPR, 128", better="lower"))
    Config = MinkConfig

    def load_data(self, config: MinkConfig, context: RunContext) -> MembershipData:
        return load_membership_data(config.data, config.split, config.text_column, config.label_column,
                                    config.reference_seed, context.limit)

    def lm_eval_export(self, data, config, tokenizer, context):
        from tasks.mink_membership.for_lm_eval import export

        return export(self, data, config, tokenizer, context)

    def run(self, model: LoadedModel, data: MembershipData, config: MinkConfig,
            context: RunContext) -> TaskResult:
        prefixes = {}  # (text index, L) -> the text cut to its first L words
        for i, item in enumerate(data.texts):
            for length in config.lengths:
                cut = truncate_words(item.text, length, config.language)
                if cut is not None:
                    prefixes[i, length] = cut
        keys = list(prefixes)
        token_scores, scoring = causal_token_logprobs(
            model.model, model.tokenizer, [prefixes[k] for k in keys], batch_size=context.batch_size,
            stride=config.stride, distribution_stats=True, progress=context.progress,
            add_start=config.first_token == "score")
        names = score_names(config.k_percents)
        start = token_text(model.tokenizer, scoring.bos_token_id)
        samples, counts, metrics_out, non_finite = [], {}, [], {}
        per_length: dict[int, list[tuple[int, dict[str, float]]]] = {length: [] for length in config.lengths}
        no_token = dict.fromkeys(config.lengths, 0)
        for (i, length), scores in zip(keys, token_scores):
            if len(scores.logprobs) == 0:
                no_token[length] += 1
                continue
            values = text_scores(prefixes[i, length], scores, config.k_percents)
            per_length[length].append((data.texts[i].label, values))
            samples.append({"id": data.texts[i].text_id, "label": data.texts[i].label, "length": length,
                            "start_token": start, "n_tokens": int(len(scores.logprobs)),
                            "scores": {k: v if math.isfinite(v) else None for k, v in values.items()}})
        for length in config.lengths:
            rows = per_length[length]
            labels = np.array([label for label, _ in rows], dtype=int)
            counts[f"members@{length}"] = int(labels.sum())
            counts[f"nonmembers@{length}"] = int(len(labels) - labels.sum())
            counts[f"too_short@{length}"] = sum((i, length) not in prefixes for i in range(len(data.texts)))
            counts[f"no_scored_token@{length}"] = no_token[length]
            counts[f"non_finite@{length}"] = sum(not all(math.isfinite(v) for v in values.values())
                                                 for _, values in rows)
            if not rows:
                continue
            for name in names:
                kept_labels, scores, dropped = finite_only(labels, np.array([values[name] for _, values in rows]))
                if dropped:
                    non_finite[f"{name}@{length}"] = dropped
                metrics_out += detection_metrics(kept_labels, scores, {"score": name, "length": str(length)},
                                                 config, context.seed)
        counts["texts"] = len(data.texts)
        info = {"data_source": data.source, "scoring": scoring.as_dict(),
                "bos": "prepended" if scoring.first_token_scored else "none: first token unscored"}
        if non_finite:
            info["non_finite_scores"] = non_finite
            log.warning("%s: %d text prefixes have a non-finite score (NaN or inf; the model's outputs?); each "
                        "is left out of that score's metrics (counts non_finite@L, info.non_finite_scores)",
                        self.NAME, sum(counts[f"non_finite@{length}"] for length in config.lengths))
        empty = None
        if not metrics_out:  # the runner records the task as skipped, with this reason
            empty = (f"every text is shorter than every --lengths (the shortest is {min(config.lengths)} words)"
                     if not prefixes else "no text prefix has a scored token (counts no_scored_token@L)")
        return TaskResult(metrics=metrics_out, counts=counts, samples=samples, info=info, no_metrics_reason=empty)
