"""Finished task entries cached per (model identity, task name, task version, config hash).

The model identity is `harness.model.identity`'s: weights, tokenizer, config and kind, so equal weights
with another tokenizer or scored as another kind never share an entry.

An interrupted multi-task evaluation, run again, reuses every finished task. Each entry is one
JSON file written atomically, with the task's per-sample records in a JSONL file beside it
(written first: an entry is only read with its samples there). The temporary files of writes
that a killed process left are deleted when the cache is first used again (`staging.sweep_cache`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from harness.core.io import atomic_write_text, cache_dir
from harness.core.results import TaskEntry
from harness.files.staging import sweep_cache

log = logging.getLogger(__name__)


def _entry_path(identity: str, task: str, version: int, key: str) -> Path:
    sweep_cache()
    return cache_dir() / "results" / identity / task / f"v{version}-{key}.json"


def samples_to_jsonl(samples: list[dict]) -> str:
    return "".join(json.dumps(sample, ensure_ascii=False) + "\n" for sample in samples)


def get(identity: str, task: str, version: int, key: str) -> tuple[TaskEntry, str] | None:
    """The cached entry and its samples as JSONL text, or None (`key`: `runner.cache_key`)."""
    path = _entry_path(identity, task, version, key)
    samples_path = path.with_suffix(".samples.jsonl")
    if not (path.is_file() and samples_path.is_file()):
        return None
    try:
        entry = TaskEntry.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError:
        log.warning("ignoring unreadable cache entry %s", path)
        return None
    return entry, samples_path.read_text(encoding="utf-8")


def put(identity: str, entry: TaskEntry, samples_jsonl: str, key: str) -> None:
    """Store a task's entry and samples under `key` (`runner.cache_key`)."""
    path = _entry_path(identity, entry.name, entry.version, key)
    atomic_write_text(path.with_suffix(".samples.jsonl"), samples_jsonl)
    atomic_write_text(path, entry.model_dump_json(indent=1))
