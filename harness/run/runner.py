"""`membench evaluate`: tasks x one model -> one validated results file (+ per-sample JSONL)."""

from __future__ import annotations

import datetime as _dt
import logging
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Literal, TypeVar

from pydantic import ValidationError

import harness
from harness.core import interrupts, progress, records
from harness.core.board_keys import board_key
from harness.core.errors import UserError, warn
from harness.core.io import atomic_write_text, canonical_json, sha256_file, sha256_text
from harness.core.model_types import LoadedModel
from harness.core.records import normalise, records_digest
from harness.core.results import (
    SCHEMA_VERSION,
    Environment,
    HarnessInfo,
    ModelInfo,
    ResultsFile,
    RunSettings,
    TaskEntry,
    safe_file_stem,
    write_results,
)
from harness.core.task import DEFAULT_MAX_BATCH_SIZE, LimitTooSmall, RunContext, Task, TaskConfig
from harness.files import staging
from harness.model import loading as models
from harness.run import cache, heap
from harness.scoring import distributed, fitting

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class EvaluateOptions:
    output_path: Path = Path("submissions")
    # A number, or "auto": on an accelerator, batches start at `max_batch_size` and are halved where
    # they do not fit (`harness.scoring.fitting`); on a CPU, `cpu_batch_size` (the command's default).
    batch_size: int | Literal["auto"] = 16
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    cpu_batch_size: int = 16
    limit: int | None = None
    seed: int = 0
    log_samples: bool = False
    use_cache: bool = True
    progress: bool | None = None
    # `--tasks all`: a task that cannot score this model (its `check_model` refuses it) is skipped
    # with the reason, not an error, and a task of another model kind is skipped without a warning.
    all_tasks: bool = False
    # Where a model a task setting names is found (an auxiliary model, `Task.auxiliary_models`): a
    # function of the name that returns a path or hub id. The application passes
    # `harness.reference.checkpoints.resolve_reference_model`, which finds `reference:<checkpoint>`;
    # None takes every name as it is. It cannot change a number: the identity of what it finds is
    # in the cache key.
    resolve_model: Callable[[str], str] | None = None
    # Told on rank 0 as each task starts (task name, model name) and ends (its entry, the model name,
    # the seconds it took here): `membench evaluate` prints them where stderr is no terminal.
    on_task_start: Callable[[str, str], None] | None = None
    on_task_end: Callable[[TaskEntry, str, float], None] | None = None


def starting_batch_size(options: EvaluateOptions, device: str) -> int:
    """The batch size the tasks are handed (`RunContext.batch_size`): `--batch-size` when it is a
    number; under `auto`, `max_batch_size` on an accelerator (batches that do not fit are halved
    as they run) and `cpu_batch_size` on a CPU, where running out of memory is no exception to catch
    but a killed process, so auto keeps the sizes the board was scored with."""
    if options.batch_size != "auto":
        return options.batch_size
    return options.cpu_batch_size if device.split(":")[0] in ("cpu", "meta") else options.max_batch_size


def build_config(task: type[Task], overrides: dict[str, Any]) -> TaskConfig:
    """The task's Config with the overrides it has a field for; a `UserError` on bad values."""
    mine = {key: value for key, value in overrides.items() if key in task.Config.model_fields}
    try:
        return task.Config(**mine)
    except ValidationError as err:
        first = err.errors()[0]
        message = first["msg"].removeprefix("Value error, ")  # a validator's own sentence, which names its flags
        flag = "--" + str(first["loc"][0]).replace("_", "-") + ": " if first["loc"] else ""
        raise UserError(f"{task.NAME}: {flag}{message}") from None


def changed_settings(config: TaskConfig) -> list[str]:
    """The names of `config`'s fields whose value differs from its task's default, sorted, compared as
    a results file records them (JSON values): the Config built with no settings given, as `build_config`
    builds it. A field without a default (a required one) has nothing to differ from and is never named.
    Recorded beside the config (`TaskEntry.changed_settings`), so the board, which knows no task, can
    mark a run with cut settings; not part of `config_hash` (it follows from the config)."""
    kind = type(config)
    required = {name: getattr(config, name) for name, field in kind.model_fields.items() if field.is_required()}
    try:
        defaults = kind(**required)
    except ValidationError:  # defaults that only validate with other settings: take them unvalidated
        defaults = kind.model_construct(**required)
    given, default = config.model_dump(mode="json"), defaults.model_dump(mode="json")
    return sorted(name for name in kind.model_fields if given.get(name) != default.get(name))


def config_hash(config: TaskConfig, options: EvaluateOptions, dtype: str, data_source: str | None = None,
                limit_version: int = 1) -> str:
    """Hash of the settings that can change a task's numbers (batch size and device cannot),
    including the content of every file a setting names, so an edited data file is not served
    from the cache, and the data source the task's data came from (`data.source`), so data that
    fell back to an offline source is not served for the hub's, or the other way round; with
    `--limit`, also the task's `LIMIT_VERSION` (what its limit cuts). What a results file records,
    and part of its name. The auxiliary models' identities are not in it (a setting names them;
    the task's info records what was loaded) but in the cache key (`cache_key`), so another
    machine's copy of an auxiliary model that scores the same numbers does not rename the file."""
    return settings_hash(config.model_dump(mode="json"), options.limit, options.seed, dtype, data_source,
                         limit_version)


def cache_key(digest: str, auxiliary: dict[str, str]) -> str:
    """The results cache's key of a task run: its `config_hash`, and with auxiliary models (role ->
    identity) a hash of both, so the same settings with other auxiliary weights are computed again."""
    if not auxiliary:
        return digest
    return sha256_text(canonical_json({"config_hash": digest, "auxiliary_models": auxiliary}))[:16]


def settings_hash(settings: dict[str, Any], limit: int | None, seed: int, dtype: str,
                  data_source: str | None = None, limit_version: int = 1) -> str:
    """`config_hash` of a config already dumped to JSON values (what a results file records).
    `limit_version` counts only in a limited run, and only from 2 on: the hashes of full runs,
    and of limited runs of tasks whose `--limit` never changed, are what they always were."""
    files = {key: sha256_file(Path(value).expanduser()) for key, value in settings.items()
             if isinstance(value, str) and value and Path(value).expanduser().is_file()}
    payload = {"config": settings, "files": files, "limit": limit, "seed": seed, "dtype": dtype}
    if data_source is not None:
        payload["data_source"] = data_source
    if limit is not None and limit_version != 1:
        payload["limit_version"] = limit_version
    return sha256_text(canonical_json(payload))[:16]


def skip_reasons(tasks: list[Task], configs: list[TaskConfig], data: list[Any], lm: LoadedModel,
                 options: EvaluateOptions, cached: list[bool] | None = None) -> list[str | None]:
    """Why each task is skipped (None: it runs), with a warning on stderr for every skip but a model
    kind the task does not score under `--tasks all`.

    A task is skipped when `--limit` left it too little data (`LimitTooSmall`), when it does not
    score models of this kind, and, under `--tasks all`, when its `check_model` refuses the model;
    a task named on purpose whose `check_model` refuses the model is an error. A task whose result
    is in the results cache (`cached[i]`, from `cached_result`) is served from it: its `check_model`,
    which guards computing the result (a fine-tuning's memory, say), is not asked."""
    reasons = []
    for task, config, loaded, served in zip(tasks, configs, data, cached or [False] * len(tasks)):
        # a model kind the task does not score is expected under `--tasks all`; a cut by `--limit` is not
        reason, expected = unscorable_reason(task, loaded, lm), not isinstance(loaded, LimitTooSmall)
        if reason is None and not served:
            try:
                task.check_served(lm)
                task.check_model(lm, config)
            except UserError as err:
                if not options.all_tasks:
                    raise
                reason, expected = str(err), False
        if reason and not (expected and options.all_tasks) and distributed.is_main():
            warn(f"{task.NAME} skipped: {reason}")
        reasons.append(reason)
    return reasons


def unscorable_reason(task: Task, loaded: Any, lm: LoadedModel) -> str | None:
    """Why the task cannot run whatever its cache holds: `--limit` left it too little data
    (`LimitTooSmall`), or it does not score models of this kind; None when it can."""
    return str(loaded) if isinstance(loaded, LimitTooSmall) else task.skip_reason(lm)


def load_task_data(task: Task, config: TaskConfig, context: RunContext) -> Any:
    """The task's data, or the `LimitTooSmall` error when `--limit` leaves it too little."""
    try:
        return task.load_data(config, context)
    except LimitTooSmall as err:
        return err


def task_cache_key(task: Task, lm: LoadedModel, data: Any, config: TaskConfig, context: RunContext,
                   options: EvaluateOptions) -> tuple[str, str]:
    """The task run's `config_hash` and its results cache key (`cache_key`, with the identities of the
    auxiliary models in `context.models`)."""
    source = getattr(data, "source", None)
    auxiliary = {role: model.identity for role, model in context.models.items()}
    digest = config_hash(config, options, lm.dtype, source if isinstance(source, str) else None, task.LIMIT_VERSION)
    return digest, cache_key(digest, auxiliary)


def records_key(task: Task, lm: LoadedModel, data: Any, config: TaskConfig, context: RunContext,
                options: EvaluateOptions) -> str:
    """The records cache's key of a two-stage task: `task_cache_key`'s of the config without the
    fields only its report reads (`Task.REPORT_ONLY`), so a run that changes only those (or only the
    reporting code: `Task.REPORT_VERSION`) reports the cached records again."""
    source = getattr(data, "source", None)
    settings = {k: v for k, v in config.model_dump(mode="json").items() if k not in task.REPORT_ONLY}
    digest = settings_hash(settings, options.limit, options.seed, lm.dtype,
                           source if isinstance(source, str) else None, task.LIMIT_VERSION)
    return cache_key(digest, {role: model.identity for role, model in context.models.items()})


@dataclass(frozen=True)
class CachedRecords:
    """A two-stage task's records from the cache, and the facts of the scoring run that made them."""

    records: dict[str, Any]
    scoring: dict[str, Any]


def cached_result(task: Task, lm: LoadedModel, data: Any, config: TaskConfig, context: RunContext,
                  options: EvaluateOptions) -> tuple[TaskEntry, str] | CachedRecords | None:
    """What the cache holds of the task's run: a two-stage task's records (`CachedRecords`: the report
    is computed again from them), or a one-stage task's finished entry and samples (JSONL); None under
    `--no-cache`, when it is not there, or when the cached entry has no metrics (cached by an older
    membench: it runs again), or when the task refuses it (`Task.reusable`). Rank 0 reads and every
    rank gets its answer, so that every rank of a data-parallel run computes the same tasks."""
    if not options.use_cache:
        return None
    if task.has_records():
        key = records_key(task, lm, data, config, context, options)
        found = distributed.broadcast_from_main(cache.get_records(lm.identity, task.NAME, task.VERSION, key)
                                                if distributed.is_main() else None)
        return CachedRecords(*found) if found else None
    _, key = task_cache_key(task, lm, data, config, context, options)
    hit = distributed.broadcast_from_main(cache.get(lm.identity, task.NAME, task.VERSION, key)
                                          if distributed.is_main() else None)
    return hit if hit and hit[0].metrics and task.reusable(hit[0]) else None


@dataclass
class TaskOutcome:
    """What `run_task` gives: the task's entry, its samples as JSONL (`--log-samples`) and its records
    (None for a one-stage task or a skipped one)."""

    entry: TaskEntry
    samples: str = ""
    records: dict[str, Any] | None = None


def measured(task: Task, lm: LoadedModel, stage: Callable[[], T]) -> tuple[T, dict[str, Any]]:
    """`stage()` with its progress bars naming the task and the model, and what the entry records of the
    run: its wall time, the process's peak resident memory (None where the kernel cannot say) and the
    largest batch of each step (`fitting.step_sizes`)."""
    started, peak_known = time.perf_counter(), heap.reset_peak_rss()
    fitting.reset()
    with progress.labelled(progress.task_label(task.NAME, lm.name)):
        done = stage()
    return done, {"wall_time_s": round(time.perf_counter() - started, 3),
                  "peak_rss_bytes": heap.peak_rss_bytes() if peak_known else None, "batch_sizes": fitting.step_sizes()}


def score_records(task: Task, lm: LoadedModel, data: Any, config: TaskConfig, context: RunContext,
                  options: EvaluateOptions) -> CachedRecords:
    """Run a two-stage task's scoring stage, normalise its records (`harness.core.records.normalise`)
    and cache them with the facts of the run (`measured`)."""
    records, scoring = measured(task, lm, lambda: normalise(task.score(lm, data, config, context)))
    if distributed.is_main() and options.use_cache:
        cache.put_records(lm.identity, task.NAME, task.VERSION, records_key(task, lm, data, config, context, options),
                          records, scoring)
    return CachedRecords(records, scoring)


def run_task(task: Task, lm: LoadedModel, data: Any, config: TaskConfig, context: RunContext,
             options: EvaluateOptions, reason: str | None = None,
             cached: tuple[TaskEntry, str] | CachedRecords | None = None) -> TaskOutcome:
    """The task's entry, samples and records; a skipped entry when `reason` says why the task cannot
    run (`skip_reasons`), or when it ran and computed no metrics (with the task's `no_metrics_reason`;
    such a run is not cached). A two-stage task scores (or takes its records from the cache) and
    always reports; a one-stage task's entry comes from the cache when it finished before. `cached`:
    what `cached_result` found, where the caller looked already; None: it is looked up here."""
    digest, key = task_cache_key(task, lm, data, config, context, options)
    base = dict(name=task.NAME, version=task.VERSION, config=config.model_dump(mode="json"),
                config_hash=digest, changed_settings=changed_settings(config), seed=options.seed)
    reason = reason or task.skip_reason(lm)
    if reason:
        log.info("skipping %s: %s", task.NAME, reason)
        return TaskOutcome(TaskEntry(status="skipped", skip_reason=reason, **base))
    hit = cached or cached_result(task, lm, data, config, context, options)
    headline, summary = task.headlines(config)
    if isinstance(hit, tuple):
        log.info("%s: reusing the cached result", task.NAME)
        entry, samples = hit
        warn_entry(entry)
        # the headline and summary say how the board shows the task, not what was computed: take today's
        # (and what changed from the defaults: an entry cached by an older membench lacks it)
        return TaskOutcome(entry.model_copy(update={"headline": headline, "summary": list(summary),
                                                    "changed_settings": base["changed_settings"]}), samples)
    if task.has_records():
        if hit is not None:
            log.info("%s: reporting the cached records again", task.NAME)
        scored = hit or score_records(task, lm, data, config, context, options)
        started = time.perf_counter()
        result = task.report(scored.records, config, options.seed)
        wall = scored.scoring["wall_time_s"] + time.perf_counter() - started
        facts = {**scored.scoring, "wall_time_s": round(wall, 3),
                 "records_sha256": records_digest(scored.records), "report_version": task.REPORT_VERSION}
    else:
        result, facts = measured(task, lm, lambda: task.run(lm, data, config, context))
    if not result.metrics:  # nothing to show: not an "ok" run
        reason = f"no metrics: {result.no_metrics_reason or 'the task computed none on this data'}"
        if distributed.is_main():
            warn(f"{task.NAME} skipped: {reason}")
        return TaskOutcome(TaskEntry(status="skipped", skip_reason=reason, counts=result.counts, info=result.info,
                                     **base))
    entry = TaskEntry(status="ok", metrics=result.metrics, counts=result.counts, headline=headline,
                      summary=list(summary), info=result.info, item_scores=result.item_scores,
                      warnings=result.warnings, **facts, **base)
    warn_entry(entry)
    samples = cache.samples_to_jsonl(result.samples)
    if task.has_records():
        return TaskOutcome(entry, samples, scored.records)
    if distributed.is_main():
        cache.put(lm.identity, entry, samples, key)
    return TaskOutcome(entry, samples)


def warn_entry(entry: TaskEntry) -> None:
    """Each of the entry's warnings on stderr (`membench: warning: <task>: ...`), from rank 0 only."""
    if distributed.is_main():
        for line in entry.warnings:
            warn(f"{entry.name}: {line}")


def evaluate(spec: models.ModelSpec, tasks: list[type[Task]], overrides: dict[str, Any],
             options: EvaluateOptions) -> Path:
    """Evaluate one model on `tasks`; returns the path of the results file written.

    In a data-parallel run (`harness.scoring.distributed`) every rank calls this; data and the model are
    loaded on rank 0 first (so downloads land in the cache once), the scoring primitives share
    their batches among the ranks, and only rank 0 writes files (every rank returns the path).
    What killed runs left in the cache and in the output folder is swept first (`harness.files.staging`)."""
    if distributed.is_main():
        staging.sweep_cache()
        staging.sweep(options.output_path)
    instances = [task() for task in tasks]
    configs = [build_config(task, overrides) for task in tasks]
    unused = set(overrides) - {f for task in tasks for f in task.Config.model_fields}
    if unused:
        raise UserError(f"--{sorted(unused)[0].replace('_', '-')} is not a setting of the selected tasks")
    # the batch size follows the device (`starting_batch_size`), known once the model is loaded
    context = RunContext(limit=options.limit, seed=options.seed,
                         progress=options.progress if distributed.is_main() else False)
    with distributed.main_first():
        datasets = [load_task_data(task, config, context) for task, config in zip(instances, configs)]
    with distributed.main_first():
        lm = models.load(spec)
    if lm.served:  # the cache keys on the model's identity, and a server's weights are not hashed: compute again
        options = replace(options, use_cache=False)
    context = replace(context, batch_size=starting_batch_size(options, lm.device))
    # The cache is looked up before `check_model` is asked (`skip_reasons`): a cached task is served,
    # even where its check would refuse computing it again (a fine-tuning too big for this machine).
    # Its key holds the auxiliary models' identities, so they are loaded first.
    unscorable = [unscorable_reason(task, loaded, lm) for task, loaded in zip(instances, datasets)]
    with distributed.main_first():
        auxiliary = load_auxiliary_models(spec, instances, configs, unscorable, options.resolve_model)
    contexts = [replace(context, models=models_of_task) for models_of_task in auxiliary]
    hits = [None if reason else cached_result(task, lm, data, config, task_context, options)
            for task, data, config, task_context, reason in zip(instances, datasets, configs, contexts, unscorable)]
    reasons = skip_reasons(instances, configs, datasets, lm, options, cached=[hit is not None for hit in hits])
    outcomes = []
    for task, config, data, reason, task_context, hit in zip(instances, configs, datasets, reasons, contexts, hits):
        started = time.perf_counter()
        if options.on_task_start and distributed.is_main():
            options.on_task_start(task.NAME, lm.name)
        outcome = run_task(task, lm, data, config, task_context, options, reason, hit)
        if options.on_task_end and distributed.is_main():
            options.on_task_end(outcome.entry, lm.name, time.perf_counter() - started)
        outcomes.append(outcome)
    entries = [outcome.entry for outcome in outcomes]
    model = model_info(lm)
    path = Path(options.output_path) / f"{stem_of(model, entries)}.json"
    results = ResultsFile(
        schema_version=SCHEMA_VERSION, created_at=_dt.datetime.now(_dt.timezone.utc).replace(microsecond=0),
        harness=HarnessInfo(version=harness.__version__, git_commit=git_commit()),
        model=model,
        environment=environment(lm), run=RunSettings(batch_size=options.batch_size, limit=options.limit,
                                                   max_batch_size=options.max_batch_size if options.batch_size == "auto" else None,
                                                   seed=options.seed, processes=distributed.world_size()),
        tasks=entries,
        records_file=records.sidecar_name(path.name) if any(o.records is not None for o in outcomes) else None,
    )
    with interrupts.deferred():  # Ctrl-C waits until the samples files and the results file naming them are written
        write_outputs(results, path, outcomes, options)
    return path


def load_auxiliary_models(spec: models.ModelSpec, tasks: list[Task], configs: list[TaskConfig],
                          reasons: list[str | None], resolve_model: Callable[[str], str] | None = None,
                          ) -> list[dict[str, LoadedModel]]:
    """The auxiliary models of each task not skipped (`reasons[i]` None; `Task.auxiliary_models`), by
    role: each distinct one loaded once, with the evaluated model's device, dtype and safety settings
    (a `UserError` when it cannot be loaded), from where `resolve_model(name)` says (the name itself
    without it)."""
    loaded: dict[str, LoadedModel] = {}
    out = []
    for task, config, reason in zip(tasks, configs, reasons):
        wanted = task.auxiliary_models(config) if reason is None else {}
        for name in wanted.values():
            if name not in loaded:
                aux = models.ModelSpec(model=resolve_model(name) if resolve_model else name, device=spec.device, dtype=spec.dtype,
                                       trust_remote_code=spec.trust_remote_code, allow_pickle=spec.allow_pickle,
                                       name=name)
                loaded[name] = models.load(aux)
        out.append({role: loaded[name] for role, name in wanted.items()})
    return out


def write_outputs(results: ResultsFile, path: Path, outcomes: list[TaskOutcome], options: EvaluateOptions) -> None:
    """Write the records sidecar (where a task wrote records), the per-sample JSONL files (with
    `--log-samples`) and then the results file naming them (rank 0 only); the files this call
    created are removed again when a write fails."""
    new_files = []
    try:
        with_records = {o.entry.name: o for o in outcomes if o.records is not None}
        if with_records:
            if distributed.is_main():
                target = path.parent / results.records_file
                if not target.exists():
                    new_files.append(target)
                records.write_sidecar(target, results.model.identity, {
                    name: {"version": o.entry.version, "config_hash": o.entry.config_hash, "records": o.records}
                    for name, o in with_records.items()})
        if options.log_samples:
            for entry, outcome in zip(results.tasks, outcomes):
                if entry.status == "ok":
                    entry.samples_file = f"{path.stem}.{entry.name}.samples.jsonl"
                    if distributed.is_main():
                        target = path.parent / entry.samples_file
                        if not target.exists():
                            new_files.append(target)
                        atomic_write_text(target, outcome.samples)
        if distributed.is_main():
            write_results(results, path)
    except BaseException:
        for target in new_files:
            target.unlink(missing_ok=True)
        raise


def model_info(lm: LoadedModel) -> ModelInfo:
    """What a results file records about the model: its identity and each part's sha256. A served model's
    identity (`harness.model.loading.served_identity`) is of kind `served`: in the weights' place, the
    sha256 of what the server says of the model, recorded in `details` as `served_sha256`."""
    parts = lm.identity_parts
    if lm.served:
        return ModelInfo(name=lm.name, source=lm.source, revision=lm.revision, identity=lm.identity,
                         identity_kind="served", tokenizer_sha256=parts.tokenizer_sha256,
                         config_sha256=parts.config_sha256, kind=lm.kind.value, dtype=lm.dtype, device=lm.device,
                         details={**lm.info, "served_sha256": parts.weights_sha256})
    return ModelInfo(name=lm.name, source=lm.source, revision=lm.revision, identity=lm.identity,
                     identity_kind="model-sha256", weights_sha256=parts.weights_sha256,
                     tokenizer_sha256=parts.tokenizer_sha256, config_sha256=parts.config_sha256,
                     kind=lm.kind.value, dtype=lm.dtype, device=lm.device, details=lm.info)


def results_stem(results: ResultsFile) -> str:
    """`<model name>__<board key[:12]>__<hash of the model kind, task versions and configs>`, file-name safe."""
    return stem_of(results.model, results.tasks)


def stem_of(model: ModelInfo, tasks: list[TaskEntry]) -> str:
    """`results_stem` of a results file with this model and these task entries."""
    run = canonical_json([model.kind, sorted((t.name, t.version, t.config_hash) for t in tasks)])
    return f"{safe_file_stem(model.name)}__{board_key(model)[:12]}__{sha256_text(run)[:8]}"


def environment(lm: LoadedModel) -> Environment:
    """The software, the CPU numerics and the accelerator `lm` ran on (`harness.run.accelerator`)."""
    import torch
    import transformers

    from harness.run import accelerator, reproducible

    return Environment(python=platform.python_version(), torch=torch.__version__,
                       transformers=transformers.__version__, platform=sys.platform,
                       cpu_capability=reproducible.torch_capability(), threads=torch.get_num_threads(),
                       pinned=reproducible.environment_is_pinned(torch.get_num_threads()),
                       **accelerator.accelerator_facts(lm.model, lm.device, lm.dtype))


def git_commit() -> str | None:
    """The commit of the membench checkout, when it runs from one."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                              text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
