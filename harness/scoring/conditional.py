"""Targets given sources: log-probabilities of target texts, and greedy targets, for seq2seq and causal LMs.

- seq2seq: the source is the encoder input (the tokenizer's special tokens added, e.g. T5's
  `</s>`), the target the decoder labels (also with `</s>`); log p(y_t | x, y_<t) for every
  target token, the closing `</s>` included.
- causal: the sequence is [BOS] + source tokens + target tokens (BOS when the tokenizer has one);
  log p(y_t | [BOS] x y_<t) for every target token. Source and target are tokenized apart, so
  the target's tokens are the same whatever the source.
Sources and targets are cut to `max_source` / `max_target` tokens (counted with special tokens).
Rows are sorted by length and right-padded with the padding masked; a batch's float32 logits stay
within the device's logits budget (`causal.logits_budget_bytes`), and only the target positions are normalized
(`causal.position_scores`, in cache-sized chunks): at gemma-3's 262,144-token vocabulary, 16 rows
of 700 tokens would otherwise hold 11.7 GB of logits and as much again of log-softmax.
"""

from __future__ import annotations

import copy
import inspect
import logging
from typing import Callable

import numpy as np
import torch

from harness.scoring.batching import padding_id, right_pad
from harness.scoring.causal import (
    encode_with_bos,
    logits_budget_bytes,
    logits_bounded_batches,
    output_vocabulary,
    position_scores,
)
from harness.scoring.distributed import run_batches
from harness.scoring.spans import length_batches, longest_first

log = logging.getLogger(__name__)


def _encode(tokenizer, texts: list[str], limit: int | None, special: bool) -> list[list[int]]:
    ids = tokenizer(list(texts), add_special_tokens=special)["input_ids"] if texts else []
    return [list(x[:limit]) if limit else list(x) for x in ids]


# (logits: batch x positions x V, rows, positions, wanted token ids) -> one float64 score per (row, position)
PositionScorer = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], np.ndarray]


def encode_pairs(tokenizer, sources: list[str], targets: list[str], seq2seq: bool, max_source: int | None,
                 max_target: int | None, add_start: bool = True) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids of the sources and the targets, as the module docstring says, cut to the limits;
    `add_start=False`: a causal source without the BOS."""
    target_ids = _encode(tokenizer, targets, max_target, special=seq2seq)
    if seq2seq:
        return _encode(tokenizer, sources, max_source, special=True), target_ids
    encoded, _ = encode_with_bos(tokenizer, sources, add_start=add_start)
    return [ids[:max_source] if max_source else ids for ids in encoded], target_ids


@torch.no_grad()
def target_logprobs(model, tokenizer, sources: list[str], targets: list[str], seq2seq: bool, batch_size: int = 16,
                    max_source: int | None = None, max_target: int | None = None,
                    progress: bool | None = None, add_start: bool = True,
                    scorer: PositionScorer | None = None) -> list[np.ndarray]:
    """log p(y_t | source, y_<t) for every target token, one array per (source, target); a causal
    source must have at least one token (`add_start=False`: without the BOS). `scorer` replaces
    log p with another score of the same logits (`extraction.pair_extraction_logprobs`: log q under
    a sampling scheme)."""
    device = next(model.parameters()).device
    pad = padding_id(tokenizer)
    source_ids, target_ids = encode_pairs(tokenizer, sources, targets, seq2seq, max_source, max_target, add_start)
    lengths = [len(s) + len(t) for s, t in zip(source_ids, target_ids)]

    def score_batch(batch: list[int]) -> list[np.ndarray]:
        if seq2seq:
            inputs, mask = right_pad([source_ids[i] for i in batch], pad)
            labels, label_mask = right_pad([target_ids[i] for i in batch], pad)
            labels = labels.masked_fill(label_mask == 0, -100)
            logits = model(input_ids=inputs.to(device), attention_mask=mask.to(device), labels=labels.to(device)).logits
            starts = [0] * len(batch)
        else:
            inputs, mask = right_pad([source_ids[i] + target_ids[i] for i in batch], pad)
            # position p predicts token p + 1: the target's tokens are predicted from len(source) - 1 on
            logits = model(input_ids=inputs.to(device), attention_mask=mask.to(device)).logits[:, :-1]
            labels = inputs[:, 1:]
            starts = [len(source_ids[i]) - 1 for i in batch]
        return _row_logprobs(logits, labels, starts, [len(target_ids[i]) for i in batch], scorer)

    logit_rows = [len(t) if seq2seq else n for t, n in zip(target_ids, lengths)]
    batches = logits_bounded_batches(longest_first(lengths), logit_rows, batch_size, output_vocabulary(model), device)
    done = run_batches(batches, score_batch, "scoring targets", progress)
    return [done[i] for i in range(len(sources))]


def _row_logprobs(logits: torch.Tensor, labels: torch.Tensor, starts: list[int], counts: list[int],
                  scorer: PositionScorer | None = None) -> list[np.ndarray]:
    """For each row j of `logits` (batch, positions, V): log p(labels[j, p]) from logits[j, p] at
    p = starts[j] ... starts[j] + counts[j] - 1 (`causal.position_scores`: only those positions
    normalized, a few at a time), or `scorer`'s score there."""
    device = logits.device
    rows = np.repeat(np.arange(len(counts)), counts)
    positions = np.concatenate([np.arange(start, start + n) for start, n in zip(starts, counts)]).astype(np.int64)
    at_row, at_position = torch.from_numpy(rows), torch.from_numpy(positions)
    wanted = labels[at_row, at_position]
    if scorer is None:
        flat, _, _, _ = position_scores(logits, at_row.to(device), at_position.to(device), wanted.to(device),
                                        distribution_stats=False)
    else:
        flat = scorer(logits, at_row, at_position, wanted)
    return np.split(flat, np.cumsum(counts)[:-1])


def _cache_argument(model) -> str | None:
    """The name under which the model's forward takes a key/value cache (`cache` in transformers 5,
    `past_key_values` before), None when it takes none."""
    parameters = inspect.signature(model.forward).parameters
    return next((name for name in ("cache", "past_key_values") if name in parameters), None)


@torch.no_grad()
def shared_prefix_logprobs(model, prefix_ids: list[int], target_ids: list[list[int]], batch_size: int = 16,
                           pad: int = 0, progress: bool | None = None) -> list[np.ndarray] | None:
    """log p(y_t | prefix, y_<t) for every token of every target, all after the same causal `prefix_ids`
    (which must fit the context together with each target): the prefix runs through the model once
    and its key/value cache is reused by every batch of targets (copied and repeated per row),
    instead of running the prefix again for every target. Equal to `target_logprobs` with that prefix
    as every source, up to float rounding. None when the model has no reusable cache (the caller
    then runs the prefix with every target, `target_logprobs`)."""
    name = _cache_argument(model)
    device = next(model.parameters()).device
    if name is not None and prefix_ids:
        try:
            out = model(input_ids=torch.tensor([prefix_ids], device=device), use_cache=True)
            cache = getattr(out, "cache", None) or out.past_key_values
            first = torch.log_softmax(out.logits[0, -1].float(), dim=-1)  # predicts each target's first token
            if cache is not None and hasattr(cache, "batch_repeat_interleave"):
                return _with_cache(model, name, cache, first, len(prefix_ids), target_ids, batch_size, pad, progress)
        except (TypeError, ValueError, NotImplementedError, AttributeError) as err:
            log.warning("%s: no reusable key/value cache (%s); the prefix runs with every target",
                        type(model).__name__, str(err).splitlines()[0][:200])
    return None


def _cache_bytes(cache) -> int:
    """Bytes of a key/value cache's tensors (transformers' `Cache.layers`, each with keys and values); 0 when unknown."""
    tensors = [getattr(layer, part, None) for layer in getattr(cache, "layers", []) for part in ("keys", "values")]
    return sum(t.nbytes for t in tensors if isinstance(t, torch.Tensor))


def _with_cache(model, name, cache, first: torch.Tensor, n_prefix: int, target_ids: list[list[int]],
                batch_size: int, pad: int, progress: bool | None) -> list[np.ndarray]:
    """The targets after the prefix's `cache`, in length-sorted batches whose float32 logits and
    repeated caches each stay within the device's logits budget (`causal.logits_budget_bytes`)."""
    device = first.device
    scorable = [i for i, ids in enumerate(target_ids) if ids]

    def score_batch(batch: list[int]) -> list[np.ndarray]:
        rows = [target_ids[scorable[k]] for k in batch]
        inputs, mask = right_pad(rows, pad)
        repeated = copy.deepcopy(cache)
        repeated.batch_repeat_interleave(len(rows))
        full_mask = torch.cat([torch.ones(len(rows), n_prefix, dtype=mask.dtype), mask], dim=1)
        logits = model(input_ids=inputs.to(device), attention_mask=full_mask.to(device), use_cache=True,
                       **{name: repeated}).logits
        # position p of a row predicts its token p + 1; its first token comes from the prefix's last position
        later = _row_logprobs(logits, inputs[:, 1:], [0] * len(rows), [len(row) - 1 for row in rows])
        return [np.concatenate([first[row[0]].view(1).cpu().numpy(), rest]) for row, rest in zip(rows, later)]

    lengths = [len(target_ids[i]) for i in scorable]
    rows_by_cache = max(1, logits_budget_bytes(device) // max(1, _cache_bytes(cache)))
    batches = logits_bounded_batches(longest_first(lengths), lengths, min(batch_size, rows_by_cache),
                                     output_vocabulary(model), device)
    done = run_batches(batches, score_batch, "scoring after the prefix", progress)
    results = [np.zeros(0, dtype=np.float32) for _ in target_ids]
    for k, value in done.items():
        results[scorable[k]] = value
    return results


@torch.no_grad()
def greedy_targets(model, tokenizer, sources: list[str], max_new_tokens: int, batch_size: int = 16,
                   max_source: int | None = None, progress: bool | None = None) -> list[list[int]]:
    """Greedy decoder outputs of a seq2seq model (token ids; the decoder start, padding and the
    first `</s>` and what follows it dropped), up to `max_new_tokens` each."""
    device = next(model.parameters()).device
    pad = padding_id(tokenizer)
    eos = tokenizer.eos_token_id
    source_ids = _encode(tokenizer, sources, max_source, special=True)

    def generate_batch(batch: list[int]) -> list[list[int]]:
        inputs, mask = right_pad([source_ids[i] for i in batch], pad)
        generated = model.generate(input_ids=inputs.to(device), attention_mask=mask.to(device),
                                   max_new_tokens=max_new_tokens, do_sample=False, num_beams=1)
        outputs = []
        for j in range(len(batch)):
            ids = generated[j, 1:].tolist()  # drop the decoder start token
            if eos is not None and eos in ids:
                ids = ids[: ids.index(eos)]
            outputs.append([t for t in ids if t != pad])
        return outputs

    done = run_batches(length_batches([len(s) for s in source_ids], batch_size), generate_batch, "generating",
                       progress)
    return [done[i] for i in range(len(sources))]
