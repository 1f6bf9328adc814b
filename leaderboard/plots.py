"""One PNG per task: its headline metric per model, against a numeric tag when the task has one
(e.g. Min-K% AUC against prefix length), else as bars."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from leaderboard.collect import BoardEntry  # noqa: E402
from leaderboard.render import limit_mark  # noqa: E402


def _numeric(value: str) -> bool:
    try:
        float(value)
        return True
    except ValueError:
        return False


def _series(item: BoardEntry, axis_tag: str | None) -> list[tuple[float, float]]:
    head = item.entry.headline
    points = []
    for metric in item.entry.metrics:
        if metric.name != head.metric or metric.value is None:
            continue
        fixed = {k: v for k, v in head.tags.items() if k != axis_tag}
        if all(metric.tags.get(k) == v for k, v in fixed.items()):
            x = float(metric.tags[axis_tag]) if axis_tag else 0.0
            points.append((x, metric.value))
    return sorted(points)


def task_plot(task: str, board: list[BoardEntry]) -> bytes | None:
    """PNG bytes of one task's plot; None when the task has no finished runs."""
    items = [b for b in board if b.entry.name == task and b.entry.status == "ok" and b.entry.headline]
    if not items:
        return None
    head = items[0].entry.headline
    axis_tag = next((k for k, v in head.tags.items() if _numeric(v)), None)
    figure, axes = plt.subplots(figsize=(7, 4), dpi=100)
    if axis_tag:
        xs = set()
        for item in items:
            points = _series(item, axis_tag)
            xs.update(p[0] for p in points)
            axes.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                      label=f"{item.model_name} ({item.model_identity[:8]}){limit_mark([item.limit])}")
        axes.set_xlabel(axis_tag)
        if min(xs) > 0:  # lengths and sizes: doubling steps; counts from 0 (epochs): linear
            axes.set_xscale("log", base=2)
        axes.set_xticks(sorted(xs), [f"{x:g}" for x in sorted(xs)])
        axes.minorticks_off()
    else:
        names = [f"{i.model_name}\n({i.model_identity[:8]}){limit_mark([i.limit])}" for i in items]
        axes.bar(names, [(_series(i, None) or [(0, 0)])[0][1] for i in items])
    label = head.label.split(",")[0] if axis_tag else head.label
    axes.set_ylabel(f"{label} ({head.better} is better)" if head.ideal is None else f"{label} (best at {head.ideal:g})")
    axes.set_title(task)
    axes.grid(alpha=0.3)
    if axis_tag:
        axes.legend(fontsize=7)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(figure)
    return buffer.getvalue()
