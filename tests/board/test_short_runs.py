"""A run that stopped short of a column's epoch (a real model fine-tuned for 1 epoch under "8 epochs", issue
63) shows what it measured after its last epoch, marked, on both boards; never as the column's value."""

from __future__ import annotations

from harness.core.results import Headline, Metric, TaskEntry
from leaderboard.build import render_markdown
from leaderboard.collect import BoardEntry
from leaderboard.render import SHORT_LEGEND, epoch_reached, headline_value
from leaderboard.site import render_site
from tests.helpers.board_files import ID_A, ID_B, make_results, records, section, submit, table

TASK = "privacy_like"
SCORE = Headline(metric="subset_score", tags={"group": "memorization-45", "epoch": "8"},
                 label="subset score, 8 epochs", better="lower")
LEAK = Headline(metric="epsilon", tags={"group": "unique", "epoch": "8"}, label="leakage, 8 epochs", better="lower")
ID_C = "c" * 64


def entry(values: dict[int, float]) -> TaskEntry:
    """A privacy_extraction-like entry with the subset score (two groups, the other one a decoy) and the
    leakage at each evaluated epoch of `values`."""
    metrics = [Metric(name="subset_score", value=value, tags={"group": group, "epoch": str(epoch)})
               for epoch, value in values.items() for group, value in (("memorization-45", value), ("decoy", 0.9))]
    metrics += [Metric(name="epsilon", value=10 * value, tags={"group": "unique", "epoch": str(epoch)})
                for epoch, value in values.items()]
    return TaskEntry(name=TASK, version=1, status="ok", config={}, config_hash="0123456789abcdef", seed=0,
                     metrics=metrics, headline=SCORE, summary=[SCORE, LEAK], wall_time_s=1.0)


def test_a_short_run_shows_its_last_epoch_marked_and_no_run_borrows_another_epoch(tmp_path):
    full, short, untrained = entry({0: 0.0, 4: 0.2, 8: 0.3}), entry({0: 0.0, 1: 0.05, 2: 0.07}), entry({0: 0.0})
    item = BoardEntry("model-b", ID_B, "causal-lm", short, 1)
    assert epoch_reached(item, SCORE).tags == {"group": "memorization-45", "epoch": "2"}
    assert headline_value(item) == "0.070 (epoch 2)"  # the last epoch it ran, never the decoy group's 0.9
    assert headline_value(item, LEAK) == "0.700 (epoch 2)"
    assert epoch_reached(BoardEntry("model-a", ID_A, "causal-lm", full, 1), SCORE) is None  # it has epoch 8
    assert headline_value(BoardEntry("model-c", ID_C, "causal-lm", untrained, 1)) == "n/a"  # epoch 0 trains nothing
    later = SCORE.model_copy(update={"tags": {**SCORE.tags, "epoch": "1"}})
    assert headline_value(BoardEntry("model-a", ID_A, "causal-lm", entry({0: 0.0, 4: 0.2}), 1), later) == "n/a"

    folder = tmp_path / "submissions"
    folder.mkdir()
    for name, identity, found in (("model-a", ID_A, full), ("model-b", ID_B, short), ("model-c", ID_C, untrained)):
        submit(folder, make_results(name, identity).model_copy(update={"tasks": [found]}))
    markdown, _ = render_markdown(folder)
    rows = records(table(section(markdown, f"## {TASK}")))
    assert [row[f"{SCORE.label} ↓"] for row in rows] == ["0.300", "0.070 (epoch 2)", "n/a"]
    assert [row[f"{LEAK.label} ↓"] for row in rows] == ["3.000", "0.700 (epoch 2)", "n/a"]
    assert markdown.count(SHORT_LEGEND) == 2  # under the overview and under the task's table
    site = render_site(folder)
    for page in ("index.html", f"tasks/{TASK}.html"):
        html = site[page].decode()
        assert "0.070 (epoch 2)" in html and 'id="short-runs"' in html, page

    submit(folder, make_results("model-b", ID_B, created_at="2024-01-02T00:00:00+00:00").model_copy(
        update={"tasks": [entry({0: 0.0, 4: 0.1, 8: 0.15})]}))  # its newer run reached epoch 8
    markdown, _ = render_markdown(folder)
    assert SHORT_LEGEND not in markdown and "(epoch" not in markdown
    assert 'id="short-runs"' not in render_site(folder)["index.html"].decode()
