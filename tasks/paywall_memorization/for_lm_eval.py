"""Paywall memorization as an lm-evaluation-harness task (`generate_until`, greedy).

Each document is one article's prompt and reference. membench generates, per example, exactly as
many new tokens as its reference has (`data.reference_budgets`) and cuts a prompt too long for
the context to its last tokens (`generation.prompt_cuts`); lm-eval's generation settings are one
per task, so the exported task class `PaywallGeneration` sets `max_gen_toks` per document, and
the document's prompt is the text of the very tokens membench generates from: BOS plus the prompt,
or the decoded cut. `doc_item` scores the generation with membench's `forward_match` and
`approximate_memorization` (after the same `lstrip`), and `aggregate` is `memorization_summary`
per member group. The per-length bins of `membench evaluate` are not exported.
"""

from __future__ import annotations

import numpy as np
from lm_eval.api.task import ConfigurableTask

from harness.core.errors import UserError
from harness.interop.lm_eval_export import ExportedMetric, LmEvalTask
from harness.metrics import memorization as m
from harness.scoring.batching import DEFAULT_CONTEXT
from harness.scoring.generation import prompt_cuts
from tasks.paywall_memorization.data import GROUPS, PaywallData, reference_budgets

SUMMARY_METRICS = ("eidetic_max", "eidetic_mean", "approximate_mean", "approximate_median")


def export(task, data: PaywallData, config, tokenizer, context: int | None) -> LmEvalTask:
    """One document per example: its prompt as generation input, reference and token budget."""
    if config.generation_end != "budget":
        raise UserError("paywall_memorization: --generation-end sentence cannot be exported (lm-evaluation-harness "
                        "stops at a string, not where pysbd ends the first sentence); export with --generation-end "
                        "budget")
    examples = data.examples
    prompts = [e.prompt for e in examples]
    encoded, cut, budgets, _, _ = prompt_cuts(tokenizer, prompts, reference_budgets(tokenizer, examples),
                                           context or DEFAULT_CONTEXT)
    docs, not_round_tripped = [], 0
    for example, prompt, full, ids, budget in zip(examples, prompts, encoded, cut, budgets):
        if len(ids) == len(full):
            text = (tokenizer.bos_token if tokenizer.bos_token_id is not None else "") + prompt
        else:
            text = tokenizer.decode(ids)
            not_round_tripped += tokenizer(text, add_special_tokens=False)["input_ids"] != list(ids)
        docs.append({"id": example.article_id, "label": example.label, "public_words": example.public_words,
                     "prompt": text, "reference": example.reference, "max_new_tokens": budget})
    groups = [group for label, group in GROUPS.items() if any(e.label == label for e in examples)]
    metrics = [ExportedMetric(f"{name}_{group}", name, {"group": group, "bin": "all"}, False)
               for group in groups for name in SUMMARY_METRICS]
    notes = []
    if not_round_tripped:
        notes.append(f"{not_round_tripped} cut prompts do not re-tokenize to the tokens membench generates from; "
                     "their generations may differ")
    settings = {"output_type": "generate_until", "doc_to_text": "prompt", "doc_to_target": "reference",
                "generation_kwargs": {"until": [], "do_sample": False, "max_gen_toks": max(budgets, default=1)}}
    return LmEvalTask(
        name="membench_paywall_memorization", entry_name=task.NAME, version=task.VERSION,
        config=config.model_dump(mode="json"), data_source=data.source, headline=task.HEADLINE, summary=[],
        settings=settings, docs=docs, metrics=metrics, module=__name__, task_class="PaywallGeneration",
        counts={"articles": data.n_articles, "too_short_to_split": data.n_too_short,
                "prompts_cut": sum(len(c) < len(e) for c, e in zip(cut, encoded)),
                **{group: sum(GROUPS[e.label] == group for e in examples) for group in groups}},
        notes=notes)


def doc_item(doc: dict, results: list) -> list:
    """[label, eidetic, approximate] of the document's generation."""
    generation = results[0].lstrip()
    return [doc["label"], m.forward_match(generation, doc["reference"]),
            m.approximate_memorization(generation, doc["reference"])]


def aggregate(items: list, name: str, tags: dict[str, str]) -> float | None:
    """One of `memorization_summary`'s values over one member group."""
    rows = [item for item in items if GROUPS[item[0]] == tags["group"]]
    if not rows:
        return None
    return m.memorization_summary(np.array([r[1] for r in rows]), np.array([r[2] for r in rows]))[name]


class PaywallGeneration(ConfigurableTask):
    """lm-eval's configurable task with `max_gen_toks` taken from each document."""

    def __init__(self, config: dict | None = None, **kwargs):
        # lm-eval hands the YAML's own `class` key on to the constructor, which TaskConfig rejects
        super().__init__(config={k: v for k, v in (config or {}).items() if k != "class"}, **kwargs)

    def construct_requests(self, doc, ctx, **kwargs):
        request = super().construct_requests(doc, ctx, **kwargs)
        request.arguments[1]["max_gen_toks"] = doc["max_new_tokens"]
        return request
