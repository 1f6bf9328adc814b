"""White-box gradient canaries for the one-run audit of DP-SGD (`harness.training.gradient_canaries`, issue 76):
each included canary adds sign × C to its own coordinate of the clipped gradient sum and nothing elsewhere;
under LoRA, where the text canaries show nothing, their audit refutes a claim of ε = 1 made without noise and
stays within the same claim made with the noise it needs (known truth on the tiny GPT-2)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.metrics.privacy_audit import steinke_audit
from harness.model.loading import ModelSpec, load
from harness.training.dp import DPSettings
from harness.training.finetune import FinetuneSettings, LoraSettings, finetune, training_rows
from harness.training.gradient_canaries import CanaryGradients, GradientCanaries


def test_an_included_canary_pushes_its_own_coordinate_by_c_with_its_sign_and_nothing_else():
    params = [torch.zeros(3, 5), torch.zeros(7)]
    canaries = CanaryGradients(GradientCanaries(m=12, seed=3), params, max_grad_norm=0.5, sample_rate=1.0, run_seed=0)
    again = CanaryGradients(GradientCanaries(m=12, seed=3), params, 0.5, 1.0, 1)
    assert torch.equal(canaries.flat, again.flat) and canaries.inclusion() == again.inclusion()  # one draw per seed
    assert len(set(canaries.flat.tolist())) == 12 and set(canaries.signs.tolist()) <= {-1.0, 1.0}
    for p in params:
        p.summed_grad = torch.zeros_like(p)
    joined = canaries.add_to_sums()  # sample rate 1: every included canary joins
    flat = torch.cat([p.summed_grad.reshape(-1) for p in params])
    expected = torch.zeros(22)
    for coordinate, sign, included in zip(canaries.flat.tolist(), canaries.signs.tolist(), canaries.included.tolist()):
        expected[coordinate] = 0.5 * sign if included else 0.0
    assert joined == int(canaries.included.sum()) > 0 and torch.equal(flat, expected)
    params[1].data -= 1.0  # a parameter moved down by 1: each canary there scores sign x 1 (a descent step's way)
    moved = [sign if coordinate >= 15 else 0.0 for coordinate, sign in zip(canaries.flat.tolist(), canaries.signs.tolist())]
    assert canaries.scores() == moved


def test_more_canaries_than_trainable_parameters_is_one_line():
    from harness.core.errors import UserError

    with pytest.raises(UserError, match="need as many trainable parameters"):
        CanaryGradients(GradientCanaries(m=10), [torch.zeros(4)], 1.0, 0.5, 0)


def audited(tiny_lm, dp: DPSettings) -> tuple[float, float]:
    """LoRA DP-SGD of the tiny GPT-2 for 8 epochs of 12 rows with 400 gradient canaries: their AUC and Steinke's
    bound at 95%."""
    from harness.metrics.memorization import roc_auc

    lm = load(ModelSpec(model=str(tiny_lm)))
    pairs = [(f"p{k}", f" secret number {k} is {k * 7919 % 1000}") for k in range(12)]
    settings = FinetuneSettings(epochs=8, learning_rate=1e-2, batch_size=4, seed=0, max_source_tokens=4,
                                max_target_tokens=12, lora=LoraSettings(8, 16, 0.0, ("all-linear",)), dp=dp)
    rows = training_rows(lm.tokenizer, pairs, [1] * len(pairs), False, settings)
    found = finetune(lm.model, lm.tokenizer, rows, settings, {8}, lambda *_: None, False)["gradient_canaries"]
    included = np.array([bit == "1" for bit in found["inclusion"]])
    scores = np.array(found["scores"]["8"])
    return roc_auc(included, scores), steinke_audit(scores, included, dp.delta).epsilon_steinke


def test_white_box_canaries_catch_a_broken_lora_claim_and_stay_within_an_honest_one(tiny_lm):
    canaries = GradientCanaries(m=400, seed=0)
    auc, broken = audited(tiny_lm, DPSettings(1.0, 1e-5, 1.0, no_noise_for_testing=True, gradient_canaries=canaries))
    assert auc > 0.95 and broken > 1.0  # no noise: the claim of 1 is refuted
    auc, honest = audited(tiny_lm, DPSettings(1.0, 1e-5, 1.0, gradient_canaries=canaries))
    assert honest <= 1.0 and auc < 0.75  # the noise the claim needs: within it


def test_gradient_canaries_need_dp():
    from harness.core.errors import UserError
    from harness.run.runner import build_config
    from tasks.privacy_extraction.task import PrivacyExtraction

    with pytest.raises(UserError, match="--audit-gradient-canaries needs --dp-epsilon"):
        build_config(PrivacyExtraction, {"audit_gradient_canaries": 100})
    config = build_config(PrivacyExtraction, {"audit_gradient_canaries": 100, "dp_epsilon": 1.0})
    assert config.model_dump()["audit_gradient_canaries"] == 100 and "audit_canaries" not in config.model_dump()
