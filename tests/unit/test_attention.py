"""16-bit models on the CPU under pinned kernels run eager attention (harness/model/attention.py): PyTorch
2.13's fused bfloat16 attention crashes there on a Xeon with AMX ("pack_vnni2 is only supported when
avx512 is supported"). The tests run pinned (tests/conftest.py), as `membench run` and `--reproducible` do."""

from __future__ import annotations

import os

import pytest
import torch

from harness.model.attention import EAGER, PINNED_KERNELS, attention_implementation
from harness.model.loading import ModelSpec, load
from harness.run.accelerator import accelerator_facts
from tests.conftest import save_tiny_causal_lm


def test_only_16_bit_on_the_cpu_under_pinned_kernels_goes_eager(monkeypatch):
    monkeypatch.setenv(PINNED_KERNELS, "avx2")
    assert attention_implementation("cpu", "bfloat16") == EAGER
    assert attention_implementation("cpu", "float16") == EAGER
    assert attention_implementation("cpu", "float32") is None
    assert attention_implementation("cuda", "bfloat16") is None
    assert attention_implementation("cuda:1", "float16") is None
    monkeypatch.delenv(PINNED_KERNELS)
    assert attention_implementation("cpu", "bfloat16") is None


def test_a_bfloat16_model_scores_and_trains_on_the_cpu_under_pinned_kernels(tmp_path):
    """On a Xeon with AMX this fails (the fused kernel's crash) if the eager fallback goes: 100 tokens,
    as the fused kernel packs for AMX from 64 query rows on. Elsewhere it checks what a run records."""
    assert os.environ[PINNED_KERNELS] == "avx2"  # tests/conftest.py pins every test process
    folder = save_tiny_causal_lm(tmp_path / "lm", context=128)
    lm = load(ModelSpec(str(folder), dtype="bfloat16"))
    assert lm.model.config._attn_implementation == EAGER
    assert accelerator_facts(lm.model, lm.device)["attn_implementation"] == EAGER
    ids = torch.randint(0, 300, (2, 100))
    loss = lm.model.train()(input_ids=ids, labels=ids).loss
    loss.backward()
    assert torch.isfinite(loss) and lm.model.lm_head.weight.grad is not None
    assert load(ModelSpec(str(folder))).model.config._attn_implementation != EAGER  # float32 keeps sdpa


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_eager_attention_gives_the_numbers_of_the_fused_kernel(tmp_path, dtype):
    """Eager and fused attention compute the same function: a 16-bit model's token log-probs agree
    within 16-bit rounding (measured on 48 tokens, below the length where the fused kernel crashes)."""
    from transformers import AutoModelForCausalLM

    folder = save_tiny_causal_lm(tmp_path / "lm", context=128)
    ids = torch.randint(0, 300, (2, 48))
    logits = {}
    for implementation in ("sdpa", EAGER):
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype),
                                                     attn_implementation=implementation).eval()
        with torch.no_grad():
            logits[implementation] = model(input_ids=ids).logits.float().log_softmax(-1)
    assert torch.allclose(logits["sdpa"], logits[EAGER], atol=0.05), (logits["sdpa"] - logits[EAGER]).abs().max()
