"""Freed memory kept for reuse (harness/run/heap.py): large tensors allocated again after they were
freed touch no new pages; the user's own malloc tunables are left alone."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from harness.run.heap import reuse_freed_memory, user_set_malloc

glibc_linux = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                                 reason="the settings are glibc's")

# A forward pass's pattern: 64 MiB activations allocated, freed and allocated again; prints the
# page faults of 3 passes after the first.
FAULTS = """
import resource, torch
from harness.run.heap import reuse_freed_memory
print(reuse_freed_memory())
x = torch.ones(64, 512, 512)
def forward():
    h = x * 2.0
    for _ in range(3):
        h = torch.tanh(h) + x
    return float(h[0, 0, 0])
forward()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    forward()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
PAGES = 3 * 7 * (64 << 20) // os.sysconf("SC_PAGE_SIZE")  # 3 passes of 7 new 64 MiB tensors each


def page_faults() -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES" and not k.startswith("MALLOC_")}
    done = subprocess.run([sys.executable, "-c", FAULTS], capture_output=True, text=True, check=True,
                          env=clean)
    applied, faults = done.stdout.split()
    return applied, int(faults)


@glibc_linux
def test_a_freed_tensor_is_allocated_again_without_new_pages():
    """glibc's own way maps the 7 tensors of each pass afresh (344,085 faults measured); kept, they
    are reused (0 to 65,536 faults, by what else sits on the heap)."""
    applied, faults = page_faults()
    assert applied == "True"
    assert faults < PAGES // 2


def test_user_settings_are_recognized():
    assert user_set_malloc({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"})
    assert user_set_malloc({"MALLOC_TRIM_THRESHOLD_": "0"})
    assert not user_set_malloc({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F"})
    assert not user_set_malloc({"PATH": "/usr/bin"})


def test_not_applied_when_the_user_set_them(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_MAX_", "65536")
    assert reuse_freed_memory() is False
