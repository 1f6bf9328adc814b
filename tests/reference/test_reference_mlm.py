"""The reference masked LM: its blocks, BERT's masking, a quick build, and its controls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.core.model_types import ModelKind
from harness.model.loading import ModelSpec, load
from harness.reference.build import MANIFEST, read_manifest
from harness.reference.mlm_build import (
    EVAL_BATCH,
    FIRST_WORD_ID,
    IGNORED,
    MASK_SEED_OFFSET,
    MlmBuildConfig,
    build_mlm,
    encode_blocks,
    heldout_texts,
    mask_tokens,
    padded_batch,
    pretraining_texts,
)
from harness.reference.wordpiece import SPECIAL_TOKENS, train_wordpiece_tokenizer
from tests.conftest import TINY_TEXTS

QUICK = MlmBuildConfig(max_words_per_document=24, max_positions=64, epochs=(0, 2), heldout_documents=50,
                       heldout_words=32)
DATA_SCRIPT = """
import json, sys, torch
from harness.reference.mlm_build import MlmBuildConfig, encode_blocks, mask_tokens, padded_batch, pretraining_texts
from harness.reference.wordpiece import train_wordpiece_tokenizer
config = MlmBuildConfig(**json.loads(sys.argv[1]))
texts = pretraining_texts(config)
tokenizer = train_wordpiece_tokenizer(texts, config.vocab_size)
rows = encode_blocks(tokenizer, texts, config.max_positions)
inputs, labels = mask_tokens(padded_batch(rows[:64])[0], tokenizer.mask_token_id, len(tokenizer),
                             torch.Generator().manual_seed(config.seed))
print(json.dumps({"vocab": sorted(tokenizer.get_vocab().items()), "rows": rows,
                  "inputs": inputs.tolist(), "labels": labels.tolist()}))
"""


@pytest.fixture(scope="module")
def quick_mlm(membench_cache) -> Path:
    return build_mlm(QUICK)


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece_tokenizer(TINY_TEXTS, vocab_size=200)


def masked_loss(lm, rows: list[list[int]], seed: int) -> float:
    """Mean masked-token loss of `rows` (masked in batches as the build does) through the model's own
    forward pass (HF's loss from labels)."""
    generator, total, count = torch.Generator().manual_seed(seed), 0.0, 0
    for start in range(0, len(rows), EVAL_BATCH):
        input_ids, attention_mask = padded_batch(rows[start:start + EVAL_BATCH])
        inputs, labels = mask_tokens(input_ids, lm.tokenizer.mask_token_id, len(lm.tokenizer), generator)
        with torch.no_grad():
            loss = lm.model(input_ids=inputs, attention_mask=attention_mask, labels=labels).loss.item()
        n = int((labels != IGNORED).sum())
        total, count = total + loss * n, count + n
    return total / count


def pseudo_log_likelihood(lm, text: str) -> float:
    """Sum over the text's tokens of log P(token | the text with that token masked) (Salazar et al. 2020)."""
    ids = lm.tokenizer(text)["input_ids"]
    positions = range(1, len(ids) - 1)
    batch = torch.tensor([ids[:i] + [lm.tokenizer.mask_token_id] + ids[i + 1:] for i in positions])
    with torch.no_grad():
        logprobs = lm.model(input_ids=batch).logits.log_softmax(-1)
    return sum(logprobs[k, i, ids[i]].item() for k, i in enumerate(positions))


def test_special_tokens_come_first_in_the_vocabulary(tokenizer):
    assert tokenizer.convert_tokens_to_ids(SPECIAL_TOKENS) == list(range(FIRST_WORD_ID))
    assert (tokenizer.pad_token_id, tokenizer.mask_token_id) == (0, SPECIAL_TOKENS.index("[MASK]"))


def test_blocks_are_framed_fit_the_context_and_keep_every_token(tokenizer):
    texts = [" ".join(TINY_TEXTS[:k]) for k in (1, 3, 8)]
    rows = encode_blocks(tokenizer, texts, max_positions=16)
    assert all(len(row) <= 16 and row[0] == tokenizer.cls_token_id and row[-1] == tokenizer.sep_token_id
               for row in rows)
    unframed = [token for row in rows for token in row[1:-1]]
    assert unframed == [t for ids in tokenizer(texts, add_special_tokens=False)["input_ids"] for t in ids]
    assert len(rows) == sum(-(-len(ids) // 14) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"])


def test_masking_follows_bert_80_10_10_and_never_touches_special_tokens():
    vocab_size, mask_id = 1000, SPECIAL_TOKENS.index("[MASK]")
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(FIRST_WORD_ID, vocab_size, (400, 500), generator=generator)
    ids[:, 0], ids[:, -1], ids[:, -50:-1] = 2, 3, 0  # [CLS] ... [SEP] [PAD]
    inputs, labels = mask_tokens(ids, mask_id, vocab_size, torch.Generator().manual_seed(1))
    chosen = labels != IGNORED
    assert torch.equal(labels[chosen], ids[chosen])
    assert torch.equal(inputs[~chosen], ids[~chosen])
    assert not chosen[ids < FIRST_WORD_ID].any()
    words = (ids >= FIRST_WORD_ID).sum().item()
    assert chosen.sum().item() / words == pytest.approx(0.15, abs=0.005)
    n = chosen.sum().item()
    as_mask = (inputs[chosen] == mask_id).sum().item() / n
    unchanged = (inputs[chosen] == ids[chosen]).sum().item() / n
    assert as_mask == pytest.approx(0.8, abs=0.01)
    assert unchanged == pytest.approx(0.1 + 0.1 / vocab_size, abs=0.01)
    assert 1 - as_mask - unchanged == pytest.approx(0.1, abs=0.01)
    assert (inputs >= FIRST_WORD_ID).sum() + (inputs == mask_id).sum() == words  # random tokens are words


def test_masking_is_a_function_of_the_seed():
    ids = torch.randint(FIRST_WORD_ID, 300, (8, 40), generator=torch.Generator().manual_seed(0))
    first, again, other = (mask_tokens(ids, 4, 300, torch.Generator().manual_seed(s)) for s in (7, 7, 8))
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[1], other[1])


def test_the_data_and_its_masking_are_the_same_in_every_process():
    settings = {"max_words_per_document": QUICK.max_words_per_document, "max_positions": QUICK.max_positions}
    run = subprocess.run([sys.executable, "-c", DATA_SCRIPT, json.dumps(settings)], capture_output=True,
                         text=True, check=True)
    there = json.loads(run.stdout)
    texts = pretraining_texts(QUICK)
    tokenizer = train_wordpiece_tokenizer(texts, QUICK.vocab_size)
    rows = encode_blocks(tokenizer, texts, QUICK.max_positions)
    inputs, labels = mask_tokens(padded_batch(rows[:64])[0], tokenizer.mask_token_id, len(tokenizer),
                                 torch.Generator().manual_seed(QUICK.seed))
    assert [list(item) for item in sorted(tokenizer.get_vocab().items())] == there["vocab"]
    assert len(tokenizer) == QUICK.vocab_size
    assert rows == there["rows"] and len(rows) >= len(texts) == 1000
    assert inputs.tolist() == there["inputs"] and labels.tolist() == there["labels"]


def test_heldout_text_follows_the_trained_words():
    texts, heldout = pretraining_texts(QUICK), heldout_texts(QUICK)
    assert len(heldout) == QUICK.heldout_documents
    assert all(len(text.split()) == QUICK.heldout_words for text in heldout)
    assert all(len(text.split()) <= QUICK.max_words_per_document for text in texts)
    assert heldout[0] not in texts[0]


def test_checkpoints_load_as_masked_lms(quick_mlm):
    manifest = read_manifest(quick_mlm)
    assert [c["folder"] for c in manifest["checkpoints"]] == ["mlm-bert-e00", "mlm-bert-e02"]
    assert manifest["tasks"] == ["weat", "stereoset"] and manifest["task_settings"] == {}
    for record in manifest["checkpoints"]:
        lm = load(ModelSpec(model=str(quick_mlm / record["folder"])))
        assert lm.kind is ModelKind.MASKED_LM and lm.info["architectures"] == ["BertForMaskedLM"]
        assert lm.weights_sha256 == record["weights_sha256"] and lm.context_length == QUICK.max_positions
        batch = lm.tokenizer(["The minister said [MASK] would resign."], return_tensors="pt")
        assert lm.model(**batch).logits.shape[-1] == QUICK.vocab_size


def test_training_beats_the_untrained_model_on_unseen_text(quick_mlm):
    manifest = read_manifest(quick_mlm)
    untrained, trained = (load(ModelSpec(model=str(quick_mlm / c["folder"]))) for c in manifest["checkpoints"])
    rows = encode_blocks(trained.tokenizer, heldout_texts(QUICK), QUICK.max_positions)
    seed = QUICK.seed + MASK_SEED_OFFSET + 1
    losses = [masked_loss(lm, rows, seed) for lm in (untrained, trained)]
    recorded = [c["heldout"] for c in manifest["checkpoints"]]
    assert losses == pytest.approx([r["masked_token_loss"] for r in recorded], abs=1e-4)
    assert losses[0] == pytest.approx(torch.log(torch.tensor(float(QUICK.vocab_size))).item(), abs=0.1)
    assert losses[1] < losses[0] - 1.0
    assert recorded[1]["masked_token_accuracy"] > recorded[0]["masked_token_accuracy"] + 0.02
    assert manifest["epoch_mean_loss"]["2"] < manifest["pretrain_first_step_loss"]
    for text in dict.fromkeys(TINY_TEXTS):
        assert pseudo_log_likelihood(trained, text) > pseudo_log_likelihood(untrained, text)


def test_the_build_is_deterministic_and_is_not_redone(tmp_path):
    # two builds in this process (the shared test cache may hold one made with another thread
    # count, and CPU matrix products round differently with another number of threads)
    first_folder, again = build_mlm(QUICK, tmp_path / "first"), build_mlm(QUICK, tmp_path / "again")
    first, second = read_manifest(first_folder), read_manifest(again)
    assert [c["weights_sha256"] for c in first["checkpoints"]] == [c["weights_sha256"] for c in second["checkpoints"]]
    assert first["epoch_mean_loss"] == second["epoch_mean_loss"]
    before = (again / MANIFEST).stat().st_mtime_ns
    assert build_mlm(QUICK, again) == again and (again / MANIFEST).stat().st_mtime_ns == before
