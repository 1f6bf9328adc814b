"""Fine-tuning a copy of the submitted checkpoint, with the transformers Trainer: the one engine of
every task that trains (privacy_extraction on its secrets, finetune_memorization on known members).

Every (source, target) pair appears `times` times per epoch (`training_rows`). seq2seq: encoder
input = source, labels = target. Causal LM: input = [BOS] source target, labels = the target tokens
only (the rest -100); a plain text is the pair ("", text): [BOS] + text, every text token a label, as
`causal_token_logprobs` scores it. Constant learning rate, AdamW without weight decay, no warm-up, seeded; after each
epoch in `evaluate_at` the callback `on_checkpoint(epoch, model)` runs on the model in eval mode.
Full fine-tuning trains every weight of the model it is given (a fresh copy); LoRA (peft) adds a
seeded adapter to every adapted linear layer and trains only it, the other weights frozen (they may
be shared with the loaded model: `shared_weights_copy`); the evaluation runs on the model with the
adapter unmerged (W·x + (alpha / r)·B·A·x), so shared weights are never written.
With `keep_zeros` (full fine-tuning of a pruned model) the weights that are zero when training starts are
set to zero again after every optimizer step (`harness.model.prune.ZeroMasks`): only the kept weights
train, and the model is as sparse after fine-tuning as before (sparse fine-tuning; Yoon & Lee do not say
whether their fine-tuning kept the pruned weights at zero).
With `dp` the training is DP-SGD instead (`harness.training.dp`: Poisson batches, per-row clipping and noise,
opacus), full or LoRA alike; the evaluations after chosen epochs are the same.
"""

from __future__ import annotations

import copy
import gc
import itertools
import tempfile
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from harness.scoring import distributed
from harness.scoring.conditional import encode_pairs
from harness.training.dp import DPSettings, train_dp


@dataclass(frozen=True)
class LoraSettings:
    """peft's LoraConfig: rank r, scaling alpha (the update is (alpha / r)·B·A), dropout on the adapter's
    input, and the adapted modules (peft's `all-linear`: every linear layer but the output head)."""

    rank: int
    alpha: int
    dropout: float
    target_modules: tuple[str, ...]


@dataclass(frozen=True)
class FinetuneSettings:
    epochs: int
    learning_rate: float
    batch_size: int
    seed: int
    max_source_tokens: int
    max_target_tokens: int
    lora: LoraSettings | None = None  # None: full fine-tuning
    keep_zeros: bool = False  # sparse fine-tuning: the weights zero at the start stay zero (full fine-tuning only)
    dp: DPSettings | None = None  # None: no differential privacy


def shared_weights_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of `model`'s modules and config that shares every parameter and buffer with it: an adapter
    added to the copy leaves `model`'s modules as they are, and the weights take no memory twice."""
    memo = {id(t): t for t in itertools.chain(model.parameters(), model.buffers())}
    return copy.deepcopy(model, memo)


def with_adapter(model: torch.nn.Module, lora: LoraSettings, seed: int) -> torch.nn.Module:
    """`model` with a LoRA adapter (peft), initialized under `seed` (A random, B zero: at first the
    model computes what it did); every other weight frozen."""
    from peft import LoraConfig, get_peft_model

    targets = "all-linear" if list(lora.target_modules) == ["all-linear"] else list(lora.target_modules)
    config = LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=targets,
                        task_type="SEQ_2_SEQ_LM" if model.config.is_encoder_decoder else "CAUSAL_LM")
    torch.manual_seed(seed)
    with warnings.catch_warnings():  # GPT-2's Conv1D (peft sets fan_in_fan_out itself), transformers' deprecations
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", FutureWarning)
        return get_peft_model(model, config)


def trainable_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


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


def finetune(model, tokenizer, rows: list[dict], settings: FinetuneSettings, evaluate_at: set[int],
             on_checkpoint: Callable[[int, torch.nn.Module], None], progress: bool | None) -> dict:
    """Train `model` in place (with `settings.lora`: an adapter added to it); returns facts about the run
    (steps, seconds, samples per second). The weights' `requires_grad` are as they were afterwards."""
    if settings.keep_zeros and settings.lora is not None:
        raise ValueError("keep_zeros needs full fine-tuning: a LoRA adapter's update B·A is dense")
    flags = [(p, p.requires_grad) for p in model.parameters()]
    try:
        if settings.lora is not None:
            model = with_adapter(model, settings.lora, settings.seed)
        train = train_dp if settings.dp is not None else _train
        facts = train(model, tokenizer, rows, settings, evaluate_at, on_checkpoint, progress)
        if settings.lora is not None:
            facts["trainable_parameters"] = trainable_parameters(model)
        return facts
    finally:  # LoRA froze them, and they may be the loaded model's own (`shared_weights_copy`)
        for parameter, flag in flags:
            parameter.requires_grad_(flag)


@contextmanager
def objects_frozen() -> Iterator[None]:
    """The objects alive now left out of the garbage collector's passes until the block ends (`gc.freeze`): the
    Trainer starts every training with a full `gc.collect()` (accelerate's `free_memory`), whose time grows with
    every object the process holds, none of them the training's garbage (in the test process 20 s of 340 s, at
    up to a second a training). Objects made meanwhile are collected as usual; nothing is computed otherwise."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _train(model, tokenizer, rows: list[dict], settings: FinetuneSettings, evaluate_at: set[int],
           on_checkpoint: Callable[[int, torch.nn.Module], None], progress: bool | None) -> dict:
    # Imported here: the Trainer and its callbacks take 1.5 s to import (they import peft), and only the tasks
    # that train need them; every membench process imports this module (the task registry).
    from transformers import DataCollatorForSeq2Seq, Trainer, TrainingArguments
    from transformers.trainer_callback import PrinterCallback

    from harness.model.prune import ZeroMasks, parameter_sparsity
    from harness.training.callbacks import AtEpochs, KeepZeros, Progress

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
        masks = ZeroMasks(model) if settings.keep_zeros else None
        # KeepZeros first: the zeros are back before an epoch's evaluation reads the model
        callbacks = [KeepZeros(masks)] if masks else []
        trainer = Trainer(model=model, args=arguments, train_dataset=_Examples(rows), data_collator=collator,
                          callbacks=[*callbacks, steps := Progress(progress), AtEpochs(evaluate_at, on_checkpoint, steps)])
        trainer.remove_callback(PrinterCallback)
        started = time.perf_counter()
        with objects_frozen():
            output = trainer.train()
        seconds = time.perf_counter() - started
    model.eval()
    facts = {"steps": output.global_step, "train_seconds_with_evaluation": round(seconds, 1),
             "train_samples_per_second": output.metrics.get("train_samples_per_second"),
             "train_loss": round(output.training_loss, 5), "rows_per_epoch": len(rows)}
    if masks is not None:
        facts["kept_zero_weights"] = masks.zeros
        facts["parameter_sparsity_after"] = parameter_sparsity(model)
    return facts
