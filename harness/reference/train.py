"""Training code the reference builds share: the byte-level BPE tokenizer and small GPT-2 of the causal
builds, seeding, epochs over length-sorted batches, the label of unpredicted tokens and flushing of
subnormal floats; all on CPU, deterministically."""

from __future__ import annotations

import logging
import random
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np
import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import PreTrainedTokenizerFast

from harness.core.progress import progress_bar
from harness.scoring.batching import right_pad

# The model classes are imported where a model is made (and for annotations only by type checkers): importing
# transformers' modelling code costs 3 s a process on 2 cores, and the tokenizer and data code here needs none.
if TYPE_CHECKING:
    from transformers import GPT2LMHeadModel

log = logging.getLogger(__name__)

DOC_SEPARATOR = "<|endoftext|>"
IGNORED = -100  # label of a token that is not predicted (padding; in the MLM, unmasked tokens): no loss


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides the trained weights; recorded in the manifest."""

    seed: int = 0  # the member split's draw and the batches' order
    # the draw of the untrained weights, which the trained checkpoints start from. 1 since issue 77: with the
    # tokenizer fitted outside the split, draw 0 (the one before) read up to +4.25 null sds at 64 words on the
    # English split and dataset inference rejected at 32, 64 and 128 words, a tail draw (draws 1 to 6 of the
    # same model: within 2.8; docs/reference-checkpoints.md), so the untrained checkpoint would have failed
    # its null band; draw 1 is the next one, not the best of those looked at
    init_seed: int = 1
    vocab_size: int = 2048
    context: int = 512
    n_embd: int = 128
    n_layer: int = 2
    n_head: int = 4
    batch_size: int = 8
    learning_rate: float = 2e-3
    epochs: tuple[int, ...] = (0, 1, 30)  # checkpoints to save; 0 = before training
    max_words_per_document: int = 250
    length_grouped_batches: bool = True  # batches of documents of similar length (`length_batches`)

    def as_dict(self) -> dict:
        return asdict(self)


@contextmanager
def flushing_denormals() -> Iterator[None]:
    """Flush subnormal floats to zero meanwhile: AdamW's moments of rarely seen tokens decay into
    subnormals, which made the CPU steps twice as slow by the end of pre-training."""
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def train_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE (GPT-2 style) trained on `texts`; BOS = EOS = <|endoftext|>, no pad token."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=2,
                            special_tokens=[DOC_SEPARATOR], show_progress=False)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=DOC_SEPARATOR,
                                   eos_token=DOC_SEPARATOR, unk_token=DOC_SEPARATOR,
                                   model_max_length=10**9)


def untrained_model(tokenizer: PreTrainedTokenizerFast, config: TrainConfig) -> GPT2LMHeadModel:
    """A GPT-2 with random weights (drawn from `config.init_seed`), no dropout, sized by `config`."""
    from transformers import GPT2Config, GPT2LMHeadModel

    seed_everything(config.init_seed)
    separator = tokenizer.convert_tokens_to_ids(DOC_SEPARATOR)
    model_config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=config.context, n_embd=config.n_embd,
        n_layer=config.n_layer, n_head=config.n_head, bos_token_id=separator,
        eos_token_id=separator, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, loss_type="ForCausalLM",
    )
    return GPT2LMHeadModel(model_config)


def training_sequences(tokenizer: PreTrainedTokenizerFast, texts: list[str], context: int) -> list[list[int]]:
    """Each text as its own training sequence: <|endoftext|> followed by its tokens, cut to the
    first `context` tokens.

    A document starts at position 0 after <|endoftext|>, exactly as the tasks read it: mink scores
    [BOS] + a prefix of the text, paywall prompts with [BOS] + the public part. Concatenating the
    documents and cutting the stream into blocks (the usual pre-training recipe) would show each
    token at another position and after another context than the one it is scored or prompted in,
    and a model that has memorized its blocks (training loss 0.02) then reproduces little of an
    article from its start (measured: Japanese member continuations no better than non-members').
    """
    separator = tokenizer.convert_tokens_to_ids(DOC_SEPARATOR)
    return [[separator, *ids][:context] for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


def train_epochs(model, n_items: int, batch_loss: Callable[[torch.Tensor], torch.Tensor], seed: int,
                 learning_rate: float, batch_size: int, n_epochs: int, desc: str,
                 on_epoch_end: Callable[[int, float], None], lengths: list[int] | None = None) -> None:
    """AdamW (no weight decay) at a constant learning rate for `n_epochs` epochs over `n_items`
    training items; `batch_loss(indices)` is the mean loss of a batch of items. Calls
    `on_epoch_end(epoch, mean loss per item)` after every epoch; leaves the model in eval mode.

    Batches: each epoch a seeded shuffle of the items cut into batches of `batch_size`; or, given
    the items' `lengths`, fixed batches of items of similar length (`length_batches`) in a seeded
    order each epoch, so that little of a padded batch is padding."""
    seed_everything(seed)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)
    model.train()
    grouped = None if lengths is None else length_batches(lengths, batch_size)
    steps_per_epoch = -(-n_items // batch_size)
    progress = progress_bar(total=n_epochs * steps_per_epoch, step=desc, unit="step")
    for epoch in range(1, n_epochs + 1):
        if grouped is None:
            order = torch.randperm(n_items, generator=generator)
            batches = [order[start:start + batch_size] for start in range(0, n_items, batch_size)]
        else:
            batches = [grouped[k] for k in torch.randperm(len(grouped), generator=generator).tolist()]
        total = 0.0
        for indices in batches:
            loss = batch_loss(indices)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            total += loss.item() * len(indices)
            progress.update(1)
        mean_loss = total / n_items
        progress.set_postfix(epoch=epoch, loss=f"{mean_loss:.3f}")
        on_epoch_end(epoch, mean_loss)
    progress.close()
    model.eval()


def length_batches(lengths: list[int], batch_size: int) -> list[torch.Tensor]:
    """The items sorted by length (ties by index) and cut into consecutive batches of `batch_size`."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    return [torch.tensor(order[start:start + batch_size]) for start in range(0, len(order), batch_size)]


def padded_loss(model: GPT2LMHeadModel, sequences: list[list[int]]) -> torch.Tensor:
    """The mean next-token loss of a batch of sequences, right-padded to the longest: padding is
    neither attended to nor predicted, so this is the token-weighted mean of each sequence's own loss."""
    input_ids, attention_mask = right_pad(sequences, model.config.eos_token_id)
    labels = input_ids.masked_fill(attention_mask == 0, IGNORED)
    return model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss


def train(model: GPT2LMHeadModel, sequences: list[list[int]], config: TrainConfig,
          on_epoch_end: Callable[[int, float], None]) -> None:
    """Next-token training on the documents' `sequences` (`train_epochs`), by default in batches of
    documents of similar length (`length_batches`: in random batches of the English reference build
    22% of the padded tokens were padding, since its documents run from a few dozen tokens to the
    context), a batch's loss by `padded_loss`."""

    def batch_loss(indices: torch.Tensor) -> torch.Tensor:
        return padded_loss(model, [sequences[i] for i in indices.tolist()])

    train_epochs(model, len(sequences), batch_loss, config.seed, config.learning_rate, config.batch_size,
                 max(config.epochs), "training reference LM", on_epoch_end,
                 lengths=[len(ids) for ids in sequences] if config.length_grouped_batches else None)


def save_checkpoint(model: GPT2LMHeadModel, tokenizer: PreTrainedTokenizerFast, folder: Path) -> None:
    """safetensors weights + config + tokenizer files."""
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
