"""Dataset inference (`harness.metrics.dataset_inference`, Maini et al. 2024, in mink_membership and
finetune_memorization): its false positives on nulls, its power on known truth, its IID guard, and its
cost against the task's (issue 51).

Per-text scores come from `membench evaluate --log-samples` as a user runs it (kept in --samples-dir and
reused):
  mink      mink_membership on the reference XSum split, 128 words, attacks loss, zlib, Min-K% and Min-K%++
            at every default k (16 scores a text), for the reference GPT-2s xsum-gpt2-e00 (untrained
            on the split), e01 and e30, and with --real for SmolLM2-135M-Instruct and gemma-3-270m (whose
            pre-training cannot tell the split's random halves apart: nulls by construction)
  finetune  finetune_memorization's samples at its defaults (every checkpoint, both copies): the reference
            GPT-2 that never saw the split (xsum-gpt2-outside-e05), and any --finetune-samples NAME=FILE

Each test runs as its task runs it: mink_membership's with its 39 relabelings (`DI_PERMUTATIONS`), stopping
early (`--di-stop-early`), finetune_memorization's with 99, every one fitted; both with the linear model's
default ridge penalty (`dataset_inference.PENALTY`) and direction (`dataset_inference.DIRECTION`; its record of
2026-12-01 predates the direction of "seen": its fits took either sign, `bench_di_direction` compares the two).

Measured:
  nulls     for each null pool (e00's, e30's, each real model's mink pool, every finetune epoch-0 pool), the
            combined p-value of --relabelings seeded random halves of the pool (labels drawn independently of
            the texts: a null however well the model learnt), plus the true split where it is a null: the share
            of p <= 0.05 with its Clopper-Pearson 95% interval and the Kolmogorov-Smirnov p-value against
            uniform, per pool and pooled over the pools, of the full test (every relabeling fitted: the
            decisions of the test that stops early, whose p-values above alpha take few values); for the mink
            pools also what the test that stops early did on the same halvings (relabelings fitted, false
            positives, decisions that differ: none by construction); the same for twice the median of the same
            splits' p-values (the rule membench used before, valid but conservative)
  null_shape on e00's pool, the mean split z-score on 2,000 relabelings: its skewness, its upper quantiles
            against a fitted normal's, and the share a normal fitted to 99 of them would reject at 0.05
  fit_speed stacked Newton fits (`splits.split_statistics`) against scikit-learn's LogisticRegression
            (newton-cholesky, one split at a time) on the same splits of e00's pool: seconds per split
  truth     the true split's p-value, guard p-value and weights; per size n (texts per side), the share of
            --subsamples seeded subsamples with p < 0.05 (power) and the best single score's mean AUC on the
            same subsamples; `smallest_n`: the smallest n whose power reaches 0.5 (the median subsample rejects)
  guard     the IID guard as mink_membership runs it at its defaults (once, on each text's longest prefix of
            its default lengths) on the reference, shifted and era splits (no model)
  cost      dataset inference's own seconds (the test's and the IID guard's apart) against the task's:
            `dataset_report.dataset_inference_report` re-timed on each run's scores as the task calls it
            (every group, the guard once per run), against the run's wall time without the dataset inference
            it recorded (the model's work does not depend on the version), and against the committed
            run of the same model and task (`committed_share`: the job's, at the task's defaults, or the real
            rows' settings); in a process that keeps freed memory as membench's commands do, the fits on
            `fit_threads` threads (the BLAS pools' count)
  recorded_costs what every committed full run at today's task versions recorded itself: dataset
            inference's seconds, timed inside the run, against its wall time
  statistics the candidate statistics (`CANDIDATES`: the linear model unpenalised as before version 12 / 6,
            ridge-penalised at several penalties, LOSS alone) on the same null halvings (false positives) and
            the same subsamples of the trained pools (power, `smallest_n`), in one run: the default's evidence
  share     the share bound (`dataset_share`) on known truth: each trained pool's trained-on texts diluted
            with unseen ones at 0, 25, 50 and 100%, --draws seeded draws each: how often it holds the true share
  adam_against_mle linear_di.py's own fit (Adam, 1,000 epochs) against the maximum-likelihood fit on one
            split of each pool with its preprocessing: decades of p apart

    python bench/bench_dataset_inference.py [--relabelings 200] [--subsamples 20] [--draws 40] [--real]
        [--finetune-samples NAME=FILE ...] [--samples-dir DIR] [--output FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from scipy.special import expit
from scipy.stats import binomtest, kstest, kurtosis, norm, skew, ttest_ind
from sklearn.linear_model import LogisticRegression

from harness.app.registry import discover
from harness.core.results import ResultsFile, load_results
from harness.metrics import dataset_inference as di
from harness.metrics.blind import label_free_features
from harness.metrics.dataset_report import DatasetInferenceConfig, dataset_inference_report, guard_report
from harness.metrics.memorization import roc_auc
from harness.metrics.splits import preprocess, split_statistics
from harness.reference.checkpoints import resolve_reference_model
from harness.run.heap import reuse_freed_memory
from harness.scoring.text import truncate_words
from record import add_output_flag, emit
from tasks.finetune_memorization.data import load_known_data
from tasks.mink_membership.data import load_membership_data
from tasks.mink_membership.task import DI_PERMUTATIONS, MinkConfig

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ("xsum-gpt2-e00", "xsum-gpt2-e01", "xsum-gpt2-e30")
REAL = {"smollm2-135m": "pretrained:smollm2-135m-instruct", "gemma-3-270m": "pretrained:gemma-3-270m"}
NULL_MINK = ("xsum-gpt2-e00", "xsum-gpt2-e30", *REAL)  # pools whose random relabelings are nulls
TRUE_NULLS = ("xsum-gpt2-e00", *REAL)  # and whose true split is one too
WEAK = ("xsum-gpt2-e01",)  # weakly trained mink pools (finetune_memorization's: every epoch-1 pool)
# the statistics compared (`compare_statistics`): name -> (the linear model's L2 penalty, the scores it reads; None:
# every score the task's test reads)
CANDIDATES = {"unpenalised": (0.0, None), "ridge 0.01": (0.01, None), "ridge 0.1": (0.1, None), "ridge 1": (1.0, None),
              "ridge 10": (10.0, None), "loss alone": (0.0, ("loss",))}
SHARES = (0.0, 0.25, 0.5, 1.0)  # the trained-on share of the diluted suspect sets (`share_on_diluted`)
MINK = ["--tasks", "mink_membership", "--lengths", "128", "--attacks", "loss,zlib,min_k,min_k_pp",
        "--blind-baselines", "", "--bootstrap-resamples", "10"]
MINK_SIZES = (10, 15, 20, 30, 40, 50, 75, 100, 150)
FINETUNE_SIZES = (5, 8, 10, 15, 20, 30, 40, 50)
FINETUNE_CONTROL = "xsum-gpt2-outside-e05"
MINK_LENGTHS = MinkConfig().lengths  # its default prefix lengths: the IID guard reads each text's longest
# this bench's model names -> their results files' (for the committed runs the cost is also set against)
COMMITTED_NAMES = {"smollm2-135m": "SmolLM2-135M-Instruct.Q4_1", "gemma-3-270m": "gemma-3-270m-q4_k_m",
                   "reference-gpt2": FINETUNE_CONTROL}


@dataclass(frozen=True)
class Pool:
    """One pool of scored texts (finite rows only): scores, labels (1 suspect), score names, the relabelings its
    task's test fits, the subsample sizes its power is read at, whether its random halvings are nulls (they
    measure false positives), whether its suspect side was trained on (its power and its share bound are
    measured) and whether weakly (where power is scarce)."""

    x: np.ndarray
    labels: np.ndarray
    names: list[str]
    permutations: int
    sizes: tuple[int, ...]
    null: bool
    trained: bool
    weak: bool


def checkpoint_folder(name: str) -> Path:
    """The folder of the reference checkpoint `membench run` scores (`reference:<name>`; not the tests'
    quick builds, which share its name under another recipe digest)."""
    return Path(resolve_reference_model(f"reference:{name}"))


def evaluate(model: str, task_flags: list[str], folder: Path) -> tuple[dict, list[dict]]:
    """One `membench evaluate --log-samples` into `folder` (skipped when its results are already there): the
    task's entry and its samples."""
    if not list(folder.glob("*.json")):
        command = [str(Path(sys.executable).with_name("membench")), "evaluate", "--model", model, *task_flags,
                   "--log-samples", "--no-cache", "--output-path", str(folder)]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    [path] = folder.glob("*.json")
    [entry] = json.loads(path.read_text())["tasks"]
    return entry, [json.loads(line) for line in (folder / entry["samples_file"]).read_text().splitlines()]


def matrix(rows: list[dict], names: list[str]) -> np.ndarray:
    """Texts x scores (a missing or null score is NaN)."""
    return np.array([[np.nan if r["scores"].get(k) is None else r["scores"][k] for k in names] for r in rows],
                    dtype=float)


def fpr(p_values: list[float]) -> dict:
    """Share of p <= 0.05, its Clopper-Pearson 95% interval, KS against uniform, the mean p."""
    hits = int((np.array(p_values) <= 0.05).sum())
    interval = binomtest(hits, len(p_values)).proportion_ci(0.95, method="exact")
    return {"count": len(p_values), "fpr@0.05": hits / len(p_values),
            "fpr_ci95": [round(interval.low, 4), round(interval.high, 4)],
            "ks_uniform_p": float(kstest(p_values, "uniform").pvalue), "mean_p": float(np.mean(p_values))}


@cache
def committed_runs(task: str) -> list[tuple[ResultsFile, dict]]:
    """Every committed (`submissions/`) full run of `task` at the task's version today that finished, with its
    entry as the results file holds it (read once)."""
    version, runs = discover()[task].VERSION, []
    for path in sorted((ROOT / "submissions").glob("*.json")):
        results = load_results(path)
        entry = results.task(task)
        if results.run.limit is None and entry is not None and entry.status == "ok" and entry.version == version:
            runs.append((results, entry.model_dump(mode="json")))
    return runs


def committed_entry(model: str, task: str) -> dict | None:
    """The newest of `committed_runs(task)` by the model named `model` (a reference name, or the real model's
    results name); None when there is none."""
    mine = [(results.created_at, entry) for results, entry in committed_runs(task)
            if results.model.name in (model, f"membench-ref/{model}")]
    return max(mine, key=lambda found: found[0])[1] if mine else None


def seconds_without_inference(entry: dict) -> float:
    """A results entry's wall time less the dataset inference it recorded (the model's work, whatever the
    version)."""
    return entry["wall_time_s"] - entry["info"].get("dataset_inference_seconds", 0.0)


def cost_of(entry: dict, groups: list[tuple[np.ndarray, list[dict], list[str]]], guard: tuple[np.ndarray, list[str]],
            config: DatasetInferenceConfig, stop_early: bool, committed: dict | None = None) -> dict:
    """Dataset inference's seconds on a run's groups (labels, score rows, feature names) and its IID guard
    (labels, texts: once per run), timed as the task runs them (`config` and `stop_early`: the task's; the
    test's and the guard's apart; `test_share`: the test's alone), against the run's wall time without the
    seconds it recorded; with `committed` (the committed run of the same model and task: the job's, at the
    task's defaults, or the real rows' settings), also against its time."""
    started = time.perf_counter()
    for labels, rows, names in groups:
        dataset_inference_report(labels, rows, names, {}, config, 0, stop_early=stop_early)
    test = time.perf_counter() - started
    started = time.perf_counter()
    guard_report(*guard, {}, config, 0, stop_early)
    guard_seconds = time.perf_counter() - started
    seconds = test + guard_seconds
    task = seconds_without_inference(entry)
    out = {"task_seconds_without": round(task, 2), "dataset_inference_seconds": round(seconds, 3),
           "share": round(seconds / (task + seconds), 4), "test_seconds": round(test, 3),
           "guard_seconds": round(guard_seconds, 3), "test_share": round(test / (task + seconds), 4)}
    if committed is not None:
        task = seconds_without_inference(committed)
        out |= {"committed_settings_changed": committed.get("changed_settings", []),
                "committed_task_seconds_without": round(task, 2),
                "committed_share": round(seconds / (task + seconds), 4)}
    return out


def recorded_costs() -> dict:
    """What every committed full run at its task's version today recorded (`committed_runs`): dataset
    inference's seconds (`info.dataset_inference_seconds`, timed inside the run) against the run's wall time."""
    out = {}
    for task in ("mink_membership", "finetune_memorization"):
        for results, entry in committed_runs(task):
            if "dataset_inference_seconds" in entry["info"]:
                seconds = entry["info"]["dataset_inference_seconds"]
                out[f"{task} {results.model.name}"] = {"wall_time_s": entry["wall_time_s"],
                                                       "dataset_inference_seconds": seconds,
                                                       "share": round(seconds / entry["wall_time_s"], 4)}
    return out


def halving(seed: int, rows: int) -> np.ndarray:
    """A seeded random half of `rows` texts labelled 1 (suspect), the rest 0."""
    labels = np.zeros(rows, dtype=int)
    labels[np.random.default_rng(10_000 + seed).permutation(rows)[: rows // 2]] = 1
    return labels


def relabeled(x: np.ndarray, names: list[str], relabelings: int, permutations: int = di.PERMUTATIONS,
              stop_early: bool = False, penalty: float = di.PENALTY) -> tuple[list[float], list[float], dict | None]:
    """The combined p-value of each seeded random halving of the pool (`permutations` relabelings, every one
    fitted), twice the median of its splits' p-values, and with `stop_early` what the test that stops
    early (as mink_membership runs it) did on the same halvings: the relabelings it fitted (mean and
    median), its false positives at 0.05 and how many halvings it decided otherwise than the full test."""
    combined, twice_median, used, stopped = [], [], [], []
    for seed in range(relabelings):
        labels = halving(seed, len(x))
        result = di.dataset_inference(x, labels, names, permutations=permutations, seed=seed, curve_sizes=None,
                                      penalty=penalty)
        combined.append(result.p_value)
        twice_median.append(min(1.0, 2 * float(np.median(result.split_p_values))))
        if stop_early:
            early = di.dataset_inference(x, labels, names, permutations=permutations, seed=seed, curve_sizes=None,
                                         stop_early=True, penalty=penalty)
            used.append(early.relabelings)
            stopped.append(early.p_value)
    if not stop_early:
        return combined, twice_median, None
    return combined, twice_median, {
        "relabelings_mean": round(float(np.mean(used)), 1), "relabelings_median": float(np.median(used)),
        "of": permutations, "fpr@0.05": float(np.mean(np.array(stopped) <= 0.05)),
        "decisions_differing": int(sum((a <= 0.05) != (b <= 0.05) for a, b in zip(combined, stopped)))}


def single_split_nulls(x: np.ndarray, names: list[str], relabelings: int) -> dict:
    """One split's p-value (no combination) on the seeded random halves, with membench's clipping fitted
    on the training half ("train") and with linear_di.py's, which clips each side on all its texts
    ("linear_di"): the false-positive rate each gives."""
    out = {}
    for preprocessing in ("train", "linear_di"):
        p = []
        for seed in range(relabelings):
            labels = halving(seed, len(x))
            train = di.split_mask(labels, min(labels.sum(), len(labels) - labels.sum()) // 2,
                                  np.random.default_rng(seed))
            p.append(di.split_p_value(x, labels, train, names, preprocessing=preprocessing).p_value)
        out[preprocessing] = fpr(p)
    return out


def null_shape(x: np.ndarray, permutations: int = 2000) -> dict:
    """The mean split z-score on `permutations` relabelings of one halving of the pool: its skewness and excess
    kurtosis, its standardised 95th and 99th percentiles against the normal's 1.645 and 2.326, and the share
    of its values that a normal fitted to 99 others (as a moment-matched p-value would be) puts at p <= 0.05."""
    labels = halving(0, len(x))
    found = di.combined(x, labels, di.SPLITS, permutations, min(labels.sum(), len(labels) - labels.sum()) // 2,
                        np.random.SeedSequence(0), di.CLIP_FRACTION, False, penalty=di.PENALTY)
    null = found.null
    standard = (null - null.mean()) / null.std(ddof=1)
    rng = np.random.default_rng(1)
    hits = 0
    for value in null[:1000]:
        fitted = rng.choice(null, di.PERMUTATIONS, replace=False)
        hits += norm.sf((value - fitted.mean()) / fitted.std(ddof=1)) <= 0.05
    return {"relabelings": permutations, "skewness": round(float(skew(null)), 3),
            "excess_kurtosis": round(float(kurtosis(null)), 3),
            "q95_standardised": round(float(np.quantile(standard, 0.95)), 3),
            "q99_standardised": round(float(np.quantile(standard, 0.99)), 3),
            "normal_fit_fpr@0.05": hits / 1000}


def fit_speed(x: np.ndarray, splits: int = 500) -> dict:
    """Seconds per split of the stacked Newton fits and of scikit-learn fitting one split at a time (the same
    model, the task's ridge penalty, with its Welch t-test), on `splits` relabelled splits of the pool."""
    rng = np.random.default_rng(0)
    labels = np.array([halving(seed, len(x)) for seed in range(splits)])
    train = di.split_mask(labels, int(labels[0].sum()) // 2, rng)
    started = time.perf_counter()
    with di.blas().limit(limits=1):
        for start in range(0, splits, di.FITS_PER_BATCH):
            chunk = slice(start, start + di.FITS_PER_BATCH)
            split_statistics(x, labels[chunk], train[chunk], penalty=di.PENALTY)
    stacked = (time.perf_counter() - started) / splits
    started = time.perf_counter()
    count = 50
    with di.blas().limit(limits=1):
        for row in range(count):
            fit, y = train[row], labels[row]
            z = (x - x[fit & (y == 1)].mean(axis=0)) / x[fit & (y == 1)].std(axis=0)
            model = LogisticRegression(C=1 / (di.PENALTY * fit.sum()), solver="newton-cholesky", tol=1e-10,
                                       max_iter=30).fit(z[fit], y[fit])
            scores = model.decision_function(z[~fit])
            ttest_ind(scores[y[~fit] == 1], scores[y[~fit] == 0], equal_var=False, alternative="greater")
    one_at_a_time = (time.perf_counter() - started) / count
    return {"texts": len(x), "scores": x.shape[1], "stacked_ms_per_split": round(1000 * stacked, 3),
            "sklearn_ms_per_split": round(1000 * one_at_a_time, 3), "speedup": round(one_at_a_time / stacked, 1)}


def power(x: np.ndarray, labels: np.ndarray, names: list[str], sizes: tuple[int, ...], subsamples: int,
          permutations: int, penalty: float = di.PENALTY, aucs_too: bool = True) -> dict:
    """Per size n below the smaller side: the share of seeded subsamples of n texts a side with p < 0.05
    (the linear model's `penalty`) and, with `aucs_too`, the best single score's mean AUC over the same
    subsamples; and the smallest n with power >= 0.5."""
    finite = np.isfinite(x).all(axis=1)
    x, labels = x[finite], labels[finite]
    out = {}
    for n in (n for n in sizes if n < min(labels.sum(), len(labels) - labels.sum())):
        hits, aucs = 0, []
        for seed in range(subsamples):
            rng = np.random.default_rng([seed, n])
            rows = np.concatenate([rng.choice(np.flatnonzero(labels == side), n, replace=False) for side in (1, 0)])
            hits += di.dataset_inference(x[rows], labels[rows], names, seed=seed, curve_sizes=None,
                                         permutations=permutations, penalty=penalty).p_value < 0.05
            if aucs_too:
                aucs.append([roc_auc(labels[rows], x[rows, j]) for j in range(len(names))])
        out[str(n)] = {"power@0.05": hits / subsamples}
        if aucs_too:
            mean_auc = np.nanmean(np.array(aucs, dtype=float), axis=0)
            best = int(np.nanargmax(mean_auc))
            out[str(n)] |= {"best_score": names[best], "best_score_auc": round(float(mean_auc[best]), 4)}
    reaching = [int(n) for n, row in out.items() if row["power@0.05"] >= 0.5]
    found = {"by_size": out, "smallest_n": reaching[0] if reaching else None}
    if aucs_too:
        found["best_score_auc_at_smallest_n"] = out[str(reaching[0])]["best_score_auc"] if reaching else None
    return found


def truth(x: np.ndarray, labels: np.ndarray, texts: list[str], names: list[str], sizes: tuple[int, ...],
          subsamples: int, permutations: int, stop_early: bool) -> dict:
    """The test on the true labels as the task runs it (`permutations`, `stop_early`): p-value, guard, weights,
    the full AUC of every score, and the power (every relabeling fitted: the same decisions)."""
    result = di.dataset_inference(x, labels, names, curve_sizes=sizes, permutations=permutations,
                                  stop_early=stop_early)
    features, guard_names = label_free_features(texts)
    top = sorted(result.weights.items(), key=lambda kv: -abs(kv[1]))[:4]
    finite = np.isfinite(x).all(axis=1)
    aucs = {k: round(roc_auc(labels[finite], x[finite, j]), 4) for j, k in enumerate(names)}
    return {"p_value": result.p_value,
            "null_sds": None if result.null_sds is None else round(result.null_sds, 2),
            "relabelings": result.relabelings,
            "twice_median": min(1.0, 2 * float(np.median(result.split_p_values))),
            "texts_per_side": [result.n_suspect, result.n_validation],
            "guard_p": di.iid_guard(features, labels, guard_names, permutations=permutations,
                                    stop_early=stop_early).p_value,
            "top_weights": {k: round(v, 3) for k, v in top}, "best_auc": max(aucs.values()),
            "curve_seed0": [[n, p] for n, p in result.curve],
            **power(x, labels, names, sizes, subsamples, permutations)}


def longest_prefixes(data: str) -> tuple[list[str], np.ndarray]:
    """Each text of a reference split cut at the longest of mink_membership's default lengths it reaches (what
    its IID guard reads; texts shorter than the shortest are left out), and the labels."""
    kept = []
    for t in load_membership_data(data, "train", None, "label", 0, None).texts:
        cuts = [cut for cut in (truncate_words(t.text, n, "en") for n in sorted(MINK_LENGTHS)) if cut is not None]
        if cuts:
            kept.append((cuts[-1], t.label))
    return [text for text, _ in kept], np.array([label for _, label in kept])


def guard_on_splits() -> dict:
    """The IID guard as mink_membership runs it at its defaults (each text's longest scored prefix,
    DI_PERMUTATIONS relabelings, stopping early) on three reference splits."""
    out = {}
    for data in ("reference", "reference:shifted", "reference:era"):
        texts, labels = longest_prefixes(data)
        features, names = label_free_features(texts)
        out[data] = di.iid_guard(features, labels, names, permutations=DI_PERMUTATIONS, stop_early=True).p_value
    return out


def mink_section(folder: Path, real: bool, relabelings: int, subsamples: int,
                 pools: dict[str, Pool]) -> tuple[dict, dict, dict, dict]:
    """Per model: truth; per null pool: relabelings' p-values (combined, twice the median, and what the test
    that stops early did); per run: cost; on e00's pool: single splits' nulls by clipping, the null's shape and
    the fits' speed. mink_membership's test: DI_PERMUTATIONS relabelings, stopping early. Each model's pool
    goes into `pools` (for `compare_statistics`)."""
    models = {name: str(checkpoint_folder(name)) for name in REFERENCE} | (REAL if real else {})
    truths, nulls, cost, e00 = {}, {}, {}, {}
    prefixes = {t.text_id: truncate_words(t.text, 128, "en")
                for t in load_membership_data("reference", "train", None, "label", 0, None).texts}
    for name, model in models.items():
        entry, rows = evaluate(model, MINK, folder / f"mink-{name}")
        names = entry["info"]["dataset_inference"]["128"]["features"]  # those the task's own test read
        x, labels = matrix(rows, names), np.array([r["label"] for r in rows])
        texts = [prefixes[r["id"]] for r in rows]
        truths[name] = truth(x, labels, texts, names, MINK_SIZES, subsamples, DI_PERMUTATIONS, True)
        pool = x[np.isfinite(x).all(axis=1)]
        pools[f"mink {name}"] = Pool(pool, labels[np.isfinite(x).all(axis=1)], names, DI_PERMUTATIONS, MINK_SIZES,
                                     name in NULL_MINK, name not in TRUE_NULLS, name in WEAK)
        if name == REFERENCE[0]:
            e00 = {"single_split_nulls": single_split_nulls(pool, names, relabelings), "null_shape": null_shape(pool),
                   "fit_speed": fit_speed(pool)}
        if name in NULL_MINK:
            nulls[f"mink {name}"] = relabeled(pool, names, relabelings, DI_PERMUTATIONS, stop_early=True)
            if name in TRUE_NULLS:  # the full test's p on the true split (the same decision as the task's)
                nulls[f"mink {name}"][0].append(di.dataset_inference(x, labels, names, permutations=DI_PERMUTATIONS,
                                                                     curve_sizes=None).p_value)
                nulls[f"mink {name}"][1].append(truths[name]["twice_median"])
        cost[f"mink {name}"] = cost_of(entry, [(labels, [r["scores"] for r in rows], names)], (labels, texts),
                                       MinkConfig(), True,
                                       committed_entry(COMMITTED_NAMES.get(name, name), "mink_membership"))
        print(json.dumps({name: truths[name]}), file=sys.stderr, flush=True)
    return truths, nulls, cost, e00


def finetune_section(runs: dict[str, tuple[dict, list[dict]]], relabelings: int, subsamples: int,
                     pools: dict[str, Pool]) -> tuple[dict, dict, dict]:
    """Per model and checkpoint: truth (members and non-members of one fixed set); per model: epoch 0's
    relabelings; per run: cost. The members' pools go into `pools` (epoch 0: a null; epoch 1: weakly
    trained)."""
    truths, nulls, cost = {}, {}, {}
    for name, (entry, rows) in runs.items():
        names = entry["info"]["dataset_inference"]["members@0"]["features"]  # those the task's own test read
        config = entry["config"]
        texts = {t.text_id: t.text for t in load_known_data(config["data"], config["reference_seed"], config["members"],
                                                            config["words"], config["prompt_words"],
                                                            config["language"], None).texts}
        out, groups, guard = {}, [], None
        for key in sorted({(r["trained_on"], r["epoch"]) for r in rows}):
            chosen = [r for r in rows if (r["trained_on"], r["epoch"]) == key]
            x, labels = matrix(chosen, names), np.array([r["label"] for r in chosen])
            groups.append((labels, [r["scores"] or {} for r in chosen], names))
            guard = guard or (labels, [texts[r["id"]] for r in chosen])
            out[f"{key[0]}@{key[1]}"] = truth(x, labels, [texts[r["id"]] for r in chosen], names,
                                              FINETUNE_SIZES, subsamples, di.PERMUTATIONS, False)
            finite = np.isfinite(x).all(axis=1)
            if key[0] == "members":
                pools[f"finetune {name} epoch {key[1]}"] = Pool(x[finite], labels[finite], names, di.PERMUTATIONS,
                                                                FINETUNE_SIZES, key[1] == 0, key[1] > 0, key[1] == 1)
            if key == ("members", 0):
                pool = x[finite]
                combined, twice_median, _ = relabeled(pool, names, relabelings)
                nulls[f"finetune {name} epoch 0"] = (combined + [out["members@0"]["p_value"]],
                                                     twice_median + [out["members@0"]["twice_median"]], None)
        truths[name] = out
        cost[f"finetune {name}"] = cost_of(entry, groups, guard, DatasetInferenceConfig(), False,
                                           committed_entry(COMMITTED_NAMES.get(name, name), "finetune_memorization"))
        print(json.dumps({name: {k: v["p_value"] for k, v in out.items()}}), file=sys.stderr, flush=True)
    return truths, nulls, cost


def compare_statistics(pools: dict[str, Pool], relabelings: int, subsamples: int) -> dict:
    """Each of `CANDIDATES` on the same pools, halvings and subsamples, every relabeling fitted: on each null
    pool the p-values of its `relabelings` seeded random halvings (`fpr`, per pool and pooled); on each trained
    pool the full test's p-value and the power by texts per side (`power`, with `smallest_n`). The permutation
    test is exact whatever the statistic, so the candidates differ in power only: the one whose power is
    highest on the weakly trained pools, with false positives within their interval, is the default's
    evidence."""
    out = {}
    for candidate, (penalty, chosen) in CANDIDATES.items():
        started, nulls, trained = time.perf_counter(), {}, {}
        for name, pool in pools.items():
            columns = [pool.names.index(c) for c in chosen] if chosen else list(range(len(pool.names)))
            x, names = pool.x[:, columns], [pool.names[c] for c in columns]
            if pool.null:
                nulls[name] = relabeled(x, names, relabelings, pool.permutations, penalty=penalty)[0]
            if pool.trained:
                full = di.dataset_inference(x, pool.labels, names, permutations=pool.permutations, curve_sizes=None,
                                            penalty=penalty)
                trained[name] = {"p_value": full.p_value, "weak": pool.weak,
                                 **power(x, pool.labels, names, pool.sizes, subsamples, pool.permutations, penalty,
                                         aucs_too=False)}
        out[candidate] = {"penalty": penalty, "scores": list(chosen) if chosen else "all",
                          "nulls": {name: fpr(p) for name, p in nulls.items()},
                          "nulls_pooled": fpr([p for pool in nulls.values() for p in pool]), "trained": trained,
                          "seconds": round(time.perf_counter() - started, 1)}
        print(json.dumps({candidate: {name: row["smallest_n"] for name, row in trained.items()}
                          | {"fpr": out[candidate]["nulls_pooled"]["fpr@0.05"]}}), file=sys.stderr, flush=True)
    return out


def diluted(pool: Pool, share: float, draw: int) -> tuple[np.ndarray, np.ndarray]:
    """A suspect set of which `share` is trained-on texts, against a validation set of unseen ones: from a
    pool's trained-on texts (label 1) and unseen ones (label 0), n = half the unseen texts per side; the
    suspect side takes round(share n) trained-on texts and n minus those of unseen ones, the validation
    side n other unseen ones (seeded by `draw`). Rows of the pool and their new labels."""
    rng = np.random.default_rng([draw, round(100 * share)])
    seen, unseen = (rng.permutation(np.flatnonzero(pool.labels == side)) for side in (1, 0))
    n = len(unseen) // 2
    members = round(share * n)
    rows = np.concatenate([seen[:members], unseen[:n - members], unseen[n - members:2 * n - members]])
    return rows, np.repeat([1, 0], n)


def share_on_diluted(pools: dict[str, Pool], draws: int) -> dict:
    """The share bound (`dataset_share`) on known truth: each trained pool's trained-on texts diluted with
    unseen ones at SHARES (`diluted`), `draws` seeded draws each, the test as the task runs it (every
    relabeling fitted): how often the bound holds the true share (`coverage`, at least 0.95 if it is valid,
    also among the draws the test rejected), its mean and largest value, and how often the test rejects."""
    out = {}
    for name, pool in pools.items():
        if not pool.trained:
            continue
        out[name] = {}
        for share in SHARES:
            bounds, rejected = [], []
            for draw in range(draws):
                rows, labels = diluted(pool, share, draw)
                found = di.dataset_inference(pool.x[rows], labels, pool.names, permutations=pool.permutations,
                                             curve_sizes=None, seed=draw)
                bounds.append(found.share_lower)
                rejected.append(found.rejected)
            bounds, rejected = np.array(bounds), np.array(rejected)
            held = bounds <= share + 1e-12
            out[name][str(share)] = {"texts_per_side": len(rows) // 2, "coverage": float(held.mean()),
                                     "coverage_when_rejected": float(held[rejected].mean()) if rejected.any() else None,
                                     "mean_bound": round(float(bounds.mean()), 4), "max_bound": round(float(bounds.max()), 4),
                                     "rejected": float(rejected.mean())}
        print(json.dumps({name: {k: (v["coverage"], v["mean_bound"]) for k, v in out[name].items()}}),
              file=sys.stderr, flush=True)
    return out


def adam_fit(design: np.ndarray, target: np.ndarray, epochs: int = 1000, lr: float = 0.01) -> np.ndarray:
    """`linear_di.py`'s training: a linear layer (weights and bias drawn from U(-1/sqrt(d), 1/sqrt(d)), as
    torch's nn.Linear draws them, seeded), the mean binary cross-entropy of its logits, full-batch Adam (lr 0.01,
    betas 0.9 and 0.999, eps 1e-8) for 1,000 epochs. Returns the weights with the bias last."""
    bound = 1 / np.sqrt(design.shape[1])
    theta = np.random.default_rng(0).uniform(-bound, bound, design.shape[1] + 1)
    rows = np.c_[design, np.ones(len(design))]
    first, second = np.zeros_like(theta), np.zeros_like(theta)
    for step in range(1, epochs + 1):
        gradient = rows.T @ (expit(rows @ theta) - target) / len(target)
        first, second = 0.9 * first + 0.1 * gradient, 0.999 * second + 0.001 * gradient**2
        theta -= lr * (first / (1 - 0.9**step)) / (np.sqrt(second / (1 - 0.999**step)) + 1e-8)
    return theta


def adam_against_mle(pools: dict[str, Pool]) -> dict:
    """`linear_di.py`'s p-value on one split (seeded) of each pool's true labels, with its own preprocessing
    (`splits.preprocess`), Student's t-test and its Adam fit (`adam_fit`), against the same split with the
    maximum-likelihood fit Adam approaches (`split_p_value(preprocessing="linear_di", equal_var=True,
    penalty=0)`): log10 of each p and how many decades apart they are."""
    out = {}
    for name, pool in pools.items():
        labels = pool.labels
        train = di.split_mask(labels, di.fit_size(labels, None), np.random.default_rng(0))
        mle = di.split_p_value(pool.x, labels, train, pool.names, equal_var=True, preprocessing="linear_di",
                               penalty=0.0).p_value
        features, _ = preprocess(pool.x, labels)
        theta = adam_fit(features[train], labels[train].astype(float))
        scores = features @ theta[:-1] + theta[-1]
        held = ~train
        adam = ttest_ind(scores[held & (labels == 1)], scores[held & (labels == 0)], alternative="greater").pvalue
        out[name] = {"log10_p_mle": round(float(np.log10(mle)), 3), "log10_p_adam": round(float(np.log10(adam)), 3),
                     "decades_apart": round(abs(float(np.log10(adam) - np.log10(mle))), 3)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--relabelings", type=int, default=200)
    parser.add_argument("--subsamples", type=int, default=20)
    parser.add_argument("--draws", type=int, default=40, help="seeded diluted suspect sets per pool and share")
    parser.add_argument("--real", action="store_true", help="also SmolLM2-135M-Instruct and gemma-3-270m (minutes)")
    parser.add_argument("--finetune-samples", nargs="*", default=[], metavar="NAME=FILE",
                        help="finetune_memorization results files (with their samples file beside) of more models")
    parser.add_argument("--samples-dir", help="keep the runs here (and reuse those already there)")
    add_output_flag(parser)
    args = parser.parse_args()
    reuse_freed_memory()  # as every membench command does: the cost is timed as the task meets it
    started = time.perf_counter()
    report: dict = {"relabelings": args.relabelings, "subsamples": args.subsamples, "fit_threads": di.fit_threads()}
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(args.samples_dir or temporary)
        pools: dict[str, Pool] = {}
        mink, nulls, cost, e00 = mink_section(folder, args.real, args.relabelings, args.subsamples, pools)
        runs = {"reference-gpt2": evaluate(str(checkpoint_folder(FINETUNE_CONTROL)),
                                           ["--tasks", "finetune_memorization"], folder / "finetune-reference")}
        for item in args.finetune_samples:
            name, path = item.split("=", 1)
            [entry] = json.loads(Path(path).read_text())["tasks"]
            samples = (Path(path).parent / entry["samples_file"]).read_text().splitlines()
            runs[name] = entry, [json.loads(line) for line in samples]
        finetune, more_nulls, more_cost = finetune_section(runs, args.relabelings, args.subsamples, pools)
    nulls |= more_nulls
    report["mink"], report["finetune"], report["cost"] = mink, finetune, cost | more_cost
    report["nulls"] = {pool: fpr(p) | ({"stop_early": early} if early else {}) for pool, (p, _, early) in nulls.items()}
    report["nulls_pooled"] = fpr([p for pool, _, _ in nulls.values() for p in pool])
    report["nulls_pooled_twice_median"] = fpr([p for _, pool, _ in nulls.values() for p in pool])
    report["recorded_costs"] = recorded_costs()
    report["e00"] = e00
    report["guard"] = guard_on_splits()
    report["statistics"] = compare_statistics(pools, args.relabelings, args.subsamples)
    report["share"] = share_on_diluted(pools, args.draws)
    report["adam_against_mle"] = adam_against_mle(pools)
    report["seconds"] = round(time.perf_counter() - started, 1)
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
