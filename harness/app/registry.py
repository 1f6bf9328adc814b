"""The task registry as the application sees it: every task under `tasks/` imported and registered.

Only the application imports the task packages (`discover`); the library below it knows tasks only
through `harness.core.task.registered_tasks` and the classes it is handed.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from harness.core.errors import UserError
from harness.core.results import ResultsFile
from harness.core.task import Task, registered_tasks, select_from


def check_own_package(module) -> None:
    """A `UserError` unless the top-level package `module` (`tasks`, `leaderboard`) is membench's
    own: installed beside `harness`. Another distribution's package of the same name, earlier on
    the import path, would otherwise be imported in its place (docs/layout.md, "Import names")."""
    import harness

    ours = Path(harness.__file__).resolve().parent.parent
    found = (Path(module.__file__).parent if getattr(module, "__file__", None)  # a namespace package has none
             else Path(next(iter(module.__path__)))).resolve()
    if found.parent != ours:
        raise UserError(f"the import name {module.__name__!r} is taken by {found} (another package of that name comes "
                        f"first on the import path); membench's own is in {ours / module.__name__}: remove or "
                        "uninstall the other one")


def discover() -> dict[str, type[Task]]:
    """Import every `tasks.<name>.task` module so the tasks register themselves; name -> class.
    (`membench` first checks that `tasks` is its own package: `check_own_package`.)"""
    import tasks

    for module in pkgutil.iter_modules(tasks.__path__):
        if module.ispkg:
            importlib.import_module(f"tasks.{module.name}.task")
    return registered_tasks()


def select(names: str) -> list[type[Task]]:
    """Tasks named in a comma-separated list, or all of them for `all` (`select_from` on `discover()`)."""
    return select_from(discover(), names)


def newer_task_versions(results: ResultsFile) -> list[str]:
    """A line for each task entry whose version is newer than this membench's task of that name:
    a file made by a newer membench (or by hand), whose numbers this one cannot vouch for. Older
    versions are fine, and tasks this membench does not know are not checked."""
    known = discover()
    return [f"task {entry.name} version {entry.version} is newer than this membench's ({known[entry.name].VERSION})"
            for entry in results.tasks if entry.name in known and entry.version > known[entry.name].VERSION]


def submission_problem(results: ResultsFile) -> str | None:
    """Why a valid results file may not be submitted (`membench validate --strict`), or None."""
    if results.run.limit is not None:
        return (f"made with --limit {results.run.limit} (a test run on cut data, not comparable with full runs): "
                "not for submission; evaluate again without --limit")
    newer = newer_task_versions(results)
    if newer:
        return f"{newer[0]}: not for submission; validate it with the membench that made it, or update this one"
    broken = [task.name for task in results.tasks if task.config.get("dp_no_noise_for_testing")]
    if broken:
        return (f"{broken[0]} ran with --dp-no-noise-for-testing (a broken DP mechanism whose claimed epsilon is "
                "false, for tests of the audit): not for submission")
    return None
