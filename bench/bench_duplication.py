"""Memorization against duplication (epochs), model size and prompt length, on known truth: reference
GPT-2s this bench builds. Ishihara & Takahashi compared epochs and prompt lengths on their one 0.1B
newspaper GPT-2, and sizes only among general Japanese GPT-2s; size on one corpus is membench's question.

For each size (`--sizes`, layers x width; the reference build is 2x128) a GPT-2 is trained on the
English reference corpus's 200 members (`harness.reference.build`, the reference recipe otherwise:
first 250 words of each member, seed 0), saving a checkpoint after each of `--epochs` (and the
untrained one). Each checkpoint is evaluated pinned (`membench evaluate --reproducible`) with
`mink_membership` (the token log-probability attacks) and `paywall_memorization` (greedy, no
near-verbatim bound) on `--data reference`, and the bench records
- Min-K% AUC with k = 10 (the seed's focus) and k = 20 (the board's headline) at every prefix length;
- paywall's members' eidetic and approximate means against the non-members', and the members'
  approximate mean per bin of public (prompt) length (the bins of both groups are listed: None where
  a bin is the non-members' only).
The builds live in a temporary folder and are not shipped.

    python bench/bench_duplication.py --output bench/results/bench_duplication.json
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evaluations import evaluate_pinned, metric_value, rerun_pinned  # noqa: E402
from record import add_output_flag, emit  # noqa: E402

LENGTHS = ("32", "64", "128", "256", "512")


def evaluate(folder: Path, out: Path) -> tuple[dict, float]:
    """mink_membership and paywall_memorization of one checkpoint: the task entries by name, and seconds."""
    return evaluate_pinned(folder, "mink_membership,paywall_memorization",
                           ["--data", "reference", "--attacks", "loss,zlib,min_k,min_k_pp"], out)


def summary(entries: dict) -> dict:
    def value(task: str, name: str, **tags: str) -> float | None:
        return metric_value(entries[task], name, **tags)

    paywall = entries["paywall_memorization"]
    bins = sorted({(m["tags"]["bin"], m["tags"]["public_words"]) for m in paywall["metrics"]
                   if m["tags"].get("public_words")}, key=lambda b: int(b[0]))
    return {
        "min_k_10_auc": {length: value("mink_membership", "auc", score="min_k_10", length=length) for length in LENGTHS},
        "min_k_20_auc": {length: value("mink_membership", "auc", score="min_k_20", length=length) for length in LENGTHS},
        "paywall": {group: {"eidetic_mean": value("paywall_memorization", "eidetic_mean", group=group, bin="all"),
                            "approximate_mean": value("paywall_memorization", "approximate_mean", group=group,
                                                      bin="all")}
                    for group in ("members", "non_members")},
        "members_approximate_by_public_words": {
            words: value("paywall_memorization", "approximate_mean", group="members", bin=b, public_words=words)
            for b, words in bins}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", default="1,5,15,30,60", help="checkpoints to evaluate (epochs)")
    parser.add_argument("--sizes", default="1x64,2x128", help="model sizes, layers x width")
    add_output_flag(parser)
    args = parser.parse_args()
    status = rerun_pinned()  # builds as `membench reference build` makes them
    if status is not None:
        return status
    from harness.reference.build import BuildConfig, build, read_manifest
    from harness.reference.train import TrainConfig

    epochs = tuple(int(e) for e in args.epochs.split(","))
    report: dict = {"epochs": list(epochs), "sizes": {}}
    with tempfile.TemporaryDirectory(prefix="bench-duplication-") as tmp:
        for size in args.sizes.split(","):
            layers, width = (int(x) for x in size.split("x"))
            train = replace(TrainConfig(), n_layer=layers, n_embd=width, n_head=max(1, width // 32),
                            epochs=(0, *epochs))
            started = time.perf_counter()
            folder = build(BuildConfig("xsum", "members", train), folder=Path(tmp) / size)
            build_seconds = time.perf_counter() - started
            manifest = read_manifest(folder)
            checkpoints = {}
            for checkpoint in manifest["checkpoints"]:
                entries, seconds = evaluate(folder / checkpoint["folder"], Path(tmp) / f"{size}-{checkpoint['epoch']}")
                checkpoints[str(checkpoint["epoch"])] = {**summary(entries), "evaluate_s": round(seconds, 1)}
                print(size, checkpoint["epoch"], checkpoints[str(checkpoint["epoch"])]["min_k_10_auc"]["128"],
                      checkpoints[str(checkpoint["epoch"])]["paywall"]["members"], file=sys.stderr)
            report["sizes"][size] = {"layers": layers, "width": width, "heads": train.n_head,
                                     "training_tokens": manifest["n_training_tokens"],
                                     "epoch_mean_loss": manifest["epoch_mean_loss"],
                                     "build_s": round(build_seconds, 1), "checkpoints": checkpoints}
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
