"""`membench import-lm-eval`: an lm-eval results file of exported tasks -> a membench results file.

Every task of the results file whose config carries `metadata.membench` (written by
`membench export-lm-eval`) becomes one entry: its membench name, version and config, and each
exported metric read from `results[<task>]["<key>,none"]`. The model is the `pretrained` of
lm-eval's `model_args` (a local folder, or a hub id fetched like `membench evaluate` does; with
its `gguf_file` when lm-eval read a GGUF), its
identity computed as membench computes it, and its tokenizer must be the one the documents were
exported with (the per-token means and generation budgets depend on it). A run of lm-eval with
`--limit` (fewer documents than exported) is refused: its numbers would not be the task's.
"""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import harness
from harness.core.errors import UserError
from harness.core.io import SETTINGS_MAX_BYTES, parse_json_object, read_utf8
from harness.core.results import (
    SCHEMA_VERSION,
    Environment,
    HarnessInfo,
    Metric,
    ModelInfo,
    ResultsFile,
    RunSettings,
    TaskEntry,
    write_results,
)
from harness.core.task import Task
from harness.interop.lm_eval_meta import ExportMeta


def model_args(config: dict[str, Any], origin: str = "lm-eval results") -> dict[str, str]:
    """lm-eval's `model_args`, a dict or its `key=value,key=value` string."""
    args = config.get("model_args") or {}
    if isinstance(args, str):
        args = dict(part.split("=", 1) for part in args.split(",") if "=" in part)
    if not isinstance(args, dict):
        raise UserError(f"{origin}: config.model_args must be an object or a key=value,... string, not {args!r}")
    return {str(k): str(v) for k, v in args.items()}


def _object(value: Any, where: str) -> dict[str, Any]:
    """`value` when it is a JSON object (None: an empty one); a `UserError` naming `where` otherwise."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{where} must be an object, not {type(value).__name__}")
    return value


def exported_tasks(raw: dict[str, Any], origin: str) -> dict[str, ExportMeta]:
    """lm-eval task name -> its `metadata.membench` (checked: `ExportMeta`), for the tasks membench exported."""
    configs = raw.get("configs")
    if not isinstance(configs, dict) or not isinstance(raw.get("results"), dict):
        raise UserError(f"{origin}: not an lm-eval results file (no 'results' and 'configs')")
    found = {name: _object(config.get("metadata"), f"{origin}: configs.{name}.metadata").get("membench")
             for name, config in configs.items() if isinstance(config, dict)}
    found = {name: meta for name, meta in found.items() if meta is not None}
    if not found:
        raise UserError(f"{origin}: none of its tasks ({', '.join(configs) or 'none'}) was written by "
                        "`membench export-lm-eval`")
    checked = {}
    for name, meta in found.items():
        where = f"{origin}: configs.{name}.metadata.membench"
        try:
            checked[name] = ExportMeta.model_validate(_object(meta, where))
        except ValidationError as err:
            first = err.errors()[0]
            field = ".".join(str(part) for part in first["loc"])
            raise UserError(f"{where}{'.' + field if field else ''}: {first['msg']} (not as "
                            "`membench export-lm-eval` wrote it)") from None
    n_samples = _object(raw.get("n-samples"), f"{origin}: n-samples")
    for name in checked:
        _object(raw["results"].get(name), f"{origin}: results.{name}")
        samples = _object(n_samples.get(name), f"{origin}: n-samples.{name}")
        if samples.get("effective") != samples.get("original"):
            raise UserError(f"{origin}: {name} ran on {samples.get('effective')} of its {samples.get('original')} "
                            "documents (lm_eval --limit); import needs the whole exported task "
                            "(export fewer with `membench export-lm-eval --limit`)")
    return checked


def entry(name: str, meta: ExportMeta, scores: dict[str, Any], dtype: str, lm_eval_version: str,
          task: type[Task] | None) -> TaskEntry:
    """The membench entry of one exported task's lm-eval results; `task`, this membench's task of
    that name (None when it has none), gives the LIMIT_VERSION that keys a limited export as
    `membench evaluate` keys a limited run."""
    from harness.run.runner import settings_hash

    metrics = []
    for metric in meta.metrics:
        value = scores.get(f"{metric.key},none")
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise UserError(f"{name}: metric {metric.key} is {value!r}, not a number")
        metrics.append(Metric(name=metric.name, value=value, tags=metric.tags))
    return TaskEntry(
        name=meta.task, version=meta.version, status="ok", config=meta.config,
        config_hash=settings_hash(meta.config, meta.limit, meta.seed, dtype, meta.data_source,
                                  task.LIMIT_VERSION if task else 1),
        seed=meta.seed, metrics=metrics, counts=meta.counts, headline=meta.headline, summary=meta.summary,
        info={"evaluated_with": f"lm-evaluation-harness {lm_eval_version}", "lm_eval_task": name,
              "data_source": meta.data_source, "task_card": meta.task_card})


def _version(pattern: str, text: str) -> str:
    found = re.search(pattern, text or "")
    return found.group(1) if found else "unknown"


def _created_at(date: Any) -> _dt.datetime:
    """When lm-eval ran (its `date`, a Unix time), else now."""
    now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0)
    if isinstance(date, bool) or not isinstance(date, (int, float)):
        return now
    try:
        return _dt.datetime.fromtimestamp(float(date), _dt.timezone.utc).replace(microsecond=0)
    except (OverflowError, ValueError, OSError):  # out of the range of dates
        return now


def import_results(path: Path, output_path: Path, registry: dict[str, type[Task]], model: str | None = None,
                   name: str | None = None, allow_pickle: bool = False, trust_remote_code: bool = False) -> Path:
    """Write the membench results file of the lm-eval results at `path`; returns its path.
    `registry` holds this membench's tasks by name (`harness.app.registry.discover`), `model`
    overrides the checkpoint lm-eval recorded (the same weights in another place), `name` the
    display name."""
    from harness.core.model_types import ModelKind
    from harness.interop.lm_eval_export import tokenizer_fingerprint
    from harness.model.loading import ModelSpec, default_name, load_tokenizer, locate_checkpoint
    from harness.run.runner import git_commit, results_stem

    origin = str(path)
    raw = parse_json_object(read_utf8(path, SETTINGS_MAX_BYTES, "lm-eval results file"), origin)
    tasks = exported_tasks(raw, origin)
    config = _object(raw.get("config"), f"{origin}: config")
    args = model_args(config, origin)
    source = model or args.get("pretrained")
    if not source:
        raise UserError(f"{origin}: lm-eval recorded no `pretrained` model; name it with --model")
    # lm-eval's revision is of its `pretrained`, not of --model; its gguf_file names the file in --model's
    # folder or repo too (the same weights elsewhere), unless --model is the .gguf file itself
    model_is_file = bool(model) and Path(model).expanduser().is_file()
    spec = ModelSpec(model=source, revision=None if model else args.get("revision"), allow_pickle=allow_pickle,
                     trust_remote_code=trust_remote_code, gguf_file=None if model_is_file else args.get("gguf_file"))
    checkpoint = locate_checkpoint(spec)
    folder, kind = checkpoint.folder, checkpoint.kind
    if kind is not ModelKind.CAUSAL_LM:
        raise UserError(f"{source} is a {kind.value} model; the exported tasks score causal LMs")
    fingerprint = tokenizer_fingerprint(load_tokenizer(folder, trust_remote_code, checkpoint.gguf_file))
    for task_name, meta in tasks.items():
        exported = meta.model.tokenizer_fingerprint
        if exported != fingerprint:
            raise UserError(f"{task_name} was exported with the tokenizer of {meta.model.name} "
                            f"(fingerprint {exported}), but {source}'s tokenizer is {fingerprint}: its token "
                            "counts do not apply; export again with --model " + source)
    identity = checkpoint.identity()
    dtype = str(config.get("model_dtype") or args.get("dtype") or "unknown").removeprefix("torch.")
    lm_eval_version = str(raw.get("lm_eval_version") or "unknown")
    results_of = raw["results"]
    entries = [entry(task_name, meta, _object(results_of.get(task_name), f"{origin}: results.{task_name}"), dtype,
                     lm_eval_version, registry.get(meta.task))
               for task_name, meta in tasks.items()]
    env = str(raw.get("pretty_env_info") or "")
    batch = str(config.get("batch_size") or "")
    results = ResultsFile(
        schema_version=SCHEMA_VERSION,
        created_at=_created_at(raw.get("date")),
        harness=HarnessInfo(version=harness.__version__, git_commit=git_commit()),
        model=ModelInfo(name=name or default_name(source, checkpoint.from_hub, folder, checkpoint.gguf_file),
                        source=source, revision=checkpoint.revision, identity=identity.identity,
                        identity_kind="model-sha256",
                        weights_sha256=identity.weights_sha256, tokenizer_sha256=identity.tokenizer_sha256,
                        config_sha256=identity.config_sha256, kind=kind.value, dtype=dtype, device=str(config.get("device") or "unknown"),
                        details={"evaluated_with": f"lm-evaluation-harness {lm_eval_version}", "model_args": args,
                                 "weight_files": checkpoint.weight_names, **checkpoint.details}),
        environment=Environment(python=_version(r"Python version: (\d+\.\d+\.\d+)", env),
                                torch=_version(r"PyTorch version: (\S+)", env),
                                transformers=str(raw.get("transformers_version") or "unknown"),
                                platform=_version(r"python platform: ([a-z]+)", env.lower())),
        run=RunSettings(batch_size=lm_eval_batch_size(batch), limit=next(iter(tasks.values())).limit,
                        seed=entries[0].seed),
        tasks=entries,
    )
    out = Path(output_path) / f"{results_stem(results)}.json"
    write_results(results, out)
    return out


def lm_eval_batch_size(recorded: str) -> int | str:
    """lm-eval's recorded `batch_size` as membench records one: a number, `auto` for its `auto` and
    `auto:N` (batch size found by trying), lm-eval's default 1 when it recorded none."""
    if recorded.isdigit() and int(recorded) >= 1:
        return int(recorded)
    return "auto" if recorded.startswith("auto") else 1

