"""Keeping freed memory in the process for reuse, instead of handing it back to the kernel after each tensor.

glibc's malloc serves every allocation above its mmap threshold (at most 32 MiB) with a fresh
`mmap` and returns it with `munmap` when freed; below that, it gives the top of the heap back to
the kernel once more than `M_TRIM_THRESHOLD` (128 KiB by default) is free there. A forward pass
allocates and frees the same large activations and logits batch after batch, so the kernel maps
and zeroes those pages again every time: on a 2-core AMD EPYC, scoring a reference GPT-2
checkpoint on its four tasks spent 55 s of its 162 CPU seconds in the kernel (16 million page
faults), 91 s of wall time.

`reuse_freed_memory` sets, with glibc's `mallopt` (its `malloc(3)` tunables, as jemalloc or
tcmalloc would be used elsewhere):
- `M_MMAP_MAX` = 0: every allocation comes from the heap, which freed blocks go back to;
- `M_TRIM_THRESHOLD` = `TRIM_THRESHOLD`: the heap's free top is handed back only beyond 1 GiB;
- `M_TOP_PAD` = `TOP_PAD`: the heap grows 256 MiB beyond each need, so it grows less often.
The same checkpoint then took 57 to 65 s (7 to 11 s in the kernel, 1 million page faults; the
three xsum-gpt2 checkpoints in one process 183 s against 220 s), and the results were identical in
every number: where memory comes from changes no arithmetic (PyTorch aligns
every tensor to 64 bytes itself). The cost: up to about `TRIM_THRESHOLD` + `TOP_PAD` of freed
memory stays counted in the process's resident size (measured peak 3.9 GB against 3.6 GB).
`bench/bench_heap.py` measures both ways in one run (docs/scaling.md cites its record).

It is left alone where the C library is not glibc, and where the user set glibc's malloc
tunables (`GLIBC_TUNABLES` with `glibc.malloc.`, or a `MALLOC_*_` variable): e.g.
`GLIBC_TUNABLES=glibc.malloc.mmap_max=65536` keeps glibc's defaults.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import platform

log = logging.getLogger(__name__)

# mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX = -1, -2, -4
TRIM_THRESHOLD = 1 << 30
TOP_PAD = 256 << 20
USER_SETTINGS = ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_")


def user_set_malloc(environ: dict[str, str]) -> bool:
    """True when `environ` sets glibc's malloc tunables, which then stay as the user set them."""
    return "glibc.malloc." in environ.get("GLIBC_TUNABLES", "") or any(name in environ for name in USER_SETTINGS)


def reuse_freed_memory() -> bool:
    """Apply the settings of the module docstring to this process; True when they were applied."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc" or user_set_malloc(dict(os.environ)):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        applied = all(libc.mallopt(parameter, value) == 1 for parameter, value in
                      ((M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD)))
    except (OSError, AttributeError):
        applied = False
    if not applied:
        log.info("could not set glibc's malloc tunables: freed memory goes back to the kernel as usual")
    return applied


# The kernel's per-process peak resident size (`VmHWM` in /proc/self/status), which writing "5" to
# /proc/self/clear_refs resets to the current size (Linux 4.0+, proc(5)): so each task's peak is its own.
STATUS, CLEAR_REFS = "/proc/self/status", "/proc/self/clear_refs"


def reset_peak_rss() -> bool:
    """Start a new peak resident size at the current one; False where the kernel offers no reset."""
    try:
        with open(CLEAR_REFS, "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _status_bytes(field: str) -> int | None:
    """A size field of /proc/self/status (`VmHWM`, `VmRSS`: kB) in bytes; None where there is none."""
    try:
        with open(STATUS) as handle:
            for line in handle:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def peak_rss_bytes() -> int | None:
    """The process's peak resident size in bytes since its start or the last `reset_peak_rss`
    (None where /proc/self/status has no `VmHWM`)."""
    return _status_bytes("VmHWM")


def rss_bytes() -> int | None:
    """The process's resident size now, in bytes (None where /proc/self/status has no `VmRSS`)."""
    return _status_bytes("VmRSS")
