"""What `--preset paper` changes, measured: each task's paper mode against its default on the same
reference checkpoints, in one run.

- `paywall_memorization` (Ishihara & Takahashi: generation cut where its first sentence ends, against
  membench's budget of the reference's token count) on the English and Japanese reference GPT-2s
  after 1 and 30 epochs, `--data reference` / `reference:ja`: the members' and non-members'
  approximate and eidetic means, and how many generations found no sentence end. The near-verbatim
  bound is off in both runs (`--near-verbatim-beam 0`: it does not depend on where a generation ends).
- `mink_membership` (Ishihara & Takahashi: the headline at k = 10; prefixes of 32 to 128 words in English,
  within the 250 words each English member was trained on, and the paper's 32 to 512 in Japanese, whose
  members were trained whole) on the same four checkpoints, LOSS, zlib, Min-K% and Min-K%++ only (the
  headline's attacks): the headline AUC, Min-K% and Min-K%++ AUC at both k at 128 words, and per prefix
  length the texts kept and Min-K%'s AUC and TPR at 10% FPR at both k (the paper's Table 4).
- `probe_memorization` (Rosa et al.: word-level units, the probe tuned on 500 held-out sentences) on
  the shipped MiniLM encoder with UD English EWT dev as pool and test as evaluation
  (../shared/data/ud_english_ewt, as the task card's table), 3 repetitions at 100, 1,000 and all
  sentences: seen, unseen accuracy (and their evaluation tokens) and their gap per representation and
  probe, the tuned settings, and the paper mode's tuning-set words (neither seen nor unseen).
- `weat` (Yoon & Lee: their seven tests, d over the population standard deviation, the static headline)
  on the shipped MiniLM encoder, the trained reference masked LM and the reference T5s, dense and
  sparse (the seed's comparison): mean |d| over all tests, static and contextual, and in the
  headline's representation mean |d| per group and each test's d and s(X, Y, A, B), the statistic
  the seed names.
- `privacy_extraction` (Yoon & Lee: batch 60, their set sizes, one fine-tuning per experiment) on the
  shipped reference T5s, dense (`t5-ref`) and sparse (`t5-ref-sparse70`), at the reference job's
  fine-tuning settings (learning rate 1e-3, 40 / 96 source / target tokens: the T5 build's
  `task_settings`) with one fine-tuning seed (42), in three modes: the default (one joint fine-tuning),
  `--finetunes separate` alone, and `--preset paper` at a fifth of the paper's set sizes (2,000 unique
  strings and 2,000 persons, not 10,000: one paper-mode run of `t5-ref` at 1,000 took 388 s of a 2-core
  CPU, so at 10,000 one would take about an hour; at 2,000 the whole record takes about half an hour):
  per epoch the memorization-45 and unique subset score and exact match, leakage epsilon, the persons'
  exact match, and at 8 epochs each field's subset score and exact match above the held-out persons',
  with each fine-tuning's rows and steps.

Each run is `membench evaluate --reproducible --no-cache` of the shipped weights, from a pinned bench
process (so the record names the kernels they ran on). `--tasks` runs some of the tasks, one record per
paper:

    python bench/bench_paper_presets.py --tasks paywall_memorization,mink_membership \
        --output bench/results/bench_paper_presets--ishihara.json
    python bench/bench_paper_presets.py --tasks probe_memorization --output bench/results/bench_paper_presets--probe.json
    python bench/bench_paper_presets.py --tasks weat --output bench/results/bench_paper_presets--weat.json
    python bench/bench_paper_presets.py --tasks privacy_extraction --output bench/results/bench_paper_presets--privacy.json
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
WEAT = {"mlm-bert-e05": "mlm-bert", "t5-ref": "t5-ref", "t5-ref-sparse70": "t5-ref"}
TASKS = ("paywall_memorization", "mink_membership", "probe_memorization", "weat", "privacy_extraction")
EWT = Path(__file__).resolve().parents[2] / "shared" / "data" / "ud_english_ewt"
PROBE = ["--train", str(EWT / "en_ewt-ud-dev.conllu"), "--eval", str(EWT / "en_ewt-ud-test.conllu"),
         "--repetitions", "3", "--train-sizes", "100,1000,all"]
PRIVACY = ("t5-ref", "t5-ref-sparse70")  # the shipped reference T5s (build `t5-ref`)
PRIVACY_SCALE = "2000"  # unique strings and persons of the paper mode (the paper's 10,000: the module docstring)
PRESETS = {"default": ["--preset", "default"], "paper": ["--preset", "paper"]}  # the modes of every other task
PRIVACY_MODES = {"default": ["--preset", "default"], "separate": ["--preset", "default", "--finetunes", "separate"],
                 "paper": ["--preset", "paper", "--n-unique", PRIVACY_SCALE, "--n-persons", PRIVACY_SCALE]}


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
    """The headline, Min-K% and Min-K%++ AUC at both k at 128 words, and per prefix length of the run (as the
    seed's Table 4) the texts kept and Min-K%'s AUC and TPR at 10% FPR at k = 10 and 20 (None where no text)."""
    head = entry["headline"]
    counts = entry["counts"]
    return {"headline": head["label"], "headline_auc": metric_value(entry, "auc", **head["tags"]),
            "lengths": entry["config"]["lengths"],
            **{f"auc_{score}_128": metric_value(entry, "auc", score=score, length="128")
               for score in ("min_k_10", "min_k_20", "min_k_pp_10", "min_k_pp_20")},
            "by_length": {str(length): {"members": counts[f"members@{length}"],
                                        "nonmembers": counts[f"nonmembers@{length}"],
                                        **{f"{name}_min_k_{k}": metric_value(entry, name, score=f"min_k_{k}",
                                                                             length=str(length))
                                           for k in (10, 20) for name in ("auc", "tpr@0.1fpr")}}
                          for length in entry["config"]["lengths"]}}


def probe_summary(entry: dict) -> dict:
    """The counts (the paper mode's with its tuning set: the tuning sentences' word types and the evaluation
    tokens of those types, neither seen nor unseen), the tuning, and per (representation, probe, size) the
    accuracies, the gap, and the evaluation tokens of seen and of unseen words over the repetitions."""
    found = {"counts": entry["counts"], "tuning": entry["info"]["tuning"]}
    for rep in ("static", "contextual"):
        for probe in ("linear", "mlp"):
            for size in ("100", "1000", "all"):
                tags = {"representation": rep, "probe": probe, "train_size": size}
                found[f"{rep}/{probe}/{size}"] = {name: metric_value(entry, name, **tags) for name in
                                                  ("seen_accuracy", "unseen_accuracy", "memorization_effect",
                                                   "accuracy", "selectivity")}
                found[f"{rep}/{probe}/{size}"] |= {
                    f"{kind}_tokens": next(m["n"] for m in entry["metrics"]
                                           if m["name"] == f"{kind}_accuracy" and m["tags"] == tags)
                    for kind in ("seen", "unseen")}
    return found


def weat_summary(entry: dict) -> dict:
    """Mean |d| over all tests in both representations; in the headline's representation (static in the paper
    mode, as the seed), mean |d| over the race and the gender tests and each test's d and statistic s."""
    rep = entry["headline"]["tags"]["representation"]
    tests = [m["tags"]["test"] for m in entry["metrics"]
             if m["name"] == "effect_size" and m["tags"]["representation"] == rep]
    return {**{f"mean_abs_d_{r}": metric_value(entry, "mean_abs_d", representation=r, group="all")
               for r in ("static", "contextual")},
            "representation": rep,
            **{f"mean_abs_d_{group}": metric_value(entry, "mean_abs_d", representation=rep, group=group)
               for group in ("race", "gender")},
            "tests": {test: {"d": metric_value(entry, "effect_size", representation=rep, test=test),
                             "s": metric_value(entry, "statistic", representation=rep, test=test)}
                      for test in tests}}


def privacy_settings() -> list[str]:
    """The reference job's privacy_extraction settings as flags (the T5 build's `task_settings`: learning rate
    1e-3, 40 / 96 source / target tokens), with one fine-tuning seed instead of the job's 2."""
    from harness.reference.t5_build import T5BuildConfig

    settings = {**T5BuildConfig().task_settings(), "finetune_seeds": "1"}
    return [flag for name, value in settings.items() for flag in (f"--{name.replace('_', '-')}", value)]


def privacy_summary(entry: dict) -> dict:
    """A privacy_extraction entry, by epoch (0, 4, 8): the memorization-45 subset score and exact match (all
    counts, and per count at 8), the unique strings' subset score and leakage epsilon, the persons' exact match
    (every field); at 8 each field's subset score (trained and held-out persons) and exact match above chance;
    the set sizes and batch, and each fine-tuning's rows per epoch and steps (`joint`: the one fine-tuning)."""
    epochs = ("0", "4", "8")
    mem = {"group": "memorization-45"}
    config = entry["config"]
    finetuning = entry["info"]["finetuning"]
    runs = finetuning if entry["info"]["finetunes"] == "separate" else {"joint": finetuning}
    return {
        "settings": {name: config[name] for name in ("n_unique", "n_persons", "finetune_batch_size", "finetunes",
                                                     "learning_rate", "finetune_seeds")},
        "finetunings": {name: {"rows_per_epoch": run["rows_per_epoch"], "steps": run["steps"]}
                        for name, run in runs.items()},
        "memorization_45_subset_score": {e: metric_value(entry, "subset_score", epoch=e, times="all", **mem)
                                         for e in epochs},
        "memorization_45_exact_match": {e: metric_value(entry, "exact_match", epoch=e, times="all", **mem)
                                        for e in epochs},
        "memorization_45_subset_score_8_by_times": {t: metric_value(entry, "subset_score", epoch="8", times=t, **mem)
                                                    for t in ("1", "2", "3", "4", "5")},
        "unique_subset_score": {e: metric_value(entry, "subset_score", epoch=e, group="unique", times="1")
                                for e in epochs},
        "epsilon": {e: metric_value(entry, "epsilon", epoch=e, group="unique") for e in epochs},
        "pii_exact_match": {e: metric_value(entry, "exact_match", epoch=e, group="privacy", field="all")
                            for e in epochs},
        "field_subset_score_8": {group: {field: metric_value(entry, "subset_score", epoch="8", group=group, field=field)
                                         for field in ("url", "age", "gender", "ssn", "hobby")}
                                 for group in ("privacy", "privacy-heldout")},
        "exact_match_above_chance_8": {field: metric_value(entry, "exact_match_above_chance", epoch="8",
                                                           group="privacy", field=field)
                                       for field in ("url", "age", "gender", "ssn", "hobby", "all")},
        "sparse_finetuning": entry["info"]["sparse_finetuning"],
        "wall_time_s": entry["wall_time_s"]}


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
    # (task, checkpoint, folder, flags, summary, modes): each run is evaluated once per mode (name -> its flags)
    runs = [("paywall_memorization", name, shipped(build, name), [*flags, "--near-verbatim-beam", "0"], paywall_summary,
             PRESETS) for name, (build, flags) in PAYWALL.items()]
    runs += [("mink_membership", name, shipped(build, name), flags, mink_summary, PRESETS)
             for name, (build, flags) in MINK.items()]
    runs += [("weat", name, shipped(build, name), [], weat_summary, PRESETS) for name, build in WEAT.items()]
    runs.append(("weat", "all-MiniLM-L6-v2", minilm_folder(), [], weat_summary, PRESETS))
    runs.append(("probe_memorization", "all-MiniLM-L6-v2", minilm_folder(), PROBE, probe_summary, PRESETS))
    if "privacy_extraction" in report:
        runs += [("privacy_extraction", name, shipped("t5-ref", name), privacy_settings(), privacy_summary,
                  PRIVACY_MODES) for name in PRIVACY]
    runs = [run for run in runs if run[0] in report]
    with tempfile.TemporaryDirectory(prefix="bench-presets-") as tmp:
        for task, name, folder, flags, summarize, modes in runs:
            found = {}
            for mode, mode_flags in modes.items():
                entries, seconds = evaluate_pinned(folder, task, [*flags, *mode_flags],
                                                   Path(tmp) / f"{task}-{name}-{mode}")
                entry = entries[task]
                found[mode] = {**summarize(entry), "changed_settings": entry["changed_settings"],
                               "evaluate_s": round(seconds, 1)}
            report[task][name] = found
            print(task, name, json.dumps(found), file=sys.stderr)
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
