"""Finished task entries cached per (model identity, task name, task version, config hash), and the
records of a two-stage task (`harness.core.task.Task.score`) per (model identity, task name, task
version, records key: the config hash without the settings only its report reads).

The model identity is `harness.model.identity`'s: weights, tokenizer, config and kind, so equal weights
with another tokenizer or scored as another kind never share an entry.

An interrupted multi-task evaluation, run again, reuses every finished task. Each entry is one
JSON file written atomically, with the task's per-sample records in a JSONL file beside it
(written first: an entry is only read with its samples there). The temporary files of writes
that a killed process left are deleted when the cache is first used again (`staging.sweep_cache`).
"""

from __future__ import annotations

import gzip
import json
import logging
import zlib
from pathlib import Path
from typing import Any

from harness.core.io import atomic_write_bytes, atomic_write_text, cache_dir
from harness.core.records import Records, dumps
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


def _records_path(identity: str, task: str, version: int, key: str) -> Path:
    sweep_cache()
    return cache_dir() / "records" / identity / task / f"v{version}-{key}.json.gz"


def get_records(identity: str, task: str, version: int, key: str) -> tuple[Records, dict[str, Any]] | None:
    """The cached records of a scoring stage and the facts of the run that made them (its wall time,
    peak memory and batch sizes), or None."""
    path = _records_path(identity, task, version, key)
    if not path.is_file():
        return None
    try:
        payload = json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
        return payload["records"], payload["scoring"]
    except (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError):
        log.warning("ignoring unreadable cached records %s", path)
        return None


def put_records(identity: str, task: str, version: int, key: str, records: Records, scoring: dict[str, Any]) -> None:
    """Store a scoring stage's records (normalised) and the facts of its run under `key`."""
    text = '{"records":' + dumps(records) + ',"scoring":' + json.dumps(scoring, sort_keys=True) + "}"
    atomic_write_bytes(_records_path(identity, task, version, key), gzip.compress(text.encode("utf-8"), mtime=0))
