"""The exact probability that a sampling scheme reproduces a target given its prompt (causal LMs).

Hayes et al. 2024 (*Measuring memorization in language models via probabilistic extraction*): for a
prompt x and target y_1..y_L, p_z = prod_t q(y_t | x, y_<t), with q the *processed* next-token
distribution a sampler draws from; one teacher-forced forward pass over x + y gives every factor.

- q is what `model.generate(do_sample=True, temperature=T, top_k=K, top_p=P)` samples from: softmax of
  the float32 logits after transformers' own TemperatureLogitsWarper(T), TopKLogitsWarper(K) and
  TopPLogitsWarper(P), in that order (`GenerationMixin._get_logits_processor`, transformers 5.x;
  each only when active: T != 1, K not 0/None, P < 1), with `min_tokens_to_keep=1` as generate uses
  for one beam. The processor classes themselves filter each row, so the kept set (ties included)
  is generate's. A target token outside the kept set gives p_z = 0 (log p_z = -inf).
- Greedy decoding (`SamplingScheme(greedy=True)`, generate's `do_sample=False`) is the limit: q puts
  mass 1 on the argmax (torch.argmax: the first of tied maxima, as generate picks), so p_z is 1 when
  every target token is the argmax and 0 otherwise.
- Sequences are [BOS] + prompt + target, tokenized apart (`conditional.encode_pairs`, as
  `target_logprobs` does); a prompt that would not fit the context with its target keeps its last
  tokens (as `generation.prompt_cuts` does); a target longer than the context minus one is a UserError.
- Rows are sorted by length, right-padded with the padding masked, and cut to the device's logits
  budget (`causal.logits_bounded_batches`); the LM head runs only from the first target position
  (`logits_to_keep`, where supported), and the warpers run over a few rows of logits at a time. A
  target's numbers do not depend on its batch.
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass

import numpy as np
import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from harness.core.errors import UserError
from harness.model.served import CompletionsClient
from harness.scoring.batching import model_context, padding_id, right_pad
from harness.scoring.causal import (
    ACCELERATOR_CHUNK_BYTES,
    STATS_CHUNK_BYTES,
    logits_bounded_batches,
    output_vocabulary,
)
from harness.scoring.conditional import encode_pairs, target_logprobs
from harness.scoring.distributed import run_batches
from harness.scoring.spans import longest_first


@dataclass(frozen=True)
class SamplingScheme:
    """A decoding scheme: sampling at temperature T with top-k K (None: off) and top-p P (None or 1:
    off), or greedy decoding (`greedy=True`, which ignores T, K and P)."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    greedy: bool = False

    def check(self) -> "SamplingScheme":
        """Itself, or a `UserError` naming the first bad setting."""
        if self.greedy:
            return self
        if not (isinstance(self.temperature, (int, float)) and self.temperature > 0):
            raise UserError(f"sampling temperature must be > 0 (use greedy decoding for T -> 0), got {self.temperature}")
        if self.top_k is not None and (isinstance(self.top_k, bool) or not isinstance(self.top_k, int)
                                       or self.top_k < 1):
            raise UserError(f"top_k must be an integer >= 1 (or None for no top-k), got {self.top_k!r}")
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise UserError(f"top_p must lie in (0, 1] (or None for no top-p), got {self.top_p}")
        return self

    def processors(self) -> LogitsProcessorList:
        """transformers' warpers that `generate(**self.generate_kwargs())` applies, in its order
        (empty when greedy: `do_sample=False` applies none)."""
        self.check()
        warpers = LogitsProcessorList()
        if self.greedy:
            return warpers
        if self.temperature != 1.0:
            warpers.append(TemperatureLogitsWarper(float(self.temperature)))
        if self.top_k is not None:
            warpers.append(TopKLogitsWarper(top_k=int(self.top_k), min_tokens_to_keep=1))
        if self.top_p is not None and self.top_p < 1.0:
            warpers.append(TopPLogitsWarper(top_p=float(self.top_p), min_tokens_to_keep=1))
        return warpers

    def generate_kwargs(self) -> dict:
        """The `model.generate` flags that sample from this scheme (top_k=0 turns off generate's
        default top-k of 50)."""
        self.check()
        if self.greedy:
            return {"do_sample": False, "num_beams": 1}
        return {"do_sample": True, "num_beams": 1, "temperature": float(self.temperature),
                "top_k": int(self.top_k or 0), "top_p": float(self.top_p if self.top_p is not None else 1.0)}

    def step_logprobs(self, logits: torch.Tensor, warpers: LogitsProcessorList | None = None) -> torch.Tensor:
        """log q(z) for every row of `logits` (n, V), in float32: log_softmax of the processed logits
        (-inf outside the kept set); greedy: 0 at each row's argmax, -inf elsewhere."""
        scores = logits.float()
        if self.greedy:
            out = torch.full_like(scores, -torch.inf)
            return out.scatter_(1, scores.argmax(dim=-1, keepdim=True), 0.0)
        warpers = self.processors() if warpers is None else warpers
        no_ids = torch.zeros((scores.shape[0], 0), dtype=torch.long, device=scores.device)  # warpers read none
        return torch.log_softmax(warpers(no_ids, scores), dim=-1)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class ExtractionInfo:
    """How targets were scored; recorded in the results file."""

    scheme: dict
    bos_token_id: int | None
    context_length: int
    n_targets: int
    n_prompts_cut: int

    def as_dict(self) -> dict:
        return asdict(self)


def fit_prompts(prompt_ids: list[list[int]], target_ids: list[list[int]], context: int) -> tuple[list[list[int]], int]:
    """Each prompt cut to its last `context - len(target)` tokens, and how many were cut; a target
    that leaves no room for one prompt token is a `UserError`."""
    cut, n_cut = [], 0
    for prompt, target in zip(prompt_ids, target_ids):
        room = context - len(target)
        if room < 1 or not prompt:
            raise UserError(f"a target of {len(target)} tokens after a prompt of {len(prompt)} tokens does not "
                            f"fit the model's context of {context} (it needs at least one prompt token)")
        n_cut += len(prompt) > room
        cut.append(prompt[-room:])
    return cut, n_cut


def extraction_logprobs(model, tokenizer, prompts: list[str], targets: list[str], scheme: SamplingScheme,
                        batch_size: int = 16, max_length: int | None = None, progress: bool | None = None
                        ) -> tuple[list[np.ndarray], ExtractionInfo]:
    """log q(y_t | x, y_<t) under the scheme's processed distribution for every target token, one
    float64 array per (prompt, target); log p_z is each array's sum (`log_pz`)."""
    scheme.check()
    if len(prompts) != len(targets):
        raise ValueError(f"{len(prompts)} prompts but {len(targets)} targets")
    prompt_ids, target_ids = encode_pairs(tokenizer, prompts, targets, seq2seq=False, max_source=None,
                                          max_target=None)
    context = max_length or model_context(model)
    cut, n_cut = fit_prompts(prompt_ids, target_ids, context)
    scores = extraction_logprobs_ids(model, cut, target_ids, scheme, batch_size, padding_id(tokenizer), progress)
    bos = tokenizer.bos_token_id
    return scores, ExtractionInfo(scheme.as_dict(), bos, context, len(targets), n_cut)


def pair_extraction_logprobs(model, tokenizer, sources: list[str], targets: list[str], seq2seq: bool,
                             scheme: SamplingScheme, batch_size: int = 16, max_source: int | None = None,
                             max_target: int | None = None, progress: bool | None = None) -> list[np.ndarray]:
    """log q(y_t | source, y_<t) under the scheme's processed distribution for every target token of each
    (source, target), the pairs read as `conditional.target_logprobs` reads them (a causal source after
    its BOS, a seq2seq target with its end token, both cut to the limits): one teacher-forced pass of
    a causal LM or of an encoder-decoder. log p_z is each array's sum (`log_pz`)."""
    scheme.check()
    warpers = scheme.processors()

    def processed(logits: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor,
                  wanted: torch.Tensor) -> np.ndarray:
        return processed_target_logprobs(logits, rows, positions, wanted, scheme, warpers)

    return target_logprobs(model, tokenizer, sources, targets, seq2seq, batch_size, max_source, max_target, progress,
                           scorer=processed)


def log_pz(token_logprobs: list[np.ndarray]) -> np.ndarray:
    """log p_z = sum_t log q(y_t | x, y_<t) of each target (-inf when any token is outside the kept set)."""
    return np.array([float(np.sum(row)) for row in token_logprobs], dtype=np.float64)


@torch.no_grad()
def extraction_logprobs_ids(model, prompt_ids: list[list[int]], target_ids: list[list[int]],
                            scheme: SamplingScheme, batch_size: int = 16, pad: int = 0,
                            progress: bool | None = None) -> list[np.ndarray]:
    """`extraction_logprobs` on token ids: each prompt (non-empty, BOS included if wanted) is
    followed by its target, and prompt + target must fit the model's context. A served model
    (`CompletionsClient`): `served_extraction_logprobs`."""
    scheme.check()
    if isinstance(model, CompletionsClient):
        return served_extraction_logprobs(model, prompt_ids, target_ids, scheme)
    warpers = scheme.processors()
    device = next(model.parameters()).device
    lengths = [len(p) + len(t) for p, t in zip(prompt_ids, target_ids)]
    scorable = [i for i, t in enumerate(target_ids) if t]
    if any(not prompt_ids[i] for i in scorable):
        raise ValueError("every prompt needs at least one token")
    can_skip_logits = "logits_to_keep" in inspect.signature(model.forward).parameters

    def score_batch(batch: list[int]) -> list[np.ndarray]:
        members = [scorable[k] for k in batch]
        inputs, mask = right_pad([prompt_ids[i] + target_ids[i] for i in members], pad)
        width = inputs.shape[1]
        first = min(len(prompt_ids[i]) for i in members) - 1  # the first position that predicts a target token
        keep = {"logits_to_keep": width - first} if can_skip_logits else {}
        logits = model(input_ids=inputs.to(device), attention_mask=mask.to(device), **keep).logits
        shift = width - logits.shape[1]  # logits[:, k] belong to position shift + k
        counts = [len(target_ids[i]) for i in members]
        rows = np.repeat(np.arange(len(members)), counts)
        positions = np.concatenate([np.arange(len(prompt_ids[i]) - 1, len(prompt_ids[i]) - 1 + len(target_ids[i]))
                                    for i in members])
        wanted = torch.from_numpy(np.concatenate([target_ids[i] for i in members]).astype(np.int64))
        flat = processed_target_logprobs(logits, torch.from_numpy(rows), torch.from_numpy(positions - shift),
                                         wanted, scheme, warpers)
        return np.split(flat, np.cumsum(counts)[:-1])

    batches = logits_bounded_batches(longest_first([lengths[i] for i in scorable]),
                                     [lengths[i] for i in scorable], batch_size, output_vocabulary(model), device)
    done = run_batches(batches, score_batch, "extraction", progress)
    results = [np.zeros(0, dtype=np.float64) for _ in target_ids]
    for k, value in done.items():
        results[scorable[k]] = value
    return results


def processed_target_logprobs(logits: torch.Tensor, rows: torch.Tensor, positions: torch.Tensor,
                              targets: torch.Tensor, scheme: SamplingScheme,
                              warpers: LogitsProcessorList | None = None) -> np.ndarray:
    """log q(target) at each (row, position) of `logits` (batch, positions, V) under the scheme
    (`SamplingScheme.step_logprobs`), float64; the positions run a few at a time, as
    `causal.position_scores` does, so no temporary holds all the logits."""
    budget = STATS_CHUNK_BYTES if logits.device.type == "cpu" else ACCELERATOR_CHUNK_BYTES
    chunk = max(1, budget // (4 * logits.shape[-1]))
    device = logits.device
    parts = []
    for start in range(0, len(rows), chunk):
        picked = logits[rows[start:start + chunk].to(device), positions[start:start + chunk].to(device)]
        logq = scheme.step_logprobs(picked, warpers)
        parts.append(logq.gather(1, targets[start:start + chunk, None].to(device))[:, 0])
    return torch.cat(parts).double().cpu().numpy() if parts else np.zeros(0, dtype=np.float64)


def served_top_n(scheme: SamplingScheme) -> int:
    """How many of the most likely tokens a completions server must return per position (its `logprobs`)
    for `served_extraction_logprobs` to compute q exactly: 1 for greedy decoding and for plain sampling
    (T = 1, no top-k, no top-p: q = p); K under top-k K, whose kept set is those K tokens, on which
    temperature and top-p act alone (log p = logit - log Z shifts every kept token alike, so the top K
    log-probs are the logits up to a constant, which the processed softmax removes). Any other scheme
    needs the whole vocabulary's logits: a `UserError`."""
    scheme.check()
    if scheme.greedy:
        return 1
    if scheme.top_k is not None:
        return int(scheme.top_k)
    if scheme.temperature == 1.0 and (scheme.top_p is None or scheme.top_p == 1.0):
        return 1
    raise UserError(f"p_z at temperature {scheme.temperature:g}" + (f", top-p {scheme.top_p:g}" if scheme.top_p else "")
                    + " without top-k needs the whole next-token distribution, which a completions server does "
                    "not return: give --extraction-top-k (at most the server's --max-logprobs) or sample at T = 1")


def served_extraction_logprobs(client: CompletionsClient, prompt_ids: list[list[int]], target_ids: list[list[int]],
                               scheme: SamplingScheme) -> list[np.ndarray]:
    """`extraction_logprobs_ids` through a completions server: each prompt + target echoed with its
    log-probs and the `served_top_n(scheme)` most likely tokens at each position. Per target token y_t:
    greedy, log q = 0 where y_t is the argmax (ties count, as `TokenScores.argmax_hits`), else -inf;
    plain sampling, log q = log p(y_t); under top-k, log q = `scheme.step_logprobs` of the row of the top
    K log-probs with y_t's own beside them when it is not among them (then it falls outside the kept set:
    -inf). A token tied with the K-th outside the server's K is lost (transformers keeps ties)."""
    top_n = served_top_n(scheme)
    results = [np.zeros(0, dtype=np.float64) for _ in target_ids]
    scorable = [i for i, t in enumerate(target_ids) if t]
    if any(not prompt_ids[i] for i in scorable):
        raise ValueError("every prompt needs at least one token")
    echoed = client.prompt_logprobs([list(prompt_ids[i]) + list(target_ids[i]) for i in scorable], top_n)
    warpers = scheme.processors()
    for i, echo in zip(scorable, echoed):
        first = len(prompt_ids[i]) - 1  # echo arrays hold tokens 1..n-1: target token j is at first + j
        span = slice(first, first + len(target_ids[i]))
        if scheme.greedy:
            results[i] = np.where(echo.logprobs[span] >= echo.top_logprobs[span], 0.0, -np.inf)
        elif scheme.top_k is None:
            results[i] = echo.logprobs[span].astype(np.float64)
        else:
            results[i] = np.array([_top_k_logq(echo.top[k], int(token), scheme, warpers)
                                   for k, token in zip(range(span.start, span.stop), target_ids[i])], dtype=np.float64)
    return results


def _top_k_logq(top: dict[int, float], token: int, scheme: SamplingScheme, warpers: LogitsProcessorList) -> float:
    """log q(token) from the server's top-K log-probs (`served_extraction_logprobs`)."""
    ids = list(top)
    if token not in top:
        ids.append(token)
    # the token's log-prob when it is outside the top K does not matter: top-k removes it
    row = torch.tensor([[top.get(t, -torch.inf) for t in ids]], dtype=torch.float32)
    return float(scheme.step_logprobs(row, warpers)[0, ids.index(token)])
