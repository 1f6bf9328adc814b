"""What a task's plot draws, for both plotters (the board's PNGs, `leaderboard.plots`, and the web
board's plotly figures, `leaderboard.site_plots`): each finished run's headline value, against the
headline's numeric tag when it has one (e.g. Min-K% AUC against prefix length), and which runs are
left out and why."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from harness.core.results import Headline, Metric
from leaderboard.collect import BoardEntry
from leaderboard.render import changed_mark, entry_label, escape, limit_mark

LABEL_CHARS = 48  # a model name longer than this is cut with an ellipsis in a plot


def plot_label(item: BoardEntry) -> str:
    """A run's label in a plot: `name (identity8)`, the limit mark and the changed-settings mark; a
    name longer than `LABEL_CHARS` cut with an ellipsis (the identity stays, so labels stay apart)."""
    name = item.model_name if len(item.model_name) <= LABEL_CHARS else item.model_name[:LABEL_CHARS - 1] + "…"
    return f"{name} ({item.model_identity[:8]}){limit_mark([item.limit])}{changed_mark(item)}"


def number(value: str | None) -> float | None:
    """A tag value as a finite number; None when it is not one."""
    try:
        parsed = float(value)
    except (TypeError, ValueError):
        return None
    return parsed if math.isfinite(parsed) else None


def _names_number(text: str, value: str) -> bool:
    """True when `value` stands in `text` as a number of its own (`1` in `after 1 epoch`, not in
    `10`, `1.5`, `1%` or `x-1`)."""
    return re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w.%])", text) is not None


@dataclass
class PlotData:
    """The runs a task's plot draws. `series`: per run, (axis tag value, headline value) points
    (one point at x=0 when there is no axis tag); `metrics`: per run, its headline metric."""

    task: str
    head: Headline
    axis_tag: str | None
    series: list[tuple[BoardEntry, list[tuple[float, float]]]]
    metrics: list[Metric | None]

    def xs(self) -> list[float]:
        return sorted({x for _, points in self.series for x, _ in points})

    def axis_title(self) -> str:
        """The value axis: what is plotted (`quantity`) and its better direction."""
        label = self.quantity()
        return (f"{label} ({self.head.better} is better)" if self.head.ideal is None
                else f"{label} (best at {self.head.ideal:g})")

    def quantity(self) -> str:
        """What the value axis holds. Bars: the headline's label. Lines against the axis tag: the
        label up to its first comma (`Min-K% 20% AUC, 128 words` -> `Min-K% 20% AUC`), unless that
        part names the headline's own axis value (`... after 1 epoch`, which the axis runs over);
        then the metric and its fixed tags (`auc: score=min_k_20, trained_on=members`)."""
        if not self.axis_tag:
            return self.head.label
        first_part = self.head.label.split(",")[0].strip()
        if not _names_number(first_part, self.head.tags[self.axis_tag]):
            return first_part
        fixed = ", ".join(f"{k}={v}" for k, v in self.head.tags.items() if k != self.axis_tag)
        return f"{self.head.metric}: {fixed}" if fixed else self.head.metric

    @staticmethod
    def error(metric: Metric) -> tuple[float, float]:
        """How far below and above its value a metric's error bar reaches: to its interval's ends
        where it has them, else its seed spread (std), else 0; never negative."""
        spread = metric.std or 0.0
        below = metric.value - metric.ci_low if metric.ci_low is not None else spread
        above = metric.ci_high - metric.value if metric.ci_high is not None else spread
        return max(0.0, below), max(0.0, above)

    def top_down(self) -> list[tuple[BoardEntry, list[tuple[float, float]]]]:
        """The series from the highest value at its largest x down: a legend in this order reads
        in the order of the lines."""
        return sorted(self.series, key=lambda run: (-run[1][-1][1], run[0].model_name, run[0].model_identity))

    def ranked(self) -> list[tuple[BoardEntry, Metric]]:
        """Runs with their headline metric, best first: highest or lowest value, or nearest the
        ideal; ties by model name."""
        rows = [(item, metric) for (item, _), metric in zip(self.series, self.metrics) if metric is not None]

        def badness(row: tuple[BoardEntry, Metric]) -> float:
            value = row[1].value
            if self.head.better == "higher":
                return -value
            return value if self.head.better == "lower" else abs(value - self.head.ideal)

        return sorted(rows, key=lambda row: (badness(row), row[0].model_name, row[0].model_identity))


def _points(item: BoardEntry, axis_tag: str | None) -> list[tuple[float, Metric]]:
    """(axis tag value, metric) of each of the entry's metrics its headline names, whatever the
    axis tag, sorted by the tag value; metrics without a value, or without a numeric axis tag, are
    left out. Without an axis tag every point is at 0."""
    head = item.entry.headline
    fixed = {k: v for k, v in head.tags.items() if k != axis_tag}
    points = []
    for metric in item.entry.metrics:
        if metric.name != head.metric or metric.value is None:
            continue
        if all(metric.tags.get(k) == v for k, v in fixed.items()):
            x = number(metric.tags.get(axis_tag)) if axis_tag else 0.0
            if x is not None:
                points.append((x, metric))
    return sorted(points, key=lambda point: (point[0], point[1].value))


def _why_left_out(item: BoardEntry, axis_tag: str | None) -> str:
    head = item.entry.headline
    if head is None:
        return "it names no headline metric"
    where = ", ".join(f"{k}={v}" for k, v in head.tags.items() if k != axis_tag)
    return (f"no value of {escape(head.metric)}" + (f" ({escape(where)})" if where else "")
            + (f" with a numeric {escape(axis_tag)} tag" if axis_tag else ""))


def plot_data(task: str, board: list[BoardEntry]) -> tuple[PlotData | None, str | None]:
    """The task's plot data (None when no finished run has a value to draw) and one markdown line
    that says which finished runs it leaves out and why (None when it draws them all, or when the
    task has no finished run)."""
    finished = [b for b in board if b.entry.name == task and b.entry.status == "ok"]
    items = [b for b in finished if b.entry.headline]
    head = items[0].entry.headline if items else None
    axis_tag = next((k for k, v in head.tags.items() if number(v) is not None), None) if head else None
    points = [(item, _points(item, axis_tag)) for item in items]
    drawn = [(item, found) for item, found in points if found]
    left_out = [item for item in finished if not any(item is d for d, _ in drawn)]
    note = ("Plot: leaves out " + "; ".join(f"{entry_label(item)} ({_why_left_out(item, axis_tag)})"
                                            for item in left_out) + ".") if left_out else None
    if not drawn:
        return None, ("Plot: none, no finished run has a value of its headline metric to draw." if finished else None)
    series = [(item, [(x, metric.value) for x, metric in found]) for item, found in drawn]
    metrics = [None if axis_tag else found[0][1] for _, found in drawn]
    return PlotData(task, head, axis_tag, series, metrics), note
