"""Yoon & Lee's sparse-versus-dense comparison on known truth: does a sparse T5 memorize its fine-tuning
secrets less than a dense one?

Models, all from the shipped reference T5 (`t5-ref`, `harness.reference.t5_build`), built here pinned
and not shipped:
- `dense`: `t5-ref` itself (1,000 pre-training steps);
- `sparse-S` for S in `--sparsities` (the paper's 30-90%): `t5-ref` pruned across all its parameters
  (global L1, `membench prune`'s default), then pre-trained again, sparse, for the recipe's
  `sparse_pretrain_steps` (125 steps, 4 passes over the corpus, as the paper's 4 epochs), as
  `t5-ref-sparse70` is made (S = 0.7 is the shipped checkpoint, rebuilt);
- `dense-again`: `t5-ref` pre-trained again for the same 125 steps, dense: the sparse models' extra
  training without their pruning (sparsity 0);
- `small-dense`: a dense T5 of about the parameter count `sparse-70` keeps (`--small`, d_model x d_ff),
  pre-trained from scratch for the same 1,125 steps.

Each is evaluated pinned with `privacy_extraction` at the reference job's settings (learning rate 1e-3,
40 / 96 source / target tokens) and `--finetune-seeds` seeds; the sparse models fine-tune sparse
(`--sparse-finetuning auto`: their zeros stay zero, and the results record the sparsity after
fine-tuning). Reported per model: parameters and non-zero parameters, the last pre-training window's
loss, the memorization-45 subset score and exact match after 4 and 8 epochs, PII exact match, the
fields' exact match above the held-out persons' and the leakage ε (Inan et al.), each as the
mean over seeds with its sample std; and each comparison's difference (sparse - dense) with its
standard error sqrt(s_a^2 / n + s_b^2 / n) over the n seeds of each side.

    python bench/bench_sparsity.py --output bench/results/bench_sparsity.json
"""

from __future__ import annotations

import argparse
import copy
import math
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evaluations import evaluate_pinned, rerun_pinned  # noqa: E402
from record import add_output_flag, emit  # noqa: E402

TASK_SETTINGS = ["--learning-rate", "0.001", "--max-source-tokens", "40", "--max-target-tokens", "96"]
COMPARISONS = {  # (sparse side, dense side): what each difference tests
    "matched size (sparse-70 - dense)": ("sparse-70", "dense"),
    "matched training (sparse-70 - dense-again)": ("sparse-70", "dense-again"),
    "matched parameter count (sparse-70 - small-dense)": ("sparse-70", "small-dense"),
}


def headline_tags(epoch: str) -> dict:
    return {"epoch": epoch, "group": "memorization-45", "times": "all"}


def summary(entry: dict) -> dict:
    """The privacy_extraction numbers of one results entry: (mean, std, per seed) of each, by name."""
    def found(name: str, **tags: str) -> dict:
        [metric] = [m for m in entry["metrics"] if m["name"] == name and m["tags"] == tags]
        return {"mean": round(metric["value"], 4), "std": None if metric["std"] is None else round(metric["std"], 4),
                "per_seed": [round(v, 4) for v in metric["per_seed"]]}

    out = {}
    for epoch in ("4", "8"):
        out[f"subset_score_{epoch}"] = found("subset_score", **headline_tags(epoch))
        out[f"exact_match_{epoch}"] = found("exact_match", **headline_tags(epoch))
    out["pii_exact_match_8"] = found("exact_match", epoch="8", group="privacy", field="all")
    out["exact_match_above_chance_8"] = {
        field: found("exact_match_above_chance", epoch="8", group="privacy", field=field)["mean"]
        for field in ("url", "age", "gender", "ssn", "hobby")}
    out["epsilon_8"] = found("epsilon", epoch="8", group="unique")
    finetuning = entry["info"]["finetuning"]
    out["parameter_sparsity_after_finetuning"] = finetuning.get("parameter_sparsity_after")
    out["sparse_finetuning"] = entry["info"]["sparse_finetuning"]
    return out


def evaluate(folder: Path, out: Path, seeds: int) -> tuple[dict, float]:
    """privacy_extraction of one checkpoint at the reference settings with `seeds` seeds: its entry, and seconds."""
    entries, seconds = evaluate_pinned(folder, "privacy_extraction", [*TASK_SETTINGS, "--finetune-seeds", str(seeds)],
                                       out)
    return entries["privacy_extraction"], seconds


def difference(a: dict, b: dict) -> dict:
    """a - b of two (mean, std, per seed) summaries, with the standard error over their seeds."""
    n_a, n_b = len(a["per_seed"]), len(b["per_seed"])
    se = math.sqrt(a["std"] ** 2 / n_a + b["std"] ** 2 / n_b)
    return {"difference": round(a["mean"] - b["mean"], 4), "se": round(se, 4),
            "z": round((a["mean"] - b["mean"]) / se, 2) if se else None}


def build_models(folder: Path, sparsities: list[float], small: tuple[int, int]) -> dict[str, dict]:
    """The module docstring's models, saved under `folder`: name -> {folder, facts}."""
    from transformers import AutoTokenizer, T5ForConditionalGeneration

    from harness.model.prune import CONFIG_KEY, parameter_sparsity
    from harness.reference.build import save_checkpoint
    from harness.reference.shipped import shipped_folder
    from harness.reference.t5_build import (
        T5BuildConfig,
        loss_points,
        pretrain,
        pretraining_rows,
        pretraining_texts,
        sparse_variant,
        untrained_model,
    )
    from harness.run.reproducible import with_reference_threads

    config = T5BuildConfig()
    shipped = shipped_folder(config.folder_name()) / config.name
    tokenizer = AutoTokenizer.from_pretrained(shipped)
    dense = T5ForConditionalGeneration.from_pretrained(shipped).eval()
    rows = pretraining_rows(tokenizer, pretraining_texts(config), config)

    def facts(model, losses: list[float] | None) -> dict:
        return {"parameters": sum(p.numel() for _, p in model.named_parameters()),
                "nonzero_parameters": sum(int((p != 0).sum()) for _, p in model.named_parameters()),
                "parameter_sparsity": parameter_sparsity(model),
                "last_pretraining_loss": None if losses is None else list(loss_points(losses).values())[-1]}

    @with_reference_threads
    def build() -> dict[str, dict]:
        models = {"dense": {"folder": shipped, **facts(dense, None)}}
        again = copy.deepcopy(dense)
        losses = pretrain(again, rows, tokenizer, config, config.sparse_pretrain_steps, config.seed + 1)
        save_checkpoint(again, tokenizer, folder / "dense-again", config.pretrain_steps + config.sparse_pretrain_steps, 0)
        models["dense-again"] = {"folder": folder / "dense-again", **facts(again, losses)}
        for sparsity in sparsities:
            name = f"sparse-{round(sparsity * 100)}"
            model, record, losses = sparse_variant(dense, rows, tokenizer, replace(config, sparsity=sparsity))
            setattr(model.config, CONFIG_KEY, record)
            save_checkpoint(model, tokenizer, folder / name, config.pretrain_steps + config.sparse_pretrain_steps, 0)
            models[name] = {"folder": folder / name, **facts(model, losses)}
        d_model, d_ff = small
        small_config = replace(config, d_model=d_model, d_ff=d_ff, d_kv=d_model // config.num_heads,
                               pretrain_steps=config.pretrain_steps + config.sparse_pretrain_steps)
        model = untrained_model(len(tokenizer), small_config)  # the same tokenizer: the recipe's, trained again alike
        losses = pretrain(model, rows, tokenizer, small_config, small_config.pretrain_steps, config.seed)
        save_checkpoint(model, tokenizer, folder / "small-dense", small_config.pretrain_steps, 0)
        models["small-dense"] = {"folder": folder / "small-dense", **facts(model, losses),
                                 "shape": {"d_model": d_model, "d_ff": d_ff, "d_kv": small_config.d_kv}}
        return models

    return build()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sparsities", default="0.3,0.5,0.7,0.9", help="shares of all parameters pruned")
    parser.add_argument("--finetune-seeds", type=int, default=4, help="fine-tuning seeds per model")
    parser.add_argument("--small", default="64x128", help="the small dense T5's d_model x d_ff")
    add_output_flag(parser)
    args = parser.parse_args()
    status = rerun_pinned()  # builds as `membench reference build` makes them
    if status is not None:
        return status
    sparsities = [float(s) for s in args.sparsities.split(",")]
    small = tuple(int(x) for x in args.small.split("x"))
    report: dict = {"finetune_seeds": args.finetune_seeds, "task_settings": " ".join(TASK_SETTINGS), "models": {}}
    with tempfile.TemporaryDirectory(prefix="bench-sparsity-") as tmp:
        started = time.perf_counter()
        models = build_models(Path(tmp), sparsities, small)
        report["build_s"] = round(time.perf_counter() - started, 1)
        for name, model in models.items():
            entry, seconds = evaluate(model.pop("folder"), Path(tmp) / f"out-{name}", args.finetune_seeds)
            report["models"][name] = {**model, **summary(entry), "evaluate_s": round(seconds, 1)}
            print(name, report["models"][name]["subset_score_8"], file=sys.stderr)
    found = report["models"]
    report["comparisons"] = {
        label: {metric: difference(found[a][metric], found[b][metric])
                for metric in ("subset_score_8", "exact_match_8", "subset_score_4", "epsilon_8")}
        for label, (a, b) in COMPARISONS.items() if a in found and b in found}
    report["against_sparsity"] = {name: {"parameter_sparsity": m["parameter_sparsity"],
                                         "subset_score_8": m["subset_score_8"]["mean"],
                                         "subset_score_8_std": m["subset_score_8"]["std"]}
                                  for name, m in found.items() if name in ("dense-again",) or name.startswith("sparse-")}
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
