"""Extraction risk as a probability: the exact p_z of a sampling scheme (harness.scoring.extraction)
against Monte Carlo draws of `model.generate`, the near-verbatim lower bound of the constrained beam
search (harness.scoring.constrained_beam), greedy agreement, and the pure metrics
(harness.metrics.extraction). The ≥ 10^5-draw check down to p_z ~ 1e-4 on the reference GPT-2 is
bench/bench_extraction.py's; here 2 x 10^4 draws on a tiny model, targets with p_z >= ~1e-3."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from rapidfuzz.distance import Levenshtein
from statsmodels.stats.proportion import proportion_confint

from harness.core.errors import UserError
from harness.metrics.extraction import (
    attempts_needed,
    check_similarity_threshold,
    discoverable,
    extraction_gap,
    extraction_probability,
    extraction_summary,
    optimistic_similarity,
    prefix_distance_row,
)
from harness.metrics.memorization import approximate_memorization
from harness.scoring.constrained_beam import decoded, decoded_all, near_verbatim_bound_ids, near_verbatim_bounds
from harness.scoring.extraction import SamplingScheme, extraction_logprobs, extraction_logprobs_ids, log_pz
from harness.scoring.generation import greedy_continuations
from tests.conftest import TINY_TEXTS

SCHEME = SamplingScheme(temperature=0.8, top_k=20, top_p=0.9)
DRAWS = 20_000
TARGET_LENGTH = 3
CONFIDENCE = 0.99


@pytest.fixture(scope="module")
def peaked_lm():
    """A seeded 1-layer GPT-2 on the tiny BPE tokenizer, initialized wide (std 0.3) so that its
    next-token distributions are peaked enough for targets of 3 tokens to span p_z 1e-1..1e-4; the
    (tied) embeddings of tokens that are not printable ASCII are zero, so their logits are 0 and the
    argmax is mostly text; end-of-text does not stop `generate`, so every draw has the target's length."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from harness.reference import train

    torch.set_num_threads(1)
    tokenizer = train.train_tokenizer(TINY_TEXTS, vocab_size=300)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=32, n_embd=32, n_layer=1, n_head=2,
                        initializer_range=0.3, bos_token_id=tokenizer.bos_token_id,
                        eos_token_id=tokenizer.eos_token_id)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for token in range(len(tokenizer)):
            text = tokenizer.decode([token])
            if not (text.isascii() and text.isprintable()):
                model.transformer.wte.weight[token] = 0.0
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model, tokenizer


@pytest.fixture(scope="module")
def draws(peaked_lm):
    """DRAWS seeded samples of TARGET_LENGTH tokens after one prompt, from `generate` itself."""
    model, tokenizer = peaked_lm
    prompt = [tokenizer.bos_token_id] + tokenizer("The quick", add_special_tokens=False)["input_ids"]
    torch.manual_seed(1234)
    rows = torch.tensor([prompt] * DRAWS)
    with torch.no_grad():
        out = model.generate(input_ids=rows, attention_mask=torch.ones_like(rows), max_new_tokens=TARGET_LENGTH,
                             **SCHEME.generate_kwargs())
    sequences = [tuple(row) for row in out[:, len(prompt):].tolist()]
    return prompt, sequences


def _interval(count: int, total: int) -> tuple[float, float]:
    low, high = proportion_confint(count, total, alpha=1 - CONFIDENCE, method="beta")  # Clopper-Pearson
    return float(low), float(high)


@pytest.fixture(scope="module")
def exact(peaked_lm, draws):
    """log p_z of every distinct drawn continuation, and targets at p_z ~ 1e-1, 1e-2, 1e-3 (chosen by
    p_z among the drawn ones: at >= 20 expected draws, being drawn at all hardly conditions the count)."""
    model, tokenizer = peaked_lm
    prompt, sequences = draws
    distinct = sorted(set(sequences))
    values = log_pz(extraction_logprobs_ids(model, [prompt] * len(distinct), [list(s) for s in distinct], SCHEME,
                                            batch_size=64))
    by_sequence = dict(zip(distinct, values))
    targets = []
    for level in (1e-1, 1e-2, 1e-3):
        best = min(distinct, key=lambda s: abs(by_sequence[s] - math.log(level)))
        targets.append(best)
    return by_sequence, targets


def test_every_draw_of_generate_is_inside_the_kept_set(exact, draws):
    """A drawn continuation with p_z = 0 would mean the kept set differs from generate's."""
    by_sequence, _ = exact
    assert all(math.isfinite(v) for v in by_sequence.values())
    assert float(np.exp(list(by_sequence.values())).sum()) <= 1.0 + 1e-6


def test_pz_lies_in_the_monte_carlo_interval_of_generate(exact, draws):
    by_sequence, targets = exact
    _, sequences = draws
    counts = {s: 0 for s in targets}
    for s in sequences:
        if s in counts:
            counts[s] += 1
    pz = [math.exp(by_sequence[s]) for s in targets]
    assert pz[0] > 0.03 and pz[-1] < 3e-3, pz  # the targets span 1e-1 .. 1e-3
    for s, p in zip(targets, pz):
        low, high = _interval(counts[s], DRAWS)
        assert low <= p <= high, (s, p, counts[s], low, high)


def test_a_token_outside_the_kept_set_gives_zero(peaked_lm, draws):
    model, tokenizer = peaked_lm
    prompt, _ = draws
    scores = torch.log_softmax(model(torch.tensor([prompt])).logits[0, -1].float(), -1)
    rank_30 = int(scores.argsort(descending=True)[30])  # outside the top 20
    top = int(scores.argmax())
    values = log_pz(extraction_logprobs_ids(model, [prompt] * 2, [[rank_30, top], [top]], SCHEME))
    assert values[0] == -math.inf and math.isfinite(values[1])


def _near_verbatim_frequency(tokenizer, sequences: list[tuple[int, ...]], target: tuple[int, ...],
                             threshold: float) -> int:
    reference = tokenizer.decode(list(target), skip_special_tokens=True)
    texts = {}
    for s in set(sequences):
        texts[s] = approximate_memorization(tokenizer.decode(list(s), skip_special_tokens=True), reference) >= threshold
    return sum(texts[s] for s in sequences)


def test_near_verbatim_bound_between_pz_and_the_monte_carlo_interval(peaked_lm, draws, exact):
    model, tokenizer = peaked_lm
    prompt, sequences = draws
    by_sequence, targets = exact
    threshold = 0.6
    grew = False
    for target in targets:
        narrow = near_verbatim_bound_ids(model, tokenizer, prompt, list(target), SCHEME, threshold, beam_width=20)
        wide = near_verbatim_bound_ids(model, tokenizer, prompt, list(target), SCHEME, threshold, beam_width=5000)
        low, high = _interval(_near_verbatim_frequency(tokenizer, sequences, target, threshold), DRAWS)
        pz = by_sequence[target]
        assert narrow.log_bound >= pz - 1e-5 and abs(narrow.log_pz - pz) < 1e-5
        assert math.exp(narrow.log_bound) <= high
        assert narrow.log_bound <= wide.log_bound + 1e-9
        # wide enough to hold every continuation that can reach the set: the bound is the exact
        # probability, so the pruning dropped nothing that could end inside it
        assert low <= math.exp(wide.log_bound) <= high, (target, math.exp(wide.log_bound), low, high)
        grew |= narrow.log_bound > pz + 0.01
    assert grew  # near-verbatim neighbours add mass beyond the verbatim target


def test_greedy_pz_is_one_exactly_when_greedy_reproduces_the_target(peaked_lm):
    model, tokenizer = peaked_lm
    candidates = [text[k:k + n] for text in TINY_TEXTS[:4] for k in (0, 20, 40) for n in range(4, 24, 3)]
    greedy, _ = greedy_continuations(model, tokenizer, candidates, [2] * len(candidates), batch_size=8)
    # the prompts whose greedy text tokenizes back into the tokens greedy decoding chose (else the
    # text matches while the tokens differ)
    encoded = [[tokenizer.bos_token_id] + ids for ids in tokenizer(candidates, add_special_tokens=False)["input_ids"]]
    width = max(map(len, encoded))
    rows = torch.tensor([[0] * (width - len(ids)) + ids for ids in encoded])  # left-padded, one generate call
    mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in encoded])
    chosen = model.generate(input_ids=rows, attention_mask=mask, max_new_tokens=2, do_sample=False)[:, width:]
    prompts, kept = [], []
    for prompt, text, ids in zip(candidates, greedy, chosen.tolist()):
        if tokenizer(text, add_special_tokens=False)["input_ids"] == ids and text not in kept:
            prompts.append(prompt)
            kept.append(text)
    assert len(prompts) >= 4, len(prompts)
    prompts, greedy = prompts[:12], kept[:12]
    pairs, reproduced = [], []
    for i, prompt in enumerate(prompts):
        for j, target in enumerate(greedy):
            pairs.append((prompt, target))
            reproduced.append(greedy[i] == target)
    values = log_pz(extraction_logprobs(model, tokenizer, [p for p, _ in pairs], [t for _, t in pairs],
                                        SamplingScheme(greedy=True), batch_size=5)[0])
    assert set(values.tolist()) <= {0.0, -math.inf}
    assert (values == 0.0).tolist() == reproduced
    assert any(reproduced) and not all(reproduced)


def test_a_targets_pz_does_not_depend_on_its_batch(peaked_lm):
    model, tokenizer = peaked_lm
    prompts = [t[: 5 + 4 * i] for i, t in enumerate(TINY_TEXTS[:7])]
    targets = [t[20: 24 + 3 * i] for i, t in enumerate(TINY_TEXTS[1:8])]
    scheme = SamplingScheme(temperature=1.3, top_k=50, top_p=0.95)
    alone = [extraction_logprobs(model, tokenizer, [p], [t], scheme)[0][0] for p, t in zip(prompts, targets)]
    for batch_size in (3, 16):
        together, info = extraction_logprobs(model, tokenizer, prompts, targets, scheme, batch_size=batch_size)
        for a, b in zip(alone, together):
            assert np.array_equal(np.isfinite(a), np.isfinite(b))
            np.testing.assert_allclose(a[np.isfinite(a)], b[np.isfinite(b)], rtol=1e-5, atol=1e-6)
    assert info.n_targets == 7 and info.n_prompts_cut == 0


@pytest.mark.parametrize("settings", [dict(temperature=0), dict(temperature=-1.0), dict(top_k=0), dict(top_k=2.5),
                                      dict(top_p=0.0), dict(top_p=1.5)])
def test_bad_sampling_settings_are_user_errors(settings):
    with pytest.raises(UserError) as caught:
        SamplingScheme(**settings).check()
    assert "\n" not in str(caught.value)


def test_bad_search_and_metric_settings_are_user_errors(peaked_lm):
    model, tokenizer = peaked_lm
    for threshold in (-0.1, 1.1, float("nan")):
        with pytest.raises(UserError, match="threshold"):
            near_verbatim_bounds(model, tokenizer, ["The"], [" quick"], SCHEME, threshold=threshold)
    with pytest.raises(UserError, match="beam width"):
        near_verbatim_bounds(model, tokenizer, ["The"], [" quick"], SCHEME, beam_width=0)
    with pytest.raises(UserError, match="temperature"):
        extraction_logprobs(model, tokenizer, ["The"], [" quick"], SamplingScheme(temperature=0.0))
    with pytest.raises(UserError):
        discoverable(np.zeros(1), 0)
    with pytest.raises(UserError):
        extraction_summary(np.zeros(1), level=1.5)
    check_similarity_threshold(0.0)
    check_similarity_threshold(1.0)
    SamplingScheme(temperature=0.0, greedy=True).check()  # greedy ignores T


# ---------------------------------------------------------------- pure metrics

def test_extraction_probability_is_stable_and_matches_the_formula():
    log_p = np.log(np.array([0.5, 0.01, 1e-6]))
    for n in (1, 10, 1000):
        np.testing.assert_allclose(extraction_probability(log_p, n), 1 - (1 - np.exp(log_p)) ** n, rtol=1e-9)
    # where 1 - (1 - p)^n loses every digit in floats: p = e^-50, n = 10^4 -> n p
    assert extraction_probability(np.array([-50.0]), 10_000)[0] == pytest.approx(10_000 * math.exp(-50), rel=1e-9)
    assert extraction_probability(np.array([-1e-20]), 1)[0] == pytest.approx(1.0)
    assert extraction_probability(np.array([-math.inf, 0.0]), 5).tolist() == [0.0, 1.0]


def test_attempts_needed_is_the_least_discoverable_n():
    log_p = np.log(np.array([0.9, 0.3, 0.01, 1e-4, 1.0]))
    needed = attempts_needed(log_p, 0.5)
    assert needed.tolist() == [1.0, 2.0, 69.0, 6932.0, 1.0]  # ceil(log 0.5 / log(1 - p))
    for value, n in zip(log_p, needed):
        assert discoverable(np.array([value]), int(n), 0.5)[0]
        if n > 1:
            assert not discoverable(np.array([value]), int(n) - 1, 0.5)[0]
    assert attempts_needed(np.array([-math.inf]))[0] == math.inf


def test_extraction_summary_and_gap_by_hand():
    members = np.array([math.log(0.9), math.log(0.02), math.log(1e-4), -math.inf])
    others = np.array([math.log(1e-3), math.log(1e-5), -math.inf, -math.inf])
    summary = extraction_summary(members, attempts=(1, 100))
    # n = 1: p >= 0.5 only for 0.9; n = 100: 1 - 0.98^100 = 0.87 >= 0.5, 1 - (1 - 1e-4)^100 = 0.01 < 0.5
    assert summary["extractable_at_1"] == 0.25 and summary["extractable_at_100"] == 0.5
    assert summary["median_log10_pz"] == pytest.approx((math.log10(0.02) + math.log10(1e-4)) / 2)
    assert summary["mean_pz"] == pytest.approx((0.9 + 0.02 + 1e-4) / 4)
    gap = extraction_gap(members, others, attempts=(1, 100))
    assert gap["extractable_at_1"] == 0.25 and gap["extractable_at_100"] == 0.5
    assert math.isnan(gap["median_log10_pz"])  # the non-members' median is -inf
    assert gap["mean_pz"] == pytest.approx((0.9 + 0.02 + 1e-4 - 1e-3 - 1e-5) / 4)


def test_prefix_distance_row_against_rapidfuzz():
    rng = random.Random(0)
    for _ in range(200):
        a = "".join(rng.choice("abcé ") for _ in range(rng.randint(0, 9)))
        t = "".join(rng.choice("abcé ") for _ in range(rng.randint(0, 9)))
        row = prefix_distance_row(a, t)
        assert row.tolist() == [Levenshtein.distance(a, t[:j]) for j in range(len(t) + 1)]
        split = rng.randint(0, len(a))
        assert prefix_distance_row(a, t, prefix_distance_row(a[:split], t), a[:split]).tolist() == row.tolist()


def test_optimistic_similarity_bounds_every_completion():
    rng = random.Random(1)
    for _ in range(2000):
        a, rest, t = ("".join(rng.choice("ab ") for _ in range(rng.randint(0, n))) for n in (6, 8, 8))
        bound = optimistic_similarity(int(prefix_distance_row(a, t).min()), len(a), len(t))
        assert approximate_memorization(a + rest, t) <= bound + 1e-12, (a, rest, t)
    assert optimistic_similarity(0, 3, 10) == 1.0  # a prefix of the target can still become it
    # "xyz" against "abcdef": D = 3; the best completion is 9 characters with distance 3 -> 1 - 3/9
    assert optimistic_similarity(3, 3, 6) == pytest.approx(1 - 3 / 9)
    assert optimistic_similarity(int(prefix_distance_row("xyz", "abcdef").min()), 3, 6) == pytest.approx(2 / 3)


def test_pair_extraction_is_the_stepwise_sampling_distribution_for_both_kinds(peaked_lm):
    # causal: the pairs as target_logprobs reads them give extraction_logprobs' p_z; seq2seq: each target
    # token's log q is the scheme's processed step distribution of the decoder fed the target so far, and
    # greedy p_z is 1 exactly where greedy decoding gives the target
    from transformers import T5Config, T5ForConditionalGeneration

    from harness.scoring.conditional import encode_pairs, greedy_targets
    from harness.scoring.extraction import pair_extraction_logprobs

    model, tokenizer = peaked_lm
    sources = [t[: 6 + 3 * i] for i, t in enumerate(TINY_TEXTS[:5])]
    targets = [t[30: 33 + 2 * i] for i, t in enumerate(TINY_TEXTS[2:7])]
    paired = log_pz(pair_extraction_logprobs(model, tokenizer, sources, targets, False, SCHEME, batch_size=2))
    direct = log_pz(extraction_logprobs(model, tokenizer, sources, targets, SCHEME)[0])
    assert paired == pytest.approx(direct, abs=1e-5)

    torch.manual_seed(1)
    t5 = T5ForConditionalGeneration(T5Config(vocab_size=len(tokenizer), d_model=32, d_ff=64, num_layers=1,
                                             num_heads=2, d_kv=16, initializer_factor=3.0,
                                             pad_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                                             decoder_start_token_id=tokenizer.eos_token_id)).eval()
    source_ids, target_ids = encode_pairs(tokenizer, sources, targets, True, None, None)
    found = pair_extraction_logprobs(t5, tokenizer, sources, targets, True, SCHEME, batch_size=2)
    warpers = SCHEME.processors()
    with torch.no_grad():
        for source, target, row in zip(source_ids, target_ids, found):
            assert len(row) == len(target)
            for step, token in enumerate(target):
                decoder = torch.tensor([[tokenizer.eos_token_id] + target[:step]])
                logits = t5(input_ids=torch.tensor([source]), decoder_input_ids=decoder).logits[:, -1]
                assert row[step] == pytest.approx(float(SCHEME.step_logprobs(logits, warpers)[0, token]), abs=1e-5)
    greedy = greedy_targets(t5, tokenizer, sources, 6, 2, None, None)
    # targets: greedy outputs' first tokens whose text encodes back into them, each after every source
    texts = [text for ids in greedy for k in (4, 2, 1) if len(ids) >= k
             and encode_pairs(tokenizer, [""], [text := tokenizer.decode(ids[:k])], True, None, None)[1][0] == ids[:k]]
    assert texts
    pairs = [(source, text) for source in sources for text in texts]
    values = log_pz(pair_extraction_logprobs(t5, tokenizer, [a for a, _ in pairs], [b for _, b in pairs], True,
                                             SamplingScheme(greedy=True)))
    _, pair_ids = encode_pairs(tokenizer, [a for a, _ in pairs], [b for _, b in pairs], True, None, None)
    reproduced = [greedy[k // len(texts)][:len(ids)] == ids for k, ids in enumerate(pair_ids)]
    assert set(values.tolist()) <= {0.0, -math.inf} and (values == 0.0).tolist() == reproduced
    assert any(reproduced) and not all(reproduced)


def test_the_searchs_fast_decoding_is_decode(peaked_lm):
    """`decoded_all` (the Rust tokenizer's decode, straight) is `decoded` (transformers' decode) on sequences
    of every token, special ones included, and falls back to it for a tokenizer that cleans up spaces."""
    _, tokenizer = peaked_lm
    rng = random.Random(0)
    sequences = [[rng.randrange(len(tokenizer)) for _ in range(rng.randrange(0, 12))] for _ in range(300)]
    assert decoded_all(tokenizer, sequences) == [decoded(tokenizer, sequence) for sequence in sequences]

    class Cleaning:  # a tokenizer whose decode does more than the Rust decode: only its own decode may run
        backend_tokenizer = None
        clean_up_tokenization_spaces = True

        def decode(self, ids, skip_special_tokens=False):
            return f"{len(ids)} {skip_special_tokens}"

    Cleaning.backend_tokenizer = tokenizer.backend_tokenizer
    assert decoded_all(Cleaning(), [[1, 2], [3]]) == ["2 True", "1 True"]
