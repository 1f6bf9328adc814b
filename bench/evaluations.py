"""What the benches that score checkpoints share: running this bench pinned, and one pinned
`membench evaluate` of a checkpoint in a child process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def rerun_pinned() -> int | None:
    """None when this process runs pinned (the reference numerics, `harness.run.reproducible.run_pinned`);
    otherwise this bench again, with its arguments, in a pinned child, and the child's exit status."""
    from harness.run.reproducible import run_pinned

    return run_pinned([sys.executable, *sys.argv])


def evaluate_pinned(model: str | Path, tasks: str, flags: list[str], out: Path) -> tuple[dict[str, dict], float]:
    """`membench evaluate --reproducible --no-cache` of `model` on `tasks` (comma-separated) with `flags`,
    into the new folder `out`: its task entries by name, and its wall time in seconds. Its stdout (the
    summary table) is dropped: a bench prints its report there."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness", "evaluate", "--model", str(model), "--tasks", tasks, *flags,
                    "--reproducible", "--no-cache", "--output-path", str(out)], cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL)
    [path] = out.glob("*.json")
    return {t["name"]: t for t in json.loads(path.read_text())["tasks"]}, time.perf_counter() - started


def metric_value(entry: dict, name: str, **tags: str) -> float | None:
    """The value of the metric `name` with exactly `tags` in a results file's task entry, to 4 decimals;
    None where the entry has none or its value is undefined."""
    found = [m["value"] for m in entry["metrics"] if m["name"] == name and m["tags"] == tags]
    return None if not found or found[0] is None else round(found[0], 4)
