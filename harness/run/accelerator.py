"""What a results file records about the accelerator a run used (`harness.core.results.Environment`).

The device type the model ran on (cpu, cuda, mps), the parameters' dtype and the attention
implementation transformers chose (`config._attn_implementation`: eager, sdpa, flash_attention_2...),
and on CUDA the GPU's name, how many GPUs the process sees, the CUDA version PyTorch was built with
(`torch.version.cuda`) and the driver's version (NVML through `pynvml` where it is installed, else
`nvidia-smi`; None when neither answers). A fact that cannot be read is None (left out of the file):
describing the machine never fails a run.
"""

from __future__ import annotations

import logging
import subprocess
from typing import Any, Callable

log = logging.getLogger(__name__)

NVIDIA_SMI_TIMEOUT_S = 10
# Device types in the order one is named when a model spans several (`--device-map auto` over GPUs and CPU).
_PREFERRED = ("cuda", "mps", "xpu")


def device_type(device: str) -> str:
    """The type of a loaded model's device string (`LoadedModel.device`: cpu, cuda, cuda:1, or the
    comma-joined devices of a `--device-map` model): an accelerator's type where any is used."""
    types = [part.strip().split(":")[0] for part in device.split(",") if part.strip()]
    return next((kind for kind in _PREFERRED if kind in types), types[0] if types else "cpu")


def cuda_index(device: str) -> int | None:
    """The index of the first `cuda:N` in a device string, None for plain `cuda` (the current device)."""
    for part in device.split(","):
        name, _, index = part.strip().partition(":")
        if name == "cuda" and index.isdigit():
            return int(index)
    return None


def _quietly(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception as err:  # noqa: BLE001 - a fact that cannot be read is None, never a failed run
        log.info("accelerator fact unavailable: %s: %s", type(err).__name__, err)
        return None


def driver_version() -> str | None:
    """The NVIDIA driver's version (e.g. 580.159.04): NVML through `pynvml` (nvidia-ml-py), else the first
    line of `nvidia-smi --query-gpu=driver_version` (within NVIDIA_SMI_TIMEOUT_S); None when neither answers."""
    try:
        import pynvml
    except ImportError:
        pynvml = None
    if pynvml is not None:
        def nvml() -> str:
            pynvml.nvmlInit()
            try:
                version = pynvml.nvmlSystemGetDriverVersion()
            finally:
                pynvml.nvmlShutdown()
            return version.decode() if isinstance(version, bytes) else str(version)

        found = _quietly(nvml)
        if found:
            return found
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    return lines[0] if done.returncode == 0 and lines else None


def accelerator_facts(model: object, device: str, dtype: str | None = None) -> dict[str, Any]:
    """The `Environment` fields of the accelerator: `device` (the type), `dtype` (the parameters',
    else `dtype`), `attn_implementation`, and on CUDA `gpu_name`, `gpu_count`, `cuda`, `gpu_driver`."""
    import torch

    kind = device_type(device)
    loaded_dtype = getattr(model, "dtype", None)
    config = getattr(model, "config", None)
    attention = getattr(config, "_attn_implementation", None)
    facts: dict[str, Any] = {
        "device": kind,
        "dtype": str(loaded_dtype).removeprefix("torch.") if isinstance(loaded_dtype, torch.dtype) else dtype,
        "attn_implementation": attention if isinstance(attention, str) else None,
    }
    if kind == "cuda":
        index = cuda_index(device)
        facts["gpu_name"] = _quietly(lambda: torch.cuda.get_device_name(
            index if index is not None else torch.cuda.current_device()))
        facts["gpu_count"] = _quietly(torch.cuda.device_count)
        facts["cuda"] = torch.version.cuda
        facts["gpu_driver"] = driver_version()
    return facts
