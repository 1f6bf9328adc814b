"""A lower bound on the probability of a near-verbatim continuation: decoding-constrained beam search.

Cooper et al. 2026 (*Estimating near-verbatim extraction risk in language models with
decoding-constrained beam search*). For a prompt x and a target y of L tokens whose text is t, the
near-verbatim set is every continuation c of exactly L tokens whose text is within a similarity
threshold tau of t: `approximate_memorization(text(c), t) >= tau` (1 - Levenshtein / longest, on
characters; the project's own definition, `harness.metrics.memorization`). Under a sampling
scheme's processed distribution q (`harness.scoring.extraction.SamplingScheme`, what
`generate(do_sample=True, ...)` draws from), P(near-verbatim) = sum over c in the set of
prod_t q(c_t | x, c_<t). A beam search of width B over continuations kept to the set gives

    bound = sum over the finished beams c inside the set of q(c)  <=  P(near-verbatim),

a deterministic lower bound whatever the beams are: they are distinct token sequences (disjoint
events) and each one's membership is checked exactly on its full decoded text.

- Each step extends every beam by every token of its kept set and keeps the B most probable
  extensions that can still end inside the set. Pruning rule: a prefix whose text a is dropped when
  `optimistic_similarity(min_j Levenshtein(a, t[:j]), len(a), len(t)) < tau`
  (`harness.metrics.extraction`): every completion a + r has Levenshtein(a + r, t) >=
  min_j Levenshtein(a, t[:j]) and >= len(a + r) - len(t), so no completion of a dropped prefix could
  reach tau; pruning spends the width only on prefixes that still can. a is the prefix's decoded
  text less trailing U+FFFD (a token that ends inside a UTF-8 character) and, for a tokenizer that
  cleans up spaces on decoding (`clean_up_tokenization_spaces`), less its last `CLEANUP_MARGIN`
  characters, which the next token's text can still change; a shorter a only loosens the test.
- The target itself is always among the finished beams when q(y) > 0: each step keeps the target's
  own prefix (replacing the least probable kept extension when it fell outside the top B); its
  text is a prefix of t, so the rule never drops it. Hence bound >= p_z (`extraction_logprobs`),
  up to the float rounding between a cached step-by-step pass and a teacher-forced one.
- At most `max_candidates` extensions per step are examined (most probable first); the bound stays
  a bound when the search stops early.
- One target at a time: its B beams are one batch (the prompt runs once; its key/value cache is
  repeated and reordered per step), so a target's bound does not depend on the others.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch

from harness.metrics.extraction import (
    check_similarity_threshold,
    extend_distance_rows,
    optimistic_similarity,
    prefix_distance_row,
)
from harness.metrics.memorization import approximate_memorization
from harness.core.errors import UserError
from harness.scoring.batching import model_context
from harness.scoring.conditional import _cache_argument, encode_pairs
from harness.scoring.distributed import run_batches
from harness.scoring.extraction import SamplingScheme, fit_prompts

DEFAULT_BEAM_WIDTH = 20
DEFAULT_SIMILARITY = 0.9
CLEANUP_MARGIN = 4  # transformers' clean_up_tokenization removes a space up to 3 characters before a boundary
# tolerance on the pruning test, so that float rounding never drops a prefix exactly at the threshold
PRUNE_SLACK = 1e-9


@dataclass
class NearVerbatim:
    """One target's result: log of the lower bound on P(near-verbatim), log q(target) along the
    beam (the verbatim p_z; -inf when a target token is outside the kept set), and the number of
    finished beams inside the set."""

    log_bound: float
    log_pz: float
    n_in_set: int

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class _Beam:
    tokens: list[int]
    logq: float
    text: str          # the stable decoded prefix the distance row belongs to
    row: np.ndarray    # prefix_distance_row(text, target)


def check_beam_settings(scheme: SamplingScheme, threshold: float, beam_width: int) -> None:
    """A `UserError` naming the first bad setting of a near-verbatim search."""
    scheme.check()
    check_similarity_threshold(threshold)
    if isinstance(beam_width, bool) or not isinstance(beam_width, int) or beam_width < 1:
        raise UserError(f"the beam width must be an integer >= 1, got {beam_width!r}")


def near_verbatim_bounds(model, tokenizer, prompts: list[str], targets: list[str], scheme: SamplingScheme,
                         threshold: float = DEFAULT_SIMILARITY, beam_width: int = DEFAULT_BEAM_WIDTH,
                         max_candidates: int | None = None, max_length: int | None = None,
                         progress: bool | None = None) -> list[NearVerbatim]:
    """The near-verbatim lower bound of each (prompt, target) (module docstring); sequences are
    [BOS] + prompt + target, tokenized apart, prompts cut to fit the context, as
    `extraction.extraction_logprobs` reads them."""
    check_beam_settings(scheme, threshold, beam_width)
    if len(prompts) != len(targets):
        raise ValueError(f"{len(prompts)} prompts but {len(targets)} targets")
    prompt_ids, target_ids = encode_pairs(tokenizer, prompts, targets, seq2seq=False, max_source=None,
                                          max_target=None)
    cut, _ = fit_prompts(prompt_ids, target_ids, max_length or model_context(model))

    def run_one(batch: list[int]) -> list[NearVerbatim]:
        return [near_verbatim_bound_ids(model, tokenizer, cut[i], target_ids[i], scheme, threshold, beam_width,
                                        max_candidates) for i in batch]

    order = sorted(range(len(prompts)), key=lambda i: -(len(cut[i]) + len(target_ids[i])))
    done = run_batches([[i] for i in order], run_one, "near-verbatim search", progress)
    return [done[i] for i in range(len(prompts))]


def decoded(tokenizer, ids: list[int]) -> str:
    """A continuation's text, as `generation.greedy_continuations` decodes it (special tokens dropped)."""
    return tokenizer.decode(ids, skip_special_tokens=True)


def decoded_all(tokenizer, sequences: list[list[int]]) -> list[str]:
    """`decoded` of each of `sequences`, the same strings: the Rust tokenizer's own `decode` where that is
    all `decode` does (a fast tokenizer that does not clean up spaces; the search decodes about a hundred
    candidates a step, and `decode`'s conversion of its argument cost more than the decoding), else
    `decoded`."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or getattr(tokenizer, "clean_up_tokenization_spaces", False):
        return [decoded(tokenizer, sequence) for sequence in sequences]
    return [backend.decode(sequence, skip_special_tokens=True) for sequence in sequences]


def stable_prefix(tokenizer, text: str) -> str:
    """The part of a prefix's decoded text that later tokens cannot change (module docstring)."""
    text = text.rstrip("\ufffd")
    if getattr(tokenizer, "clean_up_tokenization_spaces", False):
        text = text[:max(0, len(text) - CLEANUP_MARGIN)]
    return text


@torch.no_grad()
def near_verbatim_bound_ids(model, tokenizer, prompt_ids: list[int], target_ids: list[int], scheme: SamplingScheme,
                            threshold: float = DEFAULT_SIMILARITY, beam_width: int = DEFAULT_BEAM_WIDTH,
                            max_candidates: int | None = None) -> NearVerbatim:
    """`near_verbatim_bounds` of one prompt (non-empty token ids) and target (token ids)."""
    check_beam_settings(scheme, threshold, beam_width)
    if not prompt_ids:
        raise ValueError("the prompt needs at least one token")
    length = len(target_ids)
    target = decoded(tokenizer, target_ids)
    if length == 0:
        return NearVerbatim(0.0, 0.0, 1)
    warpers = scheme.processors()
    limit = max_candidates or 64 * beam_width
    device = next(model.parameters()).device
    name = _cache_argument(model)
    out = model(input_ids=torch.tensor([prompt_ids], device=device), use_cache=name is not None)
    cache = (getattr(out, "cache", None) or getattr(out, "past_key_values", None)) if name else None
    logits = out.logits[:, -1]
    beams = [_Beam([], 0.0, "", prefix_distance_row("", target))]
    for step in range(length):
        last = step == length - 1
        logq = scheme.step_logprobs(logits, warpers).double().cpu()
        total = torch.tensor([b.logq for b in beams], dtype=torch.float64)[:, None] + logq
        kept = _extend(tokenizer, beams, total, target, threshold, beam_width, limit, last)
        kept = _with_target_prefix(tokenizer, kept, beams, total, list(target_ids[:step + 1]), target, beam_width,
                                   last)
        if not kept:
            return NearVerbatim(-math.inf, -math.inf, 0)
        if last:
            in_set = [b for _, b in kept]
            on_target = [b.logq for b in in_set if b.tokens == list(target_ids)]
            log_bound = float(torch.logsumexp(torch.tensor([b.logq for b in in_set], dtype=torch.float64), 0))
            return NearVerbatim(log_bound, on_target[0] if on_target else -math.inf, len(in_set))
        parents = torch.tensor([p for p, _ in kept], dtype=torch.long, device=device)
        beams = [b for _, b in kept]
        new_tokens = torch.tensor([[b.tokens[-1]] for b in beams], dtype=torch.long, device=device)
        if cache is not None:
            cache.reorder_cache(parents)
            mask = torch.ones((len(beams), len(prompt_ids) + step + 1), dtype=torch.long, device=device)
            out = model(input_ids=new_tokens, attention_mask=mask, use_cache=True, **{name: cache})
        else:
            rows = torch.tensor([list(prompt_ids) + b.tokens for b in beams], dtype=torch.long, device=device)
            out = model(input_ids=rows)
        logits = out.logits[:, -1]
    raise AssertionError("unreachable: the last step returns")


def _extend(tokenizer, beams: list[_Beam], total: torch.Tensor, target: str, threshold: float, width: int,
            limit: int, last: bool) -> list[tuple[int, _Beam]]:
    """The `width` most probable extensions (parent index, beam) that can still end in the set
    (`last`: that are in it), examining at most `limit` of them, most probable first (a chunk of them
    at a time, `_children`)."""
    flat = total.reshape(-1)
    vocabulary = total.shape[1]
    positions = torch.isfinite(flat).nonzero().squeeze(1)  # the extensions q keeps (top-k: k per beam)
    candidates = flat[positions]
    finite = len(positions)
    kept: list[tuple[int, _Beam]] = []
    seen, k = 0, min(finite, limit, 2 * width)
    while seen < min(finite, limit) and len(kept) < width:
        values, indices = torch.topk(candidates, k)
        parents, tokens = zip(*(divmod(index, vocabulary) for index in positions[indices[seen:]].tolist()))
        children = _children(tokenizer, beams, list(parents), list(tokens), values[seen:].tolist(), target,
                             threshold, last)
        for parent, child in zip(parents, children):
            if child is not None:
                kept.append((parent, child))
                if len(kept) == width:
                    break
        seen, k = k, min(finite, limit, 2 * k)
        if seen == k:
            break
    return kept


def _children(tokenizer, beams: list[_Beam], parents: list[int], tokens: list[int], logqs: list[float],
              target: str, threshold: float, last: bool) -> list[_Beam | None]:
    """Each beams[parent] extended by its token, or None where it cannot end (`last`: does not end) in
    the set; the distance rows of all of them are extended together (`extend_distance_rows`)."""
    sequences = [beams[p].tokens + [t] for p, t in zip(parents, tokens)]
    texts = decoded_all(tokenizer, sequences)
    if last:
        return [_Beam(sequence, logq, text, beams[p].row) if approximate_memorization(text, target) >= threshold
                else None for sequence, logq, text, p in zip(sequences, logqs, texts, parents)]
    stable = [stable_prefix(tokenizer, text) for text in texts]
    rows = np.stack([beams[p].row for p in parents])
    added = []
    for i, (text, p) in enumerate(zip(stable, parents)):
        if text.startswith(beams[p].text):
            added.append(text[len(beams[p].text):])
        else:  # the new token changed the decoded text before it: the row starts again
            rows[i] = np.arange(len(target) + 1)
            added.append(text)
    rows = extend_distance_rows(rows, added, target)
    return [None if optimistic_similarity(int(row.min()), len(text), len(target)) < threshold - PRUNE_SLACK
            else _Beam(sequence, logq, text, row) for sequence, logq, text, row in zip(sequences, logqs, stable, rows)]


def _with_target_prefix(tokenizer, kept: list[tuple[int, _Beam]], beams: list[_Beam], total: torch.Tensor,
                        prefix: list[int], target: str, width: int, last: bool) -> list[tuple[int, _Beam]]:
    """`kept` with the target's own prefix among them (replacing the least probable when full)
    whenever its parent is a beam and q gives it a positive probability."""
    if any(b.tokens == prefix for _, b in kept):
        return kept
    parent = next((i for i, b in enumerate(beams) if b.tokens == prefix[:-1]), None)
    if parent is None or not math.isfinite(float(total[parent, prefix[-1]])):
        return kept
    [child] = _children(tokenizer, beams, [parent], [prefix[-1]], [float(total[parent, prefix[-1]])], target, -1.0,
                        last)
    return kept[:width - 1] + [(parent, child)]
