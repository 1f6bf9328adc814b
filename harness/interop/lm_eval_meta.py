"""What `membench export-lm-eval` writes under each YAML's `metadata.membench`, and
`membench import-lm-eval` reads back: one pydantic model for both directions."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from harness.core.results import TASK_NAME_PATTERN, Headline


class ExportedMetricMeta(BaseModel):
    """One exported metric: lm-eval's key, and the membench metric (name and tags) it is."""

    key: str
    name: str
    tags: dict[str, str] = Field(default_factory=dict)


class ExportedModel(BaseModel):
    """The model whose tokenizer the documents were made with."""

    name: str | None = None
    revision: str | None = None
    tokenizer_fingerprint: str | None = None
    model_args: str | None = None  # lm-eval's --model_args for it (`lm_eval_export.lm_eval_model_args`)


class ExportMeta(BaseModel):
    """An exported task's `metadata.membench`: `harness.interop.lm_eval_export.task_yaml` writes it
    from this model, and the import checks it with this model before it is used, so a hand-edited
    or truncated one is one error line, not a traceback."""

    model_config = ConfigDict(extra="allow")

    task: str = Field(pattern=TASK_NAME_PATTERN)
    version: StrictInt
    config: dict[str, Any]
    metrics: list[ExportedMetricMeta] = Field(min_length=1)
    data_source: str | None = None
    headline: Headline | None = None
    summary: list[Headline] = Field(default_factory=list)
    counts: dict[str, StrictInt] = Field(default_factory=dict)
    task_card: str | None = None
    model: ExportedModel = Field(default_factory=ExportedModel)
    limit: StrictInt | None = None
    seed: StrictInt = Field(0, ge=0)
