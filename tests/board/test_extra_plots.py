"""A key metric flagged `plot` in a task's summary (`Headline.plot`) gets a plot of its own on both
boards, under the task's plot, which stays as it was: on a log10 value axis (`log_scale`) that
leaves out values <= 0 and says so, with a dashed line at `reference_line`. A headline without the
new settings writes as it always did."""

from __future__ import annotations

import json
import math
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from pydantic import ValidationError

from harness.core.results import Headline, Metric, TaskEntry
from leaderboard.build import PLOTS_FOLDER, extra_plot_names, render_markdown
from leaderboard.collect import BoardEntry
from leaderboard.plot_data import extra_heads, plot_data
from leaderboard.plots import figure_of
from leaderboard.site import render_site
from leaderboard.site_plots import task_figure
from tests.helpers.board_files import ID_A, ID_B, make_results, section, submit

TASK = "finetune_like"
EPOCHS = ("0", "1", "2", "4")
AUC = Headline(metric="auc", tags={"epoch": "1", "trained_on": "members"}, label="AUC after 1 epoch", better="lower")
P_VALUE = Headline(metric="di_p_value", tags={"epoch": "1", "trained_on": "members"},
                   label="dataset inference p-value after 1 epoch", better="lower",
                   plot=True, log_scale=True, reference_line=0.05)
UNFLAGGED = Headline(**P_VALUE.model_dump(exclude={"plot"}))


def entry(p_values: tuple[float, ...], p_head: Headline = P_VALUE) -> TaskEntry:
    """A finetune_memorization-like entry: AUC (the headline) and a p-value per epoch, the p-value's
    headline `p_head` in the summary."""
    tags = [{"epoch": epoch, "trained_on": "members"} for epoch in EPOCHS]
    metrics = [Metric(name="auc", value=0.5 + 0.1 * k, tags=t) for k, t in enumerate(tags)]
    metrics += [Metric(name="di_p_value", value=p, tags=t) for p, t in zip(p_values, tags)]
    return TaskEntry(name=TASK, version=1, status="ok", config={}, config_hash="0123456789abcdef", seed=0,
                     metrics=metrics, headline=AUC, summary=[AUC, p_head], wall_time_s=1.0)


A_VALUES, B_VALUES = (0.5, 1e-3, 1e-30, 0.0), (0.0, 0.0, 0.0, 0.0)  # b: nothing a log axis can draw


def board(p_head: Headline = P_VALUE) -> list[BoardEntry]:
    return [BoardEntry("model-a", ID_A, "causal-lm", entry(A_VALUES, p_head), 1),
            BoardEntry("model-b", ID_B, "causal-lm", entry(B_VALUES, p_head), 1)]


def submissions(folder: Path, p_head: Headline) -> Path:
    folder.mkdir()
    for (name, identity), p_values in ((("model-a", ID_A), (0.5, 1e-3, 1e-30, 1e-12)),
                                       (("model-b", ID_B), (0.9, 0.6, 0.2, 0.04))):
        results = make_results(name, identity)
        submit(folder, results.model_copy(update={"tasks": [entry(p_values, p_head)]}))
    return folder


@pytest.fixture(scope="module")
def boards(tmp_path_factory) -> dict[str, tuple[str, dict[str, bytes], dict[str, bytes]]]:
    """The markdown, plots and site of the same two runs, their p-value flagged `plot` or not."""
    root = tmp_path_factory.mktemp("extra")
    rendered = {}
    for key, head in (("flagged", P_VALUE), ("unflagged", UNFLAGGED)):
        folder = submissions(root / key, head)
        rendered[key] = (*render_markdown(folder), render_site(folder))
    return rendered


def test_a_headline_without_plot_settings_writes_as_before_and_reads_back():
    existing = ('{"metric":"auc","tags":{"score":"min_k_20","length":"128"},"label":"Min-K% 20% AUC, 128 words",'
                '"better":"lower","ideal":null}')  # as the committed files hold it
    head = Headline.model_validate_json(existing)
    assert (head.plot, head.log_scale, head.reference_line) == (False, False, None)
    assert head.model_dump_json() == existing  # no plot, log_scale or reference_line key
    assert json.loads(UNFLAGGED.model_dump_json()).keys() >= {"log_scale", "reference_line"}
    assert "plot" not in json.loads(UNFLAGGED.model_dump_json())
    flagged = json.loads(P_VALUE.model_dump_json())
    assert (flagged["plot"], flagged["log_scale"], flagged["reference_line"]) == (True, True, 0.05)
    assert Headline.model_validate(flagged) == P_VALUE
    with pytest.raises(ValidationError, match="above 0"):  # a line a log10 axis cannot draw
        Headline(metric="p", label="p", better="lower", log_scale=True, reference_line=0.0)


def test_a_flagged_summary_headline_gets_a_plot_of_its_own_under_the_main_one(boards):
    markdown, plots, _ = boards["flagged"]
    assert sorted(plots) == [f"{TASK}--di_p_value.png", f"{TASK}.png"]
    lines = [line for line in section(markdown, f"## {TASK}").splitlines() if line]
    # one paragraph on one line: the main plot, the extra one beside it, then the extra one's caption
    assert f"![{TASK}]({PLOTS_FOLDER}/{TASK}.png) ![{TASK}--di_p_value]({PLOTS_FOLDER}/{TASK}--di_p_value.png) " \
           "Beside it: dataset inference p-value after 1 epoch (lower is better; log10 axis; dashed line at 0.05)" in lines


def test_an_unflagged_headline_gets_no_plot_and_the_main_plot_is_unchanged(boards):
    markdown, plots, site = boards["unflagged"]
    assert sorted(plots) == [f"{TASK}.png"] and "di_p_value.png" not in markdown
    assert plots[f"{TASK}.png"] == boards["flagged"][1][f"{TASK}.png"]  # byte for byte
    assert 'id="plot-2"' not in site[f"tasks/{TASK}.html"].decode()
    assert extra_heads(TASK, board(UNFLAGGED)) == [] and extra_heads(TASK, board()) == [P_VALUE]


def test_the_web_task_page_holds_the_second_figure_under_the_first(boards):
    page = boards["flagged"][2][f"tasks/{TASK}.html"].decode()
    assert page.index('id="plot"') < page.index('id="plot-2"') < page.index("<h2>Key metrics</h2>")
    assert '<p class="caption">dataset inference p-value after 1 epoch (lower is better; log10 axis; ' in page
    figure = json.loads(page.split('<script type="application/json" id="plot-2-data">')[1].split("</script>")[0])
    assert figure["layout"]["yaxis"]["type"] == "log"
    assert figure["layout"]["title"]["text"] == f"{TASK}: dataset inference p-value after 1 epoch"


def test_a_log_axis_leaves_out_values_at_or_below_zero_and_says_so():
    data, note = plot_data(TASK, board(), P_VALUE)
    assert data.axis_tag == "epoch" and data.series[0][1] == [(0.0, 0.5), (1.0, 1e-3), (2.0, 1e-30)]
    assert note == ("Plot of dataset inference p-value after 1 epoch: leaves out model-b (bbbbbbbb) (its values "
                    "of di\\_p\\_value are all ≤ 0, which a log10 axis cannot draw). Leaves out values ≤ 0, which "
                    "a log10 axis cannot draw: model-a (aaaaaaaa) (1 of 4).")
    figure = figure_of(data)
    try:
        axes = figure.axes[0]
        assert axes.get_yscale() == "log" and axes.get_title() == f"{TASK}: {P_VALUE.label}"
        dashed = [line for line in axes.lines if line.get_linestyle() == "--"]
        assert [list(line.get_ydata()) for line in dashed] == [[0.05, 0.05]]  # horizontal, at alpha
    finally:
        plt.close(figure)
    plotly, _ = task_figure(TASK, board(), P_VALUE)
    assert plotly["layout"]["yaxis"]["type"] == "log"
    assert [(s["y0"], s["line"]["dash"]) for s in plotly["layout"]["shapes"]] == [(0.05, "dash")]
    assert plotly["layout"]["annotations"][0]["y"] == pytest.approx(math.log10(0.05))  # plotly's log coordinates
    none, only = plot_data(TASK, board()[1:], P_VALUE)
    assert none is None and only.endswith("no finished run has a positive value of di\\_p\\_value to draw.")


def test_a_log_axis_without_a_numeric_tag_draws_bars():
    bars = P_VALUE.model_copy(update={"tags": {"trained_on": "members"}})
    flat = [BoardEntry("model-a", ID_A, "causal-lm", entry(A_VALUES).model_copy(update={"metrics": [
        Metric(name="di_p_value", value=1e-9, tags={"trained_on": "members"})]}), 1)]
    data, note = plot_data(TASK, flat, bars)
    figure = figure_of(data)
    try:
        assert note is None and figure.axes[0].get_xscale() == "log"
        assert [t.get_text() for t in figure.axes[0].texts] == ["1e-09", "0.05"]  # the bar's value, the line's
    finally:
        plt.close(figure)


def test_plot_file_names_stay_apart_and_safe():
    members = P_VALUE
    others = P_VALUE.model_copy(update={"tags": {"epoch": "1", "trained_on": "non-members"}})
    hostile = P_VALUE.model_copy(update={"metric": "../../etc/passwd"})
    assert extra_plot_names(TASK, [members, others, hostile, members]) == [
        f"{TASK}--di_p_value--trained_on-members.png", f"{TASK}--di_p_value--trained_on-non-members.png",
        f"{TASK}--etc-passwd.png", f"{TASK}--di_p_value--trained_on-members-2.png"]


def test_several_flagged_headlines_share_one_paragraph_their_images_side_by_side(tmp_path):
    """Two plots of their own cost the board the line of one: their images side by side, one caption naming
    them from the left and the note of what a plot leaves out, on one line (as markdown renders them)."""
    auc_plot = AUC.model_copy(update={"plot": True, "label": "AUC, every epoch"})
    folder = tmp_path / "two"
    folder.mkdir()
    results = make_results("model-a", ID_A)
    flagged = entry(A_VALUES).model_copy(update={"summary": [AUC, P_VALUE, auc_plot]})
    submit(folder, results.model_copy(update={"tasks": [flagged]}))
    markdown, plots = render_markdown(folder)
    names = extra_plot_names(TASK, [P_VALUE, auc_plot])
    assert sorted(plots) == sorted([f"{TASK}.png", *names])
    lines = section(markdown, f"## {TASK}").splitlines()
    main = next(i for i, line in enumerate(lines) if line.startswith("Task card: ")) + 1
    assert lines[main:main + 3] == [
        "", " ".join([f"![{TASK}]({PLOTS_FOLDER}/{TASK}.png)"]
                     + [f"![{name.removesuffix('.png')}]({PLOTS_FOLDER}/{name})" for name in names])
        + " Beside it, from left: dataset inference p-value after 1 epoch (lower is better; log10 axis; dashed line at 0.05); "
        "AUC, every epoch (lower is better)"
        " Plot of dataset inference p-value after 1 epoch: Leaves out values ≤ 0, which a log10 axis cannot draw: "
        "model-a (aaaaaaaa) (1 of 4).", ""]  # then the paragraph ends
