"""The web board's interactive plots: plotly figures of a task's headline per model.

A task whose headline has a numeric tag (Min-K% AUC against prefix length) gets a line per model
against that tag; any other task gets horizontal bars, one per model, sorted best first, with the
metric's interval or seed spread as error bars. The figure is built with plotly's Python package
(which validates it) and handed to the page as JSON; plotly.js draws it.

plotly.js reads a subset of HTML in labels (`<b>`, `<a href>`, ...), so every text from a results
file is HTML-escaped before it becomes a label: a model named `<b>x</b>` shows those characters."""

from __future__ import annotations

import html
import json

import plotly.graph_objects as go
import plotly.offline

from leaderboard.collect import BoardEntry
from leaderboard.plot_data import PlotData, plot_data, plot_label


def plotly_js() -> bytes:
    """plotly.js as the installed plotly package bundles it."""
    return plotly.offline.get_plotlyjs().encode("utf-8")


def _label(item: BoardEntry) -> str:
    return html.escape(plot_label(item), quote=False)


def _bars(data: PlotData) -> go.Figure:
    rows = data.ranked()  # best first
    names = [_label(item) for item, _ in rows]
    values = [metric.value for _, metric in rows]
    minus, plus = zip(*(data.error(metric) for _, metric in rows))
    bar = go.Bar(x=values, y=names, orientation="h", hovertemplate="%{y}: %{x:.3f}<extra></extra>",
                 text=[f"{v:.3f}" for v in values], textposition="inside", insidetextanchor="start",
                 textfont={"color": "white", "size": 10})
    if any(plus) or any(minus):
        bar.error_x = go.bar.ErrorX(type="data", symmetric=False, array=list(plus), arrayminus=list(minus))
    figure = go.Figure(bar)
    if data.head.ideal is not None:
        figure.add_vline(x=data.head.ideal, line_dash="dash", annotation_text=f"best: {data.head.ideal:g}")
    figure.update_layout(height=120 + 22 * len(rows), xaxis_title=html.escape(data.axis_title(), quote=False))
    figure.update_yaxes(autorange="reversed", automargin=True)
    return figure


def _lines(data: PlotData) -> go.Figure:
    figure = go.Figure()
    for item, points in data.top_down():  # the legend reads in the order of the lines
        figure.add_trace(go.Scatter(x=[x for x, _ in points], y=[y for _, y in points], mode="lines+markers",
                                    name=_label(item), hovertemplate="%{fullData.name}<br>"
                                    + html.escape(data.axis_tag, quote=False) + " %{x}: %{y:.3f}<extra></extra>"))
    log = min(x for _, points in data.series for x, _ in points) > 0
    figure.update_xaxes(title=html.escape(data.axis_tag, quote=False), type="log" if log else "linear",
                        tickvals=data.xs(), ticktext=[f"{x:g}" for x in data.xs()])
    figure.update_layout(height=420 + 18 * max(0, len(data.series) - 12), yaxis_title=html.escape(data.axis_title(), quote=False),
                         legend={"orientation": "v", "x": 1.02, "y": 1, "xanchor": "left"})
    return figure


def task_figure(task: str, board: list[BoardEntry]) -> tuple[dict | None, str | None]:
    """The task's plotly figure as JSON-ready data (None when nothing can be drawn) and the note that
    says which finished runs it leaves out."""
    data, note = plot_data(task, board)
    if data is None:
        return None, note
    figure = _lines(data) if data.axis_tag else _bars(data)
    figure.update_layout(template="none", title=html.escape(task, quote=False), margin={"l": 10, "r": 10, "t": 40})
    figure.update_yaxes(automargin=True)
    figure.update_xaxes(automargin=True)
    return json.loads(figure.to_json()), note
