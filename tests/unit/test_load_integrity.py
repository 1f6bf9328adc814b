"""A checkpoint whose weights leave tensors of the model random, or that has no tokenizer, is a
user error (one line, exit 2, nothing written), not a score; clean loads, tied heads and heads a
kind does not use still load."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_user_error, write_jsonl

from harness.core.model_types import ModelKind
from harness.model.identity import tokenizer_files
from harness.model.loading import ModelSpec, load
from tests.helpers.tiny_models import WORDS, bert_config, save_bert, save_bert_tokenizer


def edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def rewrite_weights(folder: Path, rename) -> None:
    """Rewrite model.safetensors with each tensor under `rename(name)` (left out when None)."""
    from safetensors.torch import load_file, save_file

    state = load_file(folder / "model.safetensors")
    renamed = {rename(name): tensor for name, tensor in state.items() if rename(name) is not None}
    save_file(renamed, folder / "model.safetensors", metadata={"format": "pt"})


@pytest.fixture
def out(tmp_path) -> Path:
    return tmp_path / "out"


@pytest.fixture
def data(tmp_path) -> Path:
    rows = [{"text": f"{word} went to work on a sunny day", "label": i % 2} for i, word in enumerate(WORDS[:6])]
    return write_jsonl(tmp_path / "data.jsonl", rows)


def evaluate_argv(model: Path, data: Path, out: Path, *extra: str) -> list[str]:
    """mink_membership on `model`: the model is loaded (and refused) before any task runs."""
    return ["evaluate", "--model", str(model), "--tasks", "mink_membership", "--data", str(data),
            "--lengths", "2", "--bootstrap-resamples", "10", "--device", "cpu", "--output-path", str(out), *extra]


def copy_of(folder: Path, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(folder, target)
    return target


# ---------------------------------------------------------------- refused


def test_masked_lm_config_over_encoder_weights(capsys, tmp_path, out, data):
    """The sentence-transformers layout: BertModel weights, a config naming BertForMaskedLM."""
    folder = save_bert(tmp_path / "encoder-only", "BertModel")
    edit_config(folder, architectures=["BertForMaskedLM"])
    line = assert_user_error(capsys, evaluate_argv(folder, data, out), out,
                             "masked-lm", "the weights lack", "cls.predictions", "--model-kind encoder")
    assert "6 tensors" in line  # the MLM head: bias, decoder bias, transform dense (2) and LayerNorm (2)


def test_the_same_encoder_weights_load_as_an_encoder(tmp_path):
    folder = save_bert(tmp_path / "encoder-only", "BertModel")
    edit_config(folder, architectures=["BertForMaskedLM"])
    lm = load(ModelSpec(str(folder), kind=ModelKind.ENCODER))
    assert lm.kind is ModelKind.ENCODER


def test_weights_with_none_of_the_models_tensors(capsys, tiny_lm, tmp_path, out, data):
    folder = copy_of(tiny_lm, tmp_path, "renamed")
    rewrite_weights(folder, lambda name: "other." + name)
    assert_user_error(capsys, evaluate_argv(folder, data, out), out,
                      "none of the model's tensors", "GPT2LMHeadModel", "e.g. other.transformer.")


def test_config_with_more_layers_than_the_weights(capsys, tiny_lm, tmp_path, out, data):
    folder = copy_of(tiny_lm, tmp_path, "deeper-config")
    edit_config(folder, n_layer=2)
    line = assert_user_error(capsys, evaluate_argv(folder, data, out), out,
                             "12 tensors", "transformer.h.1.", "larger model", "config.json")
    assert "random" in line


def test_config_with_fewer_layers_than_the_weights(capsys, tmp_path, out, data):
    import torch
    from transformers import BertForMaskedLM

    folder = tmp_path / "two-layers"
    torch.manual_seed(0)
    BertForMaskedLM(bert_config(save_bert_tokenizer(folder), num_hidden_layers=2)).save_pretrained(folder)
    edit_config(folder, num_hidden_layers=1)
    assert_user_error(capsys, evaluate_argv(folder, data, out), out,
                      "bert.encoder.layer.1.", "smaller model", "fewer layers")


def test_config_with_another_width_than_the_weights(capsys, tiny_lm, tmp_path, out, data):
    folder = copy_of(tiny_lm, tmp_path, "wider-config")
    edit_config(folder, n_embd=64)
    assert_user_error(capsys, evaluate_argv(folder, data, out), out,
                      "disagree on the shape", "weights (96,), config (192,)", "config.json")


def test_untied_lm_head_missing_from_the_weights(capsys, tiny_lm, tmp_path, out, data):
    """Control for the tied case below: a head that is not tied must come from the weights."""
    folder = copy_of(tiny_lm, tmp_path, "untied")
    edit_config(folder, tie_word_embeddings=False)
    assert_user_error(capsys, evaluate_argv(folder, data, out), out, "1 tensor (lm_head.weight)", "head")


def test_folder_without_tokenizer_files(capsys, tiny_lm, tmp_path, out, data):
    folder = copy_of(tiny_lm, tmp_path, "no-tokenizer")
    for path in tokenizer_files(folder):
        path.unlink()
    assert_user_error(capsys, evaluate_argv(folder, data, out), out, "no tokenizer files", str(folder))


def test_tokenizer_with_an_empty_vocabulary(capsys, tmp_path, out, data):
    import torch
    from transformers import BertForMaskedLM

    folder = tmp_path / "empty-vocab"
    torch.manual_seed(0)
    BertForMaskedLM(bert_config(save_bert_tokenizer(folder, words=[]))).save_pretrained(folder)
    assert_user_error(capsys, evaluate_argv(folder, data, out), out, "empty vocabulary")


# ---------------------------------------------------------------- accepted


def test_a_clean_load_passes_and_logs_its_report(tiny_lm, caplog):
    caplog.set_level(logging.INFO, logger="harness.model.loading")
    lm = load(ModelSpec(str(tiny_lm)))
    assert lm.kind is ModelKind.CAUSAL_LM
    assert "all 17 tensors loaded" in caplog.text  # 16 stored + the tied lm_head


def test_a_tied_lm_head_is_not_flagged(tiny_lm):
    from safetensors import safe_open

    with safe_open(tiny_lm / "model.safetensors", "pt") as weights:
        assert "lm_head.weight" not in weights.keys()  # recreated from the embeddings
    lm = load(ModelSpec(str(tiny_lm)))
    assert lm.model.lm_head.weight.data_ptr() == lm.model.transformer.wte.weight.data_ptr()


def test_heads_a_kind_does_not_use_are_allowed(tmp_path, caplog):
    """A masked LM scored as an encoder: its MLM head is left out and the (unused) pooler missing."""
    caplog.set_level(logging.INFO, logger="harness.model.loading")
    folder = save_bert(tmp_path / "mlm", "BertForMaskedLM")
    assert load(ModelSpec(str(folder))).kind is ModelKind.MASKED_LM
    lm = load(ModelSpec(str(folder), kind=ModelKind.ENCODER))
    assert lm.kind is ModelKind.ENCODER
    assert "cls.predictions.bias" in caplog.text and "pooler.dense.weight" in caplog.text


@pytest.mark.slow  # the command line in its own process
def test_verbose_evaluate_logs_the_load_report(tiny_lm, tmp_path, out, data):
    """`membench -v evaluate` (its own process: the CLI sets up logging) shows the load report."""
    argv = [sys.executable, "-m", "harness", "-v", *evaluate_argv(tiny_lm, data, out, "--no-cache")]
    quiet_argv = argv[:3] + argv[4:]
    quiet_argv[quiet_argv.index(str(out))] = str(out.parent / "quiet")
    # both at once, each with its own output folder
    verbose, quiet = (subprocess.Popen(a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                      for a in (argv, quiet_argv))
    verbose_stderr, quiet_stderr = (p.communicate(timeout=600)[1] for p in (verbose, quiet))
    assert verbose.returncode == 0, verbose_stderr
    assert f"load report of {tiny_lm}: all 17 tensors loaded" in verbose_stderr
    assert quiet.returncode == 0 and "load report" not in quiet_stderr


# ---------------------------------------------------------------- the untrained twin


def test_random_weights_give_the_checkpoints_seeded_untrained_twin(tiny_lm, capsys, tmp_path, out, data):
    """`--random-weights SEED`: the checkpoint's class, config and tokenizer with freshly drawn
    parameters; the same seed draws the same weights, another seed others; its identity is another
    model's (the drawn weights' sha256), and the results file names the seed and the checkpoint."""
    import torch

    from harness.app.cli import main
    from harness.core.results import load_results

    real = load(ModelSpec(str(tiny_lm)))
    twin = load(ModelSpec(str(tiny_lm), random_weights_seed=3))
    again = load(ModelSpec(str(tiny_lm), random_weights_seed=3))
    other = load(ModelSpec(str(tiny_lm), random_weights_seed=4))
    assert type(twin.model) is type(real.model) and twin.model.config.n_layer == real.model.config.n_layer
    assert twin.tokenizer.get_vocab() == real.tokenizer.get_vocab()
    real_state, twin_state = real.model.state_dict(), twin.model.state_dict()
    assert not torch.equal(real_state["transformer.h.0.attn.c_attn.weight"],
                           twin_state["transformer.h.0.attn.c_attn.weight"])
    assert all(torch.equal(value, again.model.state_dict()[name]) for name, value in twin_state.items())
    assert len({real.identity, twin.identity, again.identity, other.identity}) == 3
    assert twin.identity == again.identity and twin.identity_parts.config_sha256 == real.identity_parts.config_sha256
    assert twin.info["random_weights"] == {"seed": 3, "of_weights_sha256": real.identity_parts.weights_sha256,
                                           "init": "constructor"}
    assert twin.name == f"{real.name}-untrained-seed3"
    assert main(evaluate_argv(tiny_lm, data, out, "--random-weights", "3")) == 0
    results = load_results(next(out.glob("*.json")))
    assert results.model.identity == twin.identity and results.model.name.endswith("-untrained-seed3")
    assert main(evaluate_argv(tiny_lm, data, tmp_path / "none", "--random-weights", "3", "--device-map", "auto")) == 2
    assert "--random-weights" in capsys.readouterr().err
