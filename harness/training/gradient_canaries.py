"""White-box gradient canaries for the one-run audit of DP-SGD (Steinke, Nasr & Jagielski 2023, *Privacy
auditing with one (1) training run*, NeurIPS: the white-box setting, where the auditor inserts canary gradients
and reads the final model's parameters; one coordinate per canary, the "Dirac canary" of Nasr et al. 2023,
*Tight auditing of differentially private machine learning*, USENIX Security).

m canaries, each a coordinate of the trainable parameters (distinct, drawn from `seed`) and a sign, each in
the training with probability 1/2, independently (the inclusion bits, also from `seed`). At every DP-SGD step
each included canary joins the batch as a row does, with the rows' sampling rate q (Poisson, a generator of
its own, so the rows' batches are those of a run without canaries), and its gradient, sign × C on its
coordinate (norm C: a row's gradient after clipping at its largest), is added to the sum of the clipped
per-row gradients before the noise. A canary's score after training is sign × (θ₀[coordinate] − θ[coordinate]):
how far the parameter moved down the canary's gradient (a descent step moves a parameter against its gradient).

What it audits: the mechanism, not what a model learns from text. As far as DP-SGD's guarantee goes a
canary is a row (any gradient of norm at most C), so a sound mechanism at a claimed ε audits at most ε up to
the audit's 5%; a mechanism that adds too little noise lets the included canaries move their coordinates
away from the others'. The text canaries' audit (`privacy_extraction`) is the leakage; these catch a broken
claim where the text canaries leave the audit nothing to see (a LoRA adapter that does not learn random
strings: docs/dp.md). The canaries change the training a little (up to m pushed coordinates), as text
canaries add rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from harness.core.errors import UserError


@dataclass(frozen=True)
class GradientCanaries:
    """m white-box canaries whose coordinates, signs and inclusion bits are drawn from `seed` (the same for
    every fine-tuning seed of a task: one draw of the canaries, several training runs)."""

    m: int
    seed: int = 0


class CanaryGradients:
    """The canaries of one DP-SGD run over its trainable `params` (in the optimizer's order): `add_to_sums`
    before each step's noise, `scores` at each evaluated epoch."""

    def __init__(self, canaries: GradientCanaries, params: list[torch.Tensor], max_grad_norm: float,
                 sample_rate: float, run_seed: int):
        sizes = [p.numel() for p in params]
        total = sum(sizes)
        if canaries.m > total:
            raise UserError(f"gradient canaries: {canaries.m} canaries need as many trainable parameters, the "
                            f"model has {total}")
        draw = torch.Generator().manual_seed(canaries.seed)
        self.flat = torch.randperm(total, generator=draw)[:canaries.m]
        self.signs = torch.randint(0, 2, (canaries.m,), generator=draw) * 2.0 - 1.0
        self.included = torch.rand(canaries.m, generator=draw) < 0.5
        offsets = torch.tensor([0, *sizes]).cumsum(0)
        owner = torch.searchsorted(offsets[1:], self.flat, right=True)  # which parameter holds each coordinate
        self.params = params
        self.where = [(k, torch.nonzero(owner == k).flatten(), self.flat[owner == k] - offsets[k])
                      for k in range(len(params)) if bool((owner == k).any())]
        self.push = max_grad_norm
        self.sample_rate = sample_rate
        self.sampling = torch.Generator().manual_seed(run_seed + 2)
        self.start = self._values()

    def _values(self) -> torch.Tensor:
        out = torch.empty(len(self.flat), dtype=torch.float64)
        for k, canaries, local in self.where:
            out[canaries] = self.params[k].detach().reshape(-1)[local.to(self.params[k].device)].double().cpu()
        return out

    def add_to_sums(self) -> int:
        """Add this step's canary gradients to each parameter's `summed_grad` (opacus' sum of clipped per-row
        gradients, before its noise): sign × C on the coordinate of every included canary the Poisson draw
        puts in the batch. Returns how many joined."""
        joined = self.included & (torch.rand(len(self.flat), generator=self.sampling) < self.sample_rate)
        for k, canaries, local in self.where:
            chosen = joined[canaries]
            if chosen.any():
                summed = self.params[k].summed_grad
                if not summed.is_contiguous():
                    summed = self.params[k].summed_grad = summed.contiguous()
                push = (self.signs[canaries][chosen] * self.push).to(summed.dtype).to(summed.device)
                summed.view(-1).index_add_(0, local[chosen].to(summed.device), push)
        return int(joined.sum())

    def scores(self) -> list[float]:
        """Each canary's score now: sign × (θ₀[coordinate] − θ[coordinate]), how far its parameter moved down the
        canary's gradient; higher = more likely included."""
        return (self.signs.double() * (self.start - self._values())).tolist()

    def inclusion(self) -> str:
        """The inclusion bits, "1" for a canary in the training, in the canaries' order (as `scores`')."""
        return "".join("1" if bit else "0" for bit in self.included.tolist())
