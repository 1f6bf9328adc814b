"""`membench run`: the default job on the built-in reference checkpoints."""

from __future__ import annotations

from pathlib import Path

from harness.models import ModelSpec
from harness.reference.build import build, checkpoint_folders, read_manifest, reference_builds
from harness.reference.ner_build import build_ner
from harness.runner import EvaluateOptions, evaluate
from harness.task import discover
from leaderboard.build import write_board


def reference_folders(quick: bool = False) -> list[Path]:
    """Build (if missing) every reference build and return their folders: the causal LMs of
    `reference_builds` and the NER token classifier."""
    return [build(config) for config in reference_builds(quick)] + [build_ner()]


def run_reference_job(submissions: Path, board: Path, batch_size: int = 16, device: str = "auto",
                      quick: bool = False, use_cache: bool = True) -> list[Path]:
    """Build the reference checkpoints if missing, evaluate every registered task on each (with
    the task settings of its build: its corpus and language, or its names), write one results
    file per checkpoint into `submissions`, and regenerate the board."""
    tasks = list(discover().values())
    fields = {name for task in tasks for name in task.Config.model_fields}
    options = EvaluateOptions(output_path=submissions, batch_size=batch_size, use_cache=use_cache)
    written = []
    for folder in reference_folders(quick):
        settings = {k: v for k, v in read_manifest(folder)["task_settings"].items() if k in fields}
        for checkpoint in checkpoint_folders(folder):
            spec = ModelSpec(model=str(checkpoint), device=device, name=f"membench-ref/{checkpoint.name}")
            written.append(evaluate(spec, tasks, settings, options))
    write_board(submissions, board)
    return written + [board]
