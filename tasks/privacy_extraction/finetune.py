"""Fine-tuning a copy of the submitted checkpoint on the secrets, with the transformers Trainer.

Every (source, target) pair appears `times` times per epoch. seq2seq: encoder input = source,
labels = target. Causal LM: input = [BOS] source target, labels = the target tokens only (the
rest -100). Constant learning rate, AdamW without weight decay, no warm-up, seeded; after each
epoch in `evaluate_at` the callback `on_checkpoint(epoch, model)` runs on the model in eval mode.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from typing import Callable

import torch
from transformers.trainer_callback import PrinterCallback, TrainerCallback

from harness.core.progress import progress_bar
from harness.scoring import distributed
from harness.scoring.conditional import encode_pairs


@dataclass(frozen=True)
class FinetuneSettings:
    epochs: int
    learning_rate: float
    batch_size: int
    seed: int
    max_source_tokens: int
    max_target_tokens: int


class _Examples(torch.utils.data.Dataset):
    def __init__(self, rows: list[dict]):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict:
        return self.rows[i]


def training_rows(tokenizer, pairs: list[tuple[str, str]], times: list[int], seq2seq: bool,
                  settings: FinetuneSettings) -> list[dict]:
    """One row per pair and repetition: input_ids and labels (no padding yet)."""
    sources, targets = encode_pairs(tokenizer, [s for s, _ in pairs], [t for _, t in pairs], seq2seq,
                                    settings.max_source_tokens, settings.max_target_tokens)
    rows = []
    for source, target, n in zip(sources, targets, times):
        row = ({"input_ids": source, "labels": target} if seq2seq
               else {"input_ids": source + target, "labels": [-100] * len(source) + target})
        rows += [row] * n
    return rows


class _Progress(TrainerCallback):
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


class _AtEpochs(TrainerCallback):
    def __init__(self, evaluate_at: set[int], on_checkpoint: Callable[[int, torch.nn.Module], None]):
        self.evaluate_at, self.on_checkpoint = evaluate_at, on_checkpoint

    def on_epoch_end(self, args, state, control, model=None, **kwargs):
        epoch = round(state.epoch)
        if epoch in self.evaluate_at:
            model.eval()
            with torch.no_grad():
                self.on_checkpoint(epoch, model)
            model.train()


def finetune(model, tokenizer, rows: list[dict], settings: FinetuneSettings, evaluate_at: set[int],
             on_checkpoint: Callable[[int, torch.nn.Module], None], progress: bool | None) -> dict:
    """Train `model` in place; returns facts about the run (steps, seconds, samples per second)."""
    # Imported here: the Trainer takes a second to import, and only this task fine-tunes.
    from transformers import DataCollatorForSeq2Seq, Trainer, TrainingArguments

    device = next(model.parameters()).device
    # In a data-parallel run every rank fine-tunes its own copy alike: the Trainer must not join the ranks (DDP).
    with tempfile.TemporaryDirectory(prefix="membench-finetune-") as scratch, distributed.single_process_env():
        arguments = TrainingArguments(
            output_dir=scratch, num_train_epochs=settings.epochs, learning_rate=settings.learning_rate,
            lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, optim="adamw_torch",
            per_device_train_batch_size=settings.batch_size, seed=settings.seed, data_seed=settings.seed,
            save_strategy="no", logging_strategy="no", report_to=[], use_cpu=device.type == "cpu",
            disable_tqdm=True, dataloader_num_workers=0, remove_unused_columns=False,
        )
        collator = DataCollatorForSeq2Seq(tokenizer, model=None, label_pad_token_id=-100, padding=True)
        trainer = Trainer(model=model, args=arguments, train_dataset=_Examples(rows), data_collator=collator,
                          callbacks=[_Progress(progress), _AtEpochs(evaluate_at, on_checkpoint)])
        trainer.remove_callback(PrinterCallback)
        started = time.perf_counter()
        output = trainer.train()
        seconds = time.perf_counter() - started
    model.eval()
    return {"steps": output.global_step, "train_seconds_with_evaluation": round(seconds, 1),
            "train_samples_per_second": output.metrics.get("train_samples_per_second"),
            "train_loss": round(output.training_loss, 5), "rows_per_epoch": len(rows)}
