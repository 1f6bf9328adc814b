"""Ctrl-C: one line on stderr and exit status 130, whether the command runs in this process or in a
pinned child process (`harness.run.reproducible.run_pinned`).

Nothing is left half-written: every file is written through a temporary file and renamed into
place (`harness.core.io.atomic_write_bytes`), every folder is built in a staging folder and renamed into
place when complete (`harness.files.staging`), several files that belong together are written with
Ctrl-C held back (`deferred`), and each task's result is cached as soon as it finishes
(`harness.run.cache`), so the same command run again resumes where it stopped.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator

MESSAGE = "membench: interrupted; finished tasks are cached, run again to resume"
EXIT_STATUS = 130  # 128 + SIGINT: what a shell reports for a command stopped by Ctrl-C
# How long a parent that got Ctrl-C waits for its child to stop before passing the interrupt on
# (the child got it too when it came from the terminal; not when it was sent to the parent alone).
FORWARD_AFTER_S = 1.0


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def report() -> int:
    """Say that the command was interrupted (one line on stderr) and return the exit status. Ctrl-C
    is ignored from here on (the process is exiting), so a second one adds no traceback."""
    if _in_main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    _close_progress_bars()
    print(MESSAGE, file=sys.stderr, flush=True)
    return EXIT_STATUS


def _close_progress_bars() -> None:
    """Finish the progress bars that Ctrl-C cut short, so that the message has a line of its own
    (and no bar is drawn again after it when the process exits)."""
    tqdm = getattr(sys.modules.get("tqdm.std"), "tqdm", None)
    for bar in list(getattr(tqdm, "_instances", ())):
        try:
            bar.close()
        except Exception:  # a bar half set up; the message matters more
            pass


def wait_for_child(process: subprocess.Popen) -> int:
    """The exit status of `process`: a child running the rest of this command in this process's
    group. Ctrl-C in the terminal reaches both; the child reports it (`report`) and this process
    waits for the child quietly. When the child still runs `FORWARD_AFTER_S` after this process was
    interrupted (the signal was sent to this process alone), the interrupt is passed on to it.

    A child killed by a signal gives 128 + the signal's number, as a shell reports it; one killed by
    SIGINT before it could report it raises KeyboardInterrupt here, for the caller to report."""
    interrupted_at = None
    forwarded = False
    while True:
        timeout = None
        if interrupted_at is not None and not forwarded:
            timeout = max(0.0, interrupted_at + FORWARD_AFTER_S - time.monotonic())
        try:
            code = process.wait(timeout)
            break
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
            forwarded = True
        except KeyboardInterrupt:
            if interrupted_at is None:
                interrupted_at = time.monotonic()
    if code == -signal.SIGINT:
        raise KeyboardInterrupt
    return 128 - code if code < 0 else code


@contextmanager
def deferred() -> Iterator[None]:
    """Hold Ctrl-C back while the body runs (it writes files that belong together, or moves a folder
    in two steps) and raise the KeyboardInterrupt once it is done. Only the main thread receives
    signals; elsewhere, and where Ctrl-C is ignored, the body simply runs."""
    previous = signal.getsignal(signal.SIGINT) if _in_main_thread() else None
    if previous is None or previous == signal.SIG_IGN:
        yield
        return
    caught = []
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt
