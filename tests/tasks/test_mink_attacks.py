"""mink_membership's attacks beyond the token log-probs: ref, ne, recall, dc_pdd (gradnorm:
tests/unit/test_gradnorm.py). Hand-computed values of each formula, agreement with MIMIR's definitions
written out here on the tiny random GPT-2, neighbours that are seeded, batch-independent and
cached, and the runner's handling of the auxiliary models (loaded, in the cache key, recorded)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from conftest import assert_user_error, save_tiny_causal_lm, write_jsonl
from test_mink_membership import TASK, TEXTS

from harness.app.cli import main
from harness.core.results import load_results
from harness.metrics import memorization as m
from tasks.mink_membership.neighbours import Candidate, neighbour_texts, pick_swaps, swap_text
from tests.helpers.tiny_models import save_bert

# ---------------------------------------------------------------- formulas, by hand

def test_reference_score_by_hand():
    assert m.reference_score(np.array([-1.0, -3.0]), np.array([-2.0])) == 0.0
    assert m.reference_score(np.array([-1.0, -1.0]), np.array([-3.0, -2.0, -4.0])) == 2.0


def test_neighbourhood_score_by_hand():
    assert m.neighbourhood_score(np.array([-1.0, -2.0]), [np.array([-2.0, -2.0]), np.array([-4.0])]) == 1.5
    assert math.isnan(m.neighbourhood_score(np.array([-1.0]), []))


def test_recall_score_by_hand():
    # LL(x|P) = -3, LL(x) = -1.5: conditioning halved the likelihood, ratio 2
    assert m.recall_score(np.array([-3.0, -3.0]), np.array([-1.0, -2.0])) == 2.0


def test_laplace_frequencies_by_hand():
    np.testing.assert_allclose(m.laplace_token_frequencies(np.array([0, 2, 1, 1])), [1 / 8, 3 / 8, 2 / 8, 2 / 8])


def test_dc_pdd_by_hand():
    freqs = np.array([1 / 8, 3 / 8, 2 / 8, 2 / 8])
    ids = np.array([2, 1, 2, 3])
    logprobs = np.log([0.5, 0.2, 0.9, 0.01])
    # first occurrences: positions 0 (token 2), 1 (token 1), 3 (token 3); the second token 2 is not counted
    alphas = [0.5 * -math.log(2 / 8), 0.2 * -math.log(3 / 8), 0.01 * -math.log(2 / 8)]  # 0.693, 0.196, 0.0139
    assert m.dc_pdd_score(ids, logprobs, freqs, cap=1.0) == pytest.approx(sum(alphas) / 3)
    assert m.dc_pdd_score(ids, logprobs, freqs, cap=0.2) == pytest.approx((0.2 + alphas[1] + alphas[2]) / 3)
    assert m.dc_pdd_score(ids, logprobs, freqs) == pytest.approx(0.01)  # the default cap holds every alpha


def mimir_dc_pdd(ids: np.ndarray, logprobs: np.ndarray, freqs: np.ndarray, a: float) -> float:
    """MIMIR's `DC_PDDAttack._attack` after its model call, written out: first occurrences by a
    list scan, alpha = p * log(1 / f), alpha[alpha > a] = a, beta = -mean(alpha)."""
    indexes, seen = [], []
    for i, token in enumerate(ids):
        if token not in seen:
            indexes.append(i)
            seen.append(token)
    alpha = np.exp(logprobs)[indexes] * np.log(1 / freqs[ids[indexes]])
    alpha[alpha > a] = a
    return -np.mean(alpha)


def test_dc_pdd_is_minus_mimir_on_random_texts():
    rng = np.random.default_rng(0)
    freqs = m.laplace_token_frequencies(rng.integers(0, 50, 40))
    for _ in range(20):
        ids = rng.integers(0, 40, rng.integers(1, 30))
        logprobs = np.log(rng.uniform(1e-4, 1, len(ids)))
        for a in (0.01, 0.1, 10.0):
            assert m.dc_pdd_score(ids, logprobs, freqs, a) == pytest.approx(-mimir_dc_pdd(ids, logprobs, freqs, a))


# ---------------------------------------------------------------- neighbours

def test_swap_text_replaces_token_characters():
    class Decoder:
        def decode(self, ids):
            return {7: "cat", 8: "##s"}[ids[0]]

    text = "the dog barks"
    offsets = [(0, 0), (0, 3), (4, 7), (8, 11), (11, 13), (0, 0)]  # [CLS] the dog bar ##ks [SEP]
    swaps = [Candidate(2, 7, 1.0), Candidate(4, 8, 1.0)]
    assert swap_text(text, offsets, swaps, Decoder()) == "the cat bars"


def test_pick_swaps_best_distinct_draws():
    candidates = [Candidate(i, 100 + i, score) for i, score in enumerate([0.1, 0.9, 0.5])]
    one = pick_swaps(candidates, n_tokens=20, n_neighbours=3, swap_fraction=0.05, seed=[1])  # 1 swap each
    assert [[c.position for c in swaps] for swaps in one] == [[1], [2], [0]]
    two = pick_swaps(candidates, n_tokens=40, n_neighbours=5, swap_fraction=0.05, seed=[1])  # 2 swaps each
    assert [[c.position for c in swaps] for swaps in two] == [[1, 2], [0, 1], [0, 2]]
    assert pick_swaps([], 10, 5, 0.05, [1]) == []


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("attack-models")
    return {"lm": save_tiny_causal_lm(root / "lm", context=64), "ref": save_tiny_causal_lm(root / "ref", 64, seed=1),
            "mlm": save_bert(root / "mlm", "BertForMaskedLM")}


def load(path):
    from harness.model.loading import ModelSpec
    from harness.model.loading import load as load_model

    return load_model(ModelSpec(model=str(path), device="cpu"))


def test_neighbours_are_seeded_and_batch_independent(models):
    mlm = load(models["mlm"])
    texts = ["went to work on a sunny day", "a went work sunny day to on", "day"]
    one = neighbour_texts(mlm.model, mlm.tokenizer, texts, 4, 0.2, seed=0, batch_size=1)
    many = neighbour_texts(mlm.model, mlm.tokenizer, texts, 4, 0.2, seed=0, batch_size=64)
    assert one == many
    assert all(1 <= len(found) <= 4 for found in one[:2]) and all(n != t for found, t in zip(one, texts) for n in found)
    assert neighbour_texts(mlm.model, mlm.tokenizer, texts[:1], 4, 0.2, seed=0)[0] == one[0]
    other_seed = neighbour_texts(mlm.model, mlm.tokenizer, texts, 4, 0.2, seed=1)
    assert other_seed != one


# ---------------------------------------------------------------- end to end, against MIMIR's definitions

def run(models, data, out, *extra: str):
    argv = ["evaluate", "--model", str(models["lm"]), "--tasks", TASK, "--data", str(data), "--output-path",
            str(out), "--bootstrap-resamples", "20", "--device", "cpu", "--log-samples", "--lengths", "6,12",
            "--k-percents", "20", *extra]
    assert main(argv) == 0
    [path] = sorted(out.glob("*.json"))
    entry = load_results(path).task(TASK)
    samples = [json.loads(line) for line in (out / entry.samples_file).read_text().splitlines()]
    return entry, samples


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_jsonl(tmp_path_factory.mktemp("attack-data") / "data.jsonl",
                       [{"text": t, "label": i % 2, "id": f"t{i}"} for i, t in enumerate(TEXTS * 2)])


@pytest.fixture(scope="module")
def skip_run(models, data, tmp_path_factory):
    out = tmp_path_factory.mktemp("attack-run")
    return run(models, data, out, "--first-token", "skip", "--reference-model", str(models["ref"]),
               "--neighbour-model", str(models["mlm"]), "--neighbours", "3", "--attacks",
               "loss,ref,ne,recall,dc_pdd", "--no-cache")


@torch.no_grad()
def mimir_nll(model, ids: list[int]) -> float:
    """MIMIR's `get_ll` on GPT-2 (bare text, first token unscored): -mean log p(x_t | x_<t), t >= 2."""
    t = torch.tensor([ids])
    return model(t, labels=t).loss.item()


@torch.no_grad()
def mimir_conditional_ll(model, prefix_ids: list[int], ids: list[int]) -> float:
    """MIMIR's `ReCaLLAttack.get_conditional_ll` in one window: -loss over the text's tokens given the prefix."""
    labels = torch.tensor([prefix_ids + ids])
    targets = labels.clone()
    targets[:, : len(prefix_ids)] = -100
    return -model(labels, labels=targets).loss.item()


def test_the_prefix_cache_gives_the_scores_of_the_prefix_run_with_every_text(tiny_lm, monkeypatch):
    """ReCaLL's prefix runs once and its key/value cache serves every text: the same log-probs as
    running [BOS] + prefix + text for each text (`target_logprobs`), up to float rounding; a model
    without a usable cache gets None (the caller falls back to that plain path)."""
    from harness.model.loading import ModelSpec, load
    from harness.scoring import conditional
    from harness.scoring.conditional import shared_prefix_logprobs, target_logprobs
    from harness.scoring.distributed import run_batches

    lm = load(ModelSpec(model=str(tiny_lm), device="cpu"))
    prefix, texts = "members of", [text[:16] for text in TEXTS] + ["x"]
    prefix_ids = [lm.tokenizer.bos_token_id] + lm.tokenizer(prefix, add_special_tokens=False)["input_ids"]
    target_ids = lm.tokenizer(texts, add_special_tokens=False)["input_ids"]
    cached = shared_prefix_logprobs(lm.model, prefix_ids, target_ids, batch_size=3)
    plain = target_logprobs(lm.model, lm.tokenizer, [prefix] * len(texts), texts, seq2seq=False, batch_size=3)
    assert [len(c) for c in cached] == [len(ids) for ids in target_ids]
    for ours, theirs in zip(cached, plain, strict=True):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
    # a logits budget of one position per batch: one text a batch, the same numbers (gemma-3's vocabulary
    # at batch 16 and 700 tokens would otherwise hold 11.7 GB of logits)
    from harness.scoring import causal

    seen = []
    monkeypatch.setattr(causal, "LOGITS_BUDGET_BYTES", 4 * lm.model.config.vocab_size)
    monkeypatch.setattr(conditional, "run_batches", lambda batches, *rest: seen.append(batches) or
                        run_batches(batches, *rest))
    tight = shared_prefix_logprobs(lm.model, prefix_ids, target_ids, batch_size=3)
    tight_plain = target_logprobs(lm.model, lm.tokenizer, [prefix] * len(texts), texts, seq2seq=False, batch_size=3)
    assert all(len(batch) == 1 for batches in seen for batch in batches) and len(seen) == 2
    for ours, theirs, tighter, tighter_plain in zip(cached, plain, tight, tight_plain, strict=True):
        np.testing.assert_allclose(tighter, ours, atol=1e-6)
        np.testing.assert_allclose(tighter_plain, theirs, atol=1e-6)
    monkeypatch.setattr(conditional, "_cache_argument", lambda model: None)
    assert shared_prefix_logprobs(lm.model, prefix_ids, target_ids) is None


def test_ref_and_recall_agree_with_mimir(models, skip_run):
    """With `--first-token skip` (MIMIR's way on GPT-2), per text: ref = -(NLL_target - NLL_ref) and
    recall = -(MIMIR's ll_nonmember / lls)."""
    entry, samples = skip_run
    target, reference = load(models["lm"]), load(models["ref"])
    tok, ref_tok = target.tokenizer, reference.tokenizer
    prefix = TEXTS[0]  # the first non-member (label 0: even index), one shot
    assert entry.info["attacks"]["recall"]["prefix_text_ids"] == ["t0"]
    assert entry.info["attacks"]["recall"]["prefix_tokens"] == 32
    checked = 0
    for sample in samples:
        text = " ".join(TEXTS[int(sample["id"][1:]) % 6].split()[: sample["length"]])
        ids = tok(text)["input_ids"]
        scores = sample["scores"]
        ll = mimir_nll(target.model, ids)
        assert scores["ref"] == pytest.approx(-(ll - mimir_nll(reference.model, ref_tok(text)["input_ids"])), abs=1e-5)
        if sample["id"] == "t0":
            assert "recall" not in scores
        elif "recall" in scores:
            # the prefix as membench cuts it by default: its first half-context (32) tokens
            expected = mimir_conditional_ll(target.model, tok(prefix)["input_ids"][:32], ids) / ll
            assert scores["recall"] == pytest.approx(-expected, rel=1e-5)
            checked += 1
    assert checked >= 6


@pytest.mark.parametrize("cap", ["0.01", "1"])
def test_dc_pdd_agrees_with_mimir(models, data, tmp_path, cap):
    """Under `--first-token score` the GPT-2 text is scored given <|endoftext|>, the EOS MIMIR's
    DC-PDD prepends: dc_pdd = -(MIMIR's beta) with the token frequencies of the non-members."""
    _, samples = run(models, data, tmp_path, "--no-cache", "--attacks", "dc_pdd", "--dc-pdd-cap", cap)
    tok, model = load(models["lm"]).tokenizer, load(models["lm"]).model
    counts = np.zeros(len(tok), dtype=np.int64)
    for text in [t for i, t in enumerate(TEXTS * 2) if i % 2 == 0]:
        np.add.at(counts, tok(text, truncation=True, max_length=1024)["input_ids"], 1)
    freqs = m.laplace_token_frequencies(counts)
    for sample in samples:
        ids = tok(" ".join(TEXTS[int(sample["id"][1:]) % 6].split()[: sample["length"]]))["input_ids"]
        with torch.no_grad():
            full = torch.tensor([[tok.eos_token_id] + ids])
            lp = torch.log_softmax(model(full).logits[0, :-1], -1).gather(-1, full[0, 1:, None])[:, 0].numpy()
        assert sample["scores"]["dc_pdd"] == pytest.approx(-mimir_dc_pdd(np.array(ids), lp, freqs, float(cap)),
                                                           rel=1e-5)


def test_ne_is_loss_minus_mean_neighbour_loss(models, skip_run, membench_cache):
    from harness.scoring.causal import causal_token_logprobs
    from tasks.mink_membership.neighbours import cached_neighbours

    entry, samples = skip_run
    target, mlm = load(models["lm"]), load(models["mlm"])
    texts = [" ".join(TEXTS[int(s["id"][1:]) % 6].split()[: s["length"]]) for s in samples]
    neighbours = cached_neighbours(mlm, texts, 3, 0.05, seed=0)
    for sample, text, found in zip(samples, texts, neighbours):
        scored, _ = causal_token_logprobs(target.model, target.tokenizer, [text] + found, add_start=False)
        expected = m.neighbourhood_score(scored[0].logprobs, [s.logprobs for s in scored[1:]])
        assert sample["scores"]["ne"] == pytest.approx(expected, abs=1e-6)
    assert entry.info["attacks"]["ne"]["identity"] == mlm.identity


def test_neighbours_come_from_the_cache(models, monkeypatch):
    import tasks.mink_membership.neighbours as neighbours

    mlm = load(models["mlm"])
    first = neighbours.cached_neighbours(mlm, TEXTS[:2], 2, 0.1, seed=5)
    monkeypatch.setattr(neighbours, "neighbour_texts", lambda *a, **k: pytest.fail("recomputed"))
    assert neighbours.cached_neighbours(mlm, TEXTS[:2], 2, 0.1, seed=5) == first


def test_reference_model_identity_is_in_the_cache_key(models, data, tmp_path):
    """The same settings with another reference model must not be served from the cache; the
    results record which model it was, and the file name (config hash) depends on the settings only."""
    runs = []
    for name in ("ref", "lm"):
        entry, samples = run(models, data, tmp_path / name, "--reference-model", str(models[name]), "--attacks",
                             "loss,ref")
        runs.append((entry, samples))
    assert runs[0][0].info["attacks"]["ref"]["identity"] != runs[1][0].info["attacks"]["ref"]["identity"]
    assert all(s["scores"]["ref"] == 0.0 for s in runs[1][1])  # the model against itself
    assert any(s["scores"]["ref"] != 0.0 for s in runs[0][1])


def test_attacks_needing_a_model_are_left_out_and_said(models, data, tmp_path):
    """By default every attack runs that can: ref and ne without their model are said not to have run."""
    entry, samples = run(models, data, tmp_path, "--no-cache")
    assert entry.info["attacks_not_run"] == {"ref": "no --reference-model given", "ne": "no --neighbour-model given"}
    assert {metric.tags["score"] for metric in entry.metrics if "score" in metric.tags} == {"loss", "zlib", "min_k_20", "min_k_pp_20", "recall",
                                                                  "dc_pdd", "gradnorm", "min_k_best", "min_k_pp_best",
                                                                  "blind_bow"}  # no text holds a year: no blind_date


def test_user_errors(models, data, tmp_path, capsys):
    base = ["evaluate", "--model", str(models["lm"]), "--tasks", TASK, "--data", str(data), "--device", "cpu", "--lengths", "6",
            "--output-path", str(tmp_path / "out")]
    assert_user_error(capsys, base + ["--attacks", "ref"], tmp_path / "out", "--reference-model")
    assert_user_error(capsys, base + ["--attacks", "ne", "--neighbour-model", str(models["lm"])], tmp_path / "out",
                      "masked LM")
    assert_user_error(capsys, base + ["--reference-model", "reference:no-such-e01"], tmp_path / "out",
                      "reference:no-such-e01")
    assert_user_error(capsys, base + ["--recall-prefix", str(tmp_path / "missing.txt")], tmp_path / "out",
                      "--recall-prefix")
    assert_user_error(capsys, base + ["--attacks", "loss,bogus"], tmp_path / "out", "--attacks")
