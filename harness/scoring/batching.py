"""Helpers every batched scoring primitive shares: the padding id, right-padding rows with their
mask, and a model's context window."""

from __future__ import annotations

import numpy as np
import torch

from harness.model.loading import context_length
from harness.model.served import CompletionsClient


def padding_id(tokenizer) -> int:
    """The id that fills padded positions: the tokenizer's pad token, else 0 (GPT-2 defines none;
    padded positions are masked or never read, so any id serves)."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0


def right_pad(rows: list[list[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows right-padded with `value` to the longest one (int64), and the mask of real tokens."""
    lengths = np.array([len(row) for row in rows], dtype=np.int64)
    ids = np.full((len(rows), int(lengths.max())), value, dtype=np.int64)
    for j, row in enumerate(rows):  # numpy, not a tensor per row: NER scores 220,000 short rows
        ids[j, : len(row)] = row
    mask = (np.arange(ids.shape[1]) < lengths[:, None]).astype(np.int64)
    return torch.from_numpy(ids), torch.from_numpy(mask)


DEFAULT_CONTEXT = 2048  # assumed when a model's config names no context window


def model_context(model) -> int:
    """The model's context window (config), or DEFAULT_CONTEXT when the config names none; a served
    model's (`CompletionsClient`), the server's."""
    if isinstance(model, CompletionsClient):
        return model.context_length()
    return context_length(model.config) or DEFAULT_CONTEXT
