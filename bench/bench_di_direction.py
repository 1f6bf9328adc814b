"""Dataset inference in the direction of "seen", its rule for a score missing on many texts, and its size at the
tasks' settings (issue 77, items 4 to 6; `harness.metrics.dataset_inference`, `dataset_report`).

Pools of per-text scores, each dataset inference group of a results file whose samples were logged
(`--log-samples`): the reference checkpoints this bench scores itself (pinned `membench evaluate`, kept in
--samples-dir and reused), mink_membership at 64 and 128 words with every attack that needs no second model at
128 (`MINK_FLAGS`) on xsum-gpt2-e00, e01, nonmembers-e30 and ja-gpt2-e00, e01 (the 30-epoch models, which any
test finds at its floor, add nothing), finetune_memorization at its defaults on xsum-gpt2-outside-e05; and any
--results FILE (the real models' runs). Each pool's test runs
as its task runs it (mink_membership: 39 relabelings, stopping early; finetune_memorization: 99).

Measured:
  pools    per pool, direction "seen" (today's default) against "any" (the fit of mink_membership v12 and
           finetune_memorization v6, linear_di.py's): p, share bound, statistic, scores with a weight above 0.
           The pools trained on the validation side (xsum-gpt2-nonmembers-e30; finetune's non_members@1
           copies) must not reject under "seen"
  power    per weakly trained pool (1 epoch of mink_membership's; finetune_memorization's after 1 and 2), either
           direction: the share of --subsamples seeded subsamples of n texts a
           side with p <= 0.05, and the smallest n whose share reaches 0.5: what the direction costs in power
  missing  per pool where a score is missing on more than `MISSING_SHARE` of the texts (ReCaLL past the
           reference GPT-2s' context): the test without that score on every text (today's rule) against the
           test with it on the texts that have it (the rows dropped, the rule before): p, texts, and power
  size     per null pool (the untrained twins, and --size-trained trained pools whose random halvings are
           nulls however well the model learnt) the task's test on --relabelings seeded random halvings:
           the share of p <= 0.05 and of p <= 0.025, each with its Clopper-Pearson 95% interval, per pool
           and pooled; and the null band `membench run` checks (`null_bands`) on as many halvings: the share
           with a score outside its band

    python bench/bench_di_direction.py [--results FILE ...] [--samples-dir DIR] [--subsamples 20]
        [--relabelings 2000] [--output FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.evaluations import REPO, rerun_pinned  # noqa: E402
from bench.record import add_output_flag, emit  # noqa: E402

MINK_FLAGS = ["--lengths", "64,128", "--attack-lengths", "128", "--attacks",
              "loss,zlib,min_k,min_k_pp,recall,dc_pdd,gradnorm", "--dc-pdd-corpus", "outside",
              "--blind-baselines", "", "--bootstrap-resamples", "10"]
MINK_MODELS = ("xsum-gpt2-e00", "xsum-gpt2-e01", "xsum-gpt2-nonmembers-e30", "ja-gpt2-e00", "ja-gpt2-e01")
FINETUNE_MODEL = "xsum-gpt2-outside-e05"
MINK_SIZES = (10, 15, 20, 30, 40, 50, 75, 100, 150)
FINETUNE_SIZES = (5, 8, 10, 15, 20, 30, 40, 50)
# null pools for the size: the untrained twins at both lengths; trained pools whose halvings are nulls too
NULLS = ("mink xsum-gpt2-e00 64", "mink xsum-gpt2-e00 128", "mink ja-gpt2-e00 64", "mink ja-gpt2-e00 128")
SIZE_TRAINED = ("mink ja-gpt2-e01 64", "mink xsum-gpt2-e01 128")
WEAK = ("-e01 ", "members@1", "members@2")  # the pools whose power is read: weakly trained
DIRECTIONS = ("seen", "any")


@dataclass(frozen=True)
class Pool:
    """One dataset inference group: scores (texts x names, NaN where missing), labels (1 suspect), the scores the
    task's test reads today and those it left out for missing values, its relabelings, whether it stops early,
    the subsample sizes for power, and what its suspect side is (`trained`: "suspect", "validation", "none")."""

    x: np.ndarray
    labels: np.ndarray
    names: list[str]
    left_out: list[str]
    permutations: int
    stop_early: bool
    sizes: tuple[int, ...]
    trained: str


def evaluate(model: str, task: str, flags: list[str], folder: Path) -> Path:
    """A pinned `membench evaluate --log-samples` of the reference checkpoint `model` into `folder` (kept: a
    folder that holds a results file already is reused); its results file."""
    from harness.reference.checkpoints import resolve_reference_model

    corpus = ["--data", "reference:ja", "--language", "ja"] if model.startswith("ja-") else []
    if not list(folder.glob("*.json")):
        subprocess.run([sys.executable, "-m", "harness", "evaluate", "--model",
                        str(resolve_reference_model(f"reference:{model}")), "--model-name", model, "--tasks", task,
                        *corpus, *flags, "--log-samples", "--reproducible", "--no-cache", "--output-path",
                        str(folder)], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    [path] = folder.glob("*.json")
    return path


def suspect_side(model: str, group: str) -> str:
    """What a pool's suspect side is to its model: trained on ("suspect"), not but the validation side is
    ("validation"), or neither ("none")."""
    if group.startswith("non_members@"):
        return "validation" if not group.endswith("@0") else "none"
    if group.startswith("members@"):
        return "none" if group.endswith("@0") else "suspect"
    if "nonmembers" in model:
        return "validation"
    return "none" if model.endswith("e00") or "SmolLM2" in model or "gemma" in model else "suspect"


def pools_of(path: Path) -> dict[str, Pool]:
    """Every dataset inference group of the results file at `path` whose samples file lies beside it."""
    found = {}
    results = json.loads(path.read_text())
    model = results["model"]["name"].removeprefix("membench-ref/")
    for entry in results["tasks"]:
        if entry["name"] not in ("mink_membership", "finetune_memorization") or not entry.get("samples_file"):
            continue
        rows = [json.loads(line) for line in (path.parent / entry["samples_file"]).read_text().splitlines()]
        mink = entry["name"] == "mink_membership"
        for group, info in entry["info"].get("dataset_inference", {}).items():
            if group == "guard" or "features" not in info:
                continue
            if mink:
                chosen = [r for r in rows if str(r["length"]) == group]
            else:
                trained_on, epoch = group.split("@")
                chosen = [r for r in rows if r["trained_on"] == trained_on and str(r["epoch"]) == epoch]
            left_out = sorted(info.get("left_out", {}))
            names = info["features"] + left_out
            x = np.array([[np.nan if (r["scores"] or {}).get(n) is None else r["scores"][n] for n in names]
                          for r in chosen], dtype=float)
            found[f"{entry['name'][:4]} {model} {group}".replace("fine ", "finetune ")] = Pool(
                x, np.array([r["label"] for r in chosen]), info["features"], left_out, entry["config"]["di_permutations"],
                mink, MINK_SIZES if mink else FINETUNE_SIZES, suspect_side(model, group))
    return found


def columns(pool: Pool, names: list[str]) -> np.ndarray:
    every = pool.names + pool.left_out
    return pool.x[:, [every.index(n) for n in names]]


def test(pool: Pool, x: np.ndarray, labels: np.ndarray, names: list[str], direction: str, seed: int = 0):
    from harness.metrics import dataset_inference as di

    return di.dataset_inference(x, labels, names, permutations=pool.permutations, stop_early=pool.stop_early,
                                curve_sizes=None, direction=direction, seed=seed)


def observed(pool: Pool) -> dict:
    """Either direction's answer on the pool's true labels."""
    x = columns(pool, pool.names)
    out = {"trained": pool.trained, "texts_per_side": [int(pool.labels.sum()), int(len(pool.labels) - pool.labels.sum())]}
    for direction in DIRECTIONS:
        found = test(pool, x, pool.labels, pool.names, direction)
        out[direction] = {"p_value": round(found.p_value, 4), "rejected": found.rejected,
                          "share_lower": round(found.share_lower, 4), "statistic": round(found.statistic, 3),
                          "weighted_scores": sum(w > 0 for w in found.weights.values())}
    return out


def power(pool: Pool, names: list[str], direction: str, subsamples: int) -> dict:
    """The share of seeded subsamples of n texts a side (among those with every score in `names`) with
    p <= 0.05, per n below the smaller side, and the smallest n whose share reaches 0.5."""
    x = columns(pool, names)
    finite = np.isfinite(x).all(axis=1)
    x, labels = x[finite], pool.labels[finite]
    shares = {}
    for n in (n for n in pool.sizes if n < min(labels.sum(), len(labels) - labels.sum())):
        hits = 0
        for seed in range(subsamples):
            rng = np.random.default_rng([seed, n])
            rows = np.concatenate([rng.choice(np.flatnonzero(labels == side), n, replace=False) for side in (1, 0)])
            hits += test(pool, x[rows], labels[rows], names, direction, seed).p_value <= 0.05
        shares[str(n)] = hits / subsamples
    reaching = [int(n) for n, share in shares.items() if share >= 0.5]
    return {"power@0.05": shares, "smallest_n": reaching[0] if reaching else None}


def missing(pool: Pool, subsamples: int) -> dict:
    """Today's rule (the scores missing on many texts left out, every text kept) against the rule before (every
    score, the texts missing one dropped), on the true labels and in power."""
    out = {"left_out": pool.left_out}
    for rule, names in (("leave_out_score", pool.names), ("drop_texts", pool.names + pool.left_out)):
        x = columns(pool, names)
        found = test(pool, x, pool.labels, names, "seen")
        out[rule] = {"p_value": round(found.p_value, 4), "texts": found.n_suspect + found.n_validation,
                     "dropped_texts": found.dropped_rows}
        if pool.trained == "suspect":
            out[rule] |= power(pool, names, "seen", subsamples)
    return out


def rate(p_values: np.ndarray, level: float) -> dict:
    hits = int((p_values <= level + 1e-12).sum())
    interval = binomtest(hits, len(p_values)).proportion_ci(0.95, method="exact")
    return {"rate": round(hits / len(p_values), 4), "ci95": [round(interval.low, 4), round(interval.high, 4)]}


def size(pool: Pool, relabelings: int) -> np.ndarray:
    """The task's test on `relabelings` seeded random halvings of the pool's texts (each side as large as on the
    true labels): its p-values."""
    x = columns(pool, pool.names)
    finite = np.isfinite(x).all(axis=1)
    x, suspects = x[finite], int(pool.labels[finite].sum())
    found = []
    for seed in range(relabelings):
        labels = np.zeros(len(x), dtype=int)
        labels[np.random.default_rng([77, seed]).permutation(len(x))[:suspects]] = 1
        found.append(test(pool, x, labels, pool.names, "seen", seed).p_value)
    return np.array(found)


def band_size(pool: Pool, relabelings: int) -> dict:
    """The null band `membench run` holds a null checkpoint to (`harness.reference.null_bands`: each score's AUC
    within 1/2 +- z sd, z Bonferroni over the K scores at 1%) on `relabelings` seeded random halvings of the pool
    (every score of the pool, each on the texts it has): the share of halvings with a score outside its band (the
    check's false failures, at most 1% by construction) and the median over halvings of the largest |AUC - 1/2|
    in null sds, against the band's z."""
    from scipy.stats import rankdata

    from harness.reference.null_bands import band_z, null_sd

    z = band_z(pool.x.shape[1])
    suspects = int(pool.labels.sum())
    ranked = [(finite, rankdata(column[finite])) for column in pool.x.T for finite in [np.isfinite(column)]]
    failed, largest = 0, []
    for seed in range(relabelings):
        labels = np.zeros(len(pool.x), dtype=bool)
        labels[np.random.default_rng([78, seed]).permutation(len(pool.x))[:suspects]] = True
        far = 0.0
        for finite, ranks in ranked:
            n1, n0 = int(labels[finite].sum()), int((~labels[finite]).sum())
            auc = (ranks[labels[finite]].sum() - n1 * (n1 + 1) / 2) / (n1 * n0)
            far = max(far, abs(auc - 0.5) / null_sd(n1, n0))
        failed += far > z
        largest.append(far)
    interval = binomtest(failed, relabelings).proportion_ci(0.95, method="exact")
    return {"scores": pool.x.shape[1], "band_z": round(z, 3), "outside_rate": round(failed / relabelings, 4),
            "ci95": [round(interval.low, 4), round(interval.high, 4)],
            "median_largest_null_sds": round(float(np.median(largest)), 3)}


def main() -> int:
    if (status := rerun_pinned()) is not None:
        return status
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", nargs="*", default=[], metavar="FILE",
                        help="more results files of mink_membership or finetune_memorization, samples beside")
    parser.add_argument("--samples-dir", help="keep the reference runs here (and reuse those already there)")
    parser.add_argument("--subsamples", type=int, default=20)
    parser.add_argument("--relabelings", type=int, default=2000)
    add_output_flag(parser)
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(args.samples_dir or temporary)
        paths = [evaluate(model, "mink_membership", MINK_FLAGS, folder / f"mink-{model}") for model in MINK_MODELS]
        paths.append(evaluate(FINETUNE_MODEL, "finetune_memorization", [], folder / f"finetune-{FINETUNE_MODEL}"))
        pools: dict[str, Pool] = {}
        for path in paths + [Path(p) for p in args.results]:
            pools |= pools_of(path)
    report: dict = {"subsamples": args.subsamples, "relabelings": args.relabelings, "mink_flags": MINK_FLAGS,
                    "pools": {}, "power": {}, "missing": {}, "size": {}}
    for name, pool in pools.items():
        report["pools"][name] = observed(pool)
        print(json.dumps({name: report["pools"][name]}), file=sys.stderr, flush=True)
        if pool.trained == "suspect" and any(mark in f"{name} " for mark in WEAK) and "non_members" not in name:
            report["power"][name] = {d: power(pool, pool.names, d, args.subsamples) for d in DIRECTIONS}
            print(json.dumps({name: {d: v["smallest_n"] for d, v in report["power"][name].items()}}), file=sys.stderr,
                  flush=True)
        if pool.left_out:
            report["missing"][name] = missing(pool, args.subsamples)
    every = []
    for name in NULLS + SIZE_TRAINED:
        p_values = size(pools[name], args.relabelings)
        every.append(p_values)
        report["size"][name] = {"at_0.05": rate(p_values, 0.05), "at_0.025": rate(p_values, 0.025),
                                "null_band": band_size(pools[name], args.relabelings)}
        print(json.dumps({name: report["size"][name]}), file=sys.stderr, flush=True)
    pooled = np.concatenate(every)
    report["size"]["pooled"] = {"at_0.05": rate(pooled, 0.05), "at_0.025": rate(pooled, 0.025)}
    report["seconds"] = round(time.perf_counter() - started, 1)
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
