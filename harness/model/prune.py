"""`membench prune`: a sparse variant of a checkpoint by global L1 unstructured pruning.

All linear weights of the model (`torch.nn.Linear` and GPT-2's `Conv1D`; weights tied to an
embedding matrix excluded, so the embeddings stay dense) are pruned together with
`torch.nn.utils.prune.global_unstructured(..., L1Unstructured, amount=S)`: the S share of those
weights with the smallest |w| over the whole model are set to zero; the masks are then made
permanent (`prune.remove`). The measured sparsity is written into the checkpoint's config as
`membench_pruning` and the checkpoint is saved as safetensors with its tokenizer. Yoon & Lee
pruned T5 to keep about 30% of its parameters.
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


def sparsity_of(tensors: list[torch.Tensor]) -> float:
    total = sum(t.numel() for t in tensors)
    return sum(int((t == 0).sum()) for t in tensors) / total if total else 0.0


def prune_model(model: torch.nn.Module, sparsity: float) -> dict:
    """Prune `model` in place (see the module docstring); returns what was done and measured."""
    if not 0.0 < sparsity < 1.0:
        raise UserError(f"--sparsity must be between 0 and 1 (exclusive), got {sparsity}")
    modules = linear_modules(model)
    if not modules:
        raise UserError("the model has no linear layers to prune")
    prune.global_unstructured([(module, "weight") for _, module in modules], pruning_method=prune.L1Unstructured,
                              amount=sparsity)
    for _, module in modules:
        prune.remove(module, "weight")
    weights = [module.weight.detach() for _, module in modules]
    parameters = [p.detach() for p in model.parameters()]
    return {"method": "global L1 unstructured over linear weights (torch.nn.utils.prune)",
            "target_sparsity": sparsity, "linear_weight_sparsity": round(sparsity_of(weights), 6),
            "parameter_sparsity": round(sparsity_of(parameters), 6), "pruned_layers": len(modules),
            "pruned_weights": sum(w.numel() for w in weights)}


def prune_checkpoint(spec: ModelSpec, sparsity: float, output: Path) -> dict:
    """Load `spec` (safely, on CPU, float32), prune it, save it to `output` (which must not exist
    or be empty); returns the pruning record written into the config."""
    output = Path(output)
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise UserError(f"--output {output} exists and is not an empty folder")
    if not 0.0 < sparsity < 1.0:
        raise UserError(f"--sparsity must be between 0 and 1 (exclusive), got {sparsity}")
    check_writable_folder(output.parent, f"--output {output}")  # before the work, not after it
    lm = load(replace(spec, device="cpu", dtype="float32"))
    record = {**prune_model(lm.model, sparsity), "pruned_from": {"model": lm.source, "identity": lm.identity,
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
