"""What keeping freed memory in the process (`harness/run/heap.py`) saves, measured in one run.

`membench evaluate --tasks mink_membership` (all 400 reference texts, every prefix length,
`--no-cache`) on the final (30-epoch) reference GPT-2, one process with --threads threads, each
configuration a fresh command:
  kept      membench as it runs: glibc's malloc keeps freed memory for the next batch
  returned  glibc's defaults (`GLIBC_TUNABLES=glibc.malloc.mmap_max=65536`, which membench leaves
            alone): large blocks mapped fresh and handed back to the kernel after each tensor
Rounds interleave the two (a slow spell of the machine hits both alike); the fastest round of each
is reported: the command's wall time, its minor page faults and its peak resident size (`wait4`),
and whether the metrics and the samples are identical (they must be: where memory comes from
changes no arithmetic).

    python bench/bench_heap.py [--repeats 2] [--threads 2] [--output bench/results/bench_heap.json]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench_parallel import run_once
from harness.reference.build import BuildConfig
from harness.reference.checkpoints import resolve_reference_model
from record import add_output_flag, emit

GLIBC_DEFAULTS = {"GLIBC_TUNABLES": "glibc.malloc.mmap_max=65536"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    add_output_flag(parser)
    args = parser.parse_args()
    config = BuildConfig()
    model = Path(resolve_reference_model("reference:xsum-gpt2-e30"))  # the shipped weights
    settings = {k: v for k, v in config.task_settings().items() if k in ("data", "language", "reference_seed")}
    configurations = {"kept": {}, "returned": GLIBC_DEFAULTS}
    runs: dict[str, list[dict]] = {name: [] for name in configurations}
    with tempfile.TemporaryDirectory(prefix="membench-bench-heap-") as scratch:
        for repeat in range(args.repeats):
            for name, environment in configurations.items():
                run = run_once(1, args.threads, model, settings, Path(scratch) / f"{name}-{repeat}", environment)
                runs[name].append(run)
                print(f"round {repeat + 1} {name}: {run['seconds']:.1f} s, {run['minor_faults']:,} minor faults, "
                      f"peak {run['max_rss_bytes'] / 1e9:.2f} GB", file=sys.stderr, flush=True)
    best = {name: min(values, key=lambda run: run["seconds"]) for name, values in runs.items()}
    kept, returned = best["kept"], best["returned"]
    report = {
        "model": model.name, "task": "mink_membership", "threads": args.threads, "repeats": args.repeats,
        "seconds": {name: round(run["seconds"], 2) for name, run in best.items()},
        "minor_faults": {name: run["minor_faults"] for name, run in best.items()},
        "max_rss_bytes": {name: run["max_rss_bytes"] for name, run in best.items()},
        "speedup_kept_over_returned": round(returned["seconds"] / kept["seconds"], 3),
        "identical": kept["metrics"] == returned["metrics"] and kept["samples"] == returned["samples"],
    }
    emit(report, args.output)


if __name__ == "__main__":
    main()
