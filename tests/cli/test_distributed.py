"""Data-parallel evaluation (`harness.scoring.distributed`): batch sharding, the results file's record of
the processes, `--device-map`, the launcher errors, and 2 CPU processes under `accelerate launch`
giving exactly the numbers and samples of one process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_user_error

from harness.app.cli import main
from harness.core.results import RunSettings, load_results
from harness.scoring import distributed

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- sharding


def test_shard_is_round_robin_and_covers_every_batch_once():
    batches = [[i] for i in range(7)]
    assert distributed.shard(batches, 1, 0) == batches
    assert distributed.shard(batches, 3, 0) == [[0], [3], [6]]
    assert distributed.shard(batches, 3, 1) == [[1], [4]]
    assert distributed.shard(batches, 3, 2) == [[2], [5]]
    assert distributed.shard(batches, 8, 7) == []
    ran = sorted(b for r in range(3) for [b] in distributed.shard(batches, 3, r))
    assert ran == list(range(7))


def test_run_batches_in_one_process_is_the_plain_loop():
    seen = []

    def score(batch):
        seen.append(batch)
        return [10 * i for i in batch]

    assert distributed.run_batches([[2, 0], [1]], score, "x", progress=False) == {2: 20, 0: 0, 1: 10}
    assert seen == [[2, 0], [1]]
    assert distributed.run_batches([], score, "x") == {}
    with pytest.raises(ValueError, match="1 results for a batch of 2"):
        distributed.run_batches([[0, 1]], lambda batch: [0], "x")


def test_run_batches_on_rank_1_of_2_runs_its_share_and_returns_all(monkeypatch):
    """World size faked: rank 1 runs batches 1 and 3; the gather adds rank 0's results."""
    import torch.distributed

    batches = [[0, 1], [2], [3, 4], [5]]
    score = lambda batch: [f"r{i}" for i in batch]  # noqa: E731
    seen = []
    rank0 = {i: f"r{i}" for batch in distributed.shard(batches, 2, 0) for i in batch}

    def fake_gather(parts, mine):
        parts[0], parts[1] = rank0, mine

    monkeypatch.setattr(distributed, "world_size", lambda: 2)
    monkeypatch.setattr(distributed, "rank", lambda: 1)
    monkeypatch.setattr(torch.distributed, "all_gather_object", fake_gather)
    out = distributed.run_batches(batches, lambda b: seen.append(b) or score(b), "x")
    assert seen == [[2], [5]]
    assert out == {i: f"r{i}" for i in range(6)}


# ---------------------------------------------------------------- results file, errors


def test_the_processes_field_is_left_out_for_one_process():
    one = RunSettings(batch_size=16, limit=None, seed=0)
    assert "processes" not in one.model_dump() and "processes" not in one.model_dump_json()
    two = RunSettings(batch_size=16, limit=None, seed=0, processes=2)
    assert json.loads(two.model_dump_json())["processes"] == 2
    assert RunSettings.model_validate(two.model_dump()).processes == 2


def test_only_evaluate_runs_under_a_launcher(capsys, monkeypatch, tmp_path, tiny_lm):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert_user_error(capsys, ["tasks"], None, "only `membench evaluate` runs data-parallel")
    out = tmp_path / "out"
    assert_user_error(capsys, ["evaluate", "--model", str(tiny_lm), "--tasks", "mink_membership", "--device-map",
                               "auto", "--output-path", str(out)], out, "--device-map", "data-parallel")


def test_device_map_auto_gives_the_same_numbers(tmp_path, tiny_lm):
    """`--device-map auto` (accelerate's placement; all on the CPU here) scores exactly as a plain load."""
    common = ["evaluate", "--model", str(tiny_lm), "--tasks", "mink_membership", "--limit", "12", "--lengths", "8,16",
              "--bootstrap-resamples", "20", "--no-cache", "--device", "cpu"]
    assert main(common + ["--output-path", str(tmp_path / "plain")]) == 0
    assert main(common + ["--output-path", str(tmp_path / "mapped"), "--device-map", "auto"]) == 0
    [plain] = [load_results(p) for p in (tmp_path / "plain").glob("*.json")]
    [mapped] = [load_results(p) for p in (tmp_path / "mapped").glob("*.json")]
    assert mapped.model.details["device_map"] == "auto" and mapped.model.device == "cpu"
    assert "device_map" not in plain.model.details
    values = [[(m.name, m.tags, m.value, m.ci_low, m.ci_high) for m in r.tasks[0].metrics] for r in (plain, mapped)]
    assert values[0] == values[1] and len(values[0]) > 10
    assert not np.isnan([v[2] for v in values[0] if v[2] is not None]).any()


# ---------------------------------------------------------------- 2 processes == 1 process


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _evaluate_words(model: Path, out: Path, settings: list[str]) -> list[str]:
    """`membench evaluate` of both runs: one thread per process, since the sums of a forward or backward
    pass depend on the number of threads (harness/run/reproducible.py), so the guarantee is for the same
    threads per process."""
    return ["evaluate", "--model", str(model), "--device", "cpu", "--no-cache", "--threads", "1", "--log-samples",
            "--output-path", str(out), *settings]


def _evaluate(launcher: list[str], model: Path, out: Path, settings: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    for name in distributed.LAUNCHER_VARIABLES:  # a test run under a launcher must not leak into these
        env.pop(name, None)
    command = launcher + ["-m", "harness", *_evaluate_words(model, out, settings)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _evaluate_here(model: Path, out: Path, settings: list[str], capsys) -> str:
    """`_evaluate_words` in this process (the thread count restored after: a process of its own would
    spend 6 s of this test's 25 on imports); its stdout."""
    import torch

    from harness.run import reproducible

    threads = torch.get_num_threads()
    capsys.readouterr()
    try:
        assert main(_evaluate_words(model, out, settings)) == 0
    finally:
        reproducible.set_threads(threads)
    return capsys.readouterr().out


def _one_and_two_processes(tmp_path: Path, model: Path, settings: list[str], capsys):
    """Results of one process (this one) and of 2 CPU processes under accelerate launch, after checking
    that the 2-process run wrote exactly one results file and samples files equal to one process's."""
    one_stdout = _evaluate_here(model, tmp_path / "one", settings, capsys)
    # `accelerate launch --cpu --num_processes 2` starts one process (accelerate 1.15); --multi_gpu
    # without GPUs starts 2 processes joined over gloo.
    two = _evaluate([sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                     "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                     "--main_process_port", str(_free_port())], model, tmp_path / "two", settings)
    [path_one] = (tmp_path / "one").glob("*.json")
    [path_two] = (tmp_path / "two").glob("*.json")  # exactly one results file: rank 0 writes
    assert one_stdout.splitlines()[-1] == str(path_one)  # the results table, then the path
    assert two.stdout.splitlines()[-1] == str(path_two)
    assert two.stdout.count(str(path_two)) == 1 and two.stdout.count("time (s)") == 1  # printed by rank 0 only
    assert path_one.name == path_two.name
    assert "processes" not in json.loads(path_one.read_text())["run"]
    samples_one = sorted(p.name for p in (tmp_path / "one").glob("*.samples.jsonl"))
    samples_two = sorted(p.name for p in (tmp_path / "two").glob("*.samples.jsonl"))
    assert samples_one == samples_two and samples_one
    for name in samples_one:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes(), name
    first, second = load_results(path_one), load_results(path_two)
    assert second.run.processes == 2
    for a, b in zip(first.tasks, second.tasks, strict=True):
        assert a.status == b.status == "ok"
        assert a.config_hash == b.config_hash
        assert [m.model_dump() for m in a.metrics] == [m.model_dump() for m in b.metrics], a.name
        assert a.counts == b.counts and a.item_scores == b.item_scores
        assert sum(m.value is not None for m in a.metrics) > 0
    return first, second


def test_two_cpu_processes_give_exactly_the_numbers_of_one(tmp_path, tiny_lm, capsys):
    """Every kind of task, in one pair of runs: scoring (mink_membership), generation
    (paywall_memorization), choices (stereoset) and fine-tuning (privacy_extraction). privacy_extraction
    fine-tunes with the transformers Trainer, which would join the processes (DDP: half the steps) if it
    saw the launcher's variables; every process must train alike."""
    one, two = _one_and_two_processes(tmp_path, tiny_lm, [
        "--tasks", "mink_membership,paywall_memorization,stereoset,privacy_extraction", "--batch-size", "4",
        "--limit", "8", "--lengths", "16,32", "--bootstrap-resamples", "50", "--max-source-tokens", "8",
        "--max-target-tokens", "20", "--epochs", "1,2"], capsys)
    assert [t.name for t in two.tasks] == ["mink_membership", "paywall_memorization", "stereoset",
                                           "privacy_extraction"]
    assert len(list((tmp_path / "two").glob("*.samples.jsonl"))) == 4
    tuned_one, tuned_two = one.tasks[3].info["finetuning"], two.tasks[3].info["finetuning"]
    # --limit 8: 2 memorization-45 strings per duplicate count (30 rows), 8 unique, 8 persons: 46 rows an epoch
    assert tuned_two["steps"] == tuned_one["steps"] == 2 * -(-46 // 8)
    assert tuned_two["train_loss"] == tuned_one["train_loss"]
