"""Extraction risk as a probability on the reference GPT-2 (`reference:xsum-gpt2-e30`): speed against
plain scoring and sampling, and exactness against 10^5 draws of `model.generate`, in one run.

Texts: the reference corpus's documents, each cut into a prompt (its first --prompt-words words) and
a target (the next --target-words words). Scheme: --temperature, --top-k, --top-p.
  verbatim       `extraction_logprobs` (p_z of every target, one teacher-forced pass) against
                 `causal_token_logprobs` scoring the same prompt + target texts (target ratio <= 1.1)
  near_verbatim  `near_verbatim_bounds` at B = --beam-width on the first --near-n pairs against
                 `generate` drawing B continuations of each target's length per prompt (one call per
                 prompt, B rows; target ratio <= 1)
  monte_carlo    --draws seeded draws of --mc-tokens tokens from `generate` after one member's prompt;
                 p_z of every distinct draw (each must be > 0: generate never leaves the kept set), and
                 for the targets nearest p_z = 1e-1, 1e-2, 1e-3, 1e-4 their count's Clopper-Pearson 99%
                 interval, which must hold p_z; likewise the near-verbatim bound at --mc-threshold (0.6: at
                 3 tokens a higher one holds only the target itself, as " 45," against " 47,") must lie
                 below the upper end of its frequency's interval and above p_z. The targets are chosen
                 among the distinct draws of a pilot of --pilot-draws draws under another seed, so that
                 which sequences are checked does not depend on the draws that count them (a target
                 picked from the counted draws has appeared at least once, which biases a rare one's
                 count up). The draws run the prompt once and sample on copies of its key/value cache
                 (the same draws as `generate` from the whole prompt). The script exits 1 when a check fails.
Each timing is the fastest of --repeats interleaved rounds; `paired_median` is the median over the rounds of
each round's ratio (on a shared machine one slow round moves the fastest-of ratio, not the median).
End-of-text does not stop `generate` (every draw has the target's length, as the probabilities count it).

log10 p_z is floored at -1000 where p_z = 0 (a target token outside the kept set), as paywall_memorization
reports it.

    python bench/bench_extraction.py [--n 200] [--draws 100000] [--pilot-draws 20000] [--device cpu]
        [--output FILE]
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import time

import numpy as np
import torch
from statsmodels.stats.proportion import proportion_confint

from harness.metrics.memorization import approximate_memorization
from harness.model.loading import ModelSpec, load
from harness.reference.checkpoints import resolve_reference_model
from harness.reference.corpus import reference_corpus
from harness.scoring.causal import causal_token_logprobs, encode_with_bos
from harness.scoring.conditional import _cache_argument
from harness.scoring.constrained_beam import near_verbatim_bound_ids, near_verbatim_bounds
from harness.scoring.extraction import SamplingScheme, extraction_logprobs, extraction_logprobs_ids, log_pz
from harness.metrics.extraction_report import floored_log10
from harness.scoring.text import truncate_words
from record import add_output_flag, emit

MODEL = "reference:xsum-gpt2-e30"


def pairs(n: int, prompt_words: int, target_words: int) -> tuple[list[str], list[str], list[bool]]:
    """(prompts, targets, member flags) of the first n documents long enough to cut."""
    prompts, targets, members = [], [], []
    for document in reference_corpus(0):
        prompt = truncate_words(document.text, prompt_words)
        whole = truncate_words(document.text, prompt_words + target_words)
        if prompt and whole:
            prompts.append(prompt)
            targets.append(whole[len(prompt):])
            members.append(document.member)
        if len(prompts) == n:
            break
    return prompts, targets, members


@torch.no_grad()
def sample_continuations(model, tokenizer, prompts: list[str], lengths: list[int], scheme: SamplingScheme,
                         width: int) -> None:
    """`width` sampled continuations of each prompt, one generate call per prompt (the baseline)."""
    device = next(model.parameters()).device
    encoded, _ = encode_with_bos(tokenizer, prompts)
    for ids, length in zip(encoded, lengths):
        rows = torch.tensor([ids] * width, device=device)
        model.generate(input_ids=rows, attention_mask=torch.ones_like(rows), max_new_tokens=length,
                       pad_token_id=0, **scheme.generate_kwargs())


def interval(count: int, total: int) -> tuple[float, float]:
    low, high = proportion_confint(count, total, alpha=0.01, method="beta")  # Clopper-Pearson 99%
    return float(low), float(high)


@torch.no_grad()
def draw(model, ids: list[int], scheme: SamplingScheme, draws: int, tokens: int, seed: int,
         chunk: int = 5_000) -> dict[tuple[int, ...], int]:
    """How often each continuation of `tokens` tokens came out of `draws` seeded `generate` draws. The prompt
    but its last token runs once; each chunk of rows starts from a copy of its key/value cache (generate then
    reads the last prompt token and samples), so no row recomputes the shared prompt."""
    device = next(model.parameters()).device
    name = _cache_argument(model)  # `cache` in transformers 5, `past_key_values` before
    out = model(input_ids=torch.tensor([ids[:-1]], device=device), use_cache=True)
    prefix = getattr(out, "cache", None) or out.past_key_values
    torch.manual_seed(seed)
    counts: dict[tuple[int, ...], int] = {}
    for start in range(0, draws, chunk):
        size = min(chunk, draws - start)
        cache = copy.deepcopy(prefix)
        cache.batch_repeat_interleave(size)
        rows = torch.tensor([ids] * size, device=device)
        out = model.generate(input_ids=rows, attention_mask=torch.ones_like(rows), max_new_tokens=tokens,
                             pad_token_id=0, **{name: cache}, **scheme.generate_kwargs())
        for row in out[:, len(ids):].tolist():
            counts[tuple(row)] = counts.get(tuple(row), 0) + 1
    return counts


@torch.no_grad()
def monte_carlo(lm, prompt: str, scheme: SamplingScheme, draws: int, pilot_draws: int, tokens: int,
                threshold: float, beam_width: int) -> dict:
    """The exactness check of the module docstring."""
    model, tokenizer = lm.model, lm.tokenizer
    ids = encode_with_bos(tokenizer, [prompt])[0][0]
    pilot = sorted(draw(model, ids, scheme, pilot_draws, tokens, seed=99))
    started = time.perf_counter()
    counts = draw(model, ids, scheme, draws, tokens, seed=1234)
    sampling_seconds = time.perf_counter() - started
    distinct = sorted(counts)
    scored = sorted(set(distinct) | set(pilot))
    values = log_pz(extraction_logprobs_ids(model, [ids] * len(scored), [list(s) for s in scored], scheme,
                                            batch_size=256))
    by_sequence = dict(zip(scored, values))
    texts = {s: tokenizer.decode(list(s), skip_special_tokens=True) for s in scored}
    drawn_positive = bool(all(np.isfinite(by_sequence[s]) for s in distinct))
    rows, ok = [], drawn_positive
    for level in (1e-1, 1e-2, 1e-3, 1e-4):
        target = min(pilot, key=lambda s: abs(by_sequence[s] - math.log(level)))
        pz = math.exp(by_sequence[target])
        count = counts.get(target, 0)
        low, high = interval(count, draws)
        near = near_verbatim_bound_ids(model, tokenizer, ids, list(target), scheme, threshold, beam_width)
        near_count = sum(c for s, c in counts.items() if approximate_memorization(texts[s], texts[target]) >= threshold)
        near_low, near_high = interval(near_count, draws)
        inside = low <= pz <= high
        bound_ok = by_sequence[target] - 1e-5 <= near.log_bound and math.exp(near.log_bound) <= near_high
        ok &= inside and bound_ok
        rows.append({"target": texts[target], "p_z": pz, "count": count, "interval_99": [low, high],
                     "inside": inside, "near_verbatim_bound": math.exp(near.log_bound),
                     "near_verbatim_frequency": near_count / draws, "near_verbatim_interval_99": [near_low, near_high],
                     "bound_between_pz_and_interval": bound_ok})
    return {"prompt": prompt, "draws": draws, "pilot_draws": pilot_draws, "tokens": tokens, "threshold": threshold,
            "beam_width": beam_width, "distinct_draws": len(distinct), "every_draw_has_positive_pz": drawn_positive,
            "sum_pz_of_distinct_draws": float(sum(math.exp(by_sequence[s]) for s in distinct)),
            "sampling_seconds": round(sampling_seconds, 2), "targets": rows, "passed": bool(ok)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200, help="prompt/target pairs for the verbatim timing")
    parser.add_argument("--near-n", type=int, default=20, help="pairs for the near-verbatim timing")
    parser.add_argument("--prompt-words", type=int, default=32)
    parser.add_argument("--target-words", type=int, default=16)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=40)
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--beam-width", type=int, default=20)
    parser.add_argument("--threshold", type=float, default=0.9, help="near-verbatim threshold of the timing")
    parser.add_argument("--mc-threshold", type=float, default=0.6,
                        help="near-verbatim threshold of the exactness check")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--draws", type=int, default=100_000)
    parser.add_argument("--pilot-draws", type=int, default=20_000,
                        help="draws (another seed) among which the checked targets are chosen")
    parser.add_argument("--mc-tokens", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    add_output_flag(parser)
    args = parser.parse_args()
    lm = load(ModelSpec(resolve_reference_model(MODEL), device=args.device))
    lm.model.generation_config.eos_token_id = None  # end-of-text does not stop a draw
    scheme = SamplingScheme(args.temperature, args.top_k, args.top_p).check()
    prompts, targets, members = pairs(args.n, args.prompt_words, args.target_words)
    texts = [p + t for p, t in zip(prompts, targets)]
    target_lengths = [len(ids) for ids in lm.tokenizer(targets, add_special_tokens=False)["input_ids"]]
    m = args.near_n
    functions = {
        "extraction_logprobs": lambda: extraction_logprobs(lm.model, lm.tokenizer, prompts, targets, scheme,
                                                           batch_size=args.batch_size, progress=False),
        "causal_token_logprobs": lambda: causal_token_logprobs(lm.model, lm.tokenizer, texts,
                                                               batch_size=args.batch_size, progress=False),
        "near_verbatim_bounds": lambda: near_verbatim_bounds(lm.model, lm.tokenizer, prompts[:m], targets[:m], scheme,
                                                             args.threshold, args.beam_width, progress=False),
        "sampled_continuations": lambda: sample_continuations(lm.model, lm.tokenizer, prompts[:m], target_lengths[:m],
                                                              scheme, args.beam_width),
    }
    functions["extraction_logprobs"]()  # warm-up
    times: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(args.repeats):
        for name, function in functions.items():
            started = time.perf_counter()
            function()
            times[name].append(time.perf_counter() - started)
    seconds = {name: min(values) for name, values in times.items()}
    scores, _ = extraction_logprobs(lm.model, lm.tokenizer, prompts, targets, scheme, batch_size=args.batch_size,
                                    progress=False)
    values = log_pz(scores)
    bounds = near_verbatim_bounds(lm.model, lm.tokenizer, prompts[:m], targets[:m], scheme, args.threshold,
                                  args.beam_width, progress=False)
    member_prompt = next(p for p, member in zip(prompts, members) if member)
    check = monte_carlo(lm, member_prompt, scheme, args.draws, args.pilot_draws, args.mc_tokens, args.mc_threshold,
                        args.beam_width)
    report = {
        "model": MODEL, "device": lm.device, "threads": torch.get_num_threads(), "scheme": scheme.as_dict(),
        "pairs": len(prompts), "near_pairs": m, "prompt_words": args.prompt_words, "target_words": args.target_words,
        "batch_size": args.batch_size, "beam_width": args.beam_width, "threshold": args.threshold,
        "repeats": args.repeats,
        "seconds": {name: round(value, 3) for name, value in seconds.items()},
        "all_rounds_seconds": {name: [round(v, 3) for v in values] for name, values in times.items()},
        "extraction_over_scoring": round(seconds["extraction_logprobs"] / seconds["causal_token_logprobs"], 3),
        "near_verbatim_over_sampling": round(seconds["near_verbatim_bounds"] / seconds["sampled_continuations"], 3),
        "paired_median": {  # the median over rounds of each round's ratio: robust to a round slowed by the machine
            "extraction_over_scoring": round(float(np.median(np.divide(times["extraction_logprobs"],
                                                                       times["causal_token_logprobs"]))), 3),
            "near_verbatim_over_sampling": round(float(np.median(np.divide(times["near_verbatim_bounds"],
                                                                           times["sampled_continuations"]))), 3)},
        "median_log10_pz": {"members": float(np.median(floored_log10(values[np.array(members)]))),
                            "non_members": float(np.median(floored_log10(values[~np.array(members)])))},
        "bounds_at_least_pz": bool(all(b.log_bound >= v - 1e-4 for b, v in zip(bounds, values[:m]))),
        "monte_carlo": check,
    }
    emit(report, args.output)
    return 0 if check["passed"] and report["bounds_at_least_pz"] else 1


if __name__ == "__main__":
    sys.exit(main())
