"""Results files made by hand for the board's tests, and readers of the markdown tables they render."""

from __future__ import annotations

import html
import re
from pathlib import Path

from harness.core.results import (
    Environment,
    HarnessInfo,
    Metric,
    ModelInfo,
    ResultsFile,
    RunSettings,
    TaskEntry,
    write_results,
)
from harness.run.runner import results_stem
from leaderboard.collect import newest_entries, read_submissions
from leaderboard.render import task_table
from tasks.mink_membership.task import MinkMembership

TASK = MinkMembership.NAME
HEADLINE = MinkMembership.HEADLINE
LENGTHS = (32, 64, 128)
SHORT = "mink "  # the overview names a task by the first word of its name
ID_A, ID_B, ID_C = "a" * 64, "b" * 64, "c" * 64


def make_results(name: str = "model-a", identity: str = ID_A, created_at: str = "2024-01-01T00:00:00+00:00",
                 auc: float = 0.6, task: str = TASK, config_hash: str = "0123456789abcdef",
                 status: str = "ok", skip_reason: str | None = None, limit: int | None = None,
                 details: dict | None = None, changed_settings: list[str] | None = None,
                 records: bool = True) -> ResultsFile:
    """A valid results file with one mink-style task entry; the headline AUC (length 128) is `auc`,
    the other lengths are auc - 0.01 * (their index from the end). `details`: the model's (a
    reference control's `reference_recipe`, a twin's `random_weights`); `changed_settings`: the entry's;
    `records`: a finished entry names records (a digest; the board reads no sidecar), else it is unverified."""
    metrics = []
    if status == "ok":
        for i, length in enumerate(LENGTHS):
            value = round(auc - 0.01 * (len(LENGTHS) - 1 - i), 6)
            tags = {"score": "min_k_20", "length": str(length)}
            metrics += [Metric(name="auc", value=value, ci_low=value - 0.05, ci_high=value + 0.05, n=200, tags=tags),
                        Metric(name="tpr@0.1fpr", value=0.25, n=200, tags=tags)]
    entry = TaskEntry(name=task, version=1, status=status, skip_reason=skip_reason, config={"lengths": list(LENGTHS)},
                      config_hash=config_hash, changed_settings=changed_settings, seed=0, metrics=metrics,
                      counts={"texts": 200} if metrics else {},
                      headline=HEADLINE if status == "ok" else None, wall_time_s=1.5,
                      records_sha256="e" * 64 if records and status == "ok" else None,
                      report_version=1 if records and status == "ok" else None)
    return ResultsFile(
        schema_version=1, created_at=created_at,
        harness=HarnessInfo(version="0.1.0", git_commit=None),
        model=ModelInfo(name=name, source=f"./{name}", revision=None, identity=identity,
                        identity_kind="weights-sha256", kind="causal-lm", dtype="float32", device="cpu",
                        details=details or {}),
        environment=Environment(python="3.12.0", torch="2.13.0", transformers="5.0.0", platform="linux"),
        run=RunSettings(batch_size=16, limit=limit, seed=0),
        tasks=[entry], records_file="records.records.json.gz" if entry.records_sha256 else None,
    )


RECIPE = {"reference_recipe": {"build": "xsum-gpt2", "digest": "9" * 64}}  # a reference checkpoint's details


def twin_of(identity: str, seed: int = 0) -> dict:
    """The details of a checkpoint's seeded untrained twin (`membench evaluate --random-weights`)."""
    return {"random_weights": {"seed": seed, "of_weights_sha256": identity, "init": "constructor"}}


def submit(folder: Path, results: ResultsFile, file_name: str | None = None) -> Path:
    path = folder / (file_name or f"{results_stem(results)}.json")
    write_results(results, path)
    return path


# ---------------------------------------------------------------- markdown table helpers


def split_cells(row: str) -> list[str]:
    """Cells of a markdown table row, split on pipes not escaped by a backslash."""
    cells, current, i = [], "", 0
    while i < len(row):
        if row[i] == "\\" and i + 1 < len(row):
            current += row[i:i + 2]
            i += 2
            continue
        if row[i] == "|":
            cells.append(current)
            current = ""
        else:
            current += row[i]
        i += 1
    cells.append(current)
    return [c.strip() for c in cells[1:-1]]  # a github row starts and ends with a pipe


def unescaped_pipes(row: str) -> int:
    return len(split_cells(row)) + 1


def section(markdown: str, heading: str) -> str:
    """The text after `heading` up to the next heading of the same level."""
    parts = re.split(r"^(## .*)$", markdown, flags=re.M)
    index = parts.index(heading)
    return parts[index + 1]


def table(text: str) -> list[str]:
    """The lines of the first markdown table in `text` (header, rule, rows)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def records(lines: list[str]) -> list[dict[str, str]]:
    header = split_cells(lines[0])
    return [dict(zip(header, split_cells(line))) for line in lines[2:]]


def full_table(folder: Path) -> str:
    """The markdown table of every metric of TASK (on the web board, not in LEADERBOARD.md)."""
    return task_table(TASK, newest_entries(read_submissions(folder)))


def unescape_markdown(cell: str) -> str:
    return html.unescape(re.sub(r"\\(.)", r"\1", cell))


# ---------------------------------------------------------------- results files
