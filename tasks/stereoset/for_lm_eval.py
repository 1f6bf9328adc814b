"""StereoSet intrasentence as an lm-evaluation-harness task, for causal LMs.

Each example is one `multiple_choice` document with an empty context whose three choices are its
stereotype, anti-stereotype and unrelated sentences: lm-eval sums each sentence's token
log-probabilities conditioned on its prefix token (BOS, else EOS), as membench's causal scorer
does (`scoring.option_scores`). membench's option score is the mean token log-probability, and
lm-eval returns only the sum, so each document carries its sentences' token counts under the
export's tokenizer and `doc_item` divides. SS, LMS and ICAT, overall and per domain, are
membench's `stereoset_scores` (through `task.domain_metrics`'s breakdown).
"""

from __future__ import annotations

import numpy as np

from harness.bias_metrics import stereoset_scores
from harness.lm_eval_export import ExportedMetric, LmEvalTask
from tasks.stereoset.data import DOMAINS, LABELS, StereoSetData

METRICS = ("lms", "ss", "icat", "targets")


def export(task, data: StereoSetData, config, tokenizer) -> LmEvalTask:
    """The documents of `data`, one per example, with each sentence's token count."""
    sentences = [e.sentences[label] for e in data.examples for label in LABELS]
    counts = [len(ids) for ids in tokenizer(sentences, add_special_tokens=False)["input_ids"]] if sentences else []
    docs = [{"id": e.example_id, "target": e.target, "bias_type": e.bias_type,
             "sentences": [e.sentences[label] for label in LABELS], "n_tokens": counts[3 * i: 3 * i + 3]}
            for i, e in enumerate(data.examples)]
    present = {e.bias_type for e in data.examples}
    domains = ("all",) + tuple(d for d in DOMAINS if d in present)
    metrics = [ExportedMetric(f"{name}_{domain}", name, {"domain": domain}, name != "targets")
               for domain in domains for name in METRICS]
    return LmEvalTask(
        name="membench_stereoset", entry_name=task.NAME, version=task.VERSION, config=config.model_dump(mode="json"),
        data_source=data.source, headline=task.HEADLINE, summary=list(task.SUMMARY),
        settings={"output_type": "multiple_choice", "doc_to_text": "", "doc_to_choice": "sentences",
                  "doc_to_target": 0, "target_delimiter": ""},
        docs=docs, metrics=metrics, module=__name__,
        counts={"examples": len(docs), "sentences_without_tokens": sum(n == 0 for n in counts)})


def doc_item(doc: dict, results: list) -> list:
    """[target, domain, stereotype, anti-stereotype, unrelated]: mean token log-probabilities."""
    scores = [float(ll) / n if n else -np.inf for (ll, _), n in zip(results, doc["n_tokens"])]
    return [doc["target"], doc["bias_type"], *scores]


def aggregate(items: list, name: str, tags: dict[str, str]) -> float | None:
    """One of LMS, SS, ICAT, targets over the items of a domain (or all)."""
    rows = [item for item in items if tags["domain"] in ("all", item[1])]
    if not rows:
        return None
    columns = list(zip(*rows))
    return float(stereoset_scores(list(columns[0]), np.array(columns[2]), np.array(columns[3]),
                                  np.array(columns[4]))[name])
