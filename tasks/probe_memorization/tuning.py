"""The paper's tuning set (`--tuning-sentences`): Rosa, Musil & Mareček 2020 tune their probe on 500
held-out sentences. Here pool sentences are held out before any training size is drawn, each
probe is trained on the rest of the pool at every value of its grid (the linear probe's C, the
MLP's epochs), and the value with the best accuracy on the held-out sentences' tokens is kept for
every training size and repetition of that representation. The held-out sentences are never
trained on and never evaluated.
"""

from __future__ import annotations

import numpy as np

from tasks.probe_memorization.probes import Fit, ProbeKind

TUNING_SENTENCES = 500  # Rosa et al.'s held-out sentences
# the grids, weakest fit first: a tie goes to the stronger regularization (smaller C, fewer epochs)
LINEAR_C_GRID = (0.01, 0.1, 1.0, 10.0)
MLP_EPOCHS_GRID = (5, 10, 20, 40)
MAX_SHARE = 4  # at most a quarter of the pool is held out, so the training sizes keep most of it


def hold_out(n_pool: int, wanted: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(tuning, rest): min(`wanted`, ⌊n_pool / 4⌋) pool sentence indices drawn at random
    (`numpy.random.default_rng([seed, 0x7E])`) and the others, each sorted."""
    count = min(wanted, n_pool // MAX_SHARE)
    order = np.random.default_rng([seed, 0x7E]).permutation(n_pool)
    return np.sort(order[:count]), np.sort(order[count:])


def grid(kind: ProbeKind) -> tuple[float, ...] | tuple[int, ...]:
    return LINEAR_C_GRID if kind == "linear" else MLP_EPOCHS_GRID


def candidate_fits(kind: ProbeKind, representation: str, rows: np.ndarray, labels: np.ndarray,
                   seed: int) -> list[Fit]:
    """One fit per value of `kind`'s grid, trained on `rows` with the task's labels only."""
    if kind == "linear":
        return [Fit(kind, representation, rows, [labels], seed, linear_c=c) for c in LINEAR_C_GRID]
    return [Fit(kind, representation, rows, [labels], seed, mlp_epochs=epochs) for epochs in MLP_EPOCHS_GRID]


def choose(accuracies: list[float], values: tuple) -> float | int:
    """The grid value with the highest tuning accuracy; the first (the most regularized) among equals."""
    return values[int(np.argmax(accuracies))]
