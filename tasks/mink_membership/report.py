"""mink_membership's reporting stage: every metric from the records, a pure function (no model, no torch;
`harness.core.task.Task.report`).

Records (`MinkMembership.score`):

    {"texts": <texts in the data>, "lengths": [L, ...], "score_names": [<attack scores, then blind ones>],
     "attacks_run": [<attacks of a second pass that ran: ref, ne, recall, dc_pdd, gradnorm>],
     "start_token": <the token prepended to every prefix, as text, or null>,
     "prefixes": [{"id": "<text id>@<L>", "text": <text id>, "label": 0|1, "length": L, "n_tokens": n,
                   "scores": {<score name>: value (NaN and +-inf as computed)}}, ...],
     "unscored": {"<L>": {"too_short": n, "no_scored_token": n}},
     "guard": {"labels": [...], "features": [[...], ...], "names": [...]} (each text at its longest scored
               prefix: the IID guard's label-free features, `harness.metrics.blind.label_free_features`),
     "facts": {data_source, scoring, bos, start_token, attacks, attack_lengths, blind, ...}}
"""

from __future__ import annotations

import logging
import math

import numpy as np

from harness.core.errors import UserError
from harness.core.records import Records, facts, number, record_list
from harness.core.task import TaskResult
from harness.metrics.dataset_report import dataset_inference_report, guard_report_on, guard_warning
from harness.metrics.membership_report import score_detection
from tasks.mink_membership.blind import best_k_metrics, blind_warning, low_fpr_support

log = logging.getLogger(__name__)

# the attacks whose scores come from a second model: dataset inference leaves them out
SECOND_MODEL = ("ref", "ne")


def inference_features(names: list[str], dc_pdd_corpus: str) -> list[str]:
    """The scores dataset inference reads: every attack's but `ref` and `ne` (a second model's) and the
    blind baselines, and `dc_pdd` only when its token frequencies do not come from the data's non-members
    (then a text's score depends on its label: the non-members' own tokens are counted, which lowers their
    scores, on any model)."""
    dropped = set(SECOND_MODEL) | ({"dc_pdd"} if dc_pdd_corpus == "nonmembers" else set())
    return [name for name in names if name not in dropped and not name.startswith("blind_")]


def checked_prefixes(records: Records, lengths: list[int]) -> list[dict]:
    """The prefix records, checked: a label 0 or 1, a length among `lengths`, a token count >= 1, a
    `<text>@<length>` id, and scores that are numbers (an undefined score: NaN)."""
    prefixes = record_list(records, "prefixes", "prefix")
    for p in prefixes:
        where = f"prefix {p['id']!r}"
        if p.get("label") not in (0, 1) or isinstance(p.get("label"), bool):
            raise UserError(f"records: {where} has label {p.get('label')!r}, not 0 or 1")
        if p.get("length") not in lengths or p["id"] != f"{p.get('text')}@{p.get('length')}":
            raise UserError(f"records: {where} needs its text id and a length among {lengths} (id <text>@<length>)")
        number(p.get("n_tokens"), f"{where} n_tokens", 1)
        if not isinstance(p.get("scores"), dict):
            raise UserError(f"records: {where} has no scores")
        for name, value in p["scores"].items():
            number(value, f"{where} score {name}", nan=True)
    return prefixes


def report(records: Records, config, seed: int) -> TaskResult:
    lengths, names = records["lengths"], records["score_names"]
    if not (isinstance(lengths, list) and all(isinstance(x, int) for x in lengths) and isinstance(names, list)):
        raise UserError("records: lengths and score_names must be lists")
    prefixes, found = checked_prefixes(records, lengths), facts(records)
    per_length: dict[int, list[tuple[int, dict[str, float]]]] = {length: [] for length in lengths}
    for p in prefixes:
        per_length[p["length"]].append((p["label"], p["scores"]))
    samples = [{"id": p["text"], "label": p["label"], "length": p["length"], "start_token": records["start_token"],
                "n_tokens": p["n_tokens"], "scores": {k: v if math.isfinite(v) else None for k, v in p["scores"].items()}}
               for p in prefixes]
    counts, metrics_out, non_finite = {}, [], {}
    for length in lengths:
        rows = per_length[length]
        labels = np.array([label for label, _ in rows], dtype=int)
        unscored = records["unscored"][str(length)]
        counts[f"members@{length}"] = int(labels.sum())
        counts[f"nonmembers@{length}"] = int(len(labels) - labels.sum())
        counts[f"too_short@{length}"] = int(number(unscored["too_short"], f"unscored {length} too_short", 0))
        counts[f"no_scored_token@{length}"] = int(number(unscored["no_scored_token"], f"unscored {length}", 0))
        counts[f"non_finite@{length}"] = sum(not all(math.isfinite(v) for v in values.values()) for _, values in rows)
        for attack in records["attacks_run"]:
            counts[f"{attack}_scored@{length}"] = sum(1 for _, values in rows if attack in values)
        found_metrics, dropped = score_detection(labels, [values for _, values in rows], names,
                                                 {"length": str(length)}, config.fpr_levels,
                                                 config.bootstrap_resamples, seed)
        metrics_out += found_metrics
        non_finite |= {f"{name}@{length}": n for name, n in dropped.items()}
    counts["texts"] = int(number(records["texts"], "texts", 0))
    metrics_out += best_k_metrics(metrics_out, config.k_percents)
    inference, rejected = {}, {}
    if config.dataset_inference:
        features = inference_features(names, config.dc_pdd_corpus)
        for length in lengths:
            if not per_length[length]:
                continue
            labels, rows = zip(*per_length[length])
            result = dataset_inference_report(labels, rows, features, {"length": str(length)}, config, seed,
                                              stop_early=config.di_stop_early)
            metrics_out += result.metrics
            inference[str(length)] = result.info
        guard = records.get("guard")
        if guard and guard["labels"]:  # the texts only: one reading for every length (IID texts, IID prefixes)
            result = guard_report_on(guard["labels"], guard["features"], guard["names"], {}, config, seed,
                                     config.di_stop_early)
            metrics_out += result.metrics
            inference["guard"] = result.info
            if result.guard_rejected is not None:
                rejected["every length"] = result.guard_rejected
    info = {**found, "low_fpr": low_fpr_support({length: counts[f"nonmembers@{length}"] for length in lengths},
                                                config.fpr_levels)}
    if inference:
        info["dataset_inference"] = inference
    warnings = [w for w in [blind_warning(metrics_out), guard_warning(rejected, config.di_alpha)] if w]
    if non_finite:
        info["non_finite_scores"] = non_finite
        log.warning("mink_membership: %d text prefixes have a non-finite score (NaN or inf; the model's outputs?); "
                    "each is left out of that score's metrics (counts non_finite@L, info.non_finite_scores)",
                    sum(counts[f"non_finite@{length}"] for length in lengths))
    empty = None
    if not metrics_out:  # the runner records the task as skipped, with this reason
        empty = (f"every text is shorter than every --lengths (the shortest is {min(lengths)} words)"
                 if all(counts[f"too_short@{length}"] == counts["texts"] for length in lengths)
                 else "no text prefix has a scored token (counts no_scored_token@L)")
    return TaskResult(metrics=metrics_out, counts=counts, samples=samples, info=info, no_metrics_reason=empty,
                      warnings=warnings)
