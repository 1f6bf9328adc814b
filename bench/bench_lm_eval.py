"""Per-token scoring throughput of membench against lm-eval's `loglikelihood_rolling`, in one run.

On the final reference GPT-2 (30 epochs) and the 400 reference texts cut to L words (default 48, which
fits the model's 512-token context; a text that does not is left out, so both score
every text in one window):
  membench  `causal_token_logprobs` (length-sorted batches, prefix sharing), as mink_membership
            runs it (with the Min-K%++ distribution statistics) and without them
  lm-eval   `HFLM.loglikelihood_rolling` on the same texts, same batch size, float32, CPU
Both condition the first token on <|endoftext|> and score every token; the per-text sums must
agree (the largest difference is reported). Reported: scored tokens per second of each, and the
ratio membench / lm-eval; the fastest of `--repeats` interleaved rounds.

    python bench/bench_lm_eval.py [--batch-size 16] [--repeats 3] [--length 64]

lm-eval is membench's `lm-eval` extra (and in the test extra): `pip install -e ".[lm-eval]"`.
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np
import torch

from harness.model.loading import ModelSpec, load
from harness.reference.build import BuildConfig, build, checkpoint_folders
from harness.reference.corpus import reference_corpus
from harness.scoring.causal import causal_token_logprobs
from harness.scoring.text import truncate_words
from record import add_output_flag, emit


def membench_sums(lm, texts, batch_size, distribution_stats):
    scores, _ = causal_token_logprobs(lm.model, lm.tokenizer, texts, batch_size=batch_size, progress=False,
                                      distribution_stats=distribution_stats)
    return np.array([float(s.logprobs.sum()) for s in scores])


def lm_eval_sums(harness_lm, texts):
    from lm_eval.api.instance import Instance

    requests = [Instance(request_type="loglikelihood_rolling", doc={}, arguments=(text,), idx=0) for text in texts]
    return np.array(harness_lm.loglikelihood_rolling(requests, disable_tqdm=True), dtype=float)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--length", type=int, default=48)
    add_output_flag(parser)
    args = parser.parse_args()
    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    from lm_eval.models.huggingface import HFLM

    folder = checkpoint_folders(build(BuildConfig()))[-1]
    lm = load(ModelSpec(str(folder), device="cpu", dtype="float32"))
    harness_lm = HFLM(pretrained=str(folder), batch_size=args.batch_size, device="cpu", dtype="float32")
    cuts = [cut for d in reference_corpus(0) if (cut := truncate_words(d.text, args.length))]
    # texts that fit the context with their start token: longer ones are windowed differently (see the task card)
    counts = [len(ids) for ids in lm.tokenizer(cuts, add_special_tokens=False)["input_ids"]]
    texts = [text for text, n in zip(cuts, counts) if n + 1 <= lm.context_length]
    tokens = sum(n for n in counts if n + 1 <= lm.context_length)
    runs = {"membench_mink": lambda: membench_sums(lm, texts, args.batch_size, True),
            "membench_logprobs_only": lambda: membench_sums(lm, texts, args.batch_size, False),
            "lm_eval_rolling": lambda: lm_eval_sums(harness_lm, texts)}
    for run in runs.values():  # warm-up
        run()
    seconds, sums = {name: [] for name in runs}, {}
    for _ in range(args.repeats):
        for name, run in runs.items():
            started = time.perf_counter()
            sums[name] = run()
            seconds[name].append(time.perf_counter() - started)
    best = {name: min(values) for name, values in seconds.items()}
    report = {
        "model": folder.name, "texts": len(texts), "length_words": args.length, "scored_tokens": tokens,
        "batch_size": args.batch_size, "threads": torch.get_num_threads(),
        "seconds": {k: round(v, 3) for k, v in best.items()},
        "tokens_per_second": {k: round(tokens / v) for k, v in best.items()},
        "membench_mink_over_lm_eval": round(best["lm_eval_rolling"] / best["membench_mink"], 2),
        "membench_logprobs_only_over_lm_eval": round(best["lm_eval_rolling"] / best["membench_logprobs_only"], 2),
        "max_abs_difference_of_sums": float(np.max(np.abs(sums["membench_mink"] - sums["lm_eval_rolling"]))),
    }
    emit(report, args.output)


if __name__ == "__main__":
    main()
