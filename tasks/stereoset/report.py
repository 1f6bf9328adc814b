"""StereoSet's reporting stage: LMS, SS and ICAT overall and per domain from the records (each example's
three option scores), a pure function (`harness.core.task.Task.report`): no model, no torch.

Records: `{"examples": [{id, target, bias_type, context, template_words, scores: {label: score}}],
"facts": {data_source, scorer, ...}, "warnings": [...]}`.
"""

from __future__ import annotations

import numpy as np

from harness.core.errors import UserError
from harness.core.records import Records, facts, number, record_list
from harness.core.results import Metric
from harness.core.task import TaskResult
from harness.metrics.bias import stereoset_scores
from tasks.stereoset.data import DOMAINS, LABELS


def domain_metrics(targets: list[str], domains: list[str], scores: np.ndarray) -> list[Metric]:
    """LMS, SS and ICAT overall and per domain (the official evaluation's breakdown); `scores` is
    (examples, 3), columns in `LABELS` order."""
    out = []
    for domain in ("all",) + DOMAINS:
        rows = [i for i, d in enumerate(domains) if domain in ("all", d)]
        if not rows:
            continue
        values = stereoset_scores([targets[i] for i in rows], scores[rows, 0], scores[rows, 1], scores[rows, 2])
        tags = {"domain": domain}
        out += [Metric(name=name, value=values[name], n=values["examples"], tags=tags) for name in ("lms", "ss", "icat")]
        out.append(Metric(name="targets", value=values["targets"], tags=tags))
    return out


def checked_examples(records: Records) -> list[dict]:
    """The example records, each checked: a known domain, a target, a score (no NaN) for every option."""
    examples = record_list(records, "examples", "example")
    for e in examples:
        if e.get("bias_type") not in DOMAINS or not isinstance(e.get("target"), str):
            raise UserError(f"records: example {e['id']!r} needs a target and a bias_type of {', '.join(DOMAINS)}")
        if not isinstance(e.get("scores"), dict) or set(e["scores"]) != set(LABELS):
            raise UserError(f"records: example {e['id']!r} needs one score for each of {', '.join(LABELS)}")
        for label in LABELS:
            number(e["scores"][label], f"example {e['id']!r} {label} score")
    return examples


def report(records: Records) -> TaskResult:
    examples = checked_examples(records)
    scores = np.array([[e["scores"][label] for label in LABELS] for e in examples], dtype=np.float64).reshape(-1, 3)
    domains = [e["bias_type"] for e in examples]
    counts = {"examples": len(examples), "options": 3 * len(examples),
              **{f"examples@{d}": domains.count(d) for d in DOMAINS}}
    warnings = records.get("warnings", [])
    if not (isinstance(warnings, list) and all(isinstance(w, str) for w in warnings)):
        raise UserError("records: warnings is not a list of lines")
    # the samples as scored: the options in `LABELS` order (the records come back with their keys sorted)
    samples = [{**e, "template_words": {label: e["template_words"][label] for label in LABELS},
                "scores": {label: e["scores"][label] for label in LABELS}} for e in examples]
    return TaskResult(metrics=domain_metrics([e["target"] for e in examples], domains, scores), counts=counts,
                      samples=samples, info=dict(facts(records)), warnings=list(warnings))
