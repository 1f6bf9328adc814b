"""Batched token-classification scoring: class probabilities of the subword tokens of a text span.

`span_label_probs` runs a token classifier (an NER model) over sentences and returns, for each
sentence, softmax(logits)[token, label] for every subword token that overlaps a given character
span (the tokens of a person name, say) and every requested label id.
- Token-to-character alignment comes from the fast tokenizer's offset mapping; special tokens
  ([CLS], [SEP], <s>, ...) never belong to a span.
- Each distinct (text, span) is run once. Texts are sorted by token length and right-padded in
  batches with the padding masked, so a text's probabilities do not depend on its batch.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from tqdm.auto import tqdm

from harness.errors import UserError
from harness.scoring import model_context, right_pad


def label_ids(id2label: dict, wanted: tuple[str, ...]) -> list[int]:
    """The ids of the `wanted` label names (case-insensitive) in a model's `id2label`."""
    by_name = {str(name).upper(): int(i) for i, name in id2label.items()}
    missing = [name for name in wanted if name.upper() not in by_name]
    if missing:
        raise KeyError(missing[0])
    return [by_name[name.upper()] for name in wanted]


def _span_token_indices(offsets: list[tuple[int, int]], special: list[int], start: int, end: int) -> np.ndarray:
    """Indices of the non-special tokens whose characters overlap [start, end)."""
    return np.array([i for i, ((a, b), s) in enumerate(zip(offsets, special))
                     if not s and b > a and a < end and b > start], dtype=np.int64)


@torch.no_grad()
def span_label_probs(model, tokenizer, texts: list[str], spans: list[tuple[int, int]], labels: list[int],
                     batch_size: int = 64, progress: bool | None = None, desc: str = "classifying") -> list[np.ndarray]:
    """Per text, an array (tokens of its span, len(labels)) of softmax probabilities of `labels`.

    `spans[i]` is the character range [start, end) in `texts[i]`. A text longer than the model's
    context, or a span that covers no token, is a `UserError`.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise UserError("token-class scoring needs a fast (Rust) tokenizer for character offsets; "
                        f"{type(tokenizer).__name__} is not one")
    distinct = list(dict.fromkeys(zip(texts, spans)))
    if not distinct:
        return []
    # The Rust tokenizer itself (a copy, never truncating or padding): the same encodings as
    # `tokenizer(...)` without converting each one into Python lists.
    backend = copy.deepcopy(tokenizer.backend_tokenizer)
    backend.no_truncation()
    backend.no_padding()
    encodings = backend.encode_batch([text for text, _ in distinct], add_special_tokens=True)
    encoded = {"input_ids": [e.ids for e in encodings]}
    context = model_context(model)
    positions = []
    for k, (text, (start, end)) in enumerate(distinct):
        ids = encoded["input_ids"][k]
        if len(ids) > context:
            raise UserError(f"a sentence is {len(ids)} tokens long, over the model's context of {context}: "
                            f"{text[:60]!r}")
        where = _span_token_indices(encodings[k].offsets, encodings[k].special_tokens_mask, start, end)
        if len(where) == 0:
            raise UserError(f"characters {start}-{end} of {text[:60]!r} cover no token")
        positions.append(where)
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    wanted = torch.tensor(labels, device=device)
    order = sorted(range(len(distinct)), key=lambda k: -len(encoded["input_ids"][k]))
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    results: list[np.ndarray | None] = [None] * len(distinct)
    for batch in tqdm(batches, desc=desc, unit="batch", leave=False,
                      disable=None if progress is None else not progress):
        input_ids, attention = right_pad([encoded["input_ids"][k] for k in batch], pad)
        logits = model(input_ids=input_ids.to(device), attention_mask=attention.to(device)).logits
        rows = np.concatenate([np.full(len(positions[k]), j) for j, k in enumerate(batch)])
        cols = np.concatenate([positions[k] for k in batch])
        picked = logits[torch.from_numpy(rows).to(device), torch.from_numpy(cols).to(device)].float()
        probs = torch.softmax(picked, dim=-1)[:, wanted].cpu().numpy()
        start = 0
        for k in batch:
            results[k] = probs[start:start + len(positions[k])]
            start += len(positions[k])
    index = {key: k for k, key in enumerate(distinct)}
    return [results[index[key]] for key in zip(texts, spans)]
