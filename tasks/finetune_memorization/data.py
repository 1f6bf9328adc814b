"""The texts of finetune_memorization: members (trained on) and held-out non-members, each cut to its
first `words` words, and each cut text split into a prompt (its first `prompt_words` words) and the
continuation the prompt should bring back (the rest)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserError
from harness.core.io import read_jsonl_objects
from harness.core.task import LimitTooSmall
from harness.reference.corpus import corpus_of_data, reference_corpus
from harness.scoring.text import truncate_words


@dataclass(frozen=True)
class KnownText:
    text_id: str
    text: str  # the text cut to its first `words` words: what trains and what is scored
    label: int  # 1 = member (the copy trains on it), 0 = non-member (held out)
    prompt: str  # its first `prompt_words` words
    continuation: str  # the rest of `text`, with its leading whitespace

    @property
    def reference(self) -> str:
        """What a greedy continuation of the prompt is compared with: the continuation, stripped."""
        return self.continuation.strip()


@dataclass(frozen=True)
class KnownData:
    texts: list[KnownText]
    source: str
    too_short: int  # texts of fewer than `words` words, left out


def labelled_rows(data: str, reference_seed: int) -> tuple[list[tuple[str, str, int]], str]:
    """(id, text, label) of a reference corpus (its member/non-member split under `reference_seed`)
    or of a JSONL file of {text, label} rows (1 = member; optional id), in order; and its description."""
    corpus = corpus_of_data(data)
    if corpus is not None:
        rows = [(d.doc_id, d.text, int(d.member)) for d in reference_corpus(reference_seed, corpus.name)]
        return rows, f"reference corpus {corpus.name} ({corpus.description}), split seed {reference_seed}"
    path = Path(data).expanduser()
    if not path.is_file():
        raise UserError(f"--data: no such file and no reference corpus: {data} (a JSONL file of {{text, label}} "
                        "rows, or 'reference')")
    rows = []
    for number, row in read_jsonl_objects(path):
        if not isinstance(row.get("text"), str) or row.get("label") not in (0, 1):
            raise UserError(f"{path}:{number}: needs a string 'text' and a 'label' of 1 (member) or 0 (non-member)")
        rows.append((str(row.get("id", number)), row["text"], int(row["label"])))
    return rows, f"JSONL file {data}"


def load_known_data(data: str, reference_seed: int, members: int, words: int, prompt_words: int, language: str,
                    limit: int | None) -> KnownData:
    """The first `members` members and as many non-members that have at least `words` words, cut to
    them (`--limit N`: ceil(N/2) members and floor(N/2) non-members), checked: both classes present."""
    if prompt_words >= words:
        raise UserError(f"--prompt-words {prompt_words} must be below --words {words}: the rest of each text is "
                        "what the prompt should bring back")
    rows, source = labelled_rows(data, reference_seed)
    wanted = {1: members, 0: members}
    if limit is not None:
        if limit < 2:
            raise LimitTooSmall(f"--limit {limit} keeps fewer than one member and one non-member "
                                "(use --limit 2 or more)")
        wanted = {1: min(members, (limit + 1) // 2), 0: min(members, limit // 2)}
    texts, too_short = [], 0
    for text_id, text, label in rows:
        if sum(t.label == label for t in texts) >= wanted[label]:
            continue
        cut = truncate_words(text, words, language)
        if cut is None:
            too_short += 1
            continue
        prompt = truncate_words(cut, prompt_words, language)
        texts.append(KnownText(text_id, cut, label, prompt, cut[len(prompt):]))
    for label, name in ((1, "members (label 1)"), (0, "non-members (label 0)")):
        if not any(t.label == label for t in texts):
            raise UserError(f"{source}: no {name} of at least {words} words; the task needs both classes")
    return KnownData(texts, source, too_short)
