"""`membench prune`: a sparse variant of a checkpoint by global L1 unstructured pruning, and the masks
that keep a sparse model sparse while it trains.

Scope `all` (the default; Yoon & Lee prune "across all trainable parameters", keeping about 30%):
every parameter of the model (each tied tensor once: embeddings, linear and norm weights, biases);
scope `linear`: the linear weights only (`torch.nn.Linear` and GPT-2's `Conv1D`; weights tied to an
embedding matrix excluded). The chosen tensors are ranked together, as
`torch.nn.utils.prune.global_unstructured(..., L1Unstructured, amount=S)` ranks them (its
`L1Unstructured.compute_mask` on their concatenation): the S share with the smallest |w| over the
whole model is set to zero, in place (tied weights stay tied). The measured sparsities are written
into the checkpoint's config as `membench_pruning`, and the checkpoint is saved as safetensors with
its tokenizer. Nothing is trained: Yoon & Lee pre-trained their pruned T5s again for 4 epochs (on BookCorpus) before
scoring them, since "naively scoring over pruned models result in bad LM scores"; `membench prune` has no such step
(the reference `t5-ref-sparse70` gets its 125 steps of sparse pre-training from `harness.reference.t5_build`).

`ZeroMasks`: which weights of a model are zero; `restore()` sets them to zero again after an
optimizer step, so that fine-tuning a pruned model trains only its kept weights (sparse fine-tuning).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch
from torch.nn.utils import prune

from harness.core.errors import UserError
from harness.core.io import check_writable_folder
from harness.files.staging import discard, make_staging
from harness.model.loading import ModelSpec, load

CONFIG_KEY = "membench_pruning"


def linear_modules(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The (name, module) of every linear layer whose weight is not tied to an embedding matrix."""
    from transformers.pytorch_utils import Conv1D

    embedding_weights = {m.weight.data_ptr() for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    return [(name, module) for name, module in model.named_modules()
            if isinstance(module, (torch.nn.Linear, Conv1D)) and module.weight.data_ptr() not in embedding_weights]


SCOPES = ("all", "linear")


def sparsity_of(tensors: list[torch.Tensor]) -> float:
    total = sum(t.numel() for t in tensors)
    return sum(int((t == 0).sum()) for t in tensors) / total if total else 0.0


def parameter_sparsity(model: torch.nn.Module) -> float:
    """The share of the model's parameters (each tied tensor once) that are exactly zero."""
    return round(sparsity_of([p.detach() for _, p in model.named_parameters()]), 6)


def check_settings(sparsity: float, scope: str) -> None:
    """A `UserError` unless 0 < sparsity < 1 and `scope` is one of `SCOPES`."""
    if not 0.0 < sparsity < 1.0:
        raise UserError(f"--sparsity must be between 0 and 1 (exclusive), got {sparsity}")
    if scope not in SCOPES:
        raise UserError(f"--scope must be one of {', '.join(SCOPES)}, got {scope!r}")


def prunable_tensors(model: torch.nn.Module, scope: str) -> list[torch.nn.Parameter]:
    """The tensors `scope` prunes: `all`, every parameter (`named_parameters` gives a tied one once);
    `linear`, the linear weights not tied to an embedding (`linear_modules`)."""
    if scope == "all":
        return [parameter for _, parameter in model.named_parameters()]
    return [module.weight for _, module in linear_modules(model)]


def prune_model(model: torch.nn.Module, sparsity: float, scope: str = "all") -> dict:
    """Prune `model` in place (see the module docstring); returns what was done and measured."""
    check_settings(sparsity, scope)
    tensors = prunable_tensors(model, scope)
    if not tensors:
        raise UserError(f"the model has no {'linear layers' if scope == 'linear' else 'parameters'} to prune")
    with torch.no_grad():
        pooled = torch.cat([t.detach().reshape(-1) for t in tensors])
        keep = prune.L1Unstructured(amount=sparsity).compute_mask(pooled, torch.ones_like(pooled))
        for tensor, kept in zip(tensors, torch.split(keep, [t.numel() for t in tensors])):
            tensor.mul_(kept.view_as(tensor))
    linear = [module.weight.detach() for _, module in linear_modules(model)]
    return {"method": f"global L1 unstructured over {'all parameters' if scope == 'all' else 'linear weights'} "
                      "(torch.nn.utils.prune.L1Unstructured's ranking)",
            "scope": scope, "target_sparsity": sparsity, "pruned_tensors": len(tensors),
            "pruned_weights": sum(t.numel() for t in tensors),
            "linear_weight_sparsity": round(sparsity_of(linear), 6),
            "parameter_sparsity": parameter_sparsity(model)}


class ZeroMasks:
    """Where the trainable parameters of a model are zero now (only tensors with a zero are kept);
    `restore()` zeroes those entries again, in place. Called after every optimizer step of a
    fine-tuning, the pruned weights stay zero and only the kept ones train (sparse fine-tuning):
    an optimizer's update of a zero weight is undone before the next forward pass. The masks hold a byte
    per weight of each tensor with a zero, which `harness.training.memory`'s estimate leaves out (at most
    1 B against the 16 B per parameter a float32 full fine-tuning's copy, gradients and moments take)."""

    def __init__(self, model: torch.nn.Module):
        with torch.no_grad():
            found = [(p, p != 0) for _, p in model.named_parameters() if p.requires_grad]
        self.masks = [(p, kept) for p, kept in found if not bool(kept.all())]
        self.zeros = sum(int((~kept).sum()) for _, kept in self.masks)

    def restore(self) -> None:
        with torch.no_grad():
            for parameter, kept in self.masks:
                parameter.mul_(kept)


def prune_checkpoint(spec: ModelSpec, sparsity: float, output: Path, scope: str = "all") -> dict:
    """Load `spec` (safely, on CPU, float32), prune it, save it to `output` (which must not exist
    or be empty); returns the pruning record written into the config."""
    output = Path(output)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise UserError(f"--output {output} exists and is not an empty folder")
    check_settings(sparsity, scope)
    check_writable_folder(output.parent, f"--output {output}")  # before the work, not after it
    lm = load(replace(spec, device="cpu", dtype="float32"))
    record = {**prune_model(lm.model, sparsity, scope), "pruned_from": {"model": lm.source, "identity": lm.identity,
                                                                  "weights_sha256": lm.weights_sha256}}
    setattr(lm.model.config, CONFIG_KEY, record)
    staging = make_staging(output.parent, "prune")
    try:
        lm.model.save_pretrained(staging, safe_serialization=True)
        lm.tokenizer.save_pretrained(staging)
        if output.exists():
            output.rmdir()
        staging.rename(output)
    finally:
        discard(staging)
    return record
