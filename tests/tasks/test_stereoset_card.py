"""The stereoset card states only what reproduces: the known-truth controls table (the pro twin on the
other half of the targets from the results file committed beside the card, `measured/`), the
reference checkpoints' tables (LMS / SS / ICAT, domain all; the T5s' beside the seed's), the figures
the prose gives of them and the examples and targets of each half equal, at the card's rounding, the
committed results files.
Not checked here: the paper's numbers, and the agreement table (tests/unit/test_bench_records.py)."""

from __future__ import annotations

import re

from harness.core.results import TaskEntry
from tests.helpers.committed import (ROOT, committed_run, measured_beside_card, newest_committed, read_card, same,
                                    sentence)

CARD, TEXT, VERSION = read_card("stereoset")

ENTRIES = newest_committed("stereoset", VERSION)
PRO = "stereo-gpt2-pro"


def other_half() -> TaskEntry:
    """The pro twin on the targets it was not taught (`--targets second`): the results file committed
    beside the card (`measured/`, made by the command the card gives), of the committed twin's weights."""
    from leaderboard.collect import read_submissions

    results = measured_beside_card("stereoset")
    (committed,) = [r for _, r in read_submissions(ROOT / "submissions") if r.model.name == f"membench-ref/{PRO}"]
    assert results.model.name == committed.model.name and results.model.identity == committed.model.identity
    assert results.run.limit is None
    entry = results.task("stereoset")
    assert entry.status == "ok" and entry.version == VERSION and entry.config["targets"] == "second"
    assert {k: v for k, v in entry.config.items() if k != "targets"} == {
        k: v for k, v in ENTRIES[PRO].config.items() if k != "targets"}
    return entry


def scores(model: str | TaskEntry) -> list[float]:
    """LMS, SS, ICAT of the model (or of a results file's entry) over every domain."""
    entry = ENTRIES[model] if isinstance(model, str) else model
    values = {m.name: m.value for m in entry.metrics if m.tags == {"domain": "all"}}
    return [values["lms"], values["ss"], values["icat"]]


def targets(entry: TaskEntry) -> int:
    (found,) = [m.value for m in entry.metrics if m.name == "targets" and m.tags == {"domain": "all"}]
    return int(found)


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
        model = label.split()[0]
        if "--targets second" in label:  # the pro twin on the targets it was not taught: `measured/`
            assert model == PRO
            wanted = scores(other_half())
        else:
            assert ENTRIES[model].config["targets"] == ("all" if "every target" in label else "first"), model
            wanted = scores(model)
        for text, value in zip(cells, wanted, strict=True):
            assert same(text, value), (model, text, value)


def test_the_reference_checkpoints_table_is_the_committed_one():
    rows = table_after("Measured here with v2")
    assert len(rows) == 3
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
    assert checked == 6


def test_the_reference_t5s_row_is_the_committed_one():
    """"`t5-ref` → `t5-ref-sparse70` | 52.6 → 38.6 | ...": the dense and the sparse reference T5 (every target),
    from the files of the day and machine the section names (the seed's rows are its Table 6, not checked)."""
    (day,) = sentence(TEXT, r"the committed files of `membench run`, (\d{4}-\d\d-\d\d), 2-core AMD EPYC, AVX2\)")
    (row,) = [cells for label, *cells in table_after("## Sparse against dense") if label.startswith("`t5-ref`")]
    models = ("t5-ref", "t5-ref-sparse70")
    for model in models:
        run = committed_run("stereoset", ENTRIES[model])
        assert run.created_at.date().isoformat() == day and run.environment.cpu_capability == "AVX2", model
        assert ENTRIES[model].config["targets"] == "all", model
    for cell, dense, sparse in zip(row, scores(models[0]), scores(models[1]), strict=True):
        dense_text, sparse_text = cell.split(" → ")
        assert same(dense_text, dense) and same(sparse_text, sparse), (cell, dense, sparse)


def test_the_figures_in_the_prose_are_the_committed_ones():
    ss = re.search(r"\(`xsum-gpt2-e30`, SS ([\d.]+)\)", TEXT).group(1)
    assert same(ss, scores("xsum-gpt2-e30")[1]), ss
    lms_low, lms_high, ss_low, ss_high = re.search(
        r"Untrained models sit at chance \(LMS (\d+)–(\d+), SS (\d+)–(\d+)\)", TEXT).groups()
    untrained = [scores(model) for model in ENTRIES if model.endswith(("-e00", "-untrained-seed0"))]
    assert len(untrained) == 3
    lms, ss = [round(s[0]) for s in untrained], [round(s[1]) for s in untrained]
    assert (int(lms_low), int(lms_high), int(ss_low), int(ss_high)) == (min(lms), max(lms), min(ss), max(ss)), untrained


def test_the_twins_figures_in_the_prose_are_the_committed_ones():
    (ss,) = sentence(TEXT, r"leans the stereotype way on the targets it was not taught \(SS ([\d.]+)\)")
    assert same(ss, scores(other_half())[1]), ss
    pro, anti = sentence(TEXT, r"LMS rises to ([\d.]+) and ([\d.]+) on the taught targets")
    for text, model in ((pro, PRO), (anti, "stereo-gpt2-anti")):
        assert same(text, scores(model)[0]), (model, text)


def test_the_halves_of_the_targets_are_the_committed_runs():
    """"the 1st, 3rd, ... in the first half (40 targets, 1,079 examples)": what the twin's runs on each
    half counted (fixed data: the committed runs are exact counts, not measurements)."""
    first_targets, first_examples, second_targets, second_examples = sentence(
        TEXT, r"in the first half \((\d+) targets, ([\d,]+) examples\), .*? in the second \((\d+) targets, "
              r"([\d,]+) examples\)")
    for (n_targets, n_examples), entry in (((first_targets, first_examples), ENTRIES[PRO]),
                                          ((second_targets, second_examples), other_half())):
        assert int(n_targets) == targets(entry), (n_targets, targets(entry))
        assert int(n_examples.replace(",", "")) == entry.counts["examples"], (n_examples, entry.counts)
    (taught,) = sentence(TEXT, r"on opposite sides of the same ([\d,]+) examples")
    assert int(taught.replace(",", "")) == ENTRIES[PRO].counts["examples"], taught
