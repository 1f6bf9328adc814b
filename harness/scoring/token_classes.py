"""Batched token-classification scoring: class probabilities of the subword tokens of a text span.

`span_label_probs` runs a token classifier (an NER model) over sentences and returns, for each
sentence, softmax(logits)[token, label] for every subword token that overlaps a given character
span (the tokens of a person name, say) and every requested label id.
- Token-to-character alignment comes from the fast tokenizer's offset mapping (`harness.scoring.spans`);
  special tokens ([CLS], [SEP], <s>, ...) never belong to a span.
- Each distinct (text, span) is run once. Texts are sorted by token length and right-padded in
  batches with the padding masked, so a text's probabilities do not depend on its batch; a batch
  holds as many texts as fill `batch_size` texts of the model's full context
  (`spans.context_batches`: NER prompt sentences are short, so a batch holds a few hundred).
- The softmax is taken in float64 from the model's logits (upcast first): in float32 every
  probability above 1 - 2^-24 rounds to 1.0, so two names a confident model tells apart by
  1 - 1e-9 and 1 - 1e-8 would tie.
"""

from __future__ import annotations

import numpy as np
import torch

from harness.scoring.batching import model_context, padding_id, right_pad
from harness.scoring.distributed import run_batches
from harness.scoring.spans import align_spans, context_batches


@torch.no_grad()
def span_label_probs(model, tokenizer, texts: list[str], spans: list[tuple[int, int]], labels: list[int],
                     batch_size: int = 64, progress: bool | None = None, desc: str = "classifying") -> list[np.ndarray]:
    """Per text, a float64 array (tokens of its span, len(labels)) of softmax probabilities of `labels`.

    `spans[i]` is the character range [start, end) in `texts[i]`. A text longer than the model's
    context, or a span that covers no token, is a `UserError`.
    """
    distinct = list(dict.fromkeys(zip(texts, spans)))
    if not distinct:
        return []
    context = model_context(model)
    ids, positions = align_spans(tokenizer, [text for text, _ in distinct], [[span] for _, span in distinct], context)
    positions = [found[0] for found in positions]
    device = next(model.parameters()).device
    pad = padding_id(tokenizer)
    wanted = torch.tensor(labels)
    batches = context_batches([len(row) for row in ids], batch_size, context)

    def classify_batch(batch: list[int]) -> list[np.ndarray]:
        input_ids, attention = right_pad([ids[k] for k in batch], pad)
        logits = model(input_ids=input_ids.to(device), attention_mask=attention.to(device)).logits
        rows = np.concatenate([np.full(len(positions[k]), j) for j, k in enumerate(batch)])
        cols = np.concatenate([positions[k] for k in batch])
        picked = logits[torch.from_numpy(rows).to(device), torch.from_numpy(cols).to(device)]
        # float64 on the CPU (some accelerators have no float64): see the module docstring
        probs = torch.softmax(picked.cpu().double(), dim=-1)[:, wanted].numpy()
        ends = np.cumsum([len(positions[k]) for k in batch])
        return [probs[end - len(positions[k]):end] for k, end in zip(batch, ends)]

    results = run_batches(batches, classify_batch, desc, progress)
    index = {key: k for k, key in enumerate(distinct)}
    return [results[index[key]] for key in zip(texts, spans)]
