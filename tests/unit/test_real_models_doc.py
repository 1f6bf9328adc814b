"""docs/real-models.md states only what its results files record: every row of its table of the
committed real rows ("## The committed real rows") is the newest committed full-run entry of its model
and task in `submissions/`: its time, its peak memory, every figure of its headline cell (each mapped
to the metric it names, `PHRASES`), the settings it marks as changed (‡), and the table has a row for
every task of every real model's committed file (but those named in `OMITTED`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.core.results import Metric, TaskEntry
from tests.helpers.committed import committed_files, same

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "real-models.md").read_text(encoding="utf-8")
SECTION = "## The committed real rows"

# the model cell -> the results file's model.name (a cell left empty continues the model above)
MODELS = {"SmolLM2-135M-Instruct (Q4_1)": "SmolLM2-135M-Instruct.Q4_1",
          "its untrained twin (`--random-weights 0`)": "SmolLM2-135M-Instruct.Q4_1-untrained-seed0",
          "gemma-3-270m (Q4_K_M)": "gemma-3-270m-q4_k_m"}
# real models' committed tasks this table leaves out on purpose, and why
OMITTED = {("sentence-transformers/all-MiniLM-L6-v2", "weat"): "scored by `membench run` with the reference checkpoints",
           ("sentence-transformers/all-MiniLM-L6-v2", "probe_memorization"): "as weat"}

NUM = r"(-?\d[\d,]*(?:\.\d+)?)"
# What a headline cell of a task says, phrase by phrase: a pattern whose groups are figures, and for each
# group the figure of the entry it states: (metric, tags, field of the Metric). A cell's text outside
# its phrases holds no digit (so no figure goes unchecked, and a phrase reworded stops matching).
PHRASES: dict[str, list[tuple[str, list[tuple[str, dict[str, str], str]]]]] = {
    "stereoset": [(rf"LMS {NUM}, SS {NUM}, ICAT {NUM}",
                   [("lms", {"domain": "all"}, "value"), ("ss", {"domain": "all"}, "value"),
                    ("icat", {"domain": "all"}, "value")])],
    "weat": [(rf"mean \\\|d\\\| {NUM} \(contextual\)",
              [("mean_abs_d", {"representation": "contextual", "group": "all"}, "value")])],
    "paywall_memorization": [(rf"approximate memorization {NUM} \(members\)",
                              [("approximate_mean", {"group": "members", "bin": "all"}, "value")])],
    "probe_memorization": [(rf"seen - unseen {NUM} ± {NUM}",
                            [("memorization_effect", {"representation": "contextual", "probe": "linear",
                                                      "train_size": "all"}, field) for field in ("value", "std")])],
    "mink_membership": [(rf"Min-K% 20% AUC {NUM} \[{NUM}, {NUM}\]",
                         [("auc", {"score": "min_k_20", "length": "128"}, field)
                          for field in ("value", "ci_low", "ci_high")])],
    "privacy_extraction": [
        (rf"after 1 epoch: memorization-45 subset score {NUM} \({NUM} before\), leakage ε {NUM}",
         [("subset_score", {"group": "memorization-45", "times": "all", "epoch": "1"}, "value"),
          ("subset_score", {"group": "memorization-45", "times": "all", "epoch": "0"}, "value"),
          ("epsilon", {"group": "unique", "epoch": "1"}, "value")]),
        (r"memorization-45 mean p_z (\d[\d.]*(?:e-?\d+)?) \((\d[\d.]*(?:e-?\d+)?) before\)",
         [("pz_mean", {"group": "memorization-45", "times": "all", "epoch": "1"}, "value"),
          ("pz_mean", {"group": "memorization-45", "times": "all", "epoch": "0"}, "value")]),
        # the headline's epoch, 8, and the board's mark are checked by `test_a_headline_not_reached_is_marked`
        (r"headline \(8 epochs\) not reached: the board shows epoch 1's, marked `\(epoch 1\)`", [])],
    "finetune_memorization": [
        (rf"Min-K% 20% AUC {NUM} before training, {NUM} after 1 epoch, {NUM} after 2, {NUM} after 4; "
         rf"{NUM} trained on the non-members",
         [("auc", {"score": "min_k_20", "epoch": epoch, "trained_on": "members"}, "value") for epoch in "0124"]
         + [("auc", {"score": "min_k_20", "epoch": "1", "trained_on": "non_members"}, "value")]),
        # the (n, p) and the epoch are words of the phrase: a reworded one stops matching
        (rf"; \(100, 0\.5\)-extractable members {NUM} after 4 epochs",
         [("extractable", {"group": "members", "epoch": "4", "trained_on": "members", "attempts": "100",
                           "level": "0.5"}, "value")])],
}
# words of a task cell that name a changed setting without `name=value`: phrase -> (setting, check of its value)
SETTING_WORDS = {"no gradnorm": ("attacks", lambda value: "gradnorm" not in value)}


def table() -> list[dict[str, str]]:
    """The rows of the section's table as {column: cell}, an empty model cell filled from the row above."""
    lines = DOC.split(SECTION, 1)[1].split("\n## ", 1)[0].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| model |"))
    header = [cell.strip() for cell in lines[start].strip().strip("|").split("|")]
    rows, model = [], None
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
        assert len(cells) == len(header), line
        row = dict(zip(header, cells))
        model = row["model"] or model
        rows.append({**row, "model": model})
    return rows


ROWS = table()


def task_name(cell: str) -> str:
    return cell.split()[0]


def real_files():
    for results in committed_files():
        if not results.model.name.startswith("membench-ref/") and "reference_recipe" not in results.model.details:
            yield results


def newest_entries() -> dict[tuple[str, str], tuple[str, TaskEntry]]:
    """(model name, task) -> (the file's creation date, the newest finished full-run entry of the task,
    of any version) over the real models' committed files."""
    found: dict[tuple[str, str], tuple] = {}
    for results in real_files():
        if results.run.limit is not None:
            continue
        for entry in results.tasks:
            key = (results.model.name, entry.name)
            if entry.status == "ok" and (key not in found or results.created_at > found[key][0]):
                found[key] = (results.created_at, entry)
    return {key: (created.date().isoformat(), entry) for key, (created, entry) in found.items()}


ENTRIES = newest_entries()


def entry_of(row: dict[str, str]) -> TaskEntry:
    assert row["model"] in MODELS, f"a model cell this test does not know: {row['model']!r}"
    key = (MODELS[row["model"]], task_name(row["task"]))
    assert key in ENTRIES, f"no committed full-run entry for {key}"
    return ENTRIES[key][1]


def metric(entry: TaskEntry, name: str, tags: dict[str, str]) -> Metric:
    found = [m for m in entry.metrics if m.name == name and m.tags == tags]
    assert len(found) == 1, (entry.name, name, tags, len(found))
    return found[0]


def row_id(row: dict[str, str]) -> str:
    return f"{MODELS.get(row['model'], row['model'])}:{task_name(row['task'])}"


def test_the_table_has_a_row_for_every_committed_real_task_and_no_other():
    rows = [(MODELS.get(row["model"], row["model"]), task_name(row["task"])) for row in ROWS]
    assert len(rows) == len(set(rows)), "a (model, task) twice"
    assert set(rows) == set(ENTRIES) - set(OMITTED), (
        f"without a row: {sorted(set(ENTRIES) - set(OMITTED) - set(rows))}; "
        f"a row without a committed entry: {sorted(set(rows) - set(ENTRIES))}")
    assert set(OMITTED) <= set(ENTRIES), "an omission of nothing committed"


def test_the_dates_are_the_files():
    """'2026-11-26 (the MiniLM run 2026-11-28; the finetune_memorization rows, version 4, and the mink_membership
    rows, version 10, 2026-11-27 ...; the privacy_extraction rows, version 5, 2026-11-28 ...)': the table's files,
    the MiniLM file and the newer rows' files were written then, at those versions."""
    stated = re.search(r"on 2 cores of an AMD EPYC \(AVX2\), (\d{4}-\d\d-\d\d) \(the MiniLM\s+run (\d{4}-\d\d-\d\d); "
                       r"the\s+finetune_memorization\s+rows, version (\d+), and\s+the\s+mink_membership\s+rows, "
                       r"version (\d+),\s+(\d{4}-\d\d-\d\d) [^;]*;\s+the\s+privacy_extraction\s+rows,\s+version (\d+),\s+"
                       r"(\d{4}-\d\d-\d\d)", DOC)
    assert stated, "the section's dates"
    newer = {"finetune_memorization": (stated.group(3), stated.group(5)),
             "mink_membership": (stated.group(4), stated.group(5)),
             "privacy_extraction": (stated.group(6), stated.group(7))}
    rows = {(MODELS[row["model"]], task_name(row["task"])) for row in ROWS}
    assert {ENTRIES[key][0] for key in rows if key[1] not in newer} == {stated.group(1)}
    for task, (version, date) in newer.items():
        keys = {key for key in rows if key[1] == task}
        assert keys and {ENTRIES[key][0] for key in keys} == {date}, task
        assert {str(ENTRIES[key][1].version) for key in keys} == {version}, task
    assert {ENTRIES[key][0] for key in OMITTED} == {stated.group(2)}


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_the_time_and_the_peak_memory_are_the_recorded_ones(row):
    entry = entry_of(row)
    time = re.fullmatch(r"([\d,]+) s", row["time"])
    assert time and int(time.group(1).replace(",", "")) == round(entry.wall_time_s), (row["time"], entry.wall_time_s)
    if "not recorded" in row["peak RSS"]:
        assert entry.peak_rss_bytes is None
    else:
        rss = re.fullmatch(r"(\d+(?:\.\d+)?) GB", row["peak RSS"])
        assert rss and entry.peak_rss_bytes is not None, row["peak RSS"]
        assert same(rss.group(1), entry.peak_rss_bytes / 1e9), (row["peak RSS"], entry.peak_rss_bytes)


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_every_figure_of_the_headline_cell_is_the_committed_one(row):
    entry = entry_of(row)
    cell, checked = row["headline"], []
    for pattern, figures in PHRASES[entry.name]:
        found = re.search(pattern, cell)
        assert found, f"{row_id(row)}: {pattern!r} not in {cell!r}"
        assert len(found.groups()) == len(figures)
        for text, (name, tags, field) in zip(found.groups(), figures):
            value = getattr(metric(entry, name, tags), field)
            assert value is not None and same(text, value), f"{row_id(row)}: {name} {tags} {field}: {text} != {value}"
            checked.append((name, tags, field))
        cell = cell.replace(found.group(0), "", 1)
    assert not re.search(r"\d", cell), f"{row_id(row)}: a figure no phrase checks in {cell!r}"
    head = entry.headline_metric()
    if head is not None:  # the cell states the task's headline
        assert (head.name, head.tags, "value") in checked, f"{row_id(row)}: the headline {head.name} {head.tags}"
    if "chance" in cell:  # the interval holds 0.5
        auc = metric(entry, "auc", {"score": "min_k_20", "length": "128"})
        assert auc.ci_low <= 0.5 <= auc.ci_high


@pytest.mark.parametrize("row", [row for row in ROWS if "not reached" in row["headline"]], ids=row_id)
def test_a_headline_not_reached_is_marked(row):
    """'headline (8 epochs) not reached: the board shows epoch N's, marked `(epoch N)`': the entry has no value
    at its headline's epoch, and the board's cell is its value after epoch N, marked (`render.epoch_reached`)."""
    from leaderboard.collect import BoardEntry
    from leaderboard.render import epoch_reached

    entry = entry_of(row)
    said = re.search(r"headline \((\d+) epochs\) not reached: the board shows epoch (\d+)'s, marked `\(epoch (\d+)\)`",
                     row["headline"])
    assert said and entry.headline is not None and entry.headline.tags.get("epoch") == said.group(1)
    head = entry.headline_metric()
    assert head is None or head.value is None
    reached = epoch_reached(BoardEntry("m", "0" * 64, "causal-lm", entry, 1), entry.headline)
    assert reached is not None and reached.tags["epoch"] == said.group(2) == said.group(3)


def setting_text(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_the_settings_marked_are_the_changed_ones(row):
    """`‡ \\`name=value, ...\\`` marks exactly the settings the entry changed, at the values it ran."""
    entry = entry_of(row)
    cell = row["task"]
    rest = cell.removeprefix(entry.name)
    assert ("‡" in rest) == bool(entry.changed_settings), (cell, entry.changed_settings)
    named = set()
    for quoted in re.findall(r"`([^`]*)`", rest):
        for item in re.split(r",\s+", quoted):
            name, value = item.split("=", 1)
            assert setting_text(entry.config[name]) == value, (cell, name, entry.config[name])
            named.add(name)
    rest = re.sub(r"`[^`]*`", "", rest)
    for words, (name, holds) in SETTING_WORDS.items():
        if words in rest:
            assert holds(entry.config[name]), (cell, name, entry.config[name])
            named.add(name)
            rest = rest.replace(words, "")
    assert named == set(entry.changed_settings or []), (cell, entry.changed_settings)
    assert not rest.replace("‡", "").replace(",", "").strip(), f"words of the task cell not checked: {rest!r}"


def test_the_cut_privacy_runs_train_the_stated_share_of_the_defaults():
    """"the defaults (checkpoints after 4 and 8 epochs, 3 seeds) train 24 times as long" as the rows'
    1 epoch with 1 seed."""
    from tasks.privacy_extraction.task import PrivacyConfig

    text = " ".join(DOC.split())
    found = re.search(r"the defaults \(checkpoints after (\d+) and (\d+) epochs, (\d+) seeds\) train (\d+) times as long",
                      text)
    assert found, "docs/real-models.md no longer says what the privacy cut saves"
    defaults = PrivacyConfig()
    assert tuple(map(int, found.groups()[:2])) == defaults.epochs
    assert int(found.group(3)) == defaults.finetune_seeds
    assert int(found.group(4)) == max(defaults.epochs) * defaults.finetune_seeds


def test_smollm2_s_parameter_count_is_the_recorded_one():
    """"134.5M parameters": P of the memory estimate finetune_memorization records for the loaded SmolLM2
    (`info.training_memory`, shared tensors counted once), in its committed results file."""
    (stated,) = re.search(r"SmolLM2-135M-Instruct \(Llama architecture, ([\d.]+)M parameters\)", DOC).groups()
    counts = {entry.info["training_memory"]["estimate_bytes"]["parameters"] for results in real_files()
              if results.model.name == MODELS["SmolLM2-135M-Instruct (Q4_1)"]
              and (entry := results.task("finetune_memorization")) is not None and entry.status == "ok"}
    assert len(counts) == 1 and same(stated, counts.pop() / 1e6), (stated, counts)
