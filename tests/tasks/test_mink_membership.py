"""mink_membership's settings and counts end to end on a tiny random GPT-2: `--first-token skip`
gives the public code's per-text scores (MIMIR, Min-K%, Min-K%++), and the counts of texts too short
for a length and of texts without a scored token are kept apart."""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest
import torch
from conftest import write_jsonl

from harness.app.cli import main
from harness.core.results import load_results

TASK = "mink_membership"
TEXTS = ["the quick brown fox jumps over the lazy dog by the river bank",
         "members of parliament debated the budget on a long Monday night",
         "a journey of a thousand miles begins with a single step they say",
         "the football club signed a striker from the river town on Monday",
         "zebra quantum xylophone and the quick dog went to the market",
         "on a sunny day the lazy fox went over the bank of the river"]


def run(model, data, out, *extra: str) -> tuple:
    argv = ["evaluate", "--model", str(model), "--tasks", TASK, "--data", str(data), "--output-path", str(out),
            "--bootstrap-resamples", "20", "--device", "cpu", "--no-cache", "--log-samples", *extra]
    assert main(argv) == 0
    [path] = out.glob("*.json")
    entry = load_results(path).task(TASK)
    samples = [json.loads(line) for line in (out / entry.samples_file).read_text().splitlines()]
    return entry, samples


@torch.no_grad()
def peer_scores(model, tokenizer, text: str, ratio: float = 0.2) -> dict[str, float]:
    """The scores as the Min-K%++ code (run.py) computes them from the bare text: LOSS = -loss of
    model(ids, labels=ids), zlib = LOSS / zlib length, Min-K% and Min-K%++ over int(n * ratio) tokens
    (written out here from their formulas)."""
    ids = torch.tensor(tokenizer.encode(text))[None]
    out = model(ids, labels=ids)
    ll = -out.loss.item()
    log_probs = torch.log_softmax(out.logits[0, :-1].double(), dim=-1)  # float64: see below
    token = log_probs.gather(-1, ids[0, 1:, None])[:, 0]
    mu = (log_probs.exp() * log_probs).sum(-1)
    sigma = (log_probs.exp() * log_probs.square()).sum(-1) - mu.square()
    k = int(len(token) * ratio)
    return {"loss": ll, "zlib": ll / len(zlib.compress(text.encode("utf-8"))),
            "min_k_20": float(np.mean(np.sort(token.numpy())[:k])),
            "min_k_pp_20": float(np.mean(np.sort(((token - mu) / sigma.sqrt()).numpy())[:k]))}


def test_first_token_skip_gives_the_public_codes_scores(tiny_lm, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    data = write_jsonl(tmp_path / "data.jsonl", [{"text": t, "label": i % 2} for i, t in enumerate(TEXTS)])
    skip, skip_samples = run(tiny_lm, data, tmp_path / "skip", "--first-token", "skip", "--lengths", "6")
    score, score_samples = run(tiny_lm, data, tmp_path / "score", "--lengths", "6")
    assert skip.config["first_token"] == "skip" and score.config["first_token"] == "score"
    assert skip.info["bos"] == "none: first token unscored" and score.info["bos"] == "prepended"
    assert skip.config_hash != score.config_hash
    model, tokenizer = AutoModelForCausalLM.from_pretrained(tiny_lm).eval(), AutoTokenizer.from_pretrained(tiny_lm)
    for ours, scored in zip(skip_samples, score_samples):
        text = " ".join(TEXTS[int(ours["id"]) - 1].split()[:6])
        n = len(tokenizer.encode(text))
        assert n < 32  # within the context: the public code runs the whole text at once
        assert ours["n_tokens"] == n - 1 and scored["n_tokens"] == n  # GPT-2's encode adds no BOS
        theirs = peer_scores(model, tokenizer, text)
        # their sigma^2 = E[log p^2] - mu^2 cancels digits in float32 on this near-uniform model (ours is
        # centred), so theirs is taken in float64 here; in float32 the two differ by up to 1e-4 relative.
        # Ours runs in float32: within 1e-5 (absolute) or 2e-5 (relative)
        assert {name: ours["scores"][name] for name in theirs} == pytest.approx(theirs, rel=2e-5, abs=1e-5)
        assert scored["scores"]["loss"] != pytest.approx(ours["scores"]["loss"], abs=1e-5)


def test_too_short_and_no_scored_token_are_counted_apart(tiny_lm, tmp_path):
    # at L = 1: "" has no word (too short); "a" (of "a b c" and "a journey ...") is one token, so
    # without a BOS nothing of it is scored
    rows = [{"text": "", "label": 0}, {"text": "a b c", "label": 1}] + \
        [{"text": t, "label": i % 2} for i, t in enumerate(TEXTS)]
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    skip, _ = run(tiny_lm, data, tmp_path / "skip", "--first-token", "skip", "--lengths", "1,12")
    counts = skip.counts
    assert (counts["too_short@1"], counts["no_scored_token@1"]) == (1, 2)
    assert (counts["members@1"], counts["nonmembers@1"]) == (3, 2)
    # at 12 words: "", "a b c" and the two texts of 11 words are too short
    assert (counts["too_short@12"], counts["no_scored_token@12"], counts["non_finite@12"]) == (4, 0, 0)
    assert (counts["members@12"], counts["nonmembers@12"]) == (2, 2)
    score, _ = run(tiny_lm, data, tmp_path / "score", "--lengths", "1")
    assert (score.counts["too_short@1"], score.counts["no_scored_token@1"]) == (1, 0)
    assert (score.counts["members@1"], score.counts["nonmembers@1"]) == (4, 3)


def test_lm_eval_export_refuses_first_token_skip():
    """lm-eval scores every token (the first conditioned on its prefix token): `skip` has no export."""
    from harness.core.errors import UserError
    from tasks.mink_membership.for_lm_eval import export
    from tasks.mink_membership.task import MinkConfig, MinkMembership

    with pytest.raises(UserError, match="--first-token skip cannot be exported"):
        export(MinkMembership(), None, MinkConfig(first_token="skip"), None, None)


def test_the_japanese_paper_preset_keeps_the_paper_s_five_lengths():
    """Under --language ja the paper mode scores the paper's 32 ... 512 words (§5.1): the Japanese members were
    trained whole. English keeps 32, 64 and 128; lengths given explicitly win in both."""
    from harness.run.runner import changed_settings
    from tasks.mink_membership.task import MinkConfig

    japanese = MinkConfig(preset="paper", language="ja")
    assert (japanese.headline_k, japanese.lengths) == (10, (32, 64, 128, 256, 512))
    assert changed_settings(japanese) == ["headline_k", "language", "preset"]  # the paper's lengths are the default's
    assert MinkConfig(preset="paper", language="en").lengths == (32, 64, 128)
    assert MinkConfig(preset="paper", language="ja", lengths=(64, 256)).lengths == (64, 256)
    assert MinkConfig(language="ja").lengths == MinkConfig().lengths and MinkConfig(language="ja").headline_k == 20


def test_the_paper_preset_puts_k_10_in_the_headline_and_keeps_members_within_their_trained_words(
        tiny_lm, tmp_path, capsys):
    from conftest import assert_user_error

    from harness.run.runner import changed_settings
    from tasks.mink_membership.task import MinkConfig

    paper = MinkConfig(preset="paper")
    assert (paper.headline_k, paper.lengths) == (10, (32, 64, 128))  # 128 < 250, the members' trained words
    assert changed_settings(paper) == ["headline_k", "lengths", "preset"]
    data = write_jsonl(tmp_path / "data.jsonl", [{"text": t, "label": i % 2} for i, t in enumerate(TEXTS)])
    entry, _ = run(tiny_lm, data, tmp_path / "paper", "--preset", "paper", "--lengths", "6")
    assert {"headline_k", "lengths", "preset"} <= set(entry.changed_settings)
    assert entry.headline.tags == {"score": "min_k_10", "length": "128"}
    assert entry.headline.label == "Min-K% 10% AUC, 128 words"
    scores = [h.tags.get("score") for h in entry.summary]
    assert "min_k_10" in scores and "min_k_pp_10" in scores and not {"min_k_20", "min_k_pp_20"} & set(scores)
    assert {m.tags["score"] for m in entry.metrics if m.name == "auc"} >= {"min_k_10", "min_k_20"}  # the sweep stays
    assert_user_error(capsys, ["evaluate", "--model", str(tiny_lm), "--tasks", TASK, "--data", str(data),
                               "--headline-k", "15", "--output-path", str(tmp_path / "bad")], tmp_path / "bad",
                      "--headline-k 15 is not among --k-percents")
