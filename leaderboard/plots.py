"""One PNG per task: its headline metric per model, against a numeric tag when the task has one
(e.g. Min-K% AUC against prefix length), else as bars.

A plot draws what it can of any valid results file: a run without a value to draw is left out and
the board says so (`task_plot`'s note), and text from the files is drawn as it is (no mathtext, so
a `$` in a model name is a dollar sign)."""

from __future__ import annotations

import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from harness.results import Headline  # noqa: E402
from leaderboard.collect import BoardEntry  # noqa: E402
from leaderboard.render import entry_label, escape, limit_mark  # noqa: E402

# Text from a results file is drawn verbatim: matplotlib's mathtext would read `$...$` (and fail on
# what it cannot parse).
_PLAIN_TEXT = {"text.parse_math": False, "text.usetex": False}
FIGURE = {"figsize": (7, 4), "dpi": 100}


def _number(value: str | None) -> float | None:
    """A tag value as a finite number; None when it is not one."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _series(item: BoardEntry, axis_tag: str | None) -> list[tuple[float, float]]:
    """(axis tag value, headline value) of each of the entry's metrics its headline names, whatever
    the axis tag; metrics without a value, or without a numeric axis tag, are left out."""
    head = item.entry.headline
    fixed = {k: v for k, v in head.tags.items() if k != axis_tag}
    points = []
    for metric in item.entry.metrics:
        if metric.name != head.metric or metric.value is None:
            continue
        if all(metric.tags.get(k) == v for k, v in fixed.items()):
            x = _number(metric.tags.get(axis_tag)) if axis_tag else 0.0
            if x is not None:
                points.append((x, metric.value))
    return sorted(points)


def _legend_label(item: BoardEntry, separator: str = " ") -> str:
    label = f"{item.model_name}{separator}({item.model_identity[:8]}){limit_mark([item.limit])}"
    return " " + label if label.startswith("_") else label  # matplotlib hides labels that start with _


def _why_left_out(item: BoardEntry, axis_tag: str | None) -> str:
    head = item.entry.headline
    if head is None:
        return "it names no headline metric"
    where = ", ".join(f"{k}={v}" for k, v in head.tags.items() if k != axis_tag)
    return (f"no value of {escape(head.metric)}" + (f" ({escape(where)})" if where else "")
            + (f" with a numeric {escape(axis_tag)} tag" if axis_tag else ""))


def _draw(task: str, head: Headline, axis_tag: str | None,
          drawn: list[tuple[BoardEntry, list[tuple[float, float]]]]) -> bytes:
    figure, axes = plt.subplots(**FIGURE)
    try:
        if axis_tag:
            xs = sorted({x for _, points in drawn for x, _ in points})
            for item, points in drawn:
                axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=_legend_label(item))
            axes.set_xlabel(axis_tag)
            if xs[0] > 0:  # lengths and sizes: doubling steps; counts from 0 (epochs): linear
                axes.set_xscale("log", base=2)
            axes.set_xticks(xs, [f"{x:g}" for x in xs])
            axes.minorticks_off()
        else:
            axes.bar([_legend_label(item, "\n") for item, _ in drawn], [points[0][1] for _, points in drawn])
        label = head.label.split(",")[0] if axis_tag else head.label
        axes.set_ylabel(f"{label} ({head.better} is better)" if head.ideal is None
                        else f"{label} (best at {head.ideal:g})")
        axes.set_title(task)
        axes.grid(alpha=0.3)
        if axis_tag:
            axes.legend(fontsize=7)
        figure.tight_layout()
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", metadata={"Software": None})
        return buffer.getvalue()
    finally:
        plt.close(figure)


def task_plot(task: str, board: list[BoardEntry]) -> tuple[bytes | None, str | None]:
    """PNG bytes of one task's plot (None when it has nothing to draw), and one markdown line that
    says which finished runs it leaves out and why (None when it draws them all, or when the task
    has no finished run)."""
    finished = [b for b in board if b.entry.name == task and b.entry.status == "ok"]
    items = [b for b in finished if b.entry.headline]
    head = items[0].entry.headline if items else None
    axis_tag = next((k for k, v in head.tags.items() if _number(v) is not None), None) if head else None
    series = [(item, _series(item, axis_tag)) for item in items]
    drawn = [(item, points) for item, points in series if points]
    left_out = [item for item in finished if not any(item is d for d, _ in drawn)]
    note = ("Plot: leaves out " + "; ".join(f"{entry_label(item)} ({_why_left_out(item, axis_tag)})"
                                            for item in left_out) + ".") if left_out else None
    if not drawn:
        return None, ("Plot: none, no finished run has a value of its headline metric to draw." if finished else None)
    try:
        with plt.rc_context(_PLAIN_TEXT):
            return _draw(task, head, axis_tag, drawn), note
    except (ValueError, ArithmeticError, RuntimeError) as err:  # values matplotlib cannot lay out (1e308, say)
        return None, f"Plot: none, matplotlib could not draw these values or labels ({type(err).__name__})."
