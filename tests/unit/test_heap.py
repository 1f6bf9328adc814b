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
import resource, sys, torch
from harness.run.heap import reuse_freed_memory
print(reuse_freed_memory() if sys.argv[1] == "reuse" else "default")
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


def page_faults(mode: str, **env: str) -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES" and not k.startswith("MALLOC_")}
    done = subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, check=True,
                          env={**clean, **env})
    applied, faults = done.stdout.split()
    return applied, int(faults)


@glibc_linux
def test_a_freed_tensor_is_allocated_again_without_new_pages():
    applied, faults = page_faults("reuse")
    assert applied == "True"
    assert faults < PAGES // 2  # most of them reused (how many depends on what else sits on the heap)
    default, faults = page_faults("default")
    assert default == "default" and faults > 0.9 * PAGES  # glibc's own way maps them afresh each time


@glibc_linux
def test_the_users_malloc_tunables_are_left_alone():
    applied, faults = page_faults("reuse", GLIBC_TUNABLES="glibc.malloc.mmap_max=65536")
    assert applied == "False"
    assert faults > 0.9 * PAGES


def test_user_settings_are_recognized():
    assert user_set_malloc({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"})
    assert user_set_malloc({"MALLOC_TRIM_THRESHOLD_": "0"})
    assert not user_set_malloc({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX512F"})
    assert not user_set_malloc({"PATH": "/usr/bin"})


def test_not_applied_when_the_user_set_them(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_MAX_", "65536")
    assert reuse_freed_memory() is False
