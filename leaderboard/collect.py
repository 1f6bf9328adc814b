"""Read every results file of a folder and pick, per (model, task), the newest run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from harness.core.board_keys import model_key
from harness.core.errors import UserError
from harness.core.results import ResultsFile, TaskEntry, load_results


# Tasks whose members are the reference split's: known only for the reference checkpoints trained on it.
NULL_ON_REFERENCE = ("mink_membership", "paywall_memorization")


@dataclass(frozen=True)
class BoardEntry:
    """The newest run of one task on one model, and how many runs of it exist."""

    model_name: str
    model_identity: str
    model_kind: str
    entry: TaskEntry
    runs: int
    sparsity: float | None = None  # share of zero parameters of a pruned model (`membench prune`)
    limit: int | None = None  # the run's `--limit` (`run.limit`): None for a full run
    file: str = ""  # the name of the results file the entry comes from
    # A reference control, not a contestant (`is_control`): the board shows it apart from the real models.
    control: bool = False
    created_at: datetime | None = None  # when the results file was written (`ResultsFile.created_at`)
    # Scored through a completions server (`model.identity_kind` "served"): its weights were not hashed.
    served: bool = False

    @property
    def null_control(self) -> bool:
        """A real model's membership or memorization run on a reference split (`NULL_ON_REFERENCE`):
        membership that only the reference checkpoints were trained on, so the model cannot tell the
        halves apart and the number is a null (AUC 0.5, members = non-members), a control, not a
        measure of the model. Its memorization with known truth is finetune_memorization's."""
        return (not self.control and self.entry.name in NULL_ON_REFERENCE
                and str(self.entry.config.get("data", "")).startswith("reference"))

    @property
    def changed_settings(self) -> list[str]:
        """The settings of a real model's run that differ from the task's defaults (`TaskEntry.changed_settings`),
        each as `name=value`, which the board marks; [] for a control (run at the settings its job chose
        on purpose) and where the file does not say."""
        return [] if self.control else [self.setting(name) for name in self.entry.changed_settings or []]

    def setting(self, name: str) -> str:
        """`name=value` as the run's config holds it (a list joined by commas); the name alone when
        the config does not hold it."""
        if name not in self.entry.config:
            return name
        value = self.entry.config[name]
        return f"{name}={','.join(map(str, value)) if isinstance(value, (list, tuple)) else value}"


def read_submissions(folder: Path) -> list[tuple[Path, ResultsFile]]:
    """Every `*.json` in `folder`, validated, sorted by file name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"submissions folder not found: {folder}")
    return [(path, load_results(path)) for path in sorted(folder.glob("*.json"))]


def sparsity(results: ResultsFile) -> float | None:
    """The share of zero parameters `membench prune` recorded (`model.details.pruning`); None
    for a model it did not prune, and for anything but a number from 0 to 1 (details are free-form)."""
    pruning = results.model.details.get("pruning")
    value = pruning.get("parameter_sparsity") if isinstance(pruning, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        return None
    return float(value)


CONTROL_DETAILS = ("reference_recipe", "random_weights")


def is_control(results: ResultsFile) -> bool:
    """True for a reference control: a checkpoint membench built itself from a recipe, with known
    membership and bias (`model.details.reference_recipe`), or the seeded untrained twin of a
    checkpoint (`membench evaluate --random-weights`, `model.details.random_weights`). Controls are
    the benchmark's self-test, whose expected directions `membench run` checks (more epochs, more
    memorization; untrained at chance), not contestants: the board shows them apart from real models."""
    return any(key in results.model.details for key in CONTROL_DETAILS)


def newest_entries(files: list[tuple[Path, ResultsFile]]) -> list[BoardEntry]:
    """One entry per (board key, model name, task): the newest by created_at, then by file name.

    The board key (`harness.core.board_keys.board_key`) is the model's full identity, so equal weights
    with another tokenizer, config or kind are another model. The name is part of the key too, so
    that schema 1 files (whose identity was the weights alone) keep such models apart."""
    runs: dict[tuple[str, str, str], list[tuple[str, str, ResultsFile, TaskEntry]]] = {}
    for path, results in files:
        for entry in results.tasks:
            key = (*model_key(results), entry.name)
            runs.setdefault(key, []).append((results.created_at, path.name, results, entry))
    board = []
    for (identity, _, _), candidates in runs.items():
        _, file_name, results, entry = max(candidates, key=lambda c: (c[0], c[1]))
        board.append(BoardEntry(results.model.name, identity, results.model.kind, entry, len(candidates),
                                sparsity(results), results.run.limit, file_name, is_control(results),
                                results.created_at, results.model.identity_kind == "served"))
    return sorted(board, key=lambda b: (b.entry.name, b.model_name, b.model_identity))
