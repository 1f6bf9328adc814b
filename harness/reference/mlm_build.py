"""The reference masked LM: a small BERT pre-trained on CPU on public English text, the model the
bias tasks (WEAT, StereoSet) score.

A cased WordPiece tokenizer is built by counting (`wordpiece.train_wordpiece_tokenizer`) from the first
`max_words_per_document` words of every document of the English reference corpus (members and
non-members alike: this is public pre-training data, not any task's members). Each document's
tokens are cut into pieces that fit the context, each framed `[CLS] ... [SEP]`. A `BertForMaskedLM`
is trained on them with BERT's dynamic masking (every draw masked afresh, seeded): each real token
is chosen with probability `mask_probability`; a chosen token becomes `[MASK]` 80% of the time, a
random word token 10%, and stays itself 10%; the loss is the cross-entropy of the chosen tokens.
Checkpoints: before training (epoch 0, the negative control) and after each epoch in `epochs`.
The manifest records each checkpoint's masked-token loss and accuracy on unseen text: the words
that follow the trained part of the first `heldout_documents` long-enough documents.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerFast

from harness.core.io import canonical_json, sha256_text
from harness.reference.build import Recipe, is_built, publish, save_checkpoint, staging_folder
from harness.reference.corpus import CORPORA, corpus_record, document_prefixes, source_documents
from harness.reference.train import IGNORED, flushing_denormals, seed_everything, train_epochs
from harness.reference.wordpiece import SPECIAL_TOKENS, train_wordpiece_tokenizer
from harness.run.reproducible import with_reference_threads
from harness.scoring.batching import right_pad
from harness.scoring.text import word_end_offsets

# The model classes are imported where a model is made (and for annotations only by type checkers): importing
# transformers' modelling code costs 3 s a process on 2 cores, and the tokenizer and data code here needs none.
if TYPE_CHECKING:
    from transformers import BertForMaskedLM

CORPUS = "xsum"
FIRST_WORD_ID = len(SPECIAL_TOKENS)  # `train_wordpiece_tokenizer` puts the special tokens first
MASK_SEED_OFFSET = 1  # the masking generator's seed is config.seed + this; the held-out one + 2
EVAL_BATCH = 64  # held-out rows masked and scored per batch (the masks depend on it)


@dataclass(frozen=True)
class MlmBuildConfig(Recipe):
    """Everything that decides the reference masked LM weights (and its held-out scores); recorded in
    the manifest."""

    seed: int = 0
    vocab_size: int = 4000
    hidden_size: int = 128
    n_layer: int = 2
    n_head: int = 4
    intermediate_size: int = 256
    max_positions: int = 128
    dropout: float = 0.0
    max_words_per_document: int = 128
    mask_probability: float = 0.15
    replace_with_mask: float = 0.8  # of the chosen tokens; half the rest random, half unchanged (BERT)
    batch_size: int = 32
    learning_rate: float = 2e-3
    epochs: tuple[int, ...] = (0, 5)  # checkpoints to save; 0 = before training
    heldout_documents: int = 100
    heldout_words: int = 64

    name = "mlm-bert"
    # The tasks these checkpoints are controls for: the ones `membench run` evaluates on them.
    TASKS = ("weat", "stereoset")

    def task_settings(self) -> dict[str, str]:
        """The tasks' defaults suit this model: nothing to override."""
        return {}


def _word_spans(text: str, first: int, last: int) -> str | None:
    """Words `first` + 1 ... `last` of `text` (first >= 1; its own spacing kept, stripped); None when
    it has fewer words."""
    ends = word_end_offsets(text, CORPORA[CORPUS].language)
    if len(ends) < last:
        return None
    return text[ends[first - 1]:ends[last - 1]].strip()


def pretraining_texts(config: MlmBuildConfig) -> list[str]:
    """The first `max_words_per_document` words of every reference document (members and non-members)."""
    return document_prefixes(config.max_words_per_document, CORPUS)


def heldout_texts(config: MlmBuildConfig) -> list[str]:
    """Unseen text of the same kind: the `heldout_words` words that follow the trained part of each of
    the first `heldout_documents` documents (in file order) long enough to have them."""
    n, texts = config.max_words_per_document, []
    for document in source_documents(CORPUS):
        text = _word_spans(document, n, n + config.heldout_words)
        if text is not None:
            texts.append(text)
        if len(texts) == config.heldout_documents:
            break
    return texts


def encode_blocks(tokenizer: PreTrainedTokenizerFast, texts: list[str], max_positions: int) -> list[list[int]]:
    """Each text's tokens cut into consecutive pieces of at most `max_positions` - 2 tokens, each
    framed `[CLS] piece [SEP]`; in text order."""
    width = max_positions - 2
    rows = []
    for ids in tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]:
        for start in range(0, len(ids), width):
            rows.append([tokenizer.cls_token_id, *ids[start:start + width], tokenizer.sep_token_id])
    return rows


def mask_tokens(input_ids: torch.Tensor, mask_id: int, vocab_size: int, generator: torch.Generator,
                probability: float = 0.15, replace_with_mask: float = 0.8) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking of a batch: (corrupted input ids, labels).

    Each token that is not special (id >= `FIRST_WORD_ID`: never [PAD], [CLS], [SEP]) is chosen
    with `probability`; a chosen token becomes `mask_id` with probability `replace_with_mask`, a
    uniformly random word token (id in [FIRST_WORD_ID, vocab_size)) with half the rest, and stays
    itself otherwise. Labels are the original ids where chosen, `IGNORED` elsewhere. Draws the same
    three random tensors whatever the ids, so the draws depend only on the generator and the shape.
    """
    chosen = (torch.rand(input_ids.shape, generator=generator) < probability) & (input_ids >= FIRST_WORD_ID)
    action = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(FIRST_WORD_ID, vocab_size, input_ids.shape, generator=generator)
    labels = torch.where(chosen, input_ids, IGNORED)
    corrupted = torch.where(chosen & (action < replace_with_mask), mask_id, input_ids)
    randomized = chosen & (action >= replace_with_mask) & (action < (1 + replace_with_mask) / 2)
    return torch.where(randomized, random_ids, corrupted), labels


def masked_logits(model: BertForMaskedLM, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                  labels: torch.Tensor) -> torch.Tensor:
    """The MLM head's logits at the labelled positions only (in row-major order): the same numbers
    as `model(...).logits[labels != IGNORED]`, without the vocabulary projection of every token."""
    hidden = model.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return model.cls(hidden[labels != IGNORED])


def untrained_model(vocab_size: int, config: MlmBuildConfig) -> BertForMaskedLM:
    """A BERT masked LM with random weights (seeded), sized by `config`."""
    from transformers import BertConfig, BertForMaskedLM

    seed_everything(config.seed)
    return BertForMaskedLM(BertConfig(
        vocab_size=vocab_size, hidden_size=config.hidden_size, num_hidden_layers=config.n_layer,
        num_attention_heads=config.n_head, intermediate_size=config.intermediate_size,
        max_position_embeddings=config.max_positions, hidden_dropout_prob=config.dropout,
        attention_probs_dropout_prob=config.dropout, pad_token_id=0))


def padded_batch(rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows right-padded with [PAD] (id 0) and their attention mask."""
    return right_pad(rows, SPECIAL_TOKENS.index("[PAD]"))


def train(model: BertForMaskedLM, rows: list[list[int]], tokenizer: PreTrainedTokenizerFast,
          config: MlmBuildConfig, on_epoch_end) -> list[float]:
    """Masked-LM training over seeded shuffles of the blocks (`train.train_epochs`), each batch
    masked afresh by a generator seeded with `config.seed + MASK_SEED_OFFSET`, subnormals flushed to
    zero; returns the loss of every step."""
    generator = torch.Generator().manual_seed(config.seed + MASK_SEED_OFFSET)
    losses: list[float] = []

    def batch_loss(indices: torch.Tensor) -> torch.Tensor:
        input_ids, attention_mask = padded_batch([rows[i] for i in indices.tolist()])
        inputs, labels = mask_tokens(input_ids, tokenizer.mask_token_id, len(tokenizer), generator,
                                     config.mask_probability, config.replace_with_mask)
        loss = F.cross_entropy(masked_logits(model, inputs, attention_mask, labels), labels[labels != IGNORED])
        losses.append(loss.item())
        return loss

    with flushing_denormals():
        train_epochs(model, len(rows), batch_loss, config.seed, config.learning_rate, config.batch_size,
                     max(config.epochs), "training reference masked LM", on_epoch_end)
    return losses


@torch.no_grad()
def heldout_scores(model: BertForMaskedLM, rows: list[list[int]], tokenizer: PreTrainedTokenizerFast,
                   config: MlmBuildConfig) -> dict[str, float]:
    """Mean masked-token loss (nats) and top-1 accuracy on `rows`, masked as in training in batches of
    `EVAL_BATCH` rows by a generator seeded with `config.seed + MASK_SEED_OFFSET + 1` (the same masks
    for every checkpoint)."""
    generator = torch.Generator().manual_seed(config.seed + MASK_SEED_OFFSET + 1)
    was_training = model.training
    model.eval()
    total, correct, count = 0.0, 0, 0
    for start in range(0, len(rows), EVAL_BATCH):
        input_ids, attention_mask = padded_batch(rows[start:start + EVAL_BATCH])
        inputs, labels = mask_tokens(input_ids, tokenizer.mask_token_id, len(tokenizer), generator,
                                     config.mask_probability, config.replace_with_mask)
        logits = masked_logits(model, inputs, attention_mask, labels)
        targets = labels[labels != IGNORED]
        total += F.cross_entropy(logits, targets, reduction="sum").item()
        correct += int((logits.argmax(-1) == targets).sum())
        count += len(targets)
    model.train(was_training)
    return {"masked_token_loss": round(total / count, 5), "masked_token_accuracy": round(correct / count, 5),
            "n_masked_tokens": count}


@with_reference_threads
def build_mlm(config: MlmBuildConfig = MlmBuildConfig(), folder: Path | None = None, force: bool = False) -> Path:
    """Build the reference masked LM checkpoints into `folder` (default: the cache); returns the folder."""
    folder = Path(folder) if folder else config.default_folder()
    texts, heldout = pretraining_texts(config), heldout_texts(config)
    data_sha = sha256_text(canonical_json({"texts": texts, "heldout": heldout, "config": config.as_dict()}))
    if is_built(folder, data_sha) and not force:
        return folder
    started = time.perf_counter()
    tokenizer = train_wordpiece_tokenizer(texts, config.vocab_size)
    rows = encode_blocks(tokenizer, texts, config.max_positions)
    heldout_rows = encode_blocks(tokenizer, heldout, config.max_positions)
    model = untrained_model(len(tokenizer), config)
    staging = staging_folder(folder)
    checkpoints, losses = [], {}

    def on_epoch_end(epoch: int, loss: float) -> None:
        losses[epoch] = round(loss, 5)
        if epoch in config.epochs:
            record = save_checkpoint(model, tokenizer, staging / f"{config.name}-e{epoch:02d}", epoch, epoch)
            checkpoints.append({**record, "heldout": heldout_scores(model, heldout_rows, tokenizer, config)})

    if 0 in config.epochs:
        on_epoch_end(0, float("nan"))
        losses.pop(0)
    step_losses = train(model, rows, tokenizer, config, on_epoch_end)
    manifest = {
        "description": "membench reference masked LM: a small BERT pre-trained with masked language modelling "
                       f"on public English text (every article of the {CORPUS} reference corpus's source, members, non-members and the rest alike)",
        "config": config.as_dict(),
        "corpus": corpus_record(CORPUS, data_sha, len(texts), whole_source=True),
        "tasks": list(config.TASKS),
        "task_settings": config.task_settings(),
        "training_text": f"each document cut to its first {config.max_words_per_document} words, tokenized, cut "
                         f"into pieces of at most {config.max_positions - 2} tokens, each framed [CLS] ... [SEP]; "
                         f"every draw masked afresh (probability {config.mask_probability}; of the chosen "
                         f"tokens {config.replace_with_mask:.0%} [MASK], the rest half random word tokens, "
                         "half unchanged)",
        "heldout_text": f"the {config.heldout_words} words after the trained part of the first {len(heldout)} "
                        "documents long enough to have them, framed and masked the same way (one fixed draw)",
        "n_training_blocks": len(rows),
        "n_training_tokens": sum(len(ids) for ids in rows),
        "pretrain_first_step_loss": round(step_losses[0], 5),
        "epoch_mean_loss": losses,
        "checkpoints": checkpoints,
        "build_seconds": round(time.perf_counter() - started, 1),
    }
    return publish(staging, folder, manifest, force)
