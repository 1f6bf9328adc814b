"""Span alignment (harness/scoring/spans.py): a large call's alignment is kept and served again only
to a call with the same tokenizer, texts, spans and context."""

from __future__ import annotations

import numpy as np
import pytest

from harness.reference.wordpiece import train_wordpiece_tokenizer
from harness.scoring import spans
from harness.scoring.spans import align_spans, words_to_text
from tests.helpers.tiny_models import TINY_SENTENCES


@pytest.fixture()
def kept_from_3(monkeypatch):
    monkeypatch.setattr(spans, "KEEP_FROM", 3)
    monkeypatch.setattr(spans, "_kept", {})
    calls = []
    align = spans._align
    monkeypatch.setattr(spans, "_align", lambda *args: calls.append(args[1]) or align(*args))
    return calls


def texts_and_spans(names: list[str]) -> tuple[list[str], list[list[tuple[int, int]]]]:
    made = [words_to_text(["Then", name, "left", "."]) for name in names]
    return [text for text, _ in made], [[found[1]] for _, found in made]


def test_a_large_alignment_is_kept_for_the_same_tokenizer_and_texts(kept_from_3):
    tokenizer = train_wordpiece_tokenizer(TINY_SENTENCES, vocab_size=200)
    texts, where = texts_and_spans(["Anna", "Tom Diaz", "Lee", "Oslo"])
    first = align_spans(tokenizer, texts, where, 64)
    again = align_spans(train_wordpiece_tokenizer(TINY_SENTENCES, vocab_size=200), texts, where, 64)
    assert again is first and len(kept_from_3) == 1  # an equal tokenizer, loaded again: not tokenized again
    assert [list(map(list, found)) for found in first[1]] == \
           [list(map(list, found)) for found in spans._align(tokenizer, texts, where, 64, None)[1]]


@pytest.mark.parametrize("change", ["texts", "spans", "context", "tokenizer", "small"])
def test_anything_else_is_aligned_afresh(kept_from_3, change):
    tokenizer = train_wordpiece_tokenizer(TINY_SENTENCES, vocab_size=200)
    texts, where = texts_and_spans(["Anna", "Tom Diaz", "Lee", "Oslo"])
    first = align_spans(tokenizer, texts, where, 64)
    if change == "texts":
        texts = texts[:-1] + ["Then Oslo left !"]
    elif change == "spans":
        where = [[(0, 4)]] + where[1:]  # "Then", not "Anna"
    elif change == "tokenizer":
        tokenizer = train_wordpiece_tokenizer(["Anna went to Oslo ."] * 4, vocab_size=200)
    elif change == "small":
        texts, where = texts[:2], where[:2]
    again = align_spans(tokenizer, texts, where, 32 if change == "context" else 64)
    assert again is not first and len(kept_from_3) == 2
    if change == "spans":
        assert not np.array_equal(again[1][0][0], first[1][0][0])
