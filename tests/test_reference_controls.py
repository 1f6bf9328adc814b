"""Positive and negative controls on the reference checkpoints (the quick build).

Min-K% 20% AUC must rise with epochs (1 < 5 < 15) and reach 0.9 after 15 epochs; the untrained
model of the same architecture must sit at chance (0.5 +- 0.1).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from harness.models import ModelSpec
from harness.reference.build import MANIFEST, BuildConfig, build, checkpoint_folders
from harness.reference.train import TrainConfig
from harness.results import load_results
from harness.runner import EvaluateOptions, evaluate
from harness.task import select


def headline_auc(path, length: str = "64") -> float:
    entry = load_results(path).task("mink_membership")
    return next(m.value for m in entry.metrics
                if m.name == "auc" and m.tags == {"score": "min_k_20", "length": length})


@pytest.fixture(scope="module")
def aucs(quick_reference, tmp_path_factory):
    out = tmp_path_factory.mktemp("controls")
    options = EvaluateOptions(output_path=out)
    overrides = {"lengths": ["32", "64"], "bootstrap_resamples": "100"}
    return {folder.name: headline_auc(evaluate(ModelSpec(str(folder)), select("mink_membership"), overrides, options))
            for folder in checkpoint_folders(quick_reference)}


def test_manifest_names_members_and_non_members(quick_reference):
    manifest = json.loads((quick_reference / MANIFEST).read_text())
    members, others = set(manifest["members"]), set(manifest["non_members"])
    assert len(members) == len(others) == 500
    assert not members & others
    assert [c["epoch"] for c in manifest["checkpoints"]] == [0, 1, 5, 15]
    assert [c["times_each_trained_document_seen"] for c in manifest["checkpoints"]] == [0, 1, 5, 15]


def test_untrained_model_is_at_chance(aucs):
    assert 0.4 <= aucs["xsum-gpt2-e00"] <= 0.6


def test_auc_rises_with_epochs_and_reaches_0_9(aucs):
    assert aucs["xsum-gpt2-e01"] < aucs["xsum-gpt2-e05"] < aucs["xsum-gpt2-e15"]
    assert aucs["xsum-gpt2-e15"] >= 0.9


def test_build_is_deterministic_for_a_seed(tmp_path):
    tiny = BuildConfig(train=replace(TrainConfig(), n_embd=16, n_layer=1, n_head=2, context=32,
                                     vocab_size=512, max_words_per_document=12, epochs=(1,)))
    first = json.loads((build(tiny, tmp_path / "a") / MANIFEST).read_text())
    second = json.loads((build(tiny, tmp_path / "b") / MANIFEST).read_text())
    assert [c["weights_sha256"] for c in first["checkpoints"]] == [c["weights_sha256"] for c in second["checkpoints"]]
    assert first["members"] == second["members"]
