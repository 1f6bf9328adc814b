"""`membench run`: the default job on the built-in reference checkpoints."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.app.registry import discover
from harness.app.report import evaluated_message, stage
from harness.core.board_keys import model_key
from harness.core.errors import UserError
from harness.core.io import check_writable_cache, check_writable_folder
from harness.core.progress import labelled
from harness.core.results import ResultsFile, load_results
from harness.core.task import parse_settings
from harness.files.staging import sweep_cache
from harness.model.loading import ModelSpec, resolve_device
from harness.reference.build import MANIFEST, checkpoint_folders
from harness.reference.checkpoints import resolve_reference_model
from harness.reference.controls import REFERENCE_PREFIX, ControlReport, compare, headlines, readings
from harness.reference.pretrained import minilm_folder
from harness.reference.recipes import PretrainedEncoder, reference_recipes
from harness.run.runner import EvaluateOptions, evaluate
from leaderboard.build import write_board
from leaderboard.collect import read_submissions


def reference_checkpoints(quick: bool = False) -> list[tuple[object, list[Path]]]:
    """Build (if missing) every reference build and fetch the pretrained encoder, a stage line for
    each (`build_reported`, `fetch_reported`); (its config, its checkpoint folders) for each,
    all-MiniLM-L6-v2 last."""
    built = [(config, build_reported(config, build_fn)) for config, build_fn in reference_recipes(quick)]
    encoder = PretrainedEncoder()
    return [(config, checkpoint_folders(folder)) for config, folder in built] + [(encoder, [fetch_reported(encoder)])]


def manifest_stamp(folder: Path) -> tuple[int, int] | None:
    """(inode, modification time in ns) of a build's manifest, None when there is none: a build
    publishes a new folder, so an unchanged stamp means the build was already there."""
    try:
        found = (Path(folder) / MANIFEST).stat()
    except OSError:
        return None
    return found.st_ino, found.st_mtime_ns


def build_reported(config, build_fn: Callable[..., Path], folder: Path | None = None, force: bool = False) -> Path:
    """`build_fn(config, folder, force=force)`, its training bars named `build <name>`, with stage
    lines on stderr: `build <name>: started`, then `cached (<recipe digest>)` or `finished in N s`."""
    target = Path(folder) if folder else config.default_folder()
    before = manifest_stamp(target)
    stage(f"build {config.name}: started")
    started = time.perf_counter()
    with labelled(f"build {config.name}"):
        built = build_fn(config, folder, force=force)
    if before is not None and manifest_stamp(built) == before:
        stage(f"build {config.name}: cached ({config.digest()})")
    else:
        stage(f"build {config.name}: finished in {time.perf_counter() - started:.0f} s")
    return built


def fetch_reported(encoder: PretrainedEncoder) -> Path:
    """The pretrained encoder's folder (`pretrained.minilm_folder`: fetched into the cache when
    missing), with a stage line on stderr."""
    started = time.perf_counter()
    folder = minilm_folder()
    stage(f"fetch {encoder.name}: ready in {time.perf_counter() - started:.0f} s")
    return folder


@dataclass(frozen=True)
class JobOutcome:
    """What `membench run` wrote, and how the controls compare with the submissions before it."""

    written: list[Path]
    controls: ControlReport
    removed: list[Path] = field(default_factory=list)  # earlier files of the same checkpoints (`remove_superseded`)


def check_job_settings(submissions: Path, board: Path, batch_size: int, device: str) -> None:
    """Refuse bad settings of `membench run` before any work (the reference builds train for
    minutes): the device (`models.resolve_device`: a known name, and there on this machine), the
    batch size, and where it writes: the submissions folder, the board file and the cache."""
    if batch_size < 1:
        raise UserError(f"--batch-size must be a positive integer, got {batch_size}")
    resolve_device(device)
    check_writable_folder(submissions, f"--submissions {submissions}")
    board = Path(board).expanduser()
    if board.is_dir():
        raise UserError(f"--output {board} is a folder; give the board's file name, e.g. LEADERBOARD.md")
    check_writable_folder(board.parent, f"--output {board}")
    check_writable_cache()


def run_reference_job(submissions: Path, board: Path, batch_size: int = 16, device: str = "auto",
                      quick: bool = False, use_cache: bool = True) -> JobOutcome:
    """Build the reference checkpoints if missing, evaluate on each checkpoint the tasks its build
    is a control for (its config's `TASKS` and `task_settings`, also in the manifest: corpus and language,
    names, CPU-sized fine-tuning), write one results file per checkpoint into `submissions`
    (named by its build recipe, so a run on another machine replaces the file rather than adding
    one; the file of an earlier run under another name, after a task version changed, is deleted:
    `remove_superseded`), regenerate the board, and compare the controls with the files they replaced.
    Every setting is checked first (`check_job_settings`), and what killed runs left in the cache is
    swept (`staging.sweep_cache`)."""
    check_job_settings(submissions, board, batch_size, device)
    sweep_cache()
    registry = discover()
    before = newest_by_key(submissions)
    options = EvaluateOptions(output_path=submissions, batch_size=batch_size, use_cache=use_cache,
                              keep_unchanged=True, resolve_model=resolve_reference_model)
    written, after = [], []
    for config, checkpoints in reference_checkpoints(quick):
        tasks = [registry[name] for name in config.TASKS if name in registry]
        if not tasks:  # a build that only serves the others (the `ref` attack's reference model)
            continue
        fields = {name for task in tasks for name in task.Config.model_fields}
        settings = parse_settings(tasks, {k: v for k, v in config.task_settings().items() if k in fields})
        recipe = None if isinstance(config, PretrainedEncoder) else (config.name, config.digest())
        for checkpoint in checkpoints:
            name = config.name if recipe is None else f"{REFERENCE_PREFIX}{checkpoint.name}"
            spec = ModelSpec(model=str(checkpoint), device=device, name=name, reference_recipe=recipe)
            path, results = evaluate_reported(spec, tasks, settings, options)
            written.append(path)
            after.append(results)
    removed = remove_superseded(submissions, written)
    write_board(submissions, board, board.parent / "site")
    stage(f"board: {board} and the web board {board.parent / 'site' / 'index.html'}")
    replaced = [before[key] for key in (model_key(r) for r in after) if key in before]
    versions = {name: task.VERSION for name, task in registry.items()}
    return JobOutcome(written + [board], compare(headlines(replaced, versions), headlines(after), readings(after)),
                      removed)


def evaluate_reported(spec: ModelSpec, tasks: list, settings: dict[str, str],
                      options: EvaluateOptions) -> tuple[Path, ResultsFile]:
    """`runner.evaluate` of one checkpoint, with stage lines on stderr: `evaluate <name>: <tasks>`,
    then `evaluate <name>: done in N s` and each task's headline on an indented line. Returns the
    results file's path and its contents."""
    stage(f"evaluate {spec.name}: {', '.join(task.NAME for task in tasks)}")
    started = time.perf_counter()
    path = evaluate(spec, tasks, settings, options)
    results = load_results(path)
    stage(evaluated_message(spec.name, results, time.perf_counter() - started))
    return path, results


def remove_superseded(submissions: Path, written: list[Path]) -> list[Path]:
    """Delete the other results files of the reference checkpoints just evaluated (the same
    `model_key`): after a task's version changes, its new file has another name (the name hashes
    the task versions), and the old one would linger beside it. Returns the deleted paths."""
    keys = {model_key(load_results(path)) for path in written}
    keep = {Path(path).resolve() for path in written}
    removed = [path for path, results in read_submissions(submissions)
               if model_key(results) in keys and path.resolve() not in keep]
    for path in removed:
        path.unlink()
        for samples in path.parent.glob(f"{path.stem}.*.samples.jsonl"):
            samples.unlink()
    return removed


def newest_by_key(submissions: Path) -> dict[tuple[str, str], ResultsFile]:
    """The newest results file of each model (`model_key`) in `submissions` (none when it does not exist)."""
    if not Path(submissions).is_dir():
        return {}
    newest: dict[tuple[str, str], ResultsFile] = {}
    for _, results in read_submissions(submissions):
        key = model_key(results)
        if key not in newest or results.created_at > newest[key].created_at:
            newest[key] = results
    return newest
