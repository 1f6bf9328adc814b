"""A profile of `membench run` (the default job), and of the test command, before and after a change.

For each checkout given (this one, and with `--baseline DIR` another, e.g. a worktree of the
commit before a change, each with its own venv), on this machine, one after the other:

- the job: `membench run` in a fresh, empty cache (`MEMBENCH_CACHE` in a temporary folder), writing
  into a copy of the checkout's `submissions/` and a board in a temporary folder, so the checkout is
  left as it was. It runs pinned, as `membench run` always does (`harness.run.reproducible`), in a
  child process started with the pinned environment, so the job runs in that very process, beside
  a sampling thread: every `--interval` seconds it reads the main thread's Python stack and adds the
  time since its last reading to
    * the evaluation on the stack (the `spec` of `harness/run/runner.py:evaluate`; `job` outside one),
    * its stage, the innermost frame on the stack that a rule of `STAGES` names (load, data,
      training, near-verbatim, dataset inference, scoring, metrics, writing, board, ...; `task`
      for a task's own code outside those), unless a stage that encloses its callees came first,
    * every membench function on the stack (inclusive time) and the innermost frame (self time).
  The sampler holds the GIL for microseconds every `--interval` (10 ms): its cost is below the
  noise of a 10-minute job. What it reads is the time on the job's main thread, whatever that thread
  waits for (PyTorch's kernels, which release the GIL, included).
- the tests (`--pytest`): the README's `python -m pytest` in the checkout, its wall time, pytest's
  own figure and the slowest tests (`--junitxml`).

The record: per checkout, the evaluations' seconds (their sum is the job's evaluations, the figure
the README states), per evaluation the stages, the job's stages and hot functions, the control table's
verdict (exit status); with a baseline, the ratios after / before: the evaluations (all, and less the
stages this change added on top: `--added-stage`, e.g. near-verbatim) and pytest's seconds.

    python bench/bench_job.py --baseline ../base --baseline-python ../base/.venv/bin/python --pytest \\
        --output bench/results/bench_job.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ElementTree
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import add_output_flag, emit  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

# (stage, path fragment of the frame's file, function name or None for any). Walking a stack from its root,
# each frame a rule names sets the sample's stage, so the innermost wins (a task's evaluation between training
# epochs is scoring), except that nothing under a stage of `ENCLOSING` changes it (dataset inference and the
# near-verbatim search call metrics; loading calls no stage of its own). `task`: a task's own code.
STAGES = (
    ("verify weights", "harness/reference/shipped.py", None),
    ("fetch encoder", "harness/reference/pretrained.py", None),
    ("load", "harness/model/loading.py", "load"),
    ("load", "harness/run/runner.py", "load_auxiliary_models"),
    ("data", "harness/run/runner.py", "load_task_data"),
    ("cache lookup", "harness/run/runner.py", "cached_result"),
    ("writing", "harness/run/runner.py", "write_outputs"),
    ("writing", "harness/run/cache.py", None),
    ("training", "harness/training/", None),
    ("near-verbatim", "harness/scoring/constrained_beam.py", None),
    ("dataset inference", "harness/metrics/dataset_inference.py", None),
    ("dataset inference", "harness/metrics/dataset_report.py", None),
    ("scoring", "harness/scoring/", None),
    ("metrics", "harness/metrics/", None),
    ("board", "leaderboard/", None),
    ("controls", "harness/reference/controls.py", None),
    ("task", "tasks/", None),
)
ENCLOSING = frozenset({"verify weights", "fetch encoder", "load", "data", "cache lookup", "writing", "near-verbatim",
                       "dataset inference", "board", "controls"})
OWN = ("harness/", "tasks/", "leaderboard/")


def own_path(filename: str) -> str | None:
    """`harness/...`, `tasks/...` or `leaderboard/...` of a membench source file, None for any other."""
    path = filename.replace(os.sep, "/")
    for root in OWN:
        at = path.rfind("/" + root)
        if at >= 0 and "/site-packages/" not in path[:at]:
            return path[at + 1:]
    return None


def stage_of(frames: list[tuple[str, str]]) -> str:
    """The stage of a stack given root first as (file, function): `STAGES` walked from the root, the innermost
    frame a rule names, unless an enclosing stage (`ENCLOSING`) came first; `other` when no rule names one."""
    stage = "other"
    for filename, function in frames:
        path = filename.replace(os.sep, "/")
        if not own_path(path):
            continue
        named = next((name for name, fragment, wanted in STAGES
                      if fragment in path and (wanted is None or wanted == function)), None)
        if named is None or (named == "task" and stage != "other"):
            continue
        stage = named
        if stage in ENCLOSING:
            break
    return stage


class Sampler(threading.Thread):
    """Reads the main thread's stack every `interval` seconds (module docstring)."""

    def __init__(self, interval: float):
        super().__init__(daemon=True)
        self.interval, self.target = interval, threading.main_thread().ident
        self.stages: dict[str, Counter] = defaultdict(Counter)  # evaluation -> stage -> seconds
        self.inclusive, self.own_self, self.leaf = Counter(), Counter(), Counter()
        self.done = threading.Event()

    def run(self) -> None:
        last = time.perf_counter()
        while not self.done.wait(self.interval):
            now = time.perf_counter()
            frame = sys._current_frames().get(self.target)
            if frame is not None:
                self.add(frame, now - last)
            last = now

    def add(self, frame, seconds: float) -> None:
        stack, evaluation = [], "job"
        while frame is not None:
            code = frame.f_code
            stack.append((code.co_filename, code.co_name))
            if code.co_name == "evaluate" and code.co_filename.replace(os.sep, "/").endswith("harness/run/runner.py"):
                spec = frame.f_locals.get("spec")
                evaluation = getattr(spec, "name", None) or evaluation
            frame = frame.f_back
        stack.reverse()
        self.stages[evaluation][stage_of(stack)] += seconds
        seen = set()
        for filename, function in stack:
            path = own_path(filename)
            if path and (path, function) not in seen:
                seen.add((path, function))
                self.inclusive[f"{path}:{function}"] += seconds
        own = [f"{own_path(f)}:{n}" for f, n in stack if own_path(f)]
        if own:
            self.own_self[own[-1]] += seconds
        filename, function = stack[-1]
        self.leaf[f"{own_path(filename) or short_path(filename)}:{function}"] += seconds


def short_path(filename: str) -> str:
    """A library file's path from its package (`torch/nn/functional.py`)."""
    path = filename.replace(os.sep, "/")
    return path.split("/site-packages/", 1)[-1]


def rounded(counter: Counter, top: int | None = None) -> dict[str, float]:
    return {key: round(value, 2) for key, value in counter.most_common(top)}


def child(args: argparse.Namespace) -> int:
    """In the pinned child: the job in this process beside the sampler; the profile to `args.profile`."""
    from harness.app.cli import main

    sampler = Sampler(args.interval)
    sampler.start()
    started = time.perf_counter()
    status = main(["run", "--submissions", args.submissions, "--output", args.board])
    wall = time.perf_counter() - started
    sampler.done.set()
    sampler.join()
    profile = {"exit_status": status, "wall_s": round(wall, 1),
               "stages": {name: rounded(stages) for name, stages in sampler.stages.items()},
               "inclusive": rounded(sampler.inclusive, 40), "self": rounded(sampler.own_self, 25),
               "leaf": rounded(sampler.leaf, 25)}
    Path(args.profile).write_text(json.dumps(profile, indent=1))
    return 0


def pinned_environment() -> dict[str, str]:
    """The environment `membench run` pins itself to (`harness.run.reproducible`), as a child needs it
    from its start: the libraries read it once, when they load."""
    from harness.run.reproducible import CHILD_MARK, pinned_environment as pins

    return {**pins(), CHILD_MARK: "1"}


EVALUATE_DONE = re.compile(r"^membench: evaluate (\S+): done in (\d+) s", re.M)


def profile_job(checkout: Path, python: str, interval: float) -> dict:
    """The job of `checkout` run by `python` in a fresh cache, profiled (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="bench-job-") as scratch:
        scratch = Path(scratch)
        submissions = scratch / "submissions"
        shutil.copytree(checkout / "submissions", submissions)
        env = {**os.environ, **pinned_environment(), "MEMBENCH_CACHE": str(scratch / "cache"),
               "PYTHONPATH": str(checkout)}
        command = [python, str(Path(__file__).resolve()), "--child", "--submissions", str(submissions),
                   "--board", str(scratch / "LEADERBOARD.md"), "--profile", str(scratch / "profile.json"),
                   "--interval", str(interval)]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
        wall = time.perf_counter() - started
        (scratch / "job.log").write_text(done.stderr)
        if done.returncode != 0 or not (scratch / "profile.json").exists():
            sys.stderr.write(done.stderr[-4000:])
            raise SystemExit(f"the job of {checkout} failed (exit {done.returncode})")
        profile = json.loads((scratch / "profile.json").read_text())
        stages = profile.pop("stages")
        evaluations = {name: round(sum(parts.values()), 1) for name, parts in stages.items() if name != "job"}
        job_stages = Counter()
        for parts in stages.values():
            job_stages.update(parts)
        passed = "control failed" not in done.stderr
        return {"checkout": str(checkout), "commit": git_commit(checkout), "wall_s": round(wall, 1),
                "job_exit_status": profile["exit_status"], "controls_ok": passed,
                "evaluations_s": round(sum(evaluations.values()), 1),
                "evaluation_lines_s": sum(int(s) for _, s in EVALUATE_DONE.findall(done.stderr)),
                "evaluations": evaluations, "stages_s": rounded(job_stages),
                "stages_by_evaluation": stages, "hot_inclusive_s": profile["inclusive"],
                "hot_self_s": profile["self"], "hot_leaf_s": profile["leaf"],
                "kept": sum(line.startswith("kept ") for line in done.stdout.splitlines()),
                "written": [Path(line).name for line in done.stdout.splitlines() if line.endswith(".json")]}


def time_pytest(checkout: Path, python: str) -> dict:
    """The README's test command's pytest in `checkout` (its own options: pyproject's addopts): the wall time,
    pytest's own seconds and counts (its JUnit XML report), the slowest tests."""
    with tempfile.TemporaryDirectory(prefix="bench-pytest-") as scratch:
        report = Path(scratch) / "junit.xml"
        env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "MEMBENCH_CACHE")}
        started = time.perf_counter()
        done = subprocess.run([python, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={report}"],
                              cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wall = time.perf_counter() - started
        if not report.exists():
            sys.stderr.write(done.stdout[-4000:])
            raise SystemExit(f"the tests of {checkout} wrote no report (exit {done.returncode})")
        suite = next(ElementTree.parse(report).getroot().iter("testsuite"))
        tests = {f"{case.get('classname')}::{case.get('name')}": float(case.get("time") or 0)
                 for case in suite.iter("testcase")}
    counts = {key: int(suite.get(key) or 0) for key in ("tests", "failures", "errors", "skipped")}
    return {"checkout": str(checkout), "commit": git_commit(checkout), "exit_status": done.returncode,
            "counts": counts, "pytest_s": round(float(suite.get("time")), 1), "wall_s": round(wall, 1),
            "slowest_s": {name: round(t, 2) for name, t in sorted(tests.items(), key=lambda kv: -kv[1])[:25]},
            "per_test_s": tests}


def git_commit(checkout: Path) -> str | None:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=checkout,
                           capture_output=True, text=True).stdout.strip()
    return (done.stdout.strip() + ("+changes" if dirty else "")) if done.returncode == 0 else None


def compare(before: dict, after: dict, added: list[str]) -> dict:
    """after / before of the job's evaluations (all, and less the stages in `added`) and of pytest."""
    out = {}
    if "job" in before and "job" in after:
        extra = sum(after["job"]["stages_s"].get(stage, 0.0) - before["job"]["stages_s"].get(stage, 0.0)
                    for stage in added)
        out["evaluations"] = round(after["job"]["evaluations_s"] / before["job"]["evaluations_s"], 3)
        out["evaluations_less_added"] = round((after["job"]["evaluations_s"] - extra) / before["job"]["evaluations_s"], 3)
        out["added_stages_s"] = round(extra, 1)
    if "pytest" in before and "pytest" in after and before["pytest"]["pytest_s"] and after["pytest"]["pytest_s"]:
        old, new = before["pytest"]["per_test_s"], after["pytest"]["per_test_s"]
        new_tests = sum(t for name, t in new.items() if name not in old)
        out["pytest"] = round(after["pytest"]["pytest_s"] / before["pytest"]["pytest_s"], 3)
        out["pytest_less_new_tests"] = round((after["pytest"]["pytest_s"] - new_tests) / before["pytest"]["pytest_s"], 3)
        out["new_tests_s"] = round(new_tests, 1)
    return out


def measure(checkout: Path, python: str, args: argparse.Namespace) -> dict:
    out = {}
    if not args.no_job:
        print(f"bench_job: the job of {checkout} ...", file=sys.stderr, flush=True)
        out["job"] = profile_job(checkout, python, args.interval)
    if args.pytest:
        print(f"bench_job: the tests of {checkout} ...", file=sys.stderr, flush=True)
        out["pytest"] = time_pytest(checkout, python)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="a checkout to measure first (e.g. a worktree of main)")
    parser.add_argument("--baseline-python", default=None, help="its venv's python (default: this python)")
    parser.add_argument("--pytest", action="store_true", help="also time the test command")
    parser.add_argument("--no-job", action="store_true", help="time only the tests")
    parser.add_argument("--added-stage", action="append", default=["near-verbatim"],
                        help="a stage this change adds on top, left out of evaluations_less_added")
    parser.add_argument("--interval", type=float, default=0.01, help="seconds between the sampler's readings")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--submissions", help=argparse.SUPPRESS)
    parser.add_argument("--board", help=argparse.SUPPRESS)
    parser.add_argument("--profile", help=argparse.SUPPRESS)
    add_output_flag(parser)
    args = parser.parse_args()
    if args.child:
        return child(args)
    report = {}
    if args.baseline:
        report["before"] = measure(args.baseline.resolve(), args.baseline_python or sys.executable, args)
        kept_so_far(report, args.output)
    report["after" if args.baseline else "this"] = measure(REPO, sys.executable, args)
    if args.baseline:
        report["ratios"] = compare(report["before"], report["after"], args.added_stage)
    for side in ("before", "after", "this"):
        if "pytest" in report.get(side, {}):
            report[side]["pytest"].pop("per_test_s")
    emit(report, args.output)
    return 0


def kept_so_far(report: dict, output: str | None) -> None:
    """The measurements so far, beside the record (`<output>.partial.json`): an hour's work is not lost to a
    failure later."""
    if output:
        Path(output).with_suffix(".partial.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    raise SystemExit(main())
