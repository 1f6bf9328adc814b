"""DP-SGD fine-tuning (`harness.training.dp`): the noise calibrated to the claim, per-row losses that do not
depend on the other rows, the layers opacus cannot split refused with the fix, the broken mechanism marked,
and the flags' errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from harness.core.errors import UserError
from harness.model.loading import ModelSpec, load
from harness.training.dp import DPSettings, default_delta, row_losses, train_dp
from harness.training.finetune import FinetuneSettings, finetune, training_rows
from tests.conftest import assert_user_error

REPO = Path(__file__).resolve().parents[2]
PAIRS = [(f"p{k}", f" secret number {k} is {k * 7919 % 1000}") for k in range(12)]


def settings(dp: DPSettings, **kwargs) -> FinetuneSettings:
    return FinetuneSettings(epochs=2, learning_rate=1e-2, batch_size=4, seed=0, max_source_tokens=4,
                            max_target_tokens=12, dp=dp, **kwargs)


def test_the_noise_is_calibrated_to_the_claim_for_the_runs_steps(tiny_lm):
    lm = load(ModelSpec(model=str(tiny_lm)))
    dp = DPSettings(epsilon=8.0, delta=1e-3, max_grad_norm=1.0)
    rows = training_rows(lm.tokenizer, PAIRS, [1] * len(PAIRS), False, settings(dp))
    seen = []
    facts = finetune(lm.model, lm.tokenizer, rows, settings(dp), {1, 2}, lambda epoch, net: seen.append(epoch), False)
    record = facts["dp"]
    assert seen == [1, 2]
    assert record["steps"] == facts["steps"] == 2 * math.ceil(12 / 4) and record["sample_rate"] == 4 / 12
    assert record["noise_multiplier"] > 0 and record["claimed_epsilon"] == 8.0 and record["delta"] == 1e-3
    # the accountant, replayed on the steps taken, spends at most the claim and not far below it (0.01 search)
    assert 7.5 < record["epsilon_spent"] <= 8.0
    assert "no_noise_for_testing" not in record
    assert all(not p.requires_grad or not hasattr(p, "grad_sample") for p in lm.model.parameters())


def test_each_rows_loss_is_its_own_whatever_the_batch(tiny_lm):
    """The per-row loss of a row must not change with the other rows of its batch (their lengths, the padding):
    otherwise adding or removing one row would move every other row's clipped gradient."""
    from transformers import DataCollatorForSeq2Seq

    lm = load(ModelSpec(model=str(tiny_lm)))
    pairs = [("p", " one"), ("q", " secret number 4 is 321 and more"), ("r", " secret 9")]
    rows = training_rows(lm.tokenizer, pairs, [1, 1, 1], False, settings(DPSettings(1.0, 1e-3, 1.0)))
    collate = DataCollatorForSeq2Seq(lm.tokenizer, model=None, label_pad_token_id=-100, padding=True)
    with torch.no_grad():
        together = row_losses(lm.model, collate(rows), False, True)
        alone = torch.cat([row_losses(lm.model, collate([row]), False, True) for row in rows])
    assert len({len(r["input_ids"]) for r in rows}) > 1  # padded rows of different lengths
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=1e-5)


def test_a_layer_whose_input_the_batch_shares_is_refused_with_lora_as_the_fix():
    from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

    tokenizer = AutoTokenizer.from_pretrained(REPO / "harness/reference/weights/t5-ref-dfd67885c5/t5-ref")
    model = T5ForConditionalGeneration(T5Config(vocab_size=len(tokenizer), d_model=16, d_ff=32, num_layers=1,
                                                num_decoder_layers=1, num_heads=2, d_kv=8,
                                                decoder_start_token_id=tokenizer.pad_token_id))
    dp = DPSettings(epsilon=4.0, delta=1e-3, max_grad_norm=1.0)
    rows = training_rows(tokenizer, PAIRS[:6], [1] * 6, True, settings(dp))
    with pytest.raises(UserError, match=r"relative_attention_bias.*use --finetune-method lora"):
        train_dp(model, tokenizer, rows, settings(dp), set(), lambda *_: None, False)
    # LoRA's DP path: test_finetune_memorization's DP test and bench/bench_dp_audit.py (the T5's LoRA runs)


def test_the_broken_mechanism_adds_no_noise_and_says_its_claim_is_false(tiny_lm):
    lm = load(ModelSpec(model=str(tiny_lm)))
    dp = DPSettings(epsilon=1.0, delta=1e-3, max_grad_norm=1.0, no_noise_for_testing=True)
    rows = training_rows(lm.tokenizer, PAIRS, [1] * len(PAIRS), False, settings(dp))
    record = finetune(lm.model, lm.tokenizer, rows, settings(dp), set(), lambda *_: None, False)["dp"]
    assert record["noise_multiplier"] == 0 and record["epsilon_spent"] is None
    assert "BROKEN MECHANISM" in record["no_noise_for_testing"]


def test_delta_defaults_below_one_over_the_rows():
    assert default_delta(1000) == 1e-5
    assert default_delta(10**6) == pytest.approx(1e6 ** -1.1) and default_delta(10**6) < 1e-6
    with pytest.raises(ValueError):
        default_delta(0)


@pytest.mark.parametrize("flags, needle", [
    (["--dp-epsilon", "0"], "--dp-epsilon: Input should be greater than 0"),
    (["--dp-epsilon", "1", "--dp-delta", "1"], "--dp-delta: Input should be less than 1"),
    (["--dp-epsilon", "1", "--dp-max-grad-norm", "0"], "--dp-max-grad-norm: Input should be greater than 0"),
    (["--dp-delta", "0.1"], "needs --dp-epsilon"),
    (["--audit-confidence", "0.9"], "needs --audit-canaries"),
])
def test_bad_dp_settings_are_one_line_and_exit_2(capsys, tmp_path, tiny_lm, flags, needle):
    out = tmp_path / "out"
    assert_user_error(capsys, ["evaluate", "--model", str(tiny_lm), "--tasks", "privacy_extraction", *flags,
                               "--output-path", str(out)], out, needle)
