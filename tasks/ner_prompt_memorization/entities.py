"""Entity types: the labels a model marks them with, and the type a data file says it holds.

Xia et al. 2024 released one file per entity type, in one layout: `per_names.json`,
`loc_names.json`, `org_names.json` (names and the prompts written for them). `--entity-type`
(PER, LOC, ORG or MISC; default PER) says which type a run scores. A file says which type it holds
by a top-level key `"entity_type"` or, failing that, by the paper's file name `<type>_names...`; a
file that says neither is taken to hold the type of the run.

A model marks a type with labels of one scheme (`entity_label_set`): the bare type (IO: `PER`),
or the type after a prefix, B- and I- (BIO: `B-PER`, `I-PER`), also E- and S- (IOBES) or L- and U-
(BILOU); `_` may stand for `-` and case does not matter. The type may be spelled by an alias (CoNLL
`PER`, OntoNotes `PERSON`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserError

ENTITY_TYPES = ("PER", "LOC", "ORG", "MISC")
# Label stems a model may use for each type: B-PER/I-PER (CoNLL-2003) or B-PERSON/I-PERSON (OntoNotes), ...
LABEL_STEMS = {"PER": ("PER", "PERSON"), "LOC": ("LOC", "LOCATION"), "ORG": ("ORG", "ORGANIZATION"),
               "MISC": ("MISC",)}
_ALIASES = {stem: entity_type for entity_type, stems in LABEL_STEMS.items() for stem in stems}
_FILE_NAME = re.compile(r"(per|loc|org|misc)_names(?![a-z])", re.IGNORECASE)  # per_names.json, loc_names_v2.json

PREFIXES = ("B", "I", "E", "S", "L", "U")  # the order in which a type's labels are listed
_LABEL = re.compile(r"(?:([BIESLU])[-_])?([A-Z]+)")  # upper-cased: B-PER, I_PERSON, S-PER, PER, ...


@dataclass(frozen=True)
class EntityLabels:
    """The labels that mark one entity type in a model: their ids and names (as the model spells
    them, in the order B, I, E, S, L, U, bare) and the scheme they belong to (BIO, IOBES, BILOU, IO)."""

    ids: list[int]
    names: list[str]
    scheme: str


def entity_label_set(id2label: dict, entity_type: str, model_name: str = "the model") -> EntityLabels:
    """Every label of `entity_type` in a model's `id2label`: the type or an alias of it (`LABEL_STEMS`),
    bare or after one of the prefixes B, I, E, S, L, U and `-` or `_`, case-insensitive.

    The scheme: only bare labels: IO; prefixes among B, I: BIO; with E or S: IOBES; with L or U: BILOU.
    The task reads a token's probability of being the type as the max of P(l) over these labels l
    (BIO: max(P(B-X), P(I-X)), the paper's rule; a max, not a sum, so BIO numbers are the paper's).
    A `UserError` when there is no such label (naming the labels the model has) or when the labels
    are ambiguous: the type under two names (B-PER and B-PERSON), one label under two ids (B-PER
    twice, or B-PER and b_per), bare and prefixed labels together (PER and B-PER), or IOBES and
    BILOU prefixes together (S-PER and U-PER)."""
    stems = LABEL_STEMS[entity_type]
    found: dict[tuple[str, str], list[tuple[int, str]]] = {}  # (prefix or "", stem) -> [(id, name)]
    for i, name in sorted((int(i), str(name)) for i, name in id2label.items()):
        match = _LABEL.fullmatch(name.strip().upper())
        if match and match.group(2) in stems:
            found.setdefault((match.group(1) or "", match.group(2)), []).append((i, name))
    where = f"ner_prompt_memorization --entity-type {entity_type}: {model_name}"
    if not found:
        shown = ", ".join(str(v) for v in id2label.values())
        spelled = " or ".join(stems)
        raise UserError(f"ner_prompt_memorization --entity-type {entity_type} needs {entity_type} labels in the "
                        f"model's id2label ({spelled}, bare or after B-, I-, E-, S-, L- or U-: B-{stems[0]} and "
                        f"I-{stems[0]}, say); {model_name} has: {shown or 'none'}")
    repeated = [f"{', '.join(name for _, name in labels)} (ids {', '.join(str(i) for i, _ in labels)})"
                for labels in found.values() if len(labels) > 1]
    if repeated:
        raise UserError(f"{where} has the same label under several ids: {'; '.join(repeated)}; cannot tell "
                        f"which to read")
    names_of = {stem: [labels[0][1] for (_, s), labels in found.items() if s == stem] for stem in stems}
    used = [stem for stem in stems if names_of[stem]]
    if len(used) > 1:
        listed = "; ".join(f"{stem}: {', '.join(names_of[stem])}" for stem in used)
        raise UserError(f"{where} marks {entity_type} under {len(used)} names ({listed}); cannot tell which to read")
    prefixes = {prefix for prefix, _ in found}
    names = [labels[0][1] for labels in found.values()]
    if "" in prefixes and len(prefixes) > 1:
        raise UserError(f"{where} has {entity_type} labels both bare and with a prefix ({', '.join(names)}): "
                        f"no one label scheme")
    if prefixes & {"E", "S"} and prefixes & {"L", "U"}:
        raise UserError(f"{where} mixes IOBES (E-, S-) and BILOU (L-, U-) labels of {entity_type} "
                        f"({', '.join(names)}): no one label scheme")
    scheme = ("IO" if prefixes == {""} else "IOBES" if prefixes & {"E", "S"} else "BILOU" if prefixes & {"L", "U"}
              else "BIO")
    order = sorted(found, key=lambda key: (PREFIXES + ("",)).index(key[0]))
    return EntityLabels(ids=[found[key][0][0] for key in order], names=[found[key][0][1] for key in order],
                        scheme=scheme)


def declared_type(raw: dict, path: Path) -> tuple[str | None, str]:
    """(the entity type a data file says it holds, where it says so), or (None, "") when it says
    nothing. A `UserError` when the `entity_type` key names no known type or disagrees with the
    file name."""
    by_name = _FILE_NAME.match(path.name)
    from_name = by_name.group(1).upper() if by_name else None
    if "entity_type" not in raw:
        return from_name, "its file name" if from_name else ""
    value = raw["entity_type"]
    from_key = _ALIASES.get(value.strip().upper()) if isinstance(value, str) else None
    if from_key is None:
        raise UserError(f"{path}: cannot tell the entity type from \"entity_type\": {value!r} "
                        f"(expected one of {', '.join(ENTITY_TYPES)})")
    if from_name is not None and from_name != from_key:
        raise UserError(f"{path}: its file name says {from_name} but its \"entity_type\" says {from_key}")
    return from_key, "its \"entity_type\""


def check_type(raw: dict, path: Path, entity_type: str, what: str) -> None:
    """A `UserError` when the file declares an entity type other than the run's."""
    declared, where = declared_type(raw, path)
    if declared is not None and declared != entity_type:
        raise UserError(f"{path} holds {declared} {what} ({where} says so), but the run scores {entity_type}: "
                        f"run with --entity-type {declared} or give {entity_type} {what}")
