"""Speed of the harness's batched greedy generation against one article at a time, in one run.

On the final (30-epoch) English reference model and the paywall examples of the English reference corpus
(`load_paywall_data("reference", "en", 200, 0, None)`, the first --n of them), with the task's
budgets (the token count of each example's continuation prefix + reference):
  batched        `greedy_continuations` at --batch-size (default 16): prompts sorted by budget and
                 length, left-padded, one `generate` call per batch
  one_at_a_time  `greedy_continuations` at batch size 1: one `generate` call per article, with the
                 same prompt cut and budgets, so the outputs must be identical
Each is timed in --repeats interleaved rounds (so a slow spell of the machine hits both alike) and
the fastest round is reported, with the ratio one_at_a_time / batched (target >= 2) and whether
the outputs were identical in every round (the script exits 1 if not).

    python bench/bench_generation.py [--n 300] [--batch-size 16] [--repeats 3] [--device cpu]

The reference model is read from (or built into, which takes minutes) the membench cache:
$MEMBENCH_CACHE, else ~/.cache/membench.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from harness.model.loading import ModelSpec, load
from harness.reference.build import build, checkpoint_folders, reference_builds
from harness.scoring.generation import greedy_continuations
from tasks.paywall_memorization.data import load_paywall_data
from record import add_output_flag, emit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=300, help="the first N paywall examples")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    add_output_flag(parser)
    args = parser.parse_args()
    torch.manual_seed(0)
    folder = checkpoint_folders(build(reference_builds()[0]))[-1]
    lm = load(ModelSpec(str(folder), device=args.device))
    examples = load_paywall_data("reference", "en", 200, 0, None).examples[: args.n]
    prompts = [e.prompt for e in examples]
    budgets = [len(ids) for ids in lm.tokenizer([e.continuation_prefix + e.reference for e in examples],
                                                add_special_tokens=False)["input_ids"]]

    def run(batch_size: int) -> list[str]:
        outputs, _ = greedy_continuations(lm.model, lm.tokenizer, prompts, budgets, batch_size=batch_size,
                                          progress=False)
        return outputs

    greedy_continuations(lm.model, lm.tokenizer, prompts[:8], budgets[:8], progress=False)  # warm-up
    functions = {"batched": args.batch_size, "one_at_a_time": 1}
    times: dict[str, list[float]] = {name: [] for name in functions}
    identical = True
    for _ in range(args.repeats):
        outputs = {}
        for name, batch_size in functions.items():
            started = time.perf_counter()
            outputs[name] = run(batch_size)
            times[name].append(time.perf_counter() - started)
        identical &= outputs["batched"] == outputs["one_at_a_time"]
    _, info = greedy_continuations(lm.model, lm.tokenizer, prompts, budgets, batch_size=args.batch_size,
                                   progress=False)
    seconds = {name: min(values) for name, values in times.items()}
    report = {
        "model": folder.name, "device": lm.device, "threads": torch.get_num_threads(),
        "examples": len(examples), "batch_size": args.batch_size, "repeats": args.repeats,
        "new_tokens": sum(min(b, info.max_new_tokens_cap) for b in budgets),
        "generation": info.as_dict(),
        "seconds": {name: round(value, 3) for name, value in seconds.items()},
        "all_rounds_seconds": {name: [round(v, 3) for v in values] for name, values in times.items()},
        "one_at_a_time_over_batched": round(seconds["one_at_a_time"] / seconds["batched"], 2),
        "outputs_identical": identical,
    }
    emit(report, args.output)
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
