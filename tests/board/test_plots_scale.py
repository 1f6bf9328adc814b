"""The board's plots stay readable with many models (60 synthetic submissions, `synthetic_board`):
horizontal bars sorted best first, a fixed height per bar, no two labels overlapping, a line plot's
legend outside its axes. The images themselves were looked at (see the closing note of issue 19)."""

from __future__ import annotations

import itertools
import struct

import matplotlib.pyplot as plt
import pytest

from leaderboard.collect import newest_entries, read_submissions
from leaderboard.plot_data import plot_data
from leaderboard.plots import bar_figure, figure_of, line_figure, task_plot
from tests.helpers.synthetic_board import write_synthetic_submissions


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    folder = tmp_path_factory.mktemp("synthetic") / "submissions"
    write_synthetic_submissions(folder, n_models=60)
    return newest_entries(read_submissions(folder))


def overlapping(boxes) -> list:
    """Pairs of display-space boxes that overlap by more than a pixel each way."""
    return [(a, b) for a, b in itertools.combinations(boxes, 2)
            if min(a.x1, b.x1) - max(a.x0, b.x0) > 1 and min(a.y1, b.y1) - max(a.y0, b.y0) > 1]


def text_boxes(figure, texts):
    """Where `texts` are drawn, in display space (the figure is drawn first, to lay them out)."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    return [t.get_window_extent(renderer) for t in texts if t.get_text()]


def png_size(png: bytes) -> tuple[int, int]:
    return struct.unpack(">II", png[16:24])  # width, height from the IHDR chunk


def test_bars_are_horizontal_sorted_best_first_and_never_overlap(board):
    data, note = plot_data("bar_task", board)
    assert note is None and len(data.series) == 60
    figure = bar_figure(data)
    try:
        axes = figure.axes[0]
        labels = [t.get_text() for t in axes.get_yticklabels()]
        assert len(labels) == 60 and len(set(labels)) == 60  # every model, each once
        values = [item.entry.headline_metric().value for item, _ in data.ranked()]
        assert values == sorted(values, reverse=True)  # ICAT: higher is better, best at the top
        top = axes.get_yticklabels()[0]
        assert top.get_text().startswith(data.ranked()[0][0].model_name[:20])
        assert axes.get_ylim()[0] > axes.get_ylim()[1]  # inverted: row 0 drawn at the top
        assert overlapping(text_boxes(figure, axes.get_yticklabels())) == []
        assert overlapping(text_boxes(figure, axes.texts)) == []  # the values at the bars' ends
        assert all(len(label) <= 48 + len(" (12345678) † limit 5") for label in labels)  # long names cut
        assert any("…" in label for label in labels)
    finally:
        plt.close(figure)


def test_a_bar_plot_grows_with_the_number_of_models(board):
    few = [b for b in board if b.entry.name == "bar_task"][:5]
    many = [b for b in board if b.entry.name == "bar_task"]
    (width_few, height_few), (width_many, height_many) = (png_size(task_plot("bar_task", part)[0])
                                                          for part in (few, many))
    assert height_many > 4 * height_few > 0 and abs(width_many - width_few) < 0.5 * width_few  # taller, not wider


def test_ideal_metrics_rank_by_distance_to_the_ideal(board):
    data, _ = plot_data("bar_task", board)
    data.head = data.head.model_copy(update={"better": "ideal", "ideal": 60.0})
    distances = [abs(metric.value - 60.0) for _, metric in data.ranked()]
    assert distances == sorted(distances)
    figure = bar_figure(data)
    try:
        dashed = [line for line in figure.axes[0].lines if line.get_linestyle() == "--"]
        assert [list(line.get_xdata()) for line in dashed] == [[60.0, 60.0]]  # the ideal's vertical line
    finally:
        plt.close(figure)


def test_the_line_legend_is_outside_the_axes_and_nothing_overlaps(board):
    data, note = plot_data("mink_membership", board)
    assert note is None and data.axis_tag == "length" and len(data.series) == 60
    figure = line_figure(data)
    try:
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        axes = figure.axes[0]
        legend = axes.get_legend()
        assert len(legend.get_texts()) == 60
        legend_box, axes_box = legend.get_window_extent(renderer), axes.get_window_extent(renderer)
        assert legend_box.x0 > axes_box.x1  # to the right of the axes, never over the lines
        assert overlapping(text_boxes(figure, legend.get_texts())) == []
        assert overlapping(text_boxes(figure, axes.get_xticklabels() + axes.get_yticklabels())) == []
        figure.savefig(__import__("io").BytesIO(), format="png", bbox_inches="tight")  # lays out whole
        figure_box = figure.get_tightbbox(renderer)
        assert legend_box.x1 <= figure_box.x1 * figure.dpi + 1  # the saved image holds the legend
    finally:
        plt.close(figure)


def test_the_legend_reads_in_the_order_of_the_lines(board):
    data, _ = plot_data("mink_membership", board)
    figure = figure_of(data)
    try:
        ends = {line.get_label(): line.get_ydata()[-1] for line in figure.axes[0].lines}
        shown = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
        assert [ends[label] for label in shown] == sorted(ends.values(), reverse=True)
    finally:
        plt.close(figure)
