"""The fine-tuning engine's Trainer callbacks (`harness.training.finetune`): its progress bar, and the
evaluations after chosen epochs. A module of their own, imported when a training starts: transformers'
callbacks import its Trainer utilities and peft (1.5 s), which a process that never trains should not wait for."""

from __future__ import annotations

from typing import Callable

import torch
from transformers.trainer_callback import TrainerCallback

from harness.core.progress import paused, progress_bar
from harness.training.dp import base_model


class Progress(TrainerCallback):
    """A bar of training steps like the harness's others (`progress_bar`: lines where stderr is no terminal), in
    place of the Trainer's own, which also prints its logs."""

    def __init__(self, progress: bool | None):
        self.show = progress
        self.bar = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.bar = progress_bar(total=state.max_steps, step="fine-tuning", unit="step", leave=False, show=self.show)

    def on_step_end(self, args, state, control, **kwargs):
        self.bar.update(1)

    def on_train_end(self, args, state, control, **kwargs):
        self.bar.close()


class AtEpochs(TrainerCallback):
    """The evaluation after each epoch in `evaluate_at`; the steps' bar (`Progress`) is paused meanwhile,
    so its rate and ETA count training steps only."""

    def __init__(self, evaluate_at: set[int], on_checkpoint: Callable[[int, torch.nn.Module], None],
                 steps: Progress):
        self.evaluate_at, self.on_checkpoint, self.steps = evaluate_at, on_checkpoint, steps

    def on_epoch_end(self, args, state, control, model=None, **kwargs):
        epoch = round(state.epoch)
        if epoch in self.evaluate_at:
            model.eval()
            # a peft model is evaluated as its transformers model, the adapter in its linear layers
            with torch.no_grad(), paused(self.steps.bar):
                self.on_checkpoint(epoch, base_model(model))
            model.train()


class KeepZeros(TrainerCallback):
    """Sparse fine-tuning: after every optimizer step the weights that were zero when training started are
    zero again (`harness.model.prune.ZeroMasks.restore`)."""

    def __init__(self, masks):
        self.masks = masks

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.masks.restore()
