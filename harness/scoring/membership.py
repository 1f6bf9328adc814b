"""Membership scores of cut texts under one causal LM, shared by every task that detects members
(mink_membership, finetune_memorization): the same code path, so the same per-text scores for the
same texts and weights.

From the target's own token log-probs (`text_scores`): LOSS, zlib, Min-K% Prob and Min-K%++.
Attacks that query the model again: ReCaLL (`recall_scores`), DC-PDD (`dc_pdd_scores`, from
`token_frequencies` of a reference corpus) and the gradient norm (`gradnorm_scores`). Every score is
oriented so that higher = more likely a member; a text an attack cannot score is left out of its
dict. Formulas and sources: `harness.metrics.memorization` and `harness.scoring.gradients`.
"""

from __future__ import annotations

from typing import Hashable

import numpy as np

from harness.core.errors import UserError
from harness.metrics import memorization as m
from harness.metrics.membership_report import ATTACK_ORDER
from harness.model.served import CompletionsClient
from harness.scoring.batching import model_context, padding_id
from harness.scoring.causal import TokenScores
from harness.scoring.conditional import encode_pairs, shared_prefix_logprobs, target_logprobs

Key = Hashable


def text_scores(text: str, scores: TokenScores, k_percents: tuple[int, ...],
                attacks: tuple[str, ...] = ATTACK_ORDER) -> dict[str, float]:
    """The scores of one text computed from the target's own token log-probs (LOSS, zlib, Min-K%,
    Min-K%++: those selected), oriented so higher = more likely a member."""
    lp = scores.logprobs
    values = {}
    if "loss" in attacks:
        values["loss"] = m.loss_score(lp)
    if "zlib" in attacks:
        values["zlib"] = m.zlib_score(text, lp)
    for k in k_percents if "min_k" in attacks else ():
        values[f"min_k_{k}"] = m.min_k_score(lp, k)
    for k in k_percents if "min_k_pp" in attacks else ():
        values[f"min_k_pp_{k}"] = m.min_k_plus_plus_score(lp, scores.dist_mean, scores.dist_std, k)
    return values


def recall_scores(model, texts: dict[Key, str], target: dict[Key, TokenScores], prefix: str,
                  prefix_tokens: int | None, add_start: bool, batch_size: int,
                  progress) -> tuple[dict[Key, float], int, int]:
    """`recall`: LL(x | P) / LL(x) for every text that fits the context after P (`model`: a
    `LoadedModel`; P cut to its first `prefix_tokens` tokens, by default half the context; [BOS] + P
    with `add_start`, the bare P without, as MIMIR); also the number of prefix tokens and of texts
    that did not fit. P runs through the model once and its key/value cache serves every text
    (`shared_prefix_logprobs`); through a completions server, P + x is echoed with its log-probs."""
    context = model_context(model.model)
    cut = prefix_tokens or context // 2
    [prefix_ids], _ = encode_pairs(model.tokenizer, [prefix], [""], False, cut, None, add_start)
    if not prefix_ids:
        raise UserError("--recall-prefix: the prefix has no token")
    if len(prefix_ids) >= context:
        raise UserError(f"--recall-prefix-tokens {cut}: the prefix must leave room in the model's context of {context}")
    candidates = [k for k in texts if k in target]
    if not candidates:
        return {}, len(prefix_ids), 0
    encoded = model.tokenizer([texts[k] for k in candidates], add_special_tokens=False)["input_ids"]
    fits = [(k, ids) for k, ids in zip(candidates, encoded) if len(prefix_ids) + len(ids) <= context]
    keys = [k for k, _ in fits]
    pad = padding_id(model.tokenizer)
    if isinstance(model.model, CompletionsClient):  # P + x echoed with its log-probs: x's are read
        echoed = model.model.prompt_logprobs([prefix_ids + list(ids) for _, ids in fits])
        conditional = [echo.logprobs[len(prefix_ids) - 1:] for echo in echoed]
    else:
        conditional = shared_prefix_logprobs(model.model, prefix_ids, [list(ids) for _, ids in fits], batch_size,
                                             pad, progress)
    if conditional is None:  # no reusable key/value cache: the prefix runs with every text
        conditional = target_logprobs(model.model, model.tokenizer, [prefix] * len(keys), [texts[k] for k in keys],
                                      seq2seq=False, batch_size=batch_size, max_source=cut,
                                      progress=progress, add_start=add_start)
    out = {}
    for k, cond in zip(keys, conditional):
        own = target[k].logprobs  # without add_start without the first token; `cond` scores it (MIMIR)
        if len(cond) and len(own):
            out[k] = m.recall_score(cond, own)
    return out, len(prefix_ids), len(candidates) - len(keys)


def token_frequencies(tokenizer, corpus: list[str]) -> np.ndarray:
    """Laplace-smoothed frequency of every vocabulary token in `corpus`, each text tokenized with the
    tokenizer's defaults and cut to 1,024 tokens (DC-PDD's and MIMIR's counting)."""
    counts = np.zeros(len(tokenizer), dtype=np.int64)
    for ids in tokenizer(corpus, truncation=True, max_length=1024)["input_ids"] if corpus else []:
        np.add.at(counts, np.asarray(ids, dtype=np.int64), 1)
    return m.laplace_token_frequencies(counts)


def dc_pdd_scores(frequencies: np.ndarray, target: dict[Key, TokenScores], cap: float) -> dict[Key, float]:
    """`dc_pdd`: the mean capped calibrated probability of each text's first token occurrences."""
    out = {}
    for k, s in target.items():
        if len(s.token_ids):
            out[k] = m.dc_pdd_score(s.token_ids, s.logprobs, frequencies, cap)
    return out


def gradnorm_scores(model, texts: dict[Key, str], p: float, add_start: bool, batch_size: int,
                    progress) -> dict[Key, float]:
    """`gradnorm`: minus the mean over parameters of the p-norm of the gradient of the text's mean
    token NLL (`model`: a `LoadedModel`; `harness.scoring.gradients.gradient_norms`; MIMIR's value)."""
    from harness.scoring.gradients import gradient_norms

    keys = list(texts)
    norms = gradient_norms(model.model, model.tokenizer, [texts[k] for k in keys], p=p, batch_size=batch_size,
                           add_start=add_start, progress=progress)
    return {k: -float(v) for k, v in zip(keys, norms)}
