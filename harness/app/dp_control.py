"""`membench reference dp-control`: privacy_extraction's DP control pair, as committed results files (issue 76).

The shipped reference GPT-2 `xsum-gpt2-e30`, fine-tuned on small task sets (10 unique strings, 10 persons,
10 held out) with 1,000 audit canaries, every weight at 1e-3, one fine-tuning seed, evaluated after 4 and 8
epochs: once without DP (`membench-ref/xsum-gpt2-e30-audit`, with the canaries' extraction probabilities) and
once with DP-SGD at a claimed epsilon of 8 (`membench-ref/xsum-gpt2-e30-audit-dp8`, no extraction: DP's
per-row gradients are the cost). Each is a reference control (its results file records the build's recipe),
written into the submissions folder. `membench run` does not run them again (about 2 minutes of its 15):
it checks their expectations on the committed files (`controls.DP_CONTROL_EXPECTATIONS`).
"""

from __future__ import annotations

from pathlib import Path

from harness.app.job import evaluate_reported
from harness.app.parser import JOB_BATCH_SIZE
from harness.app.registry import discover
from harness.core.errors import UserError
from harness.core.io import check_writable_cache, check_writable_folder
from harness.core.results import ResultsFile
from harness.core.task import parse_settings
from harness.model.loading import ModelSpec
from harness.reference.build import checkpoint_folders, reference_builds
from harness.reference.controls import DP_CONTROL_CHECKPOINT, DP_CONTROL_DP, DP_CONTROL_NONE, REFERENCE_PREFIX
from harness.reference.shipped import shipped_folder
from harness.run.runner import EvaluateOptions

TASK = "privacy_extraction"
# the settings both runs share (the bench_dp_audit runs `gpt2-full-none` and `gpt2-full-dp8`, one seed)
SETTINGS = {"n_unique": "10", "n_persons": "10", "n_heldout_persons": "10", "audit_canaries": "1000",
            "epochs": "4,8", "learning_rate": "1e-3", "finetune_seeds": "1"}
# (control name, settings added): without DP, and with DP-SGD at epsilon 8 (no extraction probabilities)
RUNS = ((DP_CONTROL_NONE, {}), (DP_CONTROL_DP, {"dp_epsilon": "8", "extraction": "false"}))


def dp_control_checkpoint() -> tuple[Path, tuple[str, str]]:
    """The shipped `xsum-gpt2-e30` folder and its build's (name, recipe digest); a `UserError` when the
    English member build is not shipped (a recipe changed since the weights were shipped)."""
    config = next(c for c in reference_builds() if c.name == "xsum-gpt2")
    folder = shipped_folder(config.folder_name())
    if folder is None:
        raise UserError(f"reference dp-control: no shipped weights of {config.name} recipe {config.digest()} "
                        "(ship the builds first: `membench reference build --ship`)")
    [checkpoint] = [path for path in checkpoint_folders(folder) if path.name == DP_CONTROL_CHECKPOINT]
    return checkpoint, (config.name, config.digest())


def run_dp_controls(submissions: Path, device: str = "auto") -> list[tuple[Path, ResultsFile]]:
    """Both runs of the pair into `submissions` (each file named after its run and settings, replacing an
    earlier one of the same settings): (results file, contents) per run."""
    check_writable_folder(submissions, f"--submissions {submissions}")
    check_writable_cache()
    checkpoint, recipe = dp_control_checkpoint()
    task = discover()[TASK]
    options = EvaluateOptions(output_path=submissions, batch_size=JOB_BATCH_SIZE, cpu_batch_size=JOB_BATCH_SIZE)
    written = []
    for name, extra in RUNS:
        spec = ModelSpec(model=str(checkpoint), device=device, name=f"{REFERENCE_PREFIX}{name}", reference_recipe=recipe)
        written.append(evaluate_reported(spec, [task], parse_settings([task], SETTINGS | extra), options))
    return written
