"""Batched scoring primitives. Each returns plain numpy arrays, one per input text.

`next_token_logprobs`: log p(. | context) over the vocabulary after one token sequence.
`causal_token_logprobs`: per-token log-probabilities log p(x_t | x_<t) of texts under a causal LM.
- A BOS token is prepended when the tokenizer defines one (`causal_start_token`: the same rule as
  for hidden states), so the first text token is scored too;
  without one (or with `add_start=False`: MIMIR's and the Min-K% / Min-K%++ code's convention on
  GPT-2-style tokenizers) the first token has no context and is not scored. Both
  are recorded (`ScoringInfo`).
- Sequences longer than the context window C are scored with a sliding window of stride S: window k
  covers tokens [kS, kS + C) and scores the tokens the previous window did not reach, so every
  token is scored once, with at least C - S tokens of context once past the first window.
- Rows are sorted by length and right-padded; padded positions are masked, and position ids start
  at 0 in every row, so a text's scores do not depend on its batch.
- Every distinct token sequence is scored once, and a sequence that is a prefix of another is read
  off the longer one: token t's window and context depend only on t, so the values are the same.
- A served model (`harness.model.served.CompletionsClient` in the model's place): the same windows,
  each sent as one prompt of token ids and echoed with its log-probs (`_served_rows`), in a context of
  the server's (`CompletionsClient.context_length`); Min-K%++'s statistics, which need the whole
  next-token distribution, are refused.
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass

import numpy as np
import torch

from harness.core.errors import UserError
from harness.model.served import CompletionsClient
from harness.scoring import budgets
from harness.scoring.batching import model_context, padding_id, right_pad
from harness.scoring.distributed import run_batches
from harness.scoring.spans import bounded_batches


@dataclass
class TokenScores:
    """Scores of one text's scored tokens, all arrays of the same length."""

    token_ids: np.ndarray
    logprobs: np.ndarray
    # Min-K%++ statistics of the next-token distribution p(. | x_<t): E[log p(z)] and its std.
    dist_mean: np.ndarray | None = None
    dist_std: np.ndarray | None = None
    # log p of the most likely next token, max_z log p(z | x_<t): the text's token is the model's
    # argmax (greedy) prediction where `logprobs >= top_logprobs` (`argmax_hits`)
    top_logprobs: np.ndarray | None = None

    def argmax_hits(self) -> np.ndarray:
        """Per scored token, whether it is the model's most likely next token (ties count as hits)."""
        if self.top_logprobs is None:
            raise ValueError("scored without top_logprobs: pass top_logprobs=True to causal_token_logprobs")
        return self.logprobs >= self.top_logprobs


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
    ids: np.ndarray
    first_target: int  # index in `ids` of the first token this row scores
    sequence: int      # which scored sequence the row belongs to
    offset: int        # index in that sequence's score array of the row's first target


def causal_start_token(tokenizer) -> int | None:
    """The token a causal LM sees before every text membench runs through it: the tokenizer's BOS
    when it defines one (GPT-2's <|endoftext|>, Llama's <s>, Gemma's <bos>), whether or not the
    tokenizer adds it itself; None when it defines none (then a text starts with its own first
    token). The one rule for scoring (`causal_token_logprobs`), generation and hidden states
    (`harness.scoring.representations`): a text is always [BOS] + its tokens without special tokens."""
    return tokenizer.bos_token_id


def token_text(tokenizer, token_id: int | None) -> str | None:
    """The vocabulary entry of `token_id` (per-sample logs show which start token a text had), or None."""
    return None if token_id is None else tokenizer.convert_ids_to_tokens(int(token_id))


def encode_with_bos(tokenizer, texts: list[str], start_token: int | None = None,
                    add_start: bool = True) -> tuple[list[list[int]], int | None]:
    """Token ids of each text (no special tokens), with `start_token` (default:
    `causal_start_token`) prepended unless `add_start` is False."""
    bos = (causal_start_token(tokenizer) if start_token is None else start_token) if add_start else None
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


def sliding_windows(ids: np.ndarray, context: int, stride: int, sequence: int) -> list[_Row]:
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
                          start_token: int | None = None, add_start: bool = True, top_logprobs: bool = False
                          ) -> tuple[list[TokenScores], ScoringInfo]:
    """Per-token log-probs (and optionally next-token distribution mean/std, and with `top_logprobs` the
    log-prob of the most likely next token) of each text;
    `start_token` replaces the tokenizer's BOS as the token the first text token is conditioned on;
    `add_start=False` scores the bare texts (tokens 2.. given the text's own earlier tokens only)."""
    if isinstance(model, CompletionsClient):
        if distribution_stats:
            raise UserError("Min-K%++'s next-token distribution statistics need the whole vocabulary's "
                            "log-probs, which a completions server does not return: score in-process")
        return windowed_token_scores(tokenizer, texts, max_length or model.context_length(), stride, start_token,
                                     add_start, lambda rows, lengths: _served_rows(model, rows, lengths, top_logprobs))
    return windowed_token_scores(
        tokenizer, texts, max_length or model_context(model), stride, start_token, add_start,
        lambda rows, lengths: _score_rows(model, tokenizer, rows, lengths, batch_size, distribution_stats,
                                          progress, top_logprobs))


def _served_rows(client: CompletionsClient, rows: list[_Row], lengths: list[int], top_logprobs: bool):
    """`_score_rows` through a completions server: each row (a window of token ids) sent as one prompt
    and echoed with its log-probs (`CompletionsClient.prompt_logprobs`: OpenAI's `echo: true, logprobs:
    1, max_tokens: 0`, one forward pass over the prompt in vLLM), of which only the tokens the row
    scores (`first_target` on) are read; scattered back as `_score_rows` does."""
    echoed = client.prompt_logprobs([row.ids.tolist() for row in rows])
    # a prompt's arrays hold its tokens 1..n-1; the row scores tokens first_target.. of it
    row_scores = {i: (echo.logprobs[row.first_target - 1:].astype(np.float32), None, None,
                      echo.top_logprobs[row.first_target - 1:].astype(np.float32) if top_logprobs else None)
                  for i, (row, echo) in enumerate(zip(rows, echoed))}
    return scatter_rows(rows, lengths, row_scores, False, top_logprobs)


def windowed_token_scores(tokenizer, texts: list[str], context: int, stride: int | None,
                          start_token: int | None, add_start: bool, score_rows
                          ) -> tuple[list[TokenScores], ScoringInfo]:
    """`causal_token_logprobs` with the model passes left to `score_rows(rows, lengths)`: the texts are
    encoded (`encode_with_bos`), deduplicated (`prefix_roots`) and cut into windows of `context` tokens
    (`sliding_windows`, stride default context // 2); `score_rows` returns, per scored sequence (of
    `lengths[i]` scored tokens), its (logprobs, dist_mean, dist_std, top_logprobs) arrays (None where
    not computed), which are read back per text."""
    encoded, bos = encode_with_bos(tokenizer, texts, start_token, add_start)
    if context < 2:
        raise ValueError(f"context length must be at least 2, got {context}")
    stride = min(stride or context // 2, context - 1)  # a window must keep >= 1 token of context
    keys = [tuple(ids) for ids in encoded]
    roots = prefix_roots(keys)
    scored = sorted(set(roots.values()))
    index = {sequence: i for i, sequence in enumerate(scored)}
    rows = [row for i, sequence in enumerate(scored)
            for row in sliding_windows(np.asarray(sequence, dtype=np.int64), context, stride, i)]
    results = score_rows(rows, [max(0, len(s) - 1) for s in scored])
    outputs = []
    for ids, key in zip(encoded, keys):
        n = max(0, len(ids) - 1)
        arrays = [a[:n] if a is not None else None for a in results[index[roots[key]]]]
        outputs.append(TokenScores(np.asarray(ids[1:], dtype=np.int64), *arrays))
    info = ScoringInfo(bos, bos is not None, context, stride, len(texts), len(roots), len(scored), len(rows))
    return outputs, info


@torch.no_grad()
def next_token_logprobs(model, context: list[int]) -> np.ndarray:
    """log p(z | context) for every vocabulary token z (float64): one forward pass over `context`,
    log_softmax of the logits at its last position."""
    if not context:
        raise ValueError("the context of a next-token distribution needs at least one token")
    device = next(model.parameters()).device
    logits = model(input_ids=torch.tensor([context], dtype=torch.long, device=device)).logits[0, -1]
    return torch.log_softmax(logits.float(), dim=-1).double().cpu().numpy()


def next_token_logprobs_of(model, context: list[int], tokens: list[int]) -> dict[int, float]:
    """log p(t | context) of each distinct token t of `tokens`: read off `next_token_logprobs` in-process;
    through a completions server (`CompletionsClient`), which returns no whole distribution, each
    context + [t] echoed with its log-probs (the last one is t's)."""
    distinct = sorted({int(t) for t in tokens})
    if isinstance(model, CompletionsClient):
        if not context:
            raise ValueError("the context of a next-token distribution needs at least one token")
        echoed = model.prompt_logprobs([list(context) + [t] for t in distinct])
        return {t: float(echo.logprobs[-1]) for t, echo in zip(distinct, echoed)}
    full = next_token_logprobs(model, context)
    return {t: float(full[t]) for t in distinct}


# The float32 logits one forward pass may hold on a CPU: batch x positions x vocabulary x 4 bytes. A
# large vocabulary (gemma-3: 262,144) at batch 16 x 512 tokens would need 8.6 GB; batches of such rows
# are cut so that they stay within this. The reference models (vocabulary 2,048) never reach it. On an
# accelerator, a share of its memory (`logits_budget_bytes`).
LOGITS_BUDGET_BYTES = 2**30


def logits_budget_bytes(device: torch.device | None = None) -> int:
    """The float32 logits one batch may hold on `device`: `LOGITS_BUDGET_BYTES` on a CPU (or None), at
    least that and `budgets.ACCELERATOR_LOGITS_SHARE` of an accelerator's memory."""
    if device is None:
        return LOGITS_BUDGET_BYTES
    return max(LOGITS_BUDGET_BYTES, int(budgets.total_bytes(device) * budgets.ACCELERATOR_LOGITS_SHARE))


def output_vocabulary(model) -> int:
    """The number of logits the model's LM head gives a position (its output embedding's rows; the
    config's `vocab_size` where the head has no weight)."""
    head = model.get_output_embeddings()
    return head.weight.shape[0] if getattr(head, "weight", None) is not None else model.config.vocab_size


def logits_bounded_batches(order: list[int], lengths: list[int], batch_size: int, vocabulary: int,
                           device: torch.device | None = None) -> list[list[int]]:
    """`order` cut into batches of at most `batch_size` rows, fewer where the batch's longest row
    (`lengths`) times the rows times `vocabulary` float32 logits would pass the budget of `device`
    (`logits_budget_bytes`; never fewer than one row; `spans.bounded_batches`)."""
    return bounded_batches(order, lengths, batch_size, max(1, logits_budget_bytes(device) // (vocabulary * 4)))


@torch.no_grad()
def _score_rows(model, tokenizer, rows: list[_Row], lengths: list[int], batch_size: int,
                distribution_stats: bool, progress: bool | None, top_logprobs: bool = False):
    """Run the rows in length-sorted, right-padded batches and scatter the scores back.

    Rows are grouped by where their scored part starts (continuation windows, whose first part is
    context only, apart from first windows) and sorted by length within a group; the LM head then
    runs only on the positions that predict a scored token (`logits_to_keep`, where supported).
    """
    device = next(model.parameters()).device
    order = sorted(range(len(rows)), key=lambda i: (-rows[i].first_target, -len(rows[i].ids)))
    pad = padding_id(tokenizer)
    can_skip_logits = "logits_to_keep" in inspect.signature(model.forward).parameters
    batches = logits_bounded_batches(order, [len(row.ids) for row in rows], batch_size,
                                     output_vocabulary(model), device)

    def score_batch(batch: list[int]) -> list[tuple[np.ndarray | None, ...]]:
        """Each row's scores (log-probs; the distribution mean, std and top log-prob, or None)."""
        members = [rows[i] for i in batch]
        padded, attention = right_pad([row.ids for row in members], pad)
        input_ids, width = padded.numpy(), padded.shape[1]
        first_needed = min(row.first_target for row in members) - 1  # first position whose logits we use
        keep = {"logits_to_keep": width - first_needed} if can_skip_logits else {}
        logits = model(input_ids=padded.to(device), attention_mask=attention.to(device), **keep).logits
        shift = width - logits.shape[1]  # logits[:, k] belong to position shift + k
        # Position p predicts token p + 1: log p(x_{p+1} | x_<=p) = logit[p, x_{p+1}] - logsumexp(logit[p]).
        counts = [len(row.ids) - row.first_target for row in members]
        which_row = np.repeat(np.arange(len(members)), counts)
        position = np.concatenate([np.arange(row.first_target - 1, len(row.ids) - 1) for row in members])
        at_row = torch.from_numpy(which_row).to(device)
        at_position = torch.from_numpy(position - shift).to(device)
        targets = torch.from_numpy(input_ids[which_row, position + 1]).to(device)
        flat = position_scores(logits, at_row, at_position, targets, distribution_stats, top_logprobs)
        ends = np.cumsum(counts)
        return [tuple(None if part is None else part[end - n:end] for part in flat) for n, end in zip(counts, ends)]

    return scatter_rows(rows, lengths, run_batches(batches, score_batch, "scoring", progress),
                        distribution_stats, top_logprobs)


def scatter_rows(rows: list[_Row], lengths: list[int], row_scores: dict, distribution_stats: bool,
                 top_logprobs: bool) -> list[tuple[np.ndarray | None, ...]]:
    """Per scored sequence (of `lengths[i]` tokens), its float32 (logprobs, dist_mean, dist_std,
    top_logprobs) arrays, put together from `row_scores`: row index -> that row's arrays of its scored
    tokens (`first_target` on), in the same order (None where not computed)."""
    logprobs = [np.zeros(n, dtype=np.float32) for n in lengths]
    means = [np.zeros(n, dtype=np.float32) for n in lengths] if distribution_stats else None
    stds = [np.zeros(n, dtype=np.float32) for n in lengths] if distribution_stats else None
    tops = [np.zeros(n, dtype=np.float32) for n in lengths] if top_logprobs else None
    for i, (row_logprobs, row_means, row_stds, row_tops) in row_scores.items():
        row = rows[i]
        span = slice(row.offset, row.offset + len(row_logprobs))
        logprobs[row.sequence][span] = row_logprobs
        if distribution_stats:
            means[row.sequence][span] = row_means
            stds[row.sequence][span] = row_stds
        if top_logprobs:
            tops[row.sequence][span] = row_tops
    return [(logprobs[i], means[i] if means else None, stds[i] if stds else None, tops[i] if tops else None)
            for i in range(len(lengths))]


# The float32 logits whose log-softmax statistics `position_scores` computes at once. On a CPU a few
# MiB, so the temporaries stay in its cache and are never batch x positions x vocabulary (512 rows of
# the reference models' vocabulary of 2,048; 21 of SmolLM2's 49,152): SmolLM2's scoring 31.2 -> 27.4 s,
# with the Min-K%++ statistics 47.3 -> 31.3 s (bench/bench_real_model.py). On an accelerator, whose
# memory is fast and whose every kernel launch costs microseconds, chunks of 256 MiB.
STATS_CHUNK_BYTES = 2**22
ACCELERATOR_CHUNK_BYTES = 2**28


def position_scores(logits: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor, targets: torch.Tensor,
                     distribution_stats: bool, top_logprobs: bool = False
                     ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """For each (row, position) of `logits` (batch, positions, V) and its target token:
    log p(target) = logit[target] - logsumexp(logit), in float32; with `distribution_stats`, the
    mean and std of log p(z) under p over the vocabulary (`_distribution_stats`); with `top_logprobs`,
    max_z log p(z) = max(logit) - logsumexp(logit) (None otherwise). The positions run
    in chunks of `STATS_CHUNK_BYTES` of logits on a CPU (`ACCELERATOR_CHUNK_BYTES` elsewhere), each a
    copy of its rows, so no temporary is the size of all the logits; only the scored positions are
    normalized, not the padding."""
    budget = STATS_CHUNK_BYTES if logits.device.type == "cpu" else ACCELERATOR_CHUNK_BYTES
    chunk = max(1, budget // (4 * logits.shape[-1]))
    logprobs, means, stds, tops = [], [], [], []
    for start in range(0, len(rows), chunk):
        picked = logits[rows[start:start + chunk], positions[start:start + chunk]].float()  # (n, V)
        log_norm = torch.logsumexp(picked, dim=-1)
        logprobs.append(picked.gather(1, targets[start:start + chunk, None])[:, 0] - log_norm)
        if distribution_stats:
            mean, std = _distribution_stats(picked, log_norm)
            means.append(mean)
            stds.append(std)
        if top_logprobs:
            tops.append(picked.max(dim=-1).values - log_norm)

    def joined(parts: list[torch.Tensor], wanted: bool = True) -> np.ndarray | None:
        if not wanted:
            return None
        return torch.cat(parts).cpu().numpy() if parts else np.zeros(0, dtype=np.float32)

    return (joined(logprobs), joined(means, distribution_stats), joined(stds, distribution_stats),
            joined(tops, top_logprobs))


def _distribution_stats(logits: torch.Tensor, log_norm: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std of log p(z) under p over the vocabulary, for each row of `logits` (N, V).

    mu = sum_z p(z) log p(z); sigma^2 = sum_z p(z) (log p(z) - mu)^2 (centred, so no cancellation).
    """
    log_dist = logits - log_norm[:, None]
    probs = log_dist.exp()
    mean = (probs * log_dist).sum(-1)
    return mean, (probs * (log_dist - mean[:, None]).square()).sum(-1).sqrt()
