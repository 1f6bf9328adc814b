"""finetune_memorization's reporting stage: every metric, count, sample and info field from the records, a
pure function (no model, no torch; `harness.core.task.Task.report`).

Records (`FinetuneMemorization.score`):

    {"texts": [{"id": <text id>, "label": 1 (member) | 0, "reference": <its continuation, stripped>,
                "blind": {"blind_bow": p, "blind_date": s} (the blind baselines' out-of-fold scores, each
                         where it ran)}, ...] (in the data's order),
     "too_short": <texts left out for fewer than --words words>,
     "checkpoints": [{"id": "<trained_on>@<epoch>", "epoch": e, "trained_on": "members" | "non_members",
                      "continuations": <whether its greedy continuations were made>}, ...] (in measuring order),
     "readings": [{"id": "<checkpoint>/<text id>", "checkpoint": <its id>, "text": <text id>,
                   "scores": {<score name>: value (NaN and +-inf as computed)},
                   "tokens": n, "argmax_hits": n (where the text had a scored token),
                   "log_pz": natural log of p_z (-inf where p_z = 0; with --extraction),
                   "generation": <the greedy continuation, stripped> (at a checkpoint with continuations)}, ...],
     "guard": {"features": [[...], ...], "names": [...]} (the IID guard's label-free features of the texts,
              `harness.metrics.blind.label_free_features`, a row per text),
     "facts": {data_source, training (each training's facts and the recipe), training_memory,
               evaluation_seconds (per checkpoint: its model passes), blind, extraction (scheme, targets)}}

Eidetic and approximate memorization are computed here from each generation and its text's reference, the
extraction metrics from log p_z, exact memorization from the token counts, dataset inference and its guard
from the scores and the features.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from harness.core.errors import UserError
from harness.core.records import Records, facts, number, record_list, whole
from harness.core.results import Metric
from harness.core.task import TaskResult
from harness.metrics import memorization as m
from harness.metrics.dataset_report import dataset_inference_report, guard_report_on, guard_warning
from harness.metrics.extraction_report import extraction_info, floored_log10, probability_gaps, probability_metrics
from harness.metrics.membership_report import score_detection, score_names

HEADLINE_SCORE = "min_k_20"
GROUPS = {1: "members", 0: "non_members"}
BLIND_SCORES = ("blind_bow", "blind_date")
# what the scoring records about its run, in the order info lists it
FACTS = ("data_source", "training", "training_memory", "evaluation_seconds", "blind")


def exact_memorization(labels: list[int], facts_of: dict[int, dict], tags: dict[str, str]) -> list[Metric]:
    """Exact memorization (Tirumala et al. 2022): the share of a group's scored tokens that are the
    model's argmax prediction given the true prefix (pooled over the group's tokens); and the gap,
    members minus non-members. `facts_of`: text index -> {tokens, argmax_hits}, the texts scored."""
    shares = {}
    out = []
    for label, group in GROUPS.items():
        chosen = [facts_of[i] for i, own in enumerate(labels) if own == label and i in facts_of]
        tokens = sum(f["tokens"] for f in chosen)
        shares[group] = sum(f["argmax_hits"] for f in chosen) / tokens if tokens else None
        out.append(Metric(name="exact_memorization", value=shares[group], n=tokens, tags={"group": group, **tags}))
    gap = None if None in shares.values() else shares["members"] - shares["non_members"]
    out.append(Metric(name="exact_memorization", value=gap, n=len(facts_of), tags={"group": "gap", **tags}))
    return out


def continuation_metrics(labels: list[int], eidetic: np.ndarray, approximate: np.ndarray,
                         tags: dict[str, str]) -> list[Metric]:
    """paywall_memorization's metrics of the greedy continuations per group (eidetic max and mean,
    approximate mean and median), and the gap of the approximate mean, members minus non-members."""
    out, means = [], {}
    for label, group in GROUPS.items():
        chosen = [i for i, own in enumerate(labels) if own == label]
        summary = m.memorization_summary(eidetic[chosen], approximate[chosen])
        means[group] = summary["approximate_mean"]
        out += [Metric(name=name, value=value, n=len(chosen), tags={"group": group, **tags})
                for name, value in summary.items()]
    out.append(Metric(name="approximate_mean", value=means["members"] - means["non_members"], n=len(labels),
                      tags={"group": "gap", **tags}))
    return out


def extraction_metrics(labels: np.ndarray, log_p: np.ndarray, config, tags: dict[str, str]) -> list[Metric]:
    """Per group (members, non-members) the continuations' extraction metrics
    (`extraction_report.probability_metrics`), and members minus non-members (group `gap`)."""
    out = []
    for label, group in GROUPS.items():
        out += probability_metrics(log_p[labels == label], config, {"group": group, **tags})
    out += probability_gaps(log_p[labels == 1], log_p[labels == 0], config, {"group": "gap", **tags})
    return out


def epochs_to_threshold(metrics: list[Metric], epochs: list[int], threshold: float) -> int | None:
    """The first measured epoch (0 included) whose headline AUC, trained on the members, reaches
    `threshold`; None when none does."""
    for epoch in [0, *sorted(epochs)]:
        found = [x.value for x in metrics if x.name == "auc" and x.tags == {
            "score": HEADLINE_SCORE, "epoch": str(epoch), "trained_on": "members"}]
        if found and found[0] is not None and found[0] >= threshold:
            return epoch
    return None


def checked_texts(records: Records) -> list[dict]:
    """The text records, checked: a label 0 or 1, a reference, blind scores in [0, 1] each on every text or
    none; both classes present."""
    texts = record_list(records, "texts", "text")
    for t in texts:
        where = f"text {t['id']!r}"
        if t.get("label") not in (0, 1) or isinstance(t.get("label"), bool):
            raise UserError(f"records: {where} has label {t.get('label')!r}, not 1 (member) or 0 (non-member)")
        if not isinstance(t.get("reference"), str) or not isinstance(t.get("blind"), dict):
            raise UserError(f"records: {where} needs its reference (text) and blind scores (an object)")
        for name, value in t["blind"].items():
            if name not in BLIND_SCORES:
                raise UserError(f"records: {where} has an unknown blind score {name!r}")
            number(value, f"{where} {name}", 0, 1)
    for name in BLIND_SCORES:
        if len({name in t["blind"] for t in texts}) > 1:
            raise UserError(f"records: {name} is on some texts only; a blind baseline scores every text or none")
    for label, group in GROUPS.items():
        if not any(t["label"] == label for t in texts):
            raise UserError(f"records: no text of label {label} ({group}); the report needs both classes")
    return texts


def checked_checkpoints(records: Records) -> list[dict]:
    """The checkpoint records, checked: an epoch >= 0, trained on members or non-members, id `<trained_on>@<epoch>`."""
    checkpoints = record_list(records, "checkpoints", "checkpoint")
    for c in checkpoints:
        where = f"checkpoint {c['id']!r}"
        epoch = whole(c.get("epoch"), f"{where} epoch")
        if c.get("trained_on") not in GROUPS.values() or c["id"] != f"{c['trained_on']}@{epoch}":
            raise UserError(f"records: {where} needs trained_on members or non_members and the id <trained_on>@<epoch>")
        if not isinstance(c.get("continuations"), bool):
            raise UserError(f"records: {where} needs continuations (true or false)")
    return checkpoints


def checked_readings(records: Records, texts: list[dict], checkpoints: list[dict], names: list[str],
                     config) -> dict[tuple[str, str], dict]:
    """The readings, checked, by (checkpoint id, text id): one of every text at every checkpoint, scores among
    `names` (numbers; NaN where undefined), tokens >= 1 with at most as many argmax hits, log p_z <= 0 (with
    --extraction), a generation (at a checkpoint with continuations)."""
    text_ids = {t["id"] for t in texts}
    kinds = {c["id"]: c for c in checkpoints}
    found = {}
    for r in record_list(records, "readings", "reading"):
        where = f"reading {r['id']!r}"
        if r.get("checkpoint") not in kinds or r.get("text") not in text_ids or \
                r["id"] != f"{r['checkpoint']}/{r['text']}":
            raise UserError(f"records: {where} needs a checkpoint and a text of the records (id <checkpoint>/<text>)")
        if not isinstance(r.get("scores"), dict):
            raise UserError(f"records: {where} has no scores")
        for name, value in r["scores"].items():
            if name not in names:
                raise UserError(f"records: {where} has a score {name!r} the config's attacks do not make")
            number(value, f"{where} score {name}", nan=True)
        if ("tokens" in r) != ("argmax_hits" in r):
            raise UserError(f"records: {where} needs both tokens and argmax_hits, or neither (no scored token)")
        if "tokens" in r:
            whole(r["argmax_hits"], f"{where} argmax_hits", 0, whole(r["tokens"], f"{where} tokens", 1))
        if config.extraction:
            number(r.get("log_pz"), f"{where} log_pz", high=0)
        if kinds[r["checkpoint"]]["continuations"] and not isinstance(r.get("generation"), str):
            raise UserError(f"records: {where} needs its generation (text)")
        found[r["checkpoint"], r["text"]] = r
    for c in checkpoints:
        for t in texts:
            if (c["id"], t["id"]) not in found:
                raise UserError(f"records: checkpoint {c['id']!r} has no reading of text {t['id']!r}")
    return found


def checked_guard(records: Records, n_texts: int) -> tuple[list[list[float]], list[str]]:
    """The IID guard's features: a row of finite numbers per text, one per name."""
    guard = records.get("guard")
    if not isinstance(guard, dict) or not isinstance(guard.get("names"), list) or \
            not isinstance(guard.get("features"), list) or len(guard["features"]) != n_texts:
        raise UserError(f"records: guard needs names and features (a row per text, {n_texts})")
    for index, row in enumerate(guard["features"]):
        if not isinstance(row, list) or len(row) != len(guard["names"]):
            raise UserError(f"records: guard features[{index}] needs a value per name ({len(guard['names'])})")
        for value in row:
            number(value, f"guard features[{index}]", -math.inf, math.inf)
            if not math.isfinite(value):
                raise UserError(f"records: guard features[{index}] holds {value!r}, not a finite number")
    return guard["features"], guard["names"]


def sample(text: dict, checkpoint: dict, reading: dict, continuation: tuple[str, int, float] | None,
           log10_pz: float | None) -> dict[str, Any]:
    """One text's record at one checkpoint (`--log-samples`); log10_pz floored at LOG10_PZ_FLOOR."""
    row: dict[str, Any] = {"id": text["id"], "label": text["label"], "epoch": checkpoint["epoch"],
                           "trained_on": checkpoint["trained_on"],
                           "scores": {k: v if math.isfinite(v) else None for k, v in reading["scores"].items()}}
    if "tokens" in reading:
        row |= {"tokens": reading["tokens"], "argmax_hits": reading["argmax_hits"]}
    if continuation is not None:
        row |= {"generation": continuation[0], "eidetic": int(continuation[1]), "approximate": continuation[2]}
    if log10_pz is not None:
        row["log10_pz"] = log10_pz
    return row


def report(records: Records, config, seed: int) -> TaskResult:
    names = score_names(config.k_percents, config.attacks)
    # dataset inference leaves out dc_pdd: its token frequencies are the non-members', so its scores depend
    # on the labels (the non-members' own tokens are counted, lowering their scores on any model)
    inference_features = [name for name in names if name != "dc_pdd"]
    texts, checkpoints = checked_texts(records), checked_checkpoints(records)
    readings = checked_readings(records, texts, checkpoints, names, config)
    found = facts(records)
    missing = [key for key in FACTS + (("extraction",) if config.extraction else ()) if key not in found]
    if missing:
        raise UserError(f"records: facts lack {', '.join(missing)}")
    labels = [t["label"] for t in texts]
    label_array = np.array(labels)
    metrics, samples, inference = [], [], {}
    for c in checkpoints:
        tags = {"epoch": str(c["epoch"]), "trained_on": c["trained_on"]}
        rows = [readings[c["id"], t["id"]] for t in texts]
        scores = [r["scores"] for r in rows]
        metrics += score_detection(labels, scores, names, tags, config.fpr_levels, config.bootstrap_resamples,
                                   seed)[0]
        if config.dataset_inference:
            result = dataset_inference_report(labels, scores, inference_features, tags, config, seed)
            metrics += result.metrics
            inference[c["id"]] = result.info
        metrics += exact_memorization(labels, {i: r for i, r in enumerate(rows) if "tokens" in r}, tags)
        log10_pz = [None] * len(texts)
        if config.extraction:
            log_p = np.array([r["log_pz"] for r in rows], dtype=np.float64)
            metrics += extraction_metrics(label_array, log_p, config, tags)
            log10_pz = floored_log10(log_p).tolist()
        continuations = [None] * len(texts)
        if c["continuations"]:
            generated = [r["generation"] for r in rows]
            eidetic = np.array([m.forward_match(g, t["reference"]) for g, t in zip(generated, texts)])
            approximate = np.array([m.approximate_memorization(g, t["reference"]) for g, t in zip(generated, texts)])
            metrics += continuation_metrics(labels, eidetic, approximate, tags)
            continuations = list(zip(generated, eidetic.tolist(), approximate.tolist()))
        samples += [sample(t, c, r, continuations[i], log10_pz[i]) for i, (t, r) in enumerate(zip(texts, rows))]
    reached = epochs_to_threshold(metrics, list(config.epochs), config.auc_threshold)
    metrics.append(Metric(name="epochs_to_auc", value=reached, n=len(texts),
                          tags={"score": HEADLINE_SCORE, "threshold": f"{config.auc_threshold:g}"}))
    # the blind baselines: one reading of the texts for every checkpoint
    metrics += score_detection(labels, [t["blind"] for t in texts], BLIND_SCORES, {}, config.fpr_levels,
                               config.bootstrap_resamples, seed)[0]
    warnings = []
    if config.dataset_inference:  # the guard sees the texts only: one reading for every checkpoint
        features, feature_names = checked_guard(records, len(texts))
        guard = guard_report_on(labels, features, feature_names, {}, config, seed)
        metrics += guard.metrics
        inference["guard"] = guard.info
        rejected = {} if guard.guard_rejected is None else {"every checkpoint": guard.guard_rejected}
        warnings += [w for w in [guard_warning(rejected, config.di_alpha)] if w]
    members = sum(label == 1 for label in labels)
    counts = {"members": members, "non_members": len(texts) - members,
              "too_short": whole(records.get("too_short"), "too_short"), "texts": len(texts)}
    info = {key: found[key] for key in FACTS}
    info |= {"epochs_to_auc": (f"epoch {reached}" if reached is not None
                               else f"not reached within {max(config.epochs)} epochs"),
             "checkpoint": "epoch 0 is the evaluated checkpoint itself"}
    if config.extraction:  # the scoring's facts, with the attempts and level reported
        scored = found["extraction"]
        info["extraction"] = extraction_info(scored["scheme"], config, scored["targets"])
    if inference:
        info["dataset_inference"] = inference
    return TaskResult(metrics=metrics, counts=counts, samples=samples, info=info, warnings=warnings)
