"""The LoRA recipe of `--finetune-method lora`, chosen on known truth (issue 50): a sweep of learning
rate, rank, alpha and adapted layers, each measured by finetune_memorization's curve (Min-K% 20% AUC
of the trained copy's members against held-out non-members, after 0, 1, 2 and 4 epochs) beside the
full recipe's on the same model; and privacy_extraction's memorization-45 subset score after one
epoch, full against LoRA.

Every run is `membench evaluate` as a user runs it (in this process, through the CLI), with the task's
defaults but:
  finetune_memorization  --attacks loss,min_k --k-percents 20 --control-epochs 0 (the curve's score,
                         without the other attacks' passes; a text's Min-K% does not depend on them)
  privacy_extraction     --epochs 1 --finetune-seeds 1
Results go through the results cache (`$MEMBENCH_CACHE`), so a sweep stopped midway resumes where
it stopped; a real model's full runs can be read from its committed results files instead
(`--full-from`: the same recipe, seed and texts). Reported per model and recipe: the AUC at each epoch, the gap to the full recipe at each
epoch, the exact-memorization gap, the adapter's trainable parameters, the training seconds; per
model: the subset scores.

    python bench/bench_lora_recipe.py --model reference [--grid wide|candidates] [--privacy [RECIPE ...]]
                                      [--full-from RESULTS_FILE ...] [--output bench/results/bench_lora_recipe--reference.json]

`--model reference` is the reference GPT-2 `xsum-gpt2-outside-e05` (finetune_memorization's reference
checkpoint); any other value is passed to `--model` (e.g. pretrained:smollm2-135m-instruct).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # record.py, when run as a child by its path

from record import add_output_flag, emit  # noqa: E402

EPOCHS = ("0", "1", "2", "4")
CURVE_SETTINGS = ["--attacks", "loss,min_k", "--k-percents", "20", "--control-epochs", "0"]
PRIVACY_SETTINGS = ["--epochs", "1", "--finetune-seeds", "1"]
FULL = {"finetune_method": "full", "learning_rate": 1e-4}


def lora(learning_rate: float, rank: int, alpha: int, targets: str) -> dict:
    return {"finetune_method": "lora", "learning_rate": learning_rate, "lora_rank": rank, "lora_alpha": alpha,
            "lora_target_modules": targets}


# The adapted layers of the attention-only recipes: GPT-2's (the reference checkpoint), Llama's (SmolLM2)
ATTENTION = {"reference": "c_attn,attn.c_proj", "llama": "q_proj,k_proj,v_proj,o_proj"}


def grid(name: str, attention: str) -> list[dict]:
    """`candidates`: what the wide grid leaves, the runs a real model gets (minutes each): every linear
    layer, alpha = 2 x rank (Biderman et al. 2024), rank 16, the learning rate 10 to 40 x full's.
    `wide`: the full recipe, learning rate x rank x alpha (= rank, 2 x rank) x adapted layers (every
    linear layer; attention only, as Hu et al. 2021 adapted), then the candidates."""
    candidates = [lora(lr, 16, 32, "all-linear") for lr in (1e-3, 2e-3, 4e-3)]
    if name == "candidates":
        return candidates
    return [FULL] + [lora(lr, rank, alpha_factor * rank, targets)
                     for lr, rank, alpha_factor, targets in itertools.product(
                         (1e-4, 3e-4, 1e-3, 3e-3, 1e-2), (8, 32), (1, 2), ("all-linear", attention))] + candidates


def flags(settings: dict) -> list[str]:
    return [item for key, value in settings.items() for item in (f"--{key.replace('_', '-')}", str(value))]


def evaluate(model: str, task: str, settings: list[str], scratch: Path) -> dict:
    """The task's entry of one `membench evaluate` run (through the results cache)."""
    from harness.app.cli import main

    out = scratch / f"run{len(list(scratch.iterdir()))}"
    with contextlib.redirect_stdout(io.StringIO()):
        status = main(["evaluate", "--model", model, "--tasks", task, "--output-path", str(out), *settings])
    if status != 0:
        raise SystemExit(f"membench evaluate {model} {task} {' '.join(settings)}: exit {status}")
    (path,) = out.glob("*.json")
    (entry,) = [t for t in json.loads(path.read_text())["tasks"] if t["name"] == task]
    return entry


def metric(entry: dict, name: str, **tags: str) -> float | None:
    found = [m["value"] for m in entry["metrics"] if m["name"] == name and m["tags"] == tags]
    return found[0] if found else None


def curve(entry: dict) -> dict:
    """One finetune_memorization run's readings at each epoch."""
    at = {"trained_on": "members"}
    training = entry["info"]["training"]["members"]
    return {
        "min_k_20_auc": {e: metric(entry, "auc", score="min_k_20", epoch=e, **at) for e in EPOCHS},
        "loss_auc": {e: metric(entry, "auc", score="loss", epoch=e, **at) for e in EPOCHS},
        "exact_gap": {e: metric(entry, "exact_memorization", group="gap", epoch=e, **at) for e in EPOCHS},
        "approximate_gap": {e: metric(entry, "approximate_mean", group="gap", epoch=e, **at) for e in EPOCHS},
        "trainable_parameters": training.get("trainable_parameters"),
        "train_seconds_with_evaluation": training["train_seconds_with_evaluation"],
        "seconds": entry["wall_time_s"],
    }


def subset_score(entry: dict) -> dict:
    return {e: metric(entry, "subset_score", group="memorization-45", times="all", epoch=e) for e in ("0", "1")}


def committed_full_runs(paths: list[str]) -> dict[str, dict]:
    """Task name -> its full-recipe entry in these results files: finetune_memorization at its defaults,
    privacy_extraction at `PRIVACY_SETTINGS` (a file holding another run of them is refused)."""
    wanted = {"finetune_memorization": {}, "privacy_extraction": {"epochs": [1], "finetune_seeds": 1}}
    found = {}
    for path in paths:
        for entry in json.loads(Path(path).read_text())["tasks"]:
            if entry["name"] not in wanted or entry["status"] != "ok":
                continue
            changed = {key: entry["config"][key] for key in entry["changed_settings"]}
            if changed != wanted[entry["name"]] or entry["config"].get("finetune_method", "full") != "full":
                raise SystemExit(f"{path}: {entry['name']} is not the full recipe at the settings compared "
                                 f"(it changed {changed})")
            found[entry["name"]] = entry
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="reference")
    parser.add_argument("--grid", choices=("wide", "candidates"), default="wide")
    parser.add_argument("--recipes", help="JSON list of recipes (dicts of settings) instead of --grid")
    parser.add_argument("--full-from", nargs="*", default=[], metavar="RESULTS_FILE",
                        help="the full recipe's runs from these results files (a real model's committed ones, "
                             "at the task's defaults: the same curve, whatever other attacks ran) instead of "
                             "running them again")
    parser.add_argument("--privacy", nargs="*", metavar="RECIPE",
                        help="also privacy_extraction after one epoch: full and these recipes (an index into the "
                             "run's recipes, or a JSON dict of settings)")
    add_output_flag(parser)
    args = parser.parse_args()

    from harness.reference.checkpoints import resolve_reference_model

    reference = args.model == "reference"
    model = resolve_reference_model("reference:xsum-gpt2-outside-e05") if reference else args.model
    recipes = json.loads(args.recipes) if args.recipes else grid(args.grid, ATTENTION["reference" if reference
                                                                                       else "llama"])
    given = committed_full_runs(args.full_from)
    report: dict = {"model": args.model, "curve_settings": " ".join(CURVE_SETTINGS), "runs": [],
                    "full_from": [Path(path).name for path in args.full_from]}
    if "finetune_memorization" in given:
        recipes = [FULL] + [r for r in recipes if r != FULL]
    with tempfile.TemporaryDirectory(prefix="membench-bench-lora-") as scratch:
        for recipe in recipes:
            started = time.perf_counter()
            entry = (given["finetune_memorization"] if recipe == FULL and "finetune_memorization" in given else
                     evaluate(model, "finetune_memorization", CURVE_SETTINGS + flags(recipe), Path(scratch)))
            found = curve(entry)
            report["runs"].append({"recipe": recipe, **found})
            print(f"{recipe} -> {found['min_k_20_auc']} ({time.perf_counter() - started:.0f} s)", file=sys.stderr,
                  flush=True)
        full = next((r for r in report["runs"] if r["recipe"] == FULL), None)
        if full is not None:
            for run in report["runs"]:
                run["gap_to_full"] = {e: round(full["min_k_20_auc"][e] - run["min_k_20_auc"][e], 4) for e in EPOCHS}
        if args.privacy is not None:
            chosen = [FULL] + [recipes[int(i)] if i.isdigit() else json.loads(i) for i in args.privacy]
            report["privacy"] = []
            for recipe in chosen:
                entry = (given["privacy_extraction"] if recipe == FULL and "privacy_extraction" in given else
                         evaluate(model, "privacy_extraction", PRIVACY_SETTINGS + flags(recipe), Path(scratch)))
                report["privacy"].append({"recipe": recipe, "memorization_45_subset_score": subset_score(entry),
                                          "seconds": entry["wall_time_s"]})
                print(f"privacy {recipe} -> {report['privacy'][-1]}", file=sys.stderr, flush=True)
    emit(report, args.output)


if __name__ == "__main__":
    main()
