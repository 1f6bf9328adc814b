"""Batched scoring primitives. Each returns plain numpy arrays, one per input text.

`causal_token_logprobs`: per-token log-probabilities log p(x_t | x_<t) of texts under a causal LM.
- A BOS token is prepended when the tokenizer defines one, so the first text token is scored too;
  without one the first token has no context and is not scored. Both are recorded (`ScoringInfo`).
- Sequences longer than the context window C are scored with a sliding window of stride S: window k
  covers tokens [kS, kS + C) and scores the tokens the previous window did not reach, so every
  token is scored once, with at least C - S tokens of context once past the first window.
- Rows are sorted by length and right-padded; padded positions are masked, and position ids start
  at 0 in every row, so a text's scores do not depend on its batch.
- Every distinct token sequence is scored once, and a sequence that is a prefix of another is read
  off the longer one: token t's window and context depend only on t, so the values are the same.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from tqdm.auto import tqdm


@dataclass
class TokenScores:
    """Scores of one text's scored tokens, all arrays of the same length."""

    token_ids: np.ndarray
    logprobs: np.ndarray
    # Min-K%++ statistics of the next-token distribution p(. | x_<t): E[log p(z)] and its std.
    dist_mean: np.ndarray | None = None
    dist_std: np.ndarray | None = None


@dataclass
class ScoringInfo:
    """How texts were scored; recorded in the results file."""

    bos_token_id: int | None
    first_token_scored: bool
    context_length: int
    stride: int
    n_texts: int
    n_distinct_sequences: int
    n_scored_sequences: int
    n_windows: int

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class _Row:
    ids: list[int]
    first_target: int  # index in `ids` of the first token this row scores
    sequence: int      # which scored sequence the row belongs to
    offset: int        # index in that sequence's score array of the row's first target


def encode_with_bos(tokenizer, texts: list[str]) -> tuple[list[list[int]], int | None]:
    """Token ids of each text (no special tokens), with the tokenizer's BOS prepended if it has one."""
    bos = tokenizer.bos_token_id
    encoded = tokenizer(list(texts), add_special_tokens=False)["input_ids"] if texts else []
    prefix = [bos] if bos is not None else []
    return [prefix + list(ids) for ids in encoded], bos


def prefix_roots(sequences: list[tuple[int, ...]]) -> dict[tuple[int, ...], tuple[int, ...]]:
    """Map each distinct sequence to a sequence that starts with it and is not a prefix of any other.

    In lexicographic order, a sequence that is a prefix of any other is a prefix of its successor.
    """
    ordered = sorted(set(sequences))
    root: dict[tuple[int, ...], tuple[int, ...]] = {}
    for i in range(len(ordered) - 1, -1, -1):
        current = ordered[i]
        if i + 1 < len(ordered) and ordered[i + 1][: len(current)] == current:
            root[current] = root[ordered[i + 1]]
        else:
            root[current] = current
    return root


def sliding_windows(ids: list[int], context: int, stride: int, sequence: int) -> list[_Row]:
    """Rows covering `ids` so each token from position 1 on is scored exactly once."""
    rows, scored_until, start = [], 1, 0
    while scored_until < len(ids):
        end = min(start + context, len(ids))
        rows.append(_Row(ids[start:end], scored_until - start, sequence, scored_until - 1))
        scored_until = end
        start += stride
    return rows


def causal_token_logprobs(model, tokenizer, texts: list[str], batch_size: int = 16,
                          max_length: int | None = None, stride: int | None = None,
                          distribution_stats: bool = False, progress: bool | None = None,
                          ) -> tuple[list[TokenScores], ScoringInfo]:
    """Per-token log-probs (and optionally next-token distribution mean/std) of each text."""
    encoded, bos = encode_with_bos(tokenizer, texts)
    context = max_length or _model_context(model)
    if context < 2:
        raise ValueError(f"context length must be at least 2, got {context}")
    stride = min(stride or context // 2, context - 1)  # a window must keep >= 1 token of context
    keys = [tuple(ids) for ids in encoded]
    roots = prefix_roots(keys)
    scored = sorted(set(roots.values()))
    index = {sequence: i for i, sequence in enumerate(scored)}
    rows = [row for i, sequence in enumerate(scored) for row in sliding_windows(list(sequence), context, stride, i)]
    results = _score_rows(model, tokenizer, rows, [max(0, len(s) - 1) for s in scored], batch_size,
                          distribution_stats, progress)
    outputs = []
    for ids, key in zip(encoded, keys):
        n = max(0, len(ids) - 1)
        arrays = [a[:n] if a is not None else None for a in results[index[roots[key]]]]
        outputs.append(TokenScores(np.asarray(ids[1:], dtype=np.int64), *arrays))
    info = ScoringInfo(bos, bos is not None, context, stride, len(texts), len(roots), len(scored), len(rows))
    return outputs, info


def _model_context(model) -> int:
    from harness.models import context_length

    return context_length(model.config) or 2048


@torch.no_grad()
def _score_rows(model, tokenizer, rows: list[_Row], lengths: list[int], batch_size: int,
                distribution_stats: bool, progress: bool | None):
    """Run the rows in length-sorted, right-padded batches and scatter the scores back."""
    device = next(model.parameters()).device
    logprobs = [np.zeros(n, dtype=np.float32) for n in lengths]
    means = [np.zeros(n, dtype=np.float32) for n in lengths] if distribution_stats else None
    stds = [np.zeros(n, dtype=np.float32) for n in lengths] if distribution_stats else None
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i].ids))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    for batch in tqdm(batches, desc="scoring", unit="batch", disable=None if progress is None else not progress, leave=False):
        width = len(rows[batch[0]].ids)
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for j, i in enumerate(batch):
            ids = rows[i].ids
            input_ids[j, : len(ids)] = torch.tensor(ids)
            attention[j, : len(ids)] = 1
        logits = model(input_ids=input_ids.to(device), attention_mask=attention.to(device)).logits
        for j, i in enumerate(batch):
            row = rows[i]
            # logits at position p predict token p + 1
            row_logits = logits[j, row.first_target - 1: len(row.ids) - 1].float()
            log_dist = torch.log_softmax(row_logits, dim=-1)
            targets = torch.tensor(row.ids[row.first_target:], device=log_dist.device)
            span = slice(row.offset, row.offset + len(targets))
            logprobs[row.sequence][span] = log_dist.gather(1, targets[:, None])[:, 0].cpu().numpy()
            if distribution_stats:
                probs = log_dist.exp()
                mean = (probs * log_dist).sum(-1)
                var = (probs * (log_dist - mean[:, None]).square()).sum(-1)  # centred: no cancellation
                means[row.sequence][span] = mean.cpu().numpy()
                stds[row.sequence][span] = var.sqrt().cpu().numpy()
    return [(logprobs[i], means[i] if means else None, stds[i] if stds else None) for i in range(len(lengths))]
