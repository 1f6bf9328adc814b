"""Prompts with a name slot: reading them, annotating them, filling them, removing their tokens.

A prompt is a sentence with the slot `MASK` exactly once. Its tokens are words (with inner
apostrophes, "don't"), a possessive "'s", and single punctuation marks; the slot is one token.
Annotations: `name_position` is `start` when the slot is the first word, `end` when it is the last
word (punctuation aside), else `middle`; `n_tokens` counts the tokens besides the slot.
The built-in prompts are written for person names (PER); a run of another entity type needs a
prompt file of that type with its own baselines (`empty_prompt`, `one_prompt`, `mix_prompt`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.core.errors import UserError
from harness.core.io import SETTINGS_MAX_BYTES, parse_json_object, read_utf8
from tasks.ner_prompt_memorization.entities import check_type

SLOT = "MASK"
PROMPT_TYPES = ("declarative", "exclamatory", "imperative", "interrogative")
TYPED_KEYS = {f"{t}_prompt": t for t in PROMPT_TYPES}
BASELINE_KEYS = ("empty_prompt", "one_prompt", "mix_prompt")
BUILTIN_PATH = Path(__file__).with_name("builtin_prompts.json")
_TOKEN = re.compile(rf"{SLOT}\b|'s\b|\w+(?:'\w+)*|[^\w\s]")
_WORD_PAIR = re.compile(r"\w\w")


@dataclass(frozen=True)
class Prompt:
    prompt_id: str
    text: str
    type: str
    name_position: str
    n_tokens: int

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PromptSet:
    """The typed prompts (OPT, PTE, EPT and the analyses) and the three baselines."""

    typed: tuple[Prompt, ...]
    no_prompt: Prompt
    one_prompt: Prompt
    mix: tuple[Prompt, ...]
    source: str


def token_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the prompt's tokens (see the module docstring)."""
    return [match.span() for match in _TOKEN.finditer(text)]


def annotate(prompt_id: str, text: str, prompt_type: str) -> Prompt:
    """A `Prompt` with its name position and token count; a `UserError` unless the slot occurs once."""
    text = " ".join(text.split())
    tokens = [text[a:b] for a, b in token_spans(text)]
    if tokens.count(SLOT) != 1 or text.count(SLOT) != 1:
        raise UserError(f"prompt {prompt_id} must contain the slot {SLOT} exactly once: {text!r}")
    words = [t for t in tokens if t == SLOT or any(ch.isalnum() for ch in t)]
    position = "start" if words[0] == SLOT else "end" if words[-1] == SLOT else "middle"
    return Prompt(prompt_id, text, prompt_type, position, len(tokens) - 1)


def fill(text: str, name: str) -> tuple[str, tuple[int, int]]:
    """The sentence with the name in the slot, and the name's character span in it."""
    start = text.index(SLOT)
    return text[:start] + name + text[start + len(SLOT):], (start, start + len(name))


def removable_tokens(text: str) -> list[int]:
    """Indices (into `token_spans`) of the tokens that may be removed: all but the slot."""
    return [i for i, (a, b) in enumerate(token_spans(text)) if text[a:b] != SLOT]


def remove_token(text: str, index: int) -> str:
    """The prompt without token `index` and the whitespace before it (after it, for the first). Where
    that would join two word characters ("mind-blowing" without "-", "MASK -known" without "-"), one
    space is kept, so no new word forms and the slot stays a token of its own."""
    spans = token_spans(text)
    start, end = spans[index]
    if index == 0:
        end = spans[1][0] if len(spans) > 1 else end
    else:
        start = spans[index - 1][1]
        start = start if text[start:spans[index][0]].strip() == "" else spans[index][0]
    joined = _WORD_PAIR.fullmatch(text[start - 1:start] + text[end:end + 1]) if start > 0 else None
    return text[:start] + (" " if joined else "") + text[end:]


def _string_list(raw: dict, key: str, origin: str) -> list[str]:
    value = raw[key]
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip() for v in value):
        raise UserError(f"{origin}: {key!r} must be a non-empty list of prompt strings")
    return value


def _typed_from_paper_layout(raw: dict, origin: str) -> list[Prompt]:
    typed = []
    for key, prompt_type in TYPED_KEYS.items():
        if key in raw:
            typed += [annotate(f"{prompt_type}-{i + 1:03d}", text, prompt_type)
                      for i, text in enumerate(_string_list(raw, key, origin))]
    return typed


def _typed_from_annotated_layout(raw: dict, origin: str) -> list[Prompt]:
    """The built-in layout: {"prompts": [{prompt_id, text, type, name_position, n_tokens}]}; the
    stored annotations must agree with the computed ones."""
    typed = []
    for item in raw["prompts"]:
        if not isinstance(item, dict) or not {"prompt_id", "text", "type"} <= set(item):
            raise UserError(f"{origin}: each entry of 'prompts' needs prompt_id, text and type")
        prompt = annotate(str(item["prompt_id"]), str(item["text"]), str(item["type"]))
        stored = {k: item[k] for k in ("name_position", "n_tokens") if k in item}
        if any(stored[k] != getattr(prompt, k) for k in stored):
            raise UserError(f"{origin}: prompt {prompt.prompt_id}: stored annotation {stored} disagrees "
                            f"with the text ({prompt.name_position}, {prompt.n_tokens} tokens)")
        typed.append(prompt)
    return typed


def prompt_set(raw: dict, origin: str, defaults: PromptSet | None) -> PromptSet:
    """Prompts from a JSON object in the paper's layout (lists under `declarative_prompt`, ...,
    `empty_prompt`, `one_prompt`, `mix_prompt`) or the built-in annotated layout (`prompts`).
    Baselines the file lacks come from `defaults` (the built-in set; None: none may be missing)."""
    typed = (_typed_from_annotated_layout(raw, origin) if "prompts" in raw
             else _typed_from_paper_layout(raw, origin))
    if not typed:
        raise UserError(f"{origin} has no prompts: expected 'prompts' or any of {', '.join(TYPED_KEYS)}")
    ids = [p.prompt_id for p in typed]
    if len(set(ids)) != len(ids):
        raise UserError(f"{origin}: prompt ids must be unique")
    baselines = {}
    for key in BASELINE_KEYS:
        if key in raw:
            baselines[key] = [annotate(f"{key.removesuffix('_prompt')}-{i + 1}", text, "baseline")
                              for i, text in enumerate(_string_list(raw, key, origin))]
        elif defaults is None:
            raise UserError(f"{origin} lacks {key!r} (the built-in baselines are person sentences: a prompt "
                            f"file of another entity type needs its own)")
    return PromptSet(
        typed=tuple(typed),
        no_prompt=baselines["empty_prompt"][0] if "empty_prompt" in baselines else defaults.no_prompt,
        one_prompt=baselines["one_prompt"][0] if "one_prompt" in baselines else defaults.one_prompt,
        mix=tuple(baselines["mix_prompt"]) if "mix_prompt" in baselines else defaults.mix,
        source=origin,
    )


def builtin_prompts() -> PromptSet:
    """The built-in prompts (person names)."""
    raw = parse_json_object(read_utf8(BUILTIN_PATH, SETTINGS_MAX_BYTES), "built-in prompts")
    return prompt_set(raw, "built-in prompts", None)


def load_prompts(spec: str, entity_type: str = "PER") -> PromptSet:
    """`builtin` (person prompts), or a JSON file (see `prompt_set`) whose declared entity type (if
    any) is `entity_type`; a PER file's missing baselines come from the built-in set."""
    if spec == "builtin":
        if entity_type != "PER":
            raise UserError(f"the built-in prompts are written for person names (PER); for --entity-type "
                            f"{entity_type} give --prompts FILE with {entity_type} prompts (the paper's "
                            f"loc_names.json and org_names.json hold LOC and ORG ones)")
        return builtin_prompts()
    path = Path(spec).expanduser()
    if not path.exists():  # a folder or device: read_utf8 says what it is
        raise UserError(f"prompt file not found: {spec}")
    raw = parse_json_object(read_utf8(path, SETTINGS_MAX_BYTES, "prompts file"), str(path))
    check_type(raw, path, entity_type, "prompts")
    return prompt_set(raw, str(path), builtin_prompts() if entity_type == "PER" else None)

