"""The reference T5-style seq2seq model: the "public" pre-trained model that `privacy_extraction`
fine-tunes (Yoon & Lee), and its pruned variant.

A BPE tokenizer in SentencePiece style (Metaspace pre-tokenizer, `</s>` appended to every sequence,
the 100 T5 sentinels `<extra_id_0>` ... `<extra_id_99>` as special tokens after the vocabulary) is
trained on the first `max_words_per_document` words of every document of the English reference
corpus (members and non-members alike: this is public pre-training data, not any task's members).
A small T5 is pre-trained on the same texts with T5's span corruption objective. Checkpoints: the
pre-trained model (`t5-ref`) and a sparse one (`t5-ref-sparse70`), made as Yoon & Lee made theirs: a
copy of `t5-ref` with `sparsity` of all its parameters pruned by global L1 magnitude (`membench
prune`'s default; Yoon & Lee kept about 30%), then pre-trained again, sparse (its zeros restored after
every step: `harness.model.prune.ZeroMasks`), for `sparse_pretrain_steps` more steps of the same
objective (Yoon & Lee pre-trained their pruned model again for 4 epochs; 125 steps of 32 documents
are 4 passes over these 1,000).
"""

from __future__ import annotations

import copy
import random
import string
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from harness.core.io import canonical_json, sha256_text
from harness.core.progress import progress_bar
from harness.model.prune import CONFIG_KEY, ZeroMasks, parameter_sparsity, prune_model
from harness.reference.build import Recipe, is_built, publish, save_checkpoint, staging_folder
from harness.reference.corpus import corpus_record, document_prefixes
from harness.reference.train import IGNORED, flushing_denormals, seed_everything
from harness.run.reproducible import with_reference_threads
from harness.scoring.batching import right_pad

# The model classes are imported where a model is made (and for annotations only by type checkers): importing
# transformers' modelling code costs 3 s a process on 2 cores, and the tokenizer and data code here needs none.
if TYPE_CHECKING:
    from transformers import T5ForConditionalGeneration

PAD, EOS, UNK = "<pad>", "</s>", "<unk>"
SENTINELS = [f"<extra_id_{i}>" for i in range(100)]
ALPHABET = ["▁", *string.ascii_letters, *string.digits]  # always in the vocabulary: no <unk> for them
CORPUS = "xsum"
NOISE_DENSITY = 0.15
MEAN_SPAN_LENGTH = 3.0
LOSS_POINTS = 5  # the manifest records the mean pre-training loss of this many windows of steps


@dataclass(frozen=True)
class T5BuildConfig(Recipe):
    """Everything that decides the reference T5 weights; recorded in the manifest."""

    seed: int = 0
    vocab_size: int = 2000
    d_model: int = 128
    d_ff: int = 256
    num_layers: int = 2
    num_heads: int = 4
    d_kv: int = 32
    dropout: float = 0.0
    pretrain_steps: int = 1000
    batch_size: int = 32
    learning_rate: float = 1e-3
    max_input_tokens: int = 64
    max_words_per_document: int = 64
    sparsity: float = 0.7
    sparsity_scope: str = "all"
    sparse_pretrain_steps: int = 125

    name = "t5-ref"
    # The tasks these checkpoints are controls for: the ones `membench run` evaluates on them.
    TASKS = ("privacy_extraction", "weat", "stereoset")

    def task_settings(self) -> dict[str, str]:
        """CPU-sized fine-tuning for `privacy_extraction` (recorded in every results file): a 10x
        larger learning rate than the seed's 1e-4, which barely moves a model this small in 8
        epochs, and source / target limits that fit this small vocabulary's longer tokenizations
        (the seed's 30 / 70 tokens cut most persons and long strings); 2 fine-tuning seeds, so the
        board shows each score's spread over seeds (3 until issue 18: the third took about a
        minute of the 15-minute `membench run` and serves no control)."""
        return {"learning_rate": "0.001", "max_source_tokens": "40", "max_target_tokens": "96", "finetune_seeds": "2"}

    @property
    def sparse_name(self) -> str:
        """The pruned checkpoint's folder name, e.g. t5-ref-sparse70."""
        return f"{self.name}-sparse{round(self.sparsity * 100)}"


def train_t5_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """A BPE tokenizer like T5's SentencePiece one: at most `vocab_size` tokens (`<pad>` 0, `</s>` 1,
    `<unk>` 2, every ASCII letter and digit, merges learned from `texts`), then the sentinels
    `<extra_id_0>` ... `<extra_id_99>` (the last 100 ids, in order) as special tokens;
    `</s>` is appended to every encoded sequence. The `tokenizers` BPE trainer breaks count ties by
    token ids, so the vocabulary is the same in every process.
    """
    bpe = Tokenizer(models.BPE(unk_token=UNK))
    bpe.pre_tokenizer = pre_tokenizers.Metaspace()
    bpe.decoder = decoders.Metaspace()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[PAD, EOS, UNK],
                                                       initial_alphabet=ALPHABET, show_progress=False))
    bpe.add_special_tokens(SENTINELS)
    bpe.post_processor = processors.TemplateProcessing(single=f"$A {EOS}", pair=f"$A {EOS} $B {EOS}",
                                                       special_tokens=[(EOS, bpe.token_to_id(EOS))])
    return PreTrainedTokenizerFast(tokenizer_object=bpe, pad_token=PAD, eos_token=EOS, unk_token=UNK,
                                   additional_special_tokens=SENTINELS, model_max_length=512)


def pretraining_texts(config: T5BuildConfig) -> list[str]:
    """The first `max_words_per_document` words of every reference document (members and non-members)."""
    return document_prefixes(config.max_words_per_document, CORPUS)


def pretraining_rows(tokenizer: PreTrainedTokenizerFast, texts: list[str], config: T5BuildConfig) -> list[list[int]]:
    """Each text's token ids (no `</s>`) cut to `max_input_tokens - 1`; texts of fewer than 2 tokens left out."""
    return [ids[:config.max_input_tokens - 1]
            for ids in tokenizer(texts, add_special_tokens=False)["input_ids"] if len(ids) >= 2]


def random_segmentation(n_items: int, n_segments: int, rng: random.Random) -> list[int]:
    """The lengths of `n_segments` non-empty consecutive parts of `n_items` items, cut at random."""
    cuts = sorted(rng.sample(range(1, n_items), n_segments - 1))
    bounds = [0, *cuts, n_items]
    return [end - start for start, end in zip(bounds, bounds[1:])]


def span_corruption(ids: list[int], sentinels: list[int], eos_id: int, rng: random.Random,
                    noise_density: float = NOISE_DENSITY,
                    mean_span_length: float = MEAN_SPAN_LENGTH) -> tuple[list[int], list[int]]:
    """T5's span corruption of `ids` (at least 2 tokens): (input ids, target ids).

    round(noise_density * n) tokens (at least 1, at most n - 1) in round(noise / mean_span_length)
    spans (at least 1, at most the number kept) are dropped; kept and dropped spans alternate, kept
    first and dropped last (as in T5), their lengths cut at random. The input is the kept tokens
    with the i-th dropped span replaced by `sentinels[i]`; the target is each sentinel followed by
    its dropped span; both end with `eos_id`.
    """
    n_noise = min(max(round(len(ids) * noise_density), 1), len(ids) - 1)
    n_spans = min(max(1, round(n_noise / mean_span_length)), len(ids) - n_noise)
    kept = random_segmentation(len(ids) - n_noise, n_spans, rng)
    dropped = random_segmentation(n_noise, n_spans, rng)
    inputs, targets, position = [], [], 0
    for sentinel, n_kept, n_dropped in zip(sentinels, kept, dropped):
        inputs += ids[position:position + n_kept] + [sentinel]
        targets += [sentinel] + ids[position + n_kept:position + n_kept + n_dropped]
        position += n_kept + n_dropped
    return inputs + [eos_id], targets + [eos_id]


def untrained_model(vocab_size: int, config: T5BuildConfig) -> T5ForConditionalGeneration:
    """A T5 with random weights (seeded), sized by `config`; decoding starts from `<pad>` (id 0)."""
    from transformers import T5Config, T5ForConditionalGeneration

    seed_everything(config.seed)
    return T5ForConditionalGeneration(T5Config(
        vocab_size=vocab_size, d_model=config.d_model, d_ff=config.d_ff, d_kv=config.d_kv,
        num_layers=config.num_layers, num_decoder_layers=config.num_layers, num_heads=config.num_heads,
        dropout_rate=config.dropout, feed_forward_proj="relu", pad_token_id=0, eos_token_id=1,
        decoder_start_token_id=0))


def document_order(n_documents: int, n_draws: int, generator: torch.Generator) -> list[int]:
    """`n_draws` document indices: seeded permutations of all documents, one after another."""
    order: list[int] = []
    while len(order) < n_draws:
        order += torch.randperm(n_documents, generator=generator).tolist()
    return order[:n_draws]


def pretrain(model: T5ForConditionalGeneration, rows: list[list[int]], tokenizer: PreTrainedTokenizerFast,
             config: T5BuildConfig, steps: int, seed: int, masks: ZeroMasks | None = None) -> list[float]:
    """AdamW at a constant learning rate for `steps` batches of freshly span-corrupted documents (in
    passes over `rows` seeded by `seed`), subnormals flushed to zero; with `masks`, its zeros restored
    after every step (sparse training). Returns the loss of every step."""
    seed_everything(seed)
    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    sentinels = tokenizer.convert_tokens_to_ids(SENTINELS)
    order = document_order(len(rows), steps * config.batch_size, generator)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=0.0)
    model.train()
    losses = []
    progress = progress_bar(total=steps, step="pre-training" if masks is None else "sparse pre-training", unit="step")
    with flushing_denormals():
        for start in range(0, len(order), config.batch_size):
            pairs = [span_corruption(rows[i], sentinels, tokenizer.eos_token_id, rng)
                     for i in order[start:start + config.batch_size]]
            input_ids, _ = right_pad([inputs for inputs, _ in pairs], tokenizer.pad_token_id)
            labels, _ = right_pad([targets for _, targets in pairs], IGNORED)
            loss = model(input_ids=input_ids, attention_mask=input_ids != tokenizer.pad_token_id,
                         labels=labels).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if masks is not None:
                masks.restore()
            losses.append(loss.item())
            progress.update(1)
            progress.set_postfix(loss=f"{loss.item():.3f}")
    progress.close()
    model.eval()
    return losses


def loss_points(losses: list[float]) -> dict[str, float]:
    """{"steps a-b": mean loss} over `LOSS_POINTS` near-equal windows of steps."""
    bounds = [round(k * len(losses) / LOSS_POINTS) for k in range(LOSS_POINTS + 1)]
    return {f"steps {start + 1}-{end}": round(sum(losses[start:end]) / (end - start), 5)
            for start, end in zip(bounds, bounds[1:]) if end > start}


def sparse_variant(model: T5ForConditionalGeneration, rows: list[list[int]], tokenizer: PreTrainedTokenizerFast,
                   config: T5BuildConfig) -> tuple[T5ForConditionalGeneration, dict, list[float]]:
    """A copy of the pre-trained `model` pruned (`sparsity` of the `sparsity_scope` parameters) and pre-trained
    again for `sparse_pretrain_steps` with its zeros kept (the next seed's document order); returns it, the
    pruning record (with the sparsity after the second pre-training) and the losses of its steps."""
    sparse_model = copy.deepcopy(model)
    record = prune_model(sparse_model, config.sparsity, config.sparsity_scope)
    losses = pretrain(sparse_model, rows, tokenizer, config, config.sparse_pretrain_steps, config.seed + 1,
                      ZeroMasks(sparse_model))
    record |= {"sparse_pretrain_steps": config.sparse_pretrain_steps,
               "parameter_sparsity_after_pretraining": parameter_sparsity(sparse_model)}
    return sparse_model, record, losses


@with_reference_threads
def build_t5(config: T5BuildConfig = T5BuildConfig(), folder: Path | None = None, force: bool = False) -> Path:
    """Build the reference T5 checkpoints into `folder` (default: the cache); returns the folder.

    In the checkpoint records, `epoch` counts pre-training steps (pre-training is by steps, not
    epochs) and `times_each_trained_document_seen` is 0: what a task fine-tunes on is never in this
    public pre-training data; how often the pre-training texts were seen is `corpus_passes`.
    """
    folder = Path(folder) if folder else config.default_folder()
    texts = pretraining_texts(config)
    data_sha = sha256_text(canonical_json({"texts": texts, "config": config.as_dict()}))
    if is_built(folder, data_sha) and not force:
        return folder
    started = time.perf_counter()
    tokenizer = train_t5_tokenizer(texts, config.vocab_size)
    rows = pretraining_rows(tokenizer, texts, config)
    model = untrained_model(len(tokenizer), config)
    losses = pretrain(model, rows, tokenizer, config, config.pretrain_steps, config.seed)
    staging = staging_folder(folder)
    dense = save_checkpoint(model, tokenizer, staging / config.name, config.pretrain_steps, 0)
    sparse_model, record, sparse_losses = sparse_variant(model, rows, tokenizer, config)
    record["pruned_from"] = {"model": config.name, "weights_sha256": dense["weights_sha256"]}
    setattr(sparse_model.config, CONFIG_KEY, record)
    sparse = save_checkpoint(sparse_model, tokenizer, staging / config.sparse_name,
                             config.pretrain_steps + config.sparse_pretrain_steps, 0)
    manifest = {
        "description": "membench reference T5: a small T5 pre-trained with span corruption on public "
                       f"English text (every article of the {CORPUS} reference corpus's source, members, non-members and the rest alike), "
                       f"and a sparse copy: {config.sparsity:.0%} of its parameters pruned, then pre-trained "
                       f"again, sparse, for {config.sparse_pretrain_steps} steps",
        "config": config.as_dict(),
        "corpus": corpus_record(CORPUS, data_sha, len(texts), whole_source=True),
        "tasks": list(config.TASKS),
        "task_settings": config.task_settings(),
        "training_text": f"each document cut to its first {config.max_words_per_document} words, tokenized, "
                         f"cut to {config.max_input_tokens - 1} tokens; every draw span-corrupted afresh "
                         f"(noise density {NOISE_DENSITY}, mean span length {MEAN_SPAN_LENGTH}); the input "
                         "and the target each end with </s>",
        "n_training_tokens": sum(len(ids) for ids in rows),
        "corpus_passes": round(config.pretrain_steps * config.batch_size / len(rows), 3),
        "pretrain_first_step_loss": round(losses[0], 5),
        "pretrain_mean_loss": loss_points(losses),
        "sparse_pretrain_mean_loss": loss_points(sparse_losses),
        "checkpoints": [dense, {**sparse, "pruning": record}],
        "build_seconds": round(time.perf_counter() - started, 1),
    }
    return publish(staging, folder, manifest, force)
