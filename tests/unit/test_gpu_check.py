"""bench/gpu_check.py: the work its hooks count, by hand on a tiny Llama (real tokens from the mask,
forward vs backward FLOPs, the LM head's rows, decode steps of generation, vmap's physical batch,
optimizer steps), and its dry run end to end, so that the GPU check never rots.

The dry run uses the shipped reference GPT-2's tokenizer (nothing is downloaded but the tasks' data,
as every task test fetches it) on three tasks at --limit 2: mink_membership (token scoring, the ReCaLL
prefix, gradnorm's vmap of per-text gradients), paywall_memorization (batched generation: decode
steps) and stereoset; about 10 s of tasks on 2 cores. weat (17 s), probe_memorization (38 s: its probes
train on the CPU whatever the limit) and privacy_extraction (86 s: three seeds of fine-tuning) are left
out for time; their forward passes are the ones counted here, and the optimizer hook is tested by hand.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from harness.reference.checkpoints import resolve_reference_model

ROOT = Path(__file__).resolve().parents[2]


def load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "bench" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gpu_check = load_gpu_check()

# hidden 16, one layer of 2 heads (k/v as wide as q), MLP 32, vocabulary 50, tied embeddings
HIDDEN, MLP, VOCAB = 16, 32, 50
BODY_N = 4 * HIDDEN * HIDDEN + 3 * HIDDEN * MLP  # q, k, v, o + gate, up, down: 2,560 multiplying weights
HEAD_N = VOCAB * HIDDEN  # 800


@pytest.fixture()
def tiny():
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model("llama", hidden_size=HIDDEN, num_hidden_layers=1, num_attention_heads=2,
                                  num_key_value_heads=2, intermediate_size=MLP, vocab_size=VOCAB,
                                  tie_word_embeddings=True, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    meter = gpu_check.Meter()
    meter.attach(model)
    yield model, meter
    meter.close()


def test_real_tokens_and_forward_flops(tiny):
    model, meter = tiny
    ids = torch.randint(3, VOCAB, (2, 5))
    mask = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask)
    totals = meter.take().totals(peak=1e12, bandwidth=1e9)
    assert (totals["forward_passes"], totals["tokens"], totals["grad_tokens"], totals["decode_steps"]) == (1, 8, 0, 0)
    flops = 2 * BODY_N * 8 + 2 * HEAD_N * 8  # the head's 10 rows are the body's positions: its 8 real tokens
    assert totals["model_tflop"] * 1e12 == pytest.approx(flops)
    assert totals["compute_floor_s"] == pytest.approx(flops / 1e12)
    body_bytes = sum(p.numel() * 4 for n, p in model.named_parameters() if "embed_tokens" not in n)  # norms too
    assert totals["memory_floor_s"] == pytest.approx((body_bytes + HEAD_N * 4) / 1e9)  # the head: the tied embedding
    # each pass: the larger of its matmul time and its weight reading (here reading: 1 GB/s)
    assert totals["floor_s"] == pytest.approx(max(2 * BODY_N * 8 / 1e12, body_bytes / 1e9)
                                              + max(2 * HEAD_N * 8 / 1e12, HEAD_N * 4 / 1e9))


def test_backward_counts_three_times_the_forward(tiny):
    model, meter = tiny
    ids = torch.randint(3, VOCAB, (3, 4))
    with torch.enable_grad():
        model(ids).logits.float().sum().backward()
    totals = meter.take().totals(peak=1e12, bandwidth=1e9)
    assert (totals["tokens"], totals["grad_tokens"]) == (12, 12)  # no mask: every position
    assert totals["model_tflop"] * 1e12 == pytest.approx(6 * (BODY_N + HEAD_N) * 12)


def test_decode_steps_of_generation(tiny):
    model, meter = tiny
    ids = torch.tensor([[0, 5, 6], [7, 8, 9]])
    with torch.no_grad():
        model.generate(input_ids=ids, attention_mask=torch.tensor([[0, 1, 1], [1, 1, 1]]), max_new_tokens=4,
                       min_new_tokens=4, do_sample=False, pad_token_id=0)
    totals = meter.take().totals(peak=1e12, bandwidth=1e9)
    # the prompt (5 real tokens), then 3 steps of one new token a row
    assert (totals["forward_passes"], totals["decode_steps"], totals["tokens"]) == (4, 3, 5 + 3 * 2)


def test_vmap_counts_the_physical_batch(tiny):
    model, meter = tiny
    params = {name: p.detach() for name, p in model.named_parameters()}

    def loss(prm, row):
        return torch.func.functional_call(model, prm, (row.unsqueeze(0),)).logits.float().sum()

    torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0))(params, torch.randint(3, VOCAB, (5, 7)))
    totals = meter.take().totals(peak=1e12, bandwidth=1e9)
    assert (totals["forward_passes"], totals["tokens"], totals["grad_tokens"]) == (1, 35, 35)
    assert totals["model_tflop"] * 1e12 == pytest.approx(6 * (BODY_N + HEAD_N) * 35)  # the weights' gradients too
    assert not meter.errors


def test_frozen_weights_count_the_activations_gradients_only(tiny):
    model, meter = tiny
    model.requires_grad_(False)
    embeds = model.get_input_embeddings()(torch.randint(3, VOCAB, (2, 3))).detach().requires_grad_(True)
    with torch.enable_grad():
        model(inputs_embeds=embeds).logits.sum().backward()
    totals = meter.take().totals(peak=1e12, bandwidth=1e9)
    assert (totals["tokens"], totals["grad_tokens"]) == (6, 6)
    assert totals["model_tflop"] * 1e12 == pytest.approx(4 * (BODY_N + HEAD_N) * 6)


def test_optimizer_steps(tiny):
    model, meter = tiny
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    for _ in range(2):
        model(torch.randint(3, VOCAB, (1, 4))).logits.sum().backward()
        optimizer.step()
    totals = meter.take().totals(peak=1e12, bandwidth=1e9)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    assert totals["optimizer_steps"] == 2
    body_bytes = sum(p.numel() * 4 for n, p in model.named_parameters() if "embed_tokens" not in n)
    assert totals["memory_floor_s"] == pytest.approx((2 * 3 * (body_bytes + HEAD_N * 4) + 2 * 7 * params) / 1e9)


def test_dry_run_end_to_end(tmp_path, capsys):
    """The GPU check's whole path on the CPU (tiny Llama of the GPT-2 tokenizer's vocabulary, float32)."""
    output = tmp_path / "gpu_check.json"
    status = gpu_check.main(["--dry-run", "--tokenizer", resolve_reference_model("reference:xsum-gpt2-e00"), "--limit", "2", "--output", str(output),
                             "--tasks", "mink_membership,paywall_memorization,stereoset",
                             "--task-args", "stereoset=--seed 0"])
    assert status == 0
    record = json.loads(output.read_text())  # a bench record: the command, date and machine with the report
    assert record["bench"] == "gpu_check.py" and record["command"].startswith("python bench/gpu_check.py --dry-run")
    assert record["machine"]["cpu"] and record["date"]
    report = record["report"]
    assert report["task_args"] == {"stereoset": "--seed 0"} and "gradnorm_check" not in report  # CUDA only
    printed = capsys.readouterr().out
    assert report["device"] == "cpu" and report["dtype"] == "float32" and report["peaks_measured"]
    assert report["config"]["vocab_size"] == 2048 and report["config"]["num_hidden_layers"] == 2
    assert report["environment"]["device"] == "cpu" and "gpu_name" not in report["environment"]
    assert report["batch_size_flags"] == ["--batch-size", "auto"] and not report["hook_errors"]
    rows = {row["task"]: row for row in report["tasks"]}
    assert list(rows) == ["mink_membership", "paywall_memorization", "stereoset"]
    peak = report["peak_tflops"] * 1e12
    for name, row in rows.items():
        assert row["status"] == "ok", row
        assert name in printed
        assert row["tokens"] > 0 and row["wall_s"] > 0
        assert row["mfu"] == pytest.approx(row["model_tflop"] * 1e12 / (row["wall_s"] * peak))
        assert row["of_floor"] == pytest.approx(row["floor_s"] / row["wall_s"])
        # a sum of per-pass maxima: at least either floor alone, at most both
        assert max(row["compute_floor_s"], row["memory_floor_s"]) <= row["floor_s"] * (1 + 1e-9)
        assert row["floor_s"] <= (row["compute_floor_s"] + row["memory_floor_s"]) * (1 + 1e-9)
    assert rows["mink_membership"]["grad_tokens"] > 0  # gradnorm's per-text gradients
    assert rows["paywall_memorization"]["decode_steps"] > 0
    assert rows["stereoset"]["decode_steps"] == 0 and rows["stereoset"]["grad_tokens"] == 0
    # the raw forward pass: every scoring pass of stereoset replayed; mink's gradient passes are not replayed
    assert rows["stereoset"]["raw_forward"]["passes"] == rows["stereoset"]["forward_passes"] > 0
    assert 0 < rows["mink_membership"]["raw_forward"]["passes"] < rows["mink_membership"]["forward_passes"]


def test_the_docs_tables_are_the_records():
    """docs/gpu.md shows each committed GPU record as `--markdown` prints it, in a section that names the
    record, its date and its GPU."""
    page = (ROOT / "docs" / "gpu.md").read_text(encoding="utf-8")
    records = sorted((ROOT / "bench" / "results").glob("gpu_check--*.json"))
    assert records
    for path in records:
        record = json.loads(path.read_text())
        assert gpu_check.markdown_table(record) in page, f"docs/gpu.md does not show {path.name} as it is"
        section = next(part for part in page.split("\n## ") if f"bench/results/{path.name}" in part)
        assert record["date"] in section and record["machine"]["gpu_name"].split(" 80GB")[0] in section
