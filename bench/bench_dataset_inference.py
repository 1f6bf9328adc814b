"""Dataset inference (`harness.metrics.dataset_inference`, Maini et al. 2024) on membench's reference GPT-2s:
false positives on nulls and power on known truth (issue 51).

Per-text scores come from `membench evaluate --tasks mink_membership --log-samples` on the reference
XSum split (--attacks loss,zlib,min_k,min_k_pp, --lengths 128, every default k: 16 scores a text; the
IID guard sees the token count, alone and with the bag-of-words blind baseline, whose out-of-fold scores
were fitted on the labels of the guard's own held-out texts):

  nulls   --relabelings seeded random halves of the untrained model's (`xsum-gpt2-e00`) pool, and of the
          30-epoch model's pool (labels drawn independently of the texts: a null however well the model
          learned): the false-positive rate at 0.05 with its Clopper-Pearson 95% interval, and the
          Kolmogorov-Smirnov p-value against uniform, of the combined p-value and of the first split's
          (the combination is twice the median, valid and so conservative: its KS may reject, towards 1),
          with membench's clipping fitted on the training half ("train") and with linear_di.py's ("linear_di")
  truth   the true member / non-member labels on e00 (a null), e01 and e30: the combined p-value, the IID
          guard's p-value, the weights, and the power at n texts per side (the share of --subsamples seeded
          subsamples with p < 0.05) with the smallest n whose seed-0 subsample reaches p < 0.05

    python bench/bench_dataset_inference.py [--relabelings 200] [--subsamples 20] [--samples-dir DIR]
                                            [--output FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.stats import binomtest, kstest

from harness.metrics import dataset_inference as di
from record import add_output_flag, emit

ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = ROOT / "harness" / "reference" / "weights"
CHECKPOINTS = ("xsum-gpt2-e00", "xsum-gpt2-e01", "xsum-gpt2-e30")
SIZES = (10, 15, 20, 30, 40, 50, 75, 100, 125, 150)
GUARDS = {"n_tokens": ("n_tokens",), "blind_bow+n_tokens": ("blind_bow", "n_tokens")}


def checkpoint_folder(name: str) -> Path:
    """The shipped folder of a reference checkpoint (`harness/reference/weights/xsum-gpt2-*/<name>`)."""
    found = sorted(WEIGHTS.glob(f"xsum-gpt2-*/{name}/config.json"))
    if not found:
        raise SystemExit(f"no shipped weights for {name} under {WEIGHTS}")
    return found[-1].parent


def samples(name: str, folder: Path) -> list[dict]:
    """mink_membership's logged samples of one checkpoint (one `membench evaluate` run into `folder/name`,
    skipped when a samples file is already there)."""
    found = list((folder / name).glob("*.mink_membership.samples.jsonl"))
    if found:
        return [json.loads(line) for line in found[0].read_text().splitlines()]
    command = [str(Path(sys.executable).with_name("membench")), "evaluate", "--model", str(checkpoint_folder(name)),
               "--tasks", "mink_membership", "--attacks", "loss,zlib,min_k,min_k_pp", "--lengths", "128",
               "--blind-baselines", "bag_of_words", "--bootstrap-resamples", "10", "--log-samples", "--no-cache",
               "--output-path", str(folder / name)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    [path] = (folder / name).glob("*.mink_membership.samples.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def matrix(rows: list[dict], names: list[str]) -> np.ndarray:
    """Texts x scores (a missing or null score is NaN; the token count is `n_tokens`)."""
    value = lambda row, k: row["n_tokens"] if k == "n_tokens" else row["scores"].get(k)  # noqa: E731
    return np.array([[np.nan if value(r, k) is None else value(r, k) for k in names] for r in rows], dtype=float)


def null_rates(x: np.ndarray, names: list[str], relabelings: int, preprocessing: str) -> dict:
    """False-positive rate and KS against uniform over seeded random halves of the pool."""
    combined, first = [], []
    for seed in range(relabelings):
        labels = np.zeros(len(x), dtype=int)
        labels[np.random.default_rng(10_000 + seed).permutation(len(x))[: len(x) // 2]] = 1
        result = di.dataset_inference(x, labels, names, seed=seed, curve_sizes=None, preprocessing=preprocessing)
        combined.append(result.p_value)
        first.append(result.split_p_values[0])
    out = {}
    for key, p in (("combined", combined), ("first_split", first)):
        hits = int((np.array(p) <= 0.05).sum())
        interval = binomtest(hits, relabelings).proportion_ci(0.95, method="exact")
        out[key] = {"fpr@0.05": hits / relabelings, "fpr_ci95": [round(interval.low, 4), round(interval.high, 4)],
                    "ks_uniform_p": float(kstest(p, "uniform").pvalue), "mean_p": float(np.mean(p))}
    return out


def truth(x: np.ndarray, labels: np.ndarray, guards: dict[str, np.ndarray], names: list[str],
          subsamples: int) -> dict:
    """The test on the true labels: p-value, guard, weights, the seed-0 curve and the power per size."""
    result = di.dataset_inference(x, labels, names, curve_sizes=SIZES)
    power = {}
    for n in (n for n in SIZES if n < min(result.n_suspect, result.n_validation)):
        hits = 0
        for seed in range(subsamples):
            rng = np.random.default_rng([seed, n])
            rows = np.concatenate([rng.choice(np.flatnonzero(labels == side), n, replace=False) for side in (1, 0)])
            hits += di.dataset_inference(x[rows], labels[rows], names, seed=seed, curve_sizes=None).p_value < 0.05
        power[str(n)] = hits / subsamples
    reaching = [n for n, p in result.curve if p < 0.05]
    top = sorted(result.weights.items(), key=lambda kv: -abs(kv[1]))[:4]
    return {"p_value": result.p_value, "split_p_values": [float(p) for p in result.split_p_values],
            "texts_per_side": [result.n_suspect, result.n_validation], "dropped_rows": result.dropped_rows,
            "iid_guard_p": {k: di.iid_guard(g, labels, list(GUARDS[k])).p_value for k, g in guards.items()},
            "top_weights": {k: round(v, 3) for k, v in top}, "curve_seed0": [[n, p] for n, p in result.curve],
            "smallest_n_seed0_p<0.05": reaching[0] if reaching else None, "power@0.05": power}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--relabelings", type=int, default=200)
    parser.add_argument("--subsamples", type=int, default=20)
    parser.add_argument("--samples-dir", help="keep the logged samples here (and reuse those already there)")
    add_output_flag(parser)
    args = parser.parse_args()
    started = time.perf_counter()
    report: dict = {"relabelings": args.relabelings, "subsamples": args.subsamples}
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(args.samples_dir or temporary)
        runs = {name: samples(name, folder) for name in CHECKPOINTS}
    names = [k for k in runs[CHECKPOINTS[0]][0]["scores"] if not k.startswith("blind_")]
    report["scores"] = names
    for name in CHECKPOINTS:
        rows = runs[name]
        x, labels = matrix(rows, names), np.array([r["label"] for r in rows])
        guards = {k: matrix(rows, list(v)) for k, v in GUARDS.items()}
        report[name] = truth(x, labels, guards, names, args.subsamples)
        if name in ("xsum-gpt2-e00", "xsum-gpt2-e30"):
            report[name]["nulls"] = {prep: null_rates(x, names, args.relabelings, prep)
                                     for prep in ("train", "linear_di")}
        print(json.dumps({name: report[name]}), file=sys.stderr, flush=True)
    report["seconds"] = round(time.perf_counter() - started, 1)
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
