"""Positive and negative controls on the reference checkpoints (the quick build).

Min-K% 20% AUC must rise with epochs (1 < 30) and reach 0.9 after 30 epochs; the untrained
model of the same architecture must sit at chance (0.5 +- 0.1). The attacks beyond the token
log-probs (ref against the quick outside build, ne with a tiny masked LM, ReCaLL, DC-PDD with
frequencies from outside the split, gradnorm) must separate the 30-epoch model's members
(AUC >= 0.7 at 64 words) and sit at chance untrained (DC-PDD too, since the builds fit their tokenizer
outside the split: issue 77).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from harness.app.registry import select
from harness.core.results import load_results
from harness.model.loading import ModelSpec
from harness.reference.build import MANIFEST, BuildConfig, build, checkpoint_folders
from harness.reference.train import (
    DOC_SEPARATOR,
    TrainConfig,
    length_batches,
    padded_loss,
    train_tokenizer,
    training_sequences,
    untrained_model,
)
from harness.run.runner import EvaluateOptions, evaluate
from tests.helpers.shipped_builds import shipped_build

ATTACKS = ("ref", "ne", "recall", "dc_pdd", "gradnorm")


def headline_auc(results, length: str = "64") -> float:
    entry = results.task("mink_membership")
    return next(m.value for m in entry.metrics
                if m.name == "auc" and m.tags == {"score": "min_k_20", "length": length})


def attack_aucs(results) -> dict[str, float]:
    entry = results.task("mink_membership")
    return {m.tags["score"]: m.value for m in entry.metrics
            if m.name == "auc" and m.tags["length"] == "64" and m.tags["score"] in ATTACKS}


@pytest.fixture(scope="module")
def results(quick_reference, tmp_path_factory) -> dict:
    """{checkpoint name: results} of mink_membership at 64 words: Min-K% on every quick checkpoint, and
    every attack beyond the token log-probs on the untrained and the 30-epoch one (each scored once)."""
    from harness.reference.build import reference_builds
    from tests.helpers.tiny_models import save_bert

    [outside] = [config for config in reference_builds(quick=True) if config.train_on == "outside"]
    reference = checkpoint_folders(shipped_build(outside))[-1]
    masked = save_bert(tmp_path_factory.mktemp("mlm") / "mlm", "BertForMaskedLM")
    out = tmp_path_factory.mktemp("controls")
    min_k = {"lengths": ["64"], "bootstrap_resamples": "100", "attacks": ["min_k"]}
    every_attack = {**min_k, "reference_model": str(reference), "neighbour_model": str(masked), "neighbours": "5",
                    "dc_pdd_corpus": "outside", "recall_prefix_tokens": "48",  # context 160: 48 + a 64-word text fit
                    "attacks": ["min_k", *ATTACKS]}
    folders = checkpoint_folders(quick_reference)
    return {folder.name: load_results(evaluate(ModelSpec(str(folder)), select("mink_membership"),
                                               every_attack if folder in (folders[0], folders[-1]) else min_k,
                                               EvaluateOptions(output_path=out)))
            for folder in folders}


@pytest.fixture(scope="module")
def aucs(results) -> dict[str, float]:
    """{checkpoint name: Min-K% 20% AUC at 64 words}"""
    return {name: headline_auc(result) for name, result in results.items()}


@pytest.fixture(scope="module")
def attacks(results) -> dict[str, dict[str, float]]:
    """{checkpoint name: {attack: AUC at 64 words}} of the untrained and the 30-epoch checkpoints"""
    return {name: attack_aucs(result) for name, result in results.items() if "ref" in result.task(
        "mink_membership").info["attacks"]}


@pytest.mark.parametrize("attack", ATTACKS)
def test_every_attack_separates_the_members_after_30_epochs(attacks, attack):
    assert attacks["xsum-gpt2-e30"][attack] >= 0.7


@pytest.mark.parametrize("attack", ATTACKS)
def test_every_attack_is_at_chance_untrained(attacks, attack):
    assert 0.4 <= attacks["xsum-gpt2-e00"][attack] <= 0.6


def test_manifest_names_members_and_non_members(quick_reference):
    manifest = json.loads((quick_reference / MANIFEST).read_text())
    members, others = set(manifest["members"]), set(manifest["non_members"])
    assert len(members) == len(others) == 200
    assert not members & others
    assert [c["epoch"] for c in manifest["checkpoints"]] == [0, 1, 30]
    assert [c["times_each_trained_document_seen"] for c in manifest["checkpoints"]] == [0, 1, 30]
    # a tokenizer fitted outside the split cuts the members into more tokens than their own did: 3 of their
    # 64-word texts pass the 160-token context (0 before issue 77); the count is the manifest's to say
    assert 0 <= manifest["n_documents_cut_to_context"] <= 10


def test_untrained_model_is_at_chance(aucs):
    assert 0.4 <= aucs["xsum-gpt2-e00"] <= 0.6


def test_auc_rises_with_epochs_and_reaches_0_9(aucs):
    assert aucs["xsum-gpt2-e01"] < aucs["xsum-gpt2-e30"]
    assert aucs["xsum-gpt2-e30"] >= 0.9


def test_build_is_deterministic_for_a_seed(tmp_path):
    tiny = BuildConfig(train=replace(TrainConfig(), n_embd=16, n_layer=1, n_head=2, context=32,
                                     vocab_size=512, max_words_per_document=12, epochs=(1,)))
    first = json.loads((build(tiny, tmp_path / "a") / MANIFEST).read_text())
    second = json.loads((build(tiny, tmp_path / "b") / MANIFEST).read_text())
    assert [c["weights_sha256"] for c in first["checkpoints"]] == [c["weights_sha256"] for c in second["checkpoints"]]
    assert first["members"] == second["members"]


def test_each_document_is_its_own_sequence_from_position_0():
    """Documents are trained as the tasks read them: [<|endoftext|>] + the document's first tokens."""
    texts = ["The first document is short.", "A second, somewhat longer document about the weather in Oslo."]
    tokenizer = train_tokenizer(texts * 4, vocab_size=300)
    separator = tokenizer.convert_tokens_to_ids(DOC_SEPARATOR)
    sequences = training_sequences(tokenizer, texts, context=8)
    for text, sequence in zip(texts, sequences):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert sequence == [separator, *ids][:8]


def test_padding_is_neither_attended_to_nor_predicted():
    """A padded batch's loss is the token-weighted mean of each document's own loss."""
    texts = ["One two three four five six seven.", "Eight nine."]
    tokenizer = train_tokenizer(texts * 4, vocab_size=300)
    config = replace(TrainConfig(), n_embd=16, n_layer=1, n_head=2, context=32, epochs=(1,))
    model = untrained_model(tokenizer, config)
    sequences = training_sequences(tokenizer, texts, config.context)
    with torch.no_grad():
        alone = [(padded_loss(model, [sequence]).item(), len(sequence) - 1) for sequence in sequences]
        batch = padded_loss(model, sequences).item()
    expected = sum(loss * n for loss, n in alone) / sum(n for _, n in alone)
    assert len(sequences[0]) != len(sequences[1])
    assert batch == pytest.approx(expected, rel=1e-5)


def test_length_batches_group_documents_of_similar_length():
    lengths = [5, 1, 9, 3, 7, 2, 8]
    batches = [b.tolist() for b in length_batches(lengths, 3)]
    assert batches == [[1, 5, 3], [0, 4, 6], [2]]
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
