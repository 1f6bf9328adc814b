"""Names for progress bars: the task and model, or the reference build, that a bar works for.

The runner labels each task's run (`task_label`) and `membench run` each reference build
(`labelled`); every place that creates a tqdm bar names it `bar_desc(step)`, which prefixes the
step with the current label. The label travels in a context variable rather than as a parameter,
since the bars are made deep inside the scoring primitives (`distributed.run_batches`), which
many tasks call in many ways.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

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


def bar_desc(step: str) -> str:
    """A bar's description: `<label>: <step>` inside `labelled`, else `step`."""
    label = _LABEL.get()
    return f"{label}: {step}" if label else step
