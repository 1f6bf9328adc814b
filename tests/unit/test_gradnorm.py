"""The batched gradient norms (`harness.scoring.gradients`) against MIMIR's `GradNormAttack` loop written
out here, for p = 1, 2, inf, with and without the start token; batch independence; the per-text
fallback; texts over the context; and a hand-computed case on a one-parameter model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from harness.model.loading import ModelSpec, load
from harness.scoring import gradients
from harness.scoring.causal import encode_with_bos
from harness.scoring.gradients import gradient_norms, norm_of

TEXTS = ["the quick brown fox jumps over the lazy dog by the river bank",
         "members of parliament debated",
         "a journey of a thousand miles begins with a single step they say " * 3,
         "zebra"]


@pytest.fixture(scope="module")
def lm(tiny_lm):
    return load(ModelSpec(model=str(tiny_lm), device="cpu"))


def mimir_gradnorm(model, ids: list[int], p: float) -> float:
    """MIMIR: zero_grad; loss = -mean(token log-probs of tokens 2..); backward; the mean over
    parameters with a gradient of param.grad.norm(p); the attack returns minus it."""
    model.zero_grad()
    t = torch.tensor([ids])
    logprobs = torch.log_softmax(model(t).logits[0, :-1], dim=-1).gather(-1, t[0, 1:, None])[:, 0]
    (-torch.mean(logprobs)).backward()
    norms = [param.grad.detach().norm(p) for param in model.parameters() if param.grad is not None]
    model.zero_grad()
    return torch.stack(norms).mean().item()


@pytest.mark.parametrize("p", [1, 2, math.inf])
@pytest.mark.parametrize("add_start", [True, False])
def test_equals_mimir_loop(lm, p, add_start):
    ours = gradient_norms(lm.model, lm.tokenizer, TEXTS, p=p, add_start=add_start, batch_size=4)
    encoded, _ = encode_with_bos(lm.tokenizer, TEXTS, add_start=add_start)
    for value, ids in zip(ours, encoded):
        if len(ids) < 2:
            assert math.isnan(value)  # "zebra" alone: one token, nothing to score
        else:
            assert value == pytest.approx(mimir_gradnorm(lm.model, ids[:32], p), rel=2e-5)
    assert all(param.grad is None for param in lm.model.parameters())


def test_a_text_alone_equals_it_in_a_batch(lm):
    alone = gradient_norms(lm.model, lm.tokenizer, TEXTS[1:2], batch_size=1)
    batched = gradient_norms(lm.model, lm.tokenizer, TEXTS, batch_size=4)
    assert batched[1] == pytest.approx(alone[0], rel=1e-5)


def test_the_per_text_fallback_gives_the_same_values(lm, monkeypatch, caplog):
    batched = gradient_norms(lm.model, lm.tokenizer, TEXTS[:3], p=2)

    def refuse(*args, **kwargs):
        raise RuntimeError("vmap: no batching rule")

    monkeypatch.setattr(gradients, "batched_norms", refuse)
    looped = gradient_norms(lm.model, lm.tokenizer, TEXTS[:3], p=2)
    np.testing.assert_allclose(looped, batched, rtol=2e-5)
    assert "one text at a time" in caplog.text


def test_frozen_and_unused_parameters_are_left_out_as_mimir(tiny_lm):
    """MIMIR averages over the parameters with a gradient: a frozen layer and a parameter the forward
    pass never uses are not in its mean, and not in membench's (vmap alone would count them as 0)."""
    lm = load(ModelSpec(model=str(tiny_lm), device="cpu"))
    lm.model.transformer.h[0].mlp.c_fc.weight.requires_grad_(False)
    lm.model.register_parameter("unused", torch.nn.Parameter(torch.ones(3)))
    ours = gradient_norms(lm.model, lm.tokenizer, TEXTS[:2], p=2, batch_size=2)
    encoded, _ = encode_with_bos(lm.tokenizer, TEXTS[:2])
    for value, ids in zip(ours, encoded):
        assert value == pytest.approx(mimir_gradnorm(lm.model, ids[:32], 2), rel=2e-5)
    every = len(list(lm.model.parameters()))
    assert len(gradients.reached_parameters(lm.model, encoded[0][:32])) == every - 2


def test_texts_over_the_context_are_cut(lm):
    """The tiny model's context is 32 tokens: a longer text is scored on its first 32."""
    long_text = TEXTS[2]
    ids, _ = encode_with_bos(lm.tokenizer, [long_text])
    assert len(ids[0]) > 32
    [value] = gradient_norms(lm.model, lm.tokenizer, [long_text], p=2)
    assert value == pytest.approx(mimir_gradnorm(lm.model, ids[0][:32], 2), rel=2e-5)


def test_norms_by_hand():
    g = torch.tensor([[3.0, -4.0], [0.0, 1.0]])  # two texts' gradients of one 2-entry parameter
    assert norm_of(g, 1).tolist() == [7.0, 1.0]
    assert norm_of(g, 2).tolist() == [5.0, 1.0]
    assert norm_of(g, math.inf).tolist() == [4.0, 1.0]


def test_one_weight_model_by_hand():
    """Logits = W[previous token] over a 2-token vocabulary, W = 0, text [0, 1]: p(. | 0) = [1/2, 1/2],
    NLL = log 2, dNLL/dW = row 0: softmax - onehot(1) = [1/2, -1/2], row 1: 0. One parameter tensor:
    its 1-norm is 1, its 2-norm sqrt(1/2), its inf-norm 1/2."""

    class Out:
        def __init__(self, logits):
            self.logits = logits

    class OneWeight(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(2, 2))

        def forward(self, input_ids, **kwargs):
            return Out(self.weight[input_ids])

    class Tok:
        pad_token_id = 0
        bos_token_id = None

        def __call__(self, texts, add_special_tokens=False):
            return {"input_ids": [[0, 1] for _ in texts]}

    model = OneWeight()
    model.config = type("Config", (), {"n_positions": 8})()
    for p, expected in ((2, math.sqrt(0.5)), (math.inf, 0.5), (1, 1.0)):
        [value] = gradient_norms(model, Tok(), ["x"], p=p)
        assert value == pytest.approx(expected)
