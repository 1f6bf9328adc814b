"""No submission can break the board (issue 17): every results file that validates renders, its
text reaches LEADERBOARD.md escaped, and `membench validate` refuses what is no number or no version."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from harness.app.cli import main
from harness.core.errors import UserError
from harness.core.results import Metric, TaskEntry, load_results, parse_results, write_results
from leaderboard import plots
from leaderboard.build import PLOTS_FOLDER, render_markdown
from leaderboard.collect import newest_entries, read_submissions
from leaderboard.render import agreement_table, task_table
from tasks.mink_membership.task import MinkMembership
from tests.helpers.board_files import (
    ID_A,
    ID_B,
    ID_C,
    make_results,
    records,
    section,
    split_cells,
    submit,
    table,
    unescape_markdown,
)

TASK = MinkMembership.NAME


def raw_results(name: str = "model-a", identity: str = ID_A, **kwargs) -> dict:
    """A valid results file (`make_results`) as the JSON object, to be made hostile."""
    return json.loads(make_results(name, identity, **kwargs).model_dump_json())


def write_raw(folder: Path, raw: dict, file_name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name
    path.write_text(json.dumps(raw), encoding="utf-8")  # json.dumps writes NaN and Infinity as such
    return path


def board_with(tmp_path: Path, *hostile: dict) -> tuple[str, dict[str, bytes]]:
    """The board of one good submission and the hostile files, written through the CLI too."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    submit(folder, make_results("good-model", ID_C, auc=0.61), "good.json")
    for i, raw in enumerate(hostile):
        write_raw(folder, raw, f"hostile-{i}.json")
        assert main(["validate", str(folder / f"hostile-{i}.json")]) == 0  # each file is valid
    output = tmp_path / "board" / "LEADERBOARD.md"
    assert main(["leaderboard", "--submissions", str(folder), "--output", str(output)]) == 0
    pages = list((output.parent / "site").rglob("*.html"))  # the web board renders them all, escaped
    assert len(pages) >= 3 and not any("<img" in page.read_text(encoding="utf-8") for page in pages)
    markdown, plots_ = render_markdown(folder)
    assert output.read_text(encoding="utf-8") == markdown
    assert_tables_intact(markdown)
    return markdown, plots_


def assert_tables_intact(markdown: str) -> None:
    """No raw HTML, and every row of every table has as many cells as its header."""
    assert "<" not in markdown
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            widths = {len(split_cells(line)) for line in block}
            assert len(widths) == 1, block
        else:
            headings = r"## [a-z0-9_]+|## Overview|### Real models|### Reference controls|# membench leaderboard"
            assert not lines[i].startswith("#") or re.fullmatch(headings, lines[i]), lines[i]
            i += 1


def plot_line(markdown: str, task: str = TASK) -> str:
    [line] = [line for line in section(markdown, f"## {task}").splitlines() if line.startswith("Plot:")]
    return line


# ---------------------------------------------------------------- plots of what they cannot draw


def test_an_ok_run_without_metrics_renders_and_is_named(tmp_path):
    raw = raw_results("empty-run", ID_A)
    raw["tasks"][0]["metrics"] = []  # what `--lengths ,` or texts shorter than every length gave
    markdown, plots_ = board_with(tmp_path, raw)
    assert f"{TASK}.png" in plots_  # the good model is still drawn
    line = plot_line(markdown)
    assert line.startswith("Plot: leaves out empty-run (aaaaaaaa) (no value of auc (score=min\\_k\\_20) "
                           "with a numeric length tag)")
    assert "good-model" not in line
    overview = {r["model"]: r for r in records(table(section(markdown, "## Overview")))}
    assert [v for k, v in overview["empty-run (aaaaaaaa)"].items() if k.startswith("mink ")] == ["n/a"]


def test_a_task_whose_only_run_has_no_metrics_has_no_plot(tmp_path):
    folder = tmp_path / "submissions"
    raw = raw_results("empty-run", ID_A)
    raw["tasks"][0]["metrics"] = []
    write_raw(folder, raw, "empty.json")
    markdown, plots_ = render_markdown(folder)
    assert plots_ == {} and PLOTS_FOLDER not in markdown
    assert plot_line(markdown) == "Plot: none, no finished run has a value of its headline metric to draw."


@pytest.mark.parametrize("tags", [
    {"score": "min_k_20"},                       # no axis tag at all (a KeyError before)
    {"score": "min_k_20", "length": "abc"},      # an axis tag that is no number (a ValueError)
    {"score": "min_k_20", "length": "nan"},      # numbers that are not finite
    {"score": "min_k_20", "length": "1e999"},
    {"score": "min_k_20", "length": "-inf"},
])
def test_metrics_without_a_numeric_axis_tag_are_left_out(tmp_path, tags):
    raw = raw_results("odd-tags", ID_A)
    for metric in raw["tasks"][0]["metrics"]:
        metric["tags"] = dict(tags)
    markdown, plots_ = board_with(tmp_path, raw)
    assert f"{TASK}.png" in plots_
    assert plot_line(markdown).startswith("Plot: leaves out odd-tags (aaaaaaaa) (no value of auc")


def test_some_points_without_a_numeric_axis_tag_leave_the_rest_drawn(tmp_path):
    raw = raw_results("some-odd", ID_A)
    raw["tasks"][0]["metrics"][0]["tags"]["length"] = "abc"
    del raw["tasks"][0]["metrics"][2]["tags"]["length"]
    markdown, plots_ = board_with(tmp_path, raw)
    assert f"{TASK}.png" in plots_
    assert not any(line.startswith("Plot:") for line in markdown.splitlines())  # the 128-word point is drawn


def test_a_headline_without_a_numeric_tag_is_drawn_as_bars(tmp_path):
    raw = raw_results("bars", ID_A)
    head = {"metric": "auc", "tags": {"score": "min_k_20", "length": "abc"}, "label": "$x$ AUC", "better": "lower"}
    raw["tasks"][0]["headline"] = head
    raw["tasks"][0]["metrics"][0]["tags"]["length"] = "abc"
    raw["tasks"][0]["name"] = "other_task"
    markdown, plots_ = board_with(tmp_path, raw)
    assert set(plots_) == {f"{TASK}.png", "other_task.png"}
    assert not any(line.startswith("Plot:") for line in markdown.splitlines())


@pytest.mark.parametrize("name", ["evil $\\foo{$", "$", "a$b$c", "$\\frac{1}{0}$", "\\", "^{_}", "_hidden",
                                  "日本語 🙂 \x00 \t tab", "x" * 500])
def test_model_names_are_drawn_verbatim(tmp_path, name):
    raw = raw_results(name, ID_A)
    raw["tasks"][0]["headline"]["label"] = name  # axis label and title text too
    raw2 = raw_results(name + " bars", ID_B, task="bar_task")
    raw2["tasks"][0]["headline"] = {"metric": "auc", "tags": {"score": "min_k_20"}, "label": name,
                                    "better": "ideal", "ideal": 0.5}
    markdown, plots_ = board_with(tmp_path, raw, raw2)
    assert set(plots_) == {f"{TASK}.png", "bar_task.png"}
    assert all(png.startswith(b"\x89PNG") for png in plots_.values())
    shown = {unescape_markdown(r["model"]) for r in records(table(section(markdown, "## Overview")))}
    assert " ".join(f"{name} ({ID_A[:8]})".split()) in shown


def test_values_matplotlib_cannot_lay_out_leave_the_plot_out(tmp_path):
    raw = raw_results("huge", ID_A)
    for metric, value in zip(raw["tasks"][0]["metrics"], (1.7e308, -1.7e308, 1.7e308, -1.7e308, 1.7e308, 5e-324)):
        metric["value"], metric["ci_low"], metric["ci_high"] = value, None, None
    markdown, plots_ = board_with(tmp_path, raw)
    if f"{TASK}.png" not in plots_:
        assert plot_line(markdown).startswith("Plot: none, matplotlib could not draw these values")


def test_free_form_model_details_do_not_break_the_sparsity_column(tmp_path):
    files = []
    for i, pruning in enumerate(["x", [1, 2], {"parameter_sparsity": "abc"}, {"parameter_sparsity": True},
                                 {"parameter_sparsity": 5}, {"parameter_sparsity": None}]):
        raw = raw_results(f"model-{i}", f"{i:x}" * 64)
        raw["model"]["details"] = {"pruning": pruning}
        files.append(raw)
    markdown, _ = board_with(tmp_path, *files)
    assert "sparsity" not in table(section(markdown, "## Overview"))[0]
    pruned = raw_results("pruned", ID_A)
    pruned["model"]["details"] = {"pruning": {"parameter_sparsity": 0.25}}
    folder = tmp_path / "more"
    write_raw(folder, pruned, "pruned.json")
    overview = records(table(section(render_markdown(folder)[0], "## Overview")))
    assert overview[0]["sparsity"] == "0.250"


# ---------------------------------------------------------------- text from a submission is escaped


HOSTILE_CARDS = ['"><img src=x onerror=alert(1)>', "javascript:alert(1)", "https://evil.example/x.md",
                 "../../etc/passwd.md", "tasks/../../x.md", "tasks/mink_membership/READ ME.md",
                 "tasks/mink_membership/README.md) [click](http://evil", "/tasks/mink_membership/README.md",
                 "tasks/mink_membership/README.md\n<script>", "", None, 42, ["tasks/x/README.md"],
                 "tasks/mink_membership/.hidden.md", "tasks/Mink/README.md", "tasks/mink_membership/README.html"]


@pytest.mark.parametrize("card", HOSTILE_CARDS)
def test_a_task_card_is_a_plain_path_under_tasks_or_ignored(tmp_path, card):
    raw = raw_results("carded", ID_A)
    raw["tasks"][0]["info"] = {"task_card": card}
    markdown, _ = board_with(tmp_path, raw)
    default = f"tasks/{TASK}/README.md"
    assert f"Task card: [{default}]({default})" in section(markdown, f"## {TASK}")
    if isinstance(card, str) and card:
        assert card not in markdown


def test_a_plain_task_card_path_is_linked(tmp_path):
    raw = raw_results("carded", ID_A)
    raw["tasks"][0]["info"] = {"task_card": "tasks/mink_membership/cards/v2-card.md"}
    markdown, _ = board_with(tmp_path, raw)
    assert "Task card: [tasks/mink_membership/cards/v2-card.md](tasks/mink_membership/cards/v2-card.md)" in markdown


EVIL = "<img src=x onerror=alert(1)>|**b**[l](http://x)\n# h"


def test_every_text_from_a_submission_is_escaped(tmp_path):
    raw = raw_results(EVIL, ID_A)
    entry = raw["tasks"][0]
    entry["headline"]["label"] = EVIL
    entry["summary"] = [dict(entry["headline"], label=EVIL + " summary")]
    for metric in entry["metrics"]:
        metric["name"] = EVIL + metric["name"]
        metric["tags"] = {EVIL + k: EVIL + v for k, v in metric["tags"].items()}
    entry["headline"]["metric"] = entry["metrics"][0]["name"]
    entry["headline"]["tags"] = entry["metrics"][0]["tags"]
    entry["item_scores"] = {EVIL: {EVIL: 0.1, "b": 0.2, "c": 0.3}}
    other = raw_results("second", ID_B)
    other["tasks"][0]["item_scores"] = {EVIL: {EVIL: 0.3, "b": 0.2, "c": 0.1}}
    skipped = raw_results("skipper", "d" * 64, status="skipped", skip_reason=EVIL)
    markdown, _ = board_with(tmp_path, raw, other, skipped)
    assert "**b**" not in markdown and "](http://x)" not in markdown and "\n# h" not in markdown
    evil = "&lt;img src=x onerror=alert\\(1\\)&gt;"
    assert markdown.count(evil) >= 5  # the overview's label and legend, the summary's label and header, the note
    board = newest_entries(read_submissions(tmp_path / "submissions"))
    full, agreement = task_table(TASK, board), agreement_table(TASK, board)  # tables of the web board
    assert full.count(evil) >= 4 and agreement.count(evil) >= 2  # + metric names and tags; series and labels
    for text in (full, agreement):
        assert "**b**" not in text and "](http://x)" not in text and "\n# h" not in text
    notes = [line for line in section(markdown, f"## {TASK}").splitlines() if line.startswith("- skipped")]
    assert len(notes) == 1 and "&lt;img" in notes[0]


# ---------------------------------------------------------------- validate: numbers and versions


def validate_error(capsys, path: Path, *strict: str) -> str:
    capsys.readouterr()
    assert main(["validate", *strict, str(path)]) == 2
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith("membench: error: ") and str(path) in line and captured.out == ""
    return line


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize("where, field", [
    (lambda e: e["metrics"][0].__setitem__("value", "X"), "tasks.0.metrics.0.value"),
    (lambda e: e["metrics"][0].__setitem__("ci_low", "X"), "tasks.0.metrics.0.ci_low"),
    (lambda e: e["metrics"][0].__setitem__("ci_high", "X"), "tasks.0.metrics.0.ci_high"),
    (lambda e: e["metrics"][1].__setitem__("std", "X"), "tasks.0.metrics.1.std"),
    (lambda e: e["metrics"][1].__setitem__("per_seed", [0.5, "X"]), "tasks.0.metrics.1.per_seed.1"),
    (lambda e: e.__setitem__("item_scores", {"s": {"i": "X"}}), "tasks.0.item_scores.s.i"),
    (lambda e: e.__setitem__("wall_time_s", "X"), "tasks.0.wall_time_s"),
    (lambda e: e.__setitem__("info", {"deep": [{"x": "X"}]}), "tasks.0.info.deep.0.x"),
])
def test_validate_refuses_numbers_that_are_not_finite(capsys, tmp_path, literal, where, field):
    raw = raw_results()
    where(raw["tasks"][0])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(raw).replace('"X"', literal), encoding="utf-8")
    line = validate_error(capsys, path)
    assert f"field {field}: " in line and "not a finite number" in line
    assert main(["leaderboard", "--submissions", str(tmp_path), "--output", str(tmp_path / "LB.md")]) == 2
    assert not (tmp_path / "LB.md").exists()


@pytest.mark.parametrize("where, field", [
    (lambda raw: raw["model"].__setitem__("name", "bad\ud800name"), "model.name"),
    (lambda raw: raw["tasks"][0]["metrics"][0]["tags"].__setitem__("\udfff", "x"),
     "tasks.0.metrics.0.tags.'\\udfff'"),
    (lambda raw: raw["tasks"][0].__setitem__("skip_reason", "\ud83d"), "tasks.0.skip_reason"),
])
def test_validate_refuses_text_that_is_no_unicode(capsys, tmp_path, where, field):
    """JSON's \\u escapes can write a lone surrogate, which no file, terminal or font takes."""
    raw = raw_results()
    where(raw)
    line = validate_error(capsys, write_raw(tmp_path, raw, "surrogate.json"))
    assert f"field {field}: " in line and "lone surrogate" in line
    line.encode("utf-8")


def test_a_field_path_with_a_newline_is_one_line(capsys, tmp_path):
    raw = raw_results()
    raw["tasks"][0]["info"] = {"two\nlines": float("nan")}
    line = validate_error(capsys, write_raw(tmp_path, raw, "newline.json"))
    assert "field tasks.0.info.'two\\nlines': nan is not a finite number" in line


@pytest.mark.parametrize("version", [0, -1])
def test_validate_refuses_task_versions_below_one(capsys, tmp_path, version):
    raw = raw_results()
    raw["tasks"][0]["version"] = version
    line = validate_error(capsys, write_raw(tmp_path, raw, "v.json"))
    assert "field tasks.0.version: " in line and "greater than or equal to 1" in line


def test_a_task_version_newer_than_this_membench_is_refused_for_submission(capsys, tmp_path):
    raw = raw_results()
    raw["tasks"][0]["version"] = 999
    path = write_raw(tmp_path, raw, "future.json")
    capsys.readouterr()
    assert main(["validate", str(path)]) == 0  # a valid file, with a warning
    captured = capsys.readouterr()
    assert captured.out.strip() == f"{path}: ok (model-a, 1 task(s))"
    [warning] = captured.err.splitlines()
    assert warning.startswith("membench: warning: ") and "--strict" in warning
    expected = f"task {TASK} version 999 is newer than this membench's ({MinkMembership.VERSION})"
    assert expected in warning
    assert expected in validate_error(capsys, path, "--strict")
    # older versions, and versions of tasks this membench does not know, are fine
    for name, version in ((TASK, 1), (TASK, MinkMembership.VERSION), ("someone_elses_task", 999)):
        raw["tasks"][0].update(name=name, version=version)
        write_raw(tmp_path, raw, "future.json")
        assert main(["validate", "--strict", str(path)]) == 0
        assert capsys.readouterr().err == ""


def test_limits_and_batch_sizes_below_one_are_refused(capsys, tmp_path):
    for field, value in (("limit", 0), ("limit", -3), ("batch_size", 0)):
        raw = raw_results()
        raw["run"][field] = value
        assert f"field run.{field}: " in validate_error(capsys, write_raw(tmp_path, raw, "run.json"))


# ---------------------------------------------------------------- membench writes no NaN


def test_non_finite_numbers_from_code_are_written_as_undefined(tmp_path):
    nan, inf = float("nan"), float("inf")
    import numpy as np

    metric = Metric(name="m", value=nan, ci_low=-inf, ci_high=np.float32("nan"), std=np.float64(inf),
                    per_seed=[0.5, nan, None])
    assert (metric.value, metric.ci_low, metric.ci_high, metric.std, metric.per_seed) == (None, None, None, None,
                                                                                          [0.5, None, None])
    results = make_results("writer")
    results.tasks[0].metrics.append(Metric(name="spread", value=0.1, std=nan, per_seed=[nan, 0.1]))
    results.tasks[0].item_scores = TaskEntry.model_validate(
        {**results.tasks[0].model_dump(), "item_scores": {"s": {"a": 0.1, "b": nan, "c": -inf}}}).item_scores
    assert results.tasks[0].item_scores == {"s": {"a": 0.1}}
    path = tmp_path / "w.json"
    write_results(results, path)
    text = path.read_text(encoding="utf-8")
    assert "NaN" not in text and "Infinity" not in text
    assert load_results(path) == results


def test_a_task_that_computes_no_metrics_is_skipped_with_its_reason():
    from harness.core.model_types import ModelKind
    from harness.core.task import RunContext, Task, TaskConfig, TaskResult
    from harness.run.runner import EvaluateOptions, run_task

    class Empty(Task):  # not registered
        NAME, VERSION, DESCRIPTION = "empty_task", 1, "computes nothing"
        MODEL_KINDS = frozenset({ModelKind.CAUSAL_LM})
        HEADLINE = MinkMembership.HEADLINE
        reason = None

        def load_data(self, config, context):
            return None

        def run(self, model, data, config, context):
            return TaskResult(metrics=[], counts={"texts": 3}, no_metrics_reason=self.reason)

    lm = SimpleNamespace(dtype="float32", identity=ID_A, kind=ModelKind.CAUSAL_LM, name="fake-lm")
    options = EvaluateOptions(use_cache=False)
    task = Empty()
    outcome = run_task(task, lm, None, TaskConfig(), RunContext(), options)
    entry, samples = outcome.entry, outcome.samples
    assert (entry.status, entry.skip_reason, entry.metrics, samples) == (
        "skipped", "no metrics: the task computed none on this data", [], "")
    task.reason = "every text is too short"
    entry = run_task(task, lm, None, TaskConfig(), RunContext(), options).entry
    assert entry.skip_reason == "no metrics: every text is too short" and entry.counts == {"texts": 3}


def test_mink_on_texts_shorter_than_every_length_is_skipped(capsys, tiny_lm, tmp_path):
    from conftest import write_jsonl

    data = write_jsonl(tmp_path / "short.jsonl", [{"text": f"word{i} and more", "label": i % 2} for i in range(4)])
    out = tmp_path / "out"
    argv = ["evaluate", "--model", str(tiny_lm), "--tasks", TASK, "--data", str(data), "--output-path", str(out),
            "--lengths", "50,60", "--bootstrap-resamples", "20", "--device", "cpu", "--no-cache"]
    assert main(argv) == 0
    [path] = out.glob("*.json")
    entry = load_results(path).task(TASK)
    assert entry.status == "skipped" and entry.metrics == []
    assert entry.skip_reason == "no metrics: every text is shorter than every --lengths (the shortest is 50 words)"
    assert entry.changed_settings == ["bootstrap_resamples", "data", "lengths"]  # what the board would mark
    assert f"{TASK} skipped: no metrics" in capsys.readouterr().err


@pytest.mark.parametrize("task, flag", [(TASK, "--lengths"), (TASK, "--k-percents"), (TASK, "--fpr-levels"),
                                        ("privacy_extraction", "--epochs")])
def test_an_empty_list_setting_is_a_one_line_error(capsys, tmp_path, task, flag):
    from conftest import assert_user_error

    argv = ["evaluate", "--model", str(tmp_path / "never-loaded"), "--tasks", task, flag, ",",
            "--output-path", str(tmp_path / "out")]
    line = assert_user_error(capsys, argv, tmp_path / "out", f"{task}: {flag}: ", "at least 1 item")
    assert not (tmp_path / "out").exists(), line


# ---------------------------------------------------------------- any valid file renders (property)


SPECIAL = ["$", "$\\foo{$", "\\", "<script>x</script>", "|", "\n", "_x", "", "a$b$c", "^{", "%", "{}", "**",
           "[a](http://x)", "&amp;", "`", "~", "#", "\r\n", " ", "\u2028", "🙂", "日本"]
texts = st.one_of(st.sampled_from(SPECIAL), st.text(max_size=12),
                  st.lists(st.sampled_from(SPECIAL), max_size=4).map("".join))
tag_keys = st.one_of(st.sampled_from(["score", "length", "epoch", "group"]), texts)
tag_values = st.one_of(st.sampled_from(["min_k_20", "128", "64", "0", "-3", "0.5", "abc", "nan", "inf", "1e999",
                                        "1e-300", "1e300", " 32 ", "1_000"]), texts)
tags = st.dictionaries(tag_keys, tag_values, max_size=3)
numbers = st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=64),
                    st.floats(-2, 2, allow_nan=False))
metric_names = st.one_of(st.sampled_from(["auc", "ss", "tpr"]), texts)


@st.composite
def headlines(draw) -> dict:
    better = draw(st.sampled_from(["higher", "lower", "ideal"]))
    head = {"metric": draw(metric_names), "tags": draw(tags), "label": draw(texts), "better": better}
    if better == "ideal":
        head["ideal"] = draw(st.floats(allow_nan=False, allow_infinity=False))
    return head


@st.composite
def metrics(draw, head: dict | None) -> dict:
    like_head = head is not None and draw(st.booleans())
    metric_tags = draw(tags)
    if like_head:  # often the headline's metric, its tags changed a little
        metric_tags = {**head["tags"], **metric_tags} if draw(st.booleans()) else dict(head["tags"])
    metric = {"name": head["metric"] if like_head else draw(metric_names), "value": draw(numbers),
              "tags": metric_tags, "n": draw(st.one_of(st.none(), st.integers()))}
    if draw(st.booleans()):
        metric.update(ci_low=draw(numbers), ci_high=draw(numbers))
    if draw(st.booleans()):
        metric.update(std=draw(numbers), per_seed=draw(st.lists(numbers, max_size=3)))
    return metric


@st.composite
def task_entries(draw) -> dict:
    status = draw(st.sampled_from(["ok", "ok", "skipped"]))
    head = draw(st.one_of(st.none(), headlines())) if status == "ok" else None
    entry = {"name": draw(st.sampled_from([TASK, "other_task", "t2"])), "version": draw(st.integers(1, 5)),
             "status": status, "skip_reason": draw(st.one_of(st.none(), texts)), "config": {},
             "config_hash": "0123456789abcdef", "seed": 0,
             "metrics": draw(st.lists(metrics(head), max_size=6)) if status == "ok" else [],
             "headline": head, "summary": draw(st.lists(headlines(), max_size=2)),
             "info": draw(st.sampled_from([{}, {"task_card": "tasks/t2/README.md"}, {"task_card": "<b>x</b>"},
                                           {"task_card": 3}])),
             "item_scores": draw(st.dictionaries(texts, st.dictionaries(texts, st.floats(allow_nan=False,
                                                                                         allow_infinity=False),
                                                                        max_size=4), max_size=2))}
    return entry


@st.composite
def results_files(draw) -> dict:
    raw = raw_results(draw(texts), draw(st.sampled_from([ID_A, ID_B, "0123abc"])))
    raw["model"]["kind"] = draw(st.sampled_from(["causal-lm", "masked-lm", "encoder"]))
    raw["model"]["details"] = draw(st.sampled_from([{}, {"pruning": {"parameter_sparsity": 0.5}},
                                                    {"pruning": "x"}]))
    raw["run"]["limit"] = draw(st.one_of(st.none(), st.integers(min_value=1)))
    raw["created_at"] = draw(st.sampled_from(["2024-01-01T00:00:00+00:00", "2025-02-03T04:05:06-07:00"]))
    raw["tasks"] = draw(st.lists(task_entries(), min_size=0, max_size=2))
    return raw


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(files=st.lists(results_files(), min_size=1, max_size=3), draw_plots=st.integers(0, 2))
def test_every_valid_set_of_files_renders(files, draw_plots):
    with tempfile.TemporaryDirectory() as folder:
        for i, raw in enumerate(files):
            path = Path(folder) / f"{i}.json"
            path.write_text(json.dumps(raw), encoding="utf-8")
            try:
                parse_results(path.read_text(encoding="utf-8"), str(path))
            except UserError:
                assume(False)  # the property is about files that validate
        # plots are slow: tiny figures, and most examples check the markdown with plotting stubbed
        stub = None if draw_plots == 0 else (lambda data: b"\x89PNG stub")
        with mock.patch.dict(plots.FIGURE, {"width": 2, "dpi": 20}), \
                mock.patch.object(plots, "_draw", stub or plots._draw):
            markdown, pngs = render_markdown(Path(folder))
    assert markdown.startswith("# membench leaderboard\n")
    assert_tables_intact(markdown)
    assert all(isinstance(png, bytes) and png for png in pngs.values())
