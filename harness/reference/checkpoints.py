"""`reference:<checkpoint>`: a built reference checkpoint named where a model id or path is taken.

Task settings that name another model (mink_membership's `--reference-model`, `--neighbour-model`)
take `reference:xsum-gpt2-outside-e05` or `reference:mlm-bert-e05`, so a results file records the
same setting on every machine, not a path into one machine's cache.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.errors import UserError
from harness.reference.corpus import REFERENCE

PREFIX = REFERENCE + ":"


def built_checkpoints() -> dict[str, Path]:
    """Every checkpoint of the reference builds, by its folder name: the shipped builds
    (`shipped`, verified) first, then those built in the cache (full recipes first, then the
    quick ones); the first build holding a name wins, so every machine resolves a name to the
    same shipped weights."""
    from harness.reference.build import MANIFEST, read_manifest
    from harness.reference.recipes import reference_recipes
    from harness.reference.shipped import shipped_folder

    recipes = [config for quick in (False, True) for config, _ in reference_recipes(quick)]
    folders = [shipped_folder(config.folder_name()) for config in recipes] + [c.default_folder() for c in recipes]
    found: dict[str, Path] = {}
    for folder in folders:
        if folder is None or not (folder / MANIFEST).is_file():
            continue
        for checkpoint in read_manifest(folder)["checkpoints"]:
            path = folder / checkpoint["folder"]
            if (path / "config.json").is_file():
                found.setdefault(checkpoint["folder"], path)
    return found


def resolve_reference_model(model: str) -> str:
    """The folder of the built reference checkpoint `reference:<name>` names; any other model id or
    path unchanged. A `UserError` when that checkpoint is not built."""
    if not model.startswith(PREFIX):
        return model
    name = model[len(PREFIX):]
    built = built_checkpoints()
    if name not in built:
        known = ", ".join(sorted(built)) or "none is built"
        raise UserError(f"{model}: no such reference checkpoint is built (build them with `membench reference "
                        f"build`; built: {known})")
    return str(built[name])
