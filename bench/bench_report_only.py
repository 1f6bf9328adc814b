"""A change to reporting only, measured: a results file's numbers computed again from its records under a
changed report-only setting (`Task.REPORT_ONLY`), without a model pass, against the model pass it replaces.

Usage: python bench/bench_report_only.py FILE --task mink_membership --set di_penalty=1.0 [--output F]

For the task's entry in FILE (which must carry records), it times three things on this machine:
- the report as the file has it (`Task.report` of the sidecar's records), checked bit-identical to the file;
- the report under the changed setting, and which metrics it moved;
- reading and checking the sidecar.
Beside them it puts the scoring pass the file records (`wall_time_s`: the model pass, with its report) that
a one-stage task ran again for the same change. Run it pinned (`membench run`'s environment), as
`membench verify` runs, so that the report's BLAS sums are the file's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.app.registry import discover  # noqa: E402
from harness.app.verify import first_difference, recompute  # noqa: E402
from harness.core.records import check_sidecar, read_sidecar  # noqa: E402
from harness.core.results import load_results  # noqa: E402
from harness.core.task import parse_settings  # noqa: E402
from record import add_output_flag, emit  # noqa: E402


def metric_key(metric) -> str:
    tags = ",".join(f"{k}={v}" for k, v in sorted(metric.tags.items()))
    return f"{metric.name}{{{tags}}}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--task", default="mink_membership")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="NAME=VALUE",
                        help="a report-only setting to change (repeatable)")
    add_output_flag(parser)
    args = parser.parse_args()
    registry = discover()
    task = registry[args.task]()
    changes = dict(item.split("=", 1) for item in args.settings)
    not_report_only = sorted(set(changes) - task.REPORT_ONLY)
    if not_report_only:
        raise SystemExit(f"{not_report_only[0]} is not a report-only setting of {args.task}")

    results = load_results(args.file)
    entry = results.task(args.task)
    started = time.perf_counter()
    payload = read_sidecar(args.file.parent / results.records_file)
    check_sidecar(payload, str(args.file), results.model.identity, {entry.name: (entry.version, entry.config_hash)})
    read_s = time.perf_counter() - started

    started = time.perf_counter()
    done = recompute(args.file, registry)
    as_is_s = time.perf_counter() - started
    identical = first_difference(entry, done.reports[args.task]) is None

    records = payload["tasks"][args.task]["records"]
    config = task.Config.model_validate({**entry.config, **parse_settings([type(task)], changes)})
    started = time.perf_counter()
    changed = task.report(records, config, entry.seed)
    changed_s = time.perf_counter() - started
    before = {metric_key(m): m.model_dump() for m in entry.metrics}
    after = {metric_key(m): m.model_dump() for m in changed.metrics}
    moved = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
    report = {
        "file": args.file.name, "model": results.model.name, "task": args.task, "changed": changes,
        "records_bytes": (args.file.parent / results.records_file).stat().st_size,
        "seconds": {"read_and_check_sidecar": round(read_s, 3), "report_as_is": round(as_is_s, 3),
                    "report_changed": round(changed_s, 3), "model_pass_in_file": entry.wall_time_s},
        "speedup_vs_model_pass": round(entry.wall_time_s / (read_s + changed_s), 1),
        "as_is_identical_to_file": identical,
        "metrics": len(before), "metrics_moved": len(moved),
        "moved_names": sorted({k.split("{")[0] for k in moved}),
    }
    emit(report, args.output)


if __name__ == "__main__":
    main()
