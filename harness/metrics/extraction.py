"""Extraction risk as a probability: pure functions of per-target log p_z (no torch).

p_z is the probability that one draw of a sampling scheme reproduces a target exactly given its
prompt (Hayes et al. 2024, *Measuring memorization in language models via probabilistic
extraction*; computed by `harness.scoring.extraction`). A target is (n, p)-discoverable when
n independent draws produce it at least once with probability at least p:
1 - (1 - p_z)^n >= p. The same functions take a near-verbatim probability (or its lower bound,
Cooper et al. 2026) in place of p_z. Every function takes natural logs, -inf for p_z = 0.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from harness.core.errors import UserError

DEFAULT_ATTEMPTS = (1, 10, 100, 1000, 10000)
DEFAULT_LEVEL = 0.5


def check_attempts(attempts: Sequence[int], level: float) -> None:
    """A `UserError` unless every n in `attempts` is a positive integer and 0 < level <= 1."""
    if not attempts or any(int(n) != n or n < 1 for n in attempts):
        raise UserError(f"extraction attempts n must be positive integers, got {list(attempts)}")
    if not 0.0 < level <= 1.0:
        raise UserError(f"the discoverability level p must lie in (0, 1], got {level}")


def log1mexp(log_p: np.ndarray) -> np.ndarray:
    """log(1 - e^x) for x <= 0, stably (Maechler 2012, *Accurately computing log(1 - exp(-|a|))*):
    log(-expm1(x)) for x > -log 2, else log1p(-exp(x)). -inf at x = 0, 0 at x = -inf."""
    x = np.asarray(log_p, dtype=np.float64)
    if np.any(x > 0):
        raise ValueError("log1mexp needs log-probabilities <= 0")
    with np.errstate(divide="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def extraction_probability(log_pz: np.ndarray, n: int) -> np.ndarray:
    """1 - (1 - p_z)^n, the probability that n independent draws produce the target at least once
    (Hayes et al. 2024, eq. 1), computed as -expm1(n * log1mexp(log p_z))."""
    with np.errstate(invalid="ignore"):
        inner = n * log1mexp(log_pz)
    return -np.expm1(np.where(np.isnan(inner), -np.inf, inner))  # 0 * -inf only where n = 0


def discoverable(log_pz: np.ndarray, n: int, level: float = DEFAULT_LEVEL) -> np.ndarray:
    """Whether each target is (n, p)-discoverable: 1 - (1 - p_z)^n >= p (Hayes et al. 2024, def. 2)."""
    check_attempts([n], level)
    return extraction_probability(log_pz, n) >= level


def attempts_needed(log_pz: np.ndarray, level: float = DEFAULT_LEVEL) -> np.ndarray:
    """The least n with 1 - (1 - p_z)^n >= p: ceil(log(1 - p) / log(1 - p_z)) (float; inf where
    p_z = 0, 1 where p_z = 1)."""
    check_attempts([1], level)
    denominator = log1mexp(log_pz)
    numerator = math.log1p(-level) if level < 1.0 else -math.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = numerator / denominator
    ratio = np.where(denominator == 0.0, np.inf, ratio)            # p_z = 0: never
    ratio = np.where(np.isneginf(denominator), 1.0, ratio)         # p_z = 1: the first draw
    # guard the ceiling against rounding just above an integer: n is the least integer that passes
    n = np.ceil(ratio - 1e-9)
    return np.where(np.isfinite(n), np.maximum(n, 1.0), n)


def extraction_summary(log_pz: np.ndarray, attempts: Sequence[int] = DEFAULT_ATTEMPTS,
                       level: float = DEFAULT_LEVEL) -> dict[str, float]:
    """Summary of a group of targets: for each n in `attempts`, the share that is
    (n, p)-discoverable (`extractable_at_{n}`); the median of log10 p_z (`median_log10_pz`, -inf
    when at least half the targets have p_z = 0); the mean p_z, the expected share a single draw
    extracts (`mean_pz`); and the number of targets. Raises ValueError on an empty group."""
    check_attempts(attempts, level)
    values = np.asarray(log_pz, dtype=np.float64)
    if values.size == 0:
        raise ValueError("extraction_summary needs at least one target")
    summary = {f"extractable_at_{n}": float(np.mean(discoverable(values, n, level))) for n in attempts}
    summary["median_log10_pz"] = float(np.median(values) / math.log(10.0))
    summary["mean_pz"] = float(np.mean(np.exp(values)))
    summary["n_targets"] = float(values.size)
    return summary


def extraction_gap(member_log_pz: np.ndarray, nonmember_log_pz: np.ndarray,
                   attempts: Sequence[int] = DEFAULT_ATTEMPTS, level: float = DEFAULT_LEVEL) -> dict[str, float]:
    """Members minus non-members on every rate of `extraction_summary` (`extractable_at_{n}`,
    `mean_pz`) and on `median_log10_pz` (NaN where either median is -inf): positive means the
    training members are more extractable, the memorization signal."""
    members = extraction_summary(member_log_pz, attempts, level)
    others = extraction_summary(nonmember_log_pz, attempts, level)
    gap = {}
    for key in members:
        if key == "n_targets":
            continue
        a, b = members[key], others[key]
        gap[key] = float(a - b) if math.isfinite(a) and math.isfinite(b) else float("nan")
    return gap


# ---------------------------------------------------------------- near-verbatim: how close a prefix can still get

def prefix_distance_row(prefix: str, target: str, row: np.ndarray | None = None, done: str = "") -> np.ndarray:
    """Row j = Levenshtein(prefix, target[:j]) for j = 0..len(target) (the last row of the
    Wagner-Fischer table of `prefix` against `target`). With `row` given for `done` (a prefix of
    `prefix`), only the characters after `done` are added (`extend_distance_rows`). Row j = len(target)
    is rapidfuzz's Levenshtein.distance(prefix, target)."""
    if row is None or not prefix.startswith(done):
        row, done = np.arange(len(target) + 1, dtype=np.int64), ""
    return extend_distance_rows(row[None], [prefix[len(done):]], target)[0]


def extend_distance_rows(rows: np.ndarray, added: list[str], target: str) -> np.ndarray:
    """`prefix_distance_row` of many prefixes at once: rows (prefixes x len(target) + 1), each prefix's
    row, extended by its `added` characters. Each added character c, per row:
    r'[0] = r[0] + 1, r'[j] = min(r[j] + 1, r[j-1] + [c != t_j], r'[j-1] + 1); the last term, a
    running minimum, is min_k<=j (u[k] + j - k), one cumulative minimum along the row. The k-th
    characters of every prefix are added together; a prefix with fewer keeps its row."""
    codes = np.frombuffer(target.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    steps = np.arange(len(codes) + 1, dtype=np.int64)
    order = np.argsort([-len(text) for text in added], kind="stable")  # longest first: the rows still going
    lengths = [len(added[i]) for i in order]                            # at character k are a leading slice
    rows = np.array(rows, dtype=np.int64)[order]
    chars = np.zeros((len(added), lengths[0] if lengths else 0), dtype=np.int64)
    for slot, i in enumerate(order):
        chars[slot, :lengths[slot]] = np.frombuffer(added[i].encode("utf-32-le"), dtype=np.uint32)
    going = len(added)
    for k in range(chars.shape[1]):
        while lengths[going - 1] <= k:
            going -= 1
        row = rows[:going]
        unit = np.empty_like(row)
        unit[:, 0] = row[:, 0] + 1
        unit[:, 1:] = np.minimum(row[:, 1:] + 1, row[:, :-1] + (codes != chars[:going, k, None]))
        rows[:going] = np.minimum.accumulate(unit - steps, axis=1) + steps
    restored = np.empty_like(rows)
    restored[order] = rows
    return restored


def optimistic_similarity(min_distance: int, prefix_length: int, target_length: int) -> float:
    """An upper bound on `approximate_memorization(prefix + rest, target)` over every continuation
    `rest`, from D = min_j Levenshtein(prefix, target[:j]) (the minimum of `prefix_distance_row`).

    An optimal alignment of prefix + rest against the target aligns the prefix with some target[:j],
    so Levenshtein(prefix + rest, target) >= D; it is also >= m - n for a text of m >= len(prefix)
    characters and a target of n. The similarity 1 - max(D, m - n) / max(m, n) is then largest at
    m* = max(len(prefix), n + D) (the ratio is constant for m <= n, falls until m = n + D, then rises);
    1.0 when m* = n = 0."""
    longest = max(prefix_length, target_length + min_distance)
    denominator = max(longest, target_length)
    if denominator == 0:
        return 1.0
    return 1.0 - max(min_distance, longest - target_length) / denominator


def check_similarity_threshold(threshold: float) -> None:
    """A `UserError` unless 0 <= threshold <= 1 (a normalized Levenshtein similarity)."""
    if not (isinstance(threshold, (int, float)) and 0.0 <= threshold <= 1.0):
        raise UserError(f"the near-verbatim similarity threshold must lie in [0, 1], got {threshold}")
