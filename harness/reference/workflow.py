"""`membench run`: the default job on the built-in reference checkpoints."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.models import ModelSpec
from harness.reference.build import build, checkpoint_folders, reference_builds
from harness.reference.mlm_build import MlmBuildConfig, build_mlm
from harness.reference.ner_build import NerBuildConfig, build_ner
from harness.reference.pretrained import MINILM_TASKS, minilm_folder
from harness.reference.t5_build import T5BuildConfig, build_t5
from harness.runner import EvaluateOptions, evaluate
from harness.task import discover
from leaderboard.build import write_board


@dataclass(frozen=True)
class PretrainedEncoder:
    """The real pretrained encoder all-MiniLM-L6-v2 (`pretrained.MINILM`), scored as it is."""

    name: str = "sentence-transformers/all-MiniLM-L6-v2"
    TASKS = MINILM_TASKS

    def task_settings(self) -> dict[str, str]:
        return {}


def reference_checkpoints(quick: bool = False) -> list[tuple[object, list[Path]]]:
    """Build (if missing) every reference build and fetch the pretrained encoder; (its config, its
    checkpoint folders) for each: the causal LMs of `reference_builds`, the NER token classifier,
    the T5 models, the masked LM and all-MiniLM-L6-v2."""
    ner, t5, mlm = NerBuildConfig(), T5BuildConfig(), MlmBuildConfig()
    built = ([(config, build(config)) for config in reference_builds(quick)]
             + [(ner, build_ner(ner)), (t5, build_t5(t5)), (mlm, build_mlm(mlm))])
    return [(config, checkpoint_folders(folder)) for config, folder in built] + [(PretrainedEncoder(), [minilm_folder()])]


def run_reference_job(submissions: Path, board: Path, batch_size: int = 16, device: str = "auto",
                      quick: bool = False, use_cache: bool = True) -> list[Path]:
    """Build the reference checkpoints if missing, evaluate on each checkpoint the tasks its build
    is a control for (its config's `TASKS` and `task_settings`, also in the manifest: corpus and language,
    names, CPU-sized fine-tuning), write one results file per checkpoint into `submissions`, and
    regenerate the board."""
    registry = discover()
    options = EvaluateOptions(output_path=submissions, batch_size=batch_size, use_cache=use_cache)
    written = []
    for config, checkpoints in reference_checkpoints(quick):
        tasks = [registry[name] for name in config.TASKS if name in registry]
        fields = {name for task in tasks for name in task.Config.model_fields}
        settings = {k: v for k, v in config.task_settings().items() if k in fields}
        for checkpoint in checkpoints:
            name = config.name if isinstance(config, PretrainedEncoder) else f"membench-ref/{checkpoint.name}"
            spec = ModelSpec(model=str(checkpoint), device=device, name=name)
            written.append(evaluate(spec, tasks, settings, options))
    write_board(submissions, board)
    return written + [board]
