"""What `--preset paper` changes, measured: each task's paper mode against its default on the same
reference checkpoints, in one run.

- `paywall_memorization` (Ishihara & Takahashi: generation until the first sentence ends, against
  membench's budget of the reference's token count) on the English and Japanese reference GPT-2s
  after 1 and 30 epochs, `--data reference` / `reference:ja`: the members' and non-members'
  approximate and eidetic means, and how many generations found no sentence end. The near-verbatim
  bound is off in both runs (`--near-verbatim-beam 0`: it does not depend on where a generation ends).
- `mink_membership` (Ishihara & Takahashi: the headline at k = 10, prefixes within the 250 words each
  member was trained on) on the same four checkpoints, LOSS, zlib, Min-K% and Min-K%++ only (the
  headline's attacks): the headline AUC, and Min-K% and Min-K%++ AUC at both k at 128 words.
- `probe_memorization` (Rosa et al.: word-level units, the probe tuned on 500 held-out sentences) on
  the shipped MiniLM encoder with UD English EWT dev as pool and test as evaluation
  (../shared/data/ud_english_ewt, as the task card's table), 3 repetitions at 100, 1,000 and all
  sentences: seen, unseen accuracy and their gap per representation and probe, and the tuned settings.
- `weat` (the seed's d over the population standard deviation) on the shipped MiniLM encoder and the
  trained reference masked LM: mean |d| over all tests, static and contextual.

Each run is `membench evaluate --reproducible --no-cache` of the shipped weights, from a pinned bench
process (so the record names the kernels they ran on). `--tasks` runs some of the tasks, one record per
paper:

    python bench/bench_paper_presets.py --tasks paywall_memorization,mink_membership \
        --output bench/results/bench_paper_presets--ishihara.json
    python bench/bench_paper_presets.py --tasks probe_memorization --output bench/results/bench_paper_presets--probe.json
    python bench/bench_paper_presets.py --tasks weat --output bench/results/bench_paper_presets--weat.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evaluations import evaluate_pinned, metric_value, rerun_pinned  # noqa: E402
from record import add_output_flag, emit  # noqa: E402

PAYWALL = {"xsum-gpt2-e01": ("xsum-gpt2", ["--data", "reference"]),
           "xsum-gpt2-e30": ("xsum-gpt2", ["--data", "reference"]),
           "ja-gpt2-e01": ("ja-gpt2", ["--data", "reference:ja", "--language", "ja"]),
           "ja-gpt2-e30": ("ja-gpt2", ["--data", "reference:ja", "--language", "ja"])}
MINK = {name: (build, [*flags, "--attacks", "loss,zlib,min_k,min_k_pp"]) for name, (build, flags) in PAYWALL.items()}
WEAT = {"mlm-bert-e05": "mlm-bert"}
TASKS = ("paywall_memorization", "mink_membership", "probe_memorization", "weat")
EWT = Path(__file__).resolve().parents[2] / "shared" / "data" / "ud_english_ewt"
PROBE = ["--train", str(EWT / "en_ewt-ud-dev.conllu"), "--eval", str(EWT / "en_ewt-ud-test.conllu"),
         "--repetitions", "3", "--train-sizes", "100,1000,all"]


def shipped(build: str, checkpoint: str) -> Path:
    """The shipped folder of `checkpoint` of the reference build named `build`."""
    from harness.reference.recipes import reference_recipes
    from harness.reference.shipped import shipped_folder

    [recipe] = [recipe for recipe, _ in reference_recipes() if recipe.name == build]
    return shipped_folder(recipe.folder_name()) / checkpoint


def paywall_summary(entry: dict) -> dict:
    return {"counts": entry["counts"],
            **{f"{name}_{group}": metric_value(entry, name, group=group, bin="all")
               for name in ("approximate_mean", "eidetic_mean") for group in ("members", "non_members")}}


def mink_summary(entry: dict) -> dict:
    head = entry["headline"]
    return {"headline": head["label"], "headline_auc": metric_value(entry, "auc", **head["tags"]),
            "lengths": entry["config"]["lengths"],
            **{f"auc_{score}_128": metric_value(entry, "auc", score=score, length="128")
               for score in ("min_k_10", "min_k_20", "min_k_pp_10", "min_k_pp_20")}}


def probe_summary(entry: dict) -> dict:
    found = {"counts": entry["counts"], "tuning": entry["info"]["tuning"]}
    for rep in ("static", "contextual"):
        for probe in ("linear", "mlp"):
            for size in ("100", "1000", "all"):
                tags = {"representation": rep, "probe": probe, "train_size": size}
                found[f"{rep}/{probe}/{size}"] = {name: metric_value(entry, name, **tags) for name in
                                                  ("seen_accuracy", "unseen_accuracy", "memorization_effect",
                                                   "accuracy", "selectivity")}
    return found


def weat_summary(entry: dict) -> dict:
    return {f"mean_abs_d_{rep}": metric_value(entry, "mean_abs_d", representation=rep, group="all")
            for rep in ("static", "contextual")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default=",".join(TASKS),
                        help=f"comma-separated tasks to run (default: all of {', '.join(TASKS)})")
    add_output_flag(parser)
    args = parser.parse_args()
    tasks = [name.strip() for name in args.tasks.split(",") if name.strip()]
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown or not tasks:
        print(f"error: --tasks takes names among {', '.join(TASKS)}; got {args.tasks!r}", file=sys.stderr)
        return 2
    status = rerun_pinned()  # the record names the kernels its evaluations ran on
    if status is not None:
        return status
    from harness.reference.pretrained import minilm_folder

    report: dict = {task: {} for task in tasks}
    runs = [("paywall_memorization", name, shipped(build, name), [*flags, "--near-verbatim-beam", "0"], paywall_summary)
            for name, (build, flags) in PAYWALL.items()]
    runs += [("mink_membership", name, shipped(build, name), flags, mink_summary) for name, (build, flags) in MINK.items()]
    runs += [("weat", name, shipped(build, name), [], weat_summary) for name, build in WEAT.items()]
    runs.append(("weat", "all-MiniLM-L6-v2", minilm_folder(), [], weat_summary))
    runs.append(("probe_memorization", "all-MiniLM-L6-v2", minilm_folder(), PROBE, probe_summary))
    runs = [run for run in runs if run[0] in report]
    with tempfile.TemporaryDirectory(prefix="bench-presets-") as tmp:
        for task, name, folder, flags, summarize in runs:
            found = {}
            for preset in ("default", "paper"):
                entries, seconds = evaluate_pinned(folder, task, [*flags, "--preset", preset],
                                                   Path(tmp) / f"{task}-{name}-{preset}")
                entry = entries[task]
                found[preset] = {**summarize(entry), "changed_settings": entry["changed_settings"],
                                 "evaluate_s": round(seconds, 1)}
            report[task][name] = found
            print(task, name, json.dumps(found), file=sys.stderr)
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
