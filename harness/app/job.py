"""`membench run`: the default job on the built-in reference checkpoints."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from harness.app.registry import discover
from harness.app.report import evaluated_message, stage
from harness.core.board_keys import model_key
from harness.core.errors import UserError
from harness.core.io import atomic_write_bytes, cache_dir, check_writable_cache, check_writable_folder
from harness.core.progress import labelled
from harness.core.records import sidecar_name
from harness.core.results import ResultsFile, load_results
from harness.app.parser import JOB_BATCH_SIZE
from harness.core.task import DEFAULT_MAX_BATCH_SIZE, parse_settings
from harness.files.staging import make_staging, publish_folder, sweep_cache
from harness.model.loading import ModelSpec, resolve_device
from harness.reference.build import MANIFEST, BuildConfig, checkpoint_folders, read_manifest
from harness.reference.checkpoints import resolve_reference_model
from harness.reference.controls import (
    DP_CONTROL_EXPECTATIONS,
    REAL_MODEL_EXPECTATIONS,
    REFERENCE_PREFIX,
    ControlReport,
    committed_report,
    compare,
    control_name,
    headlines,
    readings,
    reproduces,
)
from harness.reference.null_bands import TOKENIZER_TWINS, band_report, real_model_files
from harness.reference.pretrained import minilm_folder
from harness.reference.recipes import PretrainedEncoder, reference_recipes
from harness.reference.shipped import shipped_folder, weights_of
from harness.run.runner import EvaluateOptions, evaluate
from leaderboard.build import write_board
from leaderboard.collect import read_submissions


def reference_checkpoints(quick: bool = False) -> list[tuple[object, list[Path]]]:
    """Every reference build and the pretrained encoder, as (its config, its checkpoint folders),
    all-MiniLM-L6-v2 last, with a stage line for each: the shipped weights of its recipe
    (`shipped_reported`), or, for a recipe that has none shipped (the quick ones the tests use, or
    a recipe changed since), a build in the cache (`build_reported`)."""
    found = []
    for config, build_fn in reference_recipes(quick):
        folder = shipped_reported(config)
        if folder is None:
            if not quick:
                stage(f"weights {config.name}: none shipped for recipe {config.digest()}: training them here, "
                      "so its numbers can differ from the board's beyond the last digits")
            folder = build_reported(config, build_fn)
        found.append((config, checkpoint_folders(folder)))
    encoder = PretrainedEncoder()
    return found + [(encoder, [fetch_reported(encoder)])]


def shipped_reported(config) -> Path | None:
    """The shipped build folder of `config`'s recipe (`shipped.shipped_folder`: every file
    sha256-verified), with a stage line; None when its recipe has none shipped."""
    folder = shipped_folder(config.folder_name())
    if folder is not None:
        stage(f"weights {config.name}: shipped ({config.digest()}), sha256 verified")
    return folder


def shipped_comparison(config, folder: Path) -> list[str]:
    """A line per checkpoint of the build in `folder`: its weights' sha256 against the shipped
    build of the same recipe (identical, or not), or that none is shipped."""
    shipped = shipped_folder(config.folder_name())
    if shipped is None or Path(folder).resolve() == shipped.resolve():
        return [] if shipped else [f"no shipped weights of recipe {config.digest()} to compare with"]
    theirs = weights_of(shipped)
    lines = []
    for name, mine in weights_of(folder).items():
        other = theirs.get(name)
        same = "identical to the shipped weights" if mine == other else f"differs from the shipped {str(other)[:12]}"
        lines.append(f"{name}: weights {mine[:12]}, {same}")
    return lines


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
    kept: list[Path] = field(default_factory=list)  # files this run reproduced (`controls.reproduces`), left as they were
    # the real models' controls on their committed submissions (`controls.committed_report`): table, failed
    real_models: tuple[str, list] = ("", [])
    # the DP control pair's, on its committed submissions (`membench reference dp-control`): table, failed
    dp_controls: tuple[str, list] = ("", [])
    # the null checkpoints' bands (`null_bands.band_report`) on this run's files, the real models' committed ones
    # and the untrained causal checkpoints' tokenizers: table, readings outside
    null_bands: tuple[str, list] = ("", [])


def check_job_settings(submissions: Path, board: Path, batch_size: int | str, device: str) -> None:
    """Refuse bad settings of `membench run` before any work (the reference builds train for
    minutes): the device (`models.resolve_device`: a known name, and there on this machine), the
    batch size, and where it writes: the submissions folder, the board file and the cache."""
    if batch_size != "auto" and (not isinstance(batch_size, int) or batch_size < 1):
        raise UserError(f"--batch-size must be a positive integer or auto, got {batch_size}")
    resolve_device(device)
    check_writable_folder(submissions, f"--submissions {submissions}")
    board = Path(board).expanduser()
    if board.is_dir():
        raise UserError(f"--output {board} is a folder; give the board's file name, e.g. LEADERBOARD.md")
    check_writable_folder(board.parent, f"--output {board}")
    check_writable_cache()


def run_reference_job(submissions: Path, board: Path, batch_size: int | str = JOB_BATCH_SIZE, device: str = "auto",
                      quick: bool = False, use_cache: bool = True,
                      max_batch_size: int = DEFAULT_MAX_BATCH_SIZE) -> JobOutcome:
    """Evaluate on each reference checkpoint (shipped, or built where none is shipped:
    `reference_checkpoints`) the tasks its build is a control for (its config's `TASKS` and
    `task_settings`, also in the manifest: corpus and language, names, CPU-sized fine-tuning),
    one results file per checkpoint, into the cache first (`<cache>/runs/latest`); then, per
    checkpoint, keep the results file in `submissions` when the run reproduced it
    (`controls.reproduces`: the same tasks and settings, every headline within its task's
    tolerance), so a run on another machine leaves a checkout unchanged, and otherwise put the new
    one there (named by its build recipe, it replaces the file of an earlier run; one of an earlier
    run under another name, after a task version changed, is deleted: `remove_superseded`).
    Regenerate the board and compare the controls with the files before the run.
    Every setting is checked first (`check_job_settings`), and what killed runs left in the cache is
    swept (`staging.sweep_cache`)."""
    check_job_settings(submissions, board, batch_size, device)
    sweep_cache()
    registry = discover()
    before = newest_by_key(submissions)
    _, evaluated = evaluate_into_runs("latest", reference_checkpoints(quick), registry, batch_size, device,
                                      use_cache, max_batch_size)
    written, kept = place_results(submissions, evaluated, before)
    recipes = {(config.name, config.digest()) for fast in (False, True) for config, _ in reference_recipes(fast)}
    removed = remove_superseded(submissions, written + kept, recipes)
    write_board(submissions, board, board.parent / "site")
    stage(f"board: {board} and the web board {board.parent / 'site' / 'index.html'}")
    committed = [results for _, results in read_submissions(submissions)]
    versions = {name: task.VERSION for name, task in registry.items()}
    return JobOutcome(written + [board], compare_controls(before, evaluated, registry), removed, kept,
                      committed_report(committed, REAL_MODEL_EXPECTATIONS, versions),
                      committed_report(committed, DP_CONTROL_EXPECTATIONS, versions),
                      band_report([results for _, results in evaluated] + real_model_files(committed),
                                  versions=versions, tokenizers=untrained_folders(evaluated)))


def evaluate_controls(found: list[tuple[object, list[Path]]], registry: dict, options: EvaluateOptions,
                      device: str) -> list[tuple[Path, ResultsFile]]:
    """Evaluate on each checkpoint of each build (`reference_checkpoints`) the tasks the build is a
    control for, with its task settings, once per variant of the build (`Recipe.variants`: the
    outside build also with LoRA); (results file, contents) per checkpoint and variant."""
    evaluated = []
    for config, checkpoints in found:
        tasks = [registry[name] for name in config.TASKS if name in registry]
        if not tasks:  # a build that only serves the others (the `ref` attack's reference model)
            continue
        fields = {name for task in tasks for name in task.Config.model_fields}
        recipe = None if isinstance(config, PretrainedEncoder) else (config.name, config.digest())
        for checkpoint, (suffix, extra) in itertools.product(checkpoints, config.variants()):
            raw = checkpoint_task_settings(config, checkpoint) | extra
            settings = parse_settings(tasks, {k: v for k, v in raw.items() if k in fields})
            name = config.name if recipe is None else f"{REFERENCE_PREFIX}{checkpoint.name}{suffix}"
            spec = ModelSpec(model=str(checkpoint), device=device, name=name, reference_recipe=recipe)
            evaluated.append(evaluate_reported(spec, tasks, settings, options))
    return evaluated


def checkpoint_task_settings(config, checkpoint: Path) -> dict[str, str]:
    """The task settings of one checkpoint of a build: its build's (`task_settings`); a causal-LM
    build's depend on the checkpoint's epoch, read from the build's manifest (`BuildConfig.task_settings`)."""
    if isinstance(config, BuildConfig):
        epochs = {entry["folder"]: entry["epoch"] for entry in read_manifest(checkpoint.parent)["checkpoints"]}
        return config.task_settings(epochs[checkpoint.name])
    return config.task_settings()


def evaluate_into_runs(run: str, found: list[tuple[object, list[Path]]], registry: dict, batch_size: int | str,
                       device: str, use_cache: bool = True, max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
                       ) -> tuple[Path, list[tuple[Path, ResultsFile]]]:
    """`evaluate_controls` into a staging folder of the cache, published as `<cache>/runs/<run>`
    (replacing an earlier one) once every checkpoint is done: that folder, and (results file
    there, contents) per checkpoint."""
    scratch = make_staging(cache_dir() / "runs")
    options = EvaluateOptions(output_path=scratch, batch_size=batch_size, max_batch_size=max_batch_size,
                              cpu_batch_size=JOB_BATCH_SIZE, use_cache=use_cache, resolve_model=resolve_reference_model)
    evaluated = evaluate_controls(found, registry, options, device)
    target = cache_dir() / "runs" / run
    publish_folder(scratch, target, replace=True)
    return target, [(target / path.name, results) for path, results in evaluated]


def compare_controls(before: dict[tuple[str, str], tuple[Path, ResultsFile]], evaluated: list[tuple[Path, ResultsFile]],
                     registry: dict) -> ControlReport:
    """The control table: each evaluated checkpoint's headlines against its file before the run
    (of the current task versions), and the expected directions on the evaluated numbers."""
    after = [results for _, results in evaluated]
    replaced = [before[key][1] for key in (model_key(r) for r in after) if key in before]
    versions = {name: task.VERSION for name, task in registry.items()}
    return compare(headlines(replaced, versions), headlines(after), readings(after))


def replicate_controls(submissions: Path, found: list[tuple[object, list[Path]]], batch_size: int | str = JOB_BATCH_SIZE,
                       device: str = "auto") -> tuple[Path, ControlReport]:
    """`membench reference build --compare`: evaluate the checkpoints just rebuilt (`found`: each
    build's config and checkpoint folders, not the shipped ones) on their controls, into
    `<cache>/runs/replication`, and compare them with the files in `submissions` (the committed
    board, made from the shipped weights): a replication of the board from weights trained on this
    machine. Nothing in `submissions` changes."""
    registry = discover()
    target, evaluated = evaluate_into_runs("replication", found, registry, batch_size, device)
    return target, compare_controls(newest_by_key(submissions), evaluated, registry)


def place_results(submissions: Path, evaluated: list[tuple[Path, ResultsFile]],
                  before: dict[tuple[str, str], tuple[Path, ResultsFile]]) -> tuple[list[Path], list[Path]]:
    """Per results file of this run (in `<cache>/runs/latest`): the file of the same checkpoint in
    `submissions` stays when this run reproduced it (`controls.reproduces`) and it carries the records
    of every task this run has records of, otherwise this run's file and its records sidecar are copied
    there (atomically, the sidecar first). Returns (the files written, the files kept)."""
    written, kept = [], []
    for path, results in evaluated:
        earlier = before.get(model_key(results))
        if earlier is not None and earlier[0].name == path.name and reproduces(earlier[1], results) \
                and not gains_records(earlier[1], results):
            kept.append(earlier[0])
            continue
        target = Path(submissions) / path.name
        if results.records_file:
            atomic_write_bytes(target.parent / results.records_file, (path.parent / results.records_file).read_bytes())
        atomic_write_bytes(target, path.read_bytes())
        written.append(target)
    return written, kept


def gains_records(old: ResultsFile, new: ResultsFile) -> bool:
    """Whether `new` has the records of a finished task that `old` lacks (a file made before records)."""
    had = {entry.name for entry in old.tasks if entry.verifiable}
    return any(entry.verifiable and entry.name not in had for entry in new.tasks)


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


def untrained_folders(evaluated: list[tuple[Path, ResultsFile]]) -> dict[str, str]:
    """{untrained causal checkpoint: its folder} among the checkpoints just evaluated, whose tokenizers
    `null_bands.tokenizer_readings` reads."""
    return {control_name(results.model.name): results.model.source for _, results in evaluated
            if control_name(results.model.name) in TOKENIZER_TWINS}


def remove_superseded(submissions: Path, written: list[Path],
                      recipes: set[tuple[str, str]] | None = None) -> list[Path]:
    """Delete the other results files of the reference checkpoints just evaluated (the same
    `model_key`): after a task's version changes, its new file has another name (the name hashes
    the task versions), and the old one would linger beside it. With `recipes` (today's (build
    name, recipe digest), full and quick), delete too every file of a reference build of those
    names made from another recipe: after new weights are shipped (`membench reference build
    --ship`, which deletes the old ones) their rows would stay on the board beside the new ones,
    the DP control pair's included (`membench reference dp-control` makes it again). Returns the
    deleted paths."""
    keys = {model_key(load_results(path)) for path in written}
    keep = {Path(path).resolve() for path in written}
    names = {name for name, _ in recipes or ()}

    def older_recipe(results: ResultsFile) -> bool:
        recipe = results.model.details.get("reference_recipe") or {}
        return recipe.get("build") in names and (recipe["build"], recipe.get("digest")) not in recipes

    removed = [path for path, results in read_submissions(submissions)
               if (model_key(results) in keys or older_recipe(results)) and path.resolve() not in keep]
    for path in removed:
        path.unlink()
        for beside in [*path.parent.glob(f"{path.stem}.*.samples.jsonl"), path.parent / sidecar_name(path.name)]:
            beside.unlink(missing_ok=True)
    return removed


def newest_by_key(submissions: Path) -> dict[tuple[str, str], tuple[Path, ResultsFile]]:
    """The newest results file of each model (`model_key`) in `submissions`, as (path, contents)
    (none when the folder does not exist)."""
    if not Path(submissions).is_dir():
        return {}
    newest: dict[tuple[str, str], tuple[Path, ResultsFile]] = {}
    for path, results in read_submissions(submissions):
        key = model_key(results)
        if key not in newest or results.created_at > newest[key][1].created_at:
            newest[key] = (path, results)
    return newest
