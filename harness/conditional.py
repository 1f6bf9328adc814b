"""Targets given sources: log-probabilities of target texts, and greedy targets, for seq2seq and causal LMs.

- seq2seq: the source is the encoder input (the tokenizer's special tokens added, e.g. T5's
  `</s>`), the target the decoder labels (also with `</s>`); log p(y_t | x, y_<t) for every
  target token, the closing `</s>` included.
- causal: the sequence is [BOS] + source tokens + target tokens (BOS when the tokenizer has one);
  log p(y_t | [BOS] x y_<t) for every target token. Source and target are tokenized apart, so
  the target's tokens are the same whatever the source.
Sources and targets are cut to `max_source` / `max_target` tokens (counted with special tokens).
Rows are sorted by length and right-padded with the padding masked.
"""

from __future__ import annotations

import numpy as np
import torch

from harness.distributed import run_batches
from harness.scoring import encode_with_bos, right_pad
from harness.spans import length_batches


def _encode(tokenizer, texts: list[str], limit: int | None, special: bool) -> list[list[int]]:
    ids = tokenizer(list(texts), add_special_tokens=special)["input_ids"] if texts else []
    return [list(x[:limit]) if limit else list(x) for x in ids]


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
                    progress: bool | None = None, add_start: bool = True) -> list[np.ndarray]:
    """log p(y_t | source, y_<t) for every target token, one array per (source, target); a causal
    source must have at least one token (`add_start=False`: without the BOS)."""
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
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
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        picked = []
        for j, i in enumerate(batch):
            positions = torch.arange(starts[j], starts[j] + len(target_ids[i]), device=device)
            picked.append(logprobs[j, positions, labels[j, positions.cpu()].to(device)].cpu().numpy())
        return picked

    done = run_batches(length_batches(lengths, batch_size), score_batch, "scoring targets", progress)
    return [done[i] for i in range(len(sources))]


@torch.no_grad()
def greedy_targets(model, tokenizer, sources: list[str], max_new_tokens: int, batch_size: int = 16,
                   max_source: int | None = None, progress: bool | None = None) -> list[list[int]]:
    """Greedy decoder outputs of a seq2seq model (token ids; the decoder start, padding and the
    first `</s>` and what follows it dropped), up to `max_new_tokens` each."""
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
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
