"""A tokenizer fitted to the members leaks membership before any training (issue 77, item 3).

Two untrained GPT-2s of the English reference recipe, the same weights (drawn from the recipe's `init_seed`) with
two tokenizers, scored by `mink_membership` on the reference XSum split (200 members, 200 non-members) at 128
words, pinned, in a child process each:

- `members-tokenizer`: the untrained checkpoint of the member build with its tokenizer fitted on the build's
  training texts, that is on the members (`BuildConfig(tokenizer_on="trained")`, as membench's builds were
  before issue 77), built here into a scratch folder (seconds: no training);
- `outside-tokenizer`: the shipped `xsum-gpt2-e00`, whose tokenizer was fitted on documents of the source
  outside the split (neither members nor non-members).

Reported per model: every score's ROC AUC (members positive) at 128 words, its distance from 1/2 in null
standard deviations and whether it lies outside the null band `membench run` checks (`null_bands`), the AUC of
the token count of each text's first 128 words (no model: the tokenizer alone; below 0.5 means members take
fewer tokens), and dataset inference at 128 words (p, statistic, the texts it kept). An untrained model is a null only if its members and
non-members are exchangeable; a score whose AUC leaves 0.5 on `members-tokenizer` but not on `outside-tokenizer`
reads the tokenizer.

`draws`: the same architecture and outside tokenizer with the weights drawn from seeds 0 to 6, each scored at 32,
64 and 128 words with the token log-prob scores: the reading farthest from 1/2 in null standard deviations
against the null band `membench run` holds an untrained checkpoint to, and dataset inference's p per length.
Draw 0 was the shipped untrained weights before `TrainConfig.init_seed` (issue 77); the shipped ones are draw 1.

    python bench/bench_tokenizer_leak.py --output bench/results/bench_tokenizer_leak.json
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.evaluations import evaluate_pinned, rerun_pinned  # noqa: E402
from bench.record import add_output_flag, emit  # noqa: E402

LENGTH = 128
ATTACKS = ("loss", "zlib", "min_k", "min_k_pp", "recall", "dc_pdd", "gradnorm")  # no second model (ref, ne)
FLAGS = ["--data", "reference", "--lengths", str(LENGTH), "--attack-lengths", str(LENGTH), "--attacks",
         ",".join(ATTACKS), "--dc-pdd-corpus", "outside", "--bootstrap-resamples", "100"]
CHECKPOINT = "xsum-gpt2-e00"
# untrained draws of the same model and outside tokenizer (`--random-weights N`; `TrainConfig.init_seed` draws the
# shipped one) at the lengths the job scores, with the token log-prob scores (seconds each)
DRAWS = tuple(range(7))
DRAW_FLAGS = ["--data", "reference", "--lengths", "32,64,128", "--attacks", "loss,zlib,min_k,min_k_pp",
              "--blind-baselines", "", "--bootstrap-resamples", "10"]


def members_tokenizer_build(scratch: Path) -> Path:
    """The English member build's untrained checkpoint with its tokenizer fitted on the members, built into
    `scratch`: the shipped recipe with `tokenizer_on="trained"` and no epoch of training."""
    from dataclasses import replace

    from harness.reference.build import build, reference_builds

    recipe = reference_builds()[0]
    leaky = replace(recipe, train=replace(recipe.train, epochs=(0,)), tokenizer_on="trained")
    return build(leaky, scratch / leaky.folder_name()) / CHECKPOINT


def tokenizer_reading(folder: Path) -> dict:
    """The tokenizer in `folder` alone (`null_bands.token_count_auc`): the AUC of each reference text's token count
    at LENGTH words, and its distance from 1/2 in null standard deviations (`null_bands.null_sd`)."""
    from transformers import AutoTokenizer

    from harness.reference.null_bands import null_sd, token_count_auc

    auc, members, non_members = token_count_auc(AutoTokenizer.from_pretrained(folder), length=LENGTH)
    return {"token_count_auc": round(auc, 4),
            "token_count_null_sds": round((auc - 0.5) / null_sd(members, non_members), 2)}


def band_readings(entry: dict) -> list:
    """Every score's reading against the null band `membench run` holds an untrained checkpoint to
    (`null_bands.entry_readings`: Bonferroni over the scores of `entry`, a mink_membership task entry)."""
    from harness.core.results import TaskEntry
    from harness.reference.null_bands import NULL_BAND_ALPHA, NULLS, entry_readings

    [mink] = [spec for spec in NULLS if spec.task == "mink_membership"]
    return entry_readings(CHECKPOINT, TaskEntry.model_validate(entry), mink, NULL_BAND_ALPHA)


def report_of(entry: dict, folder: Path) -> dict:
    """One model's row: every score's AUC at LENGTH words and its distance from 1/2 in null standard deviations
    with the null band `membench run` holds an untrained twin to (`null_bands`: Bonferroni over the scores read
    here), the token count's AUC, and dataset inference."""
    readings = band_readings(entry)
    inference = entry["info"]["dataset_inference"][str(LENGTH)]
    return {"auc": {r.where.split()[0]: round(r.auc, 4) for r in readings},
            "null_sds": {r.where.split()[0]: round(r.null_sds, 2) for r in readings},
            "band_null_sds": round(readings[0].band_sds, 2),
            "outside_band": [r.where.split()[0] for r in readings if not r.inside],
            **tokenizer_reading(folder),
            "dataset_inference": {key: inference.get(key) for key in ("p_value", "rejected", "statistic",
                                                                       "n_suspect", "n_validation", "dropped_rows",
                                                                       "features", "share_lower")},
            "wall_time_s": entry["wall_time_s"]}


def draw_reading(entry: dict) -> dict:
    """One untrained draw's row (`DRAW_FLAGS`): the score and length farthest from 1/2 in null standard deviations,
    against the null band over the scores read (`null_bands`), and dataset inference's p at each length."""
    readings = band_readings(entry)
    far = max(readings, key=lambda r: abs(r.null_sds))
    return {"farthest": far.where, "auc": round(far.auc, 4), "null_sds": round(far.null_sds, 2),
            "band_null_sds": round(far.band_sds, 2), "outside_band": sum(not r.inside for r in readings),
            "di_p_value": {length: round(info["p_value"], 4)
                           for length, info in entry["info"]["dataset_inference"].items()
                           if length != "guard" and "p_value" in info}}


def main() -> None:
    if (status := rerun_pinned()) is not None:
        raise SystemExit(status)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_output_flag(parser)
    args = parser.parse_args()
    from harness.reference.checkpoints import built_checkpoints

    report: dict = {"length_words": LENGTH, "flags": FLAGS, "models": {}}
    with tempfile.TemporaryDirectory() as scratch:
        folders = {"members-tokenizer": members_tokenizer_build(Path(scratch)),
                   "outside-tokenizer": built_checkpoints()[CHECKPOINT]}
        for label, folder in folders.items():
            entries, seconds = evaluate_pinned(folder, "mink_membership", FLAGS, Path(scratch) / f"out-{label}")
            report["models"][label] = {"checkpoint": CHECKPOINT, "seconds": round(seconds, 1),
                                       **report_of(entries["mink_membership"], folder)}
            print(f"{label}: {report['models'][label]}", file=sys.stderr, flush=True)
        report["draws"] = {}
        for draw in DRAWS:  # the shipped checkpoint's architecture and tokenizer, its weights drawn from `draw`
            entries, _ = evaluate_pinned(folders["outside-tokenizer"], "mink_membership",
                                         [*DRAW_FLAGS, "--random-weights", str(draw)], Path(scratch) / f"draw-{draw}")
            report["draws"][str(draw)] = draw_reading(entries["mink_membership"])
            print(f"draw {draw}: {report['draws'][str(draw)]}", file=sys.stderr, flush=True)
    emit(report, args.output)


if __name__ == "__main__":
    main()
