"""Speed-up of data-parallel evaluation (`harness.scoring.distributed`) on CPU, measured in one run.

`membench evaluate --tasks mink_membership` (all 400 reference texts, all prefix lengths,
`--no-cache`) on the final (30-epoch) reference GPT-2, each configuration a fresh command:
  (a) 1 process, 2 threads        what a plain `membench evaluate` does on a 2-core machine
  (b) 1 process, 1 thread         the baseline with the threads per process of (c)
  (c) 2 processes x 1 thread      `accelerate launch --multi_gpu --num_processes 2 ... -m harness evaluate`
Rounds interleave the configurations (a slow spell of the machine hits all alike); the fastest
round of each is reported, as the command's wall time (start-up, data and model loading
included) and as the task's own `wall_time_s` from the results file (scoring plus the metrics,
which every process computes). The metrics and the samples of (c) must equal (b)'s exactly (same
threads per process); whether (a)'s equal too is reported.

    python bench/bench_parallel.py [--repeats 2] [--threads 2] [--processes 2]
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

from harness.reference.build import BuildConfig, build, checkpoint_folders
from harness.scoring.distributed import LAUNCHER_VARIABLES

ROOT = Path(__file__).resolve().parents[1]
TASK = "mink_membership"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_once(processes: int, threads: int, model: Path, settings: dict[str, str], out: Path) -> dict:
    """One `membench evaluate` (under accelerate launch when processes > 1): wall time, the task's
    wall time, its metrics and its samples."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    for name in LAUNCHER_VARIABLES:
        env.pop(name, None)
    launcher = [sys.executable]
    if processes > 1:
        launcher += ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes),
                     "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                     "--main_process_port", str(free_port())]
    flags = [part for key, value in settings.items() for part in (f"--{key.replace('_', '-')}", value)]
    command = launcher + ["-m", "harness", "evaluate", "--model", str(model), "--tasks", TASK, "--device", "cpu",
                          "--no-cache", "--log-samples", "--output-path", str(out), *flags]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    [results] = out.glob("*.json")
    [samples] = out.glob("*.samples.jsonl")
    data = json.loads(results.read_text())
    [entry] = data["tasks"]
    return {"seconds": seconds, "task_seconds": entry["wall_time_s"], "metrics": entry["metrics"],
            "samples": samples.read_bytes(), "processes": data["run"].get("processes", 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="threads of the single process in (a)")
    parser.add_argument("--processes", type=int, default=2, help="processes (1 thread each) in (c)")
    args = parser.parse_args()
    config = BuildConfig()
    model = checkpoint_folders(build(config))[-1]
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
    same = lambda x, y: x[0]["metrics"] == y[0]["metrics"] and x[0]["samples"] == y[0]["samples"]  # noqa: E731
    assert same(c, b), "the data-parallel run's metrics or samples differ from one process's"
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
        "c_identical_to_b": True,
        "a_identical_to_b": same(a, b),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
