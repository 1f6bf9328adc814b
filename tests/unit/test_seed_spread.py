"""Scores that carry their own noise: the mean and sample std over seeds, how a metric stores them,
and how the board shows them."""

from __future__ import annotations

import math

import pytest

from harness.core.results import Headline, Metric, TaskEntry
from harness.metrics import memorization as m
from leaderboard.collect import BoardEntry
from leaderboard.render import fmt_metric, overview_table, task_table
from tasks.privacy_extraction.report import over_seeds


def test_mean_and_sample_std_by_hand():
    # mean 0.5; squared deviations 0.09 + 0.01 + 0.16 = 0.26; over n - 1 = 2: 0.13
    mean, std = m.mean_and_std([0.2, 0.4, 0.9])
    assert mean == pytest.approx(0.5) and std == pytest.approx(math.sqrt(0.13))
    assert m.mean_and_std([0.25, 0.75]) == (0.5, pytest.approx(math.sqrt(0.125)))  # |a - b| / sqrt(2)
    assert m.mean_and_std([0.3]) == (0.3, None)
    with pytest.raises(ValueError):
        m.mean_and_std([])


def run(*values: float | None) -> list[Metric]:
    """One seed's metrics: `subset_score` per group, in a fixed order."""
    return [Metric(name="subset_score", value=v, n=9, tags={"epoch": "8", "group": g})
            for v, g in zip(values, ("a", "b"), strict=True)]


def test_metrics_over_seeds_are_mean_std_and_per_seed_values():
    a, b = over_seeds([run(0.2, None), run(0.4, 0.5), run(0.9, 0.7)])
    assert (a.name, a.tags, a.n) == ("subset_score", {"epoch": "8", "group": "a"}, 9)
    assert a.value == pytest.approx(0.5) and a.std == pytest.approx(math.sqrt(0.13))
    assert a.per_seed == [0.2, 0.4, 0.9]
    assert b.value is None and b.std is None and b.per_seed == [None, 0.5, 0.7]  # undefined in one seed
    [one] = over_seeds([run(0.2, 0.1)[:1]])
    assert one.value == 0.2 and one.std is None and one.per_seed == [0.2]
    with pytest.raises(ValueError, match="disagree"):
        over_seeds([run(0.2, 0.1), list(reversed(run(0.2, 0.1)))])


def test_an_audit_over_seeds_is_its_largest_seed_not_their_mean():
    """Issue 76: each seed's audited epsilon is a lower bound tested for the seeds' number; the figure over seeds is
    the largest of them (no mean, no std), with the seeds' ceiling; the board writes "≥" where it reached it."""
    def audit(value: float) -> list[Metric]:
        return [Metric(name="audited_epsilon", value=value, n=1000, ceiling=4.62, tags={"epoch": "8", "bound": "steinke"})]

    [largest] = over_seeds([audit(1.5), audit(3.0), audit(0.0)])
    assert (largest.value, largest.std, largest.per_seed, largest.ceiling) == (3.0, None, [1.5, 3.0, 0.0], 4.62)
    assert not largest.at_ceiling and fmt_metric(largest) == "3.000"
    [full] = over_seeds([audit(4.62), audit(2.0)])
    assert full.at_ceiling and fmt_metric(full) == "≥ 4.620"
    assert Metric.model_validate_json(full.model_dump_json()) == full and "ceiling" not in run(0.1, 0.2)[0].model_dump()


def test_a_metric_without_a_spread_is_written_as_before():
    plain = Metric(name="auc", value=0.6, n=10)
    assert "std" not in plain.model_dump() and "per_seed" not in plain.model_dump_json()
    spread = Metric(name="auc", value=0.5, std=0.1, per_seed=[0.4, 0.6], n=10)
    assert spread.model_dump()["std"] == 0.1
    assert Metric.model_validate_json(spread.model_dump_json()) == spread


def board_entry(name: str, identity: str, metrics: list[Metric]) -> BoardEntry:
    head = Headline(metric="subset_score", tags={"epoch": "8"}, label="subset score", better="lower")
    entry = TaskEntry(name="privacy_extraction", version=2, status="ok", config={}, config_hash="0" * 16, seed=0,
                      metrics=metrics, headline=head, records_sha256="e" * 64, report_version=1)
    return BoardEntry(model_name=name, model_identity=identity, model_kind="seq2seq", entry=entry, runs=1)


def test_the_board_shows_mean_plus_minus_std():
    board = [board_entry("spread", "a" * 64, [Metric(name="subset_score", value=0.5, std=math.sqrt(0.13),
                                                       per_seed=[0.2, 0.4, 0.9], tags={"epoch": "8"}),
                                                Metric(name="epsilon", value=6.4, ci_low=6.0, ci_high=7.0,
                                                       tags={"epoch": "8"})]),
             board_entry("single", "b" * 64, [Metric(name="subset_score", value=0.25, tags={"epoch": "8"})])]
    table = cells(task_table("privacy_extraction", board))
    # columns: model, version, runs, epoch, subset_score, epsilon
    assert table[0][-2:] == ["0.500 ± 0.361", "6.400 [6.000, 7.000]"]  # a std, an interval
    assert table[1][-2:] == ["0.250", ""]
    overview = cells(overview_table(board))
    assert overview[0][-1] == "0.250" and overview[1][-1] == "0.500 ± 0.361"  # rows sorted by model name


def cells(table: str) -> list[list[str]]:
    """The stripped cells of a markdown table's body rows (no pipes inside these cells)."""
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]
