"""Articles for paywall memorization: a public part (the prompt) and a private part (held back).

Input: JSONL rows `{"id", "public", "private"}` or `{"id", "text"}` (split here), optional
`"label"` (1 = the model trained on the article, 0 = not); or a reference corpus (`reference`,
`reference:ja`), whose articles carry their member label.

Automatic split (Ishihara & Takahashi 2024): public = the first min(200, n // 2) of the article's
n words. The reference is the private part up to the end of its first sentence: English sentence
boundaries from pysbd, Japanese sentences end at 。 (or ！ ？). A private part with no sentence end
is used whole, and the record says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harness.core.errors import UserError
from harness.core.io import read_jsonl_objects
from harness.files.sources import membership_label
from harness.reference.corpus import corpus_of_data, reference_corpus
from harness.scoring.text import word_end_offsets

JAPANESE_SENTENCE_END = re.compile(r"[。！？]")
ENGLISH_SENTENCE_END = (".", "!", "?")
CLOSING_MARKS = "\"'”’)]"  # may follow the sentence end: He said "stop."
SEGMENT_WINDOW = 1000  # characters of the private part handed to the sentence splitter first


@dataclass(frozen=True)
class Article:
    article_id: str
    public: str
    private: str
    label: int | None = None


@dataclass(frozen=True)
class Example:
    """One prompt/reference pair ready to generate."""

    article_id: str
    prompt: str
    reference: str
    continuation_prefix: str  # the private part's leading whitespace, tokenized with the reference
    public_words: int
    sentence_end_found: bool
    label: int | None


@dataclass(frozen=True)
class PaywallData:
    examples: list[Example]
    source: str
    n_articles: int
    n_too_short: int


def split_article(text: str, language: str, max_public_words: int) -> tuple[str, str] | None:
    """(public, private) with public = the first min(max_public_words, n // 2) words; None if n < 2."""
    ends = word_end_offsets(text, language)
    n_public = min(max_public_words, len(ends) // 2)
    if n_public == 0:
        return None
    cut = ends[n_public - 1]
    return text[:cut], text[cut:]


@lru_cache(maxsize=1)
def _english_segmenter():
    import pysbd

    return pysbd.Segmenter(language="en", clean=False, char_span=True)


@lru_cache(maxsize=8192)
def first_sentence(private: str, language: str) -> tuple[str, bool]:
    """The private part (leading whitespace removed) up to the end of its first sentence, and
    whether a sentence end was found (if not, the whole private part). Kept per text: pysbd takes
    about 15 ms an article, and `membench run` evaluates the same articles on several checkpoints."""
    body = private.lstrip()
    if language == "ja":
        match = JAPANESE_SENTENCE_END.search(body)
        return (body[: match.end()], True) if match else (body, False)
    for window in (body[:SEGMENT_WINDOW], body):
        spans = _english_segmenter().segment(window)
        if spans:
            sentence = window[spans[0].start: spans[0].end].rstrip()
            if sentence.rstrip(CLOSING_MARKS).endswith(ENGLISH_SENTENCE_END) or len(spans) > 1:
                return window[: spans[0].start] + sentence, True
        if len(window) == len(body):
            break
    return body.rstrip(), False


def make_example(article: Article, language: str) -> Example:
    reference, found = first_sentence(article.private, language)
    leading = article.private[: len(article.private) - len(article.private.lstrip())]
    return Example(article.article_id, article.public, reference, leading,
                   len(word_end_offsets(article.public, language)), found, article.label)


def read_articles(path: Path, language: str, max_public_words: int) -> tuple[list[Article], int]:
    """Articles of a JSONL file and how many `text` rows were too short to split."""
    articles, too_short = [], 0
    for number, row in read_jsonl_objects(path):
        where = f"{path}:{number}"
        if "id" not in row:
            raise UserError(f"{where}: missing field 'id'")
        label = None if row.get("label") is None else membership_label(row["label"], where)
        if "public" in row or "private" in row:
            public, private = row.get("public"), row.get("private")
            if not isinstance(public, str) or not isinstance(private, str):
                raise UserError(f"{where}: 'public' and 'private' must both be strings")
            if not public.strip():
                raise UserError(f"{where}: empty public part")
            if not private.strip():
                raise UserError(f"{where}: empty private part")
        elif isinstance(row.get("text"), str):
            parts = split_article(row["text"], language, max_public_words)
            if parts is None:
                too_short += 1
                continue
            public, private = parts
        else:
            raise UserError(f"{where}: needs 'public' and 'private', or 'text'")
        articles.append(Article(str(row["id"]), public, private, label))
    return articles, too_short


def load_paywall_data(data: str, language: str, max_public_words: int, reference_seed: int,
                      limit: int | None) -> PaywallData:
    corpus = corpus_of_data(data)
    if corpus is not None:
        if corpus.language != language:
            raise UserError(f"reference corpus {corpus.name} is {corpus.language}; pass --language {corpus.language}")
        articles, too_short = [], 0
        for document in reference_corpus(reference_seed, corpus.name):
            parts = split_article(document.text, language, max_public_words)
            if parts is None:
                too_short += 1
            else:
                articles.append(Article(document.doc_id, *parts, label=int(document.member)))
        source = f"reference corpus {corpus.name} ({corpus.description}), split seed {reference_seed}"
    elif Path(data).expanduser().exists() and not Path(data).expanduser().is_dir():  # read_utf8 checks it
        articles, too_short = read_articles(Path(data).expanduser(), language, max_public_words)
        source = f"JSONL file {data}"
    else:
        raise UserError(f"data file not found: {data}")
    if limit is not None:
        articles = articles[:limit]
    if not articles:
        raise UserError(f"{source}: no articles to evaluate")
    examples = [make_example(article, language) for article in articles]
    return PaywallData(examples, source, len(articles) + too_short, too_short)


# Member groups by label: the metrics are reported per group and over all examples.
GROUPS = {1: "members", 0: "non_members", None: "all"}


def reference_budgets(tokenizer, examples: list[Example]) -> list[int]:
    """New tokens generated per example: the token count of its reference (with the private part's
    leading whitespace, as it would follow the prompt)."""
    return [len(ids) for ids in tokenizer([e.continuation_prefix + e.reference for e in examples],
                                          add_special_tokens=False)["input_ids"]]
