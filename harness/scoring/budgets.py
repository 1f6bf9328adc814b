"""How much of the device's memory a batch may take: fixed budgets on a CPU, shares of the device
on an accelerator.

On a CPU, running out of memory kills the process (the kernel's OOM killer), so batches are
bounded by fixed budgets sized for a 24 GB machine, and the committed board was scored with them.
On an accelerator, running out of memory is an exception that `harness.scoring.fitting` catches
(the batch is halved and run again), so the budgets there are shares of the device's memory,
large enough to keep it busy:

- logits: `ACCELERATOR_LOGITS_SHARE` (1/8) of the device's total memory (10 GB on an 80 GB
  H100: about 50,000 positions of a 49,152-token vocabulary in float32), never less than the CPU's
  budget (`harness.scoring.causal.LOGITS_BUDGET_BYTES`, 1 GiB);
- per-text gradients (`harness.scoring.gradients`): `ACCELERATOR_GRADIENT_SHARE` (60%) of the
  memory free when the step starts.
"""

from __future__ import annotations

import torch

ACCELERATOR_LOGITS_SHARE = 1 / 8
ACCELERATOR_GRADIENT_SHARE = 0.6


def on_accelerator(device: torch.device) -> bool:
    return torch.device(device).type == "cuda"


def total_bytes(device: torch.device) -> int:
    """The accelerator's memory (0 on a CPU)."""
    return torch.cuda.get_device_properties(device).total_memory if on_accelerator(device) else 0


def free_bytes(device: torch.device) -> int:
    """The accelerator's free memory now, what PyTorch's allocator has cached counted as free (0 on a CPU)."""
    if not on_accelerator(device):
        return 0
    free, _ = torch.cuda.mem_get_info(device)
    return free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
