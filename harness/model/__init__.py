"""Checkpoints: loading one safely with its kind detected (`loading`), its identity as sha256
(`identity`) and pruning it (`prune`).

May import: `harness.core`, `harness.files`.
"""
