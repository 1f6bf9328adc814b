"""How both boards print a count (epochs, ranks: no decimals) and name a line plot's value axis (what
is plotted, not the headline's label when that names the point the axis runs over)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from harness.core.results import Headline, Metric, TaskEntry
from leaderboard.build import render_markdown
from leaderboard.collect import BoardEntry, newest_entries, read_submissions
from leaderboard.plot_data import plot_data
from leaderboard.plots import figure_of
from leaderboard.render import all_metrics, count_metrics, fmt, fmt_metric, plain, task_heads
from leaderboard.site import render_site
from leaderboard.site_plots import task_figure
from tests.helpers.board_files import ID_A, ID_B, make_results, records, section, submit, table

TASK = "finetune_like"
AUC_AFTER_1 = Headline(metric="auc", tags={"score": "min_k_20", "epoch": "1", "trained_on": "members"},
                       label="Min-K% 20% AUC after 1 epoch", better="lower")
EPOCHS = Headline(metric="epochs_to_auc", tags={"score": "min_k_20", "threshold": "0.9"},
                  label="epochs to Min-K% AUC 0.9", better="higher")
RATE = Headline(metric="exact_rate", tags={"epoch": "1"}, label="exact rate, 1 epoch", better="lower")


def finetune_entry(epochs_to_auc: float, exact_rate: float, auc_at_1: float,
                   head: Headline = AUC_AFTER_1) -> TaskEntry:
    """A finetune_memorization-like entry: Min-K% AUC at epochs 0, 1, 2 (with intervals), the epochs
    it took to reach AUC 0.9 (a count), and a rate that is whole here (0 or 1) but a rate still."""
    metrics = [Metric(name="auc", value=value, ci_low=value - 0.05, ci_high=value + 0.05,
                      tags={"score": "min_k_20", "epoch": str(epoch), "trained_on": "members"})
               for epoch, value in ((0, 0.5), (1, auc_at_1), (2, 0.95))]
    metrics += [Metric(name="epochs_to_auc", value=epochs_to_auc, n=100, tags=dict(EPOCHS.tags)),
                Metric(name="exact_rate", value=exact_rate, n=100, tags={"epoch": "1"})]
    return TaskEntry(name=TASK, version=1, status="ok", config={}, config_hash="0123456789abcdef", seed=0,
                     metrics=metrics, headline=head, summary=[head, EPOCHS, RATE], wall_time_s=1.0)


@pytest.fixture
def submissions(tmp_path) -> Path:
    folder = tmp_path / "submissions"
    folder.mkdir()
    for name, identity, epochs, rate, auc in (("model-a", ID_A, 2.0, 0.0, 0.7), ("model-b", ID_B, 1.0, 1.0, 0.96)):
        results = make_results(name, identity)
        submit(folder, results.model_copy(update={"tasks": [finetune_entry(epochs, rate, auc)]}))
    return folder


def test_a_count_prints_without_decimals_on_both_boards_and_other_numbers_keep_three(submissions):
    board = newest_entries(read_submissions(submissions))
    assert count_metrics(board) == {(TASK, "epochs_to_auc")}  # the rate is whole (0, 1) but no count

    markdown, _ = render_markdown(submissions)
    rows = records(table(section(markdown, f"## {TASK}")))
    assert [row[f"{EPOCHS.label} ↑"] for row in rows] == ["2", "1"]
    assert [row[f"{RATE.label} ↓"] for row in rows] == ["0.000", "1.000"]
    assert [row[f"{AUC_AFTER_1.label} ↓"] for row in rows] == ["0.700 [0.650, 0.750]", "0.960 [0.910, 1.010]"]

    full = all_metrics(TASK, board, plain)  # the web board's table of every metric
    cells = {(row[0][:7], header): cell for row in full.rows for header, cell in zip(full.headers, row) if cell}
    assert cells["model-a", "epochs_to_auc"] == "2" and cells["model-b", "epochs_to_auc"] == "1"
    assert cells["model-b", "exact_rate"] == "1.000"
    site = render_site(submissions)
    page = next(data.decode() for path, data in site.items() if path.startswith("models/model-a"))
    assert "<td>epochs_to_auc</td><td>score=min_k_20, threshold=0.9</td><td>2</td>" in page
    assert "<td>exact_rate</td><td>epoch=1</td><td>0.000</td>" in page


def test_a_metric_whole_in_one_run_only_keeps_its_decimals_everywhere():
    whole = finetune_entry(3.0, 0.0, 0.7)
    spread = whole.model_copy(update={"metrics": [m if m.name != "epochs_to_auc" else m.model_copy(update={"value": 2.5})
                                                  for m in whole.metrics]})
    board = [BoardEntry("model-a", ID_A, "causal-lm", whole, 1), BoardEntry("model-b", ID_B, "causal-lm", spread, 1)]
    assert count_metrics(board) == set()
    assert fmt(3.0) == "3.000" and fmt(3.0, whole=True) == "3" and fmt(2.5, whole=True) == "2.500"
    assert fmt(None, whole=True) == "n/a"
    seeds = Metric(name="epochs_to_auc", value=2.0, std=0.5)
    assert fmt_metric(seeds, whole=True) == "2 ± 0.500"


def test_the_summary_is_the_newest_run_s_so_a_renamed_label_reaches_the_board():
    """A label renamed without a new version (privacy_extraction's leakage ε, issue 63) shows once a
    run of today's membench exists, whatever older files of that version and a lower-sorting model say;
    a newer version wins over a newer run of an older one."""
    from dataclasses import replace
    from datetime import datetime, timezone

    renamed = RATE.model_copy(update={"label": "renamed rate"})
    old, new = finetune_entry(2.0, 0.0, 0.7), finetune_entry(1.0, 1.0, 0.9)
    new = new.model_copy(update={"summary": [AUC_AFTER_1, EPOCHS, renamed]})
    day = [datetime(2026, 11, d, tzinfo=timezone.utc) for d in (28, 30)]
    board = [BoardEntry("model-a", ID_A, "causal-lm", old, 1, created_at=day[1]),
             BoardEntry("model-b", ID_B, "causal-lm", new, 1, created_at=day[0])]
    assert task_heads(TASK, board)[2].label == RATE.label  # model-a's run is the newer one
    board[1] = replace(board[1], created_at=datetime(2026, 12, 1, tzinfo=timezone.utc))
    assert task_heads(TASK, board)[2].label == "renamed rate"
    board[0] = replace(board[0], entry=old.model_copy(update={"version": 2}), created_at=None)  # a newer version
    assert task_heads(TASK, board)[2].label == RATE.label


def test_the_value_axis_names_what_is_plotted_not_the_headlines_point(tmp_path):
    def board_with(head: Headline) -> list[BoardEntry]:
        return [BoardEntry("model-a", ID_A, "causal-lm", finetune_entry(2.0, 0.0, 0.7, head), 1)]

    data, _ = plot_data(TASK, board_with(AUC_AFTER_1))
    assert data.axis_tag == "epoch" and data.series[0][1] == [(0.0, 0.5), (1.0, 0.7), (2.0, 0.95)]
    expected = "auc: score=min_k_20, trained_on=members (lower is better)"
    assert data.axis_title() == expected
    figure = figure_of(data)
    try:
        assert figure.axes[0].get_ylabel() == expected  # the PNG of LEADERBOARD.md
    finally:
        plt.close(figure)
    figure_json, _ = task_figure(TASK, board_with(AUC_AFTER_1))  # the web board's plotly figure
    assert figure_json["layout"]["yaxis"]["title"]["text"] == expected

    # a label that puts the point after a comma keeps its words up to the comma
    comma = AUC_AFTER_1.model_copy(update={"label": "Min-K% 20% AUC, 1 epoch"})
    assert plot_data(TASK, board_with(comma))[0].axis_title() == "Min-K% 20% AUC (lower is better)"
    # a comma inside parentheses is part of the words: (n, p) of an extraction share
    pair = AUC_AFTER_1.model_copy(update={"label": "(100, 0.5)-extractable members, 1 epoch"})
    assert plot_data(TASK, board_with(pair))[0].axis_title() == "(100, 0.5)-extractable members (lower is better)"
    # a number in the label that is not the axis point (20 of Min-K% 20%, at epoch 2) is no reason to leave it
    at_2 = AUC_AFTER_1.model_copy(update={"label": "Min-K% 20% AUC at the last epoch", "tags": {**AUC_AFTER_1.tags,
                                                                                                  "epoch": "2"}})
    assert plot_data(TASK, board_with(at_2))[0].axis_title() == "Min-K% 20% AUC at the last epoch (lower is better)"
