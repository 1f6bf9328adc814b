"""Pinned numerics and thread counts: the same bits under every CPU capability of one x86-64 machine.

Measured on 2026-11-25, these pins do not make a trained build the same on an Intel Xeon and an
AMD EPYC (docs/reproducibility.md).

Training a reference checkpoint on two machines gave two different sets of weights, and scoring
identical weights gave numbers that differ in the 4th to 6th decimal. Each source of that
machine-dependence, measured on one machine by emulating other CPUs, and its pin:

- PyTorch's own kernels are compiled once per CPU capability (DEFAULT, AVX2, AVX512) and chosen
  at run time by the CPU; they round differently (fused multiply-adds, vector widths). 20 AdamW
  steps of a tiny GPT-2 gave three weight hashes under `ATEN_CPU_CAPABILITY=default|avx2|avx512`.
  Pin: `ATEN_CPU_CAPABILITY=avx2`.
- MKL (PyTorch's BLAS: every linear layer) picks its GEMM code path by CPU. Pin: its Conditional
  Numerical Reproducibility mode `MKL_CBWR=AVX2` (same results on every CPU that has AVX2).
- OpenBLAS (NumPy and SciPy's BLAS: scikit-learn probes, WEAT statistics) picks its kernels by
  CPU too. Pin: `OPENBLAS_CORETYPE=Haswell` (the AVX2 kernels).
- NumPy's own loops (exp and log among them) are compiled for x86-64-v3 (AVX2) and v4 (AVX-512)
  and chosen at run time, so a report computed from records (`membench verify`) may round
  otherwise on an AVX-512 machine (not measured: added 2026-12-07 on an AVX2-only EPYC, for the
  reporting stage's bit-for-bit check). Pin: `NPY_DISABLE_CPU_FEATURES` naming the AVX-512 targets
  (`X86_V4 AVX512_ICL AVX512_SPR`), which leaves the AVX2 loops; on a machine without AVX-512 it
  changes nothing.
- Thread count: parallel reductions and GEMM split their work by the number of threads, so 1 and
  2 threads give different sums on the same CPU. Pin: `REFERENCE_THREADS` threads for PyTorch,
  OpenMP, MKL, OpenBLAS and Rayon (the tokenizers library), whatever the machine's core count.

AVX2 (every x86-64 server CPU since 2013 Intel Haswell / 2015 AMD Excavator) is the widest
instruction set whose kernels every such machine can run; the cost against each machine's best
kernels was measured as none on AMD EPYC (MKL already takes its AVX2 path there) and is at most the
AVX-512 speed-up elsewhere. The libraries read these variables when they load, so a process that
is not pinned runs the command again in a pinned child process (`run_pinned`).
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
from pathlib import Path
from typing import Callable, TypeVar

from harness.core import interrupts

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable)

REFERENCE_THREADS = 2
# What the reference builds are trained under; part of every build recipe's digest.
NUMERICS = f"x86-64 AVX2 kernels (ATen avx2, MKL_CBWR=AVX2, OpenBLAS Haswell), {REFERENCE_THREADS} threads"
PINNED_CAPABILITY = "AVX2"  # what torch.backends.cpu.get_cpu_capability() reports once pinned
CHILD_MARK = "MEMBENCH_PINNED_CHILD"


def pinned_environment(threads: int = REFERENCE_THREADS) -> dict[str, str]:
    """The environment variables that make the numerics machine-independent (see the module docstring)."""
    count = str(threads)
    return {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "OPENBLAS_CORETYPE": "Haswell",
            "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
            "OMP_NUM_THREADS": count, "MKL_NUM_THREADS": count, "OPENBLAS_NUM_THREADS": count,
            "RAYON_NUM_THREADS": count, "TOKENIZERS_PARALLELISM": "false"}


def environment_is_pinned(threads: int = REFERENCE_THREADS) -> bool:
    """True when this process started with the pinned environment."""
    return all(os.environ.get(key) == value for key, value in pinned_environment(threads).items())


def torch_capability() -> str:
    """The CPU kernels PyTorch dispatches to in this process (DEFAULT, AVX2, AVX512, ...)."""
    import torch

    return torch.backends.cpu.get_cpu_capability()


def run_pinned(command: list[str], threads: int = REFERENCE_THREADS) -> int | None:
    """Make the rest of this program run pinned: None when this process already is (its torch and
    BLAS threads then set to `threads`); otherwise run `command` (this program again, e.g.
    `python -m harness ARGS`) in a pinned child process and return its exit status. A CPU without
    AVX2 cannot be pinned: warn, and go on unpinned. Ctrl-C reaches the child too, which reports
    it; this process waits for the child (`interrupts.wait_for_child`)."""
    if environment_is_pinned(threads) or os.environ.get(CHILD_MARK):
        capability = torch_capability()
        if capability != PINNED_CAPABILITY:
            log.warning("PyTorch runs %s kernels here (no AVX2?): the reference numbers may differ from the "
                        "committed ones in the last digits", capability)
        set_threads(threads)
        return None
    env = {**os.environ, **pinned_environment(threads), CHILD_MARK: "1"}
    log.info("re-running pinned: %s", " ".join(f"{k}={v}" for k, v in pinned_environment(threads).items()))
    return interrupts.wait_for_child(subprocess.Popen(command, env=env))


def available_cores() -> int:
    """CPU cores this process may use: its CPU affinity, capped by a cgroup CPU quota (containers
    often allow 2 CPUs of a 64-core host, while PyTorch and OpenMP count the host's cores)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = _cgroup_cpu_quota()
    return max(1, min(cores, quota) if quota else cores)


def _cgroup_cpu_quota() -> int | None:
    """The CPUs a cgroup quota allows (v2 `cpu.max`, else v1 `cpu.cfs_quota_us`), None when unlimited."""
    for quota_path, period_path in ((Path("/sys/fs/cgroup/cpu.max"), None),
                                    (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
                                     Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))):
        try:
            text = quota_path.read_text()
            if period_path is not None:
                text = f"{text.strip()} {period_path.read_text().strip()}"
        except OSError:
            continue
        return quota_cores(text)
    return None


def quota_cores(text: str) -> int | None:
    """ceil(quota / period) from a cgroup quota line `QUOTA PERIOD` (v1's -1 and v2's max: unlimited)."""
    try:
        quota, period = text.split()[:2]
        if quota in ("max", "-1"):
            return None
        return max(1, -(-int(quota) // int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def default_threads(processes_on_this_machine: int = 1) -> int:
    """Threads per process: the available cores shared among the processes of a data-parallel run."""
    return max(1, available_cores() // max(1, processes_on_this_machine))


def set_threads(threads: int) -> None:
    """PyTorch's intra-op threads and the BLAS libraries' thread pools (NumPy, SciPy) to `threads`."""
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    threadpool_limits(limits=threads)


def with_reference_threads(function: F) -> F:
    """Run `function` with `REFERENCE_THREADS` threads (then restore the count before): a reference
    build trains with the thread count its recipe digest names, whatever the calling process set
    (a test, a data-parallel rank), since 1 and 2 threads give different sums."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        import torch

        before = torch.get_num_threads()
        set_threads(REFERENCE_THREADS)
        try:
            return function(*args, **kwargs)
        finally:
            set_threads(before)

    return wrapper  # type: ignore[return-value]
