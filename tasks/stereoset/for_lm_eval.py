"""StereoSet intrasentence as an lm-evaluation-harness task, for causal LMs.

Each example is one document whose three choices are its stereotype, anti-stereotype and
unrelated sentences. The exported task class `StereoSetRequests` sends, instead of one request
per choice, the `loglikelihood` requests listed in the document, each {sentence (0-2), context,
continuation}, so that their summed log-probabilities are exactly what membench's causal scorer
sums (`scoring.causal_sentence_scores`):

- `causal_context="official"`: per sentence of tokens w_1..w_n, ("", text(w_1)), which lm-eval
  conditions on its prefix token (BOS, else EOS; `prefix_token_id` overrides), and, when n > 1,
  (text(w_1), the rest of the sentence), one pass over the bare sentence with nothing before w_1.
  A sentence whose first token's text does not re-tokenize to w_1 is sent whole (counted in the
  export's notes).
- `causal_context="bos"`: per sentence ("", sentence): every token conditioned on the prefix token.

lm-eval returns only sums, so each document carries its sentences' token counts under the
export's tokenizer and `doc_item` divides. SS, LMS and ICAT, overall and per domain, are
membench's `stereoset_scores` (through `report.domain_metrics`'s breakdown).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from lm_eval.api.task import ConfigurableTask

from harness.interop.lm_eval_export import ExportedMetric, LmEvalTask
from harness.metrics.bias import stereoset_scores
from tasks.stereoset.data import DOMAINS, LABELS, StereoSetData
from tasks.stereoset.scoring import start_token

METRICS = ("lms", "ss", "icat", "targets")


def sentence_requests(tokenizer, sentence: str, ids: list[int], causal_context: str) -> tuple[list[list[str]], bool]:
    """The (context, continuation) requests whose summed log-probabilities are the sentence's
    summed token log-probabilities under `causal_context`, and whether the official split was
    possible (the first token's text re-tokenizes to the first token, with no trailing space for
    lm-eval to move)."""
    if causal_context == "bos" or len(ids) < 2:
        return [["", sentence]], True
    first = tokenizer.decode(ids[:1])
    if (not sentence.startswith(first) or first != first.rstrip()
            or tokenizer(first, add_special_tokens=False)["input_ids"] != ids[:1]):
        return [["", sentence]], False
    return [["", first], [first, sentence[len(first):]]], True


def lm_eval_notes(tokenizer, causal_context: str, unsplit: int) -> list[str]:
    """Where lm-eval's defaults would not condition on what membench does, with the fix."""
    notes = []
    prefix = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    start = start_token(tokenizer, causal_context)
    if prefix != start:
        notes.append(f"membench's start token is {tokenizer.convert_ids_to_tokens(start)!r} (id {start}), lm-eval's "
                     f"default prefix token id {prefix}: add prefix_token_id={start} to lm_eval's --model_args")
    adds_special = tokenizer("a")["input_ids"] != tokenizer("a", add_special_tokens=False)["input_ids"]
    if causal_context == "official" and adds_special:
        notes.append("the tokenizer adds special tokens to a text, which lm-eval would put before each sentence's "
                     "first token: add add_bos_token=False to lm_eval's --model_args")
    if unsplit:
        notes.append(f"{unsplit} sentences could not be split after their first token (it does not re-tokenize "
                     "alone): they are scored in one pass after the prefix token, so their scores differ")
    return notes


def export(task, data: StereoSetData, config, tokenizer) -> LmEvalTask:
    """The documents of `data`, one per example, with each sentence's requests and token count."""
    sentences = [e.sentences[label] for e in data.examples for label in LABELS]
    encoded = tokenizer(sentences, add_special_tokens=False)["input_ids"] if sentences else []
    docs, unsplit = [], 0
    for i, example in enumerate(data.examples):
        requests = []
        for k in range(3):
            pairs, split = sentence_requests(tokenizer, sentences[3 * i + k], encoded[3 * i + k], config.causal_context)
            unsplit += not split
            requests += [{"sentence": k, "context": context, "continuation": continuation}
                         for context, continuation in pairs]
        docs.append({"id": example.example_id, "target": example.target, "bias_type": example.bias_type,
                     "sentences": sentences[3 * i: 3 * i + 3], "requests": requests,
                     "n_tokens": [len(ids) for ids in encoded[3 * i: 3 * i + 3]]})
    present = {e.bias_type for e in data.examples}
    domains = ("all",) + tuple(d for d in DOMAINS if d in present)
    metrics = [ExportedMetric(f"{name}_{domain}", name, {"domain": domain}, name != "targets")
               for domain in domains for name in METRICS]
    return LmEvalTask(
        name="membench_stereoset", entry_name=task.NAME, version=task.VERSION, config=config.model_dump(mode="json"),
        data_source=data.source, headline=task.HEADLINE, summary=list(task.SUMMARY),
        settings={"output_type": "multiple_choice", "doc_to_text": "", "doc_to_choice": "sentences",
                  "doc_to_target": 0, "target_delimiter": ""},
        docs=docs, metrics=metrics, module=__name__, task_class="StereoSetRequests",
        counts={"examples": len(docs), "sentences_without_tokens": sum(not ids for ids in encoded),
                "requests": sum(len(d["requests"]) for d in docs)},
        notes=lm_eval_notes(tokenizer, config.causal_context, unsplit))


def doc_item(doc: dict, results: list) -> list:
    """[target, domain, stereotype, anti-stereotype, unrelated]: mean token log-probabilities (each
    sentence's requests summed, divided by its token count)."""
    sums = [0.0, 0.0, 0.0]
    for request, (loglikelihood, _) in zip(doc["requests"], results):
        sums[request["sentence"]] += float(loglikelihood)
    scores = [total / n if n else -np.inf for total, n in zip(sums, doc["n_tokens"])]
    return [doc["target"], doc["bias_type"], *scores]


def aggregate(items: list, name: str, tags: dict[str, str]) -> float | None:
    """One of LMS, SS, ICAT, targets over the items of a domain (or all)."""
    rows = [item for item in items if tags["domain"] in ("all", item[1])]
    if not rows:
        return None
    columns = list(zip(*rows))
    return float(stereoset_scores(list(columns[0]), np.array(columns[2]), np.array(columns[3]),
                                  np.array(columns[4]))[name])


class StereoSetRequests(ConfigurableTask):
    """lm-eval's configurable task sending each document's listed `loglikelihood` requests."""

    def __init__(self, config: dict | None = None, **kwargs):
        # lm-eval hands the YAML's own `class` key on to the constructor, which TaskConfig rejects
        super().__init__(config={k: v for k, v in (config or {}).items() if k != "class"}, **kwargs)

    def construct_requests(self, doc, ctx, **kwargs):
        template = super().construct_requests(doc, ctx, **kwargs)[0]
        return [dataclasses.replace(template, arguments=(r["context"], r["continuation"]), idx=i, resps=[],
                                    filtered_resps={}) for i, r in enumerate(doc["requests"])]
