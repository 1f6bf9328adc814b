"""membench's headline metrics as Hugging Face `evaluate` metric modules.

Each module is a folder `<name>/` holding `<name>.py` (what `evaluate.load` runs) and `README.md`
(its metric card). The scripts wrap `harness.metrics.memorization` and `harness.metrics.bias`, so they give the
numbers membench's tasks report. Usage::

    import evaluate
    from harness.interop.evaluate_modules import module_path
    membership = evaluate.load(module_path("membench_membership"))
"""

from __future__ import annotations

from pathlib import Path

MODULES: tuple[str, ...] = ("membench_membership", "membench_memorization", "membench_stereoset")


def module_path(name: str) -> str:
    """Absolute path of the folder of the metric module `name`, for `evaluate.load`."""
    if name not in MODULES:
        raise ValueError(f"unknown membench evaluate module {name!r}; known: {', '.join(MODULES)}")
    return str(Path(__file__).resolve().parent / name)
