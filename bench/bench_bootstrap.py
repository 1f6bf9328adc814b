"""Speed of mink_membership's bootstrap AUC intervals against the rank-per-resample baseline, in one run.

For one (score, L) of the reference split (400 texts, 1,000 resamples, as every cell of the task):
  harness   `memorization.bootstrap_auc_interval`: the texts sorted once, each resample's Mann-Whitney
            U from how many times it drew each text (`resampled_auc`)
  baseline  the rank AUC of each resample (`rank_auc(labels[draws], scores[draws])`: SciPy's
            `rankdata` sorts every resample), what membench ran until issue 31
Both intervals must be identical (the AUCs are equal bit for bit); reported: seconds per interval
and the ratio baseline/harness. Scores: Gaussian, half of them with ties (rounded), so the tie
groups are exercised.

    python bench/bench_bootstrap.py [--texts 400] [--resamples 1000] [--repeats 20]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from harness.metrics import memorization as m
from record import add_output_flag, emit


def rank_interval(labels: np.ndarray, scores: np.ndarray, resamples: int) -> tuple[float | None, float | None]:
    draws = m.bootstrap_draws(len(labels), resamples, 0)
    return m.percentile_interval(m.rank_auc(labels[draws], scores[draws]), 0.95)


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=400)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=20)
    add_output_flag(parser)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    labels = np.repeat([1, 0], args.texts // 2)
    results = {}
    for name, scores in (("continuous", rng.normal(size=labels.size) + 0.3 * labels),
                         ("tied", np.round(rng.normal(size=labels.size) + 0.3 * labels, 1))):
        harness = m.bootstrap_auc_interval(labels, scores, args.resamples, 0.95, 0)
        baseline = rank_interval(labels, scores, args.resamples)
        assert harness == baseline, (name, harness, baseline)
        t_harness = best_of(lambda: m.bootstrap_auc_interval(labels, scores, args.resamples, 0.95, 0), args.repeats)
        t_baseline = best_of(lambda: rank_interval(labels, scores, args.resamples), args.repeats)
        results[name] = {"harness_s": round(t_harness, 4), "baseline_s": round(t_baseline, 4),
                         "ratio": round(t_baseline / t_harness, 2), "interval": harness}
    emit({"texts": args.texts, "resamples": args.resamples, **results}, args.output)


if __name__ == "__main__":
    main()
