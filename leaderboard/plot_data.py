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
from leaderboard.render import (
    EPOCH_TAG,
    Text,
    better_in_words,
    changed_mark,
    entry_label,
    epoch_reached,
    escape,
    limit_mark,
    number,
    points_along,
    shows_absent,
    task_heads,
)

LABEL_CHARS = 48  # a model name longer than this is cut with an ellipsis in a plot


def plot_label(item: BoardEntry) -> str:
    """A run's label in a plot: `name (identity8)`, the limit mark and the changed-settings mark; a
    name longer than `LABEL_CHARS` cut with an ellipsis (the identity stays, so labels stay apart)."""
    name = item.model_name if len(item.model_name) <= LABEL_CHARS else item.model_name[:LABEL_CHARS - 1] + "…"
    return f"{name} ({item.model_identity[:8]}){limit_mark([item.limit])}{changed_mark(item)}"


def _names_number(text: str, value: str) -> bool:
    """True when `value` stands in `text` as a number of its own (`1` in `after 1 epoch`, not in
    `10`, `1.5`, `1%` or `x-1`)."""
    return re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w.%])", text) is not None


@dataclass
class PlotData:
    """The runs a task's plot draws. `head`: the headline drawn (the first run's, or the key metric
    of a plot of its own); `series`: per run, (axis tag value, headline value) points (one point at
    x=0 when there is no axis tag); `metrics`: per run, its headline metric (bars only); `title`:
    the figure's, the task's name, or `<task>: <label>` for a plot of its own."""

    task: str
    head: Headline
    axis_tag: str | None
    series: list[tuple[BoardEntry, list[tuple[float, float]]]]
    metrics: list[Metric | None]
    title: str
    # a plot `against` another key metric (`Headline.against`): that key metric, the x axis; each series is
    # one point (x, y), x = inf for a run without it (drawn at the right edge, labelled by its `absent`)
    versus: Headline | None = None

    def value_format(self) -> str:
        """How both plotters write a value: 3 decimals, or 3 significant digits on a log10 axis (a p-value of
        1e-30); a Python format spec, which is also d3's."""
        return ".3g" if self.head.log_scale else ".3f"

    def xs(self) -> list[float]:
        return sorted({x for _, points in self.series for x, _ in points})

    def edge(self) -> float:
        """A plot `against` another key metric: where its axes end, and a run without that one stands (x = inf):
        a quarter beyond the largest finite value of either axis (at least 1), so the diagonal fits."""
        finite = [v for _, points in self.series for point in points for v in point if math.isfinite(v)]
        return 1.25 * max([1.0, *finite])

    def versus_title(self) -> str:
        """A plot against another key metric: its x axis, that key metric's label, and what its right edge means."""
        label = self.versus.label if self.versus else self.head.against
        edge = any(math.isinf(x) for x in self.xs())
        return f"{label} (right edge: {self.versus.absent})" if edge and self.versus else label

    def axis_title(self) -> str:
        """The value axis: what is plotted (`quantity`) and its better direction."""
        label = self.quantity()
        return (f"{label} ({self.head.better} is better)" if self.head.ideal is None
                else f"{label} (best at {self.head.ideal:g})")

    def quantity(self) -> str:
        """What the value axis holds. Bars: the headline's label. Lines against the axis tag: the
        label up to its first comma outside parentheses (`Min-K% 20% AUC, 128 words` -> `Min-K% 20% AUC`;
        `(100, 0.5)-extractable members, 4 epochs` -> `(100, 0.5)-extractable members`), unless that
        part names the headline's own axis value (`... after 1 epoch`, which the axis runs over);
        then the metric and its fixed tags (`auc: score=min_k_20, trained_on=members`)."""
        if not self.axis_tag:
            return self.head.label
        first_part = re.split(r",(?![^(]*\))", self.head.label)[0].strip()  # a comma inside (...) stays
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


def axis_tag_of(head: Headline) -> str | None:
    """The tag a plot of `head` runs along: its first tag whose value is a number; None (bars) when none is."""
    return next((k for k, v in head.tags.items() if number(v) is not None), None)


def extra_heads(task: str, board: list[BoardEntry]) -> list[Headline]:
    """The key metrics of `task` drawn as plots of their own beside its headline's: those of its
    newest version's `summary` flagged `plot` (`render.task_heads`), in the summary's order."""
    return [head for head in task_heads(task, board) if head.plot]


def note_prefix(head: Headline | None) -> str:
    """How a plot's note begins: `Plot` for the task's plot of each run's headline (`head` None),
    `Plot of <label>` for a plot of its own of `head`."""
    return "Plot" if head is None else f"Plot of {escape(head.label)}"


def plot_caption(head: Headline, text: Text = escape) -> str:
    """The line under a plot of its own of `head`: its label, better direction, and the log10 axis,
    reference line and the metric it is plotted against where it has them."""
    extras = [better_in_words(head)] + (["log10 axis"] if head.log_scale else [])
    if head.reference_line is not None:
        extras.append(f"dashed line at {head.reference_line:g}")
    if head.against:
        extras.append(f"against {text(head.against)}, dashed line y = x")
    return f"{text(head.label)} ({'; '.join(extras)})"


def _why_left_out(head: Headline | None, axis_tag: str | None, found: bool) -> str:
    """Why a finished run draws no point: no headline, no value of `head`'s metric, or (`found`:
    values it has) none above 0 for a log10 axis."""
    if head is None:
        return "it names no headline metric"
    if found:
        return f"its values of {escape(head.metric)} are all ≤ 0, which a log10 axis cannot draw"
    where = ", ".join(f"{k}={v}" for k, v in head.tags.items() if k != axis_tag)
    return (f"no value of {escape(head.metric)}" + (f" ({escape(where)})" if where else "")
            + (f" with a numeric {escape(axis_tag)} tag" if axis_tag else ""))


def versus_data(task: str, board: list[BoardEntry], head: Headline) -> tuple[PlotData | None, str | None]:
    """`plot_data` of a key metric plotted `against` another (`Headline.against`): per finished run one point,
    its value of `head` (at the last epoch it reached, where it stopped short: `render.epoch_reached`) against
    its value of the other key metric at the same epoch, or x = inf where it has none and that key metric
    says what its absence means (`absent`, privacy_extraction's claimed ε: ∞ without DP)."""
    finished = [b for b in board if b.entry.name == task and b.entry.status == "ok"]
    versus = next((h for h in task_heads(task, board) if h.metric == head.against), None)
    series, metrics, left_out = [], [], []
    for item in finished:
        y_head = epoch_reached(item, head) or head
        y = item.entry.headline_metric(y_head)
        if y is None or y.value is None:
            left_out.append((item, _why_left_out(head, None, False)))
            continue
        x_head = versus and versus.model_copy(update={"tags": {
            **versus.tags, **{k: v for k, v in y_head.tags.items() if k == EPOCH_TAG and k in versus.tags}}})
        x = item.entry.headline_metric(x_head) if x_head else None
        if x is not None and x.value is not None:
            series.append((item, [(x.value, y.value)]))
        elif versus is not None and shows_absent(item.entry, versus):
            series.append((item, [(math.inf, y.value)]))
        else:
            left_out.append((item, f"no value of {escape(head.against)} to plot it against"))
            continue
        metrics.append(y)
    note = (f"{note_prefix(head)}: leaves out " + "; ".join(f"{entry_label(item)} ({why})" for item, why in left_out)
            + ".") if left_out and series else None
    if not series:
        return None, (f"{note_prefix(head)}: none, no finished run has a value of {escape(head.metric)} to draw."
                      if finished else None)
    return PlotData(task, head, None, series, metrics, f"{task}: {head.label}", versus), note


def plot_data(task: str, board: list[BoardEntry], head: Headline | None = None
              ) -> tuple[PlotData | None, str | None]:
    """The task's plot data (None when no finished run has a value to draw) and one markdown line
    that says which finished runs, or values, it leaves out and why (None when it draws them all, or
    when the task has no finished run).

    `head` None: the task's plot, of each finished run's own headline, along the first one's axis
    tag. `head` given (one of `extra_heads`): a plot of its own of that metric, of every finished run,
    its metrics that match `head`'s metric and fixed tags against its axis tag; the note then begins
    `Plot of <label>`. On a log10 axis (`head.log_scale`) values <= 0 are left out, and said so. A key metric
    plotted `against` another: `versus_data`."""
    if head is not None and head.against:
        return versus_data(task, board, head)
    finished = [b for b in board if b.entry.name == task and b.entry.status == "ok"]
    shown = head or next((b.entry.headline for b in finished if b.entry.headline), None)
    axis_tag = axis_tag_of(shown) if shown else None
    log = shown is not None and shown.log_scale
    rows = []  # (run, the headline drawn of it, its points, those drawn: above 0 on a log10 axis)
    for item in finished:
        own = head or item.entry.headline
        points = points_along(item.entry.metrics, own, axis_tag) if own else []
        rows.append((item, own, points, [(x, m) for x, m in points if not log or m.value > 0]))
    drawn = [(item, kept) for item, _, _, kept in rows if kept]
    left_out = [(item, _why_left_out(own, axis_tag, bool(points))) for item, own, points, kept in rows if not kept]
    cut = [(item, len(points) - len(kept), len(points)) for item, _, points, kept in rows
           if 0 < len(kept) < len(points)]
    sentences = []
    if left_out:
        sentences.append("leaves out " + "; ".join(f"{entry_label(item)} ({why})" for item, why in left_out) + ".")
    if cut:
        sentences.append("Leaves out values ≤ 0, which a log10 axis cannot draw: " + "; ".join(
            f"{entry_label(item)} ({n} of {total})" for item, n, total in cut) + ".")
    note = f"{note_prefix(head)}: " + " ".join(sentences) if sentences else None
    if not drawn:
        what = "its headline metric" if head is None else escape(head.metric)
        return None, (f"{note_prefix(head)}: none, no finished run has a {'positive ' if log else ''}value "
                      f"of {what} to draw." if finished else None)
    series = [(item, [(x, metric.value) for x, metric in points]) for item, points in drawn]
    metrics = [None if axis_tag else points[0][1] for _, points in drawn]
    title = task if head is None else f"{task}: {head.label}"
    return PlotData(task, shown, axis_tag, series, metrics, title), note
