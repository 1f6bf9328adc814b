"""Records sidecars read and written by hand, for the tests that tamper with them (`membench verify`)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from harness.core.records import sidecar_name


def sidecar_of(path: Path) -> Path:
    """The records sidecar beside results file `path`."""
    return path.with_name(sidecar_name(path.name))


def sidecar_payload(path: Path) -> dict:
    """The payload of results file `path`'s sidecar: {format, model_identity, tasks: {name: {records, ...}}}."""
    return json.loads(gzip.decompress(sidecar_of(path).read_bytes()))


def write_records(path: Path, payload: dict) -> None:
    """Write `payload` as results file `path`'s sidecar (gzip JSON, as an editor by hand would)."""
    sidecar_of(path).write_bytes(gzip.compress(json.dumps(payload).encode()))


def copy_with_records(path: Path, payload: dict, folder: Path) -> Path:
    """A copy of results file `path` in `folder` (made) whose sidecar holds `payload`; the copy's path."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = Path(shutil.copy(path, folder / path.name))
    write_records(copy, payload)
    return copy
