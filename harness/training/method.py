"""The fine-tuning method's settings, shared by every task that trains a copy of the checkpoint
(finetune_memorization, privacy_extraction): full fine-tuning at `FULL_LEARNING_RATE`, or a LoRA
adapter (peft) with the recipe `LORA_RECIPE`, chosen on known truth (issue 50; the recipe, how it
was chosen and its gap to full fine-tuning: tasks/finetune_memorization/README.md, "LoRA", and the
sweep's records bench/results/bench_lora_recipe--reference.json and --smollm2.json).

The method's fields (`METHOD_FIELDS`) are in a config's dump (the results file's `config`, and so its
`config_hash`) only with `--finetune-method lora`, and the DP fields (`DP_FIELDS`) only with `--dp-epsilon`: a
non-private full fine-tuning's dump holds its learning rate and nothing of LoRA's or DP's. The learning rate,
when not given, is the method's: LoRA learns at about ten times the full model's rate (Hu et al. 2021;
Dettmers et al. 2023, QLoRA; Biderman et al. 2024).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, PositiveInt, ValidationInfo, field_validator, model_validator

from harness.core.task import TaskConfig
from harness.training.dp import ACCOUNTANTS, DPSettings, default_delta
from harness.training.finetune import LoraSettings

# The full recipe's rate: the seed's (Yoon & Lee fine-tune their T5s at 1e-4).
FULL_LEARNING_RATE = 1e-4


@dataclass(frozen=True)
class LoraRecipe:
    """`--finetune-method lora`'s defaults: rank r, alpha (the update is (alpha / r)·B·A), the adapted
    layers (peft's `all-linear`: every linear layer but the output head), dropout, learning rate."""

    rank: int
    alpha: int
    target_modules: tuple[str, ...]
    dropout: float
    learning_rate: float


LORA_RECIPE = LoraRecipe(rank=16, alpha=32, target_modules=("all-linear",), dropout=0.0, learning_rate=4e-3)

METHOD_FIELDS = ("finetune_method", "lora_rank", "lora_alpha", "lora_dropout", "lora_target_modules")
DP_FIELDS = ("dp_epsilon", "dp_delta", "dp_max_grad_norm", "dp_accountant", "dp_no_noise_for_testing")


class FinetuneMethodConfig(TaskConfig):
    """A task config's fine-tuning method: full or LoRA, its learning rate and the adapter's settings."""

    learning_rate: float = Field(FULL_LEARNING_RATE, gt=0, description=(
        f"constant learning rate, AdamW without weight decay (default: {FULL_LEARNING_RATE:g} with full "
        f"fine-tuning, {LORA_RECIPE.learning_rate:g} with --finetune-method lora)"))
    finetune_method: Literal["full", "lora"] = Field(
        "full", description="full: every weight of a fresh copy trains; lora: only a LoRA adapter (peft) on the "
        "frozen weights, which are shared, not copied (for a model whose full fine-tuning does not fit)")
    lora_rank: PositiveInt = Field(LORA_RECIPE.rank, description="LoRA rank r (with --finetune-method lora)")
    lora_alpha: PositiveInt = Field(LORA_RECIPE.alpha, description="LoRA alpha: the update is (alpha / r) B A "
                                    "(with --finetune-method lora)")
    lora_dropout: float = Field(LORA_RECIPE.dropout, ge=0, lt=1, description="dropout on the LoRA adapter's "
                                "input (with --finetune-method lora)")
    lora_target_modules: tuple[str, ...] = Field(LORA_RECIPE.target_modules, min_length=1, description=(
        "the linear layers LoRA adapts: all-linear (all but the output head) or module names (with "
        "--finetune-method lora)"))

    dp_epsilon: float | None = Field(None, gt=0, description=(
        "DP-SGD (opacus) to this target epsilon: per-row clipping and Gaussian noise calibrated by the accountant "
        "for the run's steps (default: no differential privacy)"))
    dp_delta: float | None = Field(None, gt=0, lt=1, description=(
        "the DP target's delta (default: min(1e-5, 1 / n^1.1) for n training rows per epoch; with --dp-epsilon)"))
    dp_max_grad_norm: float = Field(1.0, gt=0, description="DP-SGD's per-row gradient clipping norm C (with "
                                    "--dp-epsilon)")
    dp_accountant: Literal[ACCOUNTANTS] = Field("prv", description=(
        "the privacy accountant that calibrates the noise: prv (Gopi et al. 2021) or rdp (with --dp-epsilon)"))
    dp_no_noise_for_testing: bool = Field(False, description=(
        "TESTS ONLY: clip but add no noise while claiming --dp-epsilon (a broken mechanism the audit must catch)"))

    @model_validator(mode="before")
    @classmethod
    def _method_learning_rate(cls, data: Any) -> Any:
        """The method's learning rate where none is given."""
        if isinstance(data, dict) and data.get("learning_rate") is None:
            lora = data.get("finetune_method") == "lora"
            data = {**data, "learning_rate": LORA_RECIPE.learning_rate if lora else FULL_LEARNING_RATE}
        return data

    @field_validator("lora_rank", "lora_alpha", "lora_dropout", "lora_target_modules")
    @classmethod
    def _only_with_lora(cls, value, info: ValidationInfo):
        if info.data.get("finetune_method") != "lora":
            raise ValueError("a LoRA setting needs --finetune-method lora")
        return value

    @field_validator("dp_delta", "dp_max_grad_norm", "dp_accountant", "dp_no_noise_for_testing")
    @classmethod
    def _only_with_dp(cls, value, info: ValidationInfo):
        if info.data.get("dp_epsilon") is None and value != cls.model_fields[info.field_name].default:
            raise ValueError("a DP setting needs --dp-epsilon")
        return value

    def fields_left_out(self) -> tuple[str, ...]:
        """The fine-tuning method's fields (`METHOD_FIELDS`) but with LoRA, DP's (`DP_FIELDS`) but with --dp-epsilon
        (`TaskConfig.fields_left_out`)."""
        return ((() if self.finetune_method == "lora" else METHOD_FIELDS) + (() if self.dp_epsilon else DP_FIELDS)
                + super().fields_left_out())

    def dp_settings(self, rows: int) -> DPSettings | None:
        """DP-SGD's settings for `rows` training rows per epoch (δ's default depends on them); None without DP."""
        if self.dp_epsilon is None:
            return None
        delta = self.dp_delta if self.dp_delta is not None else default_delta(rows)
        return DPSettings(self.dp_epsilon, delta, self.dp_max_grad_norm, self.dp_accountant,
                          self.dp_no_noise_for_testing)

    def lora_settings(self) -> LoraSettings | None:
        """The adapter's settings for `harness.training.finetune`; None for full fine-tuning."""
        if self.finetune_method != "lora":
            return None
        return LoraSettings(self.lora_rank, self.lora_alpha, self.lora_dropout, self.lora_target_modules)
