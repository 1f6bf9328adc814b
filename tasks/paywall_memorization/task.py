"""Task `paywall_memorization`: how much of an article's held-back (paywalled) part a causal LM
reproduces when prompted with the public part. Ishihara & Takahashi 2024; extraction risk as a
probability, (n, p)-discoverable extraction (Hayes et al. 2024) and its near-verbatim lower bound
(Cooper et al. 2026). Definitions: README.md."""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np
from pydantic import Field, PositiveInt, model_validator

from harness.core.errors import UserError
from harness.core.model_types import LoadedModel, ModelKind
from harness.core.records import Records
from harness.core.results import Headline
from harness.core.task import MAX_SEED, PaperPreset, RunContext, Task, TaskConfig, TaskResult, register
from harness.metrics import extraction as x
from harness.scoring.batching import model_context, padding_id
from harness.scoring.causal import token_text
from harness.scoring.constrained_beam import check_beam_settings, near_verbatim_bound_ids
from harness.scoring.distributed import run_batches
from harness.scoring.extraction import SamplingScheme, extraction_logprobs_ids, log_pz, served_top_n
from harness.scoring.extraction_report import ExtractionConfig, first_bad_setting
from harness.scoring.generation import greedy_continuations, prompt_cuts
from tasks.paywall_memorization.data import (
    Example,
    PaywallData,
    first_sentence,
    load_paywall_data,
    reference_budgets,
)
from tasks.paywall_memorization.report import report


# near_verbatim_beam's default: off. The search costs about 4x the greedy generation on the reference GPT-2 (README
# "Extraction risk as a probability") and more on larger vocabularies; --near-verbatim-beam 20 (Cooper et
# al.'s B) turns it on.
NEAR_VERBATIM_BEAM = 0


# --generation-end sentence generates up to this many times the reference's tokens, then keeps the first sentence
SENTENCE_BUDGET_FACTOR = 2


class PaywallSettings(PaperPreset, TaskConfig):
    """The paper preset, the task's data, bins and where a generation ends."""

    # Ishihara & Takahashi's reference is the private part up to the end of its first sentence (§4.1), and the
    # generations they print (Tables 3 and 5) are one sentence each; the paper does not state where a generation
    # stops, so paper mode cuts it where its first sentence ends (the card's "Departures from the paper")
    PAPER = {"generation_end": "sentence"}

    data: str = Field("reference", description="JSONL ({id, public, private} or {id, text}, optional label) "
                      "or a reference corpus: 'reference' (English XSum) or 'reference:ja' (Japanese)")
    language: Literal["en", "ja"] = Field("en", description="word splitting: whitespace (en) or fugashi (ja)")
    reference_seed: int = Field(0, ge=0, le=MAX_SEED,
                                description="seed of the reference corpus member/non-member split")
    max_public_words: PositiveInt = Field(200, description="public part: at most this many words (and half)")
    n_bins: PositiveInt = Field(5, description="equal-count bins of public-part length")
    generation_end: Literal["budget", "sentence"] = Field(
        "budget", description="budget: greedy generation of as many tokens as the reference has, compared whole; "
        f"sentence: up to {SENTENCE_BUDGET_FACTOR}x that many, cut where its first sentence ends (the rule that cuts "
        "the reference: pysbd, or 。！？ in Japanese), as Ishihara & Takahashi's printed generations end")


class PaywallConfig(ExtractionConfig, PaywallSettings):
    """`PaywallSettings`, then (n, p)-discoverable extraction's settings (`ExtractionConfig`), then the
    near-verbatim bound's: pydantic lays fields out base classes last-first, so a results file lists
    them in this order."""

    near_verbatim_threshold: float = Field(0.9, description="near-verbatim: a continuation counts when its "
                                           "approximate memorization score (1 - Levenshtein / longest, characters; "
                                           "this task's `approximate`) against the reference is >= this, in [0, 1]")
    near_verbatim_beam: int = Field(NEAR_VERBATIM_BEAM, ge=0, description="near-verbatim: the width B of the "
                                    "decoding-constrained beam search (Cooper et al. 2026) that lower-bounds the "
                                    "probability of a near-verbatim continuation (20 is a good width); 0: off")
    near_verbatim_groups: Literal["all", "members"] = Field(
        "all", description="near-verbatim: the articles the bound runs on: all, or the members only (label 1: half "
        "the search's cost, and no member minus non-member gap)")

    @model_validator(mode="after")
    def _check_near_verbatim(self) -> "PaywallConfig":
        """Bad near-verbatim settings: one line naming the flag (the runner adds the task's name)."""
        checks = [("--near-verbatim-threshold", lambda: x.check_similarity_threshold(self.near_verbatim_threshold))]
        if self.near_verbatim_beam:
            checks.append(("--near-verbatim-beam", lambda: check_beam_settings(
                self.scheme(), self.near_verbatim_threshold, self.near_verbatim_beam)))
        first_bad_setting(checks)
        return self


def extraction_targets(tokenizer, examples: list[Example], context: int) -> tuple[list[list[int]], list[list[int]], int]:
    """(prompt ids, target ids, how many targets were capped): each target is the reference's tokens (with
    the private part's leading whitespace, `reference_budgets`) cut to the greedy generation's budget,
    after the very prompt tokens the generation starts from (`generation.prompt_cuts`: BOS + prompt, its
    last tokens when cut). So greedy decoding (`SamplingScheme(greedy=True)`) gives p_z = 1 exactly
    where the greedy generation's tokens are the target's."""
    budgets = reference_budgets(tokenizer, examples)
    _, cut, capped, _, _ = prompt_cuts(tokenizer, [e.prompt for e in examples], budgets, context)
    full = tokenizer([e.continuation_prefix + e.reference for e in examples], add_special_tokens=False)["input_ids"]
    targets = [list(ids[:budget]) for ids, budget in zip(full, capped)]
    return cut, targets, sum(len(t) < len(ids) for t, ids in zip(targets, full))


def target_log_pz(model: LoadedModel, examples: list[Example], scheme: SamplingScheme, batch_size: int,
                  progress: bool | None = None) -> tuple[np.ndarray, int]:
    """log p_z of each example's target under `scheme` (natural log; -inf where p_z = 0), one
    teacher-forced pass (`extraction_logprobs_ids`), and how many targets were capped."""
    prompts, targets, capped = extraction_targets(model.tokenizer, examples, model_context(model.model))
    rows = extraction_logprobs_ids(model.model, prompts, targets, scheme, batch_size, padding_id(model.tokenizer),
                                   progress)
    return log_pz(rows), capped


def near_verbatim_log_bounds(model: LoadedModel, examples: list[Example], scheme: SamplingScheme, threshold: float,
                             beam_width: int, progress: bool | None = None) -> np.ndarray:
    """log of the decoding-constrained beam search's lower bound on P(near-verbatim) of each example's
    target (`constrained_beam.near_verbatim_bound_ids`, on `extraction_targets`' prompts and targets)."""
    prompts, targets, _ = extraction_targets(model.tokenizer, examples, model_context(model.model))

    def run_one(batch: list[int]) -> list[float]:
        return [near_verbatim_bound_ids(model.model, model.tokenizer, prompts[i], targets[i], scheme, threshold,
                                        beam_width).log_bound for i in batch]

    order = sorted(range(len(examples)), key=lambda i: -(len(prompts[i]) + len(targets[i])))
    done = run_batches([[i] for i in order], run_one, "near-verbatim search", progress)
    return np.array([done[i] for i in range(len(examples))], dtype=np.float64)


@register
class PaywallMemorization(Task):
    NAME = "paywall_memorization"
    VERSION = 2
    DESCRIPTION = ("Eidetic (forward-matching characters) and approximate (Levenshtein) memorization of held-back "
                   "continuations, and their extraction risk as a probability ((n, p)-discoverable, near-verbatim)")
    MODEL_KINDS = frozenset({ModelKind.CAUSAL_LM})
    HEADLINE = Headline(metric="approximate_mean", tags={"group": "members", "bin": "all"},
                        label="approximate memorization, members", better="lower")
    SUMMARY = (HEADLINE,
               Headline(metric="approximate_mean", tags={"group": "non_members", "bin": "all"},
                        label="approximate, non-members", better="lower"),
               Headline(metric="eidetic_mean", tags={"group": "members", "bin": "all"},
                        label="eidetic chars, members", better="lower"),
               Headline(metric="eidetic_mean", tags={"group": "non_members", "bin": "all"},
                        label="eidetic chars, non-members", better="lower"),
               Headline(metric="extractable", tags={"group": "members", "bin": "all", "attempts": "100",
                                                    "level": "0.5"},
                        label="(100, 0.5)-extractable, members", better="lower"),
               # the attempts first: its plot runs along n (the first numeric tag), every n a point
               Headline(metric="near_verbatim_extractable", tags={"attempts": "100", "group": "members", "bin": "all",
                                                                  "level": "0.5", "threshold": "0.9"},
                        label="near-verbatim extractable members, (100, 0.5)", better="lower", plot=True))
    Config = PaywallConfig
    NOT_SERVED = None
    # what only the report reads: changing one reports the cached records again, without a model pass
    REPORT_ONLY = frozenset({"n_bins", "extraction_attempts", "extraction_level"})

    def load_data(self, config: PaywallConfig, context: RunContext) -> PaywallData:
        return load_paywall_data(config.data, config.language, config.max_public_words, config.reference_seed,
                                 context.limit)

    def check_model(self, model: LoadedModel, config: PaywallConfig) -> None:
        """A served model: p_z needs a scheme a completions server's top log-probs determine
        (`served_top_n`), and the near-verbatim search runs the model in this process."""
        if not model.served:
            return
        if config.extraction:
            try:
                served_top_n(config.scheme())
            except UserError as err:
                raise UserError(f"{self.NAME}: {err}") from None
        if config.near_verbatim_beam:
            raise UserError(f"{self.NAME}: --near-verbatim-beam searches over the model's whole next-token "
                            "distributions, which a completions server does not return: score in-process")

    def lm_eval_export(self, data, config, tokenizer, context):
        from tasks.paywall_memorization.for_lm_eval import export

        return export(self, data, config, tokenizer, context)

    def score(self, model: LoadedModel, data: PaywallData, config: PaywallConfig, context: RunContext) -> Records:
        """Each article's greedy continuation and, with --extraction, its target's log p_z (and near-verbatim
        bound); records: `tasks.paywall_memorization.report`."""
        examples = data.examples
        tokenizer = model.tokenizer
        budgets = reference_budgets(tokenizer, examples)
        sentence = config.generation_end == "sentence"
        if sentence:
            budgets = [SENTENCE_BUDGET_FACTOR * budget for budget in budgets]
        generations, info = greedy_continuations(model.model, tokenizer, [e.prompt for e in examples], budgets,
                                                 batch_size=context.batch_size, progress=context.progress)
        generations = [g.lstrip() for g in generations]
        records = [{"id": e.article_id, "label": e.label, "public_words": e.public_words, "reference": e.reference,
                    "sentence_end_found": e.sentence_end_found} for e in examples]
        for record, generation in zip(records, generations):
            if sentence:  # greedy: cutting after the generation is what stopping at the sentence's end would give
                record["generation"], record["generation_sentence_end_found"] = first_sentence(generation,
                                                                                               config.language)
            else:
                record["generation"] = generation
        run_info = {"data_source": data.source, "generation": info.as_dict(),
                    "decoding": (f"greedy, left padding, budget = {SENTENCE_BUDGET_FACTOR} x reference token count "
                                 "(capped), cut at the end of its first sentence" if sentence else
                                 "greedy, left padding, budget = reference token count (capped)")}
        if config.extraction:
            scheme = config.scheme()
            extraction, capped = target_log_pz(model, examples, scheme, context.batch_size, context.progress)
            run_info["extraction"] = {  # the report adds the attempts and level (`extraction_info`)
                "scheme": scheme.as_dict(), "n_targets_capped": capped,
                "targets": "the reference's tokens (with the private part's leading whitespace) after the greedy "
                           "generation's prompt tokens, cut to its budget; one teacher-forced pass"}
            for record, value in zip(records, extraction):
                record["log_pz"] = float(value)
            if config.near_verbatim_beam:  # NaN: an article the bound did not run on (`near_verbatim_groups`)
                searched = [i for i, e in enumerate(examples) if config.near_verbatim_groups == "all" or e.label == 1]
                near = np.full(len(examples), np.nan)
                near[searched] = near_verbatim_log_bounds(model, [examples[i] for i in searched], scheme,
                                                          config.near_verbatim_threshold, config.near_verbatim_beam,
                                                          context.progress)
                for record, value in zip(records, near):
                    record["log_near_verbatim"] = float(value)
                run_info["near_verbatim"] = {
                    "threshold": config.near_verbatim_threshold, "beam_width": config.near_verbatim_beam,
                    "groups": config.near_verbatim_groups, "articles": len(searched),
                    "similarity": "approximate (1 - Levenshtein / longest, characters) of the continuation's "
                                  "decoded text against the target's",
                    # a bound below p_z would be a bug (README); rounding between the two passes is allowed
                    "n_bound_below_pz": int(np.sum(near < extraction - 1e-4))}
        return {"articles": data.n_articles, "too_short_to_split": data.n_too_short,
                "start_token": token_text(tokenizer, info.bos_token_id), "examples": records, "facts": run_info}

    def report(self, records: Records, config: PaywallConfig, seed: int) -> TaskResult:
        return report(records, config)

    def sample_values(self, records: Records) -> dict[str, dict]:
        """Each article's greedy continuation and its target's log p_z (the near-verbatim bound, a search
        over many continuations, is not scored again)."""
        return {e["id"]: {key: e[key] for key in ("generation", "log_pz") if key in e} for e in records["examples"]}

    def sample_data(self, data: PaywallData, config: PaywallConfig, ids: list[str]):
        wanted = set(ids)
        subset = dataclasses.replace(data, examples=[e for e in data.examples if e.article_id in wanted])
        return subset, config.model_copy(update={"near_verbatim_beam": 0})
