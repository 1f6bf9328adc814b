"""Reading user-given files safely, atomic file writes and stable hashing: nothing is ever half-written.

Every file membench reads must be a regular file (after following symlinks: not a folder, a
device such as /dev/zero, a FIFO or a socket, which could be read forever) of at most the size
that fits its kind; anything else is a `UserError` before a byte is read. The limits:

- `RESULTS_MAX_BYTES` (64 MiB): a membench results file (`validate`, `leaderboard`, `run`);
  the committed ones are about 150 KB.
- `SETTINGS_MAX_BYTES` (64 MiB): small JSON inputs: WEAT tests, NER names and prompts, an
  lm-eval results file (`import-lm-eval`).
- `DATA_MAX_BYTES` (1 GiB): datasets: JSON, JSON Lines and CoNLL(-U) files (`--data`,
  `--stereoset-data`, `--train`/`--eval`), read whole into memory (a few times their size once
  parsed); a gigabyte of text is far more than any task here scores in a day.
- `CONFIG_MAX_BYTES` (16 MiB): a checkpoint's config.json and the other small JSON files beside it.
- `TOKENIZER_MAX_BYTES` (512 MiB): a checkpoint's tokenizer files (tokenizer.json, vocabularies,
  merges, SentencePiece models: tens of MB for the largest vocabularies).
- weights (*.safetensors, pickles): no size limit, but they must be regular files too.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any

from harness.core.errors import UserError

MiB = 1 << 20
GiB = 1 << 30
RESULTS_MAX_BYTES = 64 * MiB
SETTINGS_MAX_BYTES = 64 * MiB
DATA_MAX_BYTES = 1 * GiB
CONFIG_MAX_BYTES = 16 * MiB
TOKENIZER_MAX_BYTES = 512 * MiB


def _size(n: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n} bytes"


def _strerror(err: OSError) -> str:
    """The system's words for `err` (`permission denied`), else the first line of its message."""
    if err.strerror:
        return err.strerror[:1].lower() + err.strerror[1:]
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def os_error_text(err: OSError) -> str:
    """`err` in one line: the system's words and the file they are about (`permission denied: /x`)."""
    return f"{_strerror(err)}: {err.filename}" if err.filename else _strerror(err)


def _check_stat(path: Path, info: os.stat_result, max_bytes: int | None, what: str) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise UserError(f"{path}: is a directory, not a file")
    if not stat.S_ISREG(info.st_mode):
        kind = ("a character device" if stat.S_ISCHR(info.st_mode) else "a block device" if stat.S_ISBLK(info.st_mode)
                else "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a socket" if stat.S_ISSOCK(info.st_mode)
                else "not a regular file")
        link = f" (a link to {os.path.realpath(path)})" if os.path.islink(path) else ""
        raise UserError(f"{path}{link}: is {kind}, not a regular file; membench reads only regular files")
    if max_bytes is not None and info.st_size > max_bytes:
        raise UserError(f"{path}: {_size(info.st_size)}, more than membench reads from a {what} ({_size(max_bytes)})")


def check_regular_file(path: Path, max_bytes: int | None = None, what: str = "file") -> int:
    """The size of `path`; a `UserError` unless it is, after following symlinks, a regular file
    of at most `max_bytes` (None: any size). `what` names the kind of file in the message."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            raise UserError(f"{path}: a symlink to {os.readlink(path)}, which does not exist") from None
        raise UserError(f"{path}: no such file") from None
    except OSError as err:  # a parent that is not a folder, a symlink loop, permissions
        raise UserError(f"{path}: {_strerror(err)}") from None
    _check_stat(path, info, max_bytes, what)
    return info.st_size


def _open_regular(path: Path, max_bytes: int | None, what: str) -> tuple[int, int]:
    """A file descriptor of `path` open for reading and the file's size, once `check_regular_file`
    passed; checked again on the open file (opened without blocking, should the path have turned
    into a FIFO meanwhile)."""
    check_regular_file(path, max_bytes, what)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise UserError(f"{path}: {_strerror(err)}") from None
    try:
        info = os.fstat(fd)
        _check_stat(path, info, max_bytes, what)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info.st_size


def read_regular_file(path: Path, max_bytes: int, what: str = "file") -> bytes:
    """The bytes of `path`: a regular file of at most `max_bytes` (`check_regular_file`)."""
    fd, size = _open_regular(Path(path), max_bytes, what)
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(size + 1)
            if len(data) > size:  # it grew meanwhile, or has no size (/proc): read on, up to the limit
                data += handle.read(max_bytes + 1 - len(data))
    except OSError as err:
        raise UserError(f"{path}: {_strerror(err)}") from None
    if len(data) > max_bytes:  # it grew while we read it
        raise UserError(f"{path}: more than membench reads from a {what} ({_size(max_bytes)})")
    return data


def check_writable_folder(folder: Path, what: str) -> None:
    """A `UserError` unless `folder` is, or can be made, a folder this process can write files in,
    checked before any work without creating it: a probe of a name no other process uses (a temporary
    file in `folder` when it exists, else a temporary folder in its nearest existing parent) is made and
    removed again. The folders themselves are made when the first file is written (`atomic_write_bytes`),
    so two runs started at once with the same new folder both pass this check and neither removes a folder
    the other is about to write into. `what` names the setting in the message (`--output-path DIR`)."""
    folder = Path(folder)
    existing = folder
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if os.path.lexists(existing) and not existing.is_dir():
        raise UserError(f"{what}: {existing} is not a folder")
    if existing == folder:
        try:
            fd, probe = tempfile.mkstemp(dir=folder, prefix=".membench-write-test-")
        except OSError as err:
            raise UserError(f"{what}: cannot write in {folder}: {_strerror(err)}") from None
        os.close(fd)
        os.unlink(probe)
        return
    try:
        probe = tempfile.mkdtemp(dir=existing, prefix=".membench-write-test-")
    except OSError as err:
        raise UserError(f"{what}: cannot create the folder {folder}: {_strerror(err)} in {existing}") from None
    os.rmdir(probe)


@functools.cache
def host_id() -> str:
    """8 hex digits for this host and PID namespace: where a process id names one process."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return hashlib.sha256(f"{socket.gethostname()}|{namespace}".encode()).hexdigest()[:8]


def owner_tag() -> str:
    """This process, as hidden entries name their writer: `<host_id>-<pid>`."""
    return f"{host_id()}-{os.getpid()}"


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # the writer is in the name, so that `harness.files.staging.sweep` finds what a kill left
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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write `data` to `path` via a temporary file in the same folder and an atomic rename; a
    `UserError` (and no file, not even a partial one) when it cannot be written: a folder in the
    way, no permission, a full disk, a file-size limit (EFBIG: the CLI ignores SIGXFSZ)."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"cannot write {path}: it is a folder (give a file name)")
    try:
        _atomic_write(path, data)
    except OSError as err:
        # name the file at fault when it is not `path` or its temporary file (a parent folder, say)
        where = f" ({err.filename})" if err.filename and Path(err.filename).parent != path.parent else ""
        raise UserError(f"cannot write {path}: {_strerror(err)}{where}") from None


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: equal objects give equal strings."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: Path, chunk_size: int = 1 << 20, max_bytes: int | None = None, what: str = "file") -> str:
    """sha256 of a regular file (`check_regular_file`: never a device such as /dev/zero, which
    would be hashed forever)."""
    digest = hashlib.sha256()
    fd, _ = _open_regular(Path(path), max_bytes, what)
    with os.fdopen(fd, "rb") as handle:
        for chunk in iter(lambda: handle.read(chunk_size), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cache_dir() -> Path:
    """Root of membench's cache: $MEMBENCH_CACHE, else ~/.cache/membench; a `UserError` when it
    exists and is not a folder."""
    root = Path(os.environ.get("MEMBENCH_CACHE") or Path.home() / ".cache" / "membench").expanduser()
    if os.path.lexists(root) and not root.is_dir():
        named = f"MEMBENCH_CACHE={os.environ['MEMBENCH_CACHE']}" if os.environ.get("MEMBENCH_CACHE") else \
            f"the membench cache {root}"
        raise UserError(f"{named} is not a folder: point MEMBENCH_CACHE at a folder")
    return root


def check_writable_cache() -> Path:
    """The cache folder (`cache_dir`), checked before any work like every output folder
    (`check_writable_folder`); what `evaluate`, `run` and `reference build` check first."""
    root = cache_dir()
    check_writable_folder(root, f"the membench cache {root}")
    return root


def read_utf8(path: Path, max_bytes: int = DATA_MAX_BYTES, what: str = "data file") -> str:
    """The text of a user-given file; a `UserError` when it is missing, a folder, not a regular
    file, larger than `max_bytes` (`read_regular_file`) or not UTF-8."""
    path = Path(path)
    try:
        text = read_regular_file(path, max_bytes, what).decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # universal newlines, as text mode reads them


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
