"""Differentially private fine-tuning: DP-SGD (Abadi et al. 2016, *Deep learning with differential privacy*)
with opacus (Yousefpour et al. 2021), for full fine-tuning and for a LoRA adapter (Yu et al. 2022,
*Differentially private fine-tuning of language models*). The one DP path of the fine-tuning engine
(`harness.training.finetune`); the transformers Trainer is not used here: opacus needs the batches and the
optimizer step in its own hands.

One step, for the n training rows (a row is the unit of privacy; a secret repeated k times per epoch is k
rows, protected as a group of k):

- Poisson sampling: each row joins the batch independently with probability q = B / n (B =
  `--finetune-batch-size`, the expected batch size), drawn from the run's seeded generator. An empty batch
  still takes its step: noise alone.
- Per-row loss ℓ_i = the mean cross-entropy over the row's labelled tokens (not the batch's token mean,
  which would scale one row's gradient by the other rows' lengths: adding or removing a row would change
  every other row's contribution). Per-row gradients g_i by opacus' `GradSampleModule` (hooks).
- Clipping and noise (opacus' `DPOptimizer`, its "sum" reduction): g = Σ_i g_i · min(1, C / ‖g_i‖) +
  N(0, σ² C² I), then the same AdamW step as the non-private engine (constant learning rate, no weight
  decay). Not divided by B: AdamW's step does not depend on the gradient's scale (but through its 1e-8 ε).
- T = E · ⌈n / B⌉ steps for E epochs (opacus' epoch: ⌈n / B⌉ Poisson steps), evaluated after each epoch in
  `evaluate_at`.
- σ (the noise multiplier) is the smallest for which the accountant certifies (ε, δ) after T steps at
  rate q (opacus' `get_noise_multiplier`, to 0.01 in ε): PRV (Gopi et al. 2021, the default) or RDP
  (Mironov 2017). After training the accountant's ε for the steps actually taken is recorded beside the
  target (`epsilon_spent` ≤ `claimed_epsilon`).

With `gradient_canaries` (the one-run audit's white-box canaries, `harness.training.gradient_canaries`) each
step's included canaries add their gradients to the clipped sum before the noise (opacus' `add_noise`,
wrapped), and their scores are taken at each evaluated epoch (the facts' `gradient_canaries`).

The noise is drawn from a seeded generator, so a run is reproducible; a deployment's DP training would draw
it from a cryptographically secure source (opacus' `secure_mode`), which changes nothing of the guarantee's
arithmetic. `no_noise_for_testing` is the broken mechanism of the audit's known truth (issue 63): it clips
as usual but adds no noise while the run still claims ε; the results file says so in every place the claim
appears, and no real run should set it.
"""

from __future__ import annotations

import functools
import inspect
import math
import time
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from harness.core.errors import UserError
from harness.training.gradient_canaries import CanaryGradients, GradientCanaries

ACCOUNTANTS = ("prv", "rdp")


@dataclass(frozen=True)
class DPSettings:
    """The privacy target (ε, δ), the per-row clipping norm C, the accountant, the test-only switch, and the
    one-run audit's white-box canaries (`gradient_canaries`; None: none)."""

    epsilon: float
    delta: float
    max_grad_norm: float
    accountant: str = "prv"
    no_noise_for_testing: bool = False
    gradient_canaries: GradientCanaries | None = None


DEFAULT_DELTA_CAP = 1e-5  # Abadi et al. 2016's delta (MNIST, 60,000 rows)


def default_delta(rows: int) -> float:
    """δ when none is given: min(1e-5, 1 / n^1.1) for n training rows. Below 1 / n, as a meaningful (ε, δ)
    guarantee needs (a mechanism that publishes one random row whole is (0, 1/n)-DP), and at most the
    customary 1e-5 (Abadi et al. 2016): the one-run audit's bound carries a 2·m·δ term for m canaries
    (Steinke et al. 2023), which a δ near 1 / n would let swamp the bound (at n = 650 rows and m = 1,000
    canaries, 1 / n^1.1 gives 2·m·δ = 1.6; 1e-5 gives 0.02)."""
    if rows < 1:
        raise ValueError("DP fine-tuning needs at least one training row")
    return min(DEFAULT_DELTA_CAP, 1.0 / rows ** 1.1)


@functools.lru_cache(maxsize=32)
def noise_multiplier(settings: DPSettings, sample_rate: float, steps: int) -> float:
    """σ for (ε, δ) after `steps` Poisson-sampled steps at `sample_rate` (opacus' binary search, done once per
    settings: every seed of a task asks the same); 0 for the broken mechanism."""
    from opacus.accountants.utils import get_noise_multiplier

    if settings.no_noise_for_testing:
        return 0.0
    return float(get_noise_multiplier(target_epsilon=settings.epsilon, target_delta=settings.delta,
                                      sample_rate=sample_rate, steps=steps, accountant=settings.accountant,
                                      epsilon_tolerance=0.01))


def unsupported_layers(model: torch.nn.Module) -> list[str]:
    """opacus' objections to the model's trainable layers (`ModuleValidator`, e.g. BatchNorm), one line each."""
    from opacus.validators import ModuleValidator

    was_training = model.training
    model.train()  # the validator asks for training mode first
    try:
        return [str(err).splitlines()[0] for err in ModuleValidator.validate(model, strict=False)]
    finally:
        model.train(was_training)


def _shared_across_rows(model: torch.nn.Module, rows_in_batch: int) -> list[str]:
    """The trainable parameters whose per-row gradients opacus could not separate (their `grad_sample` has no
    row per example: a layer whose input is shared by the batch, such as T5's relative position bias)."""
    return [name for name, p in model.named_parameters()
            if p.requires_grad and (getattr(p, "grad_sample", None) is None or p.grad_sample.shape[0] != rows_in_batch)]


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model under a peft wrapper (its adapter in its linear layers); `model` itself otherwise."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _takes_position_ids(model: torch.nn.Module) -> bool:
    return "position_ids" in inspect.signature(base_model(model).forward).parameters


def row_losses(model: torch.nn.Module, batch: dict, seq2seq: bool, position_ids: bool) -> torch.Tensor:
    """ℓ_i per row of the batch: mean cross-entropy over the row's labelled tokens (labels -100 left out).
    A causal LM's position ids are given per row (arange, right padding), so that a position embedding's
    input, and so its per-row gradient, has a row per example."""
    labels = batch["labels"]
    if seq2seq:  # `batch` holds the decoder's inputs too: the labels shifted right (`decoder_input_ids`)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       decoder_input_ids=batch["decoder_input_ids"]).logits
        targets = labels
    else:
        extra = {}
        if position_ids:
            extra["position_ids"] = torch.arange(labels.shape[1], device=labels.device).expand(labels.shape[0], -1)
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], **extra).logits[:, :-1]
        targets = labels[:, 1:]
    tokens = torch.nn.functional.cross_entropy(logits.transpose(1, 2).float(), targets, ignore_index=-100,
                                               reduction="none")
    counts = (targets != -100).sum(dim=1).clamp(min=1)
    return tokens.sum(dim=1) / counts


def train_dp(model, tokenizer, rows: list[dict], settings, evaluate_at: set[int],
             on_checkpoint: Callable[[int, torch.nn.Module], None], progress: bool | None) -> dict:
    """DP-SGD fine-tuning of `model` in place (its trainable parameters: every weight, or a LoRA adapter's);
    `settings` is the engine's `FinetuneSettings` with `dp` set. Returns the run's facts with the privacy
    record under `dp`. A `UserError` (before any step) when opacus cannot compute a trainable layer's
    per-row gradients."""
    from opacus import GradSampleModule
    from opacus.accountants import create_accountant
    from opacus.optimizers import DPOptimizer
    from transformers import DataCollatorForSeq2Seq

    from harness.core.progress import paused, progress_bar
    from harness.model.prune import ZeroMasks

    dp: DPSettings = settings.dp
    if dp.accountant not in ACCOUNTANTS:
        raise ValueError(f"unknown accountant {dp.accountant!r}: one of {', '.join(ACCOUNTANTS)}")
    objections = unsupported_layers(model)
    if objections:
        raise UserError(f"DP fine-tuning: opacus cannot train this model's layers ({objections[0]}); "
                        "use --finetune-method lora")
    n, batch = len(rows), settings.batch_size
    sample_rate = min(1.0, batch / n)
    steps_per_epoch = math.ceil(n / batch)
    total_steps = steps_per_epoch * settings.epochs
    sigma = noise_multiplier(dp, sample_rate, total_steps)
    seq2seq = bool(model.config.is_encoder_decoder)
    positions = not seq2seq and _takes_position_ids(model)
    base = base_model(model)
    device = next(model.parameters()).device
    collator = DataCollatorForSeq2Seq(tokenizer, model=None, label_pad_token_id=-100, padding=True)
    masks = ZeroMasks(model) if settings.keep_zeros else None

    torch.manual_seed(settings.seed)
    sampling = torch.Generator().manual_seed(settings.seed)
    noise = torch.Generator(device=device).manual_seed(settings.seed + 1)
    trainable = [p for p in model.parameters() if p.requires_grad]
    wrapped = GradSampleModule(model, batch_first=True, loss_reduction="sum")
    optimizer = DPOptimizer(torch.optim.AdamW(trainable, lr=settings.learning_rate, weight_decay=0.0),
                            noise_multiplier=sigma, max_grad_norm=dp.max_grad_norm, expected_batch_size=batch,
                            loss_reduction="sum", generator=noise)
    accountant = create_accountant(dp.accountant)
    canaries = None
    if dp.gradient_canaries is not None:  # their gradients join the clipped sum before the noise
        canaries = CanaryGradients(dp.gradient_canaries, trainable, dp.max_grad_norm, sample_rate, settings.seed)
        plain_noise = optimizer.add_noise

        def add_noise_after_canaries() -> None:
            canaries.add_to_sums()
            plain_noise()

        optimizer.add_noise = add_noise_after_canaries  # what opacus' pre_step calls after clipping
    canary_scores: dict[str, list[float]] = {}
    losses, empty, checked = [], 0, False
    bar = progress_bar(total=total_steps, step="DP fine-tuning", unit="step", leave=False, show=progress)
    started = time.perf_counter()
    # opacus' backward hooks on the first layer, whose input (token ids) needs no gradient: PyTorch's notice only
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Full backward hook is firing", category=UserWarning)
        try:
            wrapped.train()
            for step in range(1, total_steps + 1):
                chosen = torch.nonzero(torch.rand(n, generator=sampling) < sample_rate).flatten().tolist()
                optimizer.zero_grad(set_to_none=True)
                if chosen:
                    inputs = {k: v.to(device) for k, v in collator([rows[i] for i in chosen]).items()}
                    if seq2seq:
                        labels = inputs["labels"]
                        inputs["decoder_input_ids"] = base.prepare_decoder_input_ids_from_labels(labels=labels)
                    per_row = row_losses(wrapped, inputs, seq2seq, positions)
                    per_row.sum().backward()
                    if not checked:
                        shared = _shared_across_rows(model, len(chosen))
                        if shared:
                            raise UserError(f"DP fine-tuning: opacus cannot separate the per-row gradients of "
                                            f"{shared[0]} ({len(shared)} such parameters: a layer whose input the "
                                            "batch shares); use --finetune-method lora")
                        checked = True
                    losses.append(float(per_row.detach().mean()))
                else:  # an empty Poisson batch: the step is noise alone
                    empty += 1
                    for p in trainable:
                        p.grad_sample = torch.zeros((0, *p.shape), dtype=p.dtype, device=p.device)
                optimizer.step()
                accountant.step(noise_multiplier=sigma, sample_rate=sample_rate)
                if masks is not None:
                    masks.restore()
                bar.update(1)
                if step % steps_per_epoch == 0 and step // steps_per_epoch in evaluate_at:
                    if canaries is not None:
                        canary_scores[str(step // steps_per_epoch)] = canaries.scores()
                    wrapped.eval()
                    with torch.no_grad(), paused(bar):
                        on_checkpoint(step // steps_per_epoch, base)
                    wrapped.train()
        finally:
            bar.close()
            optimizer.zero_grad(set_to_none=True)
            wrapped._close()
    seconds = time.perf_counter() - started
    model.eval()
    spent = math.inf if sigma == 0 else float(accountant.get_epsilon(delta=dp.delta))
    record = {"claimed_epsilon": dp.epsilon, "delta": dp.delta, "noise_multiplier": round(sigma, 6),
              "sample_rate": sample_rate, "steps": total_steps, "expected_batch_size": batch,
              "max_grad_norm": dp.max_grad_norm, "accountant": dp.accountant,
              "epsilon_spent": None if math.isinf(spent) else round(spent, 4), "empty_batches": empty,
              "mechanism": "DP-SGD (opacus): Poisson sampling, per-row clipping, Gaussian noise, AdamW"}
    if dp.no_noise_for_testing:
        record["no_noise_for_testing"] = ("BROKEN MECHANISM: no noise was added; the claimed epsilon is false "
                                          "(a known-truth test of the audit)")
    facts = {"steps": total_steps, "train_seconds_with_evaluation": round(seconds, 1),
             "train_samples_per_second": round(n * settings.epochs / seconds, 3),
             "train_loss": round(sum(losses) / max(len(losses), 1), 5), "rows_per_epoch": n, "dp": record}
    if masks is not None:
        facts["kept_zero_weights"] = masks.zeros
    if canaries is not None:  # the task audits them and moves them out of its fine-tuning facts
        facts["gradient_canaries"] = {"inclusion": canaries.inclusion(), "scores": canary_scores}
    return facts
