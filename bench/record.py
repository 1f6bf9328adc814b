"""A bench's report kept as a record: its numbers with the date, the machine and the command that
measured them, written by `--output FILE` of every bench (committed as `bench/results/<bench>.json`).

The docs and task cards cite speed figures from these records only, and `tests/unit/test_bench_records.py`
checks each cited figure against its record, so a figure cannot outlive the measurement it came from.
Measure again with the record's `command` (on the machine it names: speed depends on it) and commit
the new record with the pages that cite it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (/proc/cpuinfo), else the platform's."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """What the speed depends on: the CPU, the cores this process may use, PyTorch's kernels and version."""
    import torch

    return {"cpu": cpu_model(), "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else
            os.cpu_count(), "cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__,
            "python": platform.python_version()}


def add_output_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", metavar="FILE",
                        help="also write the report, with the date, machine and command, to this JSON file "
                             "(the docs cite bench/results/<bench>.json)")


def emit(report: dict, output: str | None) -> None:
    """Print the report as JSON; with `output`, also write the record there (whole or not at all)."""
    print(json.dumps(report, indent=2))
    if output is None:
        return
    script = Path(sys.argv[0]).name
    record = {"bench": script, "command": " ".join(["python", f"bench/{script}", *sys.argv[1:]]),
              "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(), "machine": machine(),
              "report": report}
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record, indent=2) + "\n")
    partial.replace(path)


def load(bench: str) -> dict:
    """The committed record of `bench` (its script's name without `.py`)."""
    return json.loads((RESULTS / f"{bench}.json").read_text())
