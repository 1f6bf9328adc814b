"""Task `mink_membership`: membership inference with LOSS, zlib, Min-K% Prob and Min-K%++ scores.

Shi et al. 2024 ("Detecting Pretraining Data from Large Language Models"), as used there: each text
cut to its first L words, scored by a causal LM, and each score's ability to tell members from
non-members measured by ROC AUC and TPR at low FPR. Definitions: README.md beside this file.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, PositiveInt, model_validator

from harness.core.errors import UserError
from harness.core.model_types import LoadedModel, ModelKind
from harness.core.records import Records
from harness.core.results import Headline
from harness.core.task import MAX_SEED, PaperPreset, RunContext, Task, TaskResult, register
from harness.metrics.blind import label_free_features
from harness.metrics.dataset_report import DatasetInferenceConfig, check_sides
from harness.metrics.membership_report import ATTACK_ORDER, score_names
from harness.scoring.causal import causal_token_logprobs, token_text
from harness.scoring.membership import dc_pdd_scores, gradnorm_scores, recall_scores, text_scores, token_frequencies
from harness.scoring.text import truncate_words
from tasks.mink_membership.attacks import dc_pdd_corpus, neighbourhood_scores, recall_prefix, reference_scores
from tasks.mink_membership.blind import BLIND, SCORE, blind_scores
from tasks.mink_membership.data import MembershipData, load_membership_data
from tasks.mink_membership.report import report


ATTACKS = ATTACK_ORDER
# the attacks whose score of a text reads only the text's own token log-probs
OWN_ATTACKS = ("loss", "zlib", "min_k", "min_k_pp")
# The attacks a model on a completions server cannot run (`LoadedModel.served`), and why.
ATTACKS_NOT_SERVED = {
    "min_k_pp": "Min-K%++ needs the mean and variance of the whole next-token distribution, which a completions "
                "server does not return",
    "gradnorm": "the gradient norm needs gradients of the model's weights, which a completions server does not expose"}
ROLES = {"ref": "reference_model", "ne": "neighbour_model"}  # attack -> the setting naming its model


# dataset inference's relabelings per test: it runs at every length, on a scoring pass that takes seconds on a
# small model; 49 kept its cost within 5% of the task's (bench_dataset_inference), where finetune_memorization's
# 99 (`dataset_inference.PERMUTATIONS`) cost 1% of one training run. 39 (since v11) gives a test of size exactly
# 0.05 at the default alpha (`dataset_inference.test_size`: 49 gave 0.04) and a floor of 1 / 40 = 0.025
DI_PERMUTATIONS = 39

# the headline's k of Min-K% and Min-K%++, declared before seeing data; the seed paper's (Ishihara & Takahashi
# 2024) is 10: "k = 20 did not show sufficient performance"
HEADLINE_K = 20
# the seed paper's conditions (`--preset paper`): its k (§5.2) and its prefix lengths. The paper cut its articles
# to 32, 64, 128, 256 and 512 words (§5.1), all trained whole. The English reference members were trained on
# their first 250 words only (`harness.reference.train.TrainConfig.max_words_per_document`), so in English paper
# mode stops at 128 words, where every prefix lies in trained text; the Japanese members were trained whole
# (`harness.reference.build.reference_builds`: up to 512 words, none cut to the context), so under
# `--language ja` it keeps the paper's five lengths (`PAPER_LENGTHS_JA`)
PAPER_SETTINGS = {"headline_k": 10, "lengths": (32, 64, 128)}
PAPER_LENGTHS_JA = (32, 64, 128, 256, 512)


class MinkConfig(PaperPreset, DatasetInferenceConfig):
    PAPER = PAPER_SETTINGS
    di_permutations: PositiveInt = Field(
        DI_PERMUTATIONS, description=DatasetInferenceConfig.model_fields["di_permutations"].description)
    di_stop_early: bool = Field(True, description="dataset inference: compute what the decision at --di-alpha "
                                "needs: a test's relabelings stop once it cannot reject (Besag & Clifford's "
                                "sequential p-value, coarser above alpha), and a curve point (whose answer is its "
                                "decision) has the fewest relabelings that can reject; false: every relabeling "
                                "of --di-permutations, at every curve point too")
    data: str = Field("reference", description="JSONL file ({text, label}), a hub dataset id "
                      "(text/label columns, WikiMIA's input/label), or a reference corpus: "
                      "'reference' (English XSum), 'reference:ja' (Japanese), 'reference:shifted' (the XSum "
                      "members against StereoSet non-members: a control whose sets differ in source) or "
                      "'reference:era' (against later XSum articles: sets that differ in era only)")
    split: str = Field("train", description="split(s) of a hub dataset, comma-separated; 'all' for WikiMIA's "
                       "four length splits")
    subset: str | None = Field(None, description="configuration of a hub dataset (MIMIR's domain, e.g. arxiv)")
    text_column: str | None = Field(None, description="text column of a hub dataset (default: text or input)")
    label_column: str = Field("label", description="label column of a hub dataset (1 = member)")
    reference_seed: int = Field(0, ge=0, le=MAX_SEED,
                                description="seed of the reference corpus member/non-member split")
    language: Literal["en", "ja"] = Field("en", description="word splitting: whitespace (en) or fugashi (ja)")
    lengths: tuple[PositiveInt, ...] = Field((32, 64, 128, 256, 512), min_length=1,
                                             description="prefix lengths L in words")
    k_percents: tuple[Annotated[int, Field(ge=1, le=100)], ...] = Field(
        (5, 10, 20, 30, 40, 50, 60), min_length=1, description="k of Min-K%% and Min-K%%++ (the sweep)")
    headline_k: int = Field(HEADLINE_K, ge=1, le=100, description="k of the board's headline Min-K%% and "
                            "Min-K%%++ AUCs, one of --k-percents (20, declared before seeing data; the seed "
                            "paper's 10 with --preset paper)")
    fpr_levels: tuple[Annotated[float, Field(gt=0, lt=1)], ...] = Field((0.1, 0.01, 0.001), min_length=1,
                                                                        description="FPR levels for TPR@FPR")
    bootstrap_resamples: int = Field(1000, ge=10, description="resamples of the AUC and TPR bootstrap intervals")
    stride: int | None = Field(None, ge=1, description="sliding-window stride for texts longer than the "
                               "context (default: half the context)")
    first_token: Literal["score", "skip"] = Field(
        "score", description="score: prepend the tokenizer's BOS so the first text token is scored too "
        "(lm-eval's convention); skip: prepend nothing, the first token is context only (MIMIR, Min-K%% and "
        "Min-K%%++ code on tokenizers that add no BOS, e.g. GPT-2, Pythia)")
    attacks: tuple[Literal[ATTACKS], ...] = Field(
        ATTACKS, min_length=1, description="attacks to run; ref and ne run only with --reference-model / "
        "--neighbour-model (when not named here on purpose: then those are required)")
    reference_model: str | None = Field(None, description="ref: the reference causal LM (hub id, path or "
                                        "reference:<checkpoint>), its own tokenizer")
    neighbour_model: str | None = Field(None, description="ne: the masked LM that makes neighbours (hub id, "
                                        "path or reference:<checkpoint>; MIMIR's default is bert-base-uncased)")
    neighbours: PositiveInt = Field(25, description="ne: neighbours per text (MIMIR's configs: 25)")
    neighbour_swap_fraction: float = Field(0.05, gt=0, le=1, description="ne: fraction of a text's tokens "
                                           "each neighbour swaps (MIMIR's pct_swap_bert)")
    recall_prefix: str = Field("nonmembers", description="recall: the prefix texts: 'nonmembers' (the first "
                               "--recall-shots non-members of the data, then left out of recall's metrics) "
                               "or a file (JSONL with text, or one text per line)")
    recall_shots: PositiveInt = Field(1, description="recall: texts joined into the prefix (MIMIR's num_shots)")
    recall_prefix_tokens: PositiveInt | None = Field(
        None, description="recall: cut the prefix to its first N tokens, BOS included (default: half the "
        "model's context)")
    dc_pdd_corpus: str = Field("nonmembers", description="dc_pdd: token frequencies from 'nonmembers' (the "
                               "data's non-member texts), 'outside' (with a reference corpus as --data: its "
                               "source's documents beyond the corpus) or a file (JSONL with text, or one text "
                               "per line)")
    dc_pdd_cap: float = Field(0.01, gt=0, description="dc_pdd: the cap a on each calibrated token score")
    gradnorm_p: Literal["1", "2", "inf"] = Field("inf", description="gradnorm: the p of each gradient p-norm "
                                                  "(MIMIR's default inf)")
    blind_baselines: tuple[Literal[BLIND], ...] = Field(
        BLIND, description="blind baselines scored beside the attacks on the same texts, without the model "
        "(Das et al. 2024): bag_of_words, date; empty: none")
    blind_folds: int = Field(5, ge=2, description="blind baselines: folds of the stratified cross-validation that "
                             "scores every text out of fold")
    blind_max_features: PositiveInt = Field(34, description="bag_of_words: the most frequent n-grams kept "
                                            "(Das et al.'s WikiMIA setting)")
    blind_vectorizer: Literal["tfidf", "count"] = Field("tfidf", description="bag_of_words: TF-IDF or raw counts")
    blind_classifier: Literal["gaussian_nb", "multinomial_nb"] = Field(
        "gaussian_nb", description="bag_of_words: Gaussian or multinomial naive Bayes")
    blind_ngrams: PositiveInt = Field(1, description="bag_of_words: n-grams of 1 to N words (Das et al.: 1)")
    blind_date_cutoff: int | None = Field(None, description="date: the training cutoff year (texts whose latest "
                                          "year is before it are members); default: chosen on the training folds")
    attack_lengths: tuple[PositiveInt, ...] | None = Field(
        None, min_length=1, description="lengths L at which ref, ne, recall, dc_pdd and gradnorm run (default: "
        "every --lengths); ne scores N + 1 texts per text, gradnorm one backward pass per text")

    @classmethod
    def paper_settings(cls, given: dict[str, Any]) -> dict[str, Any]:
        """`PAPER`, with the paper's five prefix lengths (`PAPER_LENGTHS_JA`) under `--language ja`."""
        return {**cls.PAPER, **({"lengths": PAPER_LENGTHS_JA} if given.get("language") == "ja" else {})}

    @model_validator(mode="after")
    def _headline_k_in_sweep(self) -> "MinkConfig":
        if self.headline_k not in self.k_percents:
            raise ValueError(f"--headline-k {self.headline_k} is not among --k-percents "
                             f"{','.join(map(str, self.k_percents))}: the headline reads a k the sweep scores")
        return self


def min_k_headline(k: int) -> Headline:
    """The board's headline: Min-K% Prob's AUC at k% and 128 words."""
    return Headline(metric="auc", tags={"score": f"min_k_{k}", "length": "128"},
                    label=f"Min-K% {k}% AUC, 128 words", better="lower")


def summary_at(k: int) -> tuple[Headline, ...]:
    """The board's summary of the task, its Min-K% and Min-K%++ columns at k%."""
    return (min_k_headline(k),
            Headline(metric="di_p_value", tags={"length": "128"}, label="dataset inference p, 128",
                     better="higher", plot=True,
                     log_scale=True, reference_line=0.05),
            Headline(metric="auc", tags={"score": f"min_k_pp_{k}", "length": "128"},
                     label=f"Min-K%++ {k}% AUC, 128", better="lower"),
            Headline(metric="auc", tags={"score": "loss", "length": "128"}, label="loss AUC, 128", better="lower"),
            Headline(metric="auc", tags={"score": "zlib", "length": "128"}, label="zlib AUC, 128", better="lower"),
            Headline(metric="auc", tags={"score": "ref", "length": "128"}, label="ref AUC, 128", better="lower"),
            Headline(metric="auc", tags={"score": "ne", "length": "128"}, label="ne AUC, 128", better="lower"),
            Headline(metric="auc", tags={"score": "recall", "length": "128"}, label="ReCaLL AUC, 128",
                     better="lower"),
            Headline(metric="auc", tags={"score": "dc_pdd", "length": "128"}, label="DC-PDD AUC, 128",
                     better="lower"),
            Headline(metric="auc", tags={"score": "gradnorm", "length": "128"}, label="gradnorm AUC, 128",
                     better="lower"),
            # a property of the data, not of the model: 0.5 = members and non-members alike
            Headline(metric="auc", tags={"score": "blind_bow", "length": "128"}, label="blind BoW AUC, 128",
                     better="ideal", ideal=0.5),
            Headline(metric="auc", tags={"score": "blind_date", "length": "128"}, label="blind date AUC, 128",
                     better="ideal", ideal=0.5))


@register
class MinkMembership(Task):
    NAME = "mink_membership"
    VERSION = 13  # 13: dataset inference weighs each score only in its direction of "seen" (--di-direction seen); a score
    # missing on over 5% of the texts (ReCaLL past the context) is left out of it (12: a ridge-penalised model)
    DESCRIPTION = ("Membership inference: LOSS, zlib, Min-K% Prob, Min-K%++, reference model, neighbourhood, ReCaLL, "
                   "DC-PDD and gradient norm beside blind baselines; AUC / TPR@FPR per prefix length")
    MODEL_KINDS = frozenset({ModelKind.CAUSAL_LM})
    HEADLINE = min_k_headline(HEADLINE_K)
    SUMMARY = summary_at(HEADLINE_K)
    Config = MinkConfig
    NOT_SERVED = None  # a served model runs all attacks but `ATTACKS_NOT_SERVED`
    # what only the report reads: changing one reports the cached records again, without a model pass
    REPORT_ONLY = frozenset({"dataset_inference", "di_alpha", "di_splits", "di_permutations", "di_penalty",
                             "di_direction", "di_stop_early", "headline_k", "fpr_levels", "bootstrap_resamples"})

    def headlines(self, config: MinkConfig) -> tuple[Headline, tuple[Headline, ...]]:
        """The headline and summary with the Min-K% and Min-K%++ AUCs at `--headline-k`."""
        return min_k_headline(config.headline_k), summary_at(config.headline_k)

    def load_data(self, config: MinkConfig, context: RunContext) -> MembershipData:
        data = load_membership_data(config.data, config.split, config.text_column, config.label_column,
                                    config.reference_seed, context.limit, config.subset)
        check_sides(config, [t.label for t in data.texts], data.source)
        return data

    def lm_eval_export(self, data, config, tokenizer, context):
        from tasks.mink_membership.for_lm_eval import export

        return export(self, data, config, tokenizer, context)

    def auxiliary_models(self, config: MinkConfig) -> dict[str, str]:
        return {role: getattr(config, role) for attack, role in ROLES.items()
                if attack in config.attacks and getattr(config, role)}

    def check_model(self, model: LoadedModel, config: MinkConfig) -> None:
        if "attacks" in config.model_fields_set:
            for attack, role in ROLES.items():
                if attack in config.attacks and not getattr(config, role):
                    raise UserError(f"{self.NAME}: --attacks names {attack}, which needs --{role.replace('_', '-')}")
            named = [a for a in ATTACKS_NOT_SERVED if a in config.attacks]
            if model.served and named:
                raise UserError(f"{self.NAME}: --attacks names {named[0]}, which a served model cannot run: "
                                f"{ATTACKS_NOT_SERVED[named[0]]}")

    def score(self, model: LoadedModel, data: MembershipData, config: MinkConfig, context: RunContext) -> Records:
        """Every text's prefixes scored by the model and the selected attacks, and beside them the blind
        baselines' scores and the IID guard's features (model-free, per text); records: `report`. A served
        model runs every attack but those `ATTACKS_NOT_SERVED` names (recorded with the reason in `attacks_not_run`)."""
        not_served = {a: reason for a, reason in ATTACKS_NOT_SERVED.items() if model.served and a in config.attacks}
        if not_served:
            config = config.model_copy(update={"attacks": tuple(a for a in config.attacks if a not in not_served)})
        prefixes = {}  # (text index, L) -> the text cut to its first L words
        for i, item in enumerate(data.texts):
            for length in config.lengths:
                cut = truncate_words(item.text, length, config.language)
                if cut is not None:
                    prefixes[i, length] = cut
        keys = list(prefixes)
        token_scores, scoring = causal_token_logprobs(
            model.model, model.tokenizer, [prefixes[k] for k in keys], batch_size=context.batch_size,
            stride=config.stride, distribution_stats="min_k_pp" in config.attacks, progress=context.progress,
            add_start=config.first_token == "score")
        target = {k: scores for k, scores in zip(keys, token_scores) if len(scores.logprobs)}
        extra, info = self.other_attacks(model, data, config, context, prefixes, target)
        if not_served:
            info["attacks_not_run"] = {**info.get("attacks_not_run", {}), **not_served}
        blind, blind_facts = {}, {}
        for length in config.lengths:
            kept = [k for k in keys if k[1] == length and k in target]
            scored, facts = blind_scores({k: prefixes[k] for k in kept}, {k: data.texts[k[0]].label for k in kept},
                                         config, context.seed)
            blind |= scored
            if facts:
                blind_facts[str(length)] = facts
        records = []
        for i, length in keys:
            if (i, length) not in target:
                continue
            scores = target[i, length]
            values = text_scores(prefixes[i, length], scores, config.k_percents, config.attacks)
            values |= {attack: found[i, length] for attack, found in extra.items() if (i, length) in found}
            values |= blind.get((i, length), {})
            text = data.texts[i]
            records.append({"id": f"{text.text_id}@{length}", "text": text.text_id, "label": text.label,
                            "length": length, "n_tokens": int(len(scores.logprobs)), "scores": values})
        reach: dict[int, int] = {}  # text index -> the longest prefix of it the model scored
        for i, length in target:
            reach[i] = max(length, reach.get(i, 0))
        guard = None
        if reach:  # the IID guard's features: each text at its longest scored prefix
            scored = sorted(reach)
            features, feature_names = label_free_features([prefixes[i, reach[i]] for i in scored])
            guard = {"labels": [data.texts[i].label for i in scored], "features": features, "names": feature_names}
        unscored = {str(length): {"too_short": sum((i, length) not in prefixes for i in range(len(data.texts))),
                                  "no_scored_token": sum(1 for k in keys if k[1] == length and k not in target)}
                    for length in config.lengths}
        names = score_names(config.k_percents, config.attacks) + [SCORE[b] for b in config.blind_baselines]
        return {"texts": len(data.texts), "lengths": list(config.lengths), "score_names": names,
                "attacks_run": list(extra), "start_token": token_text(model.tokenizer, scoring.bos_token_id),
                "prefixes": records, "unscored": unscored, "guard": guard,
                "facts": {"data_source": data.source, "scoring": scoring.as_dict(),
                          "bos": "prepended" if scoring.first_token_scored else "none: first token unscored",
                          **info, "blind": blind_facts}}

    def report(self, records: Records, config: MinkConfig, seed: int) -> TaskResult:
        return report(records, config, seed)

    def sample_values(self, records: Records) -> dict[str, dict]:
        """Each prefix's scores from its own token log-probs (LOSS, zlib, Min-K%, Min-K%++): the others
        read other texts (ReCaLL's prefix, DC-PDD's frequencies, the blind baselines' folds) or models."""
        own = {name for name in records["score_names"] if name in OWN_ATTACKS or name.startswith("min_k_")}
        return {p["id"]: {name: value for name, value in p["scores"].items() if name in own}
                for p in records["prefixes"]}

    def sample_data(self, data: MembershipData, config: MinkConfig, ids: list[str]):
        wanted = {item.rsplit("@", 1)[0] for item in ids}
        own = config.model_copy(update={"attacks": tuple(a for a in config.attacks if a in OWN_ATTACKS),
                                        "blind_baselines": ()})
        return dataclasses.replace(data, texts=[t for t in data.texts if t.text_id in wanted]), own

    def other_attacks(self, model: LoadedModel, data: MembershipData, config: MinkConfig, context: RunContext,
                      prefixes: dict, target: dict) -> tuple[dict[str, dict], dict]:
        """The scores of ref, ne, recall, dc_pdd and gradnorm (those selected and runnable), attack ->
        (text index, L) -> score, and facts about them for the results file."""
        batch, progress = context.batch_size, context.progress
        lengths = set(config.attack_lengths or config.lengths)
        target = {k: scores for k, scores in target.items() if k[1] in lengths}
        texts = {k: prefixes[k] for k in target}
        nonmembers = [(i, t.text) for i, t in enumerate(data.texts) if t.label == 0]
        extra, facts, not_run = {}, {}, {}
        for attack, role in ROLES.items():
            if attack in config.attacks and role not in context.models:
                not_run[attack] = f"no --{role.replace('_', '-')} given"
        if "ref" in config.attacks and "ref" not in not_run:
            reference = context.models["reference_model"]
            extra["ref"] = reference_scores(reference, texts, target, config, batch, progress)
            facts["ref"] = {"reference_model": config.reference_model, "identity": reference.identity,
                            "source": reference.source}
        if "ne" in config.attacks and "ne" not in not_run:
            masked = context.models["neighbour_model"]
            extra["ne"], made = neighbourhood_scores(model, masked, texts, target, config, context.seed, batch,
                                                     progress)
            facts["ne"] = {"neighbour_model": config.neighbour_model, "identity": masked.identity,
                           "neighbours": config.neighbours, "neighbours_per_text_mean": round(float(np.mean(
                               list(made.values()))), 3) if made else None, "seed": context.seed}
        if "recall" in config.attacks:
            prefix, used = recall_prefix(config, nonmembers)
            kept = {k: text for k, text in texts.items() if k[0] not in set(used)}
            extra["recall"], prefix_tokens, too_long = recall_scores(
                model, kept, target, prefix, config.recall_prefix_tokens, config.first_token == "score", batch, progress)
            facts["recall"] = {"prefix": config.recall_prefix, "shots": config.recall_shots,
                               "prefix_tokens": prefix_tokens, "prefix_text_ids": [data.texts[i].text_id for i in used],
                               "texts_over_context": too_long}
        if "dc_pdd" in config.attacks:
            corpus, described = dc_pdd_corpus(config, [text for _, text in nonmembers])
            extra["dc_pdd"] = dc_pdd_scores(token_frequencies(model.tokenizer, corpus), target, config.dc_pdd_cap)
            facts["dc_pdd"] = {"corpus": described, "cap": config.dc_pdd_cap}
        if "gradnorm" in config.attacks:
            extra["gradnorm"] = gradnorm_scores(model, texts, float(config.gradnorm_p), config.first_token == "score",
                                                batch, progress)
            facts["gradnorm"] = {"p": config.gradnorm_p}
        info = {"attacks": facts, "attack_lengths": sorted(lengths)}
        if not_run:
            info["attacks_not_run"] = not_run
        return extra, info
