"""One PNG per task for LEADERBOARD.md: its headline metric per model, against a numeric tag when
the task has one (e.g. Min-K% AUC against prefix length), else as bars; and one more per key metric
flagged `plot` (`plot_data.extra_heads`, e.g. a p-value per epoch), on a log10 value axis where it
says `log_scale`, with a dashed line at its `reference_line`. What is drawn comes from
`leaderboard.plot_data` (the web board's plotly figures draw the same).

The plots scale with the number of models: bars are horizontal, one per model, sorted best first,
and the figure grows by a fixed height per bar, so labels never overlap; a line plot's legend is
outside the axes, in as many columns as it needs, and the figure grows to hold it. Text from the
files is drawn as it is (no mathtext, so a `$` in a model name is a dollar sign); labels longer
than `plot_data.LABEL_CHARS` are cut with an ellipsis, keeping the identity."""

from __future__ import annotations

import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import LogFormatter  # noqa: E402

from harness.core.results import Headline  # noqa: E402
from leaderboard.collect import BoardEntry  # noqa: E402
from leaderboard.plot_data import PlotData, note_prefix, plot_data, plot_label  # noqa: E402

# Text from a results file is drawn verbatim: matplotlib's mathtext would read `$...$` (and fail on
# what it cannot parse).
_PLAIN_TEXT = {"text.parse_math": False, "text.usetex": False}
FIGURE = {"width": 8.0, "dpi": 100}
BAR_INCHES = 0.28  # height per bar (and per legend row): room for a 9 pt label
LEGEND_ROWS = 24  # legend entries per column before another column is added


def model_label(item: BoardEntry) -> str:
    label = plot_label(item)
    return " " + label if label.startswith("_") else label  # matplotlib hides legend labels that start with _


def reference_line(data: PlotData, axes, vertical: bool) -> None:
    """The headline's `reference_line`, where it has one: dashed, across the value axis (vertical
    for bars, horizontal for lines), its value written at the axes' edge."""
    value = data.head.reference_line
    if value is None:
        return
    style = {"color": "#555", "linestyle": "--", "linewidth": 1}
    if vertical:
        axes.axvline(value, **style)
        axes.annotate(f"{value:g}", (value, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -2),
                      textcoords="offset points", ha="left", va="top", fontsize=7, color="#555")
    else:
        axes.axhline(value, **style)
        axes.annotate(f"{value:g}", (1.0, value), xycoords=("axes fraction", "data"), xytext=(-2, 2),
                      textcoords="offset points", ha="right", va="bottom", fontsize=7, color="#555")


def log10_axis(axes, which: str) -> None:
    """A log10 scale on the `which` ("x" or "y") axis of `axes`, its tick labels plain text
    (`1e-05`, `0.01`): the default labels are mathtext, which these plots do not parse (`_PLAIN_TEXT`)."""
    if which == "x":
        axes.set_xscale("log")
    else:
        axes.set_yscale("log")
    axis = axes.xaxis if which == "x" else axes.yaxis
    axis.set_major_formatter(LogFormatter())
    axis.set_minor_formatter(LogFormatter(labelOnlyBase=False))


def bar_figure(data: PlotData) -> Figure:
    """Horizontal bars, best at the top, the value at the end of each bar, the interval (or the
    seed spread) as an error bar, a dashed line at the ideal value where there is one; a log10
    value axis and the reference line where the headline asks for them."""
    rows = data.ranked()
    height = 1.2 + BAR_INCHES * len(rows)
    figure = plt.figure(figsize=(FIGURE["width"], height), dpi=FIGURE["dpi"])
    axes = figure.add_subplot()
    positions = list(range(len(rows)))
    values = [metric.value for _, metric in rows]
    low, high = zip(*(data.error(metric) for _, metric in rows))
    spread = any(low) or any(high)
    axes.barh(positions, values, height=0.7, color="#4c72b0",
              xerr=[low, high] if spread else None, error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "#333"})
    axes.set_yticks(positions, [model_label(item) for item, _ in rows], fontsize=8)
    axes.set_ylim(len(rows) - 0.5, -0.5)  # the first (best) row at the top
    for position, value, up, down in zip(positions, values, high, low):
        end = value + up if value >= 0 else value - down  # past the error bar
        axes.annotate(f"{value:{data.value_format()}}", (end, position), xytext=(3 if value >= 0 else -3, 0),
                      textcoords="offset points", va="center", ha="left" if value >= 0 else "right", fontsize=7)
    if data.head.ideal is not None:
        axes.axvline(data.head.ideal, color="#c44e52", linestyle="--", linewidth=1)
    reference_line(data, axes, vertical=True)
    if data.head.log_scale:
        log10_axis(axes, "x")
    axes.set_xlabel(data.axis_title())
    axes.grid(axis="x", alpha=0.3)
    axes.margins(x=0.12)
    return figure


def line_figure(data: PlotData) -> Figure:
    """A line per model against the axis tag (doubling steps on a log2 axis when all are
    positive), the legend to the right of the axes in columns of `LEGEND_ROWS`; a log10 value axis
    and the reference line where the headline asks for them."""
    columns = max(1, math.ceil(len(data.series) / LEGEND_ROWS))
    rows = math.ceil(len(data.series) / columns)
    height = max(4.0, 1.2 + BAR_INCHES * rows)
    figure = plt.figure(figsize=(6.0 + 3.2 * columns, height), dpi=FIGURE["dpi"])
    axes = figure.add_axes((0.08, 0.12, 5.0 / (6.0 + 3.2 * columns), 0.8))
    tab20 = plt.get_cmap("tab20").colors
    colours = tab20[0::2] + tab20[1::2]  # the 10 strong colours first, then their light pairs
    styles = ("-", "--", ":", "-.")
    markers = ("o", "s", "^", "D", "v")
    for k, (item, points) in enumerate(data.top_down()):
        axes.plot([x for x, _ in points], [y for _, y in points], label=model_label(item),
                  color=colours[k % 20], linestyle=styles[(k // 20) % 4], marker=markers[(k // 20) % 5],
                  markersize=3, linewidth=1.2)
    xs = data.xs()
    axes.set_xlabel(data.axis_tag)
    if xs[0] > 0:  # lengths and sizes: doubling steps; counts from 0 (epochs): linear
        axes.set_xscale("log", base=2)
    axes.set_xticks(xs, [f"{x:g}" for x in xs])
    axes.minorticks_off()
    axes.set_ylabel(data.axis_title())
    reference_line(data, axes, vertical=False)
    if data.head.log_scale:
        log10_axis(axes, "y")
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=7, ncols=columns,
                frameon=False)
    return figure


def versus_figure(data: PlotData) -> Figure:
    """A key metric against another (`Headline.against`): a point per model, the dashed diagonal y = x (a
    bound on or below it holds its claim), a run without the other one at the right edge, its tick labelled
    by that key metric's `absent` (∞); the legend to the right, as a line plot's."""
    columns = max(1, math.ceil(len(data.series) / LEGEND_ROWS))
    height = max(4.0, 1.2 + BAR_INCHES * math.ceil(len(data.series) / columns))
    figure = plt.figure(figsize=(6.0 + 3.2 * columns, height), dpi=FIGURE["dpi"])
    axes = figure.add_axes((0.08, 0.12, 5.0 / (6.0 + 3.2 * columns), 0.8))
    edge = data.edge()
    axes.plot([0, edge], [0, edge], color="#555", linestyle="--", linewidth=1, label="y = x")
    colours = plt.get_cmap("tab10").colors
    for k, (item, [(x, y)]) in enumerate(data.top_down()):
        axes.scatter([edge if math.isinf(x) else x], [y], color=colours[k % 10], marker="os^Dv"[(k // 10) % 5],
                     s=30, label=model_label(item), zorder=3)
    axes.set_xlim(0, edge * 1.05)
    if any(math.isinf(x) for x in data.xs()) and data.versus is not None:
        ticks = [t for t in axes.get_xticks() if 0 <= t < edge * 0.9]
        axes.set_xticks([*ticks, edge], [f"{t:g}" for t in ticks] + [data.versus.absent])
    axes.set_ylim(bottom=0)
    axes.set_xlabel(data.versus_title())
    axes.set_ylabel(data.axis_title())
    axes.grid(alpha=0.3)
    axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=7, ncols=columns,
                frameon=False)
    return figure


def figure_of(data: PlotData) -> Figure:
    figure = versus_figure(data) if data.versus else line_figure(data) if data.axis_tag else bar_figure(data)
    figure.axes[0].set_title(data.title)
    return figure


def _draw(data: PlotData) -> bytes:
    figure = figure_of(data)
    try:
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", bbox_inches="tight", metadata={"Software": None})
        return buffer.getvalue()
    finally:
        plt.close(figure)


def task_plot(task: str, board: list[BoardEntry], head: Headline | None = None) -> tuple[bytes | None, str | None]:
    """PNG bytes of one task's plot (None when it has nothing to draw), and one markdown line that
    says which finished runs it leaves out and why (None when it draws them all, or when the task
    has no finished run). `head`: the plot of its own of that key metric (`plot_data.extra_heads`)
    instead of the task's plot of its headline."""
    data, note = plot_data(task, board, head)
    if data is None:
        return None, note
    try:
        with plt.rc_context(_PLAIN_TEXT):
            return _draw(data), note
    except (ValueError, ArithmeticError, RuntimeError) as err:  # values matplotlib cannot lay out (1e308, say)
        return None, (f"{note_prefix(head)}: none, matplotlib could not draw these values or labels "
                      f"({type(err).__name__}).")
