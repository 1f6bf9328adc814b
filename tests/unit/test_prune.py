"""`membench prune`: global L1 unstructured pruning (of all parameters or of the linear weights), saved with its
record; sparse fine-tuning keeps the zeros."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from harness.app.cli import main
from harness.model.loading import ModelSpec, load
from harness.model.prune import linear_modules
from leaderboard.build import render_markdown
from tests.conftest import assert_user_error
from tests.helpers.tiny_models import save_tiny_ner


def weights(folder) -> dict[str, np.ndarray]:
    return load_file(str(next(folder.glob("*.safetensors"))))


@pytest.mark.parametrize("scope", ["all", "linear"])
def test_pruning_zeroes_the_smallest_weights_of_its_scope_globally(tmp_path, tiny_lm, capsys, scope):
    out = tmp_path / "pruned"
    assert main(["prune", "--model", str(tiny_lm), "--sparsity", "0.3", "--output", str(out),
                 *(["--scope", scope] if scope == "linear" else [])]) == 0  # all: the default
    record = json.loads((out / "config.json").read_text())["membench_pruning"]
    assert (record["target_sparsity"], record["scope"]) == (0.3, scope)
    before, after = weights(tiny_lm), weights(out)
    original = load(ModelSpec(str(tiny_lm)))
    linear = [name + ".weight" for name, _ in linear_modules(original.model)]
    assert linear and all(name in after for name in linear)
    pruned = linear if scope == "linear" else list(before)
    pooled = np.concatenate([np.abs(before[name]).ravel() for name in pruned])
    share = record["linear_weight_sparsity" if scope == "linear" else "parameter_sparsity"]
    assert share == pytest.approx(0.3, abs=1e-3)
    if scope == "linear":
        assert 0 < record["parameter_sparsity"] < record["linear_weight_sparsity"]
    threshold = np.sort(pooled)[round(0.3 * pooled.size) - 1]  # torch prunes round(amount · n) weights
    for name in pruned:  # global: one threshold for every tensor; kept weights are unchanged
        zero = after[name] == 0
        assert np.all(np.abs(before[name][zero]) <= threshold)
        np.testing.assert_array_equal(after[name][~zero], before[name][~zero])
    for name in set(before) - set(pruned):  # linear: embeddings, norms and biases stay as they were
        np.testing.assert_array_equal(after[name], before[name])
    if scope == "all":  # the embeddings are pruned too
        assert any((after[name] == 0).any() for name in before if "wte" in name or "embed" in name)
    again = load(ModelSpec(str(out)))
    assert again.identity != original.identity and again.info["pruning"]["pruned_from"]["identity"] == original.identity
    assert (out / "tokenizer.json").is_file()


def test_sparse_fine_tuning_keeps_the_zeros_and_trains_the_rest():
    """`FinetuneSettings.keep_zeros` (harness.training.finetune): after training, every weight zero at the start is
    zero, every other one moved; without it the zeros train too."""
    from transformers import T5Config, T5ForConditionalGeneration

    from harness.model.prune import parameter_sparsity, prune_model
    from harness.reference.t5_build import train_t5_tokenizer
    from harness.training.finetune import FinetuneSettings, finetune, training_rows
    from tests.conftest import TINY_TEXTS

    tokenizer = train_t5_tokenizer(TINY_TEXTS, vocab_size=300)
    torch.manual_seed(0)
    start = T5ForConditionalGeneration(T5Config(vocab_size=len(tokenizer), d_model=16, d_ff=32, num_layers=1,
                                                num_heads=2, d_kv=8, decoder_start_token_id=0))
    prune_model(start, 0.6)
    pairs = [(text[:20], text[20:50]) for text in TINY_TEXTS[:8]]
    ran = {}
    for keep in (True, False):
        model = copy.deepcopy(start)
        settings = FinetuneSettings(epochs=2, learning_rate=1e-2, batch_size=4, seed=0, max_source_tokens=16,
                                    max_target_tokens=16, keep_zeros=keep)
        rows = training_rows(tokenizer, pairs, [1] * len(pairs), True, settings)
        ran[keep] = (model, finetune(model, tokenizer, rows, settings, set(), lambda *_: None, False))
    kept, facts = ran[True]
    assert facts["parameter_sparsity_after"] == parameter_sparsity(start) == pytest.approx(0.6, abs=1e-3)
    assert facts["kept_zero_weights"] == sum(int((p == 0).sum()) for p in start.parameters())
    for before, after in zip(start.parameters(), kept.parameters()):
        assert torch.equal(after == 0, before == 0) or not (before == 0).any()
    assert any(not torch.equal(b, a) for b, a in zip(start.parameters(), kept.parameters()))
    free, facts = ran[False]
    assert "parameter_sparsity_after" not in facts and parameter_sparsity(free) < 0.1


def test_pruned_models_show_their_sparsity_on_the_board(tmp_path):
    model = save_tiny_ner(tmp_path / "ner")
    assert main(["prune", "--model", str(model), "--sparsity", "0.5", "--output", str(tmp_path / "ner-sparse")]) == 0
    names = tmp_path / "names.json"
    names.write_text(json.dumps({s: {"in_train": ["Anna Berg", "Tom Diaz"], "out_train": ["Lee Park", "Ola Nor"]}
                                 for s in ("dev", "test")}))
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps({"declarative_prompt": ["I met MASK.", "MASK won."]}))
    submissions = tmp_path / "submissions"
    for folder in ("ner", "ner-sparse"):
        assert main(["evaluate", "--model", str(tmp_path / folder), "--tasks", "ner_prompt_memorization",
                     "--names", str(names), "--prompts", str(prompts), "--output-path", str(submissions)]) == 0
    markdown, _ = render_markdown(submissions)
    overview = markdown.split("## Overview")[1].split("\n## ")[0]  # both groups
    assert "| sparsity" in overview
    [sparse_row] = [line for line in overview.splitlines() if line.startswith("| ner-sparse")]
    assert "| 0.500" in sparse_row


@pytest.mark.parametrize("sparsity", ["0", "1", "1.5", "-0.2"])
def test_sparsity_outside_zero_one_is_a_one_line_error(capsys, tmp_path, tiny_lm, sparsity):
    out = tmp_path / "pruned"
    assert_user_error(capsys, ["prune", "--model", str(tiny_lm), "--sparsity", sparsity, "--output", str(out)], None,
                      "--sparsity must be between 0 and 1")
    assert not out.exists()


def test_an_existing_output_folder_is_refused(capsys, tmp_path, tiny_lm):
    out = tmp_path / "pruned"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert_user_error(capsys, ["prune", "--model", str(tiny_lm), "--sparsity", "0.3", "--output", str(out)], None,
                      "exists and is not an empty folder")
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_weights_tied_to_the_embeddings_are_not_pruned():
    from transformers import T5Config, T5ForConditionalGeneration

    model = T5ForConditionalGeneration(T5Config(vocab_size=64, d_model=16, d_ff=32, num_layers=1, num_heads=2,
                                                d_kv=8, tie_word_embeddings=True))
    assert model.lm_head.weight.data_ptr() == model.shared.weight.data_ptr()
    names = [name for name, _ in linear_modules(model)]
    assert "lm_head" not in names and any(name.endswith("SelfAttention.q") for name in names)
    assert len(names) == 4 + 2 + 4 + 4 + 2  # encoder attention + MLP, decoder self + cross attention + MLP
