"""Metric functions on plain numbers: no torch. Each docstring gives the formula and its source.

Orientation convention for membership scores: higher means "more likely a training member".
"""

from __future__ import annotations

import os
import zlib

import numpy as np
from rapidfuzz.distance import Levenshtein
from scipy.stats import rankdata
from sklearn.metrics import roc_auc_score, roc_curve

# ---------------------------------------------------------------- membership scores (one text each)

def loss_score(logprobs: np.ndarray) -> float:
    """Negative mean NLL: (1/n) sum_t log p(x_t | x_<t) (Yeom et al. 2018's LOSS attack)."""
    return float(np.mean(logprobs))


def zlib_score(text: str, logprobs: np.ndarray) -> float:
    """Loss over zlib entropy: (1/n) sum_t log p(x_t | x_<t) / len(zlib(text)) (Carlini et al. 2021).

    zlib entropy is the byte length of the zlib-compressed UTF-8 text, as in the Min-K% code.
    """
    return float(np.mean(logprobs)) / len(zlib.compress(text.encode("utf-8")))


def lowest_k_count(n_tokens: int, k_percent: float) -> int:
    """How many tokens Min-K% averages: int(n * k / 100) as in Shi et al.'s code, at least 1."""
    return max(1, int(n_tokens * k_percent / 100))


def min_k_score(logprobs: np.ndarray, k_percent: float) -> float:
    """Min-K% Prob (Shi et al. 2024): mean of the lowest k% token log-probs log p(x_t | x_<t).

    NaN when any value is NaN (sorting would move NaNs last and hide them behind finite values).
    """
    if np.isnan(logprobs).any():
        return float("nan")
    lowest = np.sort(logprobs)[: lowest_k_count(len(logprobs), k_percent)]
    return float(np.mean(lowest))


def min_k_plus_plus_score(logprobs: np.ndarray, dist_mean: np.ndarray, dist_std: np.ndarray,
                          k_percent: float) -> float:
    """Min-K%++ (Zhang et al. 2024): mean of the lowest k% of (log p(x_t|x_<t) - mu_t) / sigma_t.

    mu_t = E_{z ~ p(.|x_<t)} log p(z|x_<t) and sigma_t its standard deviation over the vocabulary.
    A position whose next-token distribution is a point mass (sigma_t = 0) contributes 0; NaN in any
    input gives NaN (not a hidden 0).
    """
    if np.isnan(logprobs).any() or np.isnan(dist_mean).any() or np.isnan(dist_std).any():
        return float("nan")
    safe_std = np.where(dist_std > 0, dist_std, 1.0)
    standardized = np.where(dist_std > 0, (logprobs - dist_mean) / safe_std, 0.0)
    return min_k_score(standardized, k_percent)


def reference_score(target_logprobs: np.ndarray, reference_logprobs: np.ndarray) -> float:
    """Reference-model calibration (Carlini et al. 2021; MIMIR's `ref`): the target's LOSS score
    minus a reference model's on the same text, (1/n) sum_t log p(x_t) - (1/m) sum_t log q(x_t),
    each model with its own tokenizer (n and m tokens). MIMIR returns target NLL - reference NLL
    (lower = member): this is its negation."""
    return loss_score(target_logprobs) - loss_score(reference_logprobs)


def neighbourhood_score(text_logprobs: np.ndarray, neighbour_logprobs: list[np.ndarray]) -> float:
    """Neighbourhood attack (Mattern et al. 2023; MIMIR's `ne`): the text's LOSS score minus the
    mean LOSS score of its N neighbours, (1/n) sum_t log p(x_t) - (1/N) sum_j (1/n_j) sum_t log p(x^j_t).
    MIMIR returns NLL(x) - mean_j NLL(x^j) (lower = member): this is its negation. NaN without neighbours."""
    if not neighbour_logprobs:
        return float("nan")
    return loss_score(text_logprobs) - float(np.mean([loss_score(lp) for lp in neighbour_logprobs]))


def recall_score(conditional_logprobs: np.ndarray, logprobs: np.ndarray) -> float:
    """ReCaLL (Xie et al. 2024): LL(x | P) / LL(x), the mean token log-likelihood of the text given a
    non-member prefix P over its mean log-likelihood alone (both negative). Conditioning on
    non-members lowers a member's likelihood more, so higher = member. MIMIR's `recall` returns
    -LL(x | P) / NLL(x) = -(this) (lower = member)."""
    return loss_score(conditional_logprobs) / loss_score(logprobs)


def laplace_token_frequencies(counts: np.ndarray) -> np.ndarray:
    """Laplace-smoothed relative frequencies (c_v + 1) / (sum_v c_v + V) over a vocabulary of V
    tokens, as DC-PDD's code (Zhang et al. 2024) and MIMIR's `dc_pdd` smooth their corpus counts."""
    counts = np.asarray(counts, dtype=np.float64)
    return (counts + 1.0) / (counts.sum() + len(counts))


def dc_pdd_score(token_ids: np.ndarray, logprobs: np.ndarray, frequencies: np.ndarray, cap: float = 0.01) -> float:
    """DC-PDD (Zhang et al. 2024, *Pretraining Data Detection for LLMs: A Divergence-based
    Calibration Method*): over the first occurrence of each distinct token x_i of the text,
    alpha_i = min(p(x_i | x_<i) * log(1 / f(x_i)), a) with f the smoothed token frequency in a
    reference corpus (`laplace_token_frequencies`) and a the cap (default 0.01); the score is the
    mean of alpha_i. Higher = member. MIMIR's `dc_pdd` returns its negation (lower = member)."""
    first = np.unique(np.asarray(token_ids), return_index=True)[1]
    first.sort()
    alpha = np.exp(logprobs[first]) * -np.log(frequencies[np.asarray(token_ids)[first]])
    return float(np.mean(np.minimum(alpha, cap))) if len(first) else float("nan")


# ---------------------------------------------------------------- detection metrics (labels + scores)

def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve of `scores` separating labels 1 (members) from 0 (scikit-learn)."""
    return float(roc_auc_score(labels, scores))


def tpr_at_fpr(labels: np.ndarray, scores: np.ndarray, level: float, inclusive: bool = False) -> float:
    """True-positive rate at a false-positive rate below `level`, as the field's public code reads it.

    Over scikit-learn's `roc_curve(labels, scores)` (its default `drop_intermediate=True`), the TPR
    of the last curve point with FPR < level: `tpr[np.where(fpr < level)[0][-1]]`, as in MIMIR
    (Duan et al. 2024, `compute_metrics_from_scores` in run.py), Shi et al. 2024's Min-K% code
    (src/eval.py) and Carlini et al. 2022's LiRA code. With `inclusive=True`, FPR <= level, as in
    Zhang et al. 2024's Min-K%++ code (run.py). The curve is non-decreasing, so this is the largest
    TPR over its points below (or at) the level; the first point is (0, 0), so one always exists
    for 0 < level. The two differ whenever some threshold has FPR exactly `level`.
    """
    [(strict, at_most)] = tprs_at_fpr(labels, scores, (level,))
    return at_most if inclusive else strict


def tprs_at_fpr(labels: np.ndarray, scores: np.ndarray, levels: tuple[float, ...]) -> list[tuple[float, float]]:
    """(`tpr_at_fpr` at FPR < level, at FPR <= level) for each level, read off one ROC curve."""
    if not all(0 < level < 1 for level in levels):
        raise ValueError(f"the FPR level must lie strictly between 0 and 1; got {levels}")
    fpr, tpr, _ = roc_curve(labels, scores)
    return [(float(tpr[np.flatnonzero(fpr < level)[-1]]), float(tpr[np.flatnonzero(fpr <= level)[-1]]))
            for level in levels]


def rank_auc(labels: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """ROC AUC of each row from ranks (Mann-Whitney U / (n1 n0)); ties get average ranks.

    AUC = (sum of positive ranks - n1 (n1 + 1) / 2) / (n1 n0). `labels` and `scores` are 2-D
    (one resample per row); a row with a single class gives NaN.
    """
    labels = np.atleast_2d(labels).astype(bool)
    ranks = rankdata(np.atleast_2d(scores), axis=1)
    n_pos = labels.sum(axis=1)
    n_neg = labels.shape[1] - n_pos
    u = (ranks * labels).sum(axis=1) - n_pos * (n_pos + 1) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n_pos > 0) & (n_neg > 0), u / (n_pos * n_neg), np.nan)


def bootstrap_draws(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """Indices of `n_resamples` resamples of n items with replacement, one per row (NumPy's
    `default_rng(seed).integers`): the same draws for every score of the same texts and seed."""
    return np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))


def percentile_interval(values: np.ndarray, confidence: float) -> tuple[float | None, float | None]:
    """The (1-c)/2 and (1+c)/2 quantiles of the finite values (NumPy's linear interpolation);
    (None, None) when none is finite."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None, None
    alpha = (1 - confidence) / 2
    low, high = np.quantile(values, [alpha, 1 - alpha])
    return float(low), float(high)


def bootstrap_auc_interval(labels: np.ndarray, scores: np.ndarray, n_resamples: int = 1000,
                           confidence: float = 0.95, seed: int = 0) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of the ROC AUC: resample texts with replacement (seeded),
    recompute the AUC of each resample, take the (1-c)/2 and (1+c)/2 quantiles.
    Resamples that contain one class only are dropped; (None, None) when none is left.
    Scores must be finite: with a NaN every resample's AUC is undefined, so (None, None)."""
    labels, scores = np.asarray(labels), np.asarray(scores)
    if np.isnan(scores).any():  # every resample's rank AUC would be NaN
        return None, None
    draws = bootstrap_draws(len(labels), n_resamples, seed)
    aucs = np.concatenate([resampled_auc(labels, scores, part) for part in resample_chunks(draws)])
    return percentile_interval(aucs, confidence)


def resample_chunks(draws: np.ndarray) -> list[np.ndarray]:
    """The rows of `draws` in chunks of about 2^22 numbers (the memory of the count matrices)."""
    chunk = max(1, (1 << 22) // max(1, draws.shape[1]))
    return np.array_split(draws, range(chunk, draws.shape[0], chunk))


def draw_counts(draws: np.ndarray, order: np.ndarray) -> np.ndarray:
    """How many times each resample (a row of `draws`: indices of texts) drew each text, the texts
    in `order`: float64 of shape (resamples, texts)."""
    rows, n = draws.shape
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    flat = (np.arange(rows)[:, None] * n + position[draws]).ravel()
    return np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(np.float64)


def resampled_auc(labels: np.ndarray, scores: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """ROC AUC of every resample (a row of `draws`), equal to `rank_auc(labels[draws], scores[draws])`
    bit for bit, without sorting each resample: the texts are sorted by score once, a resample is the
    number of times c_i it drew each text, and its Mann-Whitney U is
    U = sum over tie groups g of P_g (N_<g + N_g / 2),
    P_g and N_g the members and non-members it drew in group g, N_<g those non-members in lower groups
    (each member against each non-member: 1 when above, 1/2 when tied; a member's ties with members,
    itself included, are what the rank formula's n1 (n1 + 1) / 2 takes off). Every term is an integer
    or a half-integer below 2^53, so U is exact, as the rank sum is; AUC = U / (n1 n0), NaN for a
    resample with a single class."""
    labels, scores, draws = np.asarray(labels).astype(bool), np.asarray(scores), np.atleast_2d(draws)
    order = np.argsort(scores, kind="stable")
    drawn = draw_counts(draws, order)
    ranked = scores[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    members = np.add.reduceat(drawn * labels[order], starts, axis=1)
    others = np.add.reduceat(drawn * ~labels[order], starts, axis=1)
    below = np.cumsum(others, axis=1) - others
    u = (members * (below + others / 2)).sum(axis=1)
    n_pos, n_neg = members.sum(axis=1), others.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n_pos > 0) & (n_neg > 0), u / (n_pos * n_neg), np.nan)


def resampled_tpr_at_fpr(labels: np.ndarray, scores: np.ndarray, draws: np.ndarray,
                         levels: tuple[float, ...]) -> np.ndarray:
    """`tpr_at_fpr` of every resample (a row of `draws`: indices into `labels` and `scores`) at each
    level, FPR < level in [..., 0] and FPR <= level (`inclusive`) in [..., 1]: shape (resamples,
    levels, 2); NaN for a resample with a single class.

    The same reading of the same curve, vectorised. The texts are sorted by score once (descending);
    a resample is the number of times it drew each text. Its curve has a point at the end of each
    group of tied scores it drew a text of, with FP and TP counts the cumulative sums of the drawn
    non-members and members up to it; scikit-learn's `drop_intermediate` drops a point whose FP and
    TP second differences to its neighbouring points are both 0 (inside a straight run of equal
    steps), keeping the first and the last; (0, 0) is prepended. The TPR read at a level is the TP
    count, over the members drawn, of the last kept point with FP / non-members drawn < level (<=),
    divided in float64 as scikit-learn divides."""
    labels, scores, draws = np.asarray(labels).astype(bool), np.asarray(scores), np.atleast_2d(draws)
    rows, n = draws.shape[0], len(scores)
    order = np.argsort(-scores, kind="stable")
    drawn = draw_counts(draws, order)
    member = labels[order]
    tps = np.cumsum(drawn * member, axis=1)
    fps = np.cumsum(drawn * ~member, axis=1)
    ranked = scores[order]
    group_end = np.ones(n, dtype=bool)
    group_end[:-1] = ranked[:-1] != ranked[1:]
    at = np.arange(n)
    start = np.maximum.accumulate(np.where(np.r_[True, group_end[:-1]], at, 0))  # each text's group's first index
    total = tps + fps
    shifted = np.maximum(start - 1, 0)  # the previous group's end: the last point's counts, or nothing drawn
    empty = start == 0
    fp_before, tp_before = np.where(empty, 0.0, fps[:, shifted]), np.where(empty, 0.0, tps[:, shifted])
    point = group_end & (total > fp_before + tp_before)  # the resample drew a text of this group
    # a point's step from the point before it (FP, TP) as one exact number; drop it when the next point's
    # step is the same (both second differences 0), unless it is the first or the last point
    step = (fps - fp_before) * (n + 1) + (tps - tp_before)
    after = np.minimum.accumulate(np.where(point, at, n)[:, ::-1], axis=1)[:, ::-1]  # the first point at or after
    following = np.full((rows, n), n - 1)
    following[:, :-1] = np.minimum(after[:, 1:], n - 1)
    inner = (fp_before + tp_before > 0) & (total < total[:, -1:])
    kept = point & ~(inner & (np.take_along_axis(step, following, axis=1) == step))
    negatives, positives = fps[:, -1:], tps[:, -1]
    out = np.full((rows, len(levels), 2), np.nan)
    valid = (negatives[:, 0] > 0) & (positives > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        fpr = fps / negatives
    for j, level in enumerate(levels):
        for k, below in enumerate((fpr < level, fpr <= level)):
            out[valid, j, k] = np.where(kept & below, tps, 0.0).max(axis=1)[valid] / positives[valid]
    return out


def bootstrap_tpr_intervals(labels: np.ndarray, scores: np.ndarray, levels: tuple[float, ...],
                            n_resamples: int = 1000, confidence: float = 0.95,
                            seed: int = 0) -> list[tuple[tuple[float | None, float | None], ...]]:
    """Percentile bootstrap intervals of `tpr_at_fpr` at each level, ((low, high) of FPR < level,
    (low, high) of FPR <= level) per level: the texts resampled with replacement as
    `bootstrap_auc_interval` resamples them (same seed, same draws), each resample's TPR read off its
    own ROC curve (`resampled_tpr_at_fpr`), then the (1-c)/2 and (1+c)/2 quantiles (Efron & Tibshirani
    1993). Resamples with one class only are dropped. Resamples run in chunks of about 2^22 numbers."""
    labels, scores = np.asarray(labels), np.asarray(scores)
    draws = bootstrap_draws(len(labels), n_resamples, seed)
    tprs = np.concatenate([resampled_tpr_at_fpr(labels, scores, part, levels) for part in resample_chunks(draws)])
    return [(percentile_interval(tprs[:, j, 0], confidence), percentile_interval(tprs[:, j, 1], confidence))
            for j in range(len(levels))]


def false_positives_allowed(nonmembers: int, level: float, inclusive: bool = False) -> int:
    """The most false positives a threshold may have for its FPR to count as below `level` (at most,
    with `inclusive`): the largest k in 0..n with k / n < level (<=), in float64 as `tpr_at_fpr`
    divides. 0 means the TPR is read above the single highest-scoring non-member: the number rests on
    that one text."""
    ratios = np.arange(nonmembers + 1, dtype=np.float64) / nonmembers
    return int(np.count_nonzero((ratios <= level) if inclusive else (ratios < level))) - 1


# ---------------------------------------------------------------- memorization of continuations (characters)

def forward_match(generation: str, reference: str) -> int:
    """Eidetic memorization (Ishihara & Takahashi 2024): the number of leading characters of
    `generation` equal to `reference`, i.e. the length of their common prefix."""
    return len(os.path.commonprefix([generation, reference]))


def approximate_memorization(generation: str, reference: str) -> float:
    """Approximate memorization (Ishihara & Takahashi 2024):
    1 - Levenshtein(generation, reference) / max(len(generation), len(reference)), in characters
    (rapidfuzz); 1.0 when both are empty."""
    longest = max(len(generation), len(reference))
    if longest == 0:
        return 1.0
    return 1.0 - Levenshtein.distance(generation, reference) / longest


def memorization_summary(eidetic: np.ndarray, approximate: np.ndarray) -> dict[str, float]:
    """Summary of a set of continuations (Ishihara & Takahashi 2024): the max and mean of the
    per-example `forward_match` counts and the mean and median of the per-example
    `approximate_memorization` similarities. Raises ValueError on an empty set."""
    eidetic, approximate = np.asarray(eidetic), np.asarray(approximate)
    if eidetic.size == 0 or eidetic.shape != approximate.shape:
        raise ValueError(f"memorization_summary needs equally many eidetic ({eidetic.size}) and approximate "
                         f"({approximate.size}) values, at least one")
    return {"eidetic_max": float(eidetic.max()), "eidetic_mean": float(eidetic.mean()),
            "approximate_mean": float(approximate.mean()), "approximate_median": float(np.median(approximate))}


# ---------------------------------------------------------------- pairwise preference (two groups of scores)

def preference_share(higher: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """Share of the pairs (a in `higher`, b in `lower`) with a > b, ties counting 1/2, per row:
    the Mann-Whitney U of `higher` divided by n_higher n_lower, computed from ranks as `rank_auc`.

    Rows are compared row by row (one row per prompt, say); 1-D inputs give a 1-element array.
    This is Xia et al. 2024's M-MEM when `higher` holds in-train and `lower` out-train confidences.
    """
    higher, lower = np.atleast_2d(higher), np.atleast_2d(lower)
    labels = np.r_[np.ones(higher.shape[1]), np.zeros(lower.shape[1])]
    return rank_auc(labels, np.concatenate([higher, lower], axis=1))


def pair_preferences(higher: np.ndarray, lower: np.ndarray, chunk: int = 64) -> np.ndarray:
    """S[i * n_lower + j, r] = 1 when higher[r, i] > lower[r, j], 1/2 when equal, else 0.

    One row per pair, one column per row of the inputs (prompts); float16 holds 0, 1/2 and 1
    exactly. Built in chunks of `higher` columns, so the only large array is the result.
    """
    higher, lower = np.atleast_2d(higher), np.atleast_2d(lower)
    rows, n_high, n_low = higher.shape[0], higher.shape[1], lower.shape[1]
    out = np.empty((n_high * n_low, rows), dtype=np.float16)
    for start in range(0, n_high, chunk):
        part = higher[:, start:start + chunk, None]  # (rows, chunk, 1) against (rows, 1, n_low)
        s = (part > lower[:, None, :]) + 0.5 * (part == lower[:, None, :])
        out[start * n_low:(start + part.shape[1]) * n_low] = s.reshape(rows, -1).T
    return out


def majority_vote_share(preferences: np.ndarray) -> float:
    """Share of pairs that a majority of the k columns (prompts) prefer: a pair scores 1 when its
    votes sum_r S[pair, r] exceed k/2, 1/2 when they equal k/2, else 0 (Xia et al. 2024's
    majority-vote ensemble)."""
    votes = preferences.sum(axis=1, dtype=np.float64)
    half = preferences.shape[1] / 2
    return float(np.mean(np.where(votes > half, 1.0, np.where(votes == half, 0.5, 0.0))))


def cochrans_q(successes: np.ndarray) -> tuple[float | None, float | None]:
    """Cochran's Q test that k binary treatments (columns) share one success rate over N blocks
    (rows) (statsmodels): Q = (k-1) (k sum_j C_j^2 - T^2) / (k T - sum_i R_i^2), chi-square with
    k-1 degrees of freedom. (None, None) when no block (row) has both outcomes (Q is 0/0)."""
    from statsmodels.stats.contingency_tables import cochrans_q as statsmodels_cochrans_q

    successes = np.asarray(successes, dtype=bool)
    rows = successes.sum(axis=1)
    if np.all((rows == 0) | (rows == successes.shape[1])):
        return None, None  # every block is all-success or all-failure: Q is 0/0
    result = statsmodels_cochrans_q(successes)
    return float(result.statistic), float(result.pvalue)


# ---------------------------------------------------------------- reproduction of a secret (strings)

def subset_score(prediction: str, reference: str) -> float:
    """Yoon & Lee's subset score of one sample: the share of the character positions
    i < min(len(prediction), len(reference)) where prediction[i] == reference[i]; 0.0 when either
    is empty. (It compares only as many characters as the shorter string has.)"""
    n = min(len(prediction), len(reference))
    if n == 0:
        return 0.0
    return sum(a == b for a, b in zip(prediction[:n], reference[:n])) / n


def exact_match(prediction: str, reference: str) -> float:
    """1.0 when the prediction reproduces the reference exactly (surrounding whitespace aside), else 0.0."""
    return float(prediction.strip() == reference.strip())


def worst_case_epsilon(public_logprobs: list[np.ndarray], finetuned_logprobs: list[np.ndarray]) -> float:
    """Leakage ε (Inan et al. 2021; a perplexity ratio, not a DP guarantee): max over sequences w of
    log(PPL_public(w) / PPL_finetuned(w)), PPL(w) = exp(-(1/T) sum_t log p(w_t | input, w_<t)) over
    the T target tokens, so each term is mean log p_finetuned - mean log p_public."""
    return float(max(np.mean(ft) - np.mean(pub) for pub, ft in zip(public_logprobs, finetuned_logprobs)))


# ---------------------------------------------------------------- spread over repeated runs (seeds)

def mean_and_std(values: list[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation of one metric over repeated runs (seeds, repetitions):
    mean = (1/n) sum_i x_i, std = sqrt(sum_i (x_i - mean)^2 / (n - 1)) (ddof = 1, Bessel's
    correction; NumPy's `std(ddof=1)`). std is None with a single run. Raises ValueError on none."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("mean_and_std needs at least one value")
    return float(x.mean()), float(x.std(ddof=1)) if x.size >= 2 else None
