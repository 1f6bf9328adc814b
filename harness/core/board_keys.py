"""What tells two models apart in results file names, on the board and for `membench run`.

board_key(model) = the recipe digest of a built-in reference checkpoint
                   (`details.reference_recipe`), else the model's full identity;
model_key(results) = (board_key(results.model), results.model.name).
"""

from __future__ import annotations

import re

from harness.core.results import ModelInfo, ResultsFile


def board_key(model: ModelInfo) -> str:
    """The key that tells models apart in results file names and on the leaderboard.

    Schema 2 files: the full model identity, or for a built-in reference checkpoint the digest of
    its build recipe (`details.reference_recipe`: what decides its weights, so a run on another
    machine replaces its results rather than adding a row); schema 1 files: the identity they
    recorded (the weights sha256 or hub commit)."""
    recipe = model.details.get("reference_recipe")
    if isinstance(recipe, dict) and re.fullmatch(r"[0-9a-f]{6,64}", str(recipe.get("digest"))):
        return recipe["digest"]
    return model.identity


def model_key(results: ResultsFile) -> tuple[str, str]:
    """(board key, model name): what tells two models apart on the board. The checkpoints of one
    build share its recipe digest and differ by name, so the name is part of the key; it also keeps
    apart, in schema 1 files (whose identity was the weights alone), equal weights under two names."""
    return board_key(results.model), results.model.name
