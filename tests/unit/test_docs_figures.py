"""The docs' figures that are not measurements follow from the code and the shipped files: the batch
sizes and memory bounds of docs/gpu.md and docs/scaling.md are the constants they name, the gradient
batch they quote is `gradient_batch`'s for that model, the logits' size is its product, and the
shipped weights' sizes in docs/reference-checkpoints.md are the files'. (Measured figures: the real
rows' in tests/unit/test_real_models_doc.py, the benches' in tests/unit/test_bench_records.py.)"""

from __future__ import annotations

from pathlib import Path

import torch

from harness.app.parser import JOB_BATCH_SIZE
from harness.core.task import DEFAULT_MAX_BATCH_SIZE
from harness.reference.build import reference_builds
from harness.reference.shipped import WEIGHTS
from harness.run.runner import EvaluateOptions
from harness.scoring import budgets, gradients
from harness.scoring.causal import LOGITS_BUDGET_BYTES
from tests.helpers.committed import flat, same, sentence

ROOT = Path(__file__).resolve().parents[2]


def text(page: str) -> str:
    """A docs page with its line breaks as spaces."""
    return flat((ROOT / "docs" / page).read_text(encoding="utf-8"))


def test_the_gpu_page_states_the_batch_sizes_and_budgets_the_code_has():
    gpu = text("gpu.md")
    assert sentence(gpu, r"`--max-batch-size` \(default (\d+)\)") == (str(DEFAULT_MAX_BATCH_SIZE),)
    assert sentence(gpu, r"the board was scored with: (\d+) for `evaluate`, (\d+) for `membench run`") == (
        str(EvaluateOptions().cpu_batch_size), str(JOB_BATCH_SIZE))
    assert LOGITS_BUDGET_BYTES == 2**30 and "within 1 GiB on a CPU and within an eighth of the GPU's memory" in gpu
    assert budgets.ACCELERATOR_LOGITS_SHARE == 1 / 8
    gb, of = sentence(gpu, r"\((\d+) GB on an (\d+) GB H100\)")
    assert same(gb, budgets.ACCELERATOR_LOGITS_SHARE * int(of))
    for share in sentence(gpu, r"take (\d+)% of the GPU's free memory") + sentence(gpu, r"as many as (\d+)% of the"):
        assert int(share) / 100 == budgets.ACCELERATOR_GRADIENT_SHARE


def test_the_gradient_batch_the_gpu_page_quotes_is_gradient_batch_s(monkeypatch):
    """"a 1.7B-parameter model in bfloat16 on an 80 GB GPU: about N texts": SmolLM2-1.7B's shape (the GPU
    check's model) on the meta device, its bfloat16 weights loaded on the GPU, for rows of 128 to 512
    tokens (a text's prefix lengths)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    parameters, gpu_gb, texts = sentence(text("gpu.md"), r"a ([\d.]+)B-parameter model in bfloat16 on an (\d+) GB GPU: "
                                                          r"about (\d+) texts")
    config = LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=24, num_attention_heads=32,
                         num_key_value_heads=32, vocab_size=49152, tie_word_embeddings=True)
    with torch.device("meta"):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    assert same(parameters, sum(p.numel() for p in model.parameters()) / 1e9)
    monkeypatch.setattr(budgets, "on_accelerator", lambda device: True)
    monkeypatch.setattr(budgets, "free_bytes", lambda device: int(gpu_gb) * 10**9 - weights)
    for longest in (128, 256, 512):
        assert gradients.gradient_batch(model, longest, batch_size=256) == int(texts), longest


def test_the_logits_the_scaling_page_sizes_are_the_product():
    scaling = text("scaling.md")
    vocabulary, batch, positions, gb = sentence(
        scaling, r"gemma-3-270m's ([\d,]+) tokens at batch (\d+) × (\d+) positions would take ([\d.]+) GB in float32")
    assert vocabulary == "262,144"
    assert same(gb, int(vocabulary.replace(",", "")) * int(batch) * int(positions) * 4 / 1e9)
    assert "their logits stay within 1 GiB on a CPU (`LOGITS_BUDGET_BYTES`" in scaling


def test_the_shipped_weights_sizes_are_the_files():
    """"about T MB ...: F MB of full builds, Q MB of the quick English builds the tests score"."""
    total, full, quick = sentence(text("reference-checkpoints.md"),
                                  r"about (\d+) MB on [\d-]+: (\d+) MB of full builds, (\d+) MB of the quick English")
    quick_folders = {config.folder_name() for config in reference_builds(quick=True) if config.corpus == "xsum"}
    sizes = {folder.name: sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
             for folder in WEIGHTS.iterdir() if folder.is_dir()}
    assert quick_folders <= set(sizes)
    assert same(quick, sum(size for name, size in sizes.items() if name in quick_folders) / 1e6)
    assert same(full, sum(size for name, size in sizes.items() if name not in quick_folders) / 1e6)
    assert same(total, sum(f.stat().st_size for f in WEIGHTS.rglob("*") if f.is_file()) / 1e6)
