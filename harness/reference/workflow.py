"""`membench run`: the default job on the built-in reference checkpoints."""

from __future__ import annotations

from pathlib import Path

from harness.models import ModelSpec
from harness.reference.build import BuildConfig, build, checkpoint_folders, quick_config
from harness.runner import EvaluateOptions, evaluate
from harness.task import discover
from leaderboard.build import write_board


def run_reference_job(submissions: Path, board: Path, batch_size: int = 16, device: str = "auto",
                      quick: bool = False, use_cache: bool = True) -> list[Path]:
    """Build the reference checkpoints if missing, evaluate every registered task on each, write
    one results file per checkpoint into `submissions`, and regenerate the board."""
    folder = build(quick_config() if quick else BuildConfig())
    tasks = list(discover().values())
    options = EvaluateOptions(output_path=submissions, batch_size=batch_size, use_cache=use_cache)
    written = []
    for checkpoint in checkpoint_folders(folder):
        spec = ModelSpec(model=str(checkpoint), device=device, name=f"membench-ref/{checkpoint.name}")
        written.append(evaluate(spec, tasks, {}, options))
    write_board(submissions, board)
    return written + [board]
