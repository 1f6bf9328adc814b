"""`membench tasks`, the task-setting flags of `membench evaluate`, bad setting values, and the import
names and layering of the packages."""

from __future__ import annotations

import pytest

from harness.app.cli import main
from harness.app.registry import discover
from tasks.mink_membership.task import MinkMembership


def test_tasks_lists_mink_membership(capsys):
    assert main(["tasks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()
    assert header[:4] == ["task", "version", "model", "kinds"]
    [row] = [line for line in lines if line.split()[:1] == ["mink_membership"]]
    assert row.split()[1] == str(MinkMembership.VERSION) == "13"
    assert "causal-lm" in row
    assert "Membership inference" in row
    # one row per registered task, no more
    assert len(lines) == 2 + len(discover())


def test_seed_help_names_every_task_seed_it_does_not_reach():
    """--seed's help says what it seeds and names each task's own seed settings (issue 61: `--seed 1` and `2`
    trained finetune_memorization alike); a task setting named *_seed that the help does not name fails."""
    from harness.app.parser import SEED_HELP

    seeds = {field for task in discover().values() for field in task.Config.model_fields if field.endswith("_seed")}
    assert seeds >= {"finetune_seed", "data_seed", "reference_seed"}
    for field in seeds:
        assert "--" + field.replace("_", "-") in SEED_HELP, field
    for task in ("mink_membership", "finetune_memorization", "weat", "ner_prompt_memorization", "probe_memorization"):
        assert task in SEED_HELP, task


def test_evaluate_help_shows_task_flags(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--lengths", "--language", "--data", "--k-percents", "--bootstrap-resamples", "--stride"):
        assert flag in out, flag
    assert "task settings" in out
    # every Config field of every task has its flag
    for task in discover().values():
        for field in task.Config.model_fields:
            assert "--" + field.replace("_", "-") in out, field
    # a setting whose default differs between the tasks that have it gives each task's
    assert "(default 99 in finetune_memorization, 39 in mink_membership)" in " ".join(out.split())


LIGHT_PARSE = """
import sys
from harness.app.parser import build_parser
args = build_parser("run").parse_args(["run", "--device", "cpu", "--quick"])
build_parser("")  # a command line naming no command (`membench --help`)
assert (args.command, args.device, args.quick) == ("run", "cpu", True)
print(sorted(name for name in ("torch", "transformers", "sklearn", "tasks.mink_membership.task",
                               "harness.reference.recipes") if name in sys.modules))
"""


def test_commands_without_task_flags_parse_without_importing_the_tasks():
    """`membench run`, `--help`, `validate`, `leaderboard` build the parser without the task settings' flags,
    which import every task module and PyTorch (its own process: this one has them all)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LIGHT_PARSE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "[]"
    from harness.app.parser import build_parser

    def flags(parser, command: str) -> set[str]:
        [sub] = [a for a in parser._actions if a.dest == "command"]
        return set(sub.choices[command]._option_string_actions)

    light, full = build_parser("run"), build_parser()
    assert "--lengths" in flags(full, "evaluate") and "--lengths" in flags(build_parser("evaluate"), "evaluate")
    assert "--lengths" not in flags(light, "evaluate") and flags(light, "run") == flags(full, "run")


def one_error_line(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("membench: error: ")
    assert "Traceback" not in captured.err and captured.out == ""
    return lines[0]


def test_unknown_language_value(capsys, tiny_lm, tmp_path):
    out = tmp_path / "out"
    line = one_error_line(capsys, ["evaluate", "--model", str(tiny_lm), "--tasks", "mink_membership",
                                   "--language", "xx", "--output-path", str(out)])
    assert "--language" in line and "mink_membership" in line
    assert "'en'" in line and "'ja'" in line  # names the values that are allowed
    assert not out.exists()


def test_non_integer_lengths(capsys, tiny_lm, tmp_path):
    out = tmp_path / "out"
    line = one_error_line(capsys, ["evaluate", "--model", str(tiny_lm), "--tasks", "mink_membership",
                                   "--lengths", "32,abc", "--output-path", str(out)])
    assert "--lengths" in line
    assert not out.exists()


def test_setting_below_its_minimum(capsys, tiny_lm, tmp_path):
    out = tmp_path / "out"
    line = one_error_line(capsys, ["evaluate", "--model", str(tiny_lm), "--tasks", "mink_membership",
                                   "--bootstrap-resamples", "3", "--output-path", str(out)])
    assert "--bootstrap-resamples" in line and "10" in line
    assert not out.exists()


def test_empty_task_list(capsys, tiny_lm, tmp_path):
    line = one_error_line(capsys, ["evaluate", "--model", str(tiny_lm), "--tasks", " , ",
                                   "--output-path", str(tmp_path / "out")])
    assert "no task" in line


def test_tasks_and_leaderboard_must_be_membench_own(tmp_path, capsys):
    """A `tasks` or `leaderboard` package of another distribution, found first on the import path,
    is refused with one line naming both places (docs/layout.md, "Import names"); membench's own pass."""
    import types

    import leaderboard
    import tasks
    from harness.app.registry import check_own_package
    from harness.core.errors import UserError

    check_own_package(tasks)
    check_own_package(leaderboard)
    foreign = types.ModuleType("tasks")
    foreign.__file__ = str(tmp_path / "site" / "tasks" / "__init__.py")
    with pytest.raises(UserError, match=r"the import name 'tasks' is taken by .*site/tasks"):
        check_own_package(foreign)
    namespace = types.ModuleType("leaderboard")
    namespace.__file__ = None
    namespace.__path__ = [str(tmp_path / "elsewhere" / "leaderboard")]
    with pytest.raises(UserError, match="elsewhere/leaderboard"):
        check_own_package(namespace)


def test_the_import_layering_holds():
    """The import-linter contracts of pyproject.toml (layers, no task or leaderboard below the
    application, independent tasks, pure metrics) are kept: `lint-imports` exits 0."""
    import subprocess
    import sys
    from pathlib import Path

    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_a_foreign_tasks_package_stops_the_command_line_in_one_line(tmp_path, monkeypatch, capsys):
    """`membench` checks both packages at start, before the task flags import any task module."""
    import sys
    import types

    from tests.conftest import assert_user_error

    foreign = types.ModuleType("tasks")
    foreign.__file__ = str(tmp_path / "site" / "tasks" / "__init__.py")
    foreign.__path__ = [str(tmp_path / "site" / "tasks")]
    monkeypatch.setitem(sys.modules, "tasks", foreign)
    assert_user_error(capsys, ["tasks"], None, "the import name 'tasks' is taken by", "site/tasks")
