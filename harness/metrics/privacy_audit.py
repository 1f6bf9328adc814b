"""One-run privacy audits: lower bounds on a training run's epsilon from the scores of its canaries.

The setting (Steinke, Nasr & Jagielski 2023, *Privacy auditing with one (1) training run*, NeurIPS, arXiv
2305.08846): m canaries, each put in the training set independently with probability 1/2 (S_i = +1 included,
-1 not). After training every canary gets a score, higher = more likely included. The auditor guesses "in" for
the k+ highest scores and "out" for the k- lowest and abstains on the rest: r = k+ + k- guesses, v of them
correct. A run that is DP cannot make many guesses right with high probability, so a large v refutes every
privacy claim weaker than some epsilon; that epsilon is the lower bound, at a confidence level.

* `steinke_epsilon_lower_bound`: Steinke et al.'s theorem for (epsilon, delta)-DP (the approximate-DP main
  result, with the 2 m delta term; the p-value routine of their appendix): with f(v) = P[Binomial(r, q) >= v],
  q = e^eps / (1 + e^eps),
      P[V >= v] <= f(v) + 2 m delta max_{1 <= i <= v} (f(v - i) - f(v)) / i,
  and the bound is the largest eps at which that p-value is still <= 1 - confidence.
* `fdp_gaussian_epsilon_lower_bound`: Mahloujifar, Melis & Chaudhuri 2025 (*Auditing f-differential privacy
  in one run*, ICML, arXiv 2410.22235), the same game analysed under a trade-off curve f; here the Gaussian one,
  f = G_mu (mu-GDP). Their `audit_rh_with_cap` recursion says whether (m, r, v) refutes mu-GDP at the level;
  `fdp_gaussian_mu_lower_bound` is the largest mu refuted, and its epsilon at the run's delta comes from Dong,
  Roth & Su 2022 (*Gaussian differential privacy*, JRSS-B, Corollary 2.13):
      delta(eps) = Phi(-eps / mu + mu / 2) - e^eps Phi(-eps / mu - mu / 2).
  This epsilon is conditional, not an (epsilon, delta) lower bound: it refutes mu-GDP and converts the refuted
  mu, so it says "the run is not (epsilon, delta)-DP" only for a mechanism whose trade-off curve is Gaussian.
  Fine-tuning without DP is not Gaussian DP, and Poisson-subsampled DP-SGD is only approximately so; a higher
  number than Steinke's on the same guesses means it tests a stronger claim, not the same claim more tightly.
  Steinke's bound holds for any (epsilon, delta)-DP mechanism: it is the headline.

Which guesses: the bounds are valid only if k+ and k- do not depend on which canaries were included. Trying
several (k+, k-) on the same labels and keeping the best refutes a true claim more often than 1 - confidence
(on 200 null draws of m = 1000, the best of the 8 default cells each tested at 0.05 refutes epsilon = 0 in 27,
where 5% is 10; `tests/unit/test_privacy_audit.py`). `privacy_audit` takes one of two rules:

* `FixedGuesses(k_plus, k_minus)`: counts fixed before the labels are seen; no correction.
* `BonferroniGrid(shares)`, the default: a small grid of (k+/m, k-/m) cells fixed in advance; every cell is
  tested at (1 - confidence) / len(grid), so the chance that any cell refutes a true claim stays at most
  1 - confidence (union bound), and keeping the best cell afterwards is free; so is reporting the other bound at
  that cell. `DEFAULT_GRID` (8 cells, 0.05 / 8 each) holds one-sided cells (k- = 0: a memorization score flags
  members while non-members look alike) at 1%, 3%, 10% and 30% of m, and two-sided ones at 1%, 3%, 10% and 40%
  each side; k+ = k- = 0.4 m is the most that perfectly separating scores get all right whatever the draw of S
  (0.4 m <= included <= 0.6 m with probability 1 - 2e-10 at m = 1000). The price of 8 cells against one
  fixed in advance is small: 4.97 instead of 5.56 for Steinke's bound at r = v = 800 of m = 1000.

A reported figure that is the largest of several audits (one per fine-tuning seed, say) is refuted by chance
more often than each audit alone (on a null, the largest of 4 audits each at 95% refutes epsilon = 0 in about
7% of draws). `privacy_audit(..., family=k)` tests every cell at (1 - confidence) / (cells k), so that the
largest bound over the k audits of a family still holds at the confidence (union bound again); each audit
records the confidence it was tested at (`confidence_per_cell`) and its ceiling at that level.

Ties among scores are broken at random (seeded, independent of the labels): breaking them by canary order would
leak the labels when the canaries are ordered by inclusion.

jax_privacy (google-deepmind/jax_privacy, `jax_privacy/auditing.py`, `CanaryScoreAuditor.epsilon_one_run` and
`epsilon_one_run_fdp`) computes the same two bounds for one-sided guesses (k- = 0) at a score threshold, with
the threshold chosen by `Explicit` (given, like `FixedGuesses`), `Split` (chosen on one random part of the
canaries, bounded on the rest), `MultiSplit` (the median over splits at half the significance) or, by default,
`Bonferroni` (every threshold, significance divided by the number of thresholds left on the ROC's Pareto
frontier, a set computed from the labels). Given the same guesses, `steinke_epsilon_lower_bound` and
`fdp_gaussian_epsilon_lower_bound` agree with its `_epsilon_one_run` and `_epsilon_one_run_fdp` to its root
finder's 1e-6 (jax_privacy 2.0.0, pinned in the test). membench differs in its default rule (the fixed 8-cell
grid, one- and two-sided, instead of every one-sided threshold), in breaking ties at random (its threshold
guesses "in" for every tied score) and in searching mu directly (jax_privacy searches eps and maps each eps to
mu with dp_accounting's `get_sigma_gaussian`; both stop at the same mu).

How many canaries (`default_canaries`): with every guess right the bounds still stop at a ceiling set by m,
the confidence and delta (`epsilon_ceiling`). At 95% and delta = 1e-5:

    m         default grid, perfect scores        one cell, r = v = m (no correction)
              (r = 0.8 m, 0.05 / 8 per cell)
              Steinke eps     f-DP eps            Steinke eps     f-DP eps
    100       2.72            5.12                3.49            8.22
    1,000     4.97            8.66                5.78            12.33
    10,000    5.85            11.91               7.83            16.11

Steinke's ceiling grows like log(m) only until the 2 m delta term takes over (with the grid it peaks near
m = 10,000 and falls after: 5.65 at m = 100,000); the f-DP ceiling keeps growing. At m = 1,000 a run that
claims epsilon <= 4 and leaks everything is caught by both bounds, one that claims epsilon <= 8 by the f-DP
bound; ten times the canaries would raise the ceilings by 0.9 (Steinke) and 3.3 (f-DP), which only claims
above 8 need.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
from scipy.optimize import brentq
from scipy.special import bdtrc, expit, gammaln, log_ndtr, ndtr, ndtri

from harness.core.errors import UserError
from harness.core.results import reached_ceiling

CONFIDENCE = 0.95  # one-sided confidence that the audited epsilon is below the run's true epsilon
DEFAULT_CANARIES = 1000  # see default_canaries() and the table above
# (k+/m, k-/m) cells of the default Bonferroni grid: one-sided cells, then two-sided ones, in the order ties go
DEFAULT_GRID: tuple[tuple[float, float], ...] = (
    (0.01, 0.0), (0.03, 0.0), (0.1, 0.0), (0.3, 0.0),
    (0.01, 0.01), (0.03, 0.03), (0.1, 0.1), (0.4, 0.4),
)
EPS_TOL = 1e-10  # root-finding tolerance on epsilon (Steinke) and on mu (f-DP), far below jax_privacy's 1e-6
MU_POINTS = 128  # mu values that each pass of the f-DP search tests at once
MU_START = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)  # first pass of the f-DP search

Method = Literal["steinke", "fdp"]


class AuditInputError(UserError, ValueError):
    """Bad input to an audit: a `ValueError` for callers, one line on stderr for the CLI (a `UserError`)."""


# ---------------------------------------------------------------- guess rules


@dataclass(frozen=True)
class FixedGuesses:
    """Guess "in" for the k_plus highest scores and "out" for the k_minus lowest, counts fixed in advance."""

    k_plus: int
    k_minus: int = 0

    def describe(self) -> str:
        return f"fixed: k+ = {self.k_plus}, k- = {self.k_minus}, chosen before the labels were seen"


@dataclass(frozen=True)
class BonferroniGrid:
    """Each (k+/m, k-/m) cell (counts rounded down) tested at (1 - confidence) / len(shares); the best cell kept."""

    shares: tuple[tuple[float, float], ...] = DEFAULT_GRID

    def describe(self) -> str:
        cells = ", ".join(f"({plus:g}, {minus:g})" for plus, minus in self.shares)
        return f"bonferroni over {len(self.shares)} (k+/m, k-/m) cells fixed in advance: {cells}"


GuessRule = FixedGuesses | BonferroniGrid


@dataclass(frozen=True)
class PrivacyAudit:
    """An audit's answer.

    epsilon_steinke: Steinke et al.'s lower bound on epsilon at delta (any (epsilon, delta)-DP mechanism);
    epsilon_fdp: Mahloujifar et al.'s Gaussian f-DP bound mu_fdp (the largest refuted mu) as epsilon at delta;
    both hold with probability >= confidence over the draw of the inclusion bits. m canaries, n_included of
    them in training; the guesses that made the bounds: k_plus "in" on the highest scores, k_minus "out" on
    the lowest, r = k_plus + k_minus, v right; rule: the guess rule in words; cells: how many (k+, k-) the rule
    tried (each at significance = (1 - confidence) / cells); selected_by: the bound whose maximum picked the
    cell (the other bound, at that cell and that significance, is just as valid); family: how many audits the
    reported figure is the largest of (each cell tested at (1 - confidence) / (cells family)); ceiling_steinke,
    ceiling_fdp: the most the rule can show with m canaries at that significance (`epsilon_ceiling`): a bound
    that reaches its ceiling says "at least this", the audit's limit, not the run's leakage."""

    epsilon_steinke: float
    epsilon_fdp: float
    mu_fdp: float
    confidence: float
    delta: float
    m: int
    n_included: int
    k_plus: int
    k_minus: int
    r: int
    v: int
    rule: str
    cells: int
    significance: float
    selected_by: str
    family: int = 1
    ceiling_steinke: float | None = None
    ceiling_fdp: float | None = None

    @property
    def confidence_per_cell(self) -> float:
        """The confidence each (k+, k-) cell was tested at, after the corrections for cells and family."""
        return 1.0 - self.significance

    def at_ceiling(self, bound: Method) -> bool:
        """Whether `bound`'s value reached a ceiling above 0 (to 1e-9): every guess of the largest cell was right
        (a ceiling of 0: too few canaries to show anything)."""
        value, ceiling = ((self.epsilon_steinke, self.ceiling_steinke) if bound == "steinke"
                          else (self.epsilon_fdp, self.ceiling_fdp))
        return reached_ceiling(value, ceiling)


# ---------------------------------------------------------------- input checks


def _check_open_unit(name: str, value: float) -> float:
    if not 0.0 < value < 1.0:  # also rejects NaN
        raise AuditInputError(f"privacy audit: {name} must be in (0, 1), got {value}")
    return float(value)


def _check_counts(m: int, r: int, v: int) -> None:
    if any(isinstance(count, bool) or int(count) != count for count in (m, r, v)):
        raise AuditInputError(f"privacy audit: m, r and v must be whole numbers, got m = {m}, r = {r}, v = {v}")
    if m < 1:
        raise AuditInputError(f"privacy audit: needs at least one canary, got m = {m}")
    if not 0 <= v <= r <= m:
        raise AuditInputError(f"privacy audit: needs 0 <= v <= r <= m, got m = {m}, r = {r}, v = {v}")


# ---------------------------------------------------------------- Steinke, Nasr & Jagielski (2023)


def _binomial_pmf(k: np.ndarray, n: int, q: float) -> np.ndarray:
    """P[Binomial(n, q) = k] from log-gamma (scipy.stats.binom.pmf's wrapper costs more than the sum here)."""
    if q >= 1.0:
        return (k == n).astype(float)
    log_pmf = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1) + k * np.log(q) + (n - k) * np.log1p(-q)
    return np.exp(log_pmf)


def _steinke_p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    if v == 0:
        return 1.0
    q = float(expit(epsilon))
    beyond = float(bdtrc(v - 1, r, q))  # f(v) = P[X > v - 1]
    if delta == 0.0:
        return min(beyond, 1.0)
    below = np.cumsum(_binomial_pmf(np.arange(v - 1, -1, -1, dtype=float), r, q))  # f(v - i) - f(v), i = 1..v
    worst_ratio = float(np.max(below / np.arange(1, v + 1)))
    return min(beyond + 2.0 * m * delta * worst_ratio, 1.0)


def steinke_p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """P[at least v of r guesses right] under (epsilon, delta)-DP, bounded as in Steinke et al.'s theorem.

    f(v) + 2 m delta max_{1 <= i <= v} (f(v - i) - f(v)) / i, capped at 1, where f(v) = P[Binomial(r, q) >= v]
    and q = e^eps / (1 + e^eps) (the accuracy of eps-DP randomized response); delta = 0 gives f(v), the pure-DP
    statement. f(v - i) - f(v) = P[v - i <= Binomial(r, q) <= v - 1] is summed from the pmf so that it keeps
    its digits where f is near 1."""
    _check_counts(m, r, v)
    if not epsilon >= 0.0:
        raise AuditInputError(f"privacy audit: epsilon must be >= 0, got {epsilon}")
    if not 0.0 <= delta <= 1.0:
        raise AuditInputError(f"privacy audit: delta must be in [0, 1], got {delta}")
    return _steinke_p_value(m, r, v, float(epsilon), float(delta))


def _steinke_bound_at(m: int, r: int, v: int, delta: float, significance: float, floor: float = 0.0) -> float:
    """The largest eps >= floor whose p-value is still <= significance; floor itself when floor is not refuted
    (the audit passes the best bound so far, so that a cell that cannot beat it costs one p-value)."""
    if _steinke_p_value(m, r, v, floor, 0.0) > significance:  # not even pure floor-DP is refuted
        return floor

    def margin(epsilon: float) -> float:  # > 0: (epsilon, delta)-DP refuted
        return significance - _steinke_p_value(m, r, v, epsilon, delta)

    if margin(floor) <= 0.0:
        return floor
    low, high = floor, max(1.0, 2.0 * floor)
    while margin(high) > 0.0:
        low, high = high, 2.0 * high
    return float(brentq(margin, low, high, xtol=EPS_TOL))


def steinke_epsilon_lower_bound(m: int, r: int, v: int, delta: float, confidence: float = CONFIDENCE) -> float:
    """Steinke et al.'s one-run epsilon lower bound: the largest eps such that, were the run (eps, delta)-DP,
    v or more right of r guesses among m canaries would have probability <= 1 - confidence
    (`steinke_p_value`; eps found by Brent's method to 1e-10). 0.0 when no eps >= 0 is refuted."""
    _check_counts(m, r, v)
    delta = _check_open_unit("delta", delta)
    confidence = _check_open_unit("confidence", confidence)
    return _steinke_bound_at(m, r, v, delta, 1.0 - confidence)


# ---------------------------------------------------------------- Mahloujifar, Melis & Chaudhuri (2025)


def _fdp_statistic(m: int, r: int, v: int, mus: np.ndarray, significance: float) -> np.ndarray:
    right = np.full(mus.shape, significance * v / m)
    wrong = np.full(mus.shape, significance * (r - v) / m)
    for i in range(v - 1, -1, -1):
        raised = np.maximum(wrong, ndtr(ndtri(right) - mus))
        increase = raised - wrong
        if not increase.any():  # h stopped growing: nothing changes again
            break
        right = np.minimum(right + (i / (r - i)) * increase, 1.0)
        wrong = raised
    return right + wrong - r / m


def fdp_gaussian_statistic(m: int, r: int, v: int, mu: np.ndarray | float,
                           confidence: float = CONFIDENCE) -> np.ndarray:
    """Mahloujifar et al.'s `audit_rh_with_cap` for mu-GDP, for each mu at once: positive where v right of r
    guesses among m canaries refute mu-GDP at the confidence level.

    G_mu's inverse blow-up is x -> Phi(Phi^-1(x) - mu). With tau = 1 - confidence, start from c = tau v / m
    (right guesses) and h = tau (r - v) / m (wrong ones); for i = v - 1 down to 0:
        h' = max(h, Phi(Phi^-1(c) - mu)),   c <- min(c + i / (r - i) (h' - h), 1),   h <- h'.
    The statistic is c + h - r / m (the paper's audit accepts mu-GDP when c + h <= r / m)."""
    _check_counts(m, r, v)
    confidence = _check_open_unit("confidence", confidence)
    return _fdp_statistic(m, r, v, np.atleast_1d(np.asarray(mu, dtype=float)), 1.0 - confidence)


def _fdp_mu_at(m: int, r: int, v: int, significance: float, floor: float = 0.0) -> float:
    """The largest mu >= floor refuted at significance; floor itself when floor is not refuted (mu = 0 is
    perfect privacy). `MU_START` (scaled to start above floor) and its doublings bracket it, then passes of
    `MU_POINTS` evenly spaced mu narrow the bracket to `EPS_TOL` (relative). Returns the refuted end."""

    def refuted(mus: np.ndarray) -> np.ndarray:
        return _fdp_statistic(m, r, v, mus, significance) > 0.0

    if not refuted(np.full(1, floor))[0]:
        return floor
    low, points = floor, floor + np.asarray(MU_START)
    while True:
        hits = refuted(points)
        if not hits.any():
            high = float(points[0])
            break
        last = int(np.flatnonzero(hits)[-1])
        low = float(points[last])
        if last + 1 < len(points):
            high = float(points[last + 1])
            break
        points = low * 2.0 ** np.arange(1, len(MU_START) + 1)  # all refuted: look further
    while high - low > EPS_TOL * max(1.0, high):
        points = np.linspace(low, high, MU_POINTS + 2)[1:-1]
        hits = refuted(points)
        if hits.any():
            last = int(np.flatnonzero(hits)[-1])
            low = float(points[last])
            high = float(points[last + 1]) if last + 1 < len(points) else high
        else:
            high = float(points[0])
    return low


def fdp_gaussian_mu_lower_bound(m: int, r: int, v: int, confidence: float = CONFIDENCE) -> float:
    """The largest mu such that mu-GDP is refuted by v right of r guesses among m canaries at the confidence
    level (`fdp_gaussian_statistic` > 0), to 1e-10; 0.0 when not even mu = 0 is refuted."""
    _check_counts(m, r, v)
    confidence = _check_open_unit("confidence", confidence)
    return _fdp_mu_at(m, r, v, 1.0 - confidence)


def _log_gdp_delta(mu: float, epsilon: float) -> float:
    """log delta(eps) of mu-GDP: log Phi(a) + log(1 - exp(eps + log Phi(b) - log Phi(a))), a = -eps/mu + mu/2,
    b = -eps/mu - mu/2; finite down to delta ~ 1e-300 (-inf where delta underflows to 0)."""
    log_first = float(log_ndtr(-epsilon / mu + mu / 2.0))
    gap = epsilon + float(log_ndtr(-epsilon / mu - mu / 2.0)) - log_first
    if gap >= 0.0:
        return -np.inf
    return log_first + float(np.log(-np.expm1(gap)))


def gdp_delta(mu: float, epsilon: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth & Su 2022, Corollary 2.13): Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
    (0.0 for mu = 0)."""
    return 0.0 if mu <= 0.0 else float(np.exp(_log_gdp_delta(mu, epsilon)))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The epsilon at which mu-GDP is (epsilon, delta)-DP: the root of delta(eps) = delta (`gdp_delta`, in logs,
    Brent's method to 1e-10); 0.0 when mu-GDP is already (0, delta)-DP."""
    delta = _check_open_unit("delta", delta)
    log_delta = float(np.log(delta))
    if mu <= 0.0 or _log_gdp_delta(mu, 0.0) <= log_delta:
        return 0.0
    low, high = 0.0, 1.0
    while _log_gdp_delta(mu, high) > log_delta:
        low, high = high, 2.0 * high

    def excess(epsilon: float) -> float:  # > 0: mu-GDP is not (epsilon, delta)-DP
        return max(_log_gdp_delta(mu, epsilon), -1e6) - log_delta

    return float(brentq(excess, low, high, xtol=EPS_TOL))


def fdp_gaussian_epsilon_lower_bound(m: int, r: int, v: int, delta: float,
                                    confidence: float = CONFIDENCE) -> float:
    """Mahloujifar et al.'s one-run bound for the Gaussian family as epsilon at delta:
    gdp_epsilon(fdp_gaussian_mu_lower_bound(m, r, v, confidence), delta)."""
    _check_counts(m, r, v)
    delta = _check_open_unit("delta", delta)
    confidence = _check_open_unit("confidence", confidence)
    return gdp_epsilon(_fdp_mu_at(m, r, v, 1.0 - confidence), delta)


# ---------------------------------------------------------------- guesses from scores


def _checked_scores(scores: Sequence[float] | np.ndarray, included: Sequence[bool] | np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    values = np.asarray(scores, dtype=float)
    labels = np.asarray(included)
    if values.ndim != 1 or labels.ndim != 1:
        raise AuditInputError("privacy audit: scores and included must be one-dimensional")
    if len(values) != len(labels):
        raise AuditInputError(f"privacy audit: {len(values)} scores but {len(labels)} inclusion bits")
    if len(values) == 0:
        raise AuditInputError("privacy audit: needs at least one canary, got m = 0")
    if not np.isfinite(values).all():
        raise AuditInputError(f"privacy audit: {int((~np.isfinite(values)).sum())} scores are NaN or infinite")
    if labels.dtype != bool:
        if not np.isin(labels, (0, 1)).all():
            raise AuditInputError("privacy audit: included must hold booleans or 0/1")
        labels = labels.astype(bool)
    return values, labels


def score_order(scores: np.ndarray, seed: int = 0) -> np.ndarray:
    """Canary indices from lowest to highest score, ties in a random order drawn from `seed` (never by index,
    which may follow the labels)."""
    tie_breaker = np.random.default_rng(seed).random(len(scores))
    return np.lexsort((tie_breaker, scores))


def correct_guesses(order: np.ndarray, included: np.ndarray, k_plus: int, k_minus: int) -> int:
    """v: included canaries among the k_plus highest (`order` from `score_order`) plus excluded ones among the
    k_minus lowest."""
    top = order[len(order) - k_plus:] if k_plus else order[:0]
    return int(included[top].sum()) + int((~included[order[:k_minus]]).sum())


def _cells(rule: GuessRule, m: int) -> list[tuple[int, int]]:
    if isinstance(rule, FixedGuesses):
        cells = [(int(rule.k_plus), int(rule.k_minus))]
    elif isinstance(rule, BonferroniGrid):
        if not rule.shares:
            raise AuditInputError("privacy audit: a Bonferroni grid needs at least one (k+/m, k-/m) cell")
        cells = [(int(plus * m), int(minus * m)) for plus, minus in rule.shares]
    else:
        raise AuditInputError(f"privacy audit: unknown guess rule {rule!r}")
    for k_plus, k_minus in cells:
        if k_plus < 0 or k_minus < 0 or k_plus + k_minus > m:
            raise AuditInputError(f"privacy audit: k+ = {k_plus} and k- = {k_minus} need 0 <= k+ + k- <= m = {m}")
    return cells


def _check_family(family: int) -> int:
    if isinstance(family, bool) or int(family) != family or family < 1:
        raise AuditInputError(f"privacy audit: family must be a whole number >= 1, got {family}")
    return int(family)


def privacy_audit(scores: Sequence[float] | np.ndarray, included: Sequence[bool] | np.ndarray, delta: float,
                  confidence: float = CONFIDENCE, guesses: GuessRule = BonferroniGrid(), *,
                  select_by: Method = "steinke", seed: int = 0, family: int = 1) -> PrivacyAudit:
    """Both one-run bounds from canary scores (higher = more likely included) and inclusion bits.

    The rule's cells are each tested at (1 - confidence) / (cells family), `family` being how many audits the
    reported figure is the largest of (1: this audit alone); the cell with the largest `select_by` bound (the
    first in the rule's order on a tie) gives the guesses, and both bounds are reported at it, with the rule's
    ceilings at that significance. Ties among scores are broken at random from `seed`. ValueError
    (`AuditInputError`) for delta or confidence outside (0, 1), scores and bits of different lengths, no canary,
    non-finite scores, a cell with k+ + k- > m, or a family below 1."""
    values, labels = _checked_scores(scores, included)
    delta = _check_open_unit("delta", delta)
    confidence = _check_open_unit("confidence", confidence)
    family = _check_family(family)
    if select_by not in ("steinke", "fdp"):
        raise AuditInputError(f"privacy audit: select_by must be 'steinke' or 'fdp', got {select_by!r}")
    m = len(values)
    cells = _cells(guesses, m)
    significance = (1.0 - confidence) / (len(cells) * family)
    order = score_order(values, seed)
    rights = [correct_guesses(order, labels, k_plus, k_minus) for k_plus, k_minus in cells]

    def steinke(cell: int, floor: float = 0.0) -> float:
        return _steinke_bound_at(m, sum(cells[cell]), rights[cell], delta, significance, floor)

    def fdp_mu(cell: int, floor: float = 0.0) -> float:
        return _fdp_mu_at(m, sum(cells[cell]), rights[cell], significance, floor)

    chooser = steinke if select_by == "steinke" else fdp_mu
    best, best_bound = 0, 0.0
    for cell in range(len(cells)):  # a cell whose bound is not above the best so far costs one test
        bound = chooser(cell, best_bound)
        if bound > best_bound:
            best, best_bound = cell, bound
    epsilon_steinke = best_bound if select_by == "steinke" else steinke(best)
    mu = best_bound if select_by == "fdp" else fdp_mu(best)
    k_plus, k_minus = cells[best]
    ceiling = _ceiling(m, cells, delta, significance)
    return PrivacyAudit(
        epsilon_steinke=epsilon_steinke, epsilon_fdp=gdp_epsilon(mu, delta), mu_fdp=mu, confidence=confidence,
        delta=delta, m=m, n_included=int(labels.sum()), k_plus=k_plus, k_minus=k_minus, r=k_plus + k_minus,
        v=rights[best], rule=guesses.describe(), cells=len(cells), significance=significance, selected_by=select_by,
        family=family, ceiling_steinke=ceiling.epsilon_steinke, ceiling_fdp=ceiling.epsilon_fdp)


def steinke_audit(scores: Sequence[float] | np.ndarray, included: Sequence[bool] | np.ndarray, delta: float,
                  confidence: float = CONFIDENCE, guesses: GuessRule = BonferroniGrid(), *,
                  seed: int = 0, family: int = 1) -> PrivacyAudit:
    """`privacy_audit` with the cell picked by Steinke et al.'s bound."""
    return privacy_audit(scores, included, delta, confidence, guesses, select_by="steinke", seed=seed, family=family)


def mahloujifar_audit(scores: Sequence[float] | np.ndarray, included: Sequence[bool] | np.ndarray, delta: float,
                      confidence: float = CONFIDENCE, guesses: GuessRule = BonferroniGrid(), *,
                      seed: int = 0, family: int = 1) -> PrivacyAudit:
    """`privacy_audit` with the cell picked by Mahloujifar et al.'s Gaussian f-DP bound (conditional on a
    Gaussian trade-off curve: see the module's docstring)."""
    return privacy_audit(scores, included, delta, confidence, guesses, select_by="fdp", seed=seed, family=family)


# ---------------------------------------------------------------- how many canaries


@dataclass(frozen=True)
class Ceiling:
    """The most a rule can prove with m canaries and perfectly separating scores: the guesses it makes when
    n_included = m / 2 (r, all right), and the two bounds at its per-cell significance."""

    m: int
    r: int
    epsilon_steinke: float
    epsilon_fdp: float


def _ceiling(m: int, cells: list[tuple[int, int]], delta: float, significance: float) -> Ceiling:
    r = max(k_plus + k_minus for k_plus, k_minus in cells)
    return Ceiling(m=m, r=r, epsilon_steinke=_steinke_bound_at(m, r, r, delta, significance),
                   epsilon_fdp=gdp_epsilon(_fdp_mu_at(m, r, r, significance), delta))


def epsilon_ceiling(m: int, delta: float = 1e-5, confidence: float = CONFIDENCE,
                    guesses: GuessRule = BonferroniGrid(), family: int = 1) -> Ceiling:
    """Both bounds when every guess is right: the largest cell of the rule (r = k+ + k-, v = r), tested at
    (1 - confidence) / (cells family). FixedGuesses(m // 2, m - m // 2) gives the r = v = m ceiling of a single
    guess set."""
    _check_counts(m, 0, 0)
    delta = _check_open_unit("delta", delta)
    confidence = _check_open_unit("confidence", confidence)
    family = _check_family(family)
    cells = _cells(guesses, m)
    return _ceiling(m, cells, delta, (1.0 - confidence) / (len(cells) * family))


def default_canaries(delta: float = 1e-5, confidence: float = CONFIDENCE) -> tuple[int, str]:
    """`DEFAULT_CANARIES` and why: one sentence with the default grid's `epsilon_ceiling` at 100, 1,000 and
    10,000 canaries."""
    ceilings = [epsilon_ceiling(m, delta, confidence) for m in (100, DEFAULT_CANARIES, 10_000)]
    listed = "; ".join(f"m = {c.m}: {c.epsilon_steinke:.2f} (Steinke), {c.epsilon_fdp:.2f} (f-DP)" for c in ceilings)
    return DEFAULT_CANARIES, (
        f"perfectly separating scores prove at most epsilon {listed}, at {confidence:.0%} and delta {delta:g} "
        f"with the default grid: m = {DEFAULT_CANARIES} catches a run that leaks everything while claiming "
        "epsilon 4 (both bounds) or 8 (f-DP), and ten times the canaries would add little to Steinke's bound")
