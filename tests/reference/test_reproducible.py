"""Pinned numerics (harness/run/reproducible.py): the reference build code gives the same weights
under emulated CPUs, the pins are what makes it so, and thread counts follow the machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.run import reproducible
from tests.conftest import assert_user_error

SCRIPT = Path(__file__).parents[1] / "helpers" / "tiny_training.py"
REPO = SCRIPT.parent.parent


def cpu_has(flag: str) -> bool:
    try:
        return flag in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


needs_avx2 = pytest.mark.skipif(not cpu_has(" avx2"), reason="the pins need an x86-64 CPU with AVX2")


def tiny_training_hash(folder: Path, capability: str, *extra: str) -> str:
    """Train the tiny GPT-2 in a fresh, unpinned process that emulates a CPU; its weights sha256."""
    env = {k: v for k, v in os.environ.items()
           if k not in reproducible.pinned_environment() and k != reproducible.CHILD_MARK}
    env.update(ATEN_CPU_CAPABILITY=capability, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, str(SCRIPT), str(folder), *extra], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    return done.stdout.strip().splitlines()[-1]


@needs_avx2
def test_pinned_builds_are_byte_identical_under_other_cpu_kernels(tmp_path):
    pinned = {capability: tiny_training_hash(tmp_path / capability, capability) for capability in ("default", "avx2")}
    assert pinned["default"] == pinned["avx2"]
    # the same training, unpinned, depends on the kernels: the pins are what make it reproducible
    unpinned = tiny_training_hash(tmp_path / "unpinned-default", "default", "--unpinned")
    assert unpinned != pinned["default"]


@needs_avx2
def test_the_test_process_runs_pinned():
    assert reproducible.environment_is_pinned()
    assert reproducible.torch_capability() == reproducible.PINNED_CAPABILITY


def test_pinned_environment_names_every_library_and_the_thread_count():
    env = reproducible.pinned_environment(3)
    assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["MKL_CBWR"] == "AVX2"
    assert env["OPENBLAS_CORETYPE"] == "Haswell" and "X86_V4" in env["NPY_DISABLE_CPU_FEATURES"].split()
    assert {env[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS")} == {"3"}


def test_recipe_digest_covers_the_numerics(monkeypatch):
    from harness.reference import build

    before = build.quick_config().digest()
    monkeypatch.setattr(build, "NUMERICS", build.NUMERICS + " (changed)")
    assert build.quick_config().digest() != before


def test_default_threads_share_the_available_cores(monkeypatch):
    monkeypatch.setattr(reproducible, "available_cores", lambda: 8)
    assert reproducible.default_threads() == 8
    assert reproducible.default_threads(processes_on_this_machine=4) == 2
    assert reproducible.default_threads(processes_on_this_machine=16) == 1


def test_cgroup_quota_caps_the_cores(monkeypatch, tmp_path):
    assert reproducible.quota_cores("150000 100000") == 2
    assert reproducible.quota_cores("max 100000") is None
    assert reproducible.quota_cores("garbage") is None
    monkeypatch.setattr(reproducible, "_cgroup_cpu_quota", lambda: 1)
    assert reproducible.available_cores() == 1


def test_evaluate_threads_flag_sets_torch_threads(tiny_lm, tmp_path):
    from harness.app.cli import main

    before = torch.get_num_threads()
    try:
        assert main(["evaluate", "--model", str(tiny_lm), "--tasks", "weat", "--tests", "weat1", "--limit", "2",
                     "--threads", "1", "--output-path", str(tmp_path)]) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_unknown_reference_build_is_one_line(capsys, tmp_path):
    assert_user_error(capsys, ["reference", "build", "--builds", "gpt5", "--output", str(tmp_path / "out")],
                      tmp_path / "out", "unknown reference build 'gpt5'", "xsum-gpt2")
