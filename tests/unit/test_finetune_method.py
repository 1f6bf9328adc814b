"""The fine-tuning method's settings, shared by the tasks that train (`harness.training.method`)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness.run.runner import changed_settings, config_hash, EvaluateOptions
from harness.training.method import FULL_LEARNING_RATE, LORA_RECIPE, METHOD_FIELDS
from tasks.finetune_memorization.task import FinetuneMemorizationConfig
from tasks.privacy_extraction.task import PrivacyConfig

CONFIGS = (FinetuneMemorizationConfig, PrivacyConfig)


@pytest.mark.parametrize("config", CONFIGS)
def test_each_method_has_its_own_learning_rate_unless_one_is_given(config):
    assert config().learning_rate == FULL_LEARNING_RATE == 1e-4
    lora = config(finetune_method="lora")
    assert lora.learning_rate == LORA_RECIPE.learning_rate != FULL_LEARNING_RATE
    assert (lora.lora_rank, lora.lora_alpha, lora.lora_target_modules, lora.lora_dropout) == \
        (LORA_RECIPE.rank, LORA_RECIPE.alpha, LORA_RECIPE.target_modules, LORA_RECIPE.dropout)
    assert config(finetune_method="lora", learning_rate=3e-3).learning_rate == 3e-3
    assert config(learning_rate=5e-5).learning_rate == 5e-5


@pytest.mark.parametrize("config", CONFIGS)
def test_a_full_dump_holds_its_learning_rate_and_nothing_of_lora(config):
    full, lora = config().model_dump(mode="json"), config(finetune_method="lora").model_dump(mode="json")
    assert full["learning_rate"] == FULL_LEARNING_RATE and not set(METHOD_FIELDS) & set(full)
    assert set(lora) - set(full) == set(METHOD_FIELDS)
    assert lora["learning_rate"] == LORA_RECIPE.learning_rate
    # the recipe is in the config hash: another rank or rate is another result
    options = EvaluateOptions()
    hashes = {config_hash(c, options, "float32") for c in (
        config(), config(finetune_method="lora"), config(finetune_method="lora", lora_rank=LORA_RECIPE.rank * 2),
        config(finetune_method="lora", learning_rate=LORA_RECIPE.learning_rate / 2))}
    assert len(hashes) == 4


@pytest.mark.parametrize("config", CONFIGS)
def test_a_lora_run_is_marked_with_its_recipe_and_lora_settings_need_lora(config):
    marked = changed_settings(config(finetune_method="lora"))
    assert {"finetune_method", "learning_rate", "lora_rank", "lora_alpha"} <= set(marked)
    assert changed_settings(config()) == []
    with pytest.raises(ValidationError, match="needs --finetune-method lora"):
        config(lora_rank=16)
