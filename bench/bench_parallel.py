"""Speed-up of data-parallel evaluation (`harness.scoring.distributed`) on CPU, measured in one run.

`membench evaluate --tasks mink_membership` (all 400 reference texts, all prefix lengths,
`--no-cache`) on the final (30-epoch) reference GPT-2, each configuration a fresh command:
  (a) 1 process, 2 threads        what a plain `membench evaluate` does on a 2-core machine
  (b) 1 process, 1 thread         the baseline with the threads per process of (c)
  (c) 2 processes x 1 thread      `accelerate launch --multi_gpu --num_processes 2 ... -m harness evaluate`
Rounds interleave the configurations (a slow spell of the machine hits all alike); the fastest
round of each is reported, as the command's wall time (start-up, data and model loading
included) and as the task's own `wall_time_s` from the results file (scoring plus the metrics,
which every process computes). The metrics and the samples of (c) should equal (b)'s exactly (same
threads per process); the report says whether they do, and whether (a)'s and a second round of
(b) do, and lists each metric of (c) that differs from (b)'s.

    python bench/bench_parallel.py [--repeats 2] [--threads 2] [--processes 2] [--output FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.reference.build import BuildConfig
from harness.reference.checkpoints import resolve_reference_model
from harness.scoring.distributed import LAUNCHER_VARIABLES
from record import add_output_flag, emit

ROOT = Path(__file__).resolve().parents[1]
TASK = "mink_membership"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_once(processes: int, threads: int, model: Path, settings: dict[str, str], out: Path,
             environment: dict[str, str] | None = None) -> dict:
    """One `membench evaluate` (under accelerate launch when processes > 1), with `environment` added to
    its variables: wall time, the task's wall time, its metrics and samples, and the resources the
    command used (its largest resident process and its minor page faults, from `wait4`)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", **(environment or {})}
    for name in LAUNCHER_VARIABLES:
        env.pop(name, None)
    launcher = [sys.executable]
    if processes > 1:
        launcher += ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes),
                     "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                     "--main_process_port", str(free_port())]
    flags = [part for key, value in settings.items() for part in (f"--{key.replace('_', '-')}", value)]
    # `--threads`: membench sets its own thread count (the cores, shared among the processes), so the
    # variables above alone would not hold a single process to `threads`
    command = launcher + ["-m", "harness", "evaluate", "--model", str(model), "--tasks", TASK, "--device", "cpu",
                          "--threads", str(threads), "--no-cache", "--log-samples", "--output-path", str(out), *flags]
    started = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as stderr:
        child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            stderr.seek(0)
            raise SystemExit(f"{' '.join(command)} failed:\n{stderr.read()[-3000:]}")
    [results] = out.glob("*.json")
    [samples] = out.glob("*.samples.jsonl")
    data = json.loads(results.read_text())
    [entry] = data["tasks"]
    return {"seconds": seconds, "task_seconds": entry["wall_time_s"], "metrics": entry["metrics"],
            "samples": samples.read_bytes(), "processes": data["run"].get("processes", 1),
            "max_rss_bytes": usage.ru_maxrss * 1024, "minor_faults": usage.ru_minflt}


def differences(x: dict, y: dict) -> dict:
    """Where two runs' outputs differ: each metric whose value or interval differs (name, tags, both
    readings) and the number of sample lines that differ; {} when identical."""
    def key(metric: dict) -> str:
        return json.dumps([metric["name"], metric.get("tags", {})], sort_keys=True)

    theirs = {key(m): m for m in y["metrics"]}
    metrics = [{"metric": key(m), "x": m, "y": theirs.get(key(m))} for m in x["metrics"] if theirs.get(key(m)) != m]
    lines = [pair for pair in zip(x["samples"].splitlines(), y["samples"].splitlines()) if pair[0] != pair[1]]
    found = {}
    if metrics:
        found["metrics"] = metrics
    if lines or len(x["samples"].splitlines()) != len(y["samples"].splitlines()):
        found["sample_lines"] = len(lines)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="threads of the single process in (a)")
    parser.add_argument("--processes", type=int, default=2, help="processes (1 thread each) in (c)")
    add_output_flag(parser)
    args = parser.parse_args()
    config = BuildConfig()
    model = Path(resolve_reference_model("reference:xsum-gpt2-e30"))  # the shipped weights
    settings = {k: v for k, v in config.task_settings().items() if k in ("data", "language", "reference_seed")}
    configurations = {f"a_1proc_{args.threads}threads": (1, args.threads), "b_1proc_1thread": (1, 1),
                      f"c_{args.processes}procs_1thread": (args.processes, 1)}
    runs: dict[str, list[dict]] = {name: [] for name in configurations}
    with tempfile.TemporaryDirectory(prefix="membench-bench-parallel-") as scratch:
        for repeat in range(args.repeats):
            for name, (processes, threads) in configurations.items():
                run = run_once(processes, threads, model, settings, Path(scratch) / f"{name}-{repeat}")
                assert run["processes"] == processes, run["processes"]
                runs[name].append(run)
                print(f"round {repeat + 1} {name}: {run['seconds']:.1f} s (task {run['task_seconds']:.1f} s)",
                      file=sys.stderr)
    a, b, c = (runs[name] for name in configurations)
    best = {name: min(r["seconds"] for r in values) for name, values in runs.items()}
    best_task = {name: min(r["task_seconds"] for r in values) for name, values in runs.items()}
    na, nb, nc = configurations
    report = {
        "model": model.name, "task": TASK, "cpu_count": os.cpu_count(), "repeats": args.repeats,
        "wall_seconds": {k: round(v, 2) for k, v in best.items()},
        "task_wall_time_s": {k: round(v, 2) for k, v in best_task.items()},
        "speedup_c_over_a": round(best[na] / best[nc], 3),
        "speedup_c_over_b": round(best[nb] / best[nc], 3),
        "task_speedup_c_over_a": round(best_task[na] / best_task[nc], 3),
        "task_speedup_c_over_b": round(best_task[nb] / best_task[nc], 3),
        "c_identical_to_b": not differences(c[0], b[0]),
        "a_identical_to_b": not differences(a[0], b[0]),
        "b_identical_across_rounds": not differences(b[0], b[-1]),
        "c_differences_from_b": differences(c[0], b[0]),
    }
    emit(report, args.output)


if __name__ == "__main__":
    main()
