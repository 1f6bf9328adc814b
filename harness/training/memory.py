"""The memory a fine-tuning adds, estimated before it starts, and what the device can give.

The estimate, in bytes, for a model of P parameters held in b bytes each (its dtype: float32 4,
bfloat16 / float16 2), fine-tuned with `torch.optim.AdamW` (the Trainer's `adamw_torch`), which
keeps each gradient and both moments in its parameter's dtype:

- full fine-tuning: a fresh copy of the model trains: its weights P·b, their gradients P·b and
  AdamW's two moments 2·P·b, so 4·P·b (16 B per parameter in float32, 8 in bfloat16); on CUDA,
  AdamW's multi-tensor step also holds √v of every parameter at once (P·b more; on CPU it steps
  one tensor at a time).
- LoRA (peft): the loaded model's weights stay frozen and are shared, not copied (no gradient, no
  moment); only the adapter trains: T = Σ r·(in + out) parameters over the adapted linear layers,
  kept in float32 by peft: 4·T·4 = 16·T bytes (and 4·T more on CUDA, as above).
- activations kept for the backward pass: C·B·Σ(L·S)·h·b, with C = 17 values per token, layer
  and hidden unit (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models", §4 eq. 1: 34·s·b·h bytes per layer in 16-bit, less its attention-score term),
  B the batch, h the hidden size and Σ(L·S) the layers times the tokens of a row (causal LM:
  L·(1 + source + target tokens); seq2seq: encoder layers · source tokens + decoder layers ·
  (target tokens + 1)). LoRA keeps them too: the gradient flows back through the frozen layers.
  LoRA in a 16-bit model also keeps each adapted layer's input in the adapter's float32: peft casts
  the input to the adapter's dtype and autograd keeps the cast for the adapter's gradient, one
  copy per adapted layer (q, k and v each their own): 4·B·Σ(in·S) over the adapted layers, S the
  tokens of a row the layer runs on. Measured on an H100 (bench/results/gpu_check--qwen2.5-7b.json,
  2026-11-27): without this term the estimate of a rank-16 all-linear adapter on a 7.6B Qwen2 was
  8.77 GB against 15.61 GB measured; with it, 15.80 GB.
- eager attention (transformers' matmul-softmax-matmul, which membench runs for a 16-bit model on the
  CPU under pinned kernels: `harness.model.attention`) also keeps the attention scores: A·B·Σ(L·H·S_q·S_k)
  bytes, A = 5 bytes per score (Korthikanti et al.'s 5·a·s²·b term in 16-bit: the softmax output, the
  dropout mask and its output), H the heads and S_q·S_k the (query, key) pairs of each attention of a
  row (causal: S²; seq2seq: the encoder's S_src², the decoder's S_tgt² + S_tgt·S_src). Fused
  attention (sdpa, flash) keeps none: the term is 0 for it.
- the logits: K·B·S_out·V·4 with K = 3 float32 arrays (the logits, their log-softmax and its
  gradient) over the vocabulary V, S_out the positions scored (causal: the row; seq2seq: the target).

`needed` = trained weights + gradients + moments + max(activations + logits, AdamW step) (the
step's temporaries come after the backward pass has freed the activations): what fine-tuning adds
to what is already held, since the loaded model (P·b) is resident before it starts; `total` adds
it. Rows are taken at the longest the settings allow, so the activations are an upper bound for a
batch; the Python process, the tokenizer and the evaluations between epochs are not counted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch

from harness.core.errors import UserError
from harness.scoring import budgets, distributed

ACTIVATION_VALUES = 17  # C: values kept per token, layer and hidden unit (Korthikanti et al. 2022)
SCORE_BYTES = 5  # A: bytes kept per attention score by eager attention (Korthikanti et al. 2022, 5·a·s²·b)
LOGIT_COPIES = 3  # K: float32 arrays of batch × positions × vocabulary (logits, log-softmax, gradient)
ADAPTER_BYTES = 4  # peft keeps LoRA weights in float32 (autocast_adapter_dtype) whatever the base dtype
GB = 1e9


@dataclass(frozen=True)
class ModelShape:
    """What the estimate reads from a model: its parameters and the sizes its activations scale with."""

    parameters: int  # P (shared tensors counted once)
    weight_bytes: int  # Σ over the parameters of numel · bytes per value (P·b)
    hidden_size: int
    layer_tokens: int  # Σ(L·S) for one row
    logit_tokens: int  # S_out for one row
    vocab_size: int
    linear_layers: tuple[tuple[str, int, int], ...]  # (name, in features, out features), the output head left out
    linear_tokens: tuple[int, ...] = ()  # per linear layer, the tokens of a row it runs on (S above)
    attention_scores: int = 0  # Σ(L·H·S_q·S_k) for one row under eager attention; 0 for fused attention


@dataclass(frozen=True)
class Estimate:
    """Bytes fine-tuning adds, by part; `needed` what it adds in all (the module docstring), `total` with
    the loaded model."""

    method: str
    parameters: int  # P, the loaded model's
    loaded_model: int
    copy: int  # the weights that train: a full copy, or the LoRA adapter (the base weights are shared)
    trainable_parameters: int
    gradients: int
    optimizer_moments: int
    optimizer_step: int
    activations: int
    logits: int

    @property
    def needed(self) -> int:
        return (self.copy + self.gradients + self.optimizer_moments
                + max(self.activations + self.logits, self.optimizer_step))

    @property
    def total(self) -> int:
        return self.loaded_model + self.needed

    def record(self) -> dict:
        """The estimate as the results file's info holds it (bytes)."""
        return asdict(self) | {"needed": self.needed, "total": self.total}

    def parts(self) -> str:
        """`copy 0.54 + gradients 0.54 + AdamW moments 1.08 + activations 0.95 + logits 0.48` (GB)."""
        def gb(value: int) -> str:
            return f"{value / GB:.2f}"

        state = (f"{'copy' if self.method == 'full' else 'adapter'} {gb(self.copy)} + gradients {gb(self.gradients)}"
                 f" + AdamW moments {gb(self.optimizer_moments)}")
        forward = f"activations {gb(self.activations)} + logits {gb(self.logits)}"
        if not self.optimizer_step:
            return f"{state} + {forward}"
        return f"{state} + max({forward}, AdamW step {gb(self.optimizer_step)})"


def adapter_parameters(linear_layers: Sequence[tuple[str, int, int]], rank: int, targets: Sequence[str]) -> int:
    """T = Σ rank·(in + out) over the linear layers LoRA adapts: all of them for peft's `all-linear`
    (the output head is not among `linear_layers`), else those whose name is a target or ends in
    `.target` (peft's rule for a list of names)."""
    return sum(rank * (n_in + n_out) for name, n_in, n_out in linear_layers if adapted(name, targets))


def adapted(name: str, targets: Sequence[str]) -> bool:
    """Whether LoRA adapts the linear layer `name`: every one for peft's `all-linear` (the output head is
    not among `ModelShape.linear_layers`), else one whose name is a target or ends in `.target` (peft's
    rule for a list of names)."""
    return list(targets) == ["all-linear"] or any(name == t or name.endswith("." + t) for t in targets)


def adapter_inputs(shape: ModelShape, targets: Sequence[str]) -> int:
    """Σ in·S over the adapted linear layers of a row: the input values LoRA casts to float32 and keeps."""
    tokens = shape.linear_tokens or (shape.logit_tokens,) * len(shape.linear_layers)
    return sum(n_in * n for (name, n_in, _), n in zip(shape.linear_layers, tokens) if adapted(name, targets))


def estimate(shape: ModelShape, method: str, batch_size: int, on_cuda: bool, lora_rank: int = 8,
             lora_targets: Sequence[str] = ("all-linear",)) -> Estimate:
    """The module docstring's estimate for `method` ("full" or "lora")."""
    bytes_per_value = shape.weight_bytes / shape.parameters if shape.parameters else 4
    activations = round(ACTIVATION_VALUES * batch_size * shape.layer_tokens * shape.hidden_size * bytes_per_value)
    activations += SCORE_BYTES * batch_size * shape.attention_scores
    logits = LOGIT_COPIES * batch_size * shape.logit_tokens * shape.vocab_size * 4
    if method == "full":
        trainable, state = shape.parameters, shape.weight_bytes  # P, and P·b per copy of it
        copy = state
    elif method == "lora":
        trainable = adapter_parameters(shape.linear_layers, lora_rank, lora_targets)
        state = trainable * ADAPTER_BYTES
        copy = state  # the adapter's own weights; the base weights are shared
        if bytes_per_value < ADAPTER_BYTES:  # each adapted layer's input, cast to the adapter's float32
            activations += ADAPTER_BYTES * batch_size * adapter_inputs(shape, lora_targets)
    else:
        raise ValueError(f"unknown fine-tuning method {method!r}")
    return Estimate(method=method, parameters=shape.parameters, loaded_model=shape.weight_bytes, copy=copy,
                    trainable_parameters=trainable, gradients=state, optimizer_moments=2 * state,
                    optimizer_step=state if on_cuda else 0, activations=activations, logits=logits)


def _config_int(config, *names: str) -> int | None:
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def model_shape(model: torch.nn.Module, seq2seq: bool, source_tokens: int, target_tokens: int) -> ModelShape:
    """The model's `ModelShape` for rows of at most `source_tokens` + `target_tokens` tokens; reads
    the parameters and the (text) config, allocates nothing."""
    from transformers.pytorch_utils import Conv1D

    parameters = list(model.parameters())
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    hidden = _config_int(config, "hidden_size", "d_model", "n_embd") or 0
    vocab = _config_int(config, "vocab_size") or 0
    heads = _config_int(config, "num_attention_heads", "num_heads", "n_head", "encoder_attention_heads") or 0
    if seq2seq:
        encoder = _config_int(config, "encoder_layers", "num_layers", "num_hidden_layers") or 0
        decoder = _config_int(config, "decoder_layers", "num_decoder_layers") or encoder
        layer_tokens, logit_tokens = encoder * source_tokens + decoder * (target_tokens + 1), target_tokens + 1
        pairs = encoder * source_tokens ** 2 + decoder * (logit_tokens ** 2 + logit_tokens * source_tokens)
    else:
        row = 1 + source_tokens + target_tokens
        layers = _config_int(config, "num_hidden_layers", "n_layer") or 0
        layer_tokens, logit_tokens, pairs = layers * row, row, layers * row ** 2
    eager = getattr(config, "_attn_implementation", None) == "eager"
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    linear, tokens = [], []
    for name, module in model.named_modules():
        if module is head:
            continue
        if isinstance(module, torch.nn.Linear):
            linear.append((name, module.in_features, module.out_features))
        elif isinstance(module, Conv1D):  # GPT-2's linear layers: weight (in, out)
            linear.append((name, *module.weight.shape))
        else:
            continue
        if not seq2seq:
            tokens.append(logit_tokens)
        else:  # an encoder's layers run on the source, a decoder's on the target (+ its start token)
            tokens.append(source_tokens if "encoder" in name.split(".") else logit_tokens)
    return ModelShape(parameters=sum(p.numel() for p in parameters),
                      weight_bytes=sum(p.numel() * p.element_size() for p in parameters), hidden_size=hidden,
                      layer_tokens=layer_tokens, logit_tokens=logit_tokens, vocab_size=vocab,
                      linear_layers=tuple(linear), linear_tokens=tuple(tokens),
                      attention_scores=heads * pairs if eager else 0)


@dataclass(frozen=True)
class DeviceMemory:
    """What a device can give now (`available`, bytes) of its `total`, and where that was read."""

    device: str
    available: int
    total: int
    source: str


def _meminfo() -> dict[str, int]:
    """/proc/meminfo's fields in bytes; {} where there is none."""
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return {}
    fields = {}
    for line in lines:
        name, _, value = line.partition(":")
        parts = value.split()
        if parts and parts[0].isdigit():
            fields[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return fields


def _cgroup_room() -> int | None:
    """Bytes this process's cgroup (v2) may still take: memory.max − memory.current; None without a limit."""
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        current = Path("/sys/fs/cgroup/memory.current").read_text().strip()
    except OSError:
        return None
    return max(int(limit) - int(current), 0) if limit.isdigit() and current.isdigit() else None


def device_memory(device: torch.device) -> DeviceMemory | None:
    """CUDA: the free memory `torch.cuda.mem_get_info` reports plus what PyTorch's allocator holds
    unused (reserved − allocated); CPU: MemAvailable of /proc/meminfo (psutil's `available`
    elsewhere), no more than the cgroup (v2) still allows, shared out among the processes a
    data-parallel launcher started on this machine. None where neither can be read."""
    if device.type == "cuda":
        return DeviceMemory(str(device), budgets.free_bytes(device), budgets.total_bytes(device),
                            "torch.cuda.mem_get_info")
    if device.type != "cpu":
        return None
    info = _meminfo()
    if "MemAvailable" in info:
        available, total, source = info["MemAvailable"], info.get("MemTotal", 0), "/proc/meminfo MemAvailable"
    else:
        try:
            import psutil
        except ImportError:
            return None
        memory = psutil.virtual_memory()
        available, total, source = memory.available, memory.total, "psutil"
    room = _cgroup_room()
    if room is not None and room < available:
        available, source = room, "cgroup memory.max"
    sharing = distributed.env_local_world_size()  # the processes of a data-parallel run share this RAM
    if sharing > 1:
        available, source = available // sharing, f"{source} / {sharing} processes"
    return DeviceMemory("cpu", available, total, source)


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of the model's first parameter (where its copy and the training live)."""
    return next(model.parameters()).device



def check_fits(task: str, model_name: str, dtype: str, method: str, lora_rank: int,
               estimate_for: Callable[[str], Estimate], device: torch.device) -> dict:
    """A `UserError` (one line: the estimate, what the device has, the way out) when fine-tuning with
    `method` (`estimate_for(method)`) needs more than `device` can give now; else the estimate and the
    device's memory as a results file's info records them."""
    found = estimate_for(method)
    memory = device_memory(device)
    record = {"estimate_bytes": found.record(), "formula": "harness/training/memory.py"}
    if memory is None:
        return record
    record |= {"device": memory.device, "available_bytes": memory.available, "source": memory.source}
    if found.needed <= memory.available:
        return record
    if method == "full":
        lora = estimate_for("lora")
        fits = "" if lora.needed <= memory.available else ", not enough either without a smaller batch"
        way_out = (f"pass --finetune-method lora (about {lora.needed / GB:.2f} GB: a rank-{lora_rank} "
                   f"adapter trains on the frozen, shared weights{fits}), a smaller --finetune-batch-size, or a "
                   "device with more memory")
    else:
        way_out = "pass a smaller --finetune-batch-size or a shorter training text, or use a device with more memory"
    raise UserError(f"{task}: {method} fine-tuning of {model_name} ({found.parameters:,} parameters in {dtype}, "
                    f"{found.trainable_parameters:,} trained) needs about {found.needed / GB:.2f} GB besides the "
                    f"loaded model ({found.parts()} GB), and {memory.device} has {memory.available / GB:.2f} GB "
                    f"available ({memory.source}, of {memory.total / GB:.2f} GB); {way_out}")
