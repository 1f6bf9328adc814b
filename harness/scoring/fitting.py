"""Batches that fit the device: a batch that runs out of memory is halved and tried again, and
the largest batch each step ran is recorded.

This is lm-evaluation-harness's `--batch_size auto` by trying (accelerate's
`find_executable_batch_size`: start large, halve on out-of-memory), done per batch inside
`run_batches` rather than once up front, so that it needs no probe run, never runs a batch twice
once it fits, and also catches a later batch that needs more memory than the first (generation
sorts prompts shortest first). Within one call of a primitive, once a batch had to be cut, every
later batch is cut to the size that fitted (the batches are length-sorted, so the next ones need
about as much). What counts as out of memory is accelerate's `should_reduce_batch_size` (CUDA,
XPU, MPS, and the CPU allocator's `can't allocate memory`); freed memory is given back with
`clear_device_cache`. A text's score does not depend on its batch (padding is masked), so cutting
a batch changes no number beyond the last bits of an accelerator's kernels.

`step_sizes()` holds, per step (the progress label: `scoring`, `generating`, `gradient norms`,
...), the largest batch that ran since `reset()`; the runner records it per task in the results
file (`TaskEntry.batch_sizes`).
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence, TypeVar

from accelerate.utils.memory import clear_device_cache, should_reduce_batch_size

from harness.core.errors import warn

T = TypeVar("T")
log = logging.getLogger(__name__)

_largest: dict[str, int] = {}


def reset() -> None:
    """Forget the sizes recorded so far (the runner calls it as each task starts)."""
    _largest.clear()


def step_sizes() -> dict[str, int]:
    """The largest batch each step ran since `reset()`, by step name."""
    return dict(sorted(_largest.items()))


def _record(step: str, size: int) -> None:
    _largest[step] = max(size, _largest.get(step, 0))


class FittingBatches:
    """Runs the batches of one call of a primitive, halving those that do not fit (module docstring)."""

    def __init__(self, step: str):
        self.step = step
        self.fits: int | None = None  # the largest size known to fit in this call, once one had to be cut

    def run(self, batch: list[int], score_batch: Callable[[list[int]], Sequence[T]]) -> list[T]:
        """`score_batch` of `batch`, in pieces of the size that fits; one result per index of `batch`."""
        size = len(batch) if self.fits is None else min(len(batch), self.fits)
        results: list[T] = []
        start = 0
        while start < len(batch):
            piece = batch[start:start + size]
            try:
                values = score_batch(piece)
            except Exception as err:  # noqa: BLE001 - only out-of-memory is handled; the rest is raised again
                if not should_reduce_batch_size(err) or size == 1:
                    raise
                reduced = True
            else:
                reduced = False
            if reduced:  # outside the `except`: the traceback no longer holds the failed batch's tensors
                clear_device_cache(garbage_collection=True)
                size = max(1, size // 2)
                self.fits = size
                warn(f"{self.step}: a batch of {len(piece)} ran out of memory; going on with batches of {size}")
                continue
            if len(values) != len(piece):
                raise ValueError(f"score_batch returned {len(values)} results for a batch of {len(piece)}")
            results.extend(values)
            _record(self.step, len(piece))
            start += len(piece)
        return results
