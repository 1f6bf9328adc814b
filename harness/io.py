"""Atomic file writes and stable hashing: nothing is ever half-written."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from harness.errors import UserError


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` via a temporary file in the same folder and an atomic rename."""
    from harness.staging import owner_tag  # the writer, named so that `harness.staging.sweep` finds what a kill left

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{owner_tag()}-", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600 files; give the usual permissions
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: equal objects give equal strings."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: Path, chunk_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(chunk_size), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cache_dir() -> Path:
    """Root of membench's cache: $MEMBENCH_CACHE, else ~/.cache/membench."""
    root = os.environ.get("MEMBENCH_CACHE") or Path.home() / ".cache" / "membench"
    return Path(root).expanduser()


def read_utf8(path: Path) -> str:
    """The text of a user-given file; a `UserError` when it is missing, a folder or not UTF-8."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a file") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text") from None


def parse_json_object(text: str, where: str) -> dict:
    """One JSON object; a `UserError` naming `where` when the text is not JSON or not an object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"{where}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected a JSON object")
    return value


def read_jsonl_objects(path: Path) -> list[tuple[int, dict]]:
    """(line number, object) for every non-blank line of a JSONL file, each checked."""
    lines = read_utf8(path).splitlines()
    return [(number, parse_json_object(line, f"{path}:{number}"))
            for number, line in enumerate(lines, start=1) if line.strip()]
