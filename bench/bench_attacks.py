"""Speed of mink_membership's ref, ne, ReCaLL, DC-PDD and gradnorm against per-text loops as MIMIR runs them.

On the 30-epoch reference GPT-2 (`xsum-gpt2-e30`), its reference model (`xsum-gpt2-outside-e05`)
and the reference masked LM (`mlm-bert-e05`), the first `--texts` reference texts cut to L = 128
words. Each attack's own work is timed (the target's token log-probs, shared by LOSS, zlib and
Min-K%, are computed once beforehand for both sides where the attack reuses them):

  ref     membench: the reference model's `causal_token_logprobs` (batched, length-sorted);
          MIMIR: `get_probabilities` per text (one forward, log-softmax, a `.item()` per token)
  recall  membench: `target_logprobs` of P + x (batched); MIMIR: `get_conditional_ll` per text
  dc_pdd  membench: token log-probs given <|endoftext|> (batched) and the formula; MIMIR: a forward
          per text with EOS prepended, then the formula (the frequencies are counted once for both);
          `dc_pdd_in_task`: the formula alone, as the task runs it (those log-probs are LOSS's own)
  ne      membench: neighbours (one batched masked-LM pass over all (text, position) rows, only
          the predicted position through the output head) and their batched scoring; MIMIR: one
          masked-LM forward per text position (`generate_neighbors_`), then `get_lls` of the
          neighbours in padded batches of 4 with a `.item()` per token
  gradnorm membench: `harness.scoring.gradients.gradient_norms` (torch.func vmap of per-text gradients);
          MIMIR: `GradNormAttack` per text (zero_grad, `get_probabilities` with grads, backward,
          the mean of the parameters' gradient inf-norms)

Reported: seconds of each side (the best of 3 runs; `ne` once, since its neighbours are cached) and
the ratio loop / membench (target >= 2), and the largest
difference between the two sides' per-text scores where they compute the same number (ref,
recall, dc_pdd, gradnorm; ne's neighbours are random draws on both sides, so only the timing compares).

    python bench/bench_attacks.py [--texts 128] [--neighbours 25] [--batch-size 16]
"""

from __future__ import annotations

import argparse
import math
import time
from types import SimpleNamespace

import numpy as np
import torch

from harness.metrics import memorization as m
from harness.model.loading import ModelSpec, load
from harness.reference.checkpoints import resolve_reference_model
from harness.reference.corpus import reference_corpus
from harness.scoring.causal import causal_token_logprobs
from harness.scoring.gradients import gradient_norms
from harness.scoring.text import truncate_words
from harness.scoring.membership import recall_scores, token_frequencies
from tasks.mink_membership.attacks import reference_scores
from tasks.mink_membership.neighbours import cached_neighbours
from record import add_output_flag, emit


@torch.no_grad()
def mimir_logprobs(model, ids: list[int]) -> list[float]:
    """MIMIR's `get_probabilities` for a text within the context: log p of tokens 2.. as floats."""
    input_ids = torch.tensor([ids])
    logits = model(input_ids, labels=input_ids).logits
    log_probabilities = torch.log_softmax(logits[:, :-1], dim=-1)
    return [log_probabilities[0, i, token].item() for i, token in enumerate(ids[1:])]


@torch.no_grad()
def mimir_conditional_ll(model, prefix_ids: list[int], ids: list[int]) -> float:
    labels = torch.tensor([prefix_ids + ids])
    targets = labels.clone()
    targets[:, : len(prefix_ids)] = -100
    return -model(labels, labels=targets).loss.item()


@torch.no_grad()
def mimir_neighbours(mlm, text: str, n_neighbours: int, fraction: float, rng: np.random.Generator) -> list[str]:
    """MIMIR's BERT `generate_neighbors_` (random strategy, in-place swap): a forward per position."""
    tok = mlm.tokenizer
    encoded = tok(text, truncation=True, max_length=mlm.context_length, return_offsets_mapping=True,
                  return_tensors="pt")
    ids = encoded.input_ids
    dropout = torch.nn.Dropout(p=0.7)
    best = {}
    for i in range(1, ids.shape[1]):
        embeds = mlm.model.get_input_embeddings()(ids)
        embeds = torch.cat((embeds[:, :i], dropout(embeds[:, i]).unsqueeze(0), embeds[:, i + 1:]), dim=1)
        probs = torch.softmax(mlm.model(inputs_embeds=embeds).logits, dim=2)
        original = probs[0, i, ids[0, i]].item()
        top_p, top_ids = torch.topk(probs[:, i], 6, dim=1)
        for p, cand in zip(top_p[0], top_ids[0]):
            if cand != ids[0, i]:
                best.setdefault(i, (cand.item(), p.item() / (1 - original)))
    positions = list(best)
    n_swap = min(max(1, int(ids.shape[1] * fraction)), len(positions))
    trials = [sorted(rng.choice(positions, n_swap, replace=False).tolist()) for _ in range(1000)]
    trials.sort(key=lambda chosen: -sum(best[i][1] for i in chosen))
    offsets = encoded.offset_mapping[0].tolist()
    out = []
    for chosen in trials[:n_neighbours]:
        text_out, end_before = "", 0
        for i in chosen:
            start, end = offsets[i]
            text_out += text[end_before:start] + tok.decode([best[i][0]]).replace("##", "")
            end_before = end
        out.append(text_out + text[end_before:])
    return out


@torch.no_grad()
def mimir_get_lls(lm, texts: list[str], batch_size: int = 4) -> list[float]:
    """MIMIR's `get_lls`: padded batches of 4, a `.item()` per token."""
    losses = []
    for start in range(0, len(texts), batch_size):
        batch = lm.tokenizer(texts[start:start + batch_size], return_tensors="pt", padding=True)
        logits = lm.model(batch.input_ids, attention_mask=batch.attention_mask).logits
        log_probabilities = torch.log_softmax(logits[:, :-1], dim=-1)
        for j in range(len(batch.input_ids)):
            values = [log_probabilities[j, t, batch.input_ids[j, t + 1]].item()
                      for t in range(int(batch.attention_mask[j].sum()) - 1)]
            losses.append(-float(np.mean(values)))
    return losses


def timed(function, repeats: int = 3):
    """The function's value and its best time of `repeats` runs (the first one pays the warm-up)."""
    best = math.inf
    for _ in range(repeats):
        started = time.perf_counter()
        value = function()
        best = min(best, time.perf_counter() - started)
    return value, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=128)
    parser.add_argument("--neighbours", type=int, default=25)
    parser.add_argument("--batch-size", type=int, default=16)
    add_output_flag(parser)
    args = parser.parse_args()
    torch.manual_seed(0)
    target = load(ModelSpec(resolve_reference_model("reference:xsum-gpt2-e30"), device="cpu"))
    reference = load(ModelSpec(resolve_reference_model("reference:xsum-gpt2-outside-e05"), device="cpu"))
    mlm = load(ModelSpec(resolve_reference_model("reference:mlm-bert-e05"), device="cpu"))
    documents = reference_corpus(0)
    texts = [cut for d in documents if (cut := truncate_words(d.text, 128))][: args.texts]
    keys = list(range(len(texts)))
    by_key = dict(zip(keys, texts))
    config = SimpleNamespace(stride=None, first_token="skip", recall_prefix_tokens=None, neighbours=args.neighbours,
                             neighbour_swap_fraction=0.05)
    shared, _ = causal_token_logprobs(target.model, target.tokenizer, texts, batch_size=args.batch_size,
                                      progress=False, add_start=False)
    own = dict(zip(keys, shared))
    tok = target.tokenizer
    report = {"texts": len(texts), "length_words": 128, "batch_size": args.batch_size,
              "threads": torch.get_num_threads(), "seconds": {}, "loop_over_membench": {}, "max_abs_difference": {}}

    def record(name, ours, loop, difference=None):
        report["seconds"][name] = {"membench": round(ours, 3), "mimir_loop": round(loop, 3)}
        report["loop_over_membench"][name] = round(loop / ours, 2)
        if difference is not None:
            report["max_abs_difference"][name] = float(f"{difference:.3g}")

    # ref
    ours, seconds = timed(lambda: reference_scores(reference, by_key, own, config, args.batch_size, False))
    loop, loop_seconds = timed(lambda: [-(-np.mean(mimir_logprobs(target.model, tok(t).input_ids))
                                          + np.mean(mimir_logprobs(reference.model, reference.tokenizer(t).input_ids)))
                                        for t in texts])
    record("ref", seconds, loop_seconds, max(abs(ours[k] - loop[k]) for k in keys))
    # recall: the first non-member as the prefix
    prefix = next(d.text for d in documents if not d.member)
    prefix = truncate_words(prefix, 64)
    ours, seconds = timed(lambda: recall_scores(target, by_key, own, prefix, config.recall_prefix_tokens,
                                                config.first_token == "score", args.batch_size, False)[0])
    prefix_ids = tok(prefix).input_ids
    loop, loop_seconds = timed(lambda: [mimir_conditional_ll(target.model, prefix_ids, tok(t).input_ids)
                                        / np.mean(mimir_logprobs(target.model, tok(t).input_ids)) for t in texts])
    record("recall", seconds, loop_seconds, max(abs(ours[k] - loop[k]) for k in ours))
    # dc_pdd: frequencies of the non-members (counted once, outside the timing)
    freqs = token_frequencies(tok, [d.text for d in documents if not d.member])

    def ours_dc_pdd():
        scored, _ = causal_token_logprobs(target.model, tok, texts, batch_size=args.batch_size, progress=False)
        return [m.dc_pdd_score(s.token_ids, s.logprobs, freqs) for s in scored]

    def loop_dc_pdd():
        out = []
        for t in texts:
            ids = [tok.eos_token_id] + tok(t).input_ids
            out.append(m.dc_pdd_score(np.array(ids[1:]), np.array(mimir_logprobs(target.model, ids)), freqs))
        return out

    ours, seconds = timed(ours_dc_pdd)
    loop, loop_seconds = timed(loop_dc_pdd)
    record("dc_pdd", seconds, loop_seconds, max(abs(a - b) for a, b in zip(ours, loop)))
    # ... and as the task runs it: the token log-probs given <|endoftext|> are LOSS's own (computed
    # once for LOSS, zlib, Min-K% and DC-PDD), so DC-PDD's own work is the formula
    with_start, _ = causal_token_logprobs(target.model, tok, texts, batch_size=args.batch_size, progress=False)
    ours, seconds = timed(lambda: [m.dc_pdd_score(s.token_ids, s.logprobs, freqs) for s in with_start])
    record("dc_pdd_in_task", seconds, loop_seconds, max(abs(a - b) for a, b in zip(ours, loop)))

    # ne: neighbours made afresh (a private cache folder) and scored
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        os.environ["MEMBENCH_CACHE"] = cache

        def ours_ne():
            found = cached_neighbours(mlm, texts, args.neighbours, 0.05, seed=0, batch_size=args.batch_size * 4,
                                      progress=False)
            flat = [n for group in found for n in group]
            causal_token_logprobs(target.model, tok, flat, batch_size=args.batch_size, progress=False,
                                  add_start=False)

        _, seconds = timed(ours_ne, repeats=1)  # a second run would read the neighbours' cache
    rng = np.random.default_rng(0)
    _, loop_seconds = timed(lambda: [mimir_get_lls(target, mimir_neighbours(mlm, t, args.neighbours, 0.05, rng))
                                     for t in texts], repeats=1)
    record("ne", seconds, loop_seconds)

    # gradnorm (p = inf), MIMIR's way: bare texts, first token unscored
    def loop_gradnorm():
        out = []
        for t in texts:
            target.model.zero_grad()
            ids = torch.tensor([tok(t).input_ids])
            logprobs = torch.log_softmax(target.model(ids).logits[0, :-1], -1)
            token_logprobs = torch.stack([logprobs[i, token] for i, token in enumerate(ids[0, 1:].tolist())])
            (-torch.mean(token_logprobs)).backward()
            norms = [param.grad.detach().norm(float("inf")) for param in target.model.parameters()
                     if param.grad is not None]
            out.append(torch.stack(norms).mean().item())
            target.model.zero_grad()
        return out

    ours, seconds = timed(lambda: gradient_norms(target.model, tok, texts, batch_size=args.batch_size,
                                                 add_start=False, progress=False))
    loop, loop_seconds = timed(loop_gradnorm)
    record("gradnorm", seconds, loop_seconds, float(np.max(np.abs(np.asarray(ours) - np.asarray(loop)))))
    emit(report, args.output)


if __name__ == "__main__":
    main()
