"""Dataset inference (`harness.metrics.dataset_inference`): agreement with an independent re-implementation
of Maini et al.'s `linear_di.py` on one split, hand-checked clipping and p-value combination, a planted
signal, calibration on null relabelings, the IID guard, and the refusals of bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom, kstest, norm, ttest_ind
from sklearn.linear_model import LogisticRegression

from harness.core.errors import UserError
from harness.metrics import dataset_inference as di
from harness.metrics import splits

NAMES = ["loss", "zlib", "min_k_20", "min_k_pp_20", "recall", "dc_pdd", "gradnorm"]


def correlated_pool(rng: np.random.Generator, rows: int, columns: int = 7) -> np.ndarray:
    """Scores that share one factor (as LOSS, zlib and Min-K% do), with heavy-tailed noise."""
    return rng.normal(size=(rows, 1)) + 0.4 * rng.standard_t(4, size=(rows, columns))


# --- linear_di.py, re-implemented step by step (its names; suspect = its "train", coded 0) ---

def remove_outliers_clip(metrics: np.ndarray, remove_frac: float = 0.05) -> np.ndarray:
    ids = np.argsort(metrics)
    k = int(len(metrics) * remove_frac / 2)
    lowest, highest = ids[:k], ids[-k:]
    out = np.copy(metrics)
    high_value, low_value = out[highest[0]], out[lowest[-1]]
    out[highest] = high_value
    out[lowest] = low_value
    return out


def adam_logistic(x: np.ndarray, y: np.ndarray, epochs: int = 1000, lr: float = 0.01) -> tuple[np.ndarray, float]:
    """train_model: nn.Linear(d, 1) (init U(-1/sqrt(d), 1/sqrt(d))), BCEWithLogitsLoss, full-batch Adam
    (lr 0.01, betas 0.9/0.999, eps 1e-8), 1000 epochs as main() runs it; also the final gradient's norm."""
    rng = np.random.default_rng(7)
    bound = 1 / math.sqrt(x.shape[1])
    theta = rng.uniform(-bound, bound, x.shape[1] + 1)
    a = np.c_[x, np.ones(len(x))]
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    for t in range(1, epochs + 1):
        grad = a.T @ (1 / (1 + np.exp(-a @ theta)) - y) / len(y)
        m, v = 0.9 * m + 0.1 * grad, 0.999 * v + 0.001 * grad**2
        theta -= lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return theta, float(np.linalg.norm(a.T @ (1 / (1 + np.exp(-a @ theta)) - y) / len(y)))


def newton_logistic(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """The maximum-likelihood fit Adam approaches, by Newton-Raphson to machine precision."""
    a = np.c_[x, np.ones(len(x))]
    theta = np.zeros(a.shape[1])
    for _ in range(40):
        p = 1 / (1 + np.exp(-a @ theta))
        theta -= np.linalg.solve((a * (p * (1 - p))[:, None]).T @ a, a.T @ (p - y))
    return theta, float(np.linalg.norm(a.T @ (1 / (1 + np.exp(-a @ theta)) - y) / len(y)))


def linear_di_p(x: np.ndarray, labels: np.ndarray, train: np.ndarray, fit) -> tuple[float, dict]:
    """main() for one seed on a given shuffle: clip each side, normalise with the suspect side's mean and
    std, fit on the training rows (suspect 0, validation 1), Student t-test on the held-out predictions with
    alternative 'less'. Also what the tolerance needs: the held-out design, labels, and the fit."""
    suspect = np.stack([remove_outliers_clip(c) for c in x[labels == 1].T], axis=1)
    validation = np.stack([remove_outliers_clip(c) for c in x[labels == 0].T], axis=1)
    mean, std = suspect.mean(axis=0), suspect.std(axis=0)
    suspect, validation = (suspect - mean) / std, (validation - mean) / std
    fit_s, fit_v = train[labels == 1], train[labels == 0]
    design = np.r_[suspect[fit_s], validation[fit_v]]
    target = np.r_[np.zeros(fit_s.sum()), np.ones(fit_v.sum())]
    theta, gradient = fit(design, target)

    def p_of(th: np.ndarray) -> float:
        held_s, held_v = suspect[~fit_s] @ th[:-1] + th[-1], validation[~fit_v] @ th[:-1] + th[-1]
        return float(ttest_ind(held_s, held_v, alternative="less").pvalue)

    a = np.c_[design, np.ones(len(design))]
    prob = 1 / (1 + np.exp(-a @ theta))
    hessian = (a * (prob * (1 - prob))[:, None]).T @ a / len(a)  # of the mean loss, at the fit
    return p_of(theta), {"theta": theta, "gradient": gradient, "p_of": p_of, "hessian": hessian}


def derived_tolerance(found: dict, solver_gradient: float) -> float:
    """|log p - log p_ref| allowed: a fit whose mean-loss gradient has norm g is within about g / lambda_min(H)
    of the MLE in theta (H the mean-loss Hessian at the fit), and log p moves by ||grad_theta log p|| per unit
    of theta (central differences); both fits' distances add up; x10 margin for the quadratic approximation."""
    theta, p_of = found["theta"], found["p_of"]
    lam = float(np.linalg.eigvalsh(found["hessian"])[0])
    step = 1e-5
    slope = np.array([(math.log(p_of(theta + step * e)) - math.log(p_of(theta - step * e))) / (2 * step)
                      for e in np.eye(len(theta))])
    return 10 * float(np.linalg.norm(slope)) * (solver_gradient + found["gradient"]) / lam


def test_clip_outliers_by_hand_and_as_linear_di():
    # n = 80: k = int(80 * 0.05 / 2) = 2; the 2 lowest (-50, 1) become x_(2) = 1, the 2 highest (78, 100) x_(79) = 78
    x = np.array([100.0, -50.0, *range(1, 79)])
    out = splits.clip_outliers(x)
    assert out[:2].tolist() == [78.0, 1.0] and out[2:].tolist() == list(map(float, range(1, 79)))
    assert out.tolist() == remove_outliers_clip(x).tolist()
    # n = 40: k = 1, the extremes become themselves; n < 40: k = 0, nothing clipped (linear_di.py fails)
    assert splits.clip_outliers(x[:40]).tolist() == x[:40].tolist()
    assert splits.clip_outliers(x[:10]).tolist() == x[:10].tolist()
    with pytest.raises(IndexError):
        remove_outliers_clip(x[:10])
    rng = np.random.default_rng(3)
    for n in (80, 157, 1000):
        y = rng.standard_t(2, n)
        assert splits.clip_outliers(y).tolist() == remove_outliers_clip(y).tolist()


@pytest.mark.parametrize("fit", [newton_logistic, adam_logistic], ids=["mle", "adam_1000"])
def test_one_split_agrees_with_linear_di(fit):
    rng = np.random.default_rng(11)
    x = correlated_pool(rng, 400)
    labels = np.r_[np.ones(220), np.zeros(180)].astype(int)  # unequal sides: the held-out sides differ too
    x[labels == 1, 0] -= 0.25  # suspect texts have a lower loss
    train = di.split_mask(labels, 90, np.random.default_rng(5))
    ours = di.split_p_value(x, labels, train, NAMES, equal_var=True, preprocessing="linear_di")
    theirs, found = linear_di_p(x, labels, train, fit)
    # sklearn's Newton solver stops at max |gradient| <= 1e-10 on the mean loss
    tolerance = derived_tolerance(found, math.sqrt(len(NAMES) + 1) * 1e-10)
    assert 0 < tolerance < 1e-4
    assert abs(math.log(ours.p_value) - math.log(theirs)) <= tolerance
    assert 1e-6 < ours.p_value < 0.05  # a case where the value matters
    assert (ours.n_train_per_side, ours.n_test_suspect, ours.n_test_validation) == (90, 130, 90)
    # the weights are linear_di.py's with the sign turned: it models "validation", membench "suspect"
    assert np.allclose(list(ours.weights.values()), -found["theta"][:-1], rtol=0, atol=1e-3)


def test_welch_is_the_default_and_shares_the_statistic():
    rng = np.random.default_rng(2)
    x = correlated_pool(rng, 200)
    labels = np.r_[np.ones(100), np.zeros(100)].astype(int)
    x[labels == 1, 1] += 0.5
    train = di.split_mask(labels, 50, np.random.default_rng(0))
    welch = di.split_p_value(x, labels, train, NAMES)
    student = di.split_p_value(x, labels, train, NAMES, equal_var=True)
    # equal held-out sides (50 and 50): same t; Welch's degrees of freedom are fewer, so its p is larger
    assert welch.statistic == pytest.approx(student.statistic, rel=1e-12)
    assert welch.p_value > student.p_value and welch.p_value == pytest.approx(student.p_value, rel=0.1)


def test_batched_splits_match_scipy_and_one_at_a_time():
    # 6 splits of 3 relabelings stacked in one solve: each equals its own single-split run, whose t-test is
    # scipy's ttest_ind on the fitted scores
    rng = np.random.default_rng(9)
    x = correlated_pool(rng, 120)
    labels = np.repeat(np.array([rng.permutation(np.r_[np.ones(60), np.zeros(60)]).astype(int) for _ in range(3)]),
                       2, axis=0)
    train = di.split_mask(labels, 30, rng)
    assert (train.sum(axis=1) == 60).all() and ((train & (labels == 1)).sum(axis=1) == 30).all()
    found = splits.split_statistics(x, labels, train)
    for row in range(6):
        alone = di.split_p_value(x, labels[row], train[row], NAMES)
        assert found.p_value[row] == pytest.approx(alone.p_value, rel=1e-9)
        assert found.z[row] == pytest.approx(norm.isf(alone.p_value), rel=1e-6)
    theta = splits.fit_logistic(np.c_[x, np.ones(120)][None], labels[:1].astype(float))[0]
    scores = np.c_[x, np.ones(120)] @ theta
    held = ~train[0]
    reference = ttest_ind(scores[held & (labels[0] == 1)], scores[held & (labels[0] == 0)], equal_var=False)
    _, df = splits.welch(scores[None], labels[:1], held[None])
    assert df[0] == pytest.approx(reference.df, rel=1e-12)


@pytest.mark.parametrize("penalty", [0.01, 0.1, 1.0])
def test_the_ridge_fit_is_scikit_learns(penalty):
    # mean log-loss + (penalty / 2) |w|^2 with the intercept free is scikit-learn's L2 fit at C = 1 / (penalty m)
    rng = np.random.default_rng(11)
    x = correlated_pool(rng, 80)
    y = (x[:, 0] + rng.normal(size=80) > 0).astype(float)
    theta = splits.fit_logistic(np.c_[x, np.ones(80)][None], y[None], penalty)[0]
    model = LogisticRegression(C=1 / (penalty * 80), tol=1e-12, max_iter=10_000).fit(x, y)
    assert theta[:-1] == pytest.approx(model.coef_[0], abs=1e-6)
    assert theta[-1] == pytest.approx(model.intercept_[0], abs=1e-6)


def test_a_penalty_fits_separable_rows_to_their_finite_minimum():
    # 6 rows and 7 scores separate: unpenalised, the fit stops at the first separating step; with a penalty the
    # minimum is finite and unique, and Newton reaches it (gradient 0)
    rng = np.random.default_rng(12)
    x, y = rng.normal(size=(6, 7)), np.array([1, 1, 1, 0, 0, 0], dtype=float)
    design = np.c_[x, np.ones(6)]
    theta = splits.fit_logistic(design[None], y[None], 0.1)[0]
    gradient = design.T @ (1 / (1 + np.exp(-design @ theta)) - y) / 6 + 0.1 * np.r_[theta[:-1], 0.0]
    assert np.isfinite(theta).all() and np.abs(gradient).max() < 1e-9
    assert np.abs(theta[:-1]).sum() < np.abs(splits.fit_logistic(design[None], y[None])[0][:-1]).sum() + 10


def test_the_penalty_is_part_of_the_statistic():
    # the same splits fit another model: another statistic, the same exact test; a bad penalty is refused
    rng = np.random.default_rng(13)
    x = correlated_pool(rng, 120)
    labels = null_labels(3, 120)
    ridge = di.dataset_inference(x, labels, NAMES, curve_sizes=None)
    plain = di.dataset_inference(x, labels, NAMES, curve_sizes=None, penalty=0.0)
    assert (ridge.penalty, plain.penalty) == (di.PENALTY, 0.0) and ridge.statistic != plain.statistic
    with pytest.raises(UserError, match="penalty must be a finite number >= 0"):
        di.dataset_inference(x, labels, NAMES, penalty=-1.0)


def test_the_answer_does_not_depend_on_the_fit_threads(monkeypatch):
    # the batches of fits are cut by the thread count (cores differ between machines), and a singular system
    # gets the pseudo-inverse alone, so no fit depends on the batch it shares
    rng = np.random.default_rng(5)
    x = correlated_pool(rng, 60)
    labels = np.r_[np.ones(30), np.zeros(30)].astype(int)
    answers = []
    for threads in (1, 3):
        monkeypatch.setattr(di, "fit_threads", lambda threads=threads: threads)
        answers.append(di.dataset_inference(x, labels, NAMES, seed=3, curve_sizes=(10,)))
    assert answers[0] == answers[1]
    hessian = np.stack([np.eye(2), np.ones((2, 2))])  # the second is singular
    step = splits.newton_step(hessian, np.ones((2, 2)))
    assert (step[0] == np.linalg.solve(hessian[0], np.ones(2))).all()
    assert step[1] == pytest.approx(np.linalg.pinv(hessian[1]) @ np.ones(2))


def test_permutation_p_by_hand():
    null = np.array([-1.0, 0.5, 2.0, 3.0])
    assert di.permutation_p(2.0, null) == pytest.approx(3 / 5)  # 1 + #{2.0, 3.0}
    assert di.permutation_p(9.0, null) == pytest.approx(1 / 5)  # never 0
    assert di.permutation_p(-5.0, null) == 1.0
    assert di.min_permutations(0.05) == 19 and di.min_permutations(0.01) == 99 and di.min_permutations(0.001) == 999


def test_sequential_p_by_hand():
    # Besag & Clifford: stop at the h-th relabeling at or above the statistic, p = h / L; h rules out rejection
    assert di.stop_after(0.05, 99) == 5 and di.stop_after(0.05, 49) == 3 and di.stop_after(0.05, 19) == 1
    assert di.stop_after(0.1, 99) == 10 and di.stop_after(0.05, 100) == 6  # 5 / 100 is no more than alpha
    null = np.array([0.5, 3.0, -1.0, 2.5, 4.0, 0.1, 2.2])
    assert di.sequential_p(2.0, null, 3) == (3 / 5, 5)  # 3.0, 2.5 and 4.0: the third is the fifth
    assert di.sequential_p(2.0, null, 5) == (di.permutation_p(2.0, null), 7)  # four in all: never stopped
    for alpha, permutations in [(0.05, 99), (0.05, 49), (0.049, 99), (0.3, 9), (0.04, 49)]:
        h = di.stop_after(alpha, permutations)
        assert h / permutations > alpha and (1 + h) / (permutations + 1) > alpha  # stopped or not: no rejection
        assert h == 1 or (h - 1) / permutations <= alpha  # the fewest that do
    assert di.blocks(99, False) == [(0, 100)]
    assert di.blocks(99, True) == [(0, 11), (11, 31), (31, 71), (71, 100)] and di.blocks(19, True) == [(0, 11), (11, 20)]


def test_stopping_early_changes_no_decision_and_no_p_at_or_below_alpha():
    # the draws are the full test's whether or not it stops: where it does not, the same p bit for bit; where
    # it does, p = h / L above alpha, as the full test's is; a null stops after a few relabelings
    rng = np.random.default_rng(11)
    pool = correlated_pool(rng, 120, 6)
    planted = pool.copy()
    labels = null_labels(3, 120)
    planted[labels == 1, 0] += 1.0
    used = []
    for x, seed in [(pool, s) for s in range(8)] + [(planted, 0)]:
        y = labels if x is planted else null_labels(50 + seed, 120)
        full = di.dataset_inference(x, y, NAMES[:6], seed=seed, permutations=49, curve_sizes=(10, 20, 40))
        early = di.dataset_inference(x, y, NAMES[:6], seed=seed, permutations=49, curve_sizes=(10, 20, 40),
                                     stop_early=True)
        assert (early.statistic, early.split_p_values, early.weights) == (full.statistic, full.split_p_values,
                                                                          full.weights)
        assert early.rejected == full.rejected
        if early.relabelings == 49:
            assert early.p_value == full.p_value
        else:
            assert early.p_value == 3 / early.relabelings > 0.05 and full.p_value > 0.05
        used.append(early.relabelings)
        # the curve records decisions: 19 relabelings, p = 1 / L, or 1 / 20 where none reaches the statistic
        assert [n for n, _ in early.curve] == [10, 20, 40, 60] and early.curve[-1] == (60, early.p_value)
        assert all(round(1 / p, 9) % 1 == 0 and (p > 0.05 or p == pytest.approx(0.05)) for _, p in early.curve[:-1])
    assert used[-1] == 49 and early.p_value == pytest.approx(0.02)  # the planted signal: every relabeling, the floor
    assert np.median(used[:-1]) < 20


def test_more_relabelings_keep_the_observed_statistic_and_extend_the_null():
    """Raising B compares the same statistic with more relabelings: the observed splits and each relabeling
    draw from their own streams (issue 64: at B = 49 and 199 the observed statistic was -1.040 and -0.475)."""
    rng = np.random.default_rng(5)
    x, y = correlated_pool(rng, 80, 6), null_labels(7, 80)
    few = di.combined(x, y, 5, 49, 20, np.random.SeedSequence(3), di.CLIP_FRACTION, False)
    many = di.combined(x, y, 5, 199, 20, np.random.SeedSequence(3), di.CLIP_FRACTION, False)
    assert few.statistic == many.statistic and few.split_p_values == many.split_p_values
    np.testing.assert_array_equal(many.null[:49], few.null)
    # a test that stops early reports no effect size from the few relabelings it fitted, and says why
    tests = [di.dataset_inference(x, y, NAMES[:6], seed=seed, permutations=49, stop_early=True, curve_sizes=None)
             for seed in range(4)]
    stopped = next(t for t in tests if t.relabelings < 49)  # a null: most stop after a few relabelings
    assert (stopped.null_sds, stopped.null_mean, stopped.null_sd) == (None, None, None)
    assert stopped.null_absent == f"stopped early after {stopped.relabelings} of 49 relabelings"
    full = di.dataset_inference(x, y, NAMES[:6], seed=stopped.seed, permutations=49, curve_sizes=None)
    assert full.null_absent is None and full.null_sds == pytest.approx((full.statistic - full.null_mean) / full.null_sd)
    assert full.statistic == stopped.statistic


def test_the_size_at_alpha_is_alpha_where_alpha_times_b_plus_one_is_whole():
    """P(p <= alpha) = floor(alpha (B + 1)) / (B + 1) for p uniform on {1, ..., B + 1} / (B + 1): 0.05 at
    B = 39, 59, 99 and 19; 0.04 at 49."""
    for permutations, size in [(39, 0.05), (49, 0.04), (59, 0.05), (99, 0.05), (19, 0.05), (199, 0.05)]:
        p = np.arange(1, permutations + 2) / (permutations + 1)
        assert di.test_size(0.05, permutations) == pytest.approx(size) == pytest.approx(np.mean(p <= 0.05))
    from tasks.mink_membership.task import DI_PERMUTATIONS

    assert di.test_size(0.05, DI_PERMUTATIONS) == pytest.approx(0.05) == di.test_size(0.05, di.PERMUTATIONS)


def test_planted_signal_gives_the_floor_and_names_its_score():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(400, 7))
    labels = np.r_[np.ones(200), np.zeros(200)].astype(int)
    x[labels == 1, 2] += 1.0  # only min_k_20 carries the signal
    result = di.dataset_inference(x, labels, NAMES, seed=1, curve_sizes=(4, 10, 150))
    assert result.p_value == pytest.approx(1 / 100) and result.rejected  # beyond all 99 relabelings
    assert result.null_sds > 5 and abs(result.null_mean) < 0.5 and 0.4 < result.null_sd < 1
    assert len(result.split_p_values) == 5 and max(result.split_p_values) < 1e-3
    assert (result.n_suspect, result.n_validation, result.n_train_per_side) == (200, 200, 100)
    assert max(result.weights, key=lambda k: abs(result.weights[k])) == "min_k_20" and result.weights["min_k_20"] > 0
    sizes = [n for n, _ in result.curve]
    assert sizes == [4, 10, 150, 200] and result.curve[-1] == (200, result.p_value)
    assert result.curve[0][1] > 0.05 and result.curve[-2][1] == pytest.approx(0.01)  # 4 texts a side show nothing
    assert di.dataset_inference(x, labels, NAMES, seed=1, curve_sizes=(4, 10, 150)) == result  # seeded
    other = di.dataset_inference(x, labels, NAMES, seed=2, curve_sizes=None)
    assert other.curve == () and other.split_p_values != result.split_p_values


def null_labels(seed: int, rows: int) -> np.ndarray:
    labels = np.zeros(rows, dtype=int)
    labels[np.random.default_rng(seed).permutation(rows)[: rows // 2]] = 1
    return labels


def null_split_p(pool: np.ndarray, runs: int, n_train: int, preprocessing: str) -> np.ndarray:
    """Single-split p-values over `runs` seeded random halves of the pool (labels independent of the scores)."""
    return np.array([di.split_p_value(pool, labels, di.split_mask(labels, n_train, np.random.default_rng(seed)),
                                      [f"s{j}" for j in range(pool.shape[1])], preprocessing=preprocessing).p_value
                     for seed in range(runs) for labels in [null_labels(1000 + seed, len(pool))]])


def test_one_split_is_calibrated_on_null_relabelings():
    # labels drawn independently of the scores: the single-split p should be uniform
    runs = 400
    p = null_split_p(correlated_pool(np.random.default_rng(0), 240, 6), runs, 60, "train")
    rejections = int((p <= 0.05).sum())
    assert binom.ppf(0.025, runs, 0.05) <= rejections <= binom.ppf(0.975, runs, 0.05)  # 12 to 29 of 400
    assert kstest(p, "uniform").pvalue > 0.01


def test_linear_di_clipping_leaks_labels_on_collinear_scores():
    # 16 near-copies of one score (as Min-K% at several k are): linear_di.py clips each side on all its
    # texts, held-out ones included, so a side's clipped texts all land on that side's thresholds, which
    # the linear model learns and finds again in the held-out half: its single-split test rejects random
    # halves more often than 5% (30% on the untrained reference GPT-2's scores, bench_dataset_inference).
    # membench's clipping, fitted on the training rows and applied alike to all, does not
    rng = np.random.default_rng(0)
    pool = rng.normal(size=(327, 1)) + 1e-3 * rng.normal(size=(327, 16))
    runs = 300
    leaky = null_split_p(pool, runs, 81, "linear_di")
    assert (leaky <= 0.05).sum() > binom.ppf(0.975, runs, 0.05)  # more than 23 of 300
    ours = null_split_p(pool, runs, 81, "train")
    assert binom.ppf(0.025, runs, 0.05) <= (ours <= 0.05).sum() <= binom.ppf(0.975, runs, 0.05)
    assert kstest(ours, "uniform").pvalue > 0.01


def test_combined_p_is_exact_on_nulls():
    # the permutation p-value of relabelings that are themselves nulls: P(p <= j / 20) = j / 20 with 19
    # permutations, whatever the dependence between the splits (twice their median gave 0.6% at 0.05)
    pool = correlated_pool(np.random.default_rng(1), 120, 6)
    runs = 200
    p = np.array([di.dataset_inference(pool, null_labels(2000 + s, len(pool)), NAMES[:6], n_splits=3, seed=s,
                                       permutations=19, curve_sizes=None).p_value for s in range(runs)])
    assert set(np.round(p * 20).astype(int)) <= set(range(1, 21))
    assert binom.ppf(0.025, runs, 0.05) <= (p <= 0.05).sum() <= binom.ppf(0.975, runs, 0.05)
    assert kstest(p, "uniform").pvalue > 0.01


def test_iid_guard_flags_sets_that_differ_without_a_model():
    rng = np.random.default_rng(6)
    labels = np.r_[np.ones(150), np.zeros(150)].astype(int)
    same = np.c_[rng.poisson(60, 300), rng.normal(size=300)]  # text length, a blind baseline's score
    guard = di.iid_guard(same, labels, ["length", "blind_bow"])
    assert not guard.shifted and guard.p_value > 0.05 and guard.detail.curve == ()
    shifted = same.astype(float)
    shifted[labels == 1, 0] += 10  # suspect texts are longer
    guard = di.iid_guard(shifted, labels, ["length", "blind_bow"])
    assert guard.shifted and guard.p_value == pytest.approx(0.01) and guard.detail.weights["length"] > 0


def test_non_finite_rows_and_constant_scores():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(60, 3))
    labels = np.r_[np.ones(30), np.zeros(30)].astype(int)
    x[0, 1], x[40, 2] = np.nan, np.inf
    x[:, 0] = 1.0  # a score that never varies (e.g. a blind date score with no year anywhere)
    result = di.dataset_inference(x, labels, ["a", "b", "c"], curve_sizes=None)
    assert (result.dropped_rows, result.n_suspect, result.n_validation) == (2, 29, 29)
    assert result.dropped_features == ("a",) and result.weights["a"] == 0.0
    with pytest.raises(UserError, match="2 texts have a NaN or infinite score"):
        di.dataset_inference(x, labels, ["a", "b", "c"], nonfinite="raise")


@pytest.mark.parametrize("labels, message", [
    ([1] * 10, "got 10 suspect and 0 validation"),
    ([0] * 10, "got 0 suspect and 10 validation"),
    ([1] * 3 + [0] * 7, "at least 4 texts with finite scores on each side"),
    ([1, 2] * 5, "labels must be 1 .suspect. or 0"),
])
def test_bad_input_is_one_line(labels, message):
    x = np.random.default_rng(0).normal(size=(10, 2))
    with pytest.raises(UserError, match=message) as caught:
        di.dataset_inference(x, np.array(labels), ["a", "b"])
    assert "\n" not in str(caught.value)
    with pytest.raises(UserError, match="features must be texts x 3 named scores"):
        di.dataset_inference(x, np.array(labels), ["a", "b", "c"])
    x[:, 0] = 0.0
    x[:, 1] = 0.0
    with pytest.raises(UserError, match="no score varies"):
        di.dataset_inference(x, np.r_[np.ones(5), np.zeros(5)].astype(int), ["a", "b"])
    with pytest.raises(UserError, match="9 permutations cannot give a p-value at or below alpha 0.05.*at least 19"):
        di.dataset_inference(np.random.default_rng(0).normal(size=(10, 2)), np.r_[np.ones(5), np.zeros(5)],
                             ["a", "b"], permutations=9)
    with pytest.raises(UserError, match="leaves fewer than 2 to test"):
        di.dataset_inference(np.random.default_rng(0).normal(size=(10, 2)), np.r_[np.ones(5), np.zeros(5)],
                             ["a", "b"], n_train=4)


# --- the direction of "seen" (issue 77) ---

def test_the_seen_fit_is_the_bounded_minimum():
    # weights >= 0, intercept free: the same minimum as SciPy's bounded quasi-Newton solver on the same loss, in a
    # pool where the unconstrained fit gives some scores a negative weight
    from scipy.optimize import minimize

    rng = np.random.default_rng(21)
    x = correlated_pool(rng, 90)
    y = (x[:, 0] - 0.8 * x[:, 1] + rng.normal(size=90) > 0).astype(float)
    design = np.c_[x, np.ones(90)]
    free = splits.fit_logistic(design[None], y[None], 0.1)[0]
    seen = splits.fit_logistic_seen(design[None], y[None], 0.1)[0]
    shrink = np.r_[np.full(7, 0.1), 0.0]

    def loss(theta):
        eta = design @ theta
        return np.mean(np.logaddexp(0, eta) - y * eta) + 0.5 * (shrink * theta**2).sum()

    def gradient(theta):
        return design.T @ (1 / (1 + np.exp(-design @ theta)) - y) / 90 + shrink * theta

    bounded = minimize(loss, np.zeros(8), jac=gradient, method="L-BFGS-B", bounds=[(0, None)] * 7 + [(None, None)],
                       options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000})
    assert (free[:-1] < 0).any() and (seen[:-1] >= 0).all()
    assert seen == pytest.approx(bounded.x, abs=1e-5) and loss(seen) <= bounded.fun + 1e-12


def test_a_validation_set_trained_on_is_no_evidence_in_the_direction_of_seen():
    # the validation texts score as more "seen" on every score (a model trained on them): the two-sided fit
    # finds the difference and calls the suspect set trained on; the fit in the direction of "seen" weighs no
    # score, rejects nothing and bounds no share. Suspect texts that look more seen are still found.
    rng = np.random.default_rng(22)
    x = correlated_pool(rng, 200)
    labels = null_labels(4, 200)
    trained_on_validation = x + 2.0 * (labels == 0)[:, None]
    two_sided = di.dataset_inference(trained_on_validation, labels, NAMES, curve_sizes=None, direction="any")
    seen = di.dataset_inference(trained_on_validation, labels, NAMES, curve_sizes=None)
    assert two_sided.rejected and two_sided.share_lower > 0.3
    assert seen.direction == "seen" and not seen.rejected and seen.share_lower == 0.0
    assert all(weight == 0.0 for weight in seen.weights.values())
    trained_on_suspect = x + 2.0 * (labels == 1)[:, None]
    found = di.dataset_inference(trained_on_suspect, labels, NAMES, curve_sizes=None)
    assert found.rejected and found.share_lower > 0.3


def test_a_score_missing_on_many_texts_is_left_out_and_few_missing_drop_their_texts():
    # ReCaLL past the context on 30 of 100 texts: left out, every text kept; missing on 3: those texts dropped
    from harness.metrics.dataset_report import DatasetInferenceConfig, dataset_inference_report, feature_matrix

    rng = np.random.default_rng(23)
    x = correlated_pool(rng, 100, 3)
    rows = [{"loss": a, "zlib": b, "recall": c} for a, b, c in x]
    for row in rows[:30]:
        del row["recall"]
    matrix, present, left_out = feature_matrix(rows, ["loss", "zlib", "recall", "gradnorm"])
    assert present == ["loss", "zlib"] and left_out == {"recall": 30} and matrix.shape == (100, 2)
    for row in rows[3:30]:
        row["recall"] = 0.0
    matrix, present, left_out = feature_matrix(rows, ["loss", "zlib", "recall"])
    assert present == ["loss", "zlib", "recall"] and left_out == {} and np.isnan(matrix[:3, 2]).all()
    report = dataset_inference_report(null_labels(5, 100), rows, ["loss", "zlib", "recall"], {}, DatasetInferenceConfig(),
                                      0)
    assert report.info["dropped_rows"] == 3 and report.info["direction"] == "seen" and report.info["left_out"] == {}
