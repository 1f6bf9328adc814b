"""Task `paywall_memorization`: how much of an article's held-back (paywalled) part a causal LM
reproduces when prompted with the public part. Ishihara & Takahashi 2024. Definitions: README.md."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, PositiveInt

from harness.core.model_types import LoadedModel, ModelKind
from harness.core.results import Headline, Metric
from harness.core.task import MAX_SEED, RunContext, Task, TaskConfig, TaskResult, register
from harness.metrics import memorization as m
from harness.scoring.causal import token_text
from harness.scoring.generation import greedy_continuations
from tasks.paywall_memorization.data import GROUPS, Example, PaywallData, load_paywall_data, reference_budgets


class PaywallConfig(TaskConfig):
    data: str = Field("reference", description="JSONL ({id, public, private} or {id, text}, optional label) "
                      "or a reference corpus: 'reference' (English XSum) or 'reference:ja' (Japanese)")
    language: Literal["en", "ja"] = Field("en", description="word splitting: whitespace (en) or fugashi (ja)")
    reference_seed: int = Field(0, ge=0, le=MAX_SEED,
                                description="seed of the reference corpus member/non-member split")
    max_public_words: PositiveInt = Field(200, description="public part: at most this many words (and half)")
    n_bins: PositiveInt = Field(5, description="equal-count bins of public-part length")


def summary(examples: list[Example], eidetic: np.ndarray, approximate: np.ndarray, tags: dict) -> list[Metric]:
    """Eidetic max and mean, approximate mean and median of a set of examples."""
    n = len(examples)
    return [Metric(name=name, value=value, n=n, tags=tags)
            for name, value in m.memorization_summary(eidetic, approximate).items()]


def binned(examples: list[Example], eidetic: np.ndarray, approximate: np.ndarray, group: str,
           n_bins: int) -> list[Metric]:
    """The same metrics in `n_bins` equal-count bins of public-part length (in words)."""
    order = np.argsort([e.public_words for e in examples], kind="stable")
    out = []
    for number, part in enumerate(np.array_split(order, min(n_bins, len(order))), start=1):
        words = [examples[i].public_words for i in part]
        tags = {"group": group, "bin": str(number), "public_words": f"{min(words)}-{max(words)}"}
        out += summary([examples[i] for i in part], eidetic[part], approximate[part], tags)
    return out


@register
class PaywallMemorization(Task):
    NAME = "paywall_memorization"
    VERSION = 1
    DESCRIPTION = "Eidetic (forward-matching characters) and approximate (Levenshtein) memorization of held-back continuations"
    MODEL_KINDS = frozenset({ModelKind.CAUSAL_LM})
    HEADLINE = Headline(metric="approximate_mean", tags={"group": "members", "bin": "all"},
                        label="approximate memorization, members", better="lower")
    SUMMARY = (HEADLINE,
               Headline(metric="approximate_mean", tags={"group": "non_members", "bin": "all"},
                        label="approximate, non-members", better="lower"),
               Headline(metric="eidetic_mean", tags={"group": "members", "bin": "all"},
                        label="eidetic chars, members", better="lower"),
               Headline(metric="eidetic_mean", tags={"group": "non_members", "bin": "all"},
                        label="eidetic chars, non-members", better="lower"))
    Config = PaywallConfig

    def load_data(self, config: PaywallConfig, context: RunContext) -> PaywallData:
        return load_paywall_data(config.data, config.language, config.max_public_words, config.reference_seed,
                                 context.limit)

    def lm_eval_export(self, data, config, tokenizer, context):
        from tasks.paywall_memorization.for_lm_eval import export

        return export(self, data, config, tokenizer, context)

    def run(self, model: LoadedModel, data: PaywallData, config: PaywallConfig, context: RunContext) -> TaskResult:
        examples = data.examples
        tokenizer = model.tokenizer
        generations, info = greedy_continuations(model.model, tokenizer, [e.prompt for e in examples],
                                                 reference_budgets(tokenizer, examples),
                                                 batch_size=context.batch_size, progress=context.progress)
        generations = [g.lstrip() for g in generations]
        eidetic = np.array([m.forward_match(g, e.reference) for g, e in zip(generations, examples)])
        approximate = np.array([m.approximate_memorization(g, e.reference) for g, e in zip(generations, examples)])
        metrics_out, counts = [], {"articles": data.n_articles, "too_short_to_split": data.n_too_short,
                                   "no_sentence_end": sum(not e.sentence_end_found for e in examples)}
        for label, group in GROUPS.items():
            chosen = [i for i, e in enumerate(examples) if e.label == label]
            if not chosen:
                continue
            counts[group] = len(chosen)
            subset = [examples[i] for i in chosen]
            metrics_out += summary(subset, eidetic[chosen], approximate[chosen], {"group": group, "bin": "all"})
            metrics_out += binned(subset, eidetic[chosen], approximate[chosen], group, config.n_bins)
        start = token_text(tokenizer, info.bos_token_id)
        samples = [{"id": e.article_id, "label": e.label, "start_token": start, "public_words": e.public_words,
                    "reference": e.reference,
                    "generation": g, "eidetic": int(f), "approximate": float(a),
                    "sentence_end_found": e.sentence_end_found}
                   for e, g, f, a in zip(examples, generations, eidetic, approximate)]
        return TaskResult(metrics=metrics_out, counts=counts, samples=samples,
                          info={"data_source": data.source, "generation": info.as_dict(),
                                "decoding": "greedy, left padding, budget = reference token count (capped)"})
