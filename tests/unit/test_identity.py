"""A model's identity covers its weights, tokenizer, config and kind: change any of them and the
cache, the results file name and the board see another model; old schema-1 files still read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import TINY_TEXTS, write_jsonl

from harness.app.registry import select
from harness.core import task as task_module
from harness.core.board_keys import board_key
from harness.core.errors import UserError
from harness.core.io import canonical_json, sha256_text
from harness.core.model_types import ModelIdentity, ModelKind
from harness.core.results import Headline, Metric, ResultsFile, load_results, parse_results
from harness.core.task import RunContext, Task, TaskResult
from harness.model.identity import config_sha256, tokenizer_files
from harness.model.loading import ModelSpec, load
from harness.reference import train
from harness.run.runner import EvaluateOptions, evaluate
from leaderboard.collect import newest_entries, read_submissions

MINK = "mink_membership"
MINK_SETTINGS = {"lengths": ["2", "4"], "bootstrap_resamples": "10"}


def with_other_tokenizer(tiny_lm: Path, folder: Path) -> Path:
    """tiny_lm's weights and config with another BPE tokenizer (fewer merges: other token ids)."""
    shutil.copytree(tiny_lm, folder)
    for path in tokenizer_files(folder):
        path.unlink()
    train.train_tokenizer(list(reversed(TINY_TEXTS)), vocab_size=200).save_pretrained(folder)
    return folder


def cached_identities(cache: Path, task: str) -> list[str]:
    """The model identities that have cached records of `task` (every task runs in two stages)."""
    return sorted(p.parent.name for p in (cache / "records").glob(f"*/{task}"))


def test_the_identity_is_the_hash_of_its_four_parts(tiny_lm):
    lm = load(ModelSpec(str(tiny_lm)))
    parts = lm.identity_parts
    expected = sha256_text(canonical_json({"weights": parts.weights_sha256, "tokenizer": parts.tokenizer_sha256,
                                           "config": parts.config_sha256, "kind": "causal-lm"}))
    assert lm.identity == expected == parts.identity
    assert parts.kind == "causal-lm" and len({parts.weights_sha256, parts.tokenizer_sha256, parts.config_sha256}) == 3
    assert parts.config_sha256 == config_sha256(json.loads((tiny_lm / "config.json").read_text()))


def test_another_tokenizer_is_another_model_with_its_own_cache_entry(tiny_lm, tmp_path, monkeypatch):
    """Same weights, other tokenizer: another identity, another cache entry, other numbers."""
    monkeypatch.setenv("MEMBENCH_CACHE", str(tmp_path / "cache"))
    other = with_other_tokenizer(tiny_lm, tmp_path / "tiny-gpt2")  # same folder name: same display name
    rows = [{"text": f"{text} number {i}", "label": i % 2} for i, text in enumerate(TINY_TEXTS[:4] * 2)]
    settings = {**MINK_SETTINGS, "data": str(write_jsonl(tmp_path / "data.jsonl", rows))}
    options = EvaluateOptions(output_path=tmp_path / "out")
    first = load_results(evaluate(ModelSpec(str(tiny_lm)), select(MINK), settings, options))
    second_path = evaluate(ModelSpec(str(other)), select(MINK), settings, options)
    second = load_results(second_path)

    assert first.model.name == second.model.name
    assert first.model.weights_sha256 == second.model.weights_sha256
    assert first.model.tokenizer_sha256 != second.model.tokenizer_sha256
    assert first.model.identity != second.model.identity
    assert cached_identities(tmp_path / "cache", MINK) == sorted([first.model.identity, second.model.identity])
    mine, theirs = first.task(MINK), second.task(MINK)
    assert mine.config_hash == theirs.config_hash
    assert [m.value for m in mine.metrics] != [m.value for m in theirs.metrics]  # not served the first's numbers
    assert len(list((tmp_path / "out").glob("*.json"))) == 2  # two results files, not one overwritten
    board = newest_entries(read_submissions(tmp_path / "out"))
    assert len(board) == 2  # two rows on the board


class CountingTask(Task):
    """Sum of the hidden states of a fixed text: scores causal LMs and encoders alike."""

    NAME = "test_identity_counting"
    DESCRIPTION = "test task: sum of the last hidden states of one text"
    MODEL_KINDS = frozenset({ModelKind.CAUSAL_LM, ModelKind.ENCODER})
    VERSION = 1
    HEADLINE = Headline(metric="hidden_sum", label="hidden sum", better="higher")
    runs = 0

    def load_data(self, config, context: RunContext):
        return "one short text"

    def run(self, model, data, config, context) -> TaskResult:
        import torch

        CountingTask.runs += 1
        with torch.no_grad():
            output = model.model(**model.tokenizer([data], return_tensors="pt"), output_hidden_states=True)
        return TaskResult(metrics=[Metric(name="hidden_sum", value=float(output.hidden_states[-1].sum()))],
                          counts={"texts": 1})


def test_another_model_kind_is_recomputed(tiny_lm, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(task_module._REGISTRY, CountingTask.NAME, CountingTask)
    monkeypatch.setattr(CountingTask, "runs", 0)
    tasks, options = select(CountingTask.NAME), EvaluateOptions(output_path=tmp_path / "out")
    as_lm = load_results(evaluate(ModelSpec(str(tiny_lm)), tasks, {}, options))
    as_encoder = load_results(evaluate(ModelSpec(str(tiny_lm), kind=ModelKind.ENCODER), tasks, {}, options))
    assert CountingTask.runs == 2  # the encoder run did not reuse the causal LM's entry
    assert (as_lm.model.kind, as_encoder.model.kind) == ("causal-lm", "encoder")
    assert as_lm.model.weights_sha256 == as_encoder.model.weights_sha256
    assert as_lm.model.identity != as_encoder.model.identity
    assert board_key(as_lm.model) != board_key(as_encoder.model)
    again = load_results(evaluate(ModelSpec(str(tiny_lm)), tasks, {}, options))
    assert CountingTask.runs == 2  # the same model and kind again: from the cache
    assert again.model.identity == as_lm.model.identity


def test_editing_config_json_changes_the_identity(tiny_lm, tmp_path):
    edited = tmp_path / "edited"
    shutil.copytree(tiny_lm, edited)
    config = json.loads((edited / "config.json").read_text())
    config["layer_norm_epsilon"] = 1e-3
    (edited / "config.json").write_text(json.dumps(config, indent=3))
    before, after = load(ModelSpec(str(tiny_lm))), load(ModelSpec(str(edited)))
    assert before.weights_sha256 == after.weights_sha256
    assert before.identity_parts.tokenizer_sha256 == after.identity_parts.tokenizer_sha256
    assert before.identity != after.identity


def test_config_identity_ignores_formatting_and_the_saving_library_version():
    config = {"model_type": "gpt2", "n_layer": 1, "transformers_version": "5.0.0"}
    resaved = {"transformers_version": "5.9.9", "n_layer": 1, "model_type": "gpt2"}
    assert config_sha256(config) == config_sha256(resaved)
    assert config_sha256(config) != config_sha256({**config, "n_layer": 2})


def test_every_part_changes_the_identity():
    base = ModelIdentity("a" * 64, "b" * 64, "c" * 64, "causal-lm")
    changed = [ModelIdentity("d" * 64, "b" * 64, "c" * 64, "causal-lm"),
               ModelIdentity("a" * 64, "d" * 64, "c" * 64, "causal-lm"),
               ModelIdentity("a" * 64, "b" * 64, "d" * 64, "causal-lm"),
               ModelIdentity("a" * 64, "b" * 64, "c" * 64, "encoder")]
    assert len({base.identity, *(c.identity for c in changed)}) == 5


# ---------------------------------------------------------------- schema 1 and 2 files


def schema1_file(identity: str = "0" * 64) -> dict:
    return {
        "schema_version": 1, "created_at": "2024-01-01T00:00:00+00:00",
        "harness": {"version": "0.1.0", "git_commit": None},
        "model": {"name": "m", "source": "m", "revision": None, "identity": identity,
                  "identity_kind": "weights-sha256", "kind": "causal-lm", "dtype": "float32", "device": "cpu"},
        "environment": {"python": "3.12", "torch": "2", "transformers": "5", "platform": "linux"},
        "run": {"batch_size": 16, "limit": None, "seed": 0},
        "tasks": [],
    }


def schema2_file() -> dict:
    raw = schema1_file("e" * 64)
    raw["schema_version"] = 2
    raw["model"].update(identity_kind="model-sha256", weights_sha256="0" * 64, tokenizer_sha256="1" * 64,
                        config_sha256="2" * 64)
    return raw


def test_schema_1_files_still_load_and_keep_their_identity():
    results = parse_results(json.dumps(schema1_file()), "old.json")
    assert results.schema_version == 1 and results.model.weights_sha256 is None
    assert board_key(results.model) == "0" * 64
    assert "weights_sha256" not in json.loads(results.model_dump_json())["model"]


def test_the_committed_submissions_still_validate():
    files = read_submissions(Path(__file__).parents[2] / "submissions")
    assert files and all(isinstance(results, ResultsFile) for _, results in files)


def test_schema_2_files_load():
    results = parse_results(json.dumps(schema2_file()), "new.json")
    assert results.schema_version == 2 and results.model.weights_sha256 == "0" * 64
    assert board_key(results.model) == "e" * 64


@pytest.mark.parametrize("change", [
    lambda raw: raw["model"].pop("tokenizer_sha256"),
    lambda raw: raw["model"].update(identity_kind="weights-sha256"),
    lambda raw: raw.update(schema_version=1),  # schema 1 with identity parts
])
def test_identity_fields_must_fit_the_schema_version(change):
    raw = schema2_file()
    change(raw)
    with pytest.raises(UserError, match="identity_kind"):
        parse_results(json.dumps(raw), "bad.json")


def test_new_results_files_are_schema_2(tiny_lm, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(task_module._REGISTRY, CountingTask.NAME, CountingTask)
    path = evaluate(ModelSpec(str(tiny_lm)), select(CountingTask.NAME), {}, EvaluateOptions(output_path=tmp_path))
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == 2 and raw["model"]["identity_kind"] == "model-sha256"
    assert raw["model"]["identity"][:12] in path.name
    lm = load(ModelSpec(str(tiny_lm)))
    assert raw["model"]["weights_sha256"] == lm.weights_sha256 and raw["model"]["identity"] == lm.identity
