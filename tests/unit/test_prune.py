"""`membench prune`: global L1 unstructured pruning of linear weights, saved with its record."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from harness.app.cli import main
from harness.model.loading import ModelSpec, load
from harness.model.prune import linear_modules
from leaderboard.build import render_markdown
from tests.conftest import assert_user_error
from tests.helpers.tiny_models import save_tiny_ner


def weights(folder) -> dict[str, np.ndarray]:
    return load_file(str(next(folder.glob("*.safetensors"))))


def test_pruning_zeroes_the_smallest_linear_weights_globally_and_keeps_embeddings(tmp_path, tiny_lm, capsys):
    out = tmp_path / "pruned"
    assert main(["prune", "--model", str(tiny_lm), "--sparsity", "0.3", "--output", str(out)]) == 0
    record = json.loads((out / "config.json").read_text())["membench_pruning"]
    assert record["target_sparsity"] == 0.3
    assert record["linear_weight_sparsity"] == pytest.approx(0.3, abs=1e-3)
    assert 0 < record["parameter_sparsity"] < record["linear_weight_sparsity"]
    before, after = weights(tiny_lm), weights(out)
    original = load(ModelSpec(str(tiny_lm)))
    linear = [name + ".weight" for name, _ in linear_modules(original.model)]
    assert linear and all(name in after for name in linear)
    pooled = np.concatenate([np.abs(before[name]).ravel() for name in linear])
    threshold = np.sort(pooled)[int(0.3 * pooled.size) - 1]
    for name in linear:  # global: one threshold for every layer; kept weights are unchanged
        zero = after[name] == 0
        assert np.all(np.abs(before[name][zero]) <= threshold)
        np.testing.assert_array_equal(after[name][~zero], before[name][~zero])
    for name in before:  # embeddings, norms and biases stay as they were
        if name not in linear:
            np.testing.assert_array_equal(after[name], before[name])
    pruned = load(ModelSpec(str(out)))
    assert pruned.identity != original.identity and pruned.info["pruning"]["pruned_from"]["identity"] == original.identity
    assert (out / "tokenizer.json").is_file()


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
