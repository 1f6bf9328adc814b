"""Helpers every batched scoring primitive shares: the padding id, right-padding rows with their
mask, and a model's context window."""

from __future__ import annotations

import torch

from harness.model.loading import context_length


def padding_id(tokenizer) -> int:
    """The id that fills padded positions: the tokenizer's pad token, else 0 (GPT-2 defines none;
    padded positions are masked or never read, so any id serves)."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0


def right_pad(rows: list[list[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows right-padded with `value` to the longest one (int64), and the mask of real tokens."""
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), value, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for j, row in enumerate(rows):
        ids[j, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[j, : len(row)] = 1
    return ids, mask


DEFAULT_CONTEXT = 2048  # assumed when a model's config names no context window


def model_context(model) -> int:
    """The model's context window (config), or DEFAULT_CONTEXT when the config names none."""
    return context_length(model.config) or DEFAULT_CONTEXT
