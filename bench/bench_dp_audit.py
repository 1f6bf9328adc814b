"""Known truth for privacy_extraction's one-run audit (issue 63): DP fine-tuning at a claimed epsilon, audited.

Each run is one `membench evaluate --tasks privacy_extraction` of a shipped reference checkpoint (pinned, in a
child process) with `--audit-canaries 1000` and small task sets (10 unique strings, 10 persons, 10 held out:
the canaries are most of the rows), so that what it measures is the audit:

- soundness: DP-SGD at a claimed epsilon of 1, 4 and 8; the audited epsilon (both bounds, every evaluated
  epoch and seed) must not exceed the claim (`--dp-epsilon`; `claimed_epsilon`);
- power: the same fine-tuning without DP, full and LoRA: the audited epsilon is a proven leakage floor, with
  the canaries' exact match and their (100, 0.5)-extractable share (extraction runs in these runs only);
- a broken mechanism: the claim of epsilon 1 with no noise added (`--dp-no-noise-for-testing`): the audit
  must refute it (audited > 1);
- utility: the left-out canaries' loss per token after fine-tuning (`target_loss`, included = no) beside each
  run's epsilon;
- cost: each run's fine-tuning seconds (DP-SGD against the same model, steps and rows without DP);
- with `--gradient-canaries M`, every DP run also carries M white-box gradient canaries
  (`--audit-gradient-canaries`, `harness/training/gradient_canaries.py`): their audit must catch the broken
  mechanism under LoRA too, where the text canaries show nothing, and stay within every honest claim.

A real model, SmolLM2-135M-Instruct, runs only when named (`--only smollm2-lora-none,smollm2-lora-dp8`,
`smollm2-full-none`): 4 epochs (the evaluation after 4 is the one of each run), LoRA at its recipe with and
without DP at 8, and full fine-tuning at the task's default learning rate without DP.

The reference T5 trains with LoRA under DP (opacus cannot separate per-row gradients of its relative position
bias; `--finetune-method lora` is the fix the task names); the reference GPT-2 (`xsum-gpt2-e30`) trains every
weight.

    python bench/bench_dp_audit.py --output bench/results/bench_dp_audit.json            # every run
    python bench/bench_dp_audit.py --only gpt2-full-none,gpt2-full-dp8 --seeds 1           # some
    python bench/bench_dp_audit.py --only smollm2-lora-none,smollm2-lora-dp8 --seeds 1 \
        --output bench/results/bench_dp_audit--smollm2.json                                  # the real model
    python bench/bench_dp_audit.py --only smollm2-full-none --seeds 1 \
        --output bench/results/bench_dp_audit--smollm2-full.json                             # full fine-tuning
    python bench/bench_dp_audit.py --only smollm2-lora-dp8 --seeds 1 \
        --output bench/results/bench_dp_audit--smollm2-dp8.json                              # LoRA under DP
    python bench/bench_dp_audit.py --only gpt2-lora-broken1,gpt2-lora-dp1,gpt2-lora-dp8,t5-lora-broken1,t5-lora-dp1,\
gpt2-full-broken1,gpt2-full-dp1 --seeds 1 --gradient-canaries 1000 \
        --output bench/results/bench_dp_audit--gradient.json                                 # white-box canaries
    python bench/bench_dp_audit.py --plot docs/dp-audit.png --from bench/results/bench_dp_audit.json  # the plot
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.evaluations import evaluate_pinned, rerun_pinned  # noqa: E402
from bench.record import add_output_flag, emit  # noqa: E402

MODELS = {"t5": "reference:t5-ref", "gpt2": "reference:xsum-gpt2-e30",  # the shipped builds (`resolve_reference_model`)
          "smollm2": "pretrained:smollm2-135m-instruct"}
METHODS = {"t5": {"full": ["--learning-rate", "1e-3"], "lora": ["--finetune-method", "lora"]},
           "gpt2": {"full": ["--learning-rate", "1e-3"], "lora": ["--finetune-method", "lora"]},
           # 4 epochs: the CPU's budget; full fine-tuning at the task's default learning rate (1e-4)
           "smollm2": {"lora": ["--finetune-method", "lora", "--epochs", "4"], "full": ["--epochs", "4"]}}
REAL = {"smollm2-lora-none": ("smollm2", "lora", []), "smollm2-lora-dp8": ("smollm2", "lora", ["--dp-epsilon", "8"]),
        "smollm2-full-none": ("smollm2", "full", [])}
# the audit's cost in the task as the job runs it on the reference T5 (its manifest's settings): with 1,000
# canaries and without, run by name (`--only t5-job-audit,t5-job-noaudit`)
JOB_T5 = ["--learning-rate", "1e-3", "--max-source-tokens", "40", "--max-target-tokens", "96"]
COST = {"t5-job-audit": ("t5", JOB_T5 + ["--audit-canaries", "1000"]), "t5-job-noaudit": ("t5", JOB_T5)}
TASK_FLAGS = ["--n-unique", "10", "--n-persons", "10", "--n-heldout-persons", "10", "--audit-canaries", "1000",
              "--epochs", "4,8"]
# the canaries' extraction probabilities beside the audit where it has power (no DP); elsewhere left out
NO_EXTRACTION = ["--extraction", "false"]


def runs() -> dict[str, tuple[str, str, list[str]]]:
    """label -> (model, method, DP flags): power (no DP), soundness (epsilon 1, 4, 8), the broken mechanism.
    The T5 trains full without DP only (opacus cannot split its position bias's per-row gradients)."""
    grid = {"t5-full-none": ("t5", "full", [])}
    for model, method, epsilons in (("t5", "lora", (1, 4, 8)), ("gpt2", "full", (1, 4, 8)), ("gpt2", "lora", (1, 8))):
        grid[f"{model}-{method}-none"] = (model, method, [])
        for epsilon in epsilons:
            grid[f"{model}-{method}-dp{epsilon}"] = (model, method, ["--dp-epsilon", str(epsilon)])
        grid[f"{model}-{method}-broken1"] = (model, method, ["--dp-epsilon", "1", "--dp-no-noise-for-testing", "true"])
    return grid


def summary(entry: dict) -> dict:
    """A run's audit, claim, utility and cost from its results entry: per epoch, each bound's value per seed."""
    out: dict = {"status": entry["status"], "wall_time_s": entry.get("wall_time_s")}
    by_epoch: dict = {}
    for metric in entry["metrics"]:
        tags = metric["tags"]
        if metric["name"] == "audited_epsilon":
            found = by_epoch.setdefault(tags["epoch"], {})
            # the record's keys stay `audited_steinke` / `audited_gaussian-fdp` (the tag says "-conditional" now);
            # the white-box canaries' (`--gradient-canaries`) are `gradient_audited_...`
            prefix = "gradient_" if tags.get("group") == "gradient-canary" else ""
            found[f"{prefix}audited_{tags['bound'].removesuffix('-conditional')}"] = (metric.get("per_seed")
                                                                                     or [metric["value"]])
        elif metric["name"] == "auc" and tags.get("group") == "gradient-canary":
            by_epoch.setdefault(tags["epoch"], {})["gradient_auc"] = metric.get("per_seed") or [metric["value"]]
        elif metric["name"] == "auc" and tags.get("group") == "canary":
            by_epoch.setdefault(tags["epoch"], {})["auc"] = metric.get("per_seed") or [metric["value"]]
        elif metric["name"] == "claimed_epsilon":
            by_epoch.setdefault(tags["epoch"], {})["claimed"] = metric["value"]
        elif metric["name"] == "target_loss" and tags.get("group") == "canary":
            by_epoch.setdefault(tags["epoch"], {})[f"loss_included_{tags['included']}"] = metric.get("per_seed") or [
                metric["value"]]
        elif metric["name"] == "extractable" and tags.get("group") == "canary" and tags["epoch"] != "0" \
                and tags.get("attempts") == "100" and tags.get("level") == "0.5":
            by_epoch.setdefault(tags["epoch"], {})[f"extractable_100_included_{tags['included']}"] = metric["value"]
        elif metric["name"] == "exact_match" and tags.get("group") == "canary" and tags["epoch"] != "0":
            by_epoch.setdefault(tags["epoch"], {})[f"exact_included_{tags['included']}"] = metric["value"]
    out["epochs"] = by_epoch
    finetuning = entry["info"]["finetuning"]
    out["train_seconds"] = finetuning["train_seconds_with_evaluation"]
    out["steps"] = finetuning["steps"]
    out["rows_per_epoch"] = finetuning["rows_per_epoch"]
    if "dp" in finetuning:
        out["dp"] = finetuning["dp"]
    if "audit" in entry["info"]:
        out["audit"] = {key: entry["info"]["audit"][key] for key in ("canaries", "included", "delta", "guess_rule")}
    out["evaluation_seconds"] = entry["info"]["evaluation_seconds"]
    return out


def first_audit(run: dict) -> dict[str, float]:
    """Each bound of the run's first audit fixed in advance: the first seed's, after the last evaluated epoch. One
    audit, so it holds at its own 95%; the largest over the record's epochs and seeds would not (issue 76: the
    largest of 4 audits each at 95% refutes a true epsilon = 0 in about 7% of null draws)."""
    last = run["epochs"][max(run["epochs"], key=int)]
    return {bound: last[f"audited_{bound}"][0] for bound in ("steinke", "gaussian-fdp")}


def plot(report: dict, path: str) -> None:
    """Audited against claimed epsilon, one point per run and bound (its first seed's audit after its last epoch:
    `first_audit`), with the diagonal: a sound audit of an honest run stays on or below it. Runs without DP stand at the right edge
    (claimed: infinity); the broken mechanism is marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    claims = [run["dp"][0]["claimed_epsilon"] for run in report["runs"].values() if "dp" in run]
    edge = max(claims + [8.0]) * 1.25
    fig, ax = plt.subplots(figsize=(6, 4.5))
    ax.plot([0, edge], [0, edge], color="grey", linestyle="--", linewidth=1, label="audited = claimed")
    markers = {"steinke": "o", "gaussian-fdp": "s"}  # the f-DP bound: conditional on a Gaussian trade-off curve
    for label, run in report["runs"].items():
        claimed = run["dp"][0]["claimed_epsilon"] if "dp" in run else edge
        broken = "broken" in label
        for bound, value in first_audit(run).items():
            ax.scatter(claimed + (0.08 if bound == "gaussian-fdp" else -0.08), value, marker=markers[bound],
                       color="crimson" if broken else ("black" if "dp" not in run else "tab:blue"), s=28)
    ax.set_xlabel("claimed epsilon (right edge: no DP)")
    ax.set_ylabel("audited epsilon, 95% (first seed, last epoch)")
    handles = [plt.Line2D([], [], marker=m, linestyle="", color="tab:blue", label=label)
               for label, m in zip(("Steinke bound", "Gaussian f-DP (if μ-GDP)"), markers.values())]
    handles += [plt.Line2D([], [], marker="o", linestyle="", color=c, label=what)
                for c, what in (("black", "no DP"), ("crimson", "claims 1, no noise (broken)"))]
    ax.legend(handles=[*handles, ax.get_lines()[0]], fontsize=8, loc="upper left")
    ax.set_xlim(0, edge * 1.05)
    ticks = [t for t in range(0, int(edge), 2)]
    ax.set_xticks([*ticks, edge], [*map(str, ticks), "∞"])
    ax.set_title("One-run audit of DP fine-tuning (reference T5, GPT-2)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    if (status := rerun_pinned()) is not None:
        raise SystemExit(status)
    from harness.reference.checkpoints import resolve_reference_model

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated run labels (default: every run)")
    parser.add_argument("--seeds", type=int, default=2, help="fine-tuning seeds per run (default 2)")
    parser.add_argument("--gradient-canaries", type=int, default=0, metavar="M",
                        help="also audit every DP run with M white-box gradient canaries (--audit-gradient-canaries)")
    parser.add_argument("--plot", metavar="PNG", help="draw audited against claimed epsilon into PNG")
    parser.add_argument("--from", dest="source", metavar="RECORD", help="with --plot: draw from this record "
                        "instead of running")
    add_output_flag(parser)
    args = parser.parse_args()
    if args.source:
        plot(json.loads(Path(args.source).read_text())["report"], args.plot or parser.error("--from needs --plot"))
        return
    grid = runs() | REAL | {label: (model, "full", []) for label, (model, _) in COST.items()}
    chosen = [label for label in args.only.split(",") if label] or list(runs())
    unknown = [label for label in chosen if label not in grid]
    if unknown:
        parser.error(f"unknown runs {', '.join(unknown)}; known: {', '.join(grid)}")
    models = {grid[label][0] for label in chosen}
    report: dict = {"task_flags": TASK_FLAGS, "seeds": args.seeds, "gradient_canaries": args.gradient_canaries,
                    "runs": {},
                    "models": {k: f"{v} ({Path(resolve_reference_model(v)).parent.name})" if v.startswith("reference:")
                               else v for k, v in MODELS.items() if k in models}}
    for label in chosen:
        model, method, dp = grid[label]
        gradient = ["--audit-gradient-canaries", str(args.gradient_canaries)] if dp and args.gradient_canaries else []
        flags = ([*COST[label][1], "--finetune-seeds", str(args.seeds)] if label in COST else
                 [*TASK_FLAGS, *METHODS[model][method], *dp, *(NO_EXTRACTION if dp else []), *gradient,
                  "--finetune-seeds", str(args.seeds)])
        with tempfile.TemporaryDirectory() as scratch:
            entries, seconds = evaluate_pinned(resolve_reference_model(MODELS[model]), "privacy_extraction", flags,
                                               Path(scratch) / "out")
        report["runs"][label] = {"model": model, "method": method, "flags": flags, "seconds": round(seconds, 1),
                                 **summary(entries["privacy_extraction"])}
        print(f"{label}: {report['runs'][label]['epochs']}", file=sys.stderr, flush=True)
        emit(report, args.output) if args.output else None
    emit(report, args.output)
    if args.plot:
        plot(report, args.plot)


if __name__ == "__main__":
    main()
