"""Dataset inference as the membership tasks report it: the settings they share (`DatasetInferenceConfig`),
the test on one group of texts (`dataset_inference_report`: per prefix length in mink_membership, per
checkpoint in finetune_memorization) and its IID guard on label-free text features (`guard_report`).

Metrics (tags: the caller's, e.g. {"length": "128"} or {"epoch": "1", "trained_on": "members"}):
  di_p_value        `dataset_inference`'s combined p-value: suspect (label 1) against validation (label 0)
                    on the per-text attack scores (`n`: texts used on both sides)
  di_share_lower    a lower bound, at 95% confidence, on the share of the suspect texts the model trained on
                    (`dataset_share`; `n`: suspect texts): the share it treats unlike unseen texts
  di_guard_p_value  the same test on `blind.label_free_features` of the same texts (no model): a small
                    value means the two sets differ in distribution, and then di_p_value says nothing
                    about training
The rest (decision, permutations, the statistic and its null, texts per side, weights, split p-values, the
curve of p against texts per side, rows and features dropped, scores left out for missing values, the linear
model's penalty and direction; the relabelings fitted where the test may stop early) goes to the results file's
info.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Sequence

import numpy as np
from pydantic import Field, PositiveInt, model_validator

from harness.core.errors import UserError
from harness.core.results import Metric
from harness.core.task import TaskConfig
from harness.metrics import dataset_inference as di
from harness.metrics.blind import label_free_features

# a score missing (absent or not finite) on more than this share of a group's texts is left out of its test there,
# so that one attack cannot shrink the pool: ReCaLL's prefix and text over the reference GPT-2s' 512-token context
# leave 114 of 327 texts without a ReCaLL score at 128 words, and dropping those rows cost the test a third of its
# texts (issue 77, bench_di_direction's `missing`); below it, the few rows missing it are dropped instead (ReCaLL's
# own prefix text, say)
MISSING_SHARE = 0.05
GUARD_FAILS = ("dataset inference's IID guard rejects ({where}; alpha {alpha:g}): the suspect and validation texts "
               "differ in distribution without the model, so a small di_p_value there is no evidence of training")


class DatasetInferenceConfig(TaskConfig):
    """Dataset inference's settings, shared by the tasks that report it."""

    dataset_inference: bool = Field(True, description="dataset inference (Maini et al. 2024): one p-value for "
                                    "the whole suspect set (label 1) against the validation set (label 0), from "
                                    "the attack scores, with its IID guard; off: not computed")
    di_alpha: float = Field(0.05, gt=0, lt=1, description="dataset inference: the level at which the p-value "
                            "(and the IID guard's) rejects")
    di_splits: PositiveInt = Field(di.SPLITS, description="dataset inference: seeded fit/test splits whose mean "
                                   "z-score is the test statistic")
    di_permutations: PositiveInt = Field(di.PERMUTATIONS, description="dataset inference: random relabelings of "
                                         "the texts that calibrate the statistic; the smallest p-value is "
                                         "1 / (permutations + 1), and the cost grows with them")
    di_penalty: float = Field(di.PENALTY, ge=0, allow_inf_nan=False, description="dataset inference: the L2 "
                              "(ridge) penalty of the linear model that combines the scores, on the mean log-loss "
                              "of standardised scores; 0: unpenalised, as linear_di.py fits it")
    di_direction: Literal["seen", "any"] = Field(
        di.DIRECTION, description="dataset inference: 'seen', the linear model weighs every score only in its "
        "direction of 'trained on' (higher = more seen), so only a suspect set that looks more trained on than the "
        "validation set is told so; 'any', any sign, as linear_di.py fits it: any difference between the sets "
        "(a validation set the model trained on, say) can make the suspect set look trained on")

    @model_validator(mode="after")
    def _permutations_reach_alpha(self) -> "DatasetInferenceConfig":
        if self.dataset_inference and 1 / (self.di_permutations + 1) > self.di_alpha:
            raise ValueError(f"--di-permutations {self.di_permutations} cannot give a p-value at or below --di-alpha "
                             f"{self.di_alpha:g} (the smallest is 1 / (permutations + 1)); use at least "
                             f"{di.min_permutations(self.di_alpha)}")
        return self


def check_sides(config: DatasetInferenceConfig, labels: Sequence[int], where: str) -> None:
    """When the user asked for dataset inference (named one of its settings), a UserError if a side has fewer
    texts than one split needs (`dataset_inference.MIN_PER_SIDE`). Left at its defaults it runs where the
    texts allow and says where they do not (info `not_run`), so a small run of the other metrics still works."""
    asked = config.model_fields_set & {"dataset_inference", "di_alpha", "di_splits", "di_permutations",
                                       "di_penalty", "di_stop_early", "di_direction"}
    if not (config.dataset_inference and asked):
        return
    suspect = int(np.sum(np.asarray(labels) == 1))
    validation = len(labels) - suspect
    if min(suspect, validation) < di.MIN_PER_SIDE:
        raise UserError(f"{where}: dataset inference needs at least {di.MIN_PER_SIDE} texts on each side, got "
                        f"{suspect} suspect (label 1) and {validation} validation (label 0); more texts, or "
                        f"--dataset-inference false")


def feature_matrix(rows: Sequence[dict[str, float]], names: Sequence[str]
                   ) -> tuple[np.ndarray, list[str], dict[str, int]]:
    """Texts x features of the `names` the test reads (in `names`' order), NaN where a row lacks one (dataset
    inference then drops that row); and the names left out, with the texts missing them: those no row holds
    (0), and those missing (absent or not finite) on more than MISSING_SHARE of the rows. Which scores are left
    out depends on the texts only, never on their labels, so the test stays exact."""
    missing = {name: sum(not np.isfinite(row.get(name, np.nan)) for row in rows) for name in names}
    left_out = {name: count for name, count in missing.items()
                if count == len(rows) or count > MISSING_SHARE * len(rows)}
    present = [name for name in names if name not in left_out]
    x = np.array([[row.get(name, np.nan) for name in present] for row in rows], dtype=float)
    x = x.reshape(len(rows), len(present))
    return x, present, {name: count for name, count in left_out.items() if count < len(rows)}


@dataclass
class Report:
    """One group's dataset inference: its metrics, its info entry and the guard's p-value when it rejects."""

    metrics: list[Metric] = field(default_factory=list)
    info: dict = field(default_factory=dict)
    guard_rejected: float | None = None


def rounded(values: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in values.items()}


def null_figures(found: di.DatasetInferenceResult, names: Sequence[str] = ("null_mean", "null_sd", "null_sds")
                 ) -> dict:
    """The null's mean, standard deviation and the statistic's distance from it in null standard deviations,
    rounded, from a test that fitted every relabeling; from one that stopped early none of them, and why."""
    if found.null_absent:
        return {"null_absent": found.null_absent}
    return {name: round(getattr(found, name), 2 if name == "null_sds" else 4) for name in names}


def dataset_inference_report(labels: Sequence[int], scores: Sequence[dict[str, float]], names: Sequence[str],
                             tags: dict[str, str], config: DatasetInferenceConfig, seed: int,
                             stop_early: bool = False) -> Report:
    """`dataset_inference` of suspect (label 1) against validation (label 0) texts on the `names` scores
    (one dict per text), as metric `di_p_value` with `tags` and an info entry (the IID guard, once per run,
    is `guard_report`). Too few texts with finite scores on a side: no metric, and the
    info entry says why. `stop_early`: the tests stop once their answer is known (`dataset_inference`'s);
    the info then also counts the relabelings fitted."""
    report = Report()
    labels = np.asarray(labels, dtype=int)
    x, present, left_out = feature_matrix(scores, names)
    try:
        if not present:
            raise UserError("no attack score to use")
        found = di.dataset_inference(x, labels, present, alpha=config.di_alpha, n_splits=config.di_splits,
                                     permutations=config.di_permutations, seed=seed, stop_early=stop_early,
                                     penalty=config.di_penalty, direction=config.di_direction)
    except UserError as err:
        report.info["not_run"] = str(err)
    else:
        report.metrics += [Metric(name="di_p_value", value=found.p_value, n=found.n_suspect + found.n_validation,
                                  tags=tags),
                           Metric(name="di_share_lower", value=found.share_lower, n=found.n_suspect, tags=tags)]
        report.info |= {"p_value": found.p_value, "rejected": found.rejected, "alpha": found.alpha,
                        "permutations": found.permutations, "size": round(found.size, 4),
                        "statistic": round(found.statistic, 4), **null_figures(found), "n_suspect": found.n_suspect,
                        "n_validation": found.n_validation,
                        "n_train_per_side": found.n_train_per_side, "features": present,
                        "weights": rounded(found.weights), "split_p_values": list(found.split_p_values),
                        "curve": [list(point) for point in found.curve], "dropped_rows": found.dropped_rows,
                        "dropped_features": list(found.dropped_features), "left_out": left_out,
                        "penalty": found.penalty, "direction": found.direction,
                        "share_lower": round(found.share_lower, 4), "share_confidence": di.SHARE_CONFIDENCE}
        if stop_early:
            report.info["relabelings"] = found.relabelings
    return report


def guard_report(labels: Sequence[int], texts: Sequence[str], tags: dict[str, str], config: DatasetInferenceConfig,
                 seed: int, stop_early: bool = False) -> Report:
    """The IID guard (`dataset_inference.iid_guard`) on `blind.label_free_features` of the texts:
    `guard_report_on` of those features."""
    x, names = label_free_features(list(texts))
    return guard_report_on(labels, x, names, tags, config, seed, stop_early)


def guard_report_on(labels: Sequence[int], x: np.ndarray, names: Sequence[str], tags: dict[str, str],
                    config: DatasetInferenceConfig, seed: int, stop_early: bool = False) -> Report:
    """The IID guard on texts x label-free features `x` (columns `names`): metric `di_guard_p_value` with
    `tags`, an info entry, and its p-value as `guard_rejected` when it rejects at `di_alpha`. `stop_early`
    as in `dataset_inference_report`."""
    report = Report()
    names = list(names)
    try:
        guard = di.iid_guard(np.asarray(x, dtype=np.float64).reshape(len(labels), len(names)),
                             np.asarray(labels, dtype=int), names, alpha=config.di_alpha,
                             n_splits=config.di_splits, permutations=config.di_permutations, seed=seed,
                             stop_early=stop_early, penalty=config.di_penalty)
    except UserError as err:
        report.info["not_run"] = str(err)
        return report
    report.metrics.append(Metric(name="di_guard_p_value", value=guard.p_value,
                                 n=guard.detail.n_suspect + guard.detail.n_validation, tags=tags))
    report.info |= {"p_value": guard.p_value, "shifted": guard.shifted, **null_figures(guard.detail, ("null_sds",)),
                    "features": names,
                    "weights": rounded(guard.detail.weights)}
    if stop_early:
        report.info["relabelings"] = guard.detail.relabelings
    if guard.shifted:
        report.guard_rejected = guard.p_value
    return report


def guard_warning(rejected: dict[str, float], alpha: float) -> str | None:
    """The one warning line for every group whose guard rejected (group name -> guard p-value, e.g.
    {"128 words": 3e-5}), None when none did."""
    if not rejected:
        return None
    where = ", ".join(f"p = {p:.2g} at {group}" for group, p in rejected.items())
    return GUARD_FAILS.format(where=where, alpha=alpha)
