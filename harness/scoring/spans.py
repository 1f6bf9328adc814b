"""Character spans of texts aligned to subword tokens, and length-sorted batches of token rows.

`align_spans` tokenizes texts with the fast (Rust) tokenizer, special tokens included, and maps
each character span [start, end) to the indices of the non-special tokens whose characters
overlap it. The scoring primitives that read model outputs at a span's tokens (token classes,
pooled hidden states) share it, and `length_batches`, so they align and batch the same way.
"""

from __future__ import annotations

import copy
import hashlib

import numpy as np

from harness.core.errors import UserError

Span = tuple[int, int]


def span_token_indices(offsets: list[tuple[int, int]], special: list[int], spans: list[Span]) -> list[np.ndarray]:
    """For each character span [start, end) of one text, the indices of the non-special tokens whose
    characters overlap it (a token with characters [a, b), b > a, overlaps where a < end and b > start);
    one spans x tokens comparison instead of a scan of the tokens per span."""
    if not spans:
        return []
    bounds = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    wanted = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    usable = (np.asarray(special, dtype=bool) == 0) & (bounds[:, 1] > bounds[:, 0])
    overlaps = usable & (bounds[:, 0] < wanted[:, 1:]) & (bounds[:, 1] > wanted[:, :1])
    return [np.flatnonzero(row) for row in overlaps]


def align_spans(tokenizer, texts: list[str], spans: list[list[Span]], context: int,
                start_token: int | None = None) -> tuple[list[list[int]], list[list[np.ndarray]]]:
    """Token ids of each text (special tokens included) and, for each of its spans, the indices of
    the span's tokens.

    With `start_token` (a causal LM's, `harness.scoring.causal.causal_start_token`) each text is that token
    followed by the text's tokens without the tokenizer's own special tokens: what a causal LM is
    scored on. Otherwise the tokenizer adds its special tokens ([CLS] ... [SEP], <s> ... </s>).
    A text longer than `context` tokens, or a span that covers no token, is a `UserError`; so is a
    slow tokenizer, which has no character offsets. The result of a large call is kept (`KEEP_FROM`)
    and returned again to a call with the same tokenizer (its full serialization), texts, spans,
    context and start token; callers only read it.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise UserError("span scoring needs a fast (Rust) tokenizer for character offsets; "
                        f"{type(tokenizer).__name__} is not one")
    if len(texts) < KEEP_FROM:
        return _align(tokenizer, texts, spans, context, start_token)
    key = hashlib.sha256(repr((tokenizer.backend_tokenizer.to_str(), list(texts), spans, context,
                               start_token)).encode("utf-8")).hexdigest()
    if key not in _kept:
        _kept.clear()
        _kept[key] = _align(tokenizer, texts, spans, context, start_token)
    return _kept[key]


# The alignment of the last call with at least KEEP_FROM texts, by (tokenizer, texts, spans, ...):
# the NER task scores the same 176,000 sentences on every checkpoint of a build, with the same
# tokenizer, and tokenizing and aligning them took 21 s of each checkpoint's 90 s.
KEEP_FROM = 10_000
_kept: dict[str, tuple[list[list[int]], list[list[np.ndarray]]]] = {}


def _align(tokenizer, texts: list[str], spans: list[list[Span]], context: int,
           start_token: int | None) -> tuple[list[list[int]], list[list[np.ndarray]]]:
    """`align_spans` without keeping: tokenize and align."""
    # The Rust tokenizer itself (a copy, never truncating or padding): the same encodings as
    # `tokenizer(...)` without converting each one into Python lists.
    backend = copy.deepcopy(tokenizer.backend_tokenizer)
    backend.no_truncation()
    backend.no_padding()
    encodings = backend.encode_batch(list(texts), add_special_tokens=start_token is None)
    ids, positions = [], []
    for text, encoding, text_spans in zip(texts, encodings, spans):
        row, offsets, special = encoding.ids, encoding.offsets, encoding.special_tokens_mask
        if start_token is not None:
            row, offsets, special = [start_token] + row, [(0, 0)] + offsets, [1] + special
        if len(row) > context:
            raise UserError(f"a text is {len(row)} tokens long, over the model's context of {context}: "
                            f"{text[:60]!r}")
        found = span_token_indices(offsets, special, text_spans)
        for (start, end), where in zip(text_spans, found):
            if len(where) == 0:
                raise UserError(f"characters {start}-{end} of {text[:60]!r} cover no token")
        ids.append(row)
        positions.append(found)
    return ids, positions


def longest_first(lengths: list[int]) -> list[int]:
    """Row indices, longest row first (ties in index order)."""
    return sorted(range(len(lengths)), key=lambda k: -lengths[k])


def length_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Row indices in batches of `batch_size`, longest rows first, so padding stays small."""
    order = longest_first(lengths)
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def bounded_batches(order: list[int], lengths: list[int], max_rows: int | None, max_cells: int) -> list[list[int]]:
    """`order` (row indices) cut, in its order, into batches of at most `max_rows` rows (None: no
    limit), fewer where the padded batch, rows x its longest row (`lengths`), would pass `max_cells`
    token positions; never fewer than one row. Pass `order` longest first (`length_batches`'s
    order), so a batch's first row is usually its longest; the bound uses the true maximum."""
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        width = max(longest, lengths[i])
        full = max_rows is not None and len(current) == max_rows
        if current and (full or (len(current) + 1) * width > max_cells):
            batches.append(current)
            current, width = [], lengths[i]
        current.append(i)
        longest = width
    if current:
        batches.append(current)
    return batches


def context_batches(lengths: list[int], batch_size: int, context: int) -> list[list[int]]:
    """Rows longest first, in batches of as many rows as fill `batch_size` rows of the model's
    `context` (capped at `FULL_ROW_CAP` tokens): rows x the batch's longest row <= batch_size x
    min(context, FULL_ROW_CAP). Short rows (a prompt sentence of 45 tokens in a 128-token context)
    then run several times `batch_size` at once, in fewer, larger calls (the reference NER job: 936
    batches instead of 2,750, 117 -> 112 s: its forward passes are compute-bound); a row's numbers
    do not depend on its batch (right padding is masked)."""
    return bounded_batches(longest_first(lengths), lengths, None, batch_size * max(1, min(context, FULL_ROW_CAP)))


# The longest row `context_batches` counts a full one (a BERT's context): a long-context model's
# batches hold no more tokens than a BERT's.
FULL_ROW_CAP = 512


def words_to_text(words: list[str]) -> tuple[str, list[Span]]:
    """The words joined by single spaces, and each word's character span in that text."""
    spans, start = [], 0
    for word in words:
        spans.append((start, start + len(word)))
        start += len(word) + 1
    return " ".join(words), spans
