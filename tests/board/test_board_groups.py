"""The board's two groups (real models, then the reference controls: the benchmark's self-test) and
the mark on a real model's run whose settings differ from the task's defaults (`changed_settings`,
recorded by the runner)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from pydantic import Field

from harness.core.results import load_results
from harness.core.task import RunContext, Task, TaskConfig, TaskResult
from harness.run.runner import EvaluateOptions, changed_settings, config_hash, run_task
from leaderboard.build import render_markdown
from leaderboard.collect import is_control, newest_entries, read_submissions
from leaderboard.render import CHANGED_LEGEND, CONTROLS_NOTE
from tasks.mink_membership.task import MinkConfig, MinkMembership
from tests.helpers.board_files import (
    ID_A,
    ID_B,
    ID_C,
    RECIPE,
    TASK,
    make_results,
    records,
    section,
    split_cells,
    submit,
    table,
    twin_of,
)
from tests.helpers.committed import committed_files

ID_D = "d" * 64
REAL_A, REAL_B = f"model-a ({ID_A[:8]})", f"model-b ({ID_B[:8]})"
# a built-in reference checkpoint is keyed on its recipe's digest (RECIPE's: 9s)
REF, TWIN = "membench-ref/xsum-gpt2-e30 (99999999)", f"model-a-untrained-seed0 ({ID_D[:8]})"


def subsection(markdown: str, heading: str) -> str:
    """The text after a `### ` heading up to the next heading of level 2 or 3."""
    parts = re.split(r"^(##+ .*)$", markdown, flags=re.M)
    return parts[parts.index(heading) + 1]


def labelled_table(text: str, label: str) -> list[dict[str, str]]:
    """The rows of the table that follows the paragraph `label` (e.g. `**Real models**`) in `text`."""
    after = text.split(f"\n{label}\n", 1)[1]
    return records(table(after.split("\n**", 1)[0]))


@pytest.fixture
def board(tmp_path) -> Path:
    """Two real models (model-a's run with cut settings), a reference checkpoint (also with changed
    settings, which a control is never marked for) and model-a's untrained twin; model-b and the
    reference checkpoint also ran another task."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    submit(folder, make_results("model-a", ID_A, auc=0.61, changed_settings=["bootstrap_resamples", "lengths"]))
    submit(folder, make_results("model-b", ID_B, auc=0.72))
    submit(folder, make_results("model-b", ID_B, auc=0.30, task="other_task"), "b-other.json")
    submit(folder, make_results("membench-ref/xsum-gpt2-e30", ID_C, auc=0.99, details=RECIPE,
                                changed_settings=["lengths"]))
    submit(folder, make_results("membench-ref/xsum-gpt2-e30", ID_C, auc=0.45, task="other_task", details=RECIPE),
           "ref-other.json")
    submit(folder, make_results("model-a-untrained-seed0", ID_D, auc=0.49, details=twin_of(ID_A)))
    return folder


def test_real_models_and_reference_controls_are_two_groups_with_the_same_columns(board):
    markdown, _ = render_markdown(board)
    overview = section(markdown, "## Overview")
    assert overview.index("### Real models") < overview.index("### Reference controls")
    real_lines = table(subsection(markdown, "### Real models"))
    control_text = subsection(markdown, "### Reference controls")
    control_lines = table(control_text)
    assert [r["model"] for r in records(real_lines)] == [REAL_A, REAL_B]
    assert [r["model"] for r in records(control_lines)] == [REF, TWIN]  # the twin is a control
    # the same columns in both, from the whole board (model-a ran only mink; the controls' other_task shows)
    assert split_cells(real_lines[0]) == split_cells(control_lines[0]) == ["model", "kind", "mink ↓", "other ↓"]
    assert CONTROLS_NOTE in control_text and "not contestants" in CONTROLS_NOTE
    assert "- mink: mink\\_membership" in overview.split("### Real models")[0]  # the legend serves both
    entries = newest_entries(read_submissions(board))
    assert {b.model_name for b in entries if b.control} == {"membench-ref/xsum-gpt2-e30", "model-a-untrained-seed0"}


def test_each_task_summary_tables_the_real_models_and_counts_the_controls(board, tmp_path):
    """A task's section tables its real models; the controls that ran it are counted, with the web
    board's page of the task for their key metrics (their headline is in the overview)."""
    markdown, _ = render_markdown(board)
    mink = section(markdown, f"## {TASK}")
    assert mink.index("**Real models**") < mink.index("**Reference controls**")
    assert [r["model"] for r in labelled_table(mink, "**Real models**")] == [f"{REAL_A} ‡", REAL_B]
    assert (f"**Reference controls**: 2 checkpoints; their headline is in the overview, every key metric of theirs "
            f"on the web board's page of the task (`site/tasks/{TASK}.html`).") in mink
    assert REF not in mink and TWIN not in mink  # no table of the controls here
    overview = {r["model"]: r for r in records(table(subsection(markdown, "### Reference controls")))}
    assert overview[REF]["mink ↓"] == "0.990" and overview[TWIN]["mink ↓"] == "0.490"
    other = section(markdown, "## other_task")
    assert [r["model"] for r in labelled_table(other, "**Real models**")] == [REAL_B]
    assert "**Reference controls**: 1 checkpoint; " in other

    only_controls = tmp_path / "only-controls"
    only_controls.mkdir()
    submit(only_controls, make_results("membench-ref/xsum-gpt2-e30", ID_C, auc=0.99, details=RECIPE))
    markdown, _ = render_markdown(only_controls)
    assert "_no real model yet_" in subsection(markdown, "### Real models")
    assert "**Real models**: none yet." in section(markdown, f"## {TASK}")
    assert [r["model"] for r in records(table(subsection(markdown, "### Reference controls")))] == [REF]

    only_real = tmp_path / "only-real"
    only_real.mkdir()
    submit(only_real, make_results("model-a", ID_A, auc=0.61))
    markdown, _ = render_markdown(only_real)
    assert "Reference controls" not in markdown and CONTROLS_NOTE not in markdown


def test_changed_settings_are_marked_for_real_models_only(board):
    markdown, _ = render_markdown(board)
    real_text = subsection(markdown, "### Real models")
    real = {r["model"]: r for r in records(table(real_text))}
    assert real[REAL_A]["mink ↓"] == "0.610 ‡" and real[REAL_B]["mink ↓"] == "0.720"
    assert CHANGED_LEGEND in real_text
    assert "- model-a (aaaaaaaa), mink\\_membership: bootstrap\\_resamples, lengths=32,64,128" in real_text
    controls = records(table(subsection(markdown, "### Reference controls")))
    assert "‡" not in json.dumps(controls, ensure_ascii=False)  # its changed lengths are the job's choice
    mink = section(markdown, f"## {TASK}")
    assert "- model-a (aaaaaaaa): bootstrap\\_resamples, lengths=32,64,128" in mink and CHANGED_LEGEND in mink
    assert markdown.count("‡") == 4  # the legend under the overview and in mink's section, the value, the label
    assert "‡" not in section(markdown, "## other_task")


def test_a_board_without_changed_settings_has_no_mark(tmp_path):
    submit(tmp_path, make_results("model-a", ID_A, auc=0.61, changed_settings=[]))
    markdown, _ = render_markdown(tmp_path)
    assert "‡" not in markdown and "settings changed" not in markdown


def test_files_without_the_new_field_still_read(tmp_path):
    """Files written before `changed_settings` lack it: read as None (not known), never marked."""
    results = make_results("model-a", ID_A, auc=0.61)
    raw = json.loads(results.model_dump_json())
    raw["tasks"][0].pop("changed_settings")
    (tmp_path / "old.json").write_text(json.dumps(raw), encoding="utf-8")
    loaded = load_results(tmp_path / "old.json")
    assert loaded.tasks[0].changed_settings is None and not is_control(loaded)
    markdown, _ = render_markdown(tmp_path)
    assert [r["model"] for r in records(table(subsection(markdown, "### Real models")))] == [REAL_A]
    assert "‡" not in markdown
    committed = sorted((Path(__file__).parents[2] / "submissions").glob("*.json"))
    # the committed controls: the reference checkpoints and SmolLM2's untrained twin; the rest are real models
    assert all(is_control(results) == (path.name.startswith("membench-ref-") or "-untrained-seed" in path.name)
               for path, results in zip(committed, committed_files(), strict=True))
    assert any("-untrained-seed" in path.name for path in committed)


# ---------------------------------------------------------------- the runner records it


def test_changed_settings_names_the_fields_off_their_defaults():
    assert changed_settings(MinkConfig()) == []
    assert changed_settings(MinkConfig(lengths=[32, 64, 128, 256, 512])) == []  # the default, as a list
    assert changed_settings(MinkConfig(lengths=(32,), bootstrap_resamples=100)) == ["bootstrap_resamples", "lengths"]
    assert changed_settings(MinkConfig(stride=8)) == ["stride"]  # from None

    class Required(TaskConfig):
        path: str  # no default: nothing to differ from
        n: int = Field(3, ge=1)

    assert changed_settings(Required(path="data.jsonl")) == []
    assert changed_settings(Required(path="data.jsonl", n=4)) == ["n"]


class Cut(Task):  # not registered
    NAME, VERSION, DESCRIPTION = "cut_task", 1, "one metric"
    MODEL_KINDS = MinkMembership.MODEL_KINDS
    HEADLINE = MinkMembership.HEADLINE

    class Config(TaskConfig):
        repetitions: int = 10
        sizes: tuple[int, ...] = (50, 100)

    def load_data(self, config, context):
        return None

    def run(self, model, data, config, context):
        from harness.core.results import Metric

        return TaskResult(metrics=[Metric(name="auc", value=0.5)], counts={"texts": 2})


def test_run_task_records_changed_settings_outside_the_hash_and_on_a_cache_hit():
    lm = SimpleNamespace(dtype="float32", identity="1" * 64, kind=next(iter(Cut.MODEL_KINDS)), name="fake-lm")
    options, task = EvaluateOptions(progress=False), Cut()
    config = Cut.Config(sizes=(50,))
    entry = run_task(task, lm, None, config, RunContext(progress=False), options).entry
    assert entry.status == "ok" and entry.changed_settings == ["sizes"]
    assert entry.config_hash == config_hash(config, options, "float32")  # the field is no input of the hash
    again = run_task(task, lm, None, config, RunContext(progress=False), options).entry  # from the cache
    assert again.changed_settings == ["sizes"] and again.config_hash == entry.config_hash
    default = run_task(task, lm, None, Cut.Config(), RunContext(progress=False), EvaluateOptions(use_cache=False)).entry
    assert default.changed_settings == []
    skipped = run_task(task, lm, None, config, RunContext(), options, reason="not this kind").entry
    assert skipped.status == "skipped" and skipped.changed_settings == ["sizes"]


def test_a_runs_warnings_are_listed_under_its_task_on_both_boards(tmp_path):
    """mink_membership warns when members and non-members are told apart without the model: the
    markdown board and the task's page on the site list the warning under the task, escaped."""
    from leaderboard.site import render_site

    folder = tmp_path / "subs"
    results = make_results()
    warned = results.tasks[0].model_copy(update={"warnings": ["distinguishable *without* the model"]})
    submit(folder, results.model_copy(update={"tasks": [warned]}))
    submit(folder, make_results(name="model-b", identity=ID_B))
    markdown, _ = render_markdown(folder)
    lines = section(markdown, f"## {TASK}").splitlines()
    notes = [line for line in lines if line.startswith("- warning")]
    assert notes == [rf"- warning {REAL_A} ⚠: distinguishable \*without\* the model"]
    # the run is marked in its row of the task's table; the other model's is not
    assert any(line.startswith(f"| {REAL_A} ⚠ ") for line in lines)
    assert any(line.startswith(f"| {REAL_B} ") for line in lines)
    page = render_site(folder)[f"tasks/{TASK}.html"].decode()
    assert f"warning {REAL_A} ⚠: distinguishable *without* the model" in page


def with_data(results, data: str):
    """`results` with its task run on `data` (the entry's config)."""
    [entry] = results.tasks
    return results.model_copy(update={"tasks": [entry.model_copy(update={"config": {**entry.config, "data": data}})]})


def test_a_real_models_membership_on_the_reference_split_is_marked_a_null_control(tmp_path):
    from leaderboard.render import NULL_LEGEND

    submit(tmp_path, with_data(make_results("model-a", ID_A, auc=0.49), "reference"))
    submit(tmp_path, with_data(make_results("model-b", ID_B, auc=0.70), "members.jsonl"))
    submit(tmp_path, with_data(make_results("membench-ref/xsum-gpt2-e30", ID_C, auc=0.99, details=RECIPE), "reference"))
    markdown, _ = render_markdown(tmp_path)
    real_text = subsection(markdown, "### Real models")
    real = {r["model"]: r for r in records(table(real_text))}
    assert real[REAL_A]["mink ↓"] == "0.490 ○" and real[REAL_B]["mink ↓"] == "0.700"
    assert NULL_LEGEND in real_text and NULL_LEGEND in section(markdown, f"## {TASK}")
    assert "○" not in subsection(markdown, "### Reference controls")  # the checkpoints trained on that split
    assert markdown.count("○") == 2 + 2  # the two legends, the overview value, the label in mink's table
    from leaderboard.site import render_site

    site = render_site(tmp_path)  # the web board: the same marks, and the legend under its tables
    index, task_page = site["index.html"].decode(), site[f"tasks/{TASK}.html"].decode()
    unescaped = NULL_LEGEND.split("'")[0]  # the legend up to its first apostrophe, which HTML escapes
    legend = f'id="null-controls">{unescaped}'
    assert "0.490 [0.440, 0.540] ○" in index and legend in index and legend in task_page
