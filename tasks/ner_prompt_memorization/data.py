"""Name pairs and prompts of the task.

Names: `reference` (the reference NER model's in-train and out-train names, rebuilt from its seed)
or a JSON file in the paper's layout: {"dev": {"in_train": [...], "out_train": [...]},
"test": {...}} (other keys, such as the paper's prompt lists, are ignored). Prompts: see prompts.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.errors import UserError
from harness.io import parse_json_object, read_utf8
from tasks.ner_prompt_memorization.prompts import SLOT, PromptSet, load_prompts

SPLITS = ("dev", "test")
SIDES = ("in_train", "out_train")


@dataclass(frozen=True)
class NameSplits:
    """In-train and out-train names of the dev and test splits: names[split][side]."""

    names: dict[str, dict[str, tuple[str, ...]]]
    source: str

    def all_names(self) -> list[str]:
        """Every distinct name, in file order."""
        return list(dict.fromkeys(n for split in SPLITS for side in SIDES for n in self.names[split][side]))


@dataclass(frozen=True)
class NerData:
    names: NameSplits
    prompts: PromptSet


def _names_from_layout(raw: dict, origin: str, limit: int | None) -> dict[str, dict[str, tuple[str, ...]]]:
    names: dict[str, dict[str, tuple[str, ...]]] = {}
    for split in SPLITS:
        part = raw.get(split)
        if not isinstance(part, dict):
            raise UserError(f"{origin}: expected a {split!r} object with 'in_train' and 'out_train' lists")
        names[split] = {}
        for side in SIDES:
            values = part.get(side)
            if not isinstance(values, list) or not values or not all(isinstance(v, str) and v.strip() for v in values):
                raise UserError(f"{origin}: {split}.{side} must be a non-empty list of names")
            cleaned = tuple(dict.fromkeys(" ".join(v.split()) for v in values))[:limit]
            if any(SLOT in v for v in cleaned):
                raise UserError(f"{origin}: {split}.{side}: a name contains the slot word {SLOT}")
            names[split][side] = cleaned
        both = set(names[split]["in_train"]) & set(names[split]["out_train"])
        if both:
            raise UserError(f"{origin}: {split}: {sorted(both)[0]!r} is both in-train and out-train")
    return names


def load_names(spec: str, limit: int | None) -> NameSplits:
    """`reference`, or a JSON file in the paper's layout; `limit` keeps the first names of each list."""
    from harness.reference.ner_build import NerBuildConfig
    from harness.reference.ner_data import REFERENCE_NAMES

    if spec == REFERENCE_NAMES:
        layout = NerBuildConfig().names().as_layout()
        return NameSplits(_names_from_layout(layout, "reference names", limit),
                          "reference NER names (faker en_US, seed 0; harness/reference/ner_data.py)")
    path = Path(spec).expanduser()
    if not path.is_file():
        raise UserError(f"name file not found: {spec}")
    raw = parse_json_object(read_utf8(path), str(path))
    return NameSplits(_names_from_layout(raw, str(path), limit), str(path))


def load_ner_data(names: str, prompts: str, limit: int | None) -> NerData:
    return NerData(load_names(names, limit), load_prompts(prompts))
