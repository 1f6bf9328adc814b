"""privacy_extraction's audited ε beside the claimed ε on both boards (issue 63): key metrics that only some
runs name (the runs that audit or claim) are columns for every run of the version; a run without DP reads ∞
under the claim (`Headline.absent`), a run without the audit n/a under it; and audited is plotted against
claimed with the diagonal (`Headline.against`), a run without DP at the right edge."""

from __future__ import annotations

import math

import pytest

from harness.core.results import Headline, Metric, TaskEntry
from leaderboard.build import render_markdown
from leaderboard.collect import newest_entries, read_submissions
from leaderboard.plot_data import extra_heads, plot_data
from leaderboard.site import render_site
from tests.helpers.board_files import ID_A, ID_B, make_results, records, section, submit, table

TASK = "privacy_like"
SCORE = Headline(metric="subset_score", tags={"epoch": "8"}, label="subset score, 8 epochs", better="lower")
AUDITED = Headline(metric="audited_epsilon", tags={"epoch": "8", "bound": "steinke"}, label="audited, 8 epochs",
                   better="lower", plot=True, against="claimed_epsilon")
CLAIMED = Headline(metric="claimed_epsilon", tags={"epoch": "8"}, label="claimed, 8 epochs", better="lower",
                   absent="∞")
ID_C = "c" * 64


def entry(score: float, audited: float | None = None, claimed: float | None = None) -> TaskEntry:
    """A run with its score after 4 and 8 epochs; with `audited`, the audit's bounds (and its summary names the
    audited and claimed ε); with `claimed`, a DP run's claim."""
    metrics = [Metric(name="subset_score", value=score * e / 8, tags={"epoch": str(e)}) for e in (4, 8)]
    summary = [SCORE]
    if audited is not None:
        metrics += [Metric(name="audited_epsilon", value=audited * e / 8, tags={"epoch": str(e), "bound": bound})
                    for e in (4, 8) for bound in ("steinke", "gaussian-fdp")]
        summary += [AUDITED, CLAIMED]
    if claimed is not None:
        metrics += [Metric(name="claimed_epsilon", value=claimed, tags={"epoch": str(e), "delta": "1e-05"})
                    for e in (4, 8)]
    return TaskEntry(name=TASK, version=1, status="ok", config={}, config_hash="0123456789abcdef", seed=0,
                     metrics=metrics, headline=SCORE, summary=summary, wall_time_s=1.0)


@pytest.fixture
def folder(tmp_path):
    """model-a: no audit, no DP (the newest run); model-b: audited without DP; model-c: audited at a claim of 8."""
    folder = tmp_path / "submissions"
    folder.mkdir()
    for name, identity, found, day in (("model-a", ID_A, entry(0.3), 3), ("model-b", ID_B, entry(0.2, 3.0), 1),
                                       ("model-c", ID_C, entry(0.1, 0.5, 8.0), 2)):
        submit(folder, make_results(name, identity, created_at=f"2024-01-0{day}T00:00:00+00:00").model_copy(
            update={"tasks": [found]}))
    return folder


def test_the_audit_columns_show_for_every_run_with_infinity_where_no_dp_claims(folder):
    markdown, plots = render_markdown(folder)
    rows = records(table(section(markdown, f"## {TASK}")))
    assert [row["model"][:7] for row in rows] == ["model-a", "model-b", "model-c"]
    assert [row["audited, 8 epochs ↓"] for row in rows] == ["n/a", "3.000", "0.500"]
    assert [row["claimed, 8 epochs ↓"] for row in rows] == ["∞", "∞", "8"]
    assert f"{TASK}--audited_epsilon.png" in plots
    html = render_site(folder)[f"tasks/{TASK}.html"].decode()
    assert "claimed, 8 epochs" in html and "audited, 8 epochs" in html and "∞" in html


def test_audited_is_plotted_against_claimed_a_run_without_dp_at_the_edge_and_one_without_audit_left_out(folder):
    board = newest_entries(read_submissions(folder))
    assert extra_heads(TASK, board) == [AUDITED]
    data, note = plot_data(TASK, board, AUDITED)
    points = {item.model_name: pts for item, pts in data.series}
    assert points == {"model-b": [(math.inf, 3.0)], "model-c": [(8.0, 0.5)]}
    assert data.versus == CLAIMED and data.edge() == 1.25 * 8.0
    assert data.versus_title() == "claimed, 8 epochs (right edge: ∞)"
    assert note.startswith("Plot of audited, 8 epochs: leaves out model-a") and r"no value of audited\_epsilon" in note


def test_against_needs_a_linear_plot_of_another_metric():
    with pytest.raises(ValueError, match="against"):
        Headline(metric="a", label="a", better="lower", against="b")  # no plot
    with pytest.raises(ValueError, match="against"):
        Headline(metric="a", label="a", better="lower", plot=True, against="a")
    assert "against" not in SCORE.model_dump() and CLAIMED.model_dump()["absent"] == "∞"
