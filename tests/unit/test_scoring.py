"""causal_token_logprobs on a tiny random GPT-2 (context 32), against naive computations."""

from __future__ import annotations

import copy
import random

import numpy as np
import pytest
import torch

from harness.model.loading import ModelSpec, load
from harness.scoring.causal import causal_token_logprobs, encode_with_bos, prefix_roots
from harness.scoring.text import truncate_words

CONTEXT = 32
WORDS = ("the quick brown fox jumps over lazy dog river bank journey of a thousand miles begins "
         "with single step members parliament debated budget football club signing striker Monday "
         "zebra quantum Xylophone 42 ünïcode ;; --").split()


@pytest.fixture(scope="module")
def lm(tiny_lm):
    loaded = load(ModelSpec(str(tiny_lm), device="cpu"))
    assert loaded.context_length == CONTEXT
    # a 1-layer, 32-wide model: extra threads only add contention on a busy machine
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield loaded
    torch.set_num_threads(threads)


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    lengths = [0, 1, 2, 3, 5, 8, 13, 21, 34, 45]  # words; ~3 tokens each with this tokenizer
    lengths += [rng.randint(0, 45) for _ in range(n - len(lengths))]
    rng.shuffle(lengths)
    return [" ".join(rng.choice(WORDS) for _ in range(k)) for k in lengths]


def _ids(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


@torch.no_grad()
def _log_dist(model, ids: list[int]) -> torch.Tensor:
    """log_softmax of one unpadded forward pass; row p is the distribution of token p + 1."""
    logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits, dim=-1)


def _naive_windowed(model, ids: list[int], context: int, stride: int) -> np.ndarray:
    """Token t (t >= 1) is scored by the first window [kS, kS + C) that contains it."""
    cache: dict[int, torch.Tensor] = {}
    out = []
    for t in range(1, len(ids)):
        k = max(0, -(-(t - context + 1) // stride))  # smallest k with k*S + C > t
        start = k * stride
        assert start < t < start + context and (k == 0 or t - start >= context - stride)
        if k not in cache:
            cache[k] = _log_dist(model, ids[start:start + context])
        out.append(cache[k][t - start - 1, ids[t]].item())
    return np.array(out)


# ---------------------------------------------------------------- (a) batch-size invariance

def test_batch_size_1_and_16_agree(lm):
    texts = _texts(40, seed=0)
    lengths = [len(_ids(lm.tokenizer, t)) + 1 for t in texts]
    assert min(lengths) == 1 and max(lengths) > 3 * CONTEXT  # empty texts up to several windows
    one, info_one = causal_token_logprobs(lm.model, lm.tokenizer, texts, batch_size=1,
                                          distribution_stats=True, progress=False)
    many, info_many = causal_token_logprobs(lm.model, lm.tokenizer, texts, batch_size=16,
                                            distribution_stats=True, progress=False)
    assert info_one == info_many
    assert info_one.n_windows > info_one.n_scored_sequences  # some texts needed several windows
    for text, a, b, n in zip(texts, one, many, lengths):
        assert len(a.logprobs) == len(b.logprobs) == n - 1
        np.testing.assert_array_equal(a.token_ids, b.token_ids)
        np.testing.assert_array_equal(a.token_ids, _ids(lm.tokenizer, text))
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-4, rtol=0)
        np.testing.assert_allclose(a.dist_mean, b.dist_mean, atol=1e-4, rtol=0)
        np.testing.assert_allclose(a.dist_std, b.dist_std, atol=1e-4, rtol=0)
        assert np.all(a.logprobs < 0) and np.all(a.dist_std > 0)


def test_batches_stay_within_the_logits_budget(monkeypatch):
    """A batch holds at most batch_size rows, and fewer where its longest row x rows x vocabulary
    float32 logits would pass the budget; one row always runs, however long."""
    import harness.scoring.causal as causal

    assert causal.logits_bounded_batches(list(range(10)), [10] * 10, 4, 2048) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    monkeypatch.setattr(causal, "LOGITS_BUDGET_BYTES", 3 * 10 * 100 * 4)  # three rows of 10 tokens, vocabulary 100
    assert causal.logits_bounded_batches(list(range(7)), [10] * 7, 4, 100) == [[0, 1, 2], [3, 4, 5], [6]]
    assert causal.logits_bounded_batches([0, 1, 2, 3], [50, 10, 10, 60], 4, 100) == [[0], [1, 2], [3]]
    # the reference models (vocabulary 2,048, at most 512 tokens) never reach the real budget at batch 64
    monkeypatch.undo()
    assert causal.logits_bounded_batches(list(range(64)), [512] * 64, 64, 2048) == [list(range(64))]


def test_context_batches_fill_batch_size_full_rows():
    """Short rows run several times batch_size at once: rows x the batch's longest row stays within
    batch_size rows of the context (capped at a BERT's 512 tokens), longest rows first, one row at least."""
    from harness.scoring.spans import FULL_ROW_CAP, bounded_batches, context_batches

    assert context_batches([20] * 10, 2, 100) == [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]  # 10 x 20 <= 2 x 100
    assert context_batches([20] * 11, 2, 100) == [list(range(10)), [10]]
    assert context_batches([5, 60, 30, 30], 1, 60) == [[1], [2, 3], [0]]  # longest first; 2 x 30 <= 60
    assert context_batches([300, 10], 1, 100) == [[0], [1]]  # a row longer than the budget runs alone
    assert context_batches([1] * 3000, 1, 10**6) == [list(range(FULL_ROW_CAP)), *[
        list(range(k, min(k + FULL_ROW_CAP, 3000))) for k in range(FULL_ROW_CAP, 3000, FULL_ROW_CAP)]]
    assert context_batches([], 4, 128) == []
    assert bounded_batches([2, 0, 1], [5, 5, 9], 2, 100) == [[2, 0], [1]]  # max_rows, in the order given


def test_position_scores_in_chunks_equal_one_log_softmax(monkeypatch):
    """Log p(target), and the mean and std of log p under p, read position by position in chunks of a
    few rows: equal to one log-softmax over all the logits (float64 reference), whatever the chunk,
    and bit-identical between chunk sizes (each row is reduced alone); the most likely token's log-prob
    too, which the target reaches exactly where it is the argmax."""
    import harness.scoring.causal as causal

    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 50, generator=generator) * 4
    rows, positions = torch.tensor([0, 0, 1, 2, 2, 2, 1]), torch.tensor([0, 4, 2, 1, 3, 4, 0])
    log_dist = torch.log_softmax(logits.double(), -1)[rows, positions]
    targets = torch.randint(0, 50, (7,), generator=generator)
    targets[::2] = log_dist.argmax(-1)[::2]  # four of the seven targets are the most likely token
    expected_mean = (log_dist.exp() * log_dist).sum(-1)
    expected_std = (log_dist.exp() * (log_dist - expected_mean[:, None]).square()).sum(-1).sqrt()
    found = []
    for chunk_rows in (1, 3, 100):
        monkeypatch.setattr(causal, "STATS_CHUNK_BYTES", chunk_rows * 50 * 4)
        logprobs, means, stds, tops = causal.position_scores(logits, rows, positions, targets, True, True)
        np.testing.assert_allclose(logprobs, log_dist[torch.arange(7), targets].numpy(), rtol=0, atol=1e-5)
        np.testing.assert_allclose(means, expected_mean.numpy(), rtol=0, atol=1e-5)
        np.testing.assert_allclose(stds, expected_std.numpy(), rtol=0, atol=1e-5)
        np.testing.assert_allclose(tops, log_dist.max(-1).values.numpy(), rtol=0, atol=1e-5)
        # the target is the argmax exactly where its log-prob reaches the top one
        assert (logprobs >= tops).tolist() == (log_dist.argmax(-1) == targets).tolist() and (logprobs >= tops).sum() >= 4
        found.append((logprobs, means, stds, tops))
        only, none_mean, none_std, none_top = causal.position_scores(logits, rows, positions, targets, False)
        assert np.array_equal(only, logprobs) and none_mean is None and none_std is None and none_top is None
    for other in found[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(found[0], other))
    empty = causal.position_scores(logits, rows[:0], positions[:0], targets[:0], True)
    assert [part.shape for part in empty[:3]] == [(0,), (0,), (0,)] and empty[3] is None


def test_a_small_logits_budget_gives_the_same_scores(lm, monkeypatch):
    import harness.scoring.causal as causal

    texts = _texts(12, seed=1)
    free, _ = causal_token_logprobs(lm.model, lm.tokenizer, texts, batch_size=8, progress=False)
    vocabulary = lm.model.get_output_embeddings().weight.shape[0]
    monkeypatch.setattr(causal, "LOGITS_BUDGET_BYTES", 2 * CONTEXT * vocabulary * 4)  # two full rows a batch
    batches = []
    real = causal.run_batches
    monkeypatch.setattr(causal, "run_batches", lambda b, *args: batches.append(b) or real(b, *args))
    bounded, _ = causal_token_logprobs(lm.model, lm.tokenizer, texts, batch_size=8, progress=False)
    assert max(len(b) for b in batches[0]) < 8 and len(batches[0]) > -(-len(texts) // 8)  # cut smaller
    for a, b in zip(free, bounded):
        np.testing.assert_array_equal(a.token_ids, b.token_ids)
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5, rtol=0)


# ---------------------------------------------------------------- (b) short text == one forward pass

def test_short_text_matches_naive_forward_pass(lm):
    text = "The quick brown fox jumps over the lazy dog."
    ids = [lm.tokenizer.bos_token_id] + _ids(lm.tokenizer, text)
    assert 2 < len(ids) <= CONTEXT
    # score it alongside texts of other lengths so padding is exercised
    batch = [text, "a", "zebra quantum " * 30, "members of parliament"]
    (scores, *_), info = causal_token_logprobs(lm.model, lm.tokenizer, batch, batch_size=4,
                                               distribution_stats=True, progress=False)
    log_dist = _log_dist(lm.model, ids)[:-1]
    targets = torch.tensor(ids[1:])
    expected = log_dist.gather(1, targets[:, None])[:, 0].numpy()
    np.testing.assert_allclose(scores.logprobs, expected, atol=1e-5, rtol=0)
    probs = log_dist.exp()
    mean = (probs * log_dist).sum(-1)
    std = ((probs * (log_dist - mean[:, None]) ** 2).sum(-1)).sqrt()
    np.testing.assert_allclose(scores.dist_mean, mean.numpy(), atol=1e-4, rtol=0)
    np.testing.assert_allclose(scores.dist_std, std.numpy(), atol=1e-4, rtol=0)
    assert info.context_length == CONTEXT and info.stride == CONTEXT // 2


# ---------------------------------------------------------------- (c) long text == naive sliding window

@pytest.mark.parametrize("stride", [16, 8])
def test_long_text_matches_naive_sliding_window(lm, stride):
    texts = [" ".join(random.Random(s).choice(WORDS) for _ in range(n)) for s, n in ((1, 60), (2, 30), (3, 140))]
    scores, info = causal_token_logprobs(lm.model, lm.tokenizer, texts, batch_size=3, stride=stride,
                                         progress=False)
    assert info.stride == stride
    for text, got in zip(texts, scores):
        ids = [lm.tokenizer.bos_token_id] + _ids(lm.tokenizer, text)
        assert len(ids) > CONTEXT + stride
        expected = _naive_windowed(lm.model, ids, CONTEXT, stride)
        assert len(got.logprobs) == len(ids) - 1
        np.testing.assert_allclose(got.logprobs, expected, atol=1e-5, rtol=0)
    # L tokens with BOS need windows k = 0..K, K the smallest with K*S + C >= L
    lengths = [len(_ids(lm.tokenizer, t)) + 1 for t in texts]
    assert info.n_windows == sum(1 + -(-(n - CONTEXT) // stride) for n in lengths)


def test_long_text_differs_from_truncated_context(lm):
    # sanity check on the naive reference: context really matters for this model
    ids = [lm.tokenizer.bos_token_id] + _ids(lm.tokenizer, " ".join(WORDS * 2))
    windowed = _naive_windowed(lm.model, ids, CONTEXT, 16)
    fresh = _log_dist(lm.model, ids[CONTEXT:CONTEXT + 10])[:-1]
    fresh_scores = fresh.gather(1, torch.tensor(ids[CONTEXT + 1:CONTEXT + 10])[:, None])[:, 0].numpy()
    assert np.abs(windowed[CONTEXT:CONTEXT + 9] - fresh_scores).max() > 1e-3


def test_max_length_overrides_model_context(lm):
    text = " ".join(WORDS)
    ids = [lm.tokenizer.bos_token_id] + _ids(lm.tokenizer, text)
    (got,), info = causal_token_logprobs(lm.model, lm.tokenizer, [text], max_length=12, stride=5,
                                         progress=False)
    assert (info.context_length, info.stride) == (12, 5)
    np.testing.assert_allclose(got.logprobs, _naive_windowed(lm.model, ids, 12, 5), atol=1e-5, rtol=0)


# ---------------------------------------------------------------- (d) prefix reuse

def test_prefix_scores_equal_scores_alone(lm):
    full = " ".join(random.Random(5).choice(WORDS) for _ in range(90))
    prefixes = [truncate_words(full, n) for n in (1, 4, 15, 40, 70)]
    for prefix in prefixes:
        p_ids, f_ids = _ids(lm.tokenizer, prefix), _ids(lm.tokenizer, full)
        assert f_ids[: len(p_ids)] == p_ids  # token prefix, so it can be read off `full`
    together, info = causal_token_logprobs(lm.model, lm.tokenizer, [full] + prefixes, batch_size=4,
                                           distribution_stats=True, progress=False)
    assert info.n_texts == 6
    assert info.n_distinct_sequences == 6
    assert info.n_scored_sequences == 1 < info.n_texts
    for prefix, shared in zip(prefixes, together[1:]):
        (alone,), alone_info = causal_token_logprobs(lm.model, lm.tokenizer, [prefix],
                                                     distribution_stats=True, progress=False)
        assert alone_info.n_scored_sequences == 1
        assert len(shared.logprobs) == len(alone.logprobs) == len(_ids(lm.tokenizer, prefix))
        np.testing.assert_array_equal(shared.token_ids, alone.token_ids)
        np.testing.assert_allclose(shared.logprobs, alone.logprobs, atol=1e-5, rtol=0)
        # std = sqrt(E[l^2] - E[l]^2) loses float32 digits when sigma << |mu| (near-uniform model)
        np.testing.assert_allclose(shared.dist_mean, alone.dist_mean, atol=1e-5, rtol=0)
        np.testing.assert_allclose(shared.dist_std, alone.dist_std, atol=1e-4, rtol=0)
        np.testing.assert_allclose(shared.logprobs, together[0].logprobs[: len(shared.logprobs)], atol=0)


def test_duplicates_and_unrelated_texts_counts(lm):
    texts = ["the quick brown fox", "the quick brown fox", "the quick", "zebra quantum", ""]
    scores, info = causal_token_logprobs(lm.model, lm.tokenizer, texts, progress=False)
    assert info.n_texts == 5
    assert info.n_distinct_sequences == 4  # duplicate counted once; "" is [bos]
    assert info.n_scored_sequences == 2    # "the quick brown fox" and "zebra quantum"
    np.testing.assert_array_equal(scores[0].logprobs, scores[1].logprobs)


# ---------------------------------------------------------------- (e) BOS handling and edge cases

def test_empty_and_one_word_texts(lm):
    texts = ["", "fox", "zebra"]
    scores, info = causal_token_logprobs(lm.model, lm.tokenizer, texts, progress=False)
    assert info.first_token_scored is True
    assert info.bos_token_id == lm.tokenizer.bos_token_id is not None
    assert scores[0].logprobs.shape == (0,) and scores[0].token_ids.shape == (0,)
    for text, got in zip(texts[1:], scores[1:]):
        n = len(_ids(lm.tokenizer, text))
        assert n >= 1 and len(got.logprobs) == n
        expected = _log_dist(lm.model, [lm.tokenizer.bos_token_id])[0, _ids(lm.tokenizer, text)[0]].item()
        assert got.logprobs[0] == pytest.approx(expected, abs=1e-5)


def test_no_texts(lm):
    scores, info = causal_token_logprobs(lm.model, lm.tokenizer, [], progress=False)
    assert scores == [] and info.n_texts == 0 and info.n_windows == 0


@pytest.fixture()
def no_bos_tokenizer(lm):
    tokenizer = copy.deepcopy(lm.tokenizer)
    tokenizer.bos_token = None
    assert tokenizer.bos_token_id is None
    return tokenizer


def test_encode_with_bos(lm, no_bos_tokenizer):
    ids = _ids(lm.tokenizer, "the lazy dog")
    encoded, bos = encode_with_bos(lm.tokenizer, ["the lazy dog", ""])
    assert bos == lm.tokenizer.bos_token_id and encoded == [[bos] + ids, [bos]]
    encoded, bos = encode_with_bos(no_bos_tokenizer, ["the lazy dog", ""])
    assert bos is None and encoded == [ids, []]
    assert encode_with_bos(lm.tokenizer, []) == ([], lm.tokenizer.bos_token_id)


def test_without_bos_first_token_is_not_scored(lm, no_bos_tokenizer):
    texts = ["the quick brown fox jumps", "", "fox"]
    scores, info = causal_token_logprobs(lm.model, no_bos_tokenizer, texts, progress=False)
    assert info.bos_token_id is None and info.first_token_scored is False
    ids = _ids(no_bos_tokenizer, texts[0])
    assert len(scores[0].logprobs) == len(ids) - 1
    np.testing.assert_array_equal(scores[0].token_ids, ids[1:])
    expected = _log_dist(lm.model, ids)[:-1].gather(1, torch.tensor(ids[1:])[:, None])[:, 0].numpy()
    np.testing.assert_allclose(scores[0].logprobs, expected, atol=1e-5, rtol=0)
    assert len(scores[1].logprobs) == 0
    assert len(scores[2].logprobs) == len(_ids(no_bos_tokenizer, "fox")) - 1


def test_context_below_two_is_rejected(lm):
    with pytest.raises(ValueError, match="at least 2"):
        causal_token_logprobs(lm.model, lm.tokenizer, ["fox"], max_length=1, progress=False)


# ---------------------------------------------------------------- (f) prefix_roots

def test_prefix_roots_hand_cases():
    roots = prefix_roots([(1, 2, 3), (1, 2), (1,), (1, 3), (2,), (1, 2, 3), (1, 2, 4, 5), ()])
    assert set(roots) == {(1, 2, 3), (1, 2), (1,), (1, 3), (2,), (1, 2, 4, 5), ()}
    assert roots[(1, 2, 3)] == (1, 2, 3)
    assert roots[(1, 2, 4, 5)] == (1, 2, 4, 5)
    assert roots[(1, 3)] == (1, 3)
    assert roots[(2,)] == (2,)
    assert roots[(1, 2)] in {(1, 2, 3), (1, 2, 4, 5)}
    assert roots[(1,)] in {(1, 2, 3), (1, 2, 4, 5), (1, 3)}
    assert roots[()] in {(1, 2, 3), (1, 2, 4, 5), (1, 3), (2,)}
    for sequence, root in roots.items():
        assert root[: len(sequence)] == sequence
        assert roots[root] == root  # a root is not a prefix of anything else


def test_prefix_roots_no_sharing_and_empty():
    assert prefix_roots([]) == {}
    assert prefix_roots([(3, 1), (1, 3), (2,)]) == {(1, 3): (1, 3), (2,): (2,), (3, 1): (3, 1)}
    # (1, 2) is not a prefix of (1, 3, 2) even though its tokens occur in it
    assert prefix_roots([(1, 2), (1, 3, 2)]) == {(1, 2): (1, 2), (1, 3, 2): (1, 3, 2)}


def test_prefix_roots_chain():
    chain = [(5,) * n for n in range(1, 6)]
    assert prefix_roots(chain) == {s: (5,) * 5 for s in chain}


def test_without_bos_the_first_token_is_context_only(lm):
    """add_start=False: the bare text's ids, token t >= 1 scored from the logits at t - 1, as MIMIR and
    the Min-K% / Min-K%++ code compute them (log_softmax(logits[:-1]) gathered at ids[1:])."""
    texts = ["the quick brown fox", "zebra", "members of parliament debated the budget on Monday"]
    scores, info = causal_token_logprobs(lm.model, lm.tokenizer, texts, add_start=False,
                                         distribution_stats=True, progress=False)
    assert info.first_token_scored is False and info.bos_token_id is None
    with_bos, _ = causal_token_logprobs(lm.model, lm.tokenizer, texts, progress=False)
    for text, got, scored in zip(texts, scores, with_bos):
        ids = _ids(lm.tokenizer, text)
        assert len(got.logprobs) == len(ids) - 1 == len(scored.logprobs) - 1
        np.testing.assert_array_equal(got.token_ids, ids[1:])
        if len(ids) < 2:
            continue
        log_dist = _log_dist(lm.model, ids)[:-1]
        expected = log_dist.gather(1, torch.tensor(ids[1:])[:, None])[:, 0].numpy()
        np.testing.assert_allclose(got.logprobs, expected, atol=1e-5)
        # Min-K%++'s mu and sigma (the sigma as E[log p^2] - mu^2, as the Min-K%++ code has it)
        mu = (log_dist.exp() * log_dist).sum(-1)
        sigma = ((log_dist.exp() * log_dist.square()).sum(-1) - mu.square()).sqrt()
        np.testing.assert_allclose(got.dist_mean, mu.numpy(), atol=1e-5)
        np.testing.assert_allclose(got.dist_std, sigma.numpy(), atol=1e-4)
