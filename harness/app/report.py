"""What the commands tell a person: the closing results table of `membench evaluate` (stdout)
and the stage lines of `membench run` (stderr, one line per stage, terminal or not)."""

from __future__ import annotations

import sys
import time

from tabulate import tabulate

from harness.core.progress import task_label
from harness.core.results import ResultsFile, TaskEntry
from harness.model.pretrained import pretrained_source, resolve_pretrained
from leaderboard.render import fmt_metric


def status_text(entry: TaskEntry) -> str:
    """`ok`, or `skipped: <reason>` with the whole reason."""
    if entry.status == "ok":
        return "ok"
    return f"skipped: {entry.skip_reason or 'no reason given'}"


def headline_cells(entry: TaskEntry) -> list[str]:
    """[headline label and better direction, its value, its n] of an entry; empty cells when the
    entry was skipped or has no headline, `n/a` when the headline metric is missing."""
    if entry.status != "ok" or entry.headline is None:
        return ["", "", ""]
    metric = entry.headline_metric()
    label = f"{entry.headline.label} {entry.headline.direction()}"
    if metric is None:
        return [label, "n/a", ""]
    return [label, fmt_metric(metric, interval=True, whole=entry.headline.count),
            "" if metric.n is None else str(metric.n)]


def batch_size_text(run) -> str:
    """`batch size 16`, or `batch size auto (at most 256)`."""
    if run.batch_size == "auto" and run.max_batch_size:
        return f"batch size auto (at most {run.max_batch_size})"
    return f"batch size {run.batch_size}"


def results_table(results: ResultsFile) -> str:
    """The closing table of `membench evaluate`: a line naming the model and run settings, then one
    row per task: task, version, status, headline metric (with its better direction), value, n, the
    task's wall time in seconds and its peak resident memory (those of the run that computed it, when
    it came from the cache); below it, `skipped <task>: <reason>` per skipped task, the reason whole."""
    model, run = results.model, results.run
    settings = [model.kind, model.device, model.dtype, batch_size_text(run), f"seed {run.seed}"]
    if run.limit is not None:
        settings.append(f"limit {run.limit}")
    rows = [[entry.name, entry.version, entry.status, *headline_cells(entry),
             f"{entry.wall_time_s:.1f}" if entry.status == "ok" else "",
             f"{entry.peak_rss_bytes / 1e9:.2f}" if entry.status == "ok" and entry.peak_rss_bytes else ""]
            for entry in results.tasks]
    table = tabulate(rows, headers=["task", "version", "status", "headline", "value", "n", "time (s)",
                                    "peak RSS (GB)"], disable_numparse=True)
    reasons = [f"skipped {entry.name}: {entry.skip_reason or 'no reason given'}"
               for entry in results.tasks if entry.status != "ok"]
    return f"{model.name} ({', '.join(settings)})\n\n{table}" + ("\n\n" + "\n".join(reasons) if reasons else "")


def headline_line(entry: TaskEntry) -> str:
    """One task's outcome on one line: `<task>: <headline> <direction> <value>`, or why it was skipped."""
    label, value, _ = headline_cells(entry)
    if entry.status != "ok" or not label:
        return f"{entry.name}: {status_text(entry)}"
    return f"{entry.name}: {label} {value}"


def stage(message: str) -> None:
    """Print one stage of a long command, `membench: <message>`, on stderr, flushed at once, so that
    a log that is no terminal (CI, nohup, a pipe) shows the run as it goes."""
    print(f"membench: {message}", file=sys.stderr, flush=True)


def fetch_pretrained(model: str) -> None:
    """Fetch `pretrained:<name>` into the cache when it is not there yet (`membench evaluate`), between
    two stage lines: `fetch <model>: <what is downloaded>` and `fetch <model>: ready in N s`, as
    `membench run` reports its encoder. Nothing is printed for a cached one or any other model."""
    source = pretrained_source(model)
    if source is None or source.cached_path().exists():
        return
    stage(f"fetch {model}: downloading and verifying {source.describe()}")
    started = time.perf_counter()
    resolve_pretrained(model)
    stage(f"fetch {model}: ready in {time.perf_counter() - started:.0f} s")


def evaluated_message(name: str, results: ResultsFile, seconds: float) -> str:
    """The stage message of a finished evaluation: `evaluate <name>: done in N s`, then each task's
    headline on its own indented line."""
    lines = [f"evaluate {name}: done in {seconds:.0f} s"]
    lines += [f"    {headline_line(entry)}" for entry in results.tasks]
    return "\n".join(lines)


def task_started(task: str, model: str) -> None:
    """`membench: <task> · <model>: started` (`membench evaluate` where stderr is no terminal)."""
    stage(f"{task_label(task, model)}: started")


def task_ended(entry: TaskEntry, model: str, seconds: float) -> None:
    """`membench: <task> · <model>: done in N s: <headline> <direction> <value>`, or `skipped: <reason>`."""
    label, value, _ = headline_cells(entry)
    outcome = f"{label} {value}" if entry.status == "ok" and label else status_text(entry)
    stage(f"{task_label(entry.name, model)}: done in {seconds:.0f} s: {outcome}")
