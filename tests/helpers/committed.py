"""The committed results files a card's figures are checked against (`tests/tasks/test_*_card.py`)."""

from __future__ import annotations

from pathlib import Path

from harness.core.results import TaskEntry, load_results

ROOT = Path(__file__).resolve().parents[2]


def newest_committed(task: str, version: int) -> dict[str, TaskEntry]:
    """Model name (the reference prefix `membench-ref/` dropped) -> the newest finished entry of `task` at
    `version` in `submissions/`, of full runs only (no `--limit`)."""
    found: dict[str, tuple[str, TaskEntry]] = {}
    for path in sorted((ROOT / "submissions").glob("*.json")):
        results = load_results(path)
        entry = results.task(task)
        if entry is None or entry.status != "ok" or entry.version != version or results.run.limit is not None:
            continue
        name = results.model.name.removeprefix("membench-ref/")
        if name not in found or results.created_at > found[name][0]:
            found[name] = (results.created_at, entry)
    return {name: entry for name, (_, entry) in found.items()}


def same(text: str, number: float) -> bool:
    """`text` (a figure as a card writes it: thousands commas, a Unicode minus, bold markers allowed) is
    `number` rounded to as many decimals as `text` shows."""
    text = text.strip("* ").replace(",", "").replace("−", "-")
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(float(text) - number) <= 0.5 * 10 ** -decimals + 1e-9
