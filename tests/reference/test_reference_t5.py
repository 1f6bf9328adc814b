"""The reference T5: its tokenizer, span corruption, a tiny build and its pruned variant."""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.core.model_types import ModelKind
from harness.model.loading import ModelSpec, load
from harness.reference.build import MANIFEST, read_manifest
from harness.reference.t5_build import (
    SENTINELS,
    T5BuildConfig,
    build_t5,
    pretraining_texts,
    span_corruption,
    train_t5_tokenizer,
)
from tests.conftest import TINY_TEXTS
from tests.helpers.tiny_models import TINY_T5

VOCABULARY_SCRIPT = """
import json
from harness.reference.t5_build import T5BuildConfig, pretraining_texts, train_t5_tokenizer
tokenizer = train_t5_tokenizer(pretraining_texts(T5BuildConfig()), 2000)
print(json.dumps(sorted(tokenizer.get_vocab().items())))
"""


@pytest.fixture(scope="module")
def tokenizer():
    return train_t5_tokenizer(TINY_TEXTS, vocab_size=300)


@pytest.fixture(scope="module")
def tiny_t5(tmp_path_factory) -> Path:
    return build_t5(TINY_T5, tmp_path_factory.mktemp("t5") / "tiny-t5")


def reconstruct(inputs: list[int], targets: list[int], sentinels: list[int], eos_id: int) -> list[int]:
    """The original ids: each sentinel of the input replaced by what follows it in the target."""
    spans, current = {}, None
    for token in targets[:-1]:
        if token in sentinels:
            current = spans.setdefault(token, [])
        else:
            current.append(token)
    assert inputs[-1] == targets[-1] == eos_id
    return [t for token in inputs[:-1] for t in (spans[token] if token in sentinels else [token])]


def test_sentinels_are_single_special_tokens_and_eos_is_appended(tokenizer):
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id) == (0, 1, 2)
    sentinel_ids = tokenizer.convert_tokens_to_ids(SENTINELS)
    assert sentinel_ids == list(range(len(tokenizer) - 100, len(tokenizer)))
    ids = tokenizer("the fox<extra_id_0> jumps <extra_id_99>over").input_ids
    assert ids[-1] == tokenizer.eos_token_id and ids.count(tokenizer.eos_token_id) == 1
    assert sentinel_ids[0] in ids and sentinel_ids[99] in ids
    assert tokenizer.decode(ids, skip_special_tokens=True).split() == ["the", "fox", "jumps", "over"]


def test_random_alphanumeric_strings_never_become_unk(tokenizer):
    rng = random.Random(0)
    alphabet = string.ascii_letters + string.digits
    for _ in range(200):
        text = " ".join("".join(rng.choices(alphabet, k=rng.randint(1, 12))) for _ in range(rng.randint(1, 4)))
        ids = tokenizer(text).input_ids
        assert tokenizer.unk_token_id not in ids, text
        assert tokenizer.decode(ids, skip_special_tokens=True) == text


def test_the_tokenizer_is_the_same_in_every_process():
    # two processes at once (each its own string-hash seed), then this one
    runs = [subprocess.Popen([sys.executable, "-c", VOCABULARY_SCRIPT], stdout=subprocess.PIPE, text=True)
            for _ in range(2)]
    outputs = [run.communicate(timeout=300)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0]
    vocabularies = [json.loads(output) for output in outputs]
    assert vocabularies[0] == vocabularies[1]
    here = train_t5_tokenizer(pretraining_texts(T5BuildConfig()), 2000)
    assert [list(item) for item in sorted(here.get_vocab().items())] == vocabularies[0]
    assert len(here) == 2100


@pytest.mark.parametrize("length", [2, 3, 7, 20, 63, 200])
def test_span_corruption_inputs_and_targets_reconstruct_the_tokens(length):
    sentinels, eos = list(range(1000, 1100)), 1
    rng = random.Random(length)
    for _ in range(20):
        ids = [rng.randrange(3, 1000) for _ in range(length)]
        inputs, targets = span_corruption(ids, sentinels, eos, rng)
        assert reconstruct(inputs, targets, sentinels, eos) == ids
        used = [t for t in inputs if t in sentinels]
        assert used == sentinels[:len(used)] == [t for t in targets if t in sentinels]
        n_dropped = len(targets) - 1 - len(used)
        assert n_dropped == min(max(round(0.15 * length), 1), length - 1)


def test_a_build_saves_a_dense_and_a_pruned_seq2seq_checkpoint(tiny_t5):
    manifest = read_manifest(tiny_t5)
    dense_record, sparse_record = manifest["checkpoints"]
    assert (dense_record["folder"], sparse_record["folder"]) == ("t5-ref", "t5-ref-sparse70")
    dense, sparse = (load(ModelSpec(str(tiny_t5 / r["folder"]))) for r in (dense_record, sparse_record))
    for lm in (dense, sparse):
        assert lm.kind is ModelKind.SEQ2SEQ
        batch = lm.tokenizer(["the quick brown <extra_id_0> jumps"], return_tensors="pt")
        output = lm.model.generate(**batch, max_new_tokens=5, do_sample=False)
        assert output.shape[0] == 1 and 1 < output.shape[1] <= 6
    assert "pruning" not in dense.info
    assert "membench_pruning" not in json.loads((tiny_t5 / "t5-ref" / "config.json").read_text())
    pruning = sparse.info["pruning"]
    assert pruning["target_sparsity"] == 0.7 and pruning["scope"] == "all"
    # pruned across all parameters, and still as sparse after the sparse pre-training
    assert pruning["parameter_sparsity"] == pytest.approx(0.7, abs=1e-3)
    assert pruning["parameter_sparsity_after_pretraining"] == pruning["parameter_sparsity"]
    pairs = list(zip(dense.model.parameters(), sparse.model.parameters()))
    pruned = torch.cat([before[after == 0].abs() for before, after in pairs])
    kept = torch.cat([before[after != 0].abs() for before, after in pairs])
    assert pruned.max() <= kept.min()  # one threshold over every parameter: the zeros are the smallest weights
    assert any(not torch.equal(before[after != 0], after[after != 0]) for before, after in pairs)  # kept ones trained


def test_pretraining_lowers_the_loss(tiny_t5):
    manifest = read_manifest(tiny_t5)
    windows = list(manifest["pretrain_mean_loss"].values())
    assert len(manifest["sparse_pretrain_mean_loss"]) > 0
    assert windows[-1] < windows[0] and windows[-1] < manifest["pretrain_first_step_loss"]


def test_the_build_is_deterministic_and_is_not_redone(tiny_t5, tmp_path):
    again = build_t5(TINY_T5, tmp_path / "again")
    first, second = read_manifest(tiny_t5), read_manifest(again)
    assert [c["weights_sha256"] for c in first["checkpoints"]] == [c["weights_sha256"] for c in second["checkpoints"]]
    before = (again / MANIFEST).stat().st_mtime_ns
    assert build_t5(TINY_T5, again) == again and (again / MANIFEST).stat().st_mtime_ns == before
