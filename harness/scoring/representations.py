"""Vectors of text spans from a model: static (input embeddings) or contextual (hidden states).

- Static: the rows of the model's input embedding matrix for the span's subword tokens, as the
  text tokenizes them, pooled. No forward pass; position embeddings are not added.
- Contextual: the hidden states of one layer at the span's tokens, pooled. `layer` indexes the
  model's `hidden_states` tuple: 0 is the embedding layer's output, -1 (default) the last layer.
  Encoders, masked LMs, token classifiers and causal LMs run their base model (no LM head);
  encoder-decoder models (T5, BART, T5EncoderModel) run their encoder only. A causal LM reads
  [BOS] + the text's tokens (`harness.scoring.causal.causal_start_token`, the rule its scores follow);
  the other kinds read the text with the tokenizer's special tokens ([CLS] ... [SEP]).
- Pooling: `mean` over the span's tokens, or `first` (the span's first subword token).
Spans are aligned to tokens by character offsets (`harness.scoring.spans`); special tokens never belong
to a span. A span covering a whole text gives a sentence vector (the mean pooling of SEAT, May et
al. 2019). Each distinct text is run once, in length-sorted, right-padded batches with the padding
masked, so a vector does not depend on its batch.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from harness.core.errors import UserError
from harness.core.model_types import ModelKind
from harness.model.loading import text_config
from harness.scoring.batching import model_context, padding_id, right_pad
from harness.scoring.causal import causal_start_token
from harness.scoring.distributed import run_batches
from harness.scoring.spans import Span, align_spans, length_batches

# The model kinds whose word vectors these functions read (token classifiers would work too, but
# no task asks for them).
WORD_VECTOR_KINDS = frozenset({ModelKind.ENCODER, ModelKind.MASKED_LM, ModelKind.CAUSAL_LM, ModelKind.SEQ2SEQ})

Pooling = Literal["mean", "first"]
POOLINGS = ("mean", "first")


def _pool(vectors: torch.Tensor, positions: list[np.ndarray], pooling: Pooling) -> np.ndarray:
    """(spans, width) float32: each span's rows of `vectors` (tokens, width) pooled."""
    if pooling not in POOLINGS:
        raise UserError(f"unknown pooling {pooling!r}; choose {' or '.join(POOLINGS)}")
    pooled = [vectors[torch.from_numpy(where[:1] if pooling == "first" else where).to(vectors.device)].mean(0)
              for where in positions]
    return torch.stack(pooled).float().cpu().numpy()


@torch.no_grad()
def static_span_vectors(model, tokenizer, texts: list[str], spans: list[list[Span]],
                        pooling: Pooling = "mean") -> list[np.ndarray]:
    """Per text, an array (its spans, embedding width) of pooled input-embedding rows."""
    ids, positions = align_spans(tokenizer, texts, spans, model_context(model))
    table = model.get_input_embeddings().weight
    return [_pool(table[torch.tensor(row, device=table.device)], found, pooling) if found
            else np.zeros((0, table.shape[1]), dtype=np.float32)
            for row, found in zip(ids, positions)]


def hidden_state_module(model):
    """The module whose `hidden_states` are read: the encoder of an encoder-decoder model (T5, BART,
    and a T5EncoderModel), else the base model without its head (for a multimodal wrapper, the
    model whose text part runs on text alone)."""
    if getattr(model.config, "is_encoder_decoder", False):
        return model.get_encoder()
    return model.base_model


def hidden_layer_count(model, kind: ModelKind) -> int:
    """How many entries the model's `hidden_states` has: its layers plus the embedding output."""
    config = text_config(model.config)
    if getattr(config, "is_encoder_decoder", False):
        layers = getattr(config, "encoder_layers", None) or getattr(config, "num_layers", None)
    else:
        layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    if not isinstance(layers, int):
        raise UserError(f"cannot tell how many layers a {type(model).__name__} has")
    return layers + 1


def check_layer(model, kind: ModelKind, layer: int) -> int:
    """`layer` as a non-negative index into `hidden_states`; a `UserError` when out of range."""
    count = hidden_layer_count(model, kind)
    if not -count <= layer < count:
        raise UserError(f"layer {layer} does not exist: the model has hidden states 0..{count - 1} "
                        f"(0 = embeddings; negative values count from the last)")
    return layer % count


@torch.no_grad()
def contextual_span_vectors(model, kind: ModelKind, tokenizer, texts: list[str], spans: list[list[Span]],
                            layer: int = -1, pooling: Pooling = "mean", batch_size: int = 32,
                            progress: bool | None = None, desc: str = "hidden states") -> list[np.ndarray]:
    """Per text, an array (its spans, hidden width) of one layer's hidden states pooled over each span."""
    index = check_layer(model, kind, layer)
    keys = [(text, tuple(text_spans)) for text, text_spans in zip(texts, spans)]
    distinct = list(dict.fromkeys(keys))
    start = causal_start_token(tokenizer) if kind is ModelKind.CAUSAL_LM else None
    ids, positions = align_spans(tokenizer, [text for text, _ in distinct], [list(s) for _, s in distinct],
                                 model_context(model), start)
    body = hidden_state_module(model)
    device = next(model.parameters()).device
    pad = padding_id(tokenizer)

    def pool_batch(batch: list[int]) -> list[np.ndarray]:
        input_ids, attention = right_pad([ids[k] for k in batch], pad)
        states = body(input_ids=input_ids.to(device), attention_mask=attention.to(device),
                      output_hidden_states=True).hidden_states[index]
        return [_pool(states[j], positions[k], pooling) if positions[k]
                else np.zeros((0, states.shape[-1]), dtype=np.float32) for j, k in enumerate(batch)]

    out = run_batches(length_batches([len(row) for row in ids], batch_size), pool_batch, desc, progress)
    where = {key: k for k, key in enumerate(distinct)}
    return [out[where[key]] for key in keys]
