"""The accelerator in a results file's `environment` (harness/run/accelerator.py): what a CPU run records,
what a CUDA run records (CUDA faked through `torch.cuda`), the driver's version from NVML or nvidia-smi,
and files that round-trip through validation, older files unchanged."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from harness.core.results import Environment, load_results, parse_results, write_results
from harness.model.loading import ModelSpec, load
from harness.run import accelerator
from harness.run.runner import environment
from tests.helpers.board_files import make_results

ROOT = Path(__file__).resolve().parents[2]
GPU_FIELDS = ("gpu_name", "gpu_count", "cuda", "gpu_driver")


@pytest.fixture(scope="module")
def tiny(tiny_lm):
    return load(ModelSpec(model=str(tiny_lm), device="cpu"))


def fake_gpu(monkeypatch, driver: str | None = "580.159.04") -> None:
    """CUDA as PyTorch would report two H100s (the model on cuda:1); NVML reports `driver`."""
    names = {0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H100 80GB HBM3 (second)"}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: names[0 if index is None else index])
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    nvml = types.SimpleNamespace(nvmlInit=lambda: None, nvmlShutdown=lambda: None,
                                 nvmlSystemGetDriverVersion=lambda: driver.encode() if driver else None)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)


def round_trip(env: Environment, tmp_path: Path) -> dict:
    """A results file holding `env`, written and read back through the schema: its environment as JSON."""
    path = tmp_path / "results.json"
    write_results(make_results().model_copy(update={"environment": env}), path)
    assert load_results(path).environment == env
    return json.loads(path.read_text())["environment"]


def test_cpu_run_records_cpu_and_no_gpu(tiny, tmp_path):
    env = environment(tiny)
    assert env.device == "cpu"
    assert env.dtype == "float32"
    assert env.attn_implementation == tiny.model.config._attn_implementation
    assert env.attn_implementation in ("eager", "sdpa")
    assert all(getattr(env, field) is None for field in GPU_FIELDS)
    written = round_trip(env, tmp_path)
    assert written["device"] == "cpu" and written["dtype"] == "float32"
    assert not set(GPU_FIELDS) & set(written)  # absent, not null


def test_cuda_run_records_the_gpu(tiny, tmp_path, monkeypatch):
    fake_gpu(monkeypatch)
    on_gpu = dataclasses.replace(tiny, device="cuda:1", dtype="bfloat16")
    env = environment(on_gpu)
    assert (env.device, env.gpu_name, env.gpu_count, env.cuda, env.gpu_driver) == (
        "cuda", "NVIDIA H100 80GB HBM3 (second)", 2, "13.0", "580.159.04")
    assert env.dtype == "float32"  # the parameters' dtype as loaded (this model stayed in float32)
    written = round_trip(env, tmp_path)
    assert {k: written[k] for k in ("device", "gpu_name", "gpu_count", "cuda", "gpu_driver")} == {
        "device": "cuda", "gpu_name": "NVIDIA H100 80GB HBM3 (second)", "gpu_count": 2, "cuda": "13.0",
        "gpu_driver": "580.159.04"}


def test_device_map_and_plain_cuda(monkeypatch):
    fake_gpu(monkeypatch)
    assert accelerator.device_type("cpu,cuda:0,cuda:1") == "cuda"
    assert accelerator.device_type("mps") == "mps"
    assert accelerator.device_type("cpu") == "cpu"
    assert accelerator.cuda_index("cpu,cuda:1") == 1 and accelerator.cuda_index("cuda") is None
    facts = accelerator.accelerator_facts(object(), "cuda", "bfloat16")  # no parameters, no config
    assert facts["gpu_name"] == "NVIDIA H100 80GB HBM3"  # the current device
    assert facts["dtype"] == "bfloat16" and facts["attn_implementation"] is None


def test_driver_from_nvidia_smi_when_nvml_is_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    calls = []

    def smi(command, **kwargs):
        calls.append((command, kwargs["timeout"]))
        return subprocess.CompletedProcess(command, 0, stdout="570.86.15\n570.86.15\n", stderr="")

    monkeypatch.setattr(subprocess, "run", smi)
    assert accelerator.driver_version() == "570.86.15"
    assert calls == [(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                      accelerator.NVIDIA_SMI_TIMEOUT_S)]


@pytest.mark.parametrize("outcome", [FileNotFoundError("nvidia-smi"), subprocess.TimeoutExpired("nvidia-smi", 10),
                                     subprocess.CompletedProcess([], 9, stdout="", stderr="NVIDIA-SMI has failed")])
def test_no_driver_is_none(monkeypatch, outcome):
    broken = types.SimpleNamespace(nvmlInit=lambda: (_ for _ in ()).throw(RuntimeError("NVML Shared Library Not Found")))
    monkeypatch.setitem(sys.modules, "pynvml", broken)

    def smi(command, **kwargs):
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(subprocess, "run", smi)
    assert accelerator.driver_version() is None


def test_committed_files_keep_their_environment():
    """The new fields are optional and left out when absent: every committed file validates and its
    environment is written back exactly as it is in the file."""
    files = sorted((ROOT / "submissions").glob("*.json"))
    assert files
    for path in files:
        raw = json.loads(path.read_text(encoding="utf-8"))
        results = parse_results(path.read_text(encoding="utf-8"), str(path))
        assert results.environment.model_dump(mode="json") == raw["environment"], path.name


def test_environment_refuses_a_negative_gpu_count():
    with pytest.raises(ValueError):
        Environment(python="3.12", torch="2", transformers="5", platform="linux", gpu_count=-1)
