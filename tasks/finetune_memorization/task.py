"""Task `finetune_memorization`: memorization with known truth for any causal LM.

A copy of the submitted checkpoint continues training on the member half of a membership corpus (by
default the reference XSum split) with a fixed, recorded recipe (`harness.training.finetune`, the
engine privacy_extraction uses). Before training (epoch 0) and after each checkpoint epoch, members
are measured against held-out non-members: every membership attack that needs no second model
(`harness.scoring.membership`, mink_membership's code path), beside blind baselines; eidetic and
approximate memorization of each text's continuation (paywall_memorization's metrics); exact
memorization (Tirumala et al. 2022); the probability p_z that one draw of a sampling scheme reproduces
each text's continuation exactly, and the share (n, p)-discoverable (Hayes et al. 2024;
`harness.scoring.extraction_report`). A second fresh copy trained on the non-members instead is the
reversed control, measured the same way but for the greedy continuations. Ishihara & Takahashi 2024
measure the same growth with epochs on GPT-2s they pre-train. Definitions: README.md beside this file.
`score` trains the copies and reads every checkpoint into records; every metric is computed from them by
report.py beside this file (no model).
"""

from __future__ import annotations

import copy
import dataclasses
import time
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, PositiveInt

from harness.core.errors import UserError
from harness.core.model_types import LoadedModel, ModelKind
from harness.core.progress import sublabelled
from harness.core.records import Records
from harness.core.results import Headline
from harness.core.task import MAX_SEED, RunContext, Task, TaskResult, register
from harness.metrics import blind as b
from harness.metrics.blind import label_free_features
from harness.metrics.dataset_report import DatasetInferenceConfig, check_sides
from harness.scoring.batching import model_context, padding_id
from harness.scoring.causal import causal_token_logprobs
from harness.scoring.extraction import extraction_logprobs_ids, log_pz
from harness.scoring.extraction_report import ExtractionConfig
from harness.scoring.generation import greedy_continuations, prompt_cuts
from harness.scoring.membership import (
    dc_pdd_scores,
    gradnorm_scores,
    recall_scores,
    text_scores,
    token_frequencies,
)
from harness.training.finetune import (
    FinetuneSettings,
    finetune,
    shared_weights_copy,
    training_rows,
)
from harness.training.memory import check_fits, estimate, model_device, model_shape
from harness.training.method import FinetuneMethodConfig
from tasks.finetune_memorization.data import KnownData, load_known_data
from tasks.finetune_memorization.report import HEADLINE_SCORE, report

# The attacks that need no second model, in mink_membership's order; gradnorm (one backward pass per
# text and checkpoint) only when asked for.
ATTACKS = ("loss", "zlib", "min_k", "min_k_pp", "recall", "dc_pdd", "gradnorm")
DEFAULT_ATTACKS = ("loss", "zlib", "min_k", "min_k_pp", "recall", "dc_pdd")
# Blind baselines (Das et al. 2024) with mink_membership's defaults: 5 folds, the 34 most frequent
# words, TF-IDF, Gaussian naive Bayes, unigrams.
BLIND_FOLDS, BLIND_FEATURES = 5, 34


class FinetuneMemorizationConfig(ExtractionConfig, FinetuneMethodConfig, DatasetInferenceConfig):
    """The fine-tuning method, its learning rate and LoRA's settings: `FinetuneMethodConfig`; dataset
    inference's: `DatasetInferenceConfig`; (n, p)-discoverable extraction's: `ExtractionConfig`."""

    data: str = Field("reference", description="the membership corpus: 'reference' (English XSum, the split the "
                      "reference GPT-2s learn), 'reference:ja', or a JSONL file of {text, label} rows (1 = member)")
    reference_seed: int = Field(0, ge=0, le=MAX_SEED,
                                description="seed of the reference corpus member/non-member split")
    language: Literal["en", "ja"] = Field("en", description="word splitting: whitespace (en) or fugashi (ja)")
    members: PositiveInt = Field(64, description="members trained on, and as many held-out non-members: the "
                                 "first of each class with at least --words words")
    words: PositiveInt = Field(96, description="each text cut to its first N words: what trains and what is scored")
    prompt_words: PositiveInt = Field(72, description="memorization: the prompt is a text's first N words, the "
                                      "rest of its cut text (24 words at the defaults) the reference")
    epochs: tuple[PositiveInt, ...] = Field((1, 2, 4), min_length=1, description="epochs after which the trained "
                                            "copy is measured (it trains for the largest); epoch 0 is the checkpoint")
    finetune_batch_size: PositiveInt = Field(8, description="training batch size")
    finetune_seed: int = Field(0, ge=0, le=MAX_SEED, description="seed of the training order (and of a LoRA adapter)")
    control_epochs: int = Field(1, ge=0, description="the reversed control: a fresh copy trained this many epochs "
                                "on the non-members instead (0: none)")
    attacks: tuple[Literal[ATTACKS], ...] = Field(DEFAULT_ATTACKS, min_length=1, description="attacks to run "
                                                  "(gradnorm: a backward pass per text and checkpoint)")
    k_percents: tuple[Annotated[int, Field(ge=1, le=100)], ...] = Field(
        (5, 10, 20, 30, 40, 50, 60), min_length=1, description="k of Min-K%% and Min-K%%++ (the headline: 20)")
    fpr_levels: tuple[Annotated[float, Field(gt=0, lt=1)], ...] = Field((0.1, 0.01, 0.001), min_length=1,
                                                                        description="FPR levels for TPR@FPR")
    bootstrap_resamples: int = Field(1000, ge=10, description="resamples of the AUC and TPR bootstrap intervals")
    recall_shots: PositiveInt = Field(1, description="recall: non-members joined into the prefix (left out of "
                                      "ReCaLL's evaluation)")
    dc_pdd_cap: float = Field(0.01, gt=0, description="dc_pdd: the cap on each calibrated token score")
    gradnorm_p: Literal["1", "2", "inf"] = Field("inf", description="gradnorm: the p of each gradient p-norm")
    auc_threshold: float = Field(0.9, gt=0.5, lt=1, description="epochs_to_auc: the first measured epoch whose "
                                 "Min-K%% 20%% AUC reaches this")


def attack_scores(model: LoadedModel, net, data: KnownData, config: FinetuneMemorizationConfig,
                  frequencies: np.ndarray, batch_size: int, progress) -> tuple[dict[int, dict[str, float]], dict]:
    """Every selected attack's score of every text (index -> score name -> value) under `net` (the
    checkpoint or a trained copy of it, with `model`'s tokenizer); the token log-probs once for all
    the attacks that read them; and per-text facts (scored tokens, argmax hits)."""
    loaded = dataclasses.replace(model, model=net)
    texts = [t.text for t in data.texts]
    scored, _ = causal_token_logprobs(net, model.tokenizer, texts, batch_size=batch_size,
                                      distribution_stats="min_k_pp" in config.attacks, progress=progress,
                                      top_logprobs=True)
    target = {i: s for i, s in enumerate(scored) if len(s.logprobs)}
    values = {i: text_scores(texts[i], s, config.k_percents, config.attacks) for i, s in target.items()}
    by_key = {i: texts[i] for i in target}
    if "recall" in config.attacks:
        shots = [i for i, t in enumerate(data.texts) if t.label == 0][: config.recall_shots]
        prefix = "".join(texts[i] for i in shots)
        kept = {i: text for i, text in by_key.items() if i not in shots}
        found, _, _ = recall_scores(loaded, kept, target, prefix, None, True, batch_size, progress)
        for i, value in found.items():
            values[i]["recall"] = value
    if "dc_pdd" in config.attacks:
        for i, value in dc_pdd_scores(frequencies, target, config.dc_pdd_cap).items():
            values[i]["dc_pdd"] = value
    if "gradnorm" in config.attacks:
        for i, value in gradnorm_scores(loaded, by_key, float(config.gradnorm_p), True, batch_size, progress).items():
            values[i]["gradnorm"] = value
    facts = {i: {"tokens": int(len(s.logprobs)), "argmax_hits": int(s.argmax_hits().sum())}
             for i, s in target.items()}
    return values, facts


def continuation_ids(tokenizer, data: KnownData) -> list[list[int]]:
    """Each text's continuation as tokens (no special tokens): the greedy continuation's budget and p_z's target."""
    return tokenizer([t.continuation for t in data.texts], add_special_tokens=False)["input_ids"]


def greedy_generations(net, tokenizer, data: KnownData, batch_size: int, progress) -> list[str]:
    """paywall_memorization's reading of each text's continuation: the greedy continuation of its prompt (as
    many tokens as the continuation has), its leading whitespace stripped; the report compares it with the
    text's reference (eidetic and approximate memorization)."""
    budgets = [len(ids) for ids in continuation_ids(tokenizer, data)]
    generated, _ = greedy_continuations(net, tokenizer, [t.prompt for t in data.texts], budgets,
                                        batch_size=batch_size, progress=progress)
    return [g.lstrip() for g in generated]


def continuation_log_pz(net, tokenizer, data: KnownData, config: FinetuneMemorizationConfig, batch_size: int,
                        progress) -> np.ndarray:
    """log p_z of each text's continuation under the configured sampling scheme, one teacher-forced pass
    (`extraction.extraction_logprobs_ids`), on the very prompt tokens and budget the greedy continuation
    has (`generation.prompt_cuts`, as paywall_memorization's `extraction_targets`): the target is the
    continuation's tokens cut to that budget, so greedy decoding gives p_z = 1 exactly where the greedy
    continuation is the target."""
    continuations = continuation_ids(tokenizer, data)
    _, cut, budgets, _, _ = prompt_cuts(tokenizer, [t.prompt for t in data.texts], [len(ids) for ids in continuations],
                                        model_context(net))
    targets = [list(ids[:budget]) for ids, budget in zip(continuations, budgets)]
    rows = extraction_logprobs_ids(net, cut, targets, config.scheme(), batch_size, padding_id(tokenizer), progress)
    return log_pz(rows)


def blind_scores(data: KnownData, seed: int) -> tuple[list[dict[str, float]], dict]:
    """The blind baselines' out-of-fold scores of the cut texts (no model: one reading for every checkpoint),
    a dict per text: bag of words and latest year (`harness.metrics.blind`, mink_membership's defaults);
    and facts about them (texts with a year, the date cutoffs)."""
    texts = [t.text for t in data.texts]
    labels = np.array([t.label for t in data.texts], dtype=int)
    out: list[dict[str, float]] = [{} for _ in texts]
    facts: dict = {}
    bow = b.bag_of_words_scores(texts, labels, BLIND_FOLDS, seed, BLIND_FEATURES, "tfidf", "gaussian_nb", 1)
    for row, value in zip(out, bow if bow is not None else ()):
        row["blind_bow"] = float(value)
    years = [b.latest_year(text) for text in texts]
    facts["texts_with_year"] = sum(year is not None for year in years)
    found = b.date_scores_cv(years, labels, BLIND_FOLDS, seed) if facts["texts_with_year"] else None
    if found is not None:
        scores, facts["date_cutoffs"] = found
        for row, value in zip(out, scores):
            row["blind_date"] = float(value)
    return out, facts


def training_memory(model: LoadedModel, config: FinetuneMemorizationConfig) -> dict:
    """A one-line refusal when training a copy does not fit the device now (`memory.check_fits`,
    estimated at rows of 2 tokens a word, at most the context); else the estimate for the results file."""
    tokens = min(2 * config.words, model_context(model.model) - 1)

    def estimate_for(method: str):
        shape = model_shape(model.model, False, 1, tokens)
        return estimate(shape, method, config.finetune_batch_size, model_device(model.model).type == "cuda",
                        config.lora_rank, config.lora_target_modules)

    return check_fits(FinetuneMemorization.NAME, model.name, model.dtype, config.finetune_method, config.lora_rank,
                      estimate_for, model_device(model.model))


@register
class FinetuneMemorization(Task):
    NAME = "finetune_memorization"
    VERSION = 7  # 7: dataset inference weighs each score only in its direction of "seen" (--di-direction seen); a score
    # missing on over 5% of the texts is left out of it (6: a ridge-penalised model, --di-penalty 0.1, and a share bound)
    DESCRIPTION = ("Memorization with known truth: a copy trained on known members, then membership attacks, "
                   "eidetic/approximate and exact memorization and the continuations' extraction probability "
                   "against held-out non-members, epoch by epoch")
    MODEL_KINDS = frozenset({ModelKind.CAUSAL_LM})
    HEADLINE = Headline(metric="auc", tags={"score": HEADLINE_SCORE, "epoch": "1", "trained_on": "members"},
                        label="Min-K% 20% AUC after 1 epoch", better="lower")
    SUMMARY = (HEADLINE,
               Headline(metric="di_p_value", tags={"epoch": "1", "trained_on": "members"},
                        label="dataset inference p, 1 epoch", better="higher", plot=True,
                        log_scale=True, reference_line=0.05),
               Headline(metric="epochs_to_auc", tags={"score": HEADLINE_SCORE, "threshold": "0.9"},
                        label="epochs to Min-K% AUC 0.9", better="higher"),
               # the epoch first: the plot runs along it (the first numeric tag), not along the attempts
               Headline(metric="extractable", tags={"epoch": "4", "trained_on": "members", "group": "members",
                                                    "attempts": "100", "level": "0.5"},
                        label="(100, 0.5)-extractable members, 4 epochs", better="lower", plot=True),
               Headline(metric="auc", tags={"score": "loss", "epoch": "1", "trained_on": "members"},
                        label="loss AUC, 1 epoch", better="lower"),
               Headline(metric="exact_memorization", tags={"group": "gap", "epoch": "1", "trained_on": "members"},
                        label="exact memorization gap, 1 epoch", better="lower"),
               Headline(metric="approximate_mean", tags={"group": "gap", "epoch": "1", "trained_on": "members"},
                        label="approximate memorization gap, 1 epoch", better="lower"),
               Headline(metric="auc", tags={"score": HEADLINE_SCORE, "epoch": "0", "trained_on": "members"},
                        label="Min-K% 20% AUC, epoch 0 (control: 0.5)", better="ideal", ideal=0.5),
               Headline(metric="auc", tags={"score": HEADLINE_SCORE, "epoch": "1", "trained_on": "non_members"},
                        label="Min-K% 20% AUC, trained on non-members (control: < 0.5)", better="lower"),
               Headline(metric="auc", tags={"score": "blind_bow"}, label="blind BoW AUC", better="ideal", ideal=0.5))
    Config = FinetuneMemorizationConfig
    NOT_SERVED = "it fine-tunes the model's weights, which a completions server does not expose"
    # what only the report reads: changing one reports the cached records again, without a model pass
    REPORT_ONLY = frozenset({"fpr_levels", "bootstrap_resamples", "auc_threshold", "extraction_attempts",
                             "extraction_level", "dataset_inference", "di_alpha", "di_splits", "di_permutations",
                             "di_penalty", "di_direction"})

    def load_data(self, config: FinetuneMemorizationConfig, context: RunContext) -> KnownData:
        data = load_known_data(config.data, config.reference_seed, config.members, config.words, config.prompt_words,
                               config.language, context.limit)
        check_sides(config, [t.label for t in data.texts], data.source)
        seen = set()
        for t in data.texts:  # each text's readings are recorded under its id
            if t.text_id in seen:
                raise UserError(f"{data.source}: id {t.text_id!r} names two texts; each text needs an id of its own")
            seen.add(t.text_id)
        return data

    def settings(self, model: LoadedModel, config: FinetuneMemorizationConfig) -> FinetuneSettings:
        """The training recipe: every text one row ([BOS] + text, at most the context)."""
        return FinetuneSettings(max(config.epochs), config.learning_rate, config.finetune_batch_size,
                                config.finetune_seed, 1, model_context(model.model) - 1, config.lora_settings())

    def check_model(self, model: LoadedModel, config: FinetuneMemorizationConfig) -> None:
        training_memory(model, config)

    def score(self, model: LoadedModel, data: KnownData, config: FinetuneMemorizationConfig,
              context: RunContext) -> Records:
        """Train the copies and read every checkpoint: each text's attack scores, scored tokens and argmax hits,
        log p_z of its continuation and (trained on the members) its greedy continuation; beside them the blind
        baselines' scores and the IID guard's features (no model); records: `tasks.finetune_memorization.report`."""
        memory = training_memory(model, config)  # before anything is copied
        batch, progress, tokenizer = context.batch_size, context.progress, model.tokenizer
        nonmember_texts = [t.text for t in data.texts if t.label == 0]
        frequencies = token_frequencies(tokenizer, nonmember_texts) if "dc_pdd" in config.attacks else None
        checkpoints, readings, evaluation = [], [], {}

        def measure(net, epoch: int, trained_on: str, with_continuations: bool = True) -> None:
            """One checkpoint's model passes, timed (the evaluation's seconds: these passes only)."""
            started = time.perf_counter()
            values, facts = attack_scores(model, net, data, config, frequencies, batch, progress)
            log_p = continuation_log_pz(net, tokenizer, data, config, batch, progress) if config.extraction else None
            generated = greedy_generations(net, tokenizer, data, batch, progress) if with_continuations else None
            checkpoint = f"{trained_on}@{epoch}"
            evaluation[checkpoint] = round(time.perf_counter() - started, 2)
            checkpoints.append({"id": checkpoint, "epoch": epoch, "trained_on": trained_on,
                                "continuations": with_continuations})
            for i, t in enumerate(data.texts):
                row = {"id": f"{checkpoint}/{t.text_id}", "checkpoint": checkpoint, "text": t.text_id,
                       "scores": values.get(i, {}), **facts.get(i, {})}
                if log_p is not None:
                    row["log_pz"] = float(log_p[i])
                if generated is not None:
                    row["generation"] = generated[i]
                readings.append(row)

        # epoch 0, the checkpoint itself, is where both trainings start
        measure(model.model, 0, "members")
        settings = self.settings(model, config)
        training = {}
        control = {config.control_epochs} if config.control_epochs else set()
        for trained_on, label, epochs in (("members", 1, set(config.epochs)), ("non_members", 0, control)):
            if not epochs:
                continue
            chosen = [t.text for t in data.texts if t.label == label]
            rows = training_rows(tokenizer, [("", text) for text in chosen], [1] * len(chosen), False, settings)

            def on_checkpoint(epoch: int, net, trained_on: str = trained_on) -> None:
                measure(net, epoch, trained_on, trained_on == "members")

            tuned = copy.deepcopy(model.model) if settings.lora is None else shared_weights_copy(model.model)
            with sublabelled(f"trained on {trained_on.replace('_', '-')}"):
                training[trained_on] = finetune(tuned, tokenizer, rows,
                                                dataclasses.replace(settings, epochs=max(epochs),
                                                                    dp=config.dp_settings(len(rows))),
                                                epochs, on_checkpoint, progress)
            del tuned
        blind, blind_facts = blind_scores(data, context.seed)
        features, feature_names = label_free_features([t.text for t in data.texts])  # the IID guard's
        # the recipe as before DP existed: a DP run's record is in each training's facts (`dp`)
        recipe = {key: value for key, value in dataclasses.asdict(settings).items() if key != "dp"}
        facts = {"data_source": data.source, "training": {**training, "recipe": recipe}, "training_memory": memory,
                 "evaluation_seconds": evaluation, "blind": blind_facts}
        if config.extraction:  # the report adds the attempts and level (`extraction_info`)
            facts["extraction"] = {"scheme": config.scheme().as_dict(),
                                   "targets": "each text's continuation given its prompt (the greedy one's reference)"}
        return {"texts": [{"id": t.text_id, "label": t.label, "reference": t.reference, "blind": scores}
                          for t, scores in zip(data.texts, blind)],
                "too_short": data.too_short, "checkpoints": checkpoints, "readings": readings,
                "guard": {"features": features, "names": feature_names}, "facts": facts}

    def report(self, records: Records, config: FinetuneMemorizationConfig, seed: int) -> TaskResult:
        return report(records, config, seed)
