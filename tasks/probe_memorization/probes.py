"""The probes: a linear one (multinomial logistic regression) and an MLP with one hidden layer.

Both standardize their inputs with the mean and standard deviation of their own training tokens
(a feature with zero spread is only centred), so a model's feature scale does not set the
strength of the regularization.

- `linear`: scikit-learn `LogisticRegression(C=1.0, solver="lbfgs", max_iter=1000)`: with more
  than two classes lbfgs fits the multinomial (softmax) model, L2 penalty; deterministic.
- `mlp`: a torch module Linear(d, 512) -> ReLU -> Linear(512, classes), cross-entropy, Adam
  (learning rate 1e-3, no weight decay), mini-batches of 64 tokens reshuffled every epoch, a fixed
  number of epochs; weights and shuffles seeded. Several label vectors on the same inputs (the task
  and its control task) train together as independent networks in one batched module.
Each fit runs on one thread (`one_thread`); `run_fits` spreads the fits of a task run over
worker processes, as many as PyTorch has threads, so the numbers do not depend on the worker count;
they are forked, or spawned once this process has initialised CUDA (`start_method`). Spawned
workers read the matrices from .npy files memory-mapped in each (`shared_with_workers`) rather than
a pickled copy each: on an H100 machine a 1.7B model's run waited 88 s for its first fit from 16
spawned workers that were each sent both matrices (docs/gpu.md; on 2 CPU cores with 0.5 GB of
matrices the files took the start from 8.9 s to 6.4 s).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Literal

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

ProbeKind = Literal["linear", "mlp"]

LINEAR_C = 1.0
LINEAR_MAX_ITER = 1000
MLP_HIDDEN = 512
MLP_LEARNING_RATE = 1e-3
MLP_BATCH = 64


def standardizer(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and scale of the training features (scale 1 where a feature does not vary)."""
    mean = x.mean(0)
    scale = x.std(0)
    scale[scale < 1e-8] = 1.0
    return mean.astype(np.float32), scale.astype(np.float32)


def fit_linear(x: np.ndarray, y: np.ndarray, x_test: np.ndarray, c: float = LINEAR_C) -> np.ndarray:
    """Predicted labels of `x_test` from a logistic regression (inverse L2 strength `c`) trained on (x, y)."""
    classes = np.unique(y)
    if len(classes) == 1:  # one class seen in training: it is every prediction
        return np.full(len(x_test), classes[0])
    mean, scale = standardizer(x)
    model = LogisticRegression(C=c, solver="lbfgs", max_iter=LINEAR_MAX_ITER)
    model.fit((x - mean) / scale, y)
    return model.predict((x_test - mean) / scale)


class _BatchedMLP(torch.nn.Module):
    """`m` independent one-hidden-layer networks that read the same inputs."""

    def __init__(self, m: int, width: int, hidden: int, classes: int):
        super().__init__()
        first = [torch.nn.Linear(width, hidden) for _ in range(m)]
        second = [torch.nn.Linear(hidden, classes) for _ in range(m)]
        # (width, m * hidden): one matmul computes every network's hidden layer
        self.w1 = torch.nn.Parameter(torch.cat([f.weight.T for f in first], 1).detach().clone())
        self.b1 = torch.nn.Parameter(torch.cat([f.bias for f in first]).detach().clone())
        self.w2 = torch.nn.Parameter(torch.stack([s.weight.T for s in second]).detach().clone())  # (m, hidden, classes)
        self.b2 = torch.nn.Parameter(torch.stack([s.bias for s in second]).detach().clone()[:, None, :])
        self.m, self.hidden = m, hidden

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(m, batch, classes) logits."""
        h = torch.relu(x @ self.w1 + self.b1).view(len(x), self.m, self.hidden).transpose(0, 1)
        return torch.bmm(h, self.w2) + self.b2


def fit_mlp(x: np.ndarray, labels: list[np.ndarray], x_test: np.ndarray, n_classes: int, seed: int,
            epochs: int) -> list[np.ndarray]:
    """Predicted labels of `x_test`, one array per label vector in `labels`, each from its own MLP
    trained on (x, labels[i]); the same seed gives the same networks."""
    mean, scale = standardizer(x)
    inputs = torch.from_numpy((x - mean) / scale)
    targets = torch.from_numpy(np.stack(labels).astype(np.int64))  # (m, n)
    m, n = targets.shape
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = _BatchedMLP(m, x.shape[1], MLP_HIDDEN, n_classes)
    optimizer = torch.optim.Adam(net.parameters(), lr=MLP_LEARNING_RATE, fused=True)  # one kernel per step
    with torch.enable_grad():
        for _ in range(epochs):
            order = torch.randperm(n, generator=generator)
            for start in range(0, n, MLP_BATCH):
                rows = order[start:start + MLP_BATCH]
                logits = net(inputs[rows])  # (m, b, classes)
                # sum over networks of each one's mean loss: the networks' gradients do not mix
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, n_classes), targets[:, rows].reshape(-1),
                                                         reduction="sum") / len(rows)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
    test = torch.from_numpy((x_test - mean) / scale)
    with torch.no_grad():
        predicted = torch.cat([net(test[i:i + 4096]).argmax(-1) for i in range(0, len(test), 4096)], 1)
    return list(predicted.numpy())


@contextmanager
def one_thread() -> Iterator[None]:
    """One BLAS / OpenMP / torch thread inside: a probe fit is many small matrix products, which
    run fastest on one thread and, on shared cores, do not stall waiting for a second one."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(before)


def train_and_predict(kind: ProbeKind, x: np.ndarray, labels: list[np.ndarray], x_test: np.ndarray,
                      n_classes: int, seed: int, mlp_epochs: int, linear_c: float = LINEAR_C) -> list[np.ndarray]:
    """Per label vector, the test predictions of a probe of `kind` trained on (x, labels[i]), on one thread."""
    with one_thread():
        if kind == "linear":
            return [fit_linear(x, y, x_test, linear_c) for y in labels]
        return fit_mlp(x, labels, x_test, n_classes, seed, mlp_epochs)


@dataclass(frozen=True)
class Fit:
    """One probe fit of a task run: the probe, the rows of the representation it trains on, its
    label vectors (the task's and the control task's), its seed, and its setting where tuned: the
    linear probe's C, the MLP's epochs (None: the run's `--mlp-epochs`)."""

    kind: ProbeKind
    representation: str
    train_rows: np.ndarray
    labels: list[np.ndarray]
    seed: int
    linear_c: float = LINEAR_C
    mlp_epochs: int | None = None


@dataclass(frozen=True)
class _Shared:
    """What every fit of a run reads: the representations' matrices (or, for spawned workers, the
    .npy files that hold them), the evaluation rows, the number of classes and the MLP's epochs
    (sent to each worker once)."""

    vectors: dict[str, np.ndarray | str]
    eval_rows: np.ndarray
    n_classes: int
    mlp_epochs: int


_shared: _Shared | None = None  # in a worker process: set by `_start_worker`


def _start_worker(shared: _Shared) -> None:
    global _shared
    vectors = {name: np.load(matrix, mmap_mode="r") if isinstance(matrix, str) else matrix
               for name, matrix in shared.vectors.items()}
    _shared = dataclasses.replace(shared, vectors=vectors)


@contextmanager
def shared_with_workers(shared: _Shared, method: str) -> Iterator[_Shared]:
    """`shared` as the workers get it: as it is for forked ones (they share the parent's memory), else
    with each matrix saved to a temporary .npy file that every worker maps (the page cache holds it
    once) rather than a pickled copy sent down each worker's pipe."""
    if method == "fork":
        yield shared
        return
    with tempfile.TemporaryDirectory(prefix="membench-probes-") as folder:
        paths = {}
        for index, (name, matrix) in enumerate(shared.vectors.items()):
            paths[name] = str(Path(folder) / f"{index}.npy")
            np.save(paths[name], matrix)
        yield dataclasses.replace(shared, vectors=paths)


def _fit(fit: Fit, shared: _Shared | None = None) -> tuple[list[np.ndarray], float]:
    """(predictions per label vector, seconds) of one fit."""
    shared = shared or _shared
    x = shared.vectors[fit.representation]
    started = time.perf_counter()
    predicted = train_and_predict(fit.kind, x[fit.train_rows], fit.labels, x[shared.eval_rows], shared.n_classes,
                                  fit.seed, fit.mlp_epochs or shared.mlp_epochs, fit.linear_c)
    return predicted, time.perf_counter() - started


def start_method() -> str:
    """How `run_fits` starts its workers: `fork` where the platform has it and this process has not
    initialised CUDA (the workers share the matrices and start at once; a spawned one imports PyTorch
    again, 10 to 20 s on 2 cores), else `spawn`. A child forked after CUDA is initialised cannot
    touch CUDA (`CUDA error: initialization error`), and PyTorch's CPU code does: the optimizer's
    step asks `torch.cuda.is_current_stream_capturing()` when CUDA is available (issue 41: every MLP
    fit crashed after a model had been scored on a GPU). Each worker runs one thread, as PyTorch's
    DataLoader workers do, so the parent's thread pools are not used after a fork."""
    if torch.cuda.is_initialized() or "fork" not in multiprocessing.get_all_start_methods():
        return "spawn"
    return "fork"


def run_fits(fits: list[Fit], vectors: dict[str, np.ndarray], eval_rows: np.ndarray, n_classes: int,
             mlp_epochs: int, workers: int) -> Iterable[tuple[list[np.ndarray], float]]:
    """(predictions, seconds) of each fit, in order. With `workers` > 1 the fits run in that many
    worker processes; each fit is the same single-threaded computation either way, so the
    predictions are too."""
    shared = _Shared(vectors, eval_rows, n_classes, mlp_epochs)
    workers = min(workers, len(fits))
    if workers <= 1:
        yield from (_fit(fit, shared) for fit in fits)
        return
    method = start_method()
    with (shared_with_workers(shared, method) as sent,
          ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method), initializer=_start_worker,
                              initargs=(sent,)) as pool):
        yield from pool.map(_fit, fits)
