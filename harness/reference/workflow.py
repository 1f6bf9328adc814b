"""`membench run`: the default job on the built-in reference checkpoints."""

from __future__ import annotations

from pathlib import Path

from harness.models import ModelSpec
from harness.reference.build import build, checkpoint_folders, reference_builds
from harness.reference.ner_build import NerBuildConfig, build_ner
from harness.reference.t5_build import T5BuildConfig, build_t5
from harness.runner import EvaluateOptions, evaluate
from harness.task import discover
from leaderboard.build import write_board


def reference_folders(quick: bool = False) -> list[tuple[object, Path]]:
    """Build (if missing) every reference build; (its config, its folder) for each: the causal
    LMs of `reference_builds`, the NER token classifier and the T5 models."""
    ner, t5 = NerBuildConfig(), T5BuildConfig()
    return ([(config, build(config)) for config in reference_builds(quick)]
            + [(ner, build_ner(ner)), (t5, build_t5(t5))])


def run_reference_job(submissions: Path, board: Path, batch_size: int = 16, device: str = "auto",
                      quick: bool = False, use_cache: bool = True) -> list[Path]:
    """Build the reference checkpoints if missing, evaluate on each checkpoint the tasks its build
    is a control for (its config's `TASKS` and `task_settings`, also in the manifest: corpus and language,
    names, CPU-sized fine-tuning), write one results file per checkpoint into `submissions`, and
    regenerate the board."""
    registry = discover()
    options = EvaluateOptions(output_path=submissions, batch_size=batch_size, use_cache=use_cache)
    written = []
    for config, folder in reference_folders(quick):
        tasks = [registry[name] for name in config.TASKS if name in registry]
        fields = {name for task in tasks for name in task.Config.model_fields}
        settings = {k: v for k, v in config.task_settings().items() if k in fields}
        for checkpoint in checkpoint_folders(folder):
            spec = ModelSpec(model=str(checkpoint), device=device, name=f"membench-ref/{checkpoint.name}")
            written.append(evaluate(spec, tasks, settings, options))
    write_board(submissions, board)
    return written + [board]
