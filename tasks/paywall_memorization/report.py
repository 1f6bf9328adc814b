"""paywall_memorization's reporting stage: memorization and extraction metrics from the records, a pure
function (no model, no torch; `harness.core.task.Task.report`).

Records (`PaywallMemorization.score`):

    {"articles": n, "too_short_to_split": n, "start_token": <text or null>,
     "examples": [{"id", "label": 1 | 0 | null, "public_words", "reference", "sentence_end_found",
                   "generation" (the greedy continuation, as compared), "generation_sentence_end_found" (with
                   --generation-end sentence), "log_pz" (natural log; -inf where p_z = 0; with --extraction),
                   "log_near_verbatim" (log of the near-verbatim bound; NaN where not searched; with a beam)}],
     "facts": {data_source, generation, decoding, extraction, near_verbatim}}

Eidetic (forward-matching characters) and approximate memorization are computed here from each generation
and its reference (`harness.metrics.memorization`).
"""

from __future__ import annotations

import numpy as np

from harness.core.errors import UserError
from harness.core.records import Records, facts, number, record_list
from harness.core.results import Metric
from harness.core.task import TaskResult
from harness.metrics import memorization as m
from harness.metrics.extraction_report import extraction_info, finite_log10, probability_gaps, probability_metrics
from tasks.paywall_memorization.data import GROUPS


def summary(n: int, eidetic: np.ndarray, approximate: np.ndarray, tags: dict) -> list[Metric]:
    """Eidetic max and mean, approximate mean and median of a set of `n` examples."""
    return [Metric(name=name, value=value, n=n, tags=tags)
            for name, value in m.memorization_summary(eidetic, approximate).items()]


def binned(public_words: list[int], eidetic: np.ndarray, approximate: np.ndarray, group: str,
           n_bins: int) -> list[Metric]:
    """The same metrics in `n_bins` equal-count bins of public-part length (in words)."""
    order = np.argsort(public_words, kind="stable")
    out = []
    for index, part in enumerate(np.array_split(order, min(n_bins, len(order))), start=1):
        words = [public_words[i] for i in part]
        tags = {"group": group, "bin": str(index), "public_words": f"{min(words)}-{max(words)}"}
        out += summary(len(part), eidetic[part], approximate[part], tags)
    return out


def checked_examples(records: Records, config) -> list[dict]:
    """The example records, checked: a label 1, 0 or null, texts, a public length >= 1, log-probabilities <= 0."""
    examples = record_list(records, "examples", "article")
    for e in examples:
        where = f"article {e['id']!r}"
        if e.get("label") not in (0, 1, None) or isinstance(e.get("label"), bool):
            raise UserError(f"records: {where} has label {e.get('label')!r}, not 1, 0 or null")
        if not isinstance(e.get("generation"), str) or not isinstance(e.get("reference"), str):
            raise UserError(f"records: {where} needs its generation and reference (text)")
        number(e.get("public_words"), f"{where} public_words", 1)
        if config.extraction:
            number(e.get("log_pz"), f"{where} log_pz", high=0)
            if config.near_verbatim_beam:
                number(e.get("log_near_verbatim"), f"{where} log_near_verbatim", high=0, nan=True)
    return examples


def report(records: Records, config) -> TaskResult:
    examples = checked_examples(records, config)
    sentence = config.generation_end == "sentence"
    generations = [e["generation"] for e in examples]
    eidetic = np.array([m.forward_match(g, e["reference"]) for g, e in zip(generations, examples)])
    approximate = np.array([m.approximate_memorization(g, e["reference"]) for g, e in zip(generations, examples)])
    extraction = np.array([e["log_pz"] for e in examples], dtype=np.float64) if config.extraction else None
    near = (np.array([e["log_near_verbatim"] for e in examples], dtype=np.float64)
            if config.extraction and config.near_verbatim_beam else None)
    metrics_out, counts = [], {"articles": int(number(records["articles"], "articles", 0)),
                               "too_short_to_split": int(number(records["too_short_to_split"], "too_short_to_split", 0)),
                               "no_sentence_end": sum(not e["sentence_end_found"] for e in examples)}
    if sentence:
        counts["generations_without_sentence_end"] = sum(not e["generation_sentence_end_found"] for e in examples)
    chosen_of = {}
    for label, group in GROUPS.items():
        chosen = [i for i, e in enumerate(examples) if e["label"] == label]
        if not chosen:
            continue
        chosen_of[group] = chosen
        counts[group] = len(chosen)
        tags = {"group": group, "bin": "all"}
        metrics_out += summary(len(chosen), eidetic[chosen], approximate[chosen], tags)
        metrics_out += binned([examples[i]["public_words"] for i in chosen], eidetic[chosen], approximate[chosen],
                              group, config.n_bins)
        if extraction is not None:
            metrics_out += probability_metrics(extraction[chosen], config, tags)
        if near is not None and not np.isnan(near[chosen]).any():
            near_tags = {**tags, "threshold": f"{config.near_verbatim_threshold:g}"}
            metrics_out += probability_metrics(near[chosen], config, near_tags, "near_verbatim_")
    if extraction is not None and {"members", "non_members"} <= set(chosen_of):
        tags = {"group": "members_minus_non_members", "bin": "all"}
        members, others = chosen_of["members"], chosen_of["non_members"]
        metrics_out += probability_gaps(extraction[members], extraction[others], config, tags)
        if near is not None and not np.isnan(near[members + others]).any():
            metrics_out += probability_gaps(near[members], near[others], config,
                                            {**tags, "threshold": f"{config.near_verbatim_threshold:g}"},
                                            "near_verbatim_")
    samples = [{"id": e["id"], "label": e["label"], "start_token": records["start_token"],
                "public_words": e["public_words"], "reference": e["reference"],
                "generation": g, "eidetic": int(f), "approximate": float(a),
                "sentence_end_found": e["sentence_end_found"]}
               for e, g, f, a in zip(examples, generations, eidetic, approximate)]
    for k, sample in enumerate(samples):
        if sentence:
            sample["generation_sentence_end_found"] = examples[k]["generation_sentence_end_found"]
        if extraction is not None:
            sample["log10_pz"] = finite_log10(extraction[k])
        if near is not None and not np.isnan(near[k]):
            sample["log10_near_verbatim"] = finite_log10(near[k])
    info = dict(facts(records))
    if "extraction" in info:  # the scoring's facts, with the attempts and level reported
        scored = info["extraction"]
        info["extraction"] = extraction_info(scored["scheme"], config, scored["targets"],
                                             n_targets_capped=scored["n_targets_capped"])
    return TaskResult(metrics=metrics_out, counts=counts, samples=samples, info=info)
