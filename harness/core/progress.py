"""Progress bars, and what they are named: the task and model, or the reference build, that a bar works for.

The runner labels each task's run (`task_label`) and `membench run` each reference build
(`labelled`); every bar is made by `progress_bar(step=...)`, which names it `bar_desc(step)`: the
step prefixed with the current label. The label travels in a context variable rather than as a
parameter, since the bars are made deep inside the scoring primitives (`distributed.run_batches`),
which many tasks call in many ways.

On a terminal a bar is tqdm's. Where stderr is no terminal (CI, nohup, `| tee`), a step that lasts
shows as whole lines instead, at most one every `LINE_INTERVAL_S` seconds (`LogLines`): label, step,
done/total, elapsed, ETA and rate; a step shorter than that prints nothing.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterable, Iterator

from tqdm.auto import tqdm

LINE_INTERVAL_S = 30.0

_LABEL: ContextVar[str] = ContextVar("membench_progress_label", default="")


def task_label(task: str, model: str) -> str:
    """The label of a task's bars: `<task> · <model name>`."""
    return f"{task} · {model}"


@contextmanager
def labelled(label: str) -> Iterator[None]:
    """Within the block, every bar's description starts with `label` (`bar_desc`)."""
    token = _LABEL.set(label)
    try:
        yield
    finally:
        _LABEL.reset(token)


@contextmanager
def sublabelled(part: str) -> Iterator[None]:
    """Within the block, bars are named `<label> · <part>: <step>`: a stage of a task that repeats its
    steps (one of several fine-tuning seeds, say), so each bar's count and ETA say which one it is."""
    current = _LABEL.get()
    with labelled(f"{current} · {part}" if current else part):
        yield


def bar_desc(step: str) -> str:
    """A bar's description: `<label>: <step>` inside `labelled`, else `step`."""
    label = _LABEL.get()
    return f"{label}: {step}" if label else step


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


class LogLines(tqdm):
    """A tqdm bar for a log that is no terminal: `membench: <label>: <step> 120/400 batch [01:02
    elapsed, ETA 02:25, 1.93 batch/s]` on its own line at most every `LINE_INTERVAL_S` seconds (never
    a carriage return), and a last line at the end of a step that printed any."""

    def __init__(self, iterable: Iterable | None = None, **kwargs):
        self.lines, self.last_line_n, self.last_line_t = 0, 0, time.monotonic()
        super().__init__(iterable, file=sys.stderr, mininterval=min(1.0, LINE_INTERVAL_S), leave=False,
                         bar_format="{desc} {n_fmt}/{total_fmt} {unit} [{elapsed} elapsed, ETA {remaining}, "
                                    "{rate_fmt}]", **kwargs)

    def write_line(self) -> None:
        self.fp.write(f"membench: {self}\n")
        self.fp.flush()
        self.lines, self.last_line_n, self.last_line_t = self.lines + 1, self.n, time.monotonic()

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        """tqdm redraws often; a line is written only when work was done and the interval has passed."""
        if msg is None and self.n > self.last_line_n and time.monotonic() - self.last_line_t >= LINE_INTERVAL_S:
            self.write_line()
        return True

    def clear(self, nolock: bool = False) -> None:
        """Nothing to clear: lines stay."""

    def close(self) -> None:
        if self.disable:
            return
        if self.lines and self.n > self.last_line_n:
            self.write_line()
        self.sp = None  # tqdm's close clears a terminal bar with a carriage return; a log has nothing to clear
        super().close()


@contextmanager
def paused(bar: tqdm | None):
    """Time spent inside does not count for `bar`: its elapsed time, rate and ETA resume afterwards as
    if the bar had stopped (e.g. the evaluations between a fine-tuning's epochs, which would otherwise
    read as steps of minutes)."""
    started = time.time()
    try:
        yield
    finally:
        if bar is not None and not bar.disable:
            pause = time.time() - started
            bar.start_t += pause
            bar.last_print_t += pause


def progress_bar(iterable: Iterable | None = None, *, step: str, unit: str, total: int | None = None,
                 leave: bool = True, show: bool | None = None) -> tqdm:
    """A bar named `bar_desc(step)`. `show`: None = tqdm's bar on a terminal, `LogLines` on any
    other stderr; True = tqdm's bar wherever stderr goes; False = none."""
    if show is False:
        return tqdm(iterable, total=total, disable=True)
    if show is None and not stderr_is_terminal():
        return LogLines(iterable, total=total, desc=bar_desc(step), unit=unit)
    return tqdm(iterable, total=total, desc=bar_desc(step), unit=unit, leave=leave, disable=False)
