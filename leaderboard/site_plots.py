"""The web board's interactive plots: plotly figures of a task's headline per model.

A task whose headline has a numeric tag (Min-K% AUC against prefix length) gets a line per model
against that tag; any other task gets horizontal bars, one per model, sorted best first, with the
metric's interval or seed spread as error bars. A key metric flagged `plot` gets a figure of its
own the same way (`plot_data.extra_heads`), on a log10 value axis where it says `log_scale`, with
a dashed line at its `reference_line`. The figure is built with plotly's Python package (which
validates it) and handed to the page as JSON; plotly.js draws it.

plotly.js reads a subset of HTML in labels (`<b>`, `<a href>`, ...), so every text from a results
file is HTML-escaped before it becomes a label: a model named `<b>x</b>` shows those characters."""

from __future__ import annotations

import html
import json
import math

import plotly.graph_objects as go
import plotly.offline

from harness.core.results import Headline
from leaderboard.collect import BoardEntry
from leaderboard.plot_data import PlotData, extra_heads, plot_caption, plot_data, plot_label
from leaderboard.render import plain


def plotly_js() -> bytes:
    """plotly.js as the installed plotly package bundles it."""
    return plotly.offline.get_plotlyjs().encode("utf-8")


def _label(item: BoardEntry) -> str:
    return html.escape(plot_label(item), quote=False)


def _dashed_line(figure: go.Figure, data: PlotData, value: float, text: str, vertical: bool) -> None:
    """A dashed line across the value axis at `value` (vertical for bars), labelled `text`. A shape
    takes data coordinates but an annotation the log10 of them on a log axis (plotly.js), so there
    the label is placed by hand."""
    add = figure.add_vline if vertical else figure.add_hline
    if not data.head.log_scale:
        add(value, line_dash="dash", annotation_text=text)
        return
    add(value, line_dash="dash")
    at = math.log10(value)
    place = ({"x": at, "xref": "x", "y": 1, "yref": "y domain", "xanchor": "left", "yanchor": "top"} if vertical
             else {"x": 1, "xref": "x domain", "y": at, "yref": "y", "xanchor": "right", "yanchor": "bottom"})
    figure.add_annotation(text=text, showarrow=False, **place)


def _bars(data: PlotData) -> go.Figure:
    rows = data.ranked()  # best first
    names = [_label(item) for item, _ in rows]
    values = [metric.value for _, metric in rows]
    minus, plus = zip(*(data.error(metric) for _, metric in rows))
    digits = data.value_format()
    bar = go.Bar(x=values, y=names, orientation="h", hovertemplate=f"%{{y}}: %{{x:{digits}}}<extra></extra>",
                 text=[f"{v:{digits}}" for v in values], textposition="inside", insidetextanchor="start",
                 textfont={"color": "white", "size": 10})
    if any(plus) or any(minus):
        bar.error_x = go.bar.ErrorX(type="data", symmetric=False, array=list(plus), arrayminus=list(minus))
    figure = go.Figure(bar)
    if data.head.ideal is not None:
        _dashed_line(figure, data, data.head.ideal, f"best: {data.head.ideal:g}", vertical=True)
    if data.head.reference_line is not None:
        _dashed_line(figure, data, data.head.reference_line, f"{data.head.reference_line:g}", vertical=True)
    figure.update_layout(height=120 + 22 * len(rows), xaxis_title=html.escape(data.axis_title(), quote=False))
    if data.head.log_scale:
        figure.update_xaxes(type="log", exponentformat="power")  # 10^-5, not SI's 10µ
    figure.update_yaxes(autorange="reversed", automargin=True)
    return figure


def _lines(data: PlotData) -> go.Figure:
    figure = go.Figure()
    for item, points in data.top_down():  # the legend reads in the order of the lines
        figure.add_trace(go.Scatter(x=[x for x, _ in points], y=[y for _, y in points], mode="lines+markers",
                                    name=_label(item), hovertemplate="%{fullData.name}<br>"
                                    + html.escape(data.axis_tag, quote=False)
                                    + f" %{{x}}: %{{y:{data.value_format()}}}<extra></extra>"))
    log = min(x for _, points in data.series for x, _ in points) > 0
    figure.update_xaxes(title=html.escape(data.axis_tag, quote=False), type="log" if log else "linear",
                        tickvals=data.xs(), ticktext=[f"{x:g}" for x in data.xs()])
    figure.update_layout(height=420 + 18 * max(0, len(data.series) - 12), yaxis_title=html.escape(data.axis_title(), quote=False),
                         legend={"orientation": "v", "x": 1.02, "y": 1, "xanchor": "left"})
    if data.head.reference_line is not None:
        _dashed_line(figure, data, data.head.reference_line, f"{data.head.reference_line:g}", vertical=False)
    if data.head.log_scale:
        figure.update_yaxes(type="log", exponentformat="power")  # 10^-5, not SI's 10µ
    return figure


def _versus(data: PlotData) -> go.Figure:
    """A key metric against another (`Headline.against`): a point per model, the dashed diagonal y = x, a run
    without the other one at the right edge, its tick labelled by that key metric's `absent` (∞)."""
    edge = data.edge()
    figure = go.Figure(go.Scatter(x=[0, edge], y=[0, edge], mode="lines", name="y = x", hoverinfo="skip",
                                  line={"dash": "dash", "color": "#555"}))
    digits = data.value_format()
    for item, [(x, y)] in data.top_down():
        shown = f"{x:{digits}}" if math.isfinite(x) else data.versus.absent
        figure.add_trace(go.Scatter(x=[edge if math.isinf(x) else x], y=[y], mode="markers", name=_label(item),
                                    hovertemplate=f"%{{fullData.name}}<br>{html.escape(shown, quote=False)}: "
                                    f"%{{y:{digits}}}<extra></extra>"))
    if any(math.isinf(x) for x in data.xs()):
        ticks = [edge * k / 4 for k in range(4)]
        figure.update_xaxes(tickvals=[*ticks, edge], ticktext=[f"{t:.3g}" for t in ticks] + [data.versus.absent])
    figure.update_xaxes(title=html.escape(data.versus_title(), quote=False), range=[0, edge * 1.05])
    figure.update_layout(height=420 + 18 * max(0, len(data.series) - 12),
                         yaxis_title=html.escape(data.axis_title(), quote=False),
                         legend={"orientation": "v", "x": 1.02, "y": 1, "xanchor": "left"})
    return figure


def task_figure(task: str, board: list[BoardEntry], head: Headline | None = None) -> tuple[dict | None, str | None]:
    """The task's plotly figure as JSON-ready data (None when nothing can be drawn) and the note that
    says which finished runs it leaves out. `head`: the figure of its own of that key metric
    (`plot_data.extra_heads`) instead of the task's figure of its headline."""
    data, note = plot_data(task, board, head)
    if data is None:
        return None, note
    figure = _versus(data) if data.versus else _lines(data) if data.axis_tag else _bars(data)
    figure.update_layout(template="none", title=html.escape(data.title, quote=False),
                         margin={"l": 10, "r": 10, "t": 40})
    figure.update_yaxes(automargin=True)
    figure.update_xaxes(automargin=True)
    return json.loads(figure.to_json()), note


def extra_figures(task: str, board: list[BoardEntry]) -> list[dict]:
    """The task's figures of its own key metrics flagged `plot` (`plot_data.extra_heads`), in order,
    each as {"caption": its label and axis (plain text; the template escapes it), "figure": as
    `task_figure`, "note": as `task_figure`}."""
    figures = []
    for head in extra_heads(task, board):
        figure, note = task_figure(task, board, head)
        figures.append({"caption": plot_caption(head, plain), "figure": figure, "note": note})
    return figures
