"""`membench export-lm-eval`: membench tasks as lm-evaluation-harness tasks.

A task that lm-eval's request types can express defines `Task.lm_eval_export`, which turns the
task's data (read exactly as `membench evaluate` reads it, `--limit` included) into an
`LmEvalTask`: its documents, its lm-eval settings, and the membench metrics its custom
aggregations compute. `write_export` writes, per task, `<name>.jsonl` (the documents) and
`<name>.yaml` (with the documents' absolute path: lm-eval resolves a relative `data_files`
against the working directory), one `utils.py` beside them that lm-eval loads by path for the
`!function` entries. Every task carries the tag `membench`, so `--tasks membench` runs them all.

The scoring itself is never written twice: `utils.py` only binds membench's own functions (the
task's `doc_item` and `aggregate`, which call `harness.metrics.memorization` / `harness.metrics.bias`), so
lm_eval must run where membench is installed. Every YAML carries `metadata.version` equal to
the membench task version and, under `metadata.membench`, what `membench import-lm-eval` needs to
turn lm-eval's results file back into a membench results entry.

Where the numbers depend on the tokenizer (per-token means, generation budgets, prompt cuts),
the documents hold values computed with the tokenizer of the model named at export; its
fingerprint is recorded and the import checks it against the evaluated model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from harness.core.errors import UserError
from harness.core.io import atomic_write_text, canonical_json, sha256_text
from harness.core.results import Headline
from harness.core.task import Task, select_from
from harness.interop.lm_eval_meta import ExportedMetricMeta, ExportMeta

TAG = "membench"


@dataclass(frozen=True)
class ExportedMetric:
    """One lm-eval metric (`key`) and the membench metric it is (`name` with `tags`)."""

    key: str
    name: str
    tags: dict[str, str]
    higher_is_better: bool


@dataclass
class LmEvalTask:
    """One exported task: lm-eval settings, documents, and the metrics its aggregations compute."""

    name: str                   # lm-eval task name, e.g. membench_stereoset
    entry_name: str             # the membench results entry it imports as
    version: int                # the membench task version
    config: dict[str, Any]      # the membench task config the documents were made with
    data_source: str
    headline: Headline
    summary: list[Headline]
    settings: dict[str, Any]    # plain lm-eval YAML keys: output_type, doc_to_text, ...
    docs: list[dict[str, Any]]
    metrics: list[ExportedMetric]
    module: str                 # membench module with `doc_item` and `aggregate` (and `task_class`)
    task_class: str | None = None  # attribute of `module`: a ConfigurableTask subclass, when needed
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # differences from `membench evaluate` found in this data

    @property
    def card(self) -> str:
        """The task card of the membench task this one is exported from (its module's folder)."""
        return "/".join(self.module.split(".")[:-1]) + "/README.md"


# ---------------------------------------------------------------- runtime glue (imported by the written utils.py)

def results_processor(doc_item: Callable[[dict, list], Any], keys: list[str]) -> Callable[[dict, list], dict]:
    """lm-eval's `process_results`: the same per-document item under every metric key (lm-eval
    requires exactly the keys of `metric_list`); the aggregations read what they need from it."""
    def process_results(doc: dict, results: list) -> dict:
        item = doc_item(doc, results)
        return {key: item for key in keys}
    return process_results


def aggregation(aggregate: Callable[[list, str, dict], float | None], name: str,
                tags: dict[str, str]) -> Callable[[list], float | None]:
    """lm-eval's aggregation of one metric: membench's `aggregate(items, name, tags)`."""
    def aggregate_items(items: list) -> float | None:
        return aggregate(items, name, tags)
    aggregate_items.__name__ = f"{name}_" + "_".join(tags.values())
    return aggregate_items


# ---------------------------------------------------------------- tokenizer facts recorded with an export

def tokenizer_fingerprint(tokenizer) -> str:
    """sha256 of the tokenizer's vocabulary and special tokens: what the exported token counts depend on."""
    vocab = sorted(tokenizer.get_vocab().items())
    special = {"bos": tokenizer.bos_token, "eos": tokenizer.eos_token}
    return sha256_text(canonical_json({"vocab": vocab, "special": special}))[:16]


# ---------------------------------------------------------------- writing

class _Function(str):
    """A YAML `!function utils.<name>` reference."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(_Function, lambda dumper, value: dumper.represent_scalar("!function", str(value)))


def _attribute(task: LmEvalTask, suffix: str) -> str:
    return f"{task.name}__{suffix}".replace("@", "_at_").replace(".", "_").replace("-", "_")


def task_yaml(task: LmEvalTask, data_file: Path, facts: dict[str, Any]) -> dict[str, Any]:
    """The lm-eval config of one exported task."""
    config: dict[str, Any] = {"task": task.name, "tag": [TAG]}
    if task.task_class:
        config["class"] = _Function(f"utils.{_attribute(task, 'class')}")
    config.update({"dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(data_file.resolve())}},
                   "test_split": "test", **task.settings,
                   "process_results": _Function(f"utils.{_attribute(task, 'process_results')}")})
    config["metric_list"] = [{"metric": m.key, "aggregation": _Function(f"utils.{_attribute(task, m.key)}"),
                              "higher_is_better": m.higher_is_better} for m in task.metrics]
    meta = ExportMeta(task=task.entry_name, version=task.version, config=task.config, data_source=task.data_source,
                      headline=task.headline, summary=task.summary,
                      metrics=[ExportedMetricMeta(key=m.key, name=m.name, tags=m.tags) for m in task.metrics],
                      counts=task.counts, task_card=task.card, **facts)
    config["metadata"] = {"version": task.version, "membench": meta.model_dump(mode="json")}
    return config


def utils_source(tasks: list[LmEvalTask]) -> str:
    """`utils.py`: binds each task's process_results, aggregations (and task class) to membench's functions."""
    lines = ['"""lm-eval functions of the tasks `membench export-lm-eval` wrote here (generated; do not edit).',
             "",
             "Each name binds membench's own scoring and metric functions, so lm_eval must run where membench",
             'is installed."""', "",
             "from harness.interop.lm_eval_export import aggregation, results_processor"]
    lines += [f"import {module}" for module in sorted({t.module for t in tasks})]
    for task in tasks:
        lines += ["", f"# {task.name}: membench task {task.entry_name}, version {task.version}"]
        if task.task_class:
            lines.append(f"{_attribute(task, 'class')} = {task.module}.{task.task_class}")
        keys = ", ".join(repr(m.key) for m in task.metrics)
        lines.append(f"{_attribute(task, 'process_results')} = results_processor({task.module}.doc_item, [{keys}])")
        for m in task.metrics:
            lines.append(f"{_attribute(task, m.key)} = aggregation({task.module}.aggregate, {m.name!r}, {m.tags!r})")
    return "\n".join(lines) + "\n"


def write_export(folder: Path, tasks: list[LmEvalTask], facts: dict[str, Any]) -> list[Path]:
    """Write every task's documents and YAML, and `utils.py`, into `folder`; `facts` (the model,
    limit and seed of the export) go into every YAML's metadata. Each file is written atomically;
    when one cannot be written, the files this call created are removed again."""
    if not tasks:
        raise UserError("no task to export")
    contents: list[tuple[Path, str]] = []
    for task in tasks:
        data_file = folder / f"{task.name}.jsonl"
        contents.append((data_file, "".join(json.dumps(doc, ensure_ascii=False) + "\n" for doc in task.docs)))
        contents.append((folder / f"{task.name}.yaml", yaml.dump(task_yaml(task, data_file, facts), Dumper=_Dumper,
                                                                 sort_keys=False, allow_unicode=True)))
    contents.append((folder / "utils.py", utils_source(tasks)))
    created, made_folder = [], not folder.exists()
    try:
        for path, text in contents:
            if not path.exists():
                created.append(path)
            atomic_write_text(path, text)
    except BaseException:
        for path in created:
            path.unlink(missing_ok=True)
        if made_folder and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
        raise
    return [path for path, _ in contents]


# ---------------------------------------------------------------- the command

def export_tasks(spec, registry: dict[str, type[Task]], names: str | None, overrides: dict[str, Any],
                 limit: int | None, seed: int = 0) -> tuple[list[LmEvalTask], dict[str, Any]]:
    """The exported tasks of `registry` (all exportable ones when `names` is None) for the causal LM `spec`,
    whose tokenizer (never its weights) is loaded, and the facts every YAML records: the model
    and its tokenizer's fingerprint, `limit` and `seed`."""
    from transformers import AutoConfig

    from harness.core.model_types import ModelKind
    from harness.core.task import RunContext
    from harness.model.loading import context_length, load_tokenizer, locate_checkpoint
    from harness.run.runner import build_config

    checkpoint = locate_checkpoint(spec)
    if checkpoint.kind is not ModelKind.CAUSAL_LM:
        raise UserError(f"export-lm-eval writes tasks for causal LMs; {spec.model} is a {checkpoint.kind.value} model")
    tokenizer = load_tokenizer(checkpoint.folder, spec.trust_remote_code, checkpoint.gguf_file)
    parsed = checkpoint.load_arguments.get("config") or AutoConfig.from_pretrained(
        checkpoint.folder, trust_remote_code=spec.trust_remote_code)
    context = context_length(parsed)
    exportable = [t for t in registry.values() if _exportable(t)]
    chosen = select_from(registry, names) if names else exportable
    for task_class in chosen:
        if task_class not in exportable:
            raise UserError(f"{task_class.NAME} cannot be expressed in lm-eval's request types; exportable: "
                            + ", ".join(t.NAME for t in exportable))
    unused = set(overrides) - {f for t in chosen for f in t.Config.model_fields}
    if unused:
        raise UserError(f"--{sorted(unused)[0].replace('_', '-')} is not a setting of the exported tasks")
    run_context = RunContext(limit=limit, seed=seed)
    exported = []
    for task_class in chosen:
        task, config = task_class(), build_config(task_class, overrides)
        exported.append(task.lm_eval_export(task.load_data(config, run_context), config, tokenizer, context))
    model = {"name": spec.model, "revision": checkpoint.revision or "",
             "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer),
             "model_args": lm_eval_model_args(spec, checkpoint)}
    return exported, {"model": model, "limit": limit, "seed": seed}


def lm_eval_model_args(spec, checkpoint) -> str:
    """lm-eval's `--model_args` for the checkpoint: `pretrained=` the hub id, or the local folder (a
    `pretrained:<name>` or a `.gguf` path means nothing to lm-eval), `,gguf_file=` the GGUF file's
    name (lm-eval's HF model reads GGUF through transformers, as membench does), and `,revision=`."""
    pretrained = spec.model if checkpoint.from_hub else str(checkpoint.folder.resolve())
    parts = [f"pretrained={pretrained}"]
    if checkpoint.gguf_file:
        parts.append(f"gguf_file={checkpoint.gguf_file}")
    if checkpoint.from_hub and spec.revision:
        parts.append(f"revision={spec.revision}")
    return ",".join(parts)


def _exportable(task_class) -> bool:
    return task_class.lm_eval_export is not Task.lm_eval_export
