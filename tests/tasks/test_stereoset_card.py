"""The stereoset card states only what reproduces: the known-truth controls table, the reference
checkpoints' table (LMS / SS / ICAT, domain all) and the figures the prose gives of them equal, at
the card's rounding, the committed results files. Not checked here: the paper's numbers, the pro
twin on the other half of the targets and gemma-3-270m under the official recipe (no committed
file), the former builds and MLM experiments of issue 18, and the agreement table (a quick build)."""

from __future__ import annotations

import re

from tests.helpers.committed import newest_committed, read_card, same

CARD, TEXT, VERSION = read_card("stereoset")

ENTRIES = newest_committed("stereoset", VERSION)


def scores(model: str) -> list[float]:
    """LMS, SS, ICAT of the model over every domain."""
    values = {m.name: m.value for m in ENTRIES[model].metrics if m.tags == {"domain": "all"}}
    return [values["lms"], values["ss"], values["icat"]]


def table_after(marker: str) -> list[list[str]]:
    """The body rows of the first markdown table after the line holding `marker`."""
    lines = CARD.splitlines()
    start = next(i for i, line in enumerate(lines) if marker in line)
    first = next(i for i in range(start, len(lines)) if lines[i].startswith("|"))
    rows = []
    for line in lines[first + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def test_the_controls_table_is_the_committed_one():
    rows = table_after("## Controls with known truth")
    assert len(rows) == 4
    for label, *cells in rows:
        if "--targets second" in label:
            continue  # the pro twin on the targets it was not taught: no committed file
        model = label.split()[0]
        assert ENTRIES[model].config["targets"] == ("all" if "every target" in label else "first"), model
        for text, value in zip(cells, scores(model), strict=True):
            assert same(text, value), (model, text, value)


def test_the_reference_checkpoints_table_is_the_committed_one():
    rows = table_after("Measured here with v2")
    assert len(rows) == 4
    checked = 0
    for label, *cells in rows:
        names = label.split(" / ")
        if " " in names[0]:  # "xsum-gpt2 e00 / e01 / e30": a family and its checkpoints
            family, first = names[0].split(" ")
            names = [f"{family}-{suffix}" for suffix in [first] + names[1:]]
        columns = [cell.split(" / ") for cell in cells]
        for i, model in enumerate(names):
            assert ENTRIES[model].config["targets"] == "all", model
            for column, value in zip(columns, scores(model), strict=True):
                assert same(column[i], value), (model, column[i], value)
            checked += 1
    assert checked == 8


def test_the_figures_in_the_prose_are_the_committed_ones():
    ss = re.search(r"\(`xsum-gpt2-e30`, SS ([\d.]+)\)", TEXT).group(1)
    assert same(ss, scores("xsum-gpt2-e30")[1]), ss
    lms_low, lms_high, ss_low, ss_high = re.search(
        r"Untrained models sit at chance \(LMS (\d+)–(\d+), SS (\d+)–(\d+)\)", TEXT).groups()
    untrained = [scores(model) for model in ENTRIES if model.endswith(("-e00", "-untrained-seed0"))]
    assert len(untrained) == 3
    lms, ss = [round(s[0]) for s in untrained], [round(s[1]) for s in untrained]
    assert (int(lms_low), int(lms_high), int(ss_low), int(ss_high)) == (min(lms), max(lms), min(ss), max(ss)), untrained
