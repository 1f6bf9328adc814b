"""Dataset inference: did the model train on this *set* of texts? (Maini, Jia, Papernot & Dziedzic 2024,
*LLM Dataset Inference: Did you train on my dataset?*, NeurIPS; code github.com/pratyushmaini/
llm_dataset_inference, `linear_di.py`). Per-text membership scores (LOSS, zlib, Min-K%, ...) of a suspect
set and of a validation set known to be unseen and drawn from the same distribution are combined by a
linear classifier fitted on one part of each set; a one-sided t-test on the other part asks whether the
suspect texts look more "seen" than the validation texts. membench's model may weigh each score only in its
direction of "seen" (`direction="seen"`, `splits.fit_logistic_seen`; issue 77): linear_di.py's fit takes any
sign, so a validation set the model trained on made the suspect set look trained on.

One split (`split_p_value`, computed by `splits`) follows `linear_di.py` step for step (clipping,
normalisation, the linear model, the one-sided t-test; `preprocessing="linear_di", equal_var=True` gives its
p-value) but by default fits the clipping on the training rows only (linear_di.py's clipping of each side on
all its texts leaks the labels of the held-out half) and uses Welch's t-test. `dataset_inference` averages
the z-scores of seeded splits (Stouffer's mean) and refers that mean to the same statistic on random
relabelings of the texts: an exact permutation test of the cross-fitted statistic (`permutation_p`). With
`stop_early` it computes what the decision at alpha needs: the relabelings stop once the test can no longer
reject (`sequential_p`, Besag & Clifford 1991; the same decision and, at or below alpha, the same p-value,
for a fraction of the fits where p is large), and the curve of p against texts records decisions. The test
assumes the two sets are i.i.d. from one distribution under the null; `iid_guard` checks that on model-free
scores.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from typing import Literal, Sequence

import numpy as np
from threadpoolctl import ThreadpoolController

from harness.core.errors import UserError
from harness.metrics.dataset_share import share_lower_bound
from harness.metrics.splits import CLIP_FRACTION, Direction, preprocess, split_statistics

Preprocessing = Literal["train", "linear_di"]
MIN_PER_SIDE = 4  # 2 texts per side fit the classifier, 2 are tested (a t-test needs 2 per group)
PERMUTATIONS = 99  # random relabelings that calibrate the combined statistic (--di-permutations)
SPLITS = 5  # seeded fit/test splits averaged into the statistic (--di-splits)
# the linear model's L2 penalty (--di-penalty): 0 is linear_di.py's unpenalised model; 0.1 needed half as many texts
# per side to reject on the weakly trained pools at the same error rate (bench_dataset_inference's `statistics`)
PENALTY = 0.1
# the linear model's direction (--di-direction): "seen", weights >= 0 on scores oriented higher = more seen, so the
# test answers "does the suspect set look more trained on?" and no other difference (issue 77)
DIRECTION: Direction = "seen"
SHARE_CONFIDENCE = 0.95  # the share bound's one-sided confidence (`dataset_share.share_lower_bound`)
CURVE_SPLITS = 1  # splits per curve point below the full pool (linear_di.py's curve is single-split): 5x cheaper
# texts per side of the curve (after linear_di.py's p_sample_list, from 10: fewer barely fit 7 scores)
CURVE_SIZES = (10, 20, 50, 100, 200, 300, 500, 1000, 2000)
FITS_PER_BATCH = 256  # splits stacked into one Newton solve (about 40 MB at 400 texts and 19 scores)
FIRST_BLOCK = 10  # relabelings fitted before the first look at the exceedances, doubling after each look
# fits x texts a thread must get to be worth its handover: below, one thread fits them all (in a task run on an
# AMD EPYC, a curve point's 20 relabelings of 20 texts took 2 ms on one thread and 4 ms on two)
WORK_PER_THREAD = 10_000


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
class Combined:
    """The combined test on one pool: `permutation_p`'s p_value (or `sequential_p`'s, where the relabelings
    stopped early), the mean split z-score (`statistic`), its values on the relabelings fitted (`null`, in
    their order) with their mean and standard deviation, the observed splits' p-values and weights (splits x
    features), and their classifier scores of every text and training rows (`scores`, `train`: splits x
    texts)."""

    p_value: float
    statistic: float
    null: np.ndarray
    null_mean: float
    null_sd: float
    split_p_values: tuple[float, ...]
    weights: np.ndarray
    scores: np.ndarray
    train: np.ndarray


@dataclass(frozen=True)
class DatasetInferenceResult:
    """`dataset_inference`'s answer.

    p_value: the combined p-value (`permutation_p`, at least 1 / (permutations + 1)); rejected: p_value <= alpha
    (the suspect set looks trained on); size: the test's size at alpha (`test_size`); statistic, null_mean,
    null_sd: the mean split z-score and its mean and standard deviation over the relabelings; null_sds:
    (statistic - null_mean) / null_sd, how far past its null the statistic lies where p_value sits at its floor
    (an effect size, not a p-value). The three null figures need every relabeling: a test that stopped early
    has None for each and says so in null_absent;
    n_suspect / n_validation: texts used per side (after dropping non-finite rows); weights: per feature, the
    median over the observed splits of its weight in the log-odds that a text is a suspect one (standardised
    features; positive = higher on suspect texts; 0.0 in a split that dropped the feature as constant);
    curve: (texts per side, combined p-value on a seeded subsample of that many texts per side);
    dropped_rows: rows with a non-finite score; dropped_features: constant in every split; relabelings: those
    fitted (`permutations`, or fewer where the test stopped early); penalty: the linear model's L2 penalty;
    direction: "seen" (every weight >= 0) or "any" (`splits.Direction`);
    share_lower: a lower bound, at SHARE_CONFIDENCE, on the share of suspect texts trained on
    (`dataset_share.share_lower_bound` on the observed splits' held-out scores)."""

    p_value: float
    alpha: float
    rejected: bool
    statistic: float
    null_mean: float | None
    null_sd: float | None
    null_sds: float | None
    null_absent: str | None
    permutations: int
    size: float
    relabelings: int
    n_suspect: int
    n_validation: int
    n_train_per_side: int
    weights: dict[str, float]
    split_p_values: tuple[float, ...]
    curve: tuple[tuple[int, float], ...]
    dropped_rows: int
    dropped_features: tuple[str, ...]
    seed: int
    penalty: float
    direction: Direction
    share_lower: float


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
    """The BLAS/OpenMP pools loaded (found once): each batch of fits runs them on one thread, since on
    stacks of small matrices their threads only contend."""
    return ThreadpoolController()


def fit_threads() -> int:
    """Threads that fit batches of splits side by side: as many as the BLAS pools have now (the run's
    thread count, which `harness.run.reproducible.set_threads` gives them; otherwise the library's
    default, the available cores)."""
    return max([pool["num_threads"] for pool in blas().info()], default=1)


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
    shuffles each side, then its first `num_samples` texts fit and the rest are tested). `labels`: one
    labelling (texts) or several (F x texts, the same counts in each), masks of the same shape."""
    several = np.atleast_2d(labels)
    order = np.argsort(rng.random(several.shape) + 2 * several, axis=1)  # validation first, each side shuffled
    validation = int((several[0] == 0).sum())
    train = np.zeros(several.shape, dtype=bool)
    chosen = np.concatenate([order[:, :n_train], order[:, validation:validation + n_train]], axis=1)
    np.put_along_axis(train, chosen, True, axis=1)
    return train.reshape(np.shape(labels))


def split_p_value(features: np.ndarray, labels: np.ndarray, train: np.ndarray, names: Sequence[str],
                  clip_fraction: float = CLIP_FRACTION, equal_var: bool = False,
                  preprocessing: Preprocessing = "train", penalty: float = 0.0) -> SplitResult:
    """One split of Maini et al.'s test: clip and normalise (fitted on the `train` rows, or with
    preprocessing="linear_di" linear_di.py's own `preprocess` of every text), fit on the `train` rows
    (boolean mask, the same number per side), one-sided t-test on the rest (`splits.split_statistics`).
    `equal_var=True` is linear_di.py's own Student t-test (SciPy's default); membench's default is
    Welch's, which has the same statistic when the held-out sides are equally large and Welch-Satterthwaite
    degrees of freedom instead of n_S + n_V - 2. With preprocessing="linear_di", equal_var=True this is
    linear_di.py's p-value for one seed (unpenalised: `penalty` 0). Non-finite rows raise a UserError."""
    x, y, _ = check_input(features, labels, names, "raise")
    train = np.asarray(train, dtype=bool)
    kept = np.ones(x.shape[1], dtype=bool)
    prepared = None
    if preprocessing == "linear_di":
        prepared, kept = preprocess(x, y, clip_fraction)
    with blas().limit(limits=1):
        found = split_statistics(x, y[None], train[None], clip_fraction, equal_var, prepared, penalty)
    weights = np.zeros(x.shape[1])
    weights[kept] = found.weights[0]
    return SplitResult(p_value=float(found.p_value[0]), statistic=float(found.statistic[0]),
                       n_train_per_side=int(train[y == 1].sum()), n_test_suspect=int((~train & (y == 1)).sum()),
                       n_test_validation=int((~train & (y == 0)).sum()), weights=dict(zip(names, weights.tolist())))


def permutation_p(statistic: float, null: np.ndarray) -> float:
    """(1 + #{null >= statistic}) / (B + 1) for an observed statistic and its values on B random relabelings:
    exact under exchangeability at any B, never below 1 / (B + 1) (Phipson & Smyth 2010, *Permutation
    P-values should never be zero*, Stat. Appl. Genet. Mol. Biol. 9:39). A normal fitted to the null values
    would resolve smaller p-values, but the mean split z-score's null is right-skewed (skewness 0.17 on the
    untrained reference GPT-2's pool: splits that share texts find the same chance direction together), so
    such a p-value is too small in the tail it would be quoted from (bench_dataset_inference)."""
    return float((1 + np.sum(null >= statistic)) / (len(null) + 1))


def stop_after(alpha: float, permutations: int) -> int:
    """`sequential_p`'s h: the fewest relabelings at or above the statistic that rule out a rejection at
    alpha, the smallest h with h / permutations > alpha. Then the stopped p-value h / L (L <= permutations)
    and the full test's (1 + g) / (permutations + 1) (g >= h) both exceed alpha: stopping early never
    changes the decision."""
    return next(h for h in range(1, permutations + 1) if h / permutations > alpha)


def sequential_p(statistic: float, null: np.ndarray, h: int) -> tuple[float, int]:
    """Besag & Clifford's sequential Monte Carlo p-value (1991, *Sequential Monte Carlo p-values*,
    Biometrika 78:301) on relabelings taken in order: h / L when the h-th of them at or above the statistic
    is the L-th, the test stopping there; otherwise `permutation_p` of them all. Also the relabelings it
    used (L, or all). Exact under exchangeability as the full test is; it differs from it only above alpha
    (`stop_after`), where it is coarser (h / L)."""
    reached = np.flatnonzero(null >= statistic)
    if len(reached) >= h:
        used = int(reached[h - 1]) + 1
        return h / used, used
    return permutation_p(statistic, null), len(null)


def blocks(permutations: int, stop_early: bool) -> list[tuple[int, int]]:
    """The labelings `combined` fits together, as [first, last) ranges: the observed one (0) with the
    relabelings 1..permutations, all in one block, or, where the test may stop early, FIRST_BLOCK relabelings
    and then twice as many as before in each next block."""
    if not stop_early:
        return [(0, permutations + 1)]
    ranges, first, size = [], 0, FIRST_BLOCK
    while first < permutations + 1:
        last = min(permutations + 1, first + size + (first == 0))
        ranges.append((first, last))
        first, size = last, 2 * size
    return ranges


def labelling_rng(seeds: np.random.SeedSequence, index: int) -> np.random.Generator:
    """The random stream of labelling `index` of a test (0: the observed labels; i >= 1: the i-th relabeling),
    a child of the test's seed: each labelling's draws (its relabeling, then its splits) are the same whatever
    the number of relabelings, so raising --di-permutations keeps the observed statistic and the relabelings
    already drawn, and adds new ones."""
    return np.random.default_rng(np.random.SeedSequence(seeds.entropy, spawn_key=(*seeds.spawn_key, index)))


def labelling_splits(y: np.ndarray, index: int, n_splits: int, n_train: int, seeds: np.random.SeedSequence
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Labelling `index`'s labels (`n_splits` rows of y itself, or of its relabeling) and their training
    masks, from its own stream (`labelling_rng`)."""
    rng = labelling_rng(seeds, index)
    labels = np.repeat((y if index == 0 else rng.permutation(y))[None], n_splits, axis=0)
    return labels, split_mask(labels, n_train, rng)


def combined(x: np.ndarray, y: np.ndarray, n_splits: int, permutations: int, n_train: int,
             seeds: np.random.SeedSequence, clip_fraction: float, equal_var: bool, stop: int | None = None,
             penalty: float = 0.0, direction: Direction = "any") -> Combined:
    """Cross-fitting calibrated by permutation: the mean z-score (Stouffer's; `splits.SplitStatistics.z`) of
    `n_splits` seeded splits of (x, y), against the same mean on each of `permutations` random relabelings of
    y (each with its own `n_splits` splits), by `permutation_p`. Under H0 the texts' labels are exchangeable,
    so the observed labelling and its relabelings are draws of one distribution, whatever the dependence
    between splits that share texts. Each labelling draws from its own stream (`labelling_rng`): the observed
    splits do not depend on the number of relabelings, nor relabeling i on how many follow it. With `stop`
    (`stop_after`'s h) the relabelings are fitted in `blocks` and the test stops at the h-th at or above the
    statistic (`sequential_p`); a test that does not stop has the full test's p-value, bit for bit. Every
    labelling's splits fit the same model (`penalty`, `direction`): the fit is part of the statistic, so the test
    stays exact whatever the penalty and the direction."""
    threads = fit_threads()
    found: list = []
    with blas().limit(limits=1), ThreadPoolExecutor(threads) as pool:
        for first, last in blocks(permutations, stop is not None):
            drawn = [labelling_splits(y, index, n_splits, n_train, seeds) for index in range(first, last)]
            labels, train = np.concatenate([d[0] for d in drawn]), np.concatenate([d[1] for d in drawn])
            if first == 0:
                observed_train = train[:n_splits]  # the observed labelling's training rows, for the share bound
            parallel = max(1, min(threads, len(train) * len(x) // WORK_PER_THREAD))
            size = min(FITS_PER_BATCH, -(-len(train) // parallel))
            chunks = [slice(start, start + size) for start in range(0, len(train), size)]
            found += pool.map(lambda chunk: split_statistics(x, labels[chunk], train[chunk], clip_fraction,
                                                             equal_var, penalty=penalty, direction=direction),
                              chunks)
            means = np.concatenate([part.z for part in found]).reshape(last, n_splits).mean(axis=1)
            if stop and (means[1:] >= means[0]).sum() >= stop:
                break
    if stop:
        p_value, used = sequential_p(float(means[0]), means[1:], stop)
    else:
        p_value, used = permutation_p(float(means[0]), means[1:]), permutations
    null = means[1:used + 1]
    observed = found[:n_splits]  # chunks of at least one split each: these hold the observed labelling's splits
    observed_p = np.concatenate([part.p_value for part in observed])[:n_splits]
    return Combined(p_value=p_value, statistic=float(means[0]), null=null,
                    null_mean=float(np.mean(null)), null_sd=float(np.std(null, ddof=1)) if len(null) > 1 else 0.0,
                    split_p_values=tuple(observed_p.tolist()),
                    weights=np.concatenate([part.weights for part in observed])[:n_splits],
                    scores=np.concatenate([part.scores for part in observed])[:n_splits],
                    train=observed_train)


def test_size(alpha: float, permutations: int) -> float:
    """The permutation test's size at level alpha with B relabelings: P(p <= alpha) under H0 for
    p = (1 + g) / (B + 1) uniform on {1, ..., B + 1} / (B + 1), i.e. floor(alpha (B + 1)) / (B + 1): alpha
    exactly where alpha (B + 1) is whole (B = 39, 59, 99 at 0.05), below it otherwise (B = 49: 0.04)."""
    return int(np.floor(alpha * (permutations + 1) + 1e-9)) / (permutations + 1)


def min_permutations(alpha: float) -> int:
    """The fewest permutations whose smallest p-value, 1 / (B + 1), reaches alpha."""
    return int(np.ceil(1 / alpha - 1 - 1e-9))


def fit_size(y: np.ndarray, n_train: int | None) -> int:
    """Texts per side that fit the classifier: `n_train`, default half the smaller side; a UserError when
    fewer than MIN_PER_SIDE / 2 would be left to test on the smaller side."""
    smaller = min(int(y.sum()), int(len(y) - y.sum()))
    fit = smaller // 2 if n_train is None else n_train
    if not 1 <= fit <= smaller - MIN_PER_SIDE // 2:
        raise UserError(f"dataset inference: {fit} texts per side to fit leaves fewer than {MIN_PER_SIDE // 2} "
                        f"to test on the smaller side ({smaller} texts)")
    return fit


def dataset_inference(features: np.ndarray, labels: np.ndarray, names: Sequence[str], *, alpha: float = 0.05,
                      n_splits: int = SPLITS, permutations: int = PERMUTATIONS, n_train: int | None = None,
                      seed: int = 0, curve_sizes: Sequence[int] | None = CURVE_SIZES,
                      clip_fraction: float = CLIP_FRACTION, equal_var: bool = False,
                      nonfinite: Literal["drop", "raise"] = "drop", stop_early: bool = False,
                      penalty: float = PENALTY, direction: Direction = DIRECTION) -> DatasetInferenceResult:
    """Maini et al.'s dataset inference, cross-fitted and calibrated by permutation (`combined`): `n_splits`
    seeded splits of the texts (each side shuffled, `n_train` per side fit the linear model, default half the
    smaller side; the rest are tested as in `split_p_value`). H0: the suspect and validation texts are
    exchangeable under the model's scores (not trained on, same distribution); H1: suspect texts score as
    more "seen". `features`: texts x attacks (columns named by `names`), `labels`: 1 suspect, 0 validation.
    `direction` "seen" (the default) asks H1 only: every score must be oriented so that higher = more like a
    trained-on text, and the linear model may only weigh each score that way (`splits.fit_logistic_seen`), so a
    validation set the model trained on does not make the suspect set look trained on, nor does any other
    difference against the scores' direction (a two-sided fit, direction "any", `linear_di.py`'s, finds a
    difference in either direction and tests it as "suspect > validation" on the held-out texts).
    Rows with a NaN or infinite score are dropped (counted) or, with `nonfinite="raise"`, refused. The
    curve runs the test on one split (`CURVE_SPLITS`, calibrated by the same relabelings) of a seeded subsample
    of n texts per side for each n of `curve_sizes` below the smaller side, then ends with the smaller side's
    size and `p_value` (all texts, `n_splits` splits; None: no curve). `stop_early`: compute what the decision
    at alpha needs: every test stops its relabelings once it cannot reject (`sequential_p`), and a curve
    point, whose answer is its decision, has the fewest relabelings that can reject (`min_permutations`).
    `penalty`: the linear model's L2 penalty (`splits.fit_logistic`; 0 is linear_di.py's unpenalised model), the
    same in every split of every labelling. `share_lower` bounds the share of suspect texts trained on
    (`dataset_share`), from the observed splits' held-out scores."""
    x, y, dropped = check_input(features, labels, names, nonfinite)
    if not (np.isfinite(penalty) and penalty >= 0):
        raise UserError(f"dataset inference: the penalty must be a finite number >= 0, got {penalty}")
    if 1 / (permutations + 1) > alpha:
        raise UserError(f"dataset inference: {permutations} permutations cannot give a p-value at or below alpha "
                        f"{alpha:g} (the smallest is 1 / (permutations + 1)); use at least {min_permutations(alpha)}")
    if not (np.ptp(x[y == 1], axis=0) > 0).any():
        raise UserError("dataset inference: no score varies across the suspect texts")
    observed, curve_seeds = np.random.SeedSequence(seed).spawn(2)
    fit = fit_size(y, n_train)
    stop = stop_after(alpha, permutations) if stop_early else None
    # a curve point's answer is its decision at alpha, which the fewest relabelings that can reject give
    curve_permutations = min_permutations(alpha) if stop_early else permutations
    curve_stop = stop_after(alpha, curve_permutations) if stop_early else None
    found = combined(x, y, n_splits, permutations, fit, observed, clip_fraction, equal_var, stop, penalty, direction)
    smaller = min(int(y.sum()), int(len(y) - y.sum()))
    curve = []
    if curve_sizes is not None:
        for n in sorted({n for n in curve_sizes if MIN_PER_SIDE <= n < smaller}):
            # each point's own streams, keyed by its size: a point does not depend on the others
            point = np.random.SeedSequence(curve_seeds.entropy, spawn_key=(*curve_seeds.spawn_key, n))
            rows_seed, test_seeds = point.spawn(2)
            sub_rng = np.random.default_rng(rows_seed)
            rows = np.concatenate([sub_rng.choice(np.flatnonzero(y == side), n, replace=False) for side in (1, 0)])
            sub = combined(x[rows], y[rows], CURVE_SPLITS, curve_permutations, n // 2, test_seeds, clip_fraction,
                           equal_var, curve_stop, penalty, direction)
            curve.append((n, sub.p_value))
        curve.append((smaller, found.p_value))
    full = len(found.null) == permutations  # an effect size needs the whole null, not a stopped test's first few
    return DatasetInferenceResult(
        p_value=found.p_value, alpha=alpha, rejected=found.p_value <= alpha, statistic=found.statistic,
        null_mean=found.null_mean if full else None, null_sd=found.null_sd if full else None,
        null_sds=((found.statistic - found.null_mean) / found.null_sd if found.null_sd > 0 else 0.0) if full else None,
        null_absent=None if full else f"stopped early after {len(found.null)} of {permutations} relabelings",
        permutations=permutations, size=test_size(alpha, permutations), relabelings=len(found.null),
        n_suspect=int(y.sum()), n_validation=int(len(y) - y.sum()), n_train_per_side=fit,
        weights=dict(zip(names, np.median(found.weights, axis=0).tolist())), split_p_values=found.split_p_values,
        curve=tuple(curve), dropped_rows=dropped,
        dropped_features=tuple(n for n, w in zip(names, (found.weights != 0).any(axis=0)) if not w), seed=seed,
        penalty=penalty, direction=direction,
        share_lower=share_lower_bound(found.scores, y, found.train, SHARE_CONFIDENCE))


def iid_guard(blind_features: np.ndarray, labels: np.ndarray, names: Sequence[str], *, alpha: float = 0.05,
              n_splits: int = SPLITS, permutations: int = PERMUTATIONS, seed: int = 0,
              stop_early: bool = False, penalty: float = PENALTY) -> IIDGuardResult:
    """`dataset_inference` (no curve) on model-free scores of the same texts (text length, compressed size,
    year, n-gram counts: Das, Zhang & Tramer 2024's blind features). They see no model, so a rejection
    means the suspect and validation texts differ in distribution, which breaks dataset inference's null
    (Maini et al. sec. 3; Duan et al. 2024): then the test on the model's scores proves nothing. The scores
    must be computed without the labels: a blind baseline's out-of-fold scores (`harness.metrics.blind`)
    were fitted on the labels of the guard's held-out texts, and on a random split they can sit away from
    chance (blind_bow's AUC on the reference split: 0.43), which the guard then reports as a shift. These
    features have no "seen" direction, and a shift either way breaks the null: the guard's fit is two-sided
    (direction "any")."""
    detail = dataset_inference(blind_features, labels, names, alpha=alpha, n_splits=n_splits,
                               permutations=permutations, seed=seed, curve_sizes=None, stop_early=stop_early,
                               penalty=penalty, direction="any")
    return IIDGuardResult(p_value=detail.p_value, alpha=alpha, shifted=detail.rejected, detail=detail)
