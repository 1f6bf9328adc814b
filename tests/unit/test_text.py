"""Word segmentation and truncation (harness.scoring.text)."""

from __future__ import annotations

import pytest

from harness.core.errors import UserError
from harness.scoring.text import truncate_words, word_end_offsets


def test_english_word_offsets():
    assert word_end_offsets("  Hello,  world!\nok") == [8, 16, 19]


def test_truncate_keeps_original_spacing_and_newlines():
    text = "Hello,  world!\nThis is\ta  test.\n\nEnd"
    assert truncate_words(text, 1) == "Hello,"
    assert truncate_words(text, 3) == "Hello,  world!\nThis"
    assert truncate_words(text, 5) == "Hello,  world!\nThis is\ta"
    assert truncate_words(text, 7) == "Hello,  world!\nThis is\ta  test.\n\nEnd"


def test_truncate_keeps_leading_whitespace_and_drops_trailing():
    assert truncate_words("  \n lead word tail", 2) == "  \n lead word"
    assert truncate_words("one two   ", 2) == "one two"


def test_truncate_returns_none_when_too_short():
    assert truncate_words("one two three", 4) is None
    assert truncate_words("", 1) is None
    assert truncate_words("   \n\t ", 1) is None
    assert truncate_words("one two three", 3) == "one two three"


def test_japanese_words_with_fugashi():
    text = "吾輩は猫である。"
    ends = word_end_offsets(text, "ja")
    words = [text[start:end] for start, end in zip([0] + ends[:-1], ends)]
    assert words == ["吾輩", "は", "猫", "で", "ある", "。"]


def test_japanese_truncation():
    text = "吾輩は猫である。名前はまだ無い。"
    assert truncate_words(text, 3, "ja") == "吾輩は猫"
    assert truncate_words(text, 6, "ja") == "吾輩は猫である。"
    assert truncate_words(text, 100, "ja") is None
    # whitespace between words is kept as written
    assert truncate_words("吾輩 は\n猫である。", 3, "ja") == "吾輩 は\n猫"


def test_japanese_is_not_split_on_spaces():
    # the English rule would see one word here
    assert len(word_end_offsets("吾輩は猫である。", "en")) == 1
    assert truncate_words("吾輩は猫である。", 2, "en") is None


@pytest.mark.parametrize("language", ["fr", "", "EN", "japanese"])
def test_unknown_language_is_a_user_error(language):
    with pytest.raises(UserError, match="unknown language"):
        word_end_offsets("some text", language)
    with pytest.raises(UserError):
        truncate_words("some text", 1, language)
