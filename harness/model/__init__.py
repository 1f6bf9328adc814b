"""Checkpoints: loading one safely with its kind detected (`loading`), its identity as sha256
(`identity`) and pruning it (`prune`); a model served by an OpenAI-compatible server such as vLLM,
reached over HTTP for prompt log-probs and generations (`served`).

May import: `harness.core`, `harness.files`.
"""
