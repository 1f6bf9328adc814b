"""Masked-LM fill probabilities: p(target token | text with one mask), batched.

Each query is a text holding exactly one mask token (the tokenizer's `mask_token`) and the id of
the token whose probability at the mask is wanted: softmax(logits at the mask)[target]. With
`first_mask=True` a text may hold several masks and the first one is read (how the official
StereoSet code reads a context whose two BLANKs both hold a mask). Each
distinct text is run once whatever the number of targets asked of it, in length-sorted,
right-padded batches with the padding masked, so a probability does not depend on its batch.
"""

from __future__ import annotations

import numpy as np
import torch

from harness.core.errors import UserError
from harness.scoring.batching import model_context, padding_id, right_pad
from harness.scoring.distributed import run_batches
from harness.scoring.spans import length_batches


@torch.no_grad()
def mask_fill_probs(model, tokenizer, texts: list[str], targets: list[int], batch_size: int = 32,
                    progress: bool | None = None, desc: str = "filling masks", first_mask: bool = False
                    ) -> np.ndarray:
    """p(targets[i] at the mask of texts[i]) for every query i, as float64; with `first_mask`, at the
    first of the text's masks."""
    mask = tokenizer.mask_token_id
    if mask is None:
        raise UserError(f"{type(tokenizer).__name__} has no mask token, so masked-LM scoring is impossible")
    distinct = list(dict.fromkeys(texts))
    ids = tokenizer(distinct, add_special_tokens=True)["input_ids"] if distinct else []
    context = model_context(model)
    where = []
    for text, row in zip(distinct, ids):
        found = [i for i, token in enumerate(row) if token == mask]
        if not found or (len(found) > 1 and not first_mask):
            raise UserError(f"a masked-LM query must hold exactly one mask token, {len(found)} in {text[:60]!r}")
        if len(row) > context:
            raise UserError(f"a text is {len(row)} tokens long, over the model's context of {context}: {text[:60]!r}")
        where.append(found[0])
    wanted: list[list[int]] = [[] for _ in distinct]
    row_of = {text: k for k, text in enumerate(distinct)}
    for query, text in enumerate(texts):
        wanted[row_of[text]].append(query)
    device = next(model.parameters()).device
    pad = padding_id(tokenizer)

    def fill_batch(batch: list[int]) -> list[np.ndarray]:
        """For each distinct text of the batch, the probabilities of the targets its queries ask for."""
        input_ids, attention = right_pad([ids[k] for k in batch], pad)
        logits = model(input_ids=input_ids.to(device), attention_mask=attention.to(device)).logits
        at_mask = logits[torch.arange(len(batch), device=device), torch.tensor([where[k] for k in batch], device=device)]
        probs = torch.softmax(at_mask.float(), dim=-1).double().cpu().numpy()
        return [probs[j, [targets[q] for q in wanted[k]]] for j, k in enumerate(batch)]

    out = np.zeros(len(texts), dtype=np.float64)
    done = run_batches(length_batches([len(row) for row in ids], batch_size), fill_batch, desc, progress)
    for k, probs in done.items():
        out[wanted[k]] = probs
    return out
