"""Dataset inference: did the model train on this *set* of texts? (Maini, Jia, Papernot & Dziedzic 2024,
*LLM Dataset Inference: Did you train on my dataset?*, NeurIPS; code github.com/pratyushmaini/
llm_dataset_inference, `linear_di.py`). Per-text membership scores (LOSS, zlib, Min-K%, ...) of a suspect
set and of a validation set known to be unseen and drawn from the same distribution are combined by a
linear classifier fitted on one part of each set; a one-sided t-test on the other part asks whether the
suspect texts look more "seen" than the validation texts.

One split (`split_p_value`) follows `linear_di.py` step for step (clipping, normalisation, the linear
model, the one-sided t-test; `preprocessing="linear_di", equal_var=True` gives its p-value) but by default
fits the clipping on the training half only (`preprocess_on_train`: linear_di.py's clipping of each side on
all its texts leaks the labels of the held-out half) and uses Welch's t-test; `dataset_inference` repeats
it over seeded splits and combines their p-values by twice the median, valid under any dependence
between the splits. The test assumes the two sets are i.i.d. from one distribution under the null;
`iid_guard` checks that on model-free scores.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import cache
from typing import Literal, Sequence

import numpy as np
from scipy.stats import ttest_ind
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from threadpoolctl import ThreadpoolController

from harness.core.errors import UserError

Preprocessing = Literal["train", "linear_di"]
CLIP_FRACTION = 0.05  # linear_di.py: remove_outliers(remove_frac=0.05), 2.5% of each side of each class
MIN_PER_SIDE = 4  # 2 texts per side fit the classifier, 2 are tested (a t-test needs 2 per group)
# texts per side of the curve (after linear_di.py's p_sample_list, from 10: fewer barely fit 7 scores)
CURVE_SIZES = (10, 20, 50, 100, 200, 300, 500, 1000, 2000)


@dataclass(frozen=True)
class SplitResult:
    """One split: the one-sided t-test's p-value and statistic on the held-out texts, the texts that fit the
    classifier per side, the held-out texts of each side, and the weight of each feature."""

    p_value: float
    statistic: float
    n_train_per_side: int
    n_test_suspect: int
    n_test_validation: int
    weights: dict[str, float]


@dataclass(frozen=True)
class DatasetInferenceResult:
    """`dataset_inference`'s answer.

    p_value: the combined p-value (twice the median of `split_p_values`, at most 1); rejected: p_value <= alpha
    (the suspect set looks trained on); n_suspect / n_validation: texts used per side (after dropping
    non-finite rows); weights: per feature, the median over splits of its weight in the log-odds that a
    text is a suspect one (standardised features; positive = higher on suspect texts; 0.0 in a split that
    dropped the feature as constant); curve: (texts per side, combined p-value on a seeded subsample of that
    many texts per side); dropped_rows: rows with a non-finite score; dropped_features: constant in every
    split."""

    p_value: float
    alpha: float
    rejected: bool
    n_suspect: int
    n_validation: int
    n_train_per_side: int
    weights: dict[str, float]
    split_p_values: tuple[float, ...]
    curve: tuple[tuple[int, float], ...]
    dropped_rows: int
    dropped_features: tuple[str, ...]
    seed: int


@dataclass(frozen=True)
class IIDGuardResult:
    """`iid_guard`'s answer: the dataset-inference p-value on model-free scores; shifted: p_value <= alpha,
    the suspect and validation sets differ in distribution and a rejection on the model's scores is no
    evidence of training."""

    p_value: float
    alpha: float
    shifted: bool
    detail: DatasetInferenceResult


@cache
def blas() -> ThreadpoolController:
    """The BLAS/OpenMP pools loaded (found once): the fits run them on one thread, since on texts x scores
    matrices their threads only contend (10x slower on 2 busy cores)."""
    return ThreadpoolController()


def clip_outliers(values: np.ndarray, fraction: float = CLIP_FRACTION) -> np.ndarray:
    """`linear_di.py`'s `remove_outliers(outliers="clip")`: with k = floor(n * fraction / 2), the k lowest
    values become x_(k) and the k highest x_(n-k+1) (order statistics, 1-based: the innermost of the clipped
    values, not the first kept one as `scipy.stats.mstats.winsorize` takes). k = 0 (n < 2 / fraction)
    clips nothing, where `linear_di.py` raises an IndexError (its `sorted_ids[-0:]` is every index)."""
    values = np.asarray(values, dtype=float)
    k = int(len(values) * fraction / 2)
    if k == 0:
        return values.copy()
    ordered = np.sort(values)
    return np.clip(values, ordered[k - 1], ordered[len(values) - k])


def preprocess(features: np.ndarray, labels: np.ndarray,
               clip_fraction: float = CLIP_FRACTION) -> tuple[np.ndarray, np.ndarray]:
    """`linear_di.py`'s features before any split: each feature clipped within each side (`clip_outliers`
    on the suspect texts, then on the validation texts), then z = (x - mean_S) / std_S with the mean and
    population standard deviation (ddof 0) of the clipped *suspect* texts (its `normalize_and_stack`,
    normalize="train"). Also the mask of features kept: those with std_S > 0 (linear_di.py would divide
    by 0). The held-out texts are clipped by their own side's quantiles, a transform chosen by their
    labels: see `preprocess_on_train`."""
    x = np.array(features, dtype=float)
    suspect = labels == 1
    for side in (suspect, ~suspect):
        x[side] = np.apply_along_axis(clip_outliers, 0, x[side], clip_fraction)
    mean, std = x[suspect].mean(axis=0), x[suspect].std(axis=0)
    kept = std > 0
    return (x[:, kept] - mean[kept]) / std[kept], kept


def preprocess_on_train(features: np.ndarray, labels: np.ndarray, train: np.ndarray,
                        clip_fraction: float = CLIP_FRACTION) -> tuple[np.ndarray, np.ndarray]:
    """membench's default: the same clipping and normalisation, fitted on the training rows only and applied
    alike to every row. Each feature is clipped to [t_(k), t_(m-k+1)] (`clip_outliers`'s order statistics of
    the m training rows, both sides pooled), then z = (x - mean) / std over the training suspect rows.
    linear_di.py clips each side on all its texts, held-out ones included: with collinear scores (Min-K% at
    several k) the linear model picks up the clipping's side-dependent kinks and carries them to the held-out
    half, a false positive (bench_dataset_inference: 30% of single splits at alpha 0.05 on random halves of
    an untrained model's scores); a transform that never sees a held-out label cannot do that."""
    x = np.asarray(features, dtype=float)
    fit = x[train]
    k = int(len(fit) * clip_fraction / 2)
    if k:
        ordered = np.sort(fit, axis=0)
        x = np.clip(x, ordered[k - 1], ordered[len(fit) - k])
    suspect = x[train & (labels == 1)]
    mean, std = suspect.mean(axis=0), suspect.std(axis=0)
    kept = std > 0
    return (x[:, kept] - mean[kept]) / std[kept], kept


def split_features(x: np.ndarray, y: np.ndarray, train: np.ndarray, clip_fraction: float,
                   preprocessing: Preprocessing) -> tuple[np.ndarray, np.ndarray]:
    """`preprocess_on_train` ("train") or linear_di.py's `preprocess` ("linear_di")."""
    if preprocessing == "linear_di":
        return preprocess(x, y, clip_fraction)
    return preprocess_on_train(x, y, train, clip_fraction)


def held_out_test(z: np.ndarray, labels: np.ndarray, train: np.ndarray,
                  equal_var: bool = False) -> tuple[float, float, np.ndarray]:
    """Fit on the `train` rows, test on the others: unpenalised logistic regression with an intercept
    (the maximum-likelihood fit that `linear_di.py`'s nn.Linear + BCEWithLogitsLoss + Adam approaches),
    y = 1 for suspect; s = w.z + b on each held-out text; `ttest_ind(s_suspect, s_validation,
    alternative="greater", equal_var=...)` (H1: suspect texts score higher; linear_di.py codes validation
    as 1 and tests "less": the same t with its sign turned). Newton steps stop at max |gradient| <= 1e-10
    or after 30 (the MLE, when it exists, takes about 5; separable training rows have none, and the fit
    stops there as linear_di.py's Adam stops after 1000 steps: any w fitted on the training rows alone
    keeps the test valid). Returns (p, t, w). An undefined t-test (no variance on either side) gives
    p = 1, t = 0."""
    model = LogisticRegression(C=np.inf, solver="newton-cholesky", tol=1e-10, max_iter=30)
    with warnings.catch_warnings():  # separable rows: scikit-learn warns of a singular Hessian, no convergence
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.filterwarnings("ignore", message=".*(ill-conditioned|singular|Hessian).*")
        model.fit(z[train], labels[train])
    scores = model.decision_function(z[~train])
    held = labels[~train]
    with np.errstate(all="ignore"):
        result = ttest_ind(scores[held == 1], scores[held == 0], equal_var=equal_var, alternative="greater")
    t, p = float(result.statistic), float(result.pvalue)
    if not np.isfinite(p):
        return 1.0, 0.0, model.coef_[0]
    return p, t, model.coef_[0]


def one_split(x: np.ndarray, y: np.ndarray, train: np.ndarray, clip_fraction: float, preprocessing: Preprocessing,
              equal_var: bool) -> tuple[float, float, np.ndarray, np.ndarray]:
    """(p, t, weight per feature (0 where dropped), kept mask) of one split; p = 1 when no feature varies."""
    z, kept = split_features(x, y, train, clip_fraction, preprocessing)
    weights = np.zeros(x.shape[1])
    if not kept.any():
        return 1.0, 0.0, weights, kept
    p, t, w = held_out_test(z, y, train, equal_var)
    weights[kept] = w
    return p, t, weights, kept


def check_input(features: np.ndarray, labels: np.ndarray, names: Sequence[str],
                nonfinite: Literal["drop", "raise"]) -> tuple[np.ndarray, np.ndarray, int]:
    """The (features, labels) rows to use, as float and int arrays, and how many rows were dropped for a
    NaN or +-inf feature (`nonfinite="drop"`; "raise": a UserError instead). UserError for mismatched
    shapes, labels other than 0/1, or fewer than `MIN_PER_SIDE` texts on a side."""
    x = np.asarray(features, dtype=float)
    y = np.asarray(labels)
    if x.ndim != 2 or x.shape[0] != y.shape[0] or x.shape[1] != len(names) or x.shape[1] == 0:
        raise UserError(f"dataset inference: features must be texts x {len(names)} named scores with one label per "
                        f"text; got features {x.shape} and {y.shape[0]} labels")
    if not np.isin(y, (0, 1)).all():
        raise UserError("dataset inference: labels must be 1 (suspect) or 0 (validation)")
    y = y.astype(int)
    finite = np.isfinite(x).all(axis=1)
    if not finite.all() and nonfinite == "raise":
        raise UserError(f"dataset inference: {int((~finite).sum())} texts have a NaN or infinite score")
    x, y = x[finite], y[finite]
    n_suspect, n_validation = int(y.sum()), int(len(y) - y.sum())
    if min(n_suspect, n_validation) < MIN_PER_SIDE:
        raise UserError(f"dataset inference needs at least {MIN_PER_SIDE} texts with finite scores on each side "
                        f"({MIN_PER_SIDE // 2} to fit, {MIN_PER_SIDE // 2} to test); got {n_suspect} suspect and "
                        f"{n_validation} validation")
    return x, y, int((~finite).sum())


def split_mask(labels: np.ndarray, n_train: int, rng: np.random.Generator) -> np.ndarray:
    """Rows that fit the classifier: `n_train` texts of each side drawn without replacement (linear_di.py
    shuffles each side, then its first `num_samples` texts fit and the rest are tested)."""
    train = np.zeros(len(labels), dtype=bool)
    for side in (1, 0):
        rows = np.flatnonzero(labels == side)
        train[rng.permutation(rows)[:n_train]] = True
    return train


def split_p_value(features: np.ndarray, labels: np.ndarray, train: np.ndarray, names: Sequence[str],
                  clip_fraction: float = CLIP_FRACTION, equal_var: bool = False,
                  preprocessing: Preprocessing = "train") -> SplitResult:
    """One split of Maini et al.'s test: clip and normalise (`preprocess_on_train`, or with
    preprocessing="linear_di" linear_di.py's own `preprocess` of every text), fit on the `train` rows
    (boolean mask, the same number per side), one-sided t-test on the rest (`held_out_test`).
    `equal_var=True` is linear_di.py's own Student t-test (SciPy's default); membench's default is
    Welch's, which has the same statistic when the held-out sides are equally large and Welch-Satterthwaite
    degrees of freedom instead of n_S + n_V - 2. With preprocessing="linear_di", equal_var=True this is
    linear_di.py's p-value for one seed. Non-finite rows raise a UserError."""
    x, y, _ = check_input(features, labels, names, "raise")
    train = np.asarray(train, dtype=bool)
    with blas().limit(limits=1):
        p, t, w, _ = one_split(x, y, train, clip_fraction, preprocessing, equal_var)
    return SplitResult(p_value=p, statistic=t, n_train_per_side=int(train[y == 1].sum()),
                       n_test_suspect=int((~train & (y == 1)).sum()),
                       n_test_validation=int((~train & (y == 0)).sum()), weights=dict(zip(names, w.tolist())))


def twice_median(p_values: Sequence[float]) -> float:
    """min(1, 2 * median(p)): the quantile aggregation of Meinshausen, Meier & Buhlmann (2009, *p-Values for
    high-dimensional regression*, JASA 104:1671, Theorem 3.1 with gamma = 1/2), a valid p-value whatever the
    dependence between the p_j (also Vovk & Wang 2020, *Combining p-values via averaging*, Biometrika
    107:791, and Ruschendorf 1982). With an even number B of p-values NumPy's median averages the two
    middle ones; it is >= the (B/2)-th smallest, so the proof's Markov bound still holds."""
    return float(min(1.0, 2.0 * float(np.median(p_values))))


def combined(x: np.ndarray, y: np.ndarray, n_splits: int, n_train: int | None, rng: np.random.Generator,
             clip_fraction: float, preprocessing: Preprocessing,
             equal_var: bool) -> tuple[float, list[float], np.ndarray, np.ndarray, int]:
    """Twice-median p-value of `n_splits` seeded splits of finite (x, y); also the per-split p-values,
    the per-split weights (splits x features), the features kept in some split and the texts per side fitted."""
    if not (np.ptp(x[y == 1], axis=0) > 0).any():
        raise UserError("dataset inference: no score varies across the suspect texts")
    smaller = min(int(y.sum()), int(len(y) - y.sum()))
    fit = smaller // 2 if n_train is None else n_train
    if not 1 <= fit <= smaller - MIN_PER_SIDE // 2:
        raise UserError(f"dataset inference: {fit} texts per side to fit leaves fewer than {MIN_PER_SIDE // 2} "
                        f"to test on the smaller side ({smaller} texts)")
    p_values, weights, kept = [], [], np.zeros(x.shape[1], dtype=bool)
    with blas().limit(limits=1):
        for _ in range(n_splits):
            p, _, w, used = one_split(x, y, split_mask(y, fit, rng), clip_fraction, preprocessing, equal_var)
            p_values.append(p)
            weights.append(w)
            kept |= used
    return twice_median(p_values), p_values, np.array(weights), kept, fit


def dataset_inference(features: np.ndarray, labels: np.ndarray, names: Sequence[str], *, alpha: float = 0.05,
                      n_splits: int = 10, n_train: int | None = None, seed: int = 0,
                      curve_sizes: Sequence[int] | None = CURVE_SIZES, clip_fraction: float = CLIP_FRACTION,
                      equal_var: bool = False, preprocessing: Preprocessing = "train",
                      nonfinite: Literal["drop", "raise"] = "drop") -> DatasetInferenceResult:
    """Maini et al.'s dataset inference with cross-fitting: `n_splits` seeded splits of the texts (each
    side shuffled, `n_train` per side fit the linear model, default half the smaller side; the rest are
    tested as in `split_p_value`), combined by `twice_median`. H0: the suspect and validation texts are
    exchangeable under the model's scores (not trained on, same distribution); H1: suspect texts score
    as more "seen". `features`: texts x attacks (columns named by `names`), `labels`: 1 suspect, 0
    validation. Rows with a NaN or infinite score are dropped (counted) or, with `nonfinite="raise"`,
    refused. `preprocessing`, `equal_var`: as in `split_p_value`. The curve runs the same test on a seeded
    subsample of n texts per side for each n of `curve_sizes` below the smaller side, then ends with the
    smaller side's size and `p_value` (all texts; None: no curve)."""
    x, y, dropped = check_input(features, labels, names, nonfinite)
    streams = np.random.SeedSequence(seed).spawn(2)
    rng = np.random.default_rng(streams[0])
    p, p_values, weights, kept, fit = combined(x, y, n_splits, n_train, rng, clip_fraction, preprocessing, equal_var)
    smaller = min(int(y.sum()), int(len(y) - y.sum()))
    curve = []
    if curve_sizes is not None:
        sub_rng = np.random.default_rng(streams[1])
        for n in sorted({n for n in curve_sizes if MIN_PER_SIDE <= n < smaller}):
            rows = np.concatenate([sub_rng.choice(np.flatnonzero(y == side), n, replace=False) for side in (1, 0)])
            try:
                curve.append((n, combined(x[rows], y[rows], n_splits, None, sub_rng, clip_fraction, preprocessing,
                                          equal_var)[0]))
            except UserError:  # no score varies across this subsample's suspect texts: nothing to test
                curve.append((n, 1.0))
        curve.append((smaller, p))
    return DatasetInferenceResult(
        p_value=p, alpha=alpha, rejected=p <= alpha, n_suspect=int(y.sum()), n_validation=int(len(y) - y.sum()),
        n_train_per_side=fit, weights=dict(zip(names, np.median(weights, axis=0).tolist())),
        split_p_values=tuple(p_values),
        curve=tuple(curve), dropped_rows=dropped,
        dropped_features=tuple(n for n, k in zip(names, kept) if not k), seed=seed)


def iid_guard(blind_features: np.ndarray, labels: np.ndarray, names: Sequence[str], *, alpha: float = 0.05,
              n_splits: int = 10, seed: int = 0) -> IIDGuardResult:
    """`dataset_inference` (no curve) on model-free scores of the same texts (text length, compressed size,
    year, n-gram counts: Das, Zhang & Tramer 2024's blind features). They see no model, so a rejection
    means the suspect and validation texts differ in distribution, which breaks dataset inference's null
    (Maini et al. sec. 3; Duan et al. 2024): then the test on the model's scores proves nothing. The scores
    must be computed without the labels: a blind baseline's out-of-fold scores (`harness.metrics.blind`)
    were fitted on the labels of the guard's held-out texts, and on a random split they can sit away from
    chance (blind_bow's AUC on the reference split: 0.43), which the guard then reports as a shift."""
    detail = dataset_inference(blind_features, labels, names, alpha=alpha, n_splits=n_splits, seed=seed,
                               curve_sizes=None)
    return IIDGuardResult(p_value=detail.p_value, alpha=alpha, shifted=detail.rejected, detail=detail)
