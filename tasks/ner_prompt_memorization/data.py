"""Name pairs and prompts of the task.

Names: `reference` (the reference NER model's in-train and out-train person names, rebuilt from
its seed; the out-train words never occur in training), `reference:shared` (the same in-train names
against out-train names recombined from the in-train names' own words) or a JSON file in the
paper's layout: {"dev": {"in_train": [...], "out_train": [...]}, "test": {...}} (other keys, such
as the paper's prompt lists, are ignored), optionally with
"entity_type" (see entities.py). Whitespace is normalized; a name repeated in one list is scored
once, and the repeats are counted and logged as a warning. Prompts: see prompts.py.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import UserError
from harness.core.io import SETTINGS_MAX_BYTES, parse_json_object, read_utf8
from tasks.ner_prompt_memorization.entities import check_type
from tasks.ner_prompt_memorization.prompts import SLOT, PromptSet, load_prompts

log = logging.getLogger(__name__)
SPLITS = ("dev", "test")
SIDES = ("in_train", "out_train")


@dataclass(frozen=True)
class NameSplits:
    """In-train and out-train names of the dev and test splits: names[split][side]."""

    names: dict[str, dict[str, tuple[str, ...]]]
    source: str
    # "split.side" -> {name: times it occurs} for the names a list holds more than once
    duplicates: dict[str, dict[str, int]] = field(default_factory=dict)

    def n_repeats(self) -> int:
        """Entries dropped as repeats of a name earlier in the same list."""
        return sum(times - 1 for repeated in self.duplicates.values() for times in repeated.values())

    def all_names(self) -> list[str]:
        """Every distinct name, in file order."""
        return list(dict.fromkeys(n for split in SPLITS for side in SIDES for n in self.names[split][side]))


@dataclass(frozen=True)
class NerData:
    names: NameSplits
    prompts: PromptSet


def _names_from_layout(raw: dict, origin: str, limit: int | None) -> NameSplits:
    """The four lists, each normalized, deduplicated (repeats counted over the whole list) and cut to `limit`."""
    names: dict[str, dict[str, tuple[str, ...]]] = {}
    duplicates: dict[str, dict[str, int]] = {}
    for split in SPLITS:
        part = raw.get(split)
        if not isinstance(part, dict):
            raise UserError(f"{origin}: expected a {split!r} object with 'in_train' and 'out_train' lists")
        names[split] = {}
        for side in SIDES:
            values = part.get(side)
            if not isinstance(values, list) or not values or not all(isinstance(v, str) and v.strip() for v in values):
                raise UserError(f"{origin}: {split}.{side} must be a non-empty list of names")
            counts = Counter(" ".join(v.split()) for v in values)
            cleaned = tuple(counts)[:limit]
            if any(times > 1 for times in counts.values()):
                duplicates[f"{split}.{side}"] = {name: times for name, times in counts.items() if times > 1}
            if any(SLOT in v for v in cleaned):
                raise UserError(f"{origin}: {split}.{side}: a name contains the slot word {SLOT}")
            names[split][side] = cleaned
        both = set(names[split]["in_train"]) & set(names[split]["out_train"])
        if both:
            raise UserError(f"{origin}: {split}: {sorted(both)[0]!r} is both in-train and out-train")
    splits = NameSplits(names, origin, duplicates)
    if duplicates:
        shown = "; ".join(f"{key}: {', '.join(f'{n!r} x{t}' for n, t in repeated.items())}"
                          for key, repeated in duplicates.items())
        log.warning("%s: %d repeated names, each scored once (%s)", origin, splits.n_repeats(), shown)
    return splits


def load_names(spec: str, limit: int | None, entity_type: str = "PER") -> NameSplits:
    """`reference` or `reference:shared` (person names), or a JSON file in the paper's layout whose
    declared entity type (if any) is `entity_type`; `limit` keeps the first names of each list."""
    from harness.reference.ner_build import NerBuildConfig
    from harness.reference.ner_data import REFERENCE_NAMES, SHARED_NAMES

    if spec in (REFERENCE_NAMES, SHARED_NAMES):
        if entity_type != "PER":
            raise UserError(f"--names {spec} holds person names (PER); for --entity-type {entity_type} "
                            f"give a names file")
        names = NerBuildConfig().names()
        shared = spec == SHARED_NAMES
        splits = _names_from_layout((names.shared_words() if shared else names).as_layout(), f"{spec} names", limit)
        out_train = ("out-train names recombined from the in-train names' words" if shared
                     else "out-train words never in training")
        return NameSplits(splits.names, f"reference NER names (faker en_US, seed 0; {out_train}; "
                          f"harness/reference/ner_data.py)", splits.duplicates)
    path = Path(spec).expanduser()
    if not path.exists():  # a folder or device: read_utf8 says what it is
        raise UserError(f"name file not found: {spec}")
    raw = parse_json_object(read_utf8(path, SETTINGS_MAX_BYTES, "names file"), str(path))
    check_type(raw, path, entity_type, "names")
    return _names_from_layout(raw, str(path), limit)


def load_ner_data(names: str, prompts: str, limit: int | None, entity_type: str = "PER") -> NerData:
    return NerData(load_names(names, limit, entity_type), load_prompts(prompts, entity_type))
