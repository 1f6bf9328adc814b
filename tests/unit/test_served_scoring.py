"""Scoring through a completions server (`causal_token_logprobs` given a `CompletionsClient`) equals in-process scoring
(`causal_token_logprobs`): the fake vLLM-like server (tests/helpers/served_server.py) answers echo
requests with the tiny random GPT-2's log-probs, computed in float32 by transformers in the server's
thread, one plain forward pass per prompt."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from harness.core.errors import UserError
from harness.model.loading import ModelSpec, load
from harness.model.served import CompletionsClient
from harness.scoring.causal import causal_token_logprobs, encode_with_bos
from harness.scoring.extraction import SamplingScheme, extraction_logprobs_ids
from harness.scoring.generation import greedy_continuations
from tests.helpers.served_server import FakeServer, ModelServer

CONTEXT = 32
WORDS = ("the quick brown fox jumps over lazy dog river bank journey of a thousand miles begins with single "
         "step members parliament debated budget football club signing striker Monday zebra quantum").split()


@pytest.fixture(scope="module")
def lm(tiny_lm):
    loaded = load(ModelSpec(str(tiny_lm), device="cpu"))
    assert loaded.context_length == CONTEXT and next(loaded.model.parameters()).dtype == torch.float32
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 1-layer, 32-wide model: extra threads only add contention
    yield loaded
    torch.set_num_threads(threads)


@pytest.fixture()
def server(lm):
    fake = ModelServer(lm.model, max_model_len=CONTEXT + 1)  # vLLM keeps room for one output token
    yield fake
    fake.close()


def client(server: FakeServer) -> CompletionsClient:
    return CompletionsClient(server.url, timeout_s=30.0, max_retries=0, batch_size=8)


def texts(words: list[int], seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(k)) for k in words]


SHORT = texts([0, 1, 2, 4, 7])            # a few tokens each, "" too: all within one window
LONG = texts([3, 12, 25, 40], seed=1)     # up to ~100 tokens: several windows of 12 or 32


def assert_same(lm, server, texts, **options):
    """Served and in-process scores of `texts` agree within 1e-5; returns the served ones."""
    served, served_info = causal_token_logprobs(client(server), lm.tokenizer, texts, **options)
    local, local_info = causal_token_logprobs(lm.model, lm.tokenizer, texts, progress=False, **options)
    assert served_info.as_dict() == local_info.as_dict()
    assert len(served) == len(local) == len(texts)
    for got, want in zip(served, local):
        np.testing.assert_array_equal(got.token_ids, want.token_ids)
        np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-5, rtol=0)
        assert got.dist_mean is None and got.dist_std is None
        if options.get("top_logprobs"):
            np.testing.assert_allclose(got.top_logprobs, want.top_logprobs, atol=1e-5, rtol=0)
            assert got.argmax_hits().tolist() == want.argmax_hits().tolist()
        else:
            assert got.top_logprobs is None
    return served, served_info


def test_short_texts_equal_in_process_scores_with_the_servers_context(lm, server):
    scores, info = assert_same(lm, server, SHORT)
    assert info.context_length == CONTEXT and info.first_token_scored and info.n_windows == len(server.posts()[0]["prompt"])
    assert scores[0].logprobs.shape == (0,)
    assert [p[0] for p in server.posts()[0]["prompt"]] == [lm.tokenizer.bos_token_id] * info.n_windows


@pytest.mark.parametrize("options", [{}, {"max_length": 12}, {"max_length": 12, "stride": 4}],
                         ids=["server-context", "max_length-12", "stride-4"])
def test_long_texts_in_sliding_windows_equal_in_process_scores(lm, server, options):
    _, info = assert_same(lm, server, LONG, **options)
    context = options.get("max_length", CONTEXT)
    prompts = [prompt for post in server.posts() for prompt in post["prompt"]]
    assert len(prompts) == info.n_windows > len(LONG)  # the long texts took several windows each
    assert max(len(p) for p in prompts) == context


def test_top_logprobs_and_argmax_hits_equal_in_process(lm, server):
    scores, _ = assert_same(lm, server, SHORT + LONG, max_length=12, top_logprobs=True)
    hits = np.concatenate([s.argmax_hits() for s in scores])
    assert 0 < hits.sum()  # the check can fail both ways
    assert hits.sum() < len(hits)


def test_without_a_start_token_and_with_another_one(lm, server):
    assert_same(lm, server, SHORT + LONG[:2], add_start=False, max_length=12)
    scores, info = assert_same(lm, server, SHORT, start_token=7)
    assert info.bos_token_id == 7


def test_prefix_sharing_and_duplicate_texts_are_scored_once(lm, server):
    shared = ["the quick brown fox", "the quick brown fox", "the quick", "zebra quantum", ""]
    scores, info = assert_same(lm, server, shared)
    assert (info.n_distinct_sequences, info.n_scored_sequences, info.n_windows) == (4, 2, 2)
    assert len(server.posts()[0]["prompt"]) == 2  # "the quick brown fox" and "zebra quantum", once each
    np.testing.assert_array_equal(scores[2].logprobs, scores[0].logprobs[:len(scores[2].logprobs)])


def test_no_texts(lm, server):
    scores, info = causal_token_logprobs(client(server), lm.tokenizer, [])
    assert scores == [] and info.n_windows == 0 and info.context_length == CONTEXT and not server.posts()


def test_distribution_stats_are_refused_in_one_line(lm, server):
    with pytest.raises(UserError) as caught:
        causal_token_logprobs(client(server), lm.tokenizer, SHORT, distribution_stats=True)
    line = str(caught.value)
    assert "\n" not in line and "Min-K%++" in line and "server" in line
    assert server.requests == []


def test_a_server_without_max_model_len_needs_max_length(lm):
    fake = ModelServer(lm.model, max_model_len=None)
    try:
        with pytest.raises(UserError, match="max_model_len"):
            causal_token_logprobs(client(fake), lm.tokenizer, SHORT)
        assert_same(lm, fake, SHORT, max_length=CONTEXT)
    finally:
        fake.close()


@pytest.mark.parametrize("scheme", [SamplingScheme(greedy=True), SamplingScheme(), SamplingScheme(top_k=5),
                                    SamplingScheme(temperature=0.7, top_k=5, top_p=0.8)],
                         ids=["greedy", "T=1", "top-k", "T-top-k-top-p"])
def test_extraction_logprobs_equal_in_process(lm, server, scheme):
    prompts = encode_with_bos(lm.tokenizer, texts([1, 2, 3], seed=2))[0]
    targets = [lm.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts([2, 1, 2], seed=3)]
    targets[1] = []  # an empty target scores nothing, in both engines
    local = extraction_logprobs_ids(lm.model, prompts, targets, scheme, pad=0)
    served = extraction_logprobs_ids(client(server), prompts, targets, scheme)
    for want, got in zip(local, served):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    if scheme.top_k:
        assert {post["logprobs"] for post in server.posts()} == {scheme.top_k}
    assert np.isneginf(np.concatenate(local)).any() == (scheme.greedy or scheme.top_k is not None)


def test_extraction_without_top_k_at_another_temperature_is_refused(lm, server):
    with pytest.raises(UserError, match="--extraction-top-k"):
        extraction_logprobs_ids(client(server), [[1, 2]], [[3]], SamplingScheme(temperature=0.5))
    assert server.requests == []


def test_greedy_continuations_equal_in_process(lm, server):
    prompts, budgets = texts([1, 3, 6, 2], seed=4), [5, 9, 3, 12]
    local, local_info = greedy_continuations(lm.model, lm.tokenizer, prompts, budgets, progress=False)
    served, served_info = greedy_continuations(client(server), lm.tokenizer, prompts, budgets, max_length=CONTEXT)
    assert served == local and served_info == local_info
    # asked for the budgets rounded up to 8, one request per room: 5 and 3 share one
    assert sorted(post["max_tokens"] for post in server.posts()) == [8, 16]
