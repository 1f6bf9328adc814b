"""privacy_extraction past full fine-tuning's memory: the estimate, the refusal, LoRA, and the
unchanged config hash of a full fine-tuning."""

from __future__ import annotations

import pytest
import torch

from harness.app.cli import main
from harness.core.errors import UserError
from harness.core.task import RunContext
from harness.model.loading import ModelSpec, load
from harness.training import memory
from tasks.privacy_extraction import task as privacy
from harness.training.memory import DeviceMemory, ModelShape, adapter_parameters, estimate
from harness.training.method import METHOD_FIELDS
from tasks.privacy_extraction.task import PrivacyConfig, PrivacyExtraction
from tests.conftest import assert_user_error
from tests.helpers.committed import committed_files

# The tiny GPT-2's settings (a 32-token context): `test_privacy_extraction.evaluate_tiny`'s.
TINY = ["--tasks", "privacy_extraction", "--limit", "3", "--max-source-tokens", "8", "--max-target-tokens", "20",
        "--epochs", "1", "--finetune-seeds", "1"]

# ---------------------------------------------------------------- the estimate


def test_the_estimate_by_hand():
    # P = 1,000 float32 parameters; 2 layers of rows of 10 tokens, hidden 16, vocabulary 50, batch 4
    shape = ModelShape(parameters=1000, weight_bytes=4000, hidden_size=16, layer_tokens=2 * 10, logit_tokens=10,
                       vocab_size=50, linear_layers=(("h.0.q", 16, 16), ("h.0.fc", 16, 64), ("h.1.q", 16, 16)))
    activations = 17 * 4 * 20 * 16 * 4  # C · B · Σ(L·S) · h · b = 87,040
    logits = 3 * 4 * 10 * 50 * 4  # K · B · S_out · V · 4 = 24,000
    full = estimate(shape, "full", 4, on_cuda=False)
    assert (full.copy, full.gradients, full.optimizer_moments, full.optimizer_step) == (4000, 4000, 8000, 0)
    assert (full.activations, full.logits) == (activations, logits)
    assert full.needed == 16 * 1000 + activations + logits == 127_040  # 16 B per float32 parameter
    assert full.total == full.needed + 4000  # the loaded model is held already
    cuda = estimate(shape, "full", 4, on_cuda=True)
    assert cuda.optimizer_step == 4000 and cuda.needed == full.needed  # AdamW's multi-tensor step: P·b, after
    big = estimate(ModelShape(**{**shape.__dict__, "parameters": 10**5, "weight_bytes": 4 * 10**5}), "full", 4, True)
    assert big.needed == 16 * 10**5 + 4 * 10**5  # the step's P·b outweighs the activations and logits it follows
    # bfloat16: 2 B a weight, and so 8 B per parameter (torch keeps gradients and moments in its dtype)
    half = estimate(ModelShape(**{**shape.__dict__, "weight_bytes": 2000}), "full", 4, on_cuda=False)
    assert half.copy + half.gradients + half.optimizer_moments == 8 * 1000 and half.activations == activations // 2
    # LoRA rank 2 on every linear layer: 2·(16+16) + 2·(16+64) + 2·(16+16) = 288 float32 parameters, no copy
    lora = estimate(shape, "lora", 4, on_cuda=False, lora_rank=2)
    assert lora.trainable_parameters == 288
    assert (lora.copy, lora.gradients, lora.optimizer_moments) == (288 * 4, 288 * 4, 2 * 288 * 4)
    assert lora.needed == 16 * 288 + activations + logits == 115_648
    assert adapter_parameters(shape.linear_layers, 2, ["q"]) == 2 * 32 * 2  # names match as peft's do: `.q`
    assert adapter_parameters(shape.linear_layers, 2, ["fc", "h.1.q"]) == 2 * 80 + 2 * 32
    # LoRA on bfloat16 weights also keeps each adapted layer's input in float32: 4 · B · Σ in · S (S = 10 here)
    half_lora = estimate(ModelShape(**{**shape.__dict__, "weight_bytes": 2000}), "lora", 4, False, lora_rank=2)
    assert half_lora.activations == activations // 2 + 4 * 4 * (16 + 16 + 16) * 10
    only_q = estimate(ModelShape(**{**shape.__dict__, "weight_bytes": 2000}), "lora", 4, False, 2, ["q"])
    assert only_q.activations == activations // 2 + 4 * 4 * (16 + 16) * 10


def saved_bytes(model, ids) -> int:
    """Bytes autograd keeps for the backward pass of a training forward (each storage once, parameters aside)."""
    kept, params = {}, {p.untyped_storage().data_ptr() for p in model.parameters()}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(input_ids=ids, labels=ids)
    return sum(kept.values())


@pytest.mark.parametrize("attention, tokens", [("sdpa", 32), ("eager", 64)])
def test_lora_s_estimate_covers_what_autograd_keeps_in_bfloat16(attention, tokens):
    """The activations and logits the LoRA estimate counts for a bfloat16 Llama (GQA, SwiGLU MLP of 4 h) are
    within 15% of, and not under, what autograd keeps for its backward pass, with fused attention (the GPU's:
    on an H100 the 7.6B Qwen2 of bench/results/gpu_check--qwen2.5-7b.json added 15.61 GB against 15.80
    estimated; without the float32 inputs term it was 8.77) and with eager attention, which keeps the scores
    (what membench runs in 16-bit on a CPU under pinned kernels: harness/model/attention.py). The fused
    case runs 32 tokens: from 64 query rows on, PyTorch 2.13's fused bfloat16 kernel packs for AMX, which
    crashes under the tests' pinned AVX2 kernels on a Xeon with AMX; below, it runs on every x86 CPU."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from harness.training.finetune import LoraSettings, with_adapter

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(hidden_size=128, intermediate_size=512, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, vocab_size=500,
                                         attn_implementation=attention)).to(torch.bfloat16)
    batch = 4
    shape = memory.model_shape(model, False, 0, tokens - 1)
    assert (shape.attention_scores > 0) == (attention == "eager")
    found = estimate(shape, "lora", batch, on_cuda=False, lora_rank=16)
    adapted = with_adapter(model, LoraSettings(16, 32, 0.0, ("all-linear",)), 0).train()
    kept = saved_bytes(adapted, torch.randint(0, 500, (batch, tokens)))
    assert kept <= found.activations + found.logits <= 1.15 * kept, (kept, found.activations, found.logits)


def tiny_t5():
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    return T5ForConditionalGeneration(T5Config(vocab_size=64, d_model=16, d_ff=32, num_layers=2, num_decoder_layers=1,
                                               num_heads=2, d_kv=8))


def test_the_adapter_counted_is_what_peft_trains(tiny_lm):
    from harness.training.finetune import LoraSettings, shared_weights_copy, with_adapter

    gpt2 = load(ModelSpec(str(tiny_lm))).model  # Conv1D layers, a tied output head
    for model, seq2seq in ((gpt2, False), (tiny_t5(), True)):
        shape = memory.model_shape(model, seq2seq, 8, 20)
        assert shape.parameters == sum(p.numel() for p in model.parameters())
        for targets in (("all-linear",), ("c_fc", "q")):
            adapted = with_adapter(shared_weights_copy(model), LoraSettings(4, 8, 0.0, targets), 0)
            trained = sum(p.numel() for p in adapted.parameters() if p.requires_grad)
            assert trained == adapter_parameters(shape.linear_layers, 4, targets) > 0, (type(model), targets)
            assert all(p.dtype == torch.float32 for p in adapted.parameters() if p.requires_grad)
    # Σ(L·S): seq2seq: 2 encoder layers · 8 source tokens + 1 decoder layer · (20 + 1); causal: 1 · (1 + 8 + 20)
    assert memory.model_shape(tiny_t5(), True, 8, 20).layer_tokens == 2 * 8 + 21
    assert memory.model_shape(gpt2, False, 8, 20).layer_tokens == 29


def test_the_cpu_gives_its_available_memory_shared_by_the_launched_processes(monkeypatch):
    found = memory.device_memory(torch.device("cpu"))
    assert found is not None and 0 < found.available <= found.total
    monkeypatch.setattr(memory, "_meminfo", lambda: {"MemAvailable": 8 << 30, "MemTotal": 16 << 30})
    monkeypatch.setattr(memory, "_cgroup_room", lambda: None)
    assert memory.device_memory(torch.device("cpu")) == DeviceMemory("cpu", 8 << 30, 16 << 30,
                                                                     "/proc/meminfo MemAvailable")
    monkeypatch.setattr(memory, "_cgroup_room", lambda: 3 << 30)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert memory.device_memory(torch.device("cpu")).available == (3 << 30) // 2


# ---------------------------------------------------------------- the refusal


@pytest.mark.parametrize("method", ["full", "lora"])
def test_a_fine_tuning_that_does_not_fit_is_refused_before_it_starts(capsys, monkeypatch, tmp_path, tiny_lm, method):
    def no_fine_tuning(*args, **kwargs):
        raise AssertionError("fine-tuning started")

    monkeypatch.setattr(memory, "device_memory", lambda device: DeviceMemory("cpu", 10**6, 2 * 10**6, "test"))
    monkeypatch.setattr(privacy, "finetune", no_fine_tuning)
    out = tmp_path / "out"
    way_out = "--finetune-method lora (about" if method == "full" else "a smaller --finetune-batch-size"
    line = assert_user_error(capsys, ["evaluate", "--model", str(tiny_lm), *TINY, "--finetune-method", method,
                                      "--output-path", str(out)], out,
                             f"{method} fine-tuning of tiny-gpt2", "GB besides the loaded model",
                             "cpu has 0.00 GB available (test, of 0.00 GB)", way_out)
    assert "activations" in line and ("copy" in line) == (method == "full")
    # the task's own run refuses too, before it copies or scores anything
    lm, config = load(ModelSpec(str(tiny_lm))), PrivacyConfig(max_source_tokens=8, max_target_tokens=20)
    monkeypatch.setattr(privacy, "predictions", no_fine_tuning)
    with pytest.raises(UserError, match="--finetune-method lora"):
        PrivacyExtraction().run(lm, [], config, RunContext())


# ---------------------------------------------------------------- LoRA


def test_lora_trains_only_the_adapter_leaves_the_loaded_weights_alone_and_is_recorded(monkeypatch, tmp_path,
                                                                                       tiny_lm):
    from harness.core.results import load_results
    from leaderboard.collect import BoardEntry

    lm = load(ModelSpec(str(tiny_lm)))
    before = {name: p.detach().clone() for name, p in lm.model.named_parameters()}
    flags = {name: p.requires_grad for name, p in lm.model.named_parameters()}
    modules = [type(m) for m in lm.model.modules()]
    real_finetune, seen = privacy.finetune, []

    def spy(model, tokenizer, rows, settings, evaluate_at, on_checkpoint, progress):
        def check(epoch, net):
            trained = {name: p for name, p in net.named_parameters() if p.requires_grad}
            seen.append((sorted(trained), [float(p.abs().sum()) for n, p in trained.items() if "lora_B" in n]))
            on_checkpoint(epoch, net)
        return real_finetune(model, tokenizer, rows, settings, evaluate_at, check, progress)

    monkeypatch.setattr(privacy, "finetune", spy)
    task = PrivacyExtraction()
    config = PrivacyConfig(max_source_tokens=8, max_target_tokens=20, epochs=(1,), finetune_seeds=1,
                           finetune_method="lora", lora_rank=4, learning_rate=1e-2)
    data = task.load_data(config, RunContext(limit=3))
    result = task.run(lm, data, config, RunContext(limit=3))
    [(names, b_sums)] = seen
    assert names and all(".lora_A." in n or ".lora_B." in n for n in names)  # only the adapter trained ...
    assert b_sums and all(total > 0 for total in b_sums)  # ... and it did (B starts at 0)
    facts = result.info["finetuning"]
    # rank 4 on c_attn (32 -> 96), attn.c_proj (32 -> 32), c_fc (32 -> 128), mlp.c_proj (128 -> 32)
    assert facts["trainable_parameters"] == 4 * (32 + 96) + 4 * (32 + 32) + 4 * (32 + 128) + 4 * (128 + 32)
    assert facts["trainable_parameters"] == result.info["finetuning_memory"]["estimate_bytes"]["trainable_parameters"]
    # the loaded model: the same weights bit for bit, its own modules, trainable as before
    after = dict(lm.model.named_parameters())
    assert after.keys() == before.keys() and all(torch.equal(after[n], before[n]) for n in before)
    assert [type(m) for m in lm.model.modules()] == modules
    assert {name: p.requires_grad for name, p in after.items()} == flags
    assert lm.model.config.use_cache is not False  # the Trainer's use_cache=False went to the copy's config
    assert {m.tags["epoch"] for m in result.metrics} == {"0", "1"}
    assert [m.value for m in result.metrics if m.name == "epsilon" and m.tags["epoch"] == "1"][0] > 0
    # the same settings from the command line: the same numbers (seeded), the settings recorded and marked
    out = tmp_path / "out"
    assert main(["evaluate", "--model", str(tiny_lm), *TINY, "--finetune-method", "lora", "--lora-rank", "4",
                 "--learning-rate", "0.01", "--output-path", str(out)]) == 0
    [path] = out.glob("*.json")
    results = load_results(path)
    entry = results.task("privacy_extraction")
    assert [(m.name, m.tags, m.value) for m in entry.metrics] == [(m.name, m.tags, m.value) for m in result.metrics]
    assert entry.config == config.model_dump(mode="json")
    assert entry.config["finetune_method"] == "lora" and entry.config["lora_target_modules"] == ["all-linear"]
    board = BoardEntry(results.model.name, results.model.identity, results.model.kind, entry, 1)
    assert {"finetune_method=lora", "lora_rank=4", "lora_target_modules=all-linear"} <= set(board.changed_settings)


def test_lora_settings_need_the_lora_method():
    from harness.run.runner import build_config

    with pytest.raises(UserError, match="--lora-rank: .*needs --finetune-method lora"):
        build_config(PrivacyExtraction, {"lora_rank": "4"})
    assert build_config(PrivacyExtraction, {"finetune_method": "lora", "lora_rank": "4"}).lora_rank == 4
    with pytest.raises(UserError, match="keep-zeros needs --finetune-method full"):
        build_config(PrivacyExtraction, {"finetune_method": "lora", "sparse_finetuning": "keep-zeros"})


# ---------------------------------------------------------------- the config hash


def test_full_fine_tuning_keeps_its_config_and_hash():
    """The method's settings are in a config's dump only with LoRA: a default (full) config dumps and
    hashes as it did before they existed, less the settings v3 (extraction), v4 (the preset, held-out
    persons, separate fine-tunings) and v5 (sparse fine-tuning) added; and the committed files' configs of this version are rebuilt
    to what they record."""
    from harness.run.runner import EvaluateOptions, changed_settings, config_hash, settings_hash

    config = PrivacyConfig()
    extraction = {"extraction": True, "extraction_temperature": 1.0, "extraction_top_k": 40, "extraction_top_p": None,
                  "extraction_attempts": [1, 10, 100, 1000, 10000], "extraction_level": 0.5}
    assert config.model_dump(mode="json") == {
        "n_unique": 200, "n_persons": 100, "data_seed": 0, "epochs": [4, 8], "learning_rate": 0.0001,
        "finetune_batch_size": 8, "finetune_seed": 42, "finetune_seeds": 3, "max_source_tokens": 30,
        "max_target_tokens": 70, **extraction, "preset": "default", "n_heldout_persons": 100, "finetunes": "joint",
        "sparse_finetuning": "auto"}
    # v5's hashes (v4's: baa95ec3eafc108d, 936588e0701db6ee; v3's: 6953d0b1d5c4755c, 932162f1f46a4c75; v2's,
    # before the method's settings existed, commit bd29a90: 2bdeeab0373d7c07, ba73a1da5ae8c428)
    assert config_hash(config, EvaluateOptions(), "float32") == "b215f5106dba481e"
    assert config_hash(config, EvaluateOptions(limit=3), "float32", None, 2) == "360e0a40adff506e"
    lora = PrivacyConfig(finetune_method="lora")
    assert set(lora.model_dump(mode="json")) - set(config.model_dump(mode="json")) == set(METHOD_FIELDS)
    assert config_hash(lora, EvaluateOptions(), "float32") != config_hash(config, EvaluateOptions(), "float32")
    committed = 0
    for results in committed_files():
        entry = next((e for e in results.tasks if e.name == "privacy_extraction" and e.status == "ok"
                      and e.version == PrivacyExtraction.VERSION), None)
        if entry is None:
            continue
        committed += 1
        rebuilt = PrivacyConfig(**entry.config)
        assert rebuilt.model_dump(mode="json") == entry.config, results.model.name
        assert settings_hash(rebuilt.model_dump(mode="json"), results.run.limit, results.run.seed, results.model.dtype,
                             None, PrivacyExtraction.LIMIT_VERSION) == entry.config_hash, results.model.name
        if entry.changed_settings is not None:
            assert changed_settings(rebuilt) == entry.changed_settings, results.model.name
    assert committed >= 4  # t5-ref, t5-ref-sparse70, and the real causal LMs (SmolLM2, gemma)
