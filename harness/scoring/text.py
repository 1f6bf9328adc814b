"""Word segmentation for truncating texts to their first L words.

English (and any space-delimited language): words are maximal runs of non-whitespace.
Japanese (`language="ja"`): words are MeCab tokens from fugashi with the unidic-lite dictionary.
Truncation cuts the original text right after the L-th word, so its own spacing and newlines stay.
"""

from __future__ import annotations

import re
from functools import lru_cache

from harness.core.errors import UserError

_WORD = re.compile(r"\S+")
LANGUAGES = ("en", "ja")


@lru_cache(maxsize=1)
def _japanese_tagger():
    import fugashi

    return fugashi.Tagger()


def word_end_offsets(text: str, language: str = "en") -> list[int]:
    """Character offset just past each word of `text`, in order."""
    if language == "ja":
        ends, position = [], 0
        for word in _japanese_tagger()(text):
            position = text.index(word.surface, position) + len(word.surface)
            if word.surface.strip():  # MeCab returns full-width spaces as tokens; they are not words
                ends.append(position)
        return ends
    if language == "en":
        return [match.end() for match in _WORD.finditer(text)]
    raise UserError(f"unknown language {language!r}; choose one of {', '.join(LANGUAGES)}")


def truncate_words(text: str, n_words: int, language: str = "en") -> str | None:
    """The text up to and including its `n_words`-th word (n_words >= 1); None when it has fewer words."""
    if n_words < 1:
        raise ValueError(f"n_words must be at least 1, got {n_words}")
    ends = word_end_offsets(text, language)
    if len(ends) < n_words:
        return None
    return text[: ends[n_words - 1]]
