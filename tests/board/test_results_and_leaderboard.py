"""The results schema (write -> load, `membench validate`) and the leaderboard built from submissions."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.app.cli import main
from harness.core.results import (
    Environment,
    ResultsFile,
    load_results,
    safe_file_stem,
    write_results,
)
from harness.run.runner import results_stem
from leaderboard.build import PLOTS_FOLDER, render_markdown
from leaderboard.collect import newest_entries, read_submissions
from leaderboard.render import agreement_table, all_metrics, task_table
from tests.helpers.board_files import (
    HEADLINE,
    ID_A,
    ID_B,
    ID_C,
    LENGTHS,
    SHORT,
    TASK,
    full_table,
    make_results,
    records,
    section,
    submit,
    table,
    unescape_markdown,
    unescaped_pipes,
)


@pytest.fixture
def submissions(tmp_path) -> Path:
    folder = tmp_path / "submissions"
    folder.mkdir()
    submit(folder, make_results("model-a", ID_A, auc=0.61))
    submit(folder, make_results("model-b", ID_B, auc=0.72))
    return folder


def test_write_load_round_trip(tmp_path):
    results = make_results("round-trip", auc=0.654321)
    path = submit(tmp_path, results)
    loaded = load_results(path)
    assert loaded == results
    assert loaded.task(TASK).headline == HEADLINE
    assert loaded.task(TASK).metrics[2].value == pytest.approx(0.644321)
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["schema_version"] == 1 and raw["model"]["identity"] == ID_A
    assert path.read_text(encoding="utf-8").endswith("}\n")
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind


def test_write_results_validates_before_writing(tmp_path):
    good = make_results()
    bad = good.model_copy(update={"model": good.model.model_copy(update={"identity_kind": "md5"})})
    with pytest.raises(ValidationError):
        write_results(bad, tmp_path / "bad.json")
    assert list(tmp_path.iterdir()) == []


def test_validate_command(capsys, tmp_path):
    good = submit(tmp_path, make_results("good-model"))
    assert main(["validate", str(good)]) == 0
    assert capsys.readouterr().out.strip() == f"{good}: ok (good-model, 1 task(s))"

    raw = json.loads(good.read_text())
    raw["tasks"][0]["metrics"][0]["value"] = "very high"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    assert main(["validate", str(good), str(bad)]) == 2
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith("membench: error: ") and str(bad) in line and "tasks.0.metrics.0.value" in line
    assert captured.out.strip() == f"{good}: ok (good-model, 1 task(s))"  # the good file is still reported


def test_validate_rejects_unknown_fields(capsys, tmp_path):
    raw = json.loads(submit(tmp_path, make_results()).read_text())
    raw["model"]["favourite_colour"] = "blue"
    path = tmp_path / "extra.json"
    path.write_text(json.dumps(raw))
    assert main(["validate", str(path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "model.favourite_colour" in line


def test_validate_strict_refuses_runs_with_limit(capsys, tmp_path):
    full = submit(tmp_path, make_results("full-model"))
    limited = submit(tmp_path, make_results("quick-model", ID_B, limit=5))
    # plain validate: a run with --limit is a valid results file
    assert main(["validate", str(limited)]) == 0
    assert capsys.readouterr().out.strip() == f"{limited}: ok (quick-model, 1 task(s))"
    # --strict: refused for submission, one line naming the file and the limit, exit status 2;
    # every file is still checked and reported
    assert main(["validate", "--strict", str(limited), str(full)]) == 2
    captured = capsys.readouterr()
    [line] = captured.err.splitlines()
    assert line.startswith("membench: error: ") and str(limited) in line
    assert "--limit 5" in line and "not for submission" in line
    assert captured.out.strip() == f"{full}: ok (full-model, 1 task(s))"
    assert main(["validate", "--strict", str(full)]) == 0


def test_validate_strict_refuses_the_broken_dp_mechanism(capsys, tmp_path):
    results = make_results("broken-dp")
    results.tasks[0].config.update(dp_epsilon=1.0, dp_no_noise_for_testing=True)
    path = submit(tmp_path, results)
    assert main(["validate", str(path)]) == 0
    capsys.readouterr()
    assert main(["validate", "--strict", str(path)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "--dp-no-noise-for-testing" in line and "not for submission" in line


def test_validate_reports_every_bad_file_on_its_own_line(capsys, tmp_path):
    limited = submit(tmp_path, make_results("quick-model", ID_B, limit=3))
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert main(["validate", "--strict", str(broken), str(limited)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and str(broken) in lines[0] and str(limited) in lines[1]


def test_the_committed_submissions_pass_validate_strict(capsys):
    files = sorted((Path(__file__).parents[2] / "submissions").glob("*.json"))
    assert files
    assert main(["validate", "--strict", *map(str, files)]) == 0
    assert capsys.readouterr().err == ""


def test_the_committed_board_is_current_and_at_most_200_lines():
    """LEADERBOARD.md is what the committed submissions render to (what CI's `membench leaderboard
    --check` checks) and stays short to read: at most 200 lines (issue 43), the controls' per-task
    key metrics and the long tables being on the web board."""
    root = Path(__file__).parents[2]
    committed = (root / "LEADERBOARD.md").read_text(encoding="utf-8")
    assert len(committed.splitlines()) <= 200
    assert render_markdown(root / "submissions")[0] == committed


# ---------------------------------------------------------------- file names


@pytest.mark.parametrize("name", ["../../etc/passwd x", "..", "", "   ", "a/b\\c d", ".hidden", "名前のモデル",
                                  "x" * 300, "-_.weird.-_", "org/model name (v2)"])
def test_safe_file_stem(name, tmp_path):
    stem = safe_file_stem(name)
    assert stem and len(stem) <= 80
    assert "/" not in stem and "\\" not in stem and " " not in stem
    assert not stem.startswith(".") and ".." not in stem
    assert re.fullmatch(r"[A-Za-z0-9._-]+", stem)
    assert (tmp_path / f"{stem}.json").resolve().parent == tmp_path.resolve()


def test_safe_file_stem_keeps_the_readable_part():
    stem = safe_file_stem("../../etc/passwd x")
    assert "etc" in stem and "passwd" in stem and stem.startswith("etc")
    assert safe_file_stem("gpt2-small_v1.0") == "gpt2-small_v1.0"


def test_results_stem_is_stable():
    base = make_results("org/my model", ID_A, created_at="2024-01-01T00:00:00+00:00", auc=0.6)
    stem = results_stem(base)
    # Pinned: the file name of a run must not change between membench versions or machines.
    # (name, identity[:12], hash of [kind, [(task, version, config_hash)]]) for a causal LM,
    # mink_membership v1, config hash 0123456789abcdef.
    assert stem == "org-my-model__aaaaaaaaaaaa__194acdd8"
    assert results_stem(ResultsFile.model_validate_json(base.model_dump_json())) == stem
    # Not part of the name: when it ran, its numbers, the machine.
    rerun = make_results("org/my model", ID_A, created_at="2025-05-05T12:00:00+00:00", auc=0.9)
    rerun = rerun.model_copy(update={"environment": Environment(python="3.10", torch="2.1", transformers="4.56",
                                                                platform="darwin")})
    assert results_stem(rerun) == stem
    # Part of the name: the model and what was computed.
    assert results_stem(make_results("org/my model", ID_B)) != stem
    assert results_stem(make_results("org/my model", ID_A, config_hash="fedcba9876543210")) != stem
    assert results_stem(make_results("other", ID_A)).startswith("other__")


# ---------------------------------------------------------------- leaderboard


def test_leaderboard_writes_board_and_plots(capsys, tmp_path, submissions):
    output = tmp_path / "board" / "LEADERBOARD.md"
    assert main(["leaderboard", "--submissions", str(submissions), "--output", str(output)]) == 0
    assert capsys.readouterr().out.split() == [str(output), str(output.parent / "site" / "index.html")]
    markdown = output.read_text(encoding="utf-8")
    assert markdown.startswith("# membench leaderboard\n")
    assert "2 results file(s)" in markdown
    plot = output.parent / PLOTS_FOLDER / f"{TASK}.png"
    assert plot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert f"]({PLOTS_FOLDER}/{TASK}.png)" in markdown
    assert (output.parent / "site" / "tasks" / f"{TASK}.html").is_file()
    overview = records(table(section(markdown, "## Overview")))
    by_model = {row["model"]: row for row in overview}
    assert set(by_model) == {f"model-a ({ID_A[:8]})", f"model-b ({ID_B[:8]})"}
    [headline_column] = [c for c in overview[0] if c not in ("model", "kind")]
    assert headline_column == "mink ↓"  # the short name; the legend below says what it is
    assert f"- mink: mink\\_membership, {HEADLINE.label}, lower is better" in section(markdown, "## Overview")
    assert float(by_model[f"model-a ({ID_A[:8]})"][headline_column]) == 0.61
    assert float(by_model[f"model-b ({ID_B[:8]})"][headline_column]) == 0.72
    # the task's section: a row per model, its key metrics (here the headline) with their interval
    rows = records(table(section(markdown, f"## {TASK}")))
    assert [r["model"] for r in rows] == [f"model-a ({ID_A[:8]})", f"model-b ({ID_B[:8]})"]
    assert rows[1][f"{HEADLINE.label} ↓"] == "0.720 [0.670, 0.770]"


def test_every_metric_is_in_the_full_table(submissions):
    full = all_metrics(TASK, newest_entries(read_submissions(submissions)))
    rows = [dict(zip(full.headers, row)) for row in full.rows]
    assert len(rows) == 2 * len(LENGTHS)
    row = next(r for r in rows if r["model"].startswith("model-b") and r["length"] == "64")
    assert row["auc"] == "0.710 [0.660, 0.760]" and row["runs"] == "1" and float(row["tpr@0.1fpr"]) == 0.25
    assert full.numeric == [False, True, True, False, False, True, True]


def test_leaderboard_numbers_have_three_decimals(submissions):
    markdown, _ = render_markdown(submissions)
    overview = records(table(section(markdown, "## Overview")))
    assert sorted(row["mink ↓"] for row in overview) == ["0.610", "0.720"]


def test_leaderboard_check(capsys, tmp_path, submissions):
    output = tmp_path / "LEADERBOARD.md"
    check = ["leaderboard", "--submissions", str(submissions), "--output", str(output), "--check"]
    assert main(check) == 1  # not written yet
    assert main(["leaderboard", "--submissions", str(submissions), "--output", str(output)]) == 0
    assert main(check) == 0

    original = output.read_text(encoding="utf-8")
    assert "model-a" in original
    output.write_text(original.replace("model-a", "model-z"), encoding="utf-8")
    capsys.readouterr()
    assert main(check) == 1
    assert "stale" in capsys.readouterr().err

    output.write_text(original, encoding="utf-8")
    assert main(check) == 0
    submit(submissions, make_results("model-c", ID_C, auc=0.5))
    assert main(check) == 1
    assert main(["leaderboard", "--submissions", str(submissions), "--output", str(output)]) == 0
    assert main(check) == 0
    assert "model-c" in output.read_text(encoding="utf-8")


def test_leaderboard_is_deterministic(tmp_path, submissions):
    first = render_markdown(submissions)
    second = render_markdown(submissions)
    assert first == second
    markdown, plots = first
    assert set(plots) == {f"{TASK}.png"}
    now = dt.datetime.now()
    for clock in (now, now.astimezone(dt.timezone.utc)):
        assert clock.strftime("%Y-%m-%d") not in markdown

    # written twice: the same bytes on disk
    out1, out2 = tmp_path / "one" / "LB.md", tmp_path / "two" / "LB.md"
    for output in (out1, out2):
        assert main(["leaderboard", "--submissions", str(submissions), "--output", str(output)]) == 0
    assert out1.read_bytes() == out2.read_bytes()
    plot = Path(PLOTS_FOLDER) / f"{TASK}.png"
    assert (out1.parent / plot).read_bytes() == (out2.parent / plot).read_bytes()


def test_leaderboard_does_not_depend_on_file_creation_order(tmp_path):
    runs = [make_results("model-a", ID_A, created_at="2024-01-01T00:00:00+00:00", auc=0.61),
            make_results("model-a", ID_A, created_at="2024-03-01T00:00:00+00:00", auc=0.65,
                         config_hash="1111111111111111"),
            make_results("model-b", ID_B, auc=0.72), make_results("model-c", ID_C, auc=0.55)]
    rendered = []
    orders = {"forward": runs, "backward": runs[::-1], "mixed": [runs[2], runs[0], runs[3], runs[1]]}
    for parent, order in orders.items():
        folder = tmp_path / parent / "submissions"  # same folder name: it appears in the board
        folder.mkdir(parents=True)
        for i, results in enumerate(order):
            # created in this order, numbered in this order (so name order differs between the folders too)
            path = submit(folder, results, f"{i:02d}-{results_stem(results)}.json")
            os.utime(path, (1_700_000_000 + 1000 * i,) * 2)
        rendered.append(render_markdown(folder))
    assert sorted(p.name for p in (tmp_path / "forward" / "submissions").iterdir()) != \
        sorted(p.name for p in (tmp_path / "backward" / "submissions").iterdir())
    assert rendered[0] == rendered[1] == rendered[2]
    assert "4 results file(s)" in rendered[0][0]


def test_newest_run_is_shown_and_runs_counted(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    # The older run's file name sorts last, so neither "last file read" nor "largest name" picks the newest.
    submit(folder, make_results("model-a", ID_A, created_at="2024-01-01T00:00:00+00:00", auc=0.111), "zzz-old.json")
    submit(folder, make_results("model-a", ID_A, created_at="2024-06-01T00:00:00+00:00", auc=0.777,
                                config_hash="2222222222222222"), "aaa-new.json")
    submit(folder, make_results("model-b", ID_B, auc=0.5), "mmm-b.json")
    markdown, _ = render_markdown(folder)
    assert "0.111" not in markdown
    overview = {row["model"]: row for row in records(table(section(markdown, "## Overview")))}
    assert set(overview) == {f"model-a ({ID_A[:8]})", f"model-b ({ID_B[:8]})"}
    [column] = [c for c in next(iter(overview.values())) if c.startswith(SHORT)]
    assert float(overview[f"model-a ({ID_A[:8]})"][column]) == 0.777
    rows = records(table(full_table(folder)))
    a_rows = [r for r in rows if r["model"] == f"model-a ({ID_A[:8]})"]
    assert len(a_rows) == len(LENGTHS)
    assert {r["runs"] for r in a_rows} == {"2"}
    assert next(r for r in a_rows if r["length"] == "128")["auc"].startswith("0.777 ")
    assert {r["runs"] for r in rows if r["model"].startswith("model-b")} == {"1"}


def test_equal_weights_under_different_names_are_different_rows(tmp_path):
    """Two untrained models from one seed have equal weights but different tokenizers: the board
    keys a model on (identity, name), so neither hides the other."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    submit(folder, make_results("untrained-en", ID_A, auc=0.48), "en.json")
    submit(folder, make_results("untrained-ja", ID_A, auc=0.52), "ja.json")
    markdown, _ = render_markdown(folder)
    overview = {row["model"]: row for row in records(table(section(markdown, "## Overview")))}
    assert set(overview) == {f"untrained-en ({ID_A[:8]})", f"untrained-ja ({ID_A[:8]})"}
    rows = records(table(full_table(folder)))
    assert {r["runs"] for r in rows} == {"1"}


EVIL = "<img src=x onerror=alert(1)>|**bold**[link](http://x)"


def test_model_names_are_escaped(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    submit(folder, make_results(EVIL, ID_A, auc=0.6))
    submit(folder, make_results("multi\nline | name", ID_B, auc=0.7))
    submit(folder, make_results("`code` _under_ ~strike~ \\back", ID_C, status="skipped",
                                skip_reason=EVIL + "\n## injected heading"))
    markdown, _ = render_markdown(folder)
    assert "<img" not in markdown
    assert "**bold**" not in markdown and "[link](http://x)" not in markdown
    assert "\n## injected" not in markdown
    assert "&lt;img src=x onerror=alert\\(1\\)&gt;\\|\\*\\*bold\\*\\*\\[link\\]\\(http://x\\)" in markdown

    for heading in ("## Overview", f"## {TASK}"):
        lines = table(section(markdown, heading))
        assert re.fullmatch(r"\|[-|]+\|", lines[1].replace(":", "-").replace(" ", ""))
        expected = unescaped_pipes(lines[0])
        assert all(unescaped_pipes(line) == expected for line in lines), heading
        shown = {unescape_markdown(row["model"]) for row in records(lines)}
        assert f"{EVIL} ({ID_A[:8]})" in shown
        assert f"multi line | name ({ID_B[:8]})" in shown
    overview = records(table(section(markdown, "## Overview")))
    assert {unescape_markdown(r["model"]) for r in overview} >= {f"`code` _under_ ~strike~ \\back ({ID_C[:8]})"}
    notes = [line for line in section(markdown, f"## {TASK}").splitlines() if line.startswith("- skipped")]
    assert len(notes) == 1 and "&lt;img" in notes[0] and "\\*\\*bold\\*\\*" in notes[0]


def submit_raw(folder: Path, results: ResultsFile, file_name: str, **model_fields) -> Path:
    """Write a results file with model fields or task name changed in the JSON, past the schema."""
    raw = json.loads(results.model_dump_json())
    task_name = model_fields.pop("task_name", None)
    raw["model"].update(model_fields)
    if task_name is not None:
        raw["tasks"][0]["name"] = task_name
    path = folder / file_name
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


@pytest.mark.parametrize("fields, field_name", [
    ({"identity": "ab|<img x"}, "model.identity"),
    ({"kind": "x|<b>y"}, "model.kind"),
    ({"task_name": "../../escaped"}, "tasks.0.name"),
])
def test_identity_kind_and_task_name_are_constrained(capsys, tmp_path, fields, field_name):
    """What becomes a file name or an unescaped table cell is checked by the schema: the file is refused."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    submit_raw(folder, make_results("m", ID_A), "evil.json", **fields)
    submit(folder, make_results("fine", ID_B), "fine.json")
    output = tmp_path / "site" / "board" / "LB.md"
    capsys.readouterr()
    assert main(["leaderboard", "--submissions", str(folder), "--output", str(output)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("membench: error: ") and "evil.json" in line and field_name in line
    assert not (tmp_path / "site").exists()


def test_leaderboard_bad_submission_is_a_user_error(capsys, tmp_path, submissions):
    (submissions / "broken.json").write_text("{")
    output = tmp_path / "LB.md"
    assert main(["leaderboard", "--submissions", str(submissions), "--output", str(output)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("membench: error: ") and "broken.json" in line
    assert not output.exists() and not (tmp_path / PLOTS_FOLDER).exists()


def test_leaderboard_missing_submissions_folder(capsys, tmp_path):
    output = tmp_path / "LB.md"
    assert main(["leaderboard", "--submissions", str(tmp_path / "nope"), "--output", str(output)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("membench: error: ") and "nope" in line
    assert not output.exists()


LIMIT_LEGEND = "† limit N: run with `--limit N`"


def test_runs_with_limit_are_marked_in_every_table(tmp_path):
    from harness.core.results import Headline

    summary = [Headline(metric="auc", tags={"score": "min_k_20", "length": "128"}, label="AUC 128", better="lower")]
    runs = [make_results("model-a", ID_A, auc=0.61), make_results("model-b", ID_B, auc=0.72, limit=5),
            make_results("model-c", ID_C, auc=0.55), make_results("model-c", ID_C, auc=0.4, task="other_task", limit=7)]
    for k, results in enumerate(runs):
        for entry in results.tasks:
            entry.summary = summary
            entry.item_scores = {"auc_by_item": {"x": 0.1 * k, "y": 0.5, "z": 0.3 - 0.1 * k}}
        submit(tmp_path, results, f"{k}.json")
    markdown, _ = render_markdown(tmp_path)
    a, b, c = f"model-a ({ID_A[:8]})", f"model-b ({ID_B[:8]}) † limit 5", f"model-c ({ID_C[:8]}) † limit 7"

    overview_text = section(markdown, "## Overview")
    overview = {row["model"]: row for row in records(table(overview_text))}
    assert set(overview) == {a, b, c}
    [column] = [col for col in overview[a] if col.startswith(SHORT)]
    [other] = [col for col in overview[a] if col.startswith("other ")]
    assert overview[b][column] == "0.720"  # all of model-b's runs are limited: its label says so
    # model-c mixes a full run and a limited one: the limited run's value is marked too
    assert overview[c][column] == "0.550" and overview[c][other] == "0.400 †"
    assert LIMIT_LEGEND in overview_text.split("\n|")[-1]  # below the table

    mink = section(markdown, f"## {TASK}")
    summary_rows = records(table(mink))
    assert [row["model"] for row in summary_rows] == [a, b, f"model-c ({ID_C[:8]})"]  # model-c's mink run is full
    board = newest_entries(read_submissions(tmp_path))
    all_rows = records(table(task_table(TASK, board)))
    assert {row["model"] for row in all_rows} == {a, b, f"model-c ({ID_C[:8]})"}
    agreement = records(table(agreement_table(TASK, board)))
    assert {(row["model A"], row["model B"]) for row in agreement} == {(a, b), (a, f"model-c ({ID_C[:8]})"),
                                                                         (b, f"model-c ({ID_C[:8]})")}
    assert LIMIT_LEGEND in mink
    other_rows = records(table(section(markdown, "## other_task")))
    assert {row["model"] for row in other_rows} == {c}
    assert LIMIT_LEGEND in section(markdown, "## other_task")


def test_a_skipped_run_with_limit_is_marked_and_full_boards_carry_no_mark(tmp_path):
    submit(tmp_path, make_results("model-a", ID_A, auc=0.61))
    full, _ = render_markdown(tmp_path)
    assert "†" not in full and "--limit" not in full
    submit(tmp_path, make_results("model-b", ID_B, status="skipped", skip_reason="not a causal LM", limit=2))
    markdown, _ = render_markdown(tmp_path)
    assert f"- skipped model-b ({ID_B[:8]}) † limit 2: not a causal LM" in section(markdown, f"## {TASK}")


def test_a_task_summary_table_shows_its_summary_metrics_with_directions(tmp_path):
    from harness.core.results import Headline

    summary = [Headline(metric="auc", tags={"score": "min_k_20", "length": "128"}, label="AUC 128", better="lower"),
               Headline(metric="auc", tags={"score": "min_k_20", "length": "32"}, label="AUC 32", better="ideal",
                        ideal=0.5)]
    for name, identity, auc in (("model-a", ID_A, 0.7), ("model-b", ID_B, 0.6)):
        results = make_results(name, identity, auc=auc)
        results.tasks[0].summary = summary
        submit(tmp_path, results)
    markdown, _ = render_markdown(tmp_path)
    rows = records(table(section(markdown, f"## {TASK}")))
    assert rows == [{"model": "model-a (aaaaaaaa)", "AUC 128 ↓": "0.700 [0.650, 0.750]",
                     "AUC 32 →0.5": "0.680 [0.630, 0.730]"},
                    {"model": "model-b (bbbbbbbb)", "AUC 128 ↓": "0.600 [0.550, 0.650]",
                     "AUC 32 →0.5": "0.580 [0.530, 0.630]"}]
    with pytest.raises(ValidationError):
        Headline(metric="ss", label="SS", better="ideal")  # an ideal value is required
    with pytest.raises(ValidationError):
        Headline(metric="ss", label="SS", better="higher", ideal=50.0)
