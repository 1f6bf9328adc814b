"""Per-text gradient norms of a causal LM's loss: the `gradnorm` membership score, batched.

For a text x with n scored tokens, NLL(x) = -(1/n) sum_t log p(x_t | x_<t), and

    gradnorm(x) = (1/P) sum_theta || d NLL(x) / d theta ||_p

the mean over the model's P parameter tensors theta of the p-norm of each one's gradient (p = 1,
2 or inf: the largest absolute entry). This is MIMIR's `GradNormAttack` (Duan et al. 2024; the
attack is credited there to Wang et al. 2024, arXiv 2402.17012), which returns minus this value
(members have smaller gradients). MIMIR loops: one text, zero_grad, backward, norms.

membench computes the per-text gradients of a length-sorted, right-padded batch at once with
`torch.func` (`vmap` of `grad` of a functional call of the model). No attention mask is passed:
with right padding a causal LM's real positions never attend to the padding after them, so a
text's gradient is the one it has alone (its padded positions are left out of its loss).
Texts are cut to the model's context window (their first tokens; counted by the caller). The
gradients are in the model's dtype; the parameters are not changed and no `.grad` is left on them.
As MIMIR, the mean is over the parameters a backward pass reaches (`reached_parameters`: one
backward pass of the first text finds them).

Cost: one forward and one backward pass per text, and a batch holds one gradient of every
parameter per text (`gradient_batch`). On a CPU the batch is bounded by `GRADIENT_BUDGET` numbers
(32 MiB in float32: the 0.72M-parameter reference GPT-2 gets batches of 11; a model larger than
the budget, batches of 1). Larger batches are slower there, not faster: on that GPT-2 and 100
texts of 128 words (2 threads, AMD EPYC, 2026-11-25) batches of 64 took 6.2 s, of 8 to 16 1.8 to
2.3 s, MIMIR's loop 2.2 s (the texts' gradients of every parameter no longer fit the CPU's caches).
On an accelerator the batch takes `budgets.ACCELERATOR_GRADIENT_SHARE` of its free memory (a
1.7B-parameter model in bfloat16 on an 80 GB GPU: about 6 texts; each `vmap` call costs the same
dispatch overhead whatever its batch, which batches of 1 paid per text: issue 41), and a batch
that still does not fit is halved (`harness.scoring.fitting`). The norms of a batch stay on the
device until one copy to the host per batch. Where `vmap` cannot run a model's operators, a
per-text loop with `backward()` gives the same values (with a warning).
"""

from __future__ import annotations

import logging
import math

import numpy as np
import torch
from accelerate.utils.memory import should_reduce_batch_size
from torch.func import functional_call, grad, vmap
from torch.nn.attention import SDPBackend, sdpa_kernel

from harness.scoring import budgets
from harness.scoring.batching import model_context, padding_id, right_pad
from harness.scoring.causal import encode_with_bos, output_vocabulary
from harness.scoring.distributed import run_batches
from harness.scoring.spans import length_batches

log = logging.getLogger(__name__)

GRADIENT_BUDGET = 2**23  # parameter gradients held at once in a batch (32 MiB in float32)


def gradient_batch(model, longest: int, batch_size: int) -> int:
    """Texts per batch of per-text gradients, at most `batch_size` (module docstring): on a CPU within
    `GRADIENT_BUDGET` numbers; on an accelerator within `budgets.ACCELERATOR_GRADIENT_SHARE` of its
    free memory, a text taking two copies of every parameter (its gradient, and the temporary of
    a norm) plus its float32 logits three times over (logits, log-softmax, their gradient) for
    the batch's `longest` row."""
    n_params = sum(param.numel() for param in model.parameters())
    device = next(model.parameters()).device
    if not budgets.on_accelerator(device):
        return max(1, min(batch_size, GRADIENT_BUDGET // max(1, n_params)))
    per_text = bytes_per_text(model, longest)
    return max(1, min(batch_size, int(budgets.free_bytes(device) * budgets.ACCELERATOR_GRADIENT_SHARE) // per_text))


def bytes_per_text(model, longest: int) -> int:
    """What `gradient_batch` reckons one text of `longest` tokens takes on an accelerator: two copies of
    every parameter and its float32 logits three times over."""
    element = next(model.parameters()).element_size()
    return 2 * sum(p.numel() for p in model.parameters()) * element + 3 * 4 * longest * output_vocabulary(model)


def norm_of(gradients: torch.Tensor, p: float) -> torch.Tensor:
    """|| g ||_p over all entries of each g in `gradients` (its first dimension: one per text)."""
    flat = gradients.reshape(gradients.shape[0], -1).abs()
    if math.isinf(p):
        return flat.amax(dim=1)
    return flat.sum(dim=1) if p == 1 else flat.square().sum(dim=1).sqrt()


def mean_token_nll(model, params: dict, buffers: dict, ids: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
    """NLL of one right-padded token row whose first `length` tokens are real (tokens 2.. scored)."""
    logits = functional_call(model, (params, buffers), (ids.unsqueeze(0),)).logits[0, :-1]
    logprobs = torch.log_softmax(logits, dim=-1).gather(-1, ids[1:].unsqueeze(-1)).squeeze(-1)
    real = (torch.arange(1, ids.shape[0], device=ids.device) < length).to(logprobs.dtype)
    return -(logprobs * real).sum() / real.sum()


def batched_norms(model, rows: list[list[int]], p: float, pad: int, used: list[str]) -> list[float]:
    """gradnorm of each row, the gradients of all rows computed together (`torch.func.vmap`), over
    the parameters named in `used` (those a backward pass reaches: `reached_parameters`)."""
    device = next(model.parameters()).device
    params = {name: param.detach() for name, param in model.named_parameters() if name in used}
    buffers = {name: buffer.detach() for name, buffer in model.named_buffers()}
    ids, _ = right_pad(rows, pad)
    lengths = torch.tensor([len(row) for row in rows], device=device)
    per_text = vmap(grad(lambda prm, i, n: mean_token_nll(model, prm, buffers, i, n)), in_dims=(None, 0, 0))
    with sdpa_kernel(SDPBackend.MATH):  # the fused CPU kernels have no vmap rule: vmap would loop over texts
        gradients = per_text(params, ids.to(device), lengths)
    norms = torch.stack([norm_of(g, p) for g in gradients.values()], dim=1)  # texts x parameters
    return norms.float().mean(dim=1).tolist()


def _backward(model, row: list[int]) -> None:
    """Leave d NLL(row) / d theta in each parameter's `.grad` (None where the backward pass does not reach)."""
    model.zero_grad(set_to_none=True)
    ids = torch.tensor([row], device=next(model.parameters()).device)
    with torch.enable_grad():
        logits = model(ids).logits[0, :-1]
        loss = -torch.log_softmax(logits, dim=-1).gather(-1, ids[0, 1:].unsqueeze(-1)).mean()
        loss.backward()


def reached_parameters(model, row: list[int]) -> list[str]:
    """Names of the parameters a backward pass of the loss gives a gradient: MIMIR averages the norms
    of those only (`if p.grad is not None`), leaving out frozen ones and ones the forward pass does
    not use (an unused head, say), which `vmap` would count as zero gradients."""
    _backward(model, row)
    names = [name for name, param in model.named_parameters() if param.grad is not None]
    model.zero_grad(set_to_none=True)
    return names


def looped_norm(model, row: list[int], p: float) -> torch.Tensor:
    """gradnorm of one row as MIMIR computes it: backward, then the norm of each parameter's `.grad`
    (a 0-d float32 tensor on the model's device: the caller copies a batch's norms to the host at once)."""
    _backward(model, row)
    norms = [norm_of(param.grad.detach().unsqueeze(0), p)[0] for param in model.parameters() if param.grad is not None]
    model.zero_grad(set_to_none=True)
    return torch.stack(norms).float().mean()


def gradient_norms(model, tokenizer, texts: list[str], p: float = math.inf, batch_size: int = 16,
                   add_start: bool = True, progress: bool | None = None) -> np.ndarray:
    """gradnorm (the module docstring) of each text: [BOS] + its tokens (`add_start`, membench's
    `--first-token score`) or the bare text (`skip`, MIMIR's way on GPT-2), cut to the context; NaN
    for a text with fewer than 2 tokens (nothing to score)."""
    if p not in (1, 2, math.inf):
        raise ValueError(f"p must be 1, 2 or inf, got {p}")
    encoded, _ = encode_with_bos(tokenizer, texts, add_start=add_start)
    context = model_context(model)
    rows = [ids[:context] for ids in encoded]
    scorable = [i for i, row in enumerate(rows) if len(row) >= 2]
    batch = gradient_batch(model, max((len(rows[i]) for i in scorable), default=1), batch_size)
    pad = padding_id(tokenizer)
    use_vmap = [True]
    used = reached_parameters(model, rows[scorable[0]]) if scorable else []

    def norms_of(indices: list[int]) -> list[float]:
        chosen = [rows[scorable[k]] for k in indices]
        if use_vmap[0]:
            try:
                return batched_norms(model, chosen, p, pad, used)
            except (RuntimeError, NotImplementedError, TypeError) as err:  # an operator vmap cannot batch
                if should_reduce_batch_size(err):  # out of memory: `run_batches` halves the batch
                    raise
                log.warning("gradient norms: torch.func.vmap cannot run %s (%s); one text at a time instead",
                            type(model).__name__, str(err).splitlines()[0][:200])
                use_vmap[0] = False
        return torch.stack([looped_norm(model, row, p) for row in chosen]).tolist()

    done = run_batches(length_batches([len(rows[i]) for i in scorable], batch), norms_of, "gradient norms", progress)
    out = np.full(len(texts), np.nan)
    for k, value in done.items():
        out[scorable[k]] = value
    return out
