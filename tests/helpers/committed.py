"""What a card test reads: the committed results files its figures are checked against, and the card's
tables, sentences and rounding (`tests/tasks/test_*_card.py`)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from harness.core.results import ResultsFile, TaskEntry, load_results

ROOT = Path(__file__).resolve().parents[2]


def committed_files() -> list[ResultsFile]:
    """Every results file in `submissions/`, in file-name order: read and validated once per test session
    (0.6 s for the 47 files, which the card tests read about 30 times), so a caller must not change them."""
    return list(_committed_files())


@cache
def _committed_files() -> tuple[ResultsFile, ...]:
    return tuple(load_results(path) for path in sorted((ROOT / "submissions").glob("*.json")))


def newest_committed(task: str, version: int) -> dict[str, TaskEntry]:
    """Model name (the reference prefix `membench-ref/` dropped) -> the newest finished entry of `task` at
    `version` in `submissions/`, of full runs only (no `--limit`)."""
    found: dict[str, tuple[str, TaskEntry]] = {}
    for results in committed_files():
        entry = results.task(task)
        if entry is None or entry.status != "ok" or entry.version != version or results.run.limit is not None:
            continue
        name = results.model.name.removeprefix("membench-ref/")
        if name not in found or results.created_at > found[name][0]:
            found[name] = (results.created_at, entry)
    return {name: entry for name, (_, entry) in found.items()}


def committed_run(task: str, entry: TaskEntry) -> ResultsFile:
    """The committed results file that holds `entry` (of `task`, e.g. one of `newest_committed`'s): its
    run's date, machine and settings."""
    for results in committed_files():
        if results.task(task) == entry:
            return results
    raise AssertionError(f"no committed file holds this {task} entry")


def measured_beside_card(task: str) -> ResultsFile:
    """The one results file committed beside a task's card (`tasks/<task>/measured/`): a run the card
    cites that is not the board's, made by the command the card gives."""
    (path,) = (ROOT / "tasks" / task / "measured").glob("*.json")
    return load_results(path)


def flat(text: str) -> str:
    """`text` with every run of whitespace (its line breaks included) as one space: prose to search."""
    return " ".join(text.split())


def read_card(task: str) -> tuple[str, str, int]:
    """A task card: its markdown, its prose `flat`, and the version its first line names."""
    card = (ROOT / "tasks" / task / "README.md").read_text(encoding="utf-8")
    return card, flat(card), int(re.search(r"\(version (\d+)\)", card).group(1))


def same(text: str, number: float) -> bool:
    """`text` (a figure as a card writes it: thousands commas, a Unicode minus, bold markers allowed) is
    `number` rounded to as many decimals as `text` shows; in scientific notation (6.2e-5), to as many
    as its mantissa shows."""
    text = text.strip("* ").replace(",", "").replace("−", "-")
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    if exponent:  # half a unit of the mantissa's last digit, at the figure's scale
        return abs(float(text) - number) <= 0.5 * 10 ** (int(exponent) - decimals) * (1 + 1e-9)
    return abs(float(text) - number) <= 0.5 * 10 ** -decimals + 1e-9


def card_table(card: str, first_header: str) -> tuple[list[str], list[list[str]]]:
    """The header cells and row cells of the markdown table in `card` whose header starts with `first_header`."""
    lines = card.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return [cell.strip() for cell in lines[start].strip().strip("|").split("|")], rows


def sentence(text: str, pattern: str) -> tuple[str, ...]:
    """The groups of `pattern` in a card's `text`; a failure naming the pattern when the card no longer says it."""
    found = re.search(pattern, text)
    assert found, f"the card no longer says: {pattern}"
    return found.groups()
