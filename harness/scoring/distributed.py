"""Data-parallel evaluation: the process group, and batches shared out among its processes.

Under a launcher (`accelerate launch`, `torchrun`) that starts N processes with WORLD_SIZE=N,
`init_from_env` joins them in a process group (gloo on CPU, nccl on GPU, through accelerate's
`PartialState`). Every process then runs the same code on the same data; only the scoring
primitives' batch loops are split, by `run_batches`: the batches (formed before sharding, exactly
as one process forms them) go round-robin to the processes, and every process gets back all the
results. A batch holds the same texts whatever the number of processes, so the scores are
bit-identical to one process's (given the same number of threads per process). Everything
else (fine-tuning, probe training, metrics) runs on every process alike; only rank 0 writes files.
With one process nothing here touches `torch.distributed`.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence, TypeVar

from harness.core.errors import UserError
from harness.core.progress import progress_bar
from harness.scoring.fitting import FittingBatches

T = TypeVar("T")

# Variables through which launchers tell a process it is one of many (`single_process_env` hides them).
LAUNCHER_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                      "ROLE_WORLD_SIZE", "GROUP_WORLD_SIZE", "ROLE_NAME", "TORCHELASTIC_RUN_ID",
                      "ACCELERATE_USE_CPU")
# What torchrun (and accelerate launch, through it) sets beside WORLD_SIZE for the processes to meet.
RENDEZVOUS_VARIABLES = ("RANK", "MASTER_ADDR", "MASTER_PORT")


def env_world_size() -> int:
    """The number of processes a launcher started (WORLD_SIZE), 1 without a launcher."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def env_local_world_size() -> int:
    """The processes a launcher started on this machine (LOCAL_WORLD_SIZE), 1 without a launcher."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def _group_up() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def world_size() -> int:
    """Processes in the process group; 1 when there is none."""
    if not _group_up():
        return 1
    import torch.distributed as dist

    return dist.get_world_size()


def rank() -> int:
    """This process's rank in the process group; 0 when there is none."""
    if not _group_up():
        return 0
    import torch.distributed as dist

    return dist.get_rank()


def is_main() -> bool:
    """True on rank 0 (the process that writes files and prints), and in a single process."""
    return rank() == 0


def check_launcher_env() -> None:
    """A `UserError` when WORLD_SIZE > 1 but the variables a launcher sets beside it (`RENDEZVOUS_VARIABLES`)
    are missing: a WORLD_SIZE left in the shell, not a launch, which would fail deep in
    `torch.distributed` or wait for processes that never come."""
    missing = [name for name in RENDEZVOUS_VARIABLES if not os.environ.get(name)]
    if env_world_size() > 1 and missing:
        raise UserError(f"WORLD_SIZE={os.environ.get('WORLD_SIZE')} is set but {', '.join(missing)} "
                        f"{'is' if len(missing) == 1 else 'are'} not: start a data-parallel run with `torchrun` "
                        "or `accelerate launch`, or unset WORLD_SIZE")


def init_from_env(cpu: bool) -> int:
    """Join the launcher's process group when WORLD_SIZE > 1 (gloo when `cpu`, else nccl, one GPU
    per process); returns the world size. Without a launcher it does nothing and returns 1."""
    if env_world_size() <= 1 or _group_up():
        return world_size()
    check_launcher_env()
    from accelerate import PartialState

    if cpu:
        PartialState(cpu=True, backend="gloo")
    else:
        PartialState()  # nccl, and torch.cuda.set_device(LOCAL_RANK)
    return world_size()


def local_device() -> str:
    """The device of this process: cuda:LOCAL_RANK when the group runs on GPUs (nccl), else cpu."""
    import torch
    import torch.distributed as dist

    if _group_up() and dist.get_backend() == "nccl":
        return f"cuda:{torch.cuda.current_device()}"
    return "cpu"


def barrier() -> None:
    if world_size() > 1:
        import torch.distributed as dist

        dist.barrier()


def shutdown() -> None:
    """Leave the process group (after a barrier, so no process leaves while another still needs it)."""
    if world_size() > 1:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()


@contextmanager
def main_first() -> Iterator[None]:
    """Rank 0 runs the block first (say, fetching data into the cache), then the other ranks.

    Rank 0 releases the others even when its block raises; they then run it themselves (and
    usually fail the same way)."""
    if world_size() > 1 and not is_main():
        barrier()
    try:
        yield
    finally:
        if world_size() > 1 and is_main():
            barrier()


def broadcast_from_main(obj: T) -> T:
    """Rank 0's `obj` on every rank (any picklable object); `obj` itself in a single process."""
    if world_size() == 1:
        return obj
    import torch.distributed as dist

    box = [obj if is_main() else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def shard(batches: Sequence[Sequence[int]], world: int, rank: int) -> list[list[int]]:
    """The batches rank `rank` of `world` runs: every world-th one, starting at its rank."""
    return [list(batch) for i, batch in enumerate(batches) if i % world == rank]


def run_batches(batches: Sequence[Sequence[int]], score_batch: Callable[[list[int]], Sequence[T]], desc: str,
                progress: bool | None = None) -> dict[int, T]:
    """Run `score_batch` on this rank's share of `batches` and return every rank's results.

    `batches` are lists of item indices, formed exactly as one process would run them (length-
    sorted); rank r runs batches r, r + N, r + 2N, ... (round-robin keeps the load even, since
    neighbouring batches have similar lengths). `score_batch(batch)` returns one result per index
    of `batch`. Returns {index: result} for all indices of all batches, on every rank. A batch that
    runs out of memory runs in halves (`harness.scoring.fitting`, which records the largest batch
    that ran). A progress bar (`progress_bar`; `progress`: None = a bar on a terminal, lines in a
    log) shows on rank 0 only.
    """
    world, me = world_size(), rank()
    mine = shard(batches, world, me)
    results: dict[int, T] = {}
    fitting = FittingBatches(desc)
    for batch in progress_bar(mine, step=desc, unit="batch", leave=False, show=False if me != 0 else progress):
        results.update(zip(batch, fitting.run(list(batch), score_batch)))
    if world > 1 and batches:
        import torch.distributed as dist

        parts: list[dict[int, T] | None] = [None] * world
        dist.all_gather_object(parts, results)
        results = {index: value for part in parts for index, value in part.items()}
    return results


@contextmanager
def single_process_env() -> Iterator[None]:
    """Hide the launcher's variables so libraries that set themselves up from them (the
    transformers Trainer, through accelerate) run this process on its own rather than joining
    it to the others; the process group itself stays up. Used for work every rank repeats
    (fine-tuning inside a task). Does nothing in a single process."""
    if world_size() == 1:
        yield
        return
    from accelerate.state import AcceleratorState

    saved = {name: os.environ.pop(name) for name in LAUNCHER_VARIABLES if name in os.environ}
    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        yield
    finally:
        os.environ.update(saved)
        AcceleratorState._reset_state(reset_partial_state=True)
