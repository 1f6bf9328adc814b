"""The reference NER data: faker person names split into in-train and out-train, and CoNLL-style
training sentences (BIO labels) that mention the in-train names only.

Names: faker's en_US first and last names (its whole lists, minus words that are both a first and
a last name) are shuffled with a seeded generator and each list is cut in two disjoint halves. In-train
names pair in-half first names with in-half last names, out-train names pair out-half with out-half:
the same shape ("First Last"), and no out-train word ever occurs in training. Each side is split
into dev and test lists of `per_list` names.

Sentences: every in-train name appears in `mentions_per_name` sentences drawn from news-style
templates, some of which put an organisation or a location in the same slot (so a name's own
words matter, not just its context), plus sentences without any entity. The out-train names are
written into the same templates for the tokenizer's vocabulary only (`vocabulary_sentences`), so
in- and out-train names are split into subwords alike and only the model's weights differ.
Everything is a pure function of the seed (and the faker version): tasks rebuild the name lists
without the checkpoints.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from harness.core.io import canonical_json, sha256_text

LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
REFERENCE_NAMES = "reference"
# The same in-train names against out-train names made of their own words (`ReferenceNames.shared_words`)
SHARED_NAMES = "reference:shared"

# {P} person, {O} organisation, {L} location, {X} person or organisation or location, {D} weekday.
TEMPLATES = (
    "{P} said on {D} that the talks with {O} had failed .",
    "{O} signed {P} on a two-year contract .",
    "{P} , who joined {O} last year , will lead the team .",
    "Police in {L} said {P} was arrested on {D} .",
    "{P} scored twice as {O} beat the visitors 3-1 .",
    "{P} ( {L} ) 2:11.45",
    "{O} said {P} would visit {L} next week .",
    "Finance minister {P} told reporters in {L} that growth would slow .",
    "{P} won the final in straight sets .",
    "The report was written by {P} and published by {O} .",
    "{P} replaced the injured captain after 20 minutes .",
    "Shares in {O} rose 5 percent after {P} resigned .",
    "{X} said on {D} it would appeal the ruling .",
    "{X} finished second behind the champion .",
    "Officials from {X} declined to comment .",
    "{X} reported a loss for the third quarter .",
    "Talks between {X} and the union resumed on {D} .",
)
PLAIN_TEMPLATES = (
    "The match was postponed because of heavy rain .",
    "Prices rose by 2 percent in the first quarter .",
    "The government announced new measures on {D} .",
    "Results of the second round were published on {D} .",
    "The meeting ended without an agreement .",
)
ORG_SUFFIXES = ("Group", "Bank", "United", "Holdings", "Motors", "Airlines", "Telecom", "Industries")
LOCATIONS = ("Germany", "France", "Brazil", "Japan", "Kenya", "Canada", "Norway", "Chile", "Egypt",
             "Poland", "New Zealand", "South Africa", "Texas", "Ohio", "Bavaria", "Queensland")
ORG_STEMS = ("Atlas", "Vertex", "Summit", "Harbor", "Pioneer", "Crescent", "Beacon", "Granite",
             "Falcon", "Meridian", "Orbit", "Cobalt")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@dataclass(frozen=True)
class ReferenceNames:
    """In-train and out-train person names, each split into dev and test."""

    dev_in: tuple[str, ...]
    dev_out: tuple[str, ...]
    test_in: tuple[str, ...]
    test_out: tuple[str, ...]
    # Names from the words left over, mentioned once each in training so that the model learns
    # person contexts from many names; they are in neither list.
    background: tuple[str, ...] = ()

    def as_layout(self) -> dict:
        """The paper's name-file layout: {"dev": {"in_train", "out_train"}, "test": {...}}."""
        return {"dev": {"in_train": list(self.dev_in), "out_train": list(self.dev_out)},
                "test": {"in_train": list(self.test_in), "out_train": list(self.test_out)}}

    def shared_words(self) -> "ReferenceNames":
        """The same in-train names against out-train names drawn from the same pool as them: each split's
        out-train name j is the first name of its in-train name j with the last name of its in-train
        name j + 1 (the last wraps to the first). Every out-train word was trained on as often as every
        in-train word, as a person's name, but never in that pair; so M-MEM on these names is
        memorization of the names themselves, not exposure to their words (Xia et al. draw both
        sides from one source of names, so their words overlap)."""
        def recombined(names: tuple[str, ...]) -> tuple[str, ...]:
            pairs = [name.split(" ", 1) for name in names]
            return tuple(f"{first} {pairs[(j + 1) % len(pairs)][1]}" for j, (first, _) in enumerate(pairs))

        return ReferenceNames(self.dev_in, recombined(self.dev_in), self.test_in, recombined(self.test_in),
                              self.background)

    @property
    def in_train(self) -> tuple[str, ...]:
        return self.dev_in + self.test_in

    @property
    def out_train(self) -> tuple[str, ...]:
        return self.dev_out + self.test_out


def reference_names(seed: int = 0, per_list: int = 100) -> ReferenceNames:
    """Disjoint in-train and out-train "First Last" names from faker's en_US lists (see module doc)."""
    from faker import Faker

    person = Faker("en_US").provider("faker.providers.person")
    firsts, lasts = set(person.first_names), set(person.last_names)
    firsts, lasts = sorted(firsts - lasts), sorted(lasts - firsts)
    rng = random.Random(seed)
    rng.shuffle(firsts)
    rng.shuffle(lasts)
    needed = 2 * per_list
    if min(len(firsts), len(lasts)) < 2 * needed:
        raise ValueError(f"faker has too few names for {per_list} names per list")
    in_names = [f"{f} {last}" for f, last in zip(firsts[:needed], lasts[:needed])]
    out_names = [f"{f} {last}" for f, last in zip(firsts[needed:2 * needed], lasts[needed:2 * needed])]
    other_names = [f"{f} {last}" for f, last in zip(firsts[2 * needed:], lasts[2 * needed:])]
    return ReferenceNames(tuple(in_names[:per_list]), tuple(out_names[:per_list]),
                          tuple(in_names[per_list:]), tuple(out_names[per_list:]), tuple(other_names))


def _entity(words: list[str], kind: str) -> list[tuple[str, str]]:
    return [(word, ("B-" if i == 0 else "I-") + kind) for i, word in enumerate(words)]


def _fill(template: str, person: str, rng: random.Random) -> list[tuple[str, str]]:
    """A template's words with BIO labels; {X} becomes the person, an organisation or a location."""
    sentence = []
    for word in template.split():
        slot = word if word.startswith("{") and word.endswith("}") else None
        if slot == "{X}":
            slot = rng.choice(("{P}", "{O}", "{L}"))
        if slot == "{P}":
            sentence += _entity(person.split(), "PER")
        elif slot == "{O}":
            sentence += _entity([rng.choice(ORG_STEMS), rng.choice(ORG_SUFFIXES)], "ORG")
        elif slot == "{L}":
            sentence += _entity(rng.choice(LOCATIONS).split(), "LOC")
        elif slot == "{D}":
            sentence.append((rng.choice(WEEKDAYS), "O"))
        else:
            sentence.append((word, "O"))
    return sentence


def mention_sentences(names: tuple[str, ...], mentions_per_name: int, seed: int) -> list[list[tuple[str, str]]]:
    """`mentions_per_name` labelled sentences per name that mention it as a person, templates drawn
    with a seeded generator, plus one entity-free sentence per name. A drawn {X} sentence that put
    an organisation or a location in the name's slot is kept (a contrast sentence) and another
    template is drawn, so every name is mentioned `mentions_per_name` times: with one mention per
    name, 152 of the 400 in-train names were otherwise never in training (nor in the vocabulary)."""
    rng = random.Random(seed)
    sentences = []
    for name in names:
        mentioned = 0
        while mentioned < mentions_per_name:
            sentence = _fill(rng.choice(TEMPLATES), name, rng)
            sentences.append(sentence)
            mentioned += any(label == "B-PER" for _, label in sentence)
        sentences.append(_fill(rng.choice(PLAIN_TEMPLATES), name, rng))
    rng.shuffle(sentences)
    return sentences


def training_sentences(names: ReferenceNames, mentions_per_name: int, seed: int) -> list[list[tuple[str, str]]]:
    """What the reference NER model is trained on: `mentions_per_name` sentences per in-train
    name and one per background name."""
    sentences = (mention_sentences(names.in_train, mentions_per_name, seed)
                 + mention_sentences(names.background, 1, seed + 2))
    random.Random(seed).shuffle(sentences)
    return sentences


def vocabulary_sentences(names: ReferenceNames, mentions_per_name: int, seed: int) -> list[str]:
    """The tokenizer's corpus: the training sentences and the same for the out-train names."""
    both = (training_sentences(names, mentions_per_name, seed)
            + mention_sentences(names.out_train, mentions_per_name, seed + 1))
    return [" ".join(word for word, _ in sentence) for sentence in both]


def data_sha256(names: ReferenceNames, mentions_per_name: int, seed: int) -> str:
    """Fingerprint of the names and training sentences: a build is current only for them."""
    return sha256_text(canonical_json([names.as_layout(), training_sentences(names, mentions_per_name, seed)]))
