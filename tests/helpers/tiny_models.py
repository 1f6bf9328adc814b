"""Tiny models that tests in several layers share: a random 1-layer BERT token classifier and the
recipe of a tiny T5 build."""

from __future__ import annotations

from pathlib import Path

from transformers import BertConfig, BertForTokenClassification

from harness.reference import ner_data
from harness.reference.ner_build import NerBuildConfig, untrained_model
from harness.reference.t5_build import T5BuildConfig
from harness.reference.wordpiece import train_wordpiece_tokenizer

TINY_SENTENCES = ["Anna Berg met Tom Diaz in Oslo .", "The bank said profits rose .", "Have you seen Lee Park ?"] * 4

# A T5 build small enough to pre-train in seconds.
TINY_T5 = T5BuildConfig(vocab_size=300, d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16, pretrain_steps=12,
                        batch_size=8, learning_rate=3e-3, max_input_tokens=32, sparse_pretrain_steps=4)


def save_tiny_ner(folder: Path, labels: tuple[str, ...] = ner_data.LABELS) -> Path:
    """A 1-layer BERT token classifier with random weights and the given labels."""
    tokenizer = train_wordpiece_tokenizer(TINY_SENTENCES, vocab_size=200)
    config = NerBuildConfig(hidden_size=32, n_layer=1, n_head=2, intermediate_size=64, max_positions=64)
    model = untrained_model(len(tokenizer), config)
    if labels != ner_data.LABELS:
        id2label = dict(enumerate(labels))
        model = BertForTokenClassification(BertConfig(**{**model.config.to_dict(), "id2label": id2label,
                                                         "label2id": {v: k for k, v in id2label.items()}}))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


WORDS = ["the", "a", "man", "woman", "doctor", "nurse", "said", "went", "home", "to", "work", "."]


def save_bert_tokenizer(folder: Path, words: list[str] = WORDS) -> int:
    """A WordPiece tokenizer over `words` saved into `folder`; returns its vocabulary size."""
    from transformers import BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    (folder / "vocab.txt").write_text("".join(f"{token}\n" for token in vocab))
    BertTokenizer.from_pretrained(folder).save_pretrained(folder)
    return len(vocab)


def bert_config(vocab_size: int, **overrides):
    from transformers import BertConfig

    settings = dict(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=32)
    return BertConfig(**{**settings, **overrides})


def save_bert(folder: Path, model_class: str) -> Path:
    """A tiny seeded BERT of `model_class` (BertModel or BertForMaskedLM) with its tokenizer."""
    import torch
    import transformers

    vocab_size = save_bert_tokenizer(folder)
    torch.manual_seed(0)
    getattr(transformers, model_class)(bert_config(vocab_size)).save_pretrained(folder)
    return folder
