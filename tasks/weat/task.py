"""Task `weat`: Word Embedding Association Tests on a model's static and contextual word vectors.

Caliskan, Bryson & Narayanan 2017 (WEAT 1-10), with contextual vectors from template sentences as
in SEAT (May et al. 2019); the seed (Yoon & Lee) runs seven of them (`PAPER_TESTS`) and averages them
over race tests, gender tests and all seven (its Table 7). Definitions: README.md beside this file.
"""

from __future__ import annotations

import dataclasses

from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from harness.core.model_types import LoadedModel
from harness.core.records import Records
from harness.core.results import Headline
from harness.core.task import PaperPreset, RunContext, Task, TaskConfig, TaskResult, register
from harness.metrics.bias import weat_associations
from harness.scoring.representations import WORD_VECTOR_KINDS, check_layer, contextual_span_vectors, static_span_vectors
from tasks.weat.data import WeatData, WeatTest, load_weat
from tasks.weat.report import report

TEMPLATES = ("This is {}.", "That is {}.", "There is {}.", "Here is {}.", "It is {}.", "{} is here.", "{} is there.")


# The seed's seven tests (Yoon & Lee, Table 7 and appendix A.6, Table 8), in Caliskan et al.'s numbering:
# flowers/insects (WEAT 1) and instruments/weapons (2) x pleasant/unpleasant; European vs African American
# names x pleasant/unpleasant, with two name lists (3, 4: its "race-related" average); male/female names x
# career/family, math/arts and science/arts x male/female terms (6, 7, 8: its "gender-related" average). The
# groups of `weat_tests.json` are the seed's for these seven, so mean |d| per group of a run of these tests is
# its Table 7 grouping: race = WEAT 3, 4; gender = WEAT 6, 7, 8; all = its "Average" over the seven.
PAPER_TESTS = ("weat1", "weat2", "weat3", "weat4", "weat6", "weat7", "weat8")


class WeatConfig(PaperPreset, TaskConfig):
    # The seed's seven tests, its d (Yoon & Lee cite code that divides by the population std) and its per-word
    # static vectors (every run's `static` representation) in the headline (the card's "Departures from the paper")
    PAPER = {"tests": PAPER_TESTS, "effect_size_std": "population", "headline_representation": "static"}

    weat_tests: str | None = Field(None, description="JSON file of tests in the built-in format "
                                   "(default: WEAT 1-10 of Caliskan et al. 2017)")
    tests: tuple[str, ...] = Field((), description="test ids to run (default: all in the file; --preset paper: "
                                   "the seed's seven, " + ",".join(PAPER_TESTS) + ")")
    representations: tuple[Literal["static", "contextual"], ...] = Field(
        ("static", "contextual"), min_length=1, description="static: input embeddings; contextual: hidden states")
    layer: int = Field(-1, description="hidden-state layer of contextual vectors (0 = embeddings, -1 = last)")
    pooling: Literal["mean", "first"] = Field("mean", description="pooling over a word's subword tokens")
    contextual_unit: Literal["sentence", "word"] = Field(
        "sentence", description="contextual vector of a template sentence: mean over all its tokens "
        "(SEAT) or over the word's tokens only")
    templates: tuple[str, ...] = Field(TEMPLATES, min_length=1, description="template sentences, each with one {}")
    effect_size_std: Literal["sample", "population"] = Field(
        "sample", description="the standard deviation in d: sample (ddof 1, as Caliskan et al.'s formula is read) or "
        "population (ddof 0: the code the seed cites, and WEFE)")
    headline_representation: Literal["contextual", "static"] = Field(
        "contextual", description="the representation of the board's headline mean |d|: contextual (SEAT's "
        "question) or static (one vector per word, the seed's; --preset paper)")
    max_exact_partitions: int = Field(100_000, ge=1, description="exact permutation test up to this many partitions")
    permutation_samples: int = Field(100_000, ge=100, description="random partitions otherwise")

    @field_validator("templates")
    @classmethod
    def _one_slot(cls, templates: tuple[str, ...]) -> tuple[str, ...]:
        bad = [t for t in templates if t.count("{}") != 1 or t.replace("{}", "").count("{") + t.count("}") > 1]
        if bad:
            raise ValueError(f"a template must hold exactly one {{}} and no other braces: {bad[0]!r}")
        return templates


def _word_span(template: str, word: str) -> tuple[str, tuple[int, int]]:
    start = template.index("{}")
    return template.replace("{}", word), (start, start + len(word))


def word_vectors(lm: LoadedModel, words: list[str], representation: str, config: WeatConfig,
                 context: RunContext) -> np.ndarray:
    """(words, width): static vectors from the word in the first template; contextual ones averaged
    over the templates (each the sentence's or the word's pooled hidden states)."""
    if representation == "static":
        filled = [_word_span(config.templates[0], w) for w in words]
        vectors = static_span_vectors(lm.model, lm.tokenizer, [t for t, _ in filled], [[s] for _, s in filled],
                                      config.pooling)
        return np.concatenate(vectors)
    filled = [_word_span(template, w) for template in config.templates for w in words]
    spans = [[(0, len(text)) if config.contextual_unit == "sentence" else span] for text, span in filled]
    vectors = contextual_span_vectors(lm.model, lm.kind, lm.tokenizer, [t for t, _ in filled], spans, config.layer,
                                      config.pooling, context.batch_size, context.progress, desc="template sentences")
    return np.concatenate(vectors).reshape(len(config.templates), len(words), -1).mean(axis=0)


def associations(test: WeatTest, vectors: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Every word's association s(w, A, B) of one test: (s over X, s over Y), in the sets' order."""
    def stack(words):
        return np.stack([vectors[w] for w in words])

    a, b = stack(test.a), stack(test.b)
    return weat_associations(stack(test.x), a, b), weat_associations(stack(test.y), a, b)


@register
class Weat(Task):
    NAME = "weat"
    VERSION = 3
    DESCRIPTION = "WEAT 1-10 effect sizes and permutation p-values on static and contextual word vectors"
    MODEL_KINDS = WORD_VECTOR_KINDS
    HEADLINE = Headline(metric="mean_abs_d", tags={"representation": "contextual", "group": "all"},
                        label="mean |d|, all tests (contextual)", better="lower")
    SUMMARY = tuple(Headline(metric="mean_abs_d", tags={"representation": rep, "group": group},
                             label=f"mean |d| {group} ({rep})", better="lower")
                    for rep in ("static", "contextual") for group in ("all", "race", "gender"))
    Config = WeatConfig
    NOT_SERVED = "it reads the model's word vectors (embeddings, hidden states), which a completions server does not return"
    # read by the report only (d's std, the permutation test) or by `headlines` (the board's headline);
    # `preset` itself changes no record: every field it sets (PAPER) is one of these or is in the key as set (`tests`)
    REPORT_ONLY = frozenset({"effect_size_std", "max_exact_partitions", "permutation_samples",
                             "headline_representation", "preset"})

    def headlines(self, config: WeatConfig) -> tuple[Headline, tuple[Headline, ...]]:
        """`HEADLINE` of `--headline-representation`; the summary has both representations either way."""
        rep = config.headline_representation
        head = self.HEADLINE.model_copy(update={"tags": {**self.HEADLINE.tags, "representation": rep},
                                                "label": f"mean |d|, all tests ({rep})"})
        return head, self.SUMMARY

    def load_data(self, config: WeatConfig, context: RunContext) -> WeatData:
        return load_weat(config.weat_tests, config.tests)

    def check_model(self, model: LoadedModel, config: WeatConfig) -> None:
        if "contextual" in config.representations:
            check_layer(model.model, model.kind, config.layer)

    def score(self, model: LoadedModel, data: WeatData, config: WeatConfig, context: RunContext) -> Records:
        """Every word's association per representation and test, and the words with unknown tokens
        (records: `tasks.weat.report`)."""
        words = list(dict.fromkeys(w for test in data.tests for w in test.words()))
        unk = model.tokenizer.unk_token_id
        unknown = [w for w in words if unk is not None
                   and unk in model.tokenizer(w, add_special_tokens=False)["input_ids"]]
        scored = []
        for representation in config.representations:
            vectors = dict(zip(words, word_vectors(model, words, representation, config, context)))
            for test in data.tests:
                s_x, s_y = associations(test, vectors)
                scored.append({"id": f"{representation}/{test.test_id}", "representation": representation,
                               "test": test.test_id, "x": s_x.tolist(), "y": s_y.tolist()})
        tests = [{"id": t.test_id, "group": t.group, "x": list(t.x), "y": list(t.y), "a": list(t.a), "b": list(t.b)}
                 for t in data.tests]
        return {"tests": tests, "associations": scored, "unknown_words": unknown,
                "facts": {"data_source": data.source}}

    def report(self, records: Records, config: WeatConfig, seed: int) -> TaskResult:
        return report(records, config, seed)

    def sample_values(self, records: Records) -> dict[str, dict]:
        """Each (representation, test)'s word associations s(w, A, B), `x<i>` and `y<i>`."""
        return {a["id"]: {**{f"x{i}": v for i, v in enumerate(a["x"])}, **{f"y{i}": v for i, v in enumerate(a["y"])}}
                for a in records["associations"]}

    def sample_data(self, data: WeatData, config: WeatConfig, ids: list[str]):
        wanted = {item.split("/", 1)[1] for item in ids}
        return dataclasses.replace(data, tests=[t for t in data.tests if t.test_id in wanted]), config
