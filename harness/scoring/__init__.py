"""Batched scoring primitives: length-sorted, padding-masked, each returning plain arrays.

`batching` (padding, context window), `causal` (per-token log-probabilities), `conditional`
(seq2seq and prefix-conditioned targets), `masked` (fill probabilities), `generation` (greedy
continuations), `token_classes` (token-classifier probabilities per word), `representations`
(hidden states pooled to words or sentences), `gradients` (per-text gradient norms), `spans`
(word spans to tokens), `text` (word splitting) and `distributed` (batches shared by data-parallel
processes).

May import: `harness.core`, `harness.files`, `harness.metrics`, `harness.model`.
"""
