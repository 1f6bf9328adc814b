"""Task `privacy_extraction`: memorization and PII leakage after fine-tuning (Yoon & Lee).

A copy of the submitted checkpoint is fine-tuned on synthetic secrets (random strings seen 1-5
times, unique random strings, synthetic persons with PII) and asked to reproduce them from their
prompts after each checkpoint epoch; the checkpoint itself (epoch 0) is the public model. The
fine-tuning is repeated with `finetune_seeds` seeds, each on a fresh copy: a metric after
fine-tuning is the mean over the seeds, with their sample standard deviation (ddof=1) and each
seed's value. Two stages: `score` fine-tunes the copies and reads every model (records), `report` (report.py)
computes every number from the records. Definitions: README.md beside this file.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from typing import Any, Literal

import numpy as np
from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from harness.core.errors import UserError
from harness.core.model_types import LoadedModel, ModelKind
from harness.core.progress import sublabelled
from harness.core.records import Records
from harness.core.results import Headline
from harness.core.task import MAX_SEED, PaperPreset, RunContext, Task, TaskResult, register
from harness.metrics.privacy_audit import CONFIDENCE, DEFAULT_CANARIES
from harness.scoring.conditional import encode_pairs, greedy_targets, target_logprobs
from harness.scoring.extraction import log_pz, pair_extraction_logprobs
from harness.scoring.extraction_report import ExtractionConfig
from harness.scoring.generation import greedy_continuations
from tasks.privacy_extraction import formats
from tasks.privacy_extraction.data import (
    CANARIES,
    DUPLICATES,
    MEMORIZATION_SETS,
    PERSON_GROUPS,
    Secret,
    audit_canaries,
    memorization_secrets,
    privacy_secrets,
)
from tasks.privacy_extraction.report import JOINT, audited_experiment, finetune_experiments, report
from harness.training.finetune import (
    FinetuneSettings,
    finetune,
    shared_weights_copy,
    training_rows,
)
from harness.training.dp import default_delta
from harness.training.gradient_canaries import GradientCanaries
from harness.training.memory import Estimate, check_fits, estimate, model_device, model_shape
from harness.training.method import FinetuneMethodConfig


class PrivacyConfig(PaperPreset, ExtractionConfig, FinetuneMethodConfig):
    """The paper preset, the fine-tuning method and its learning rate (`FinetuneMethodConfig`: the seed's
    1e-4 for full fine-tuning), then (n, p)-discoverable extraction's settings (`ExtractionConfig`), then
    the task's."""

    # Yoon & Lee's batch size and set sizes (the card's "Departures from the paper": what it does not change)
    PAPER = {"finetune_batch_size": 60, "n_unique": 10_000, "n_persons": 10_000, "finetunes": "separate"}

    n_unique: PositiveInt = Field(200, description="unique-N: strings seen once (the seed used 10,000)")
    n_persons: PositiveInt = Field(100, description="synthetic persons with PII (the seed used 10,000)")
    n_heldout_persons: NonNegativeInt = Field(100, description="persons of the same generator never trained on: "
                                              "each field's chance level (`privacy-heldout`)")
    data_seed: int = Field(0, ge=0, le=MAX_SEED, description="seed of the synthetic secrets")
    epochs: tuple[PositiveInt, ...] = Field((4, 8), min_length=1, description="epochs after which the fine-tuned "
                                            "model is evaluated (it trains for the largest)")
    finetune_batch_size: PositiveInt = Field(8, description="fine-tuning batch size")
    finetune_seed: int = Field(42, ge=0, le=MAX_SEED, description="first fine-tuning seed (the seed's 42)")
    finetunes: Literal["joint", "separate"] = Field(
        "joint", description="joint: one fine-tuning on every group; separate: one per experiment (memorization-45, "
        "unique strings, persons), as Yoon & Lee")
    finetune_seeds: PositiveInt = Field(3, description="fine-tuning runs, each on a fresh copy, with seeds "
                                        "finetune_seed, finetune_seed + 1, ...; reported: the mean over the "
                                        "runs, their sample std (ddof=1) and each run's value")
    max_source_tokens: PositiveInt = Field(30, description="input tokens kept (the seed's 30)")
    max_target_tokens: PositiveInt = Field(70, description="target tokens kept and generated (the seed's 70)")
    audit_canaries: NonNegativeInt = Field(0, description=(
        f"the one-run privacy audit's canaries (Steinke et al. 2023; {DEFAULT_CANARIES:,} recommended): random "
        "strings, each in the fine-tuning with probability 1/2; their loss drops give audited epsilon lower "
        "bounds (0, the default for now: no audit)"))
    audit_confidence: float = Field(CONFIDENCE, gt=0, lt=1, description="the audited epsilon's one-sided "
                                    "confidence (with --audit-canaries or --audit-gradient-canaries)")
    audit_gradient_canaries: NonNegativeInt = Field(0, description=(
        "white-box canaries for the one-run audit of DP-SGD (with --dp-epsilon; Steinke et al. 2023): each a "
        "parameter coordinate whose clipped gradient joins the noisy sum with probability 1/2; they audit the "
        "mechanism's claim where the text canaries show nothing (LoRA). 0, the default: none"))
    sparse_finetuning: Literal["auto", "keep-zeros", "all-weights"] = Field(
        "auto", description="keep-zeros: the weights zero at the start stay zero through fine-tuning (sparse "
        "fine-tuning; full fine-tuning only; Yoon & Lee do not say whether theirs kept the pruned weights at zero); "
        "all-weights: every weight trains; auto: keep-zeros for a checkpoint `membench prune` made (its config "
        "records membench_pruning, as the shipped t5-ref-sparse70's does) and full fine-tuning, all-weights "
        "otherwise (a checkpoint pruned by another tool needs keep-zeros)")

    def fields_left_out(self) -> tuple[str, ...]:
        """Without an audit its settings stay out of the dump (results from before it keep their hash)."""
        audited = self.audit_canaries or self.audit_gradient_canaries
        return ((() if self.audit_canaries else ("audit_canaries",))
                + (() if audited else ("audit_confidence",))
                + (() if self.audit_gradient_canaries else ("audit_gradient_canaries",)) + super().fields_left_out())

    @model_validator(mode="after")
    def _confidence_needs_an_audit(self):
        if self.audit_canaries == 0 and self.audit_gradient_canaries == 0 and self.audit_confidence != CONFIDENCE:
            raise ValueError("--audit-confidence needs --audit-canaries or --audit-gradient-canaries")
        if self.audit_gradient_canaries and self.dp_epsilon is None:
            raise ValueError("--audit-gradient-canaries needs --dp-epsilon: its canaries join DP-SGD's clipped sum")
        return self

    @model_validator(mode="after")
    def _zeros_need_full_finetuning(self):
        if self.sparse_finetuning == "keep-zeros" and self.finetune_method != "full":
            raise ValueError("--sparse-finetuning keep-zeros needs --finetune-method full: a LoRA adapter's "
                             "update is dense")
        return self


def keeps_zeros(model: LoadedModel, config: PrivacyConfig) -> bool:
    """Whether the fine-tuning keeps the checkpoint's zero weights at zero (`--sparse-finetuning`)."""
    if config.sparse_finetuning == "auto":
        return "pruning" in model.info and config.finetune_method == "full"
    return config.sparse_finetuning == "keep-zeros"


def predictions(model, tokenizer, pairs: list[tuple[str, str]], seq2seq: bool, keep_sentinels: list[bool],
                config: PrivacyConfig, batch_size: int, progress: bool | None) -> list[str]:
    """Greedy output per (source, target): seq2seq until `</s>` (at most max_target_tokens; the
    sentinels kept in the text where `keep_sentinels`); a causal LM for as many tokens as the
    target has."""
    sources = [s for s, _ in pairs]
    if seq2seq:
        ids = greedy_targets(model, tokenizer, sources, config.max_target_tokens, batch_size,
                             config.max_source_tokens, progress)
        return [tokenizer.decode(x, skip_special_tokens=not keep) for x, keep in zip(ids, keep_sentinels)]
    _, targets = encode_pairs(tokenizer, sources, [t for _, t in pairs], False, config.max_source_tokens,
                              config.max_target_tokens)
    texts, _ = greedy_continuations(model, tokenizer, sources, [len(t) for t in targets], batch_size,
                                    progress=progress)
    return texts


# The board's name for the seed's `epsilon` (issue 63): what it is, so that no one reads it as a DP ε
LEAKAGE_LABEL = "leakage ε (Inan et al.; a perplexity ratio, not a DP guarantee), 8 epochs"


@dataclasses.dataclass(frozen=True)
class Reading:
    """What one fine-tuned model gave for some secrets (by index into the data): greedy outputs, log p_z
    (None without extraction), the target log-probabilities of the unique strings, then of the canaries (None
    unless they were read), and the seconds it took."""

    outputs: dict[int, str]
    log_p: dict[int, float] | None
    scored_logprobs: list[np.ndarray] | None
    seconds: float


def limited_per_count(limit: int) -> int | None:
    """memorization-45 strings kept per duplicate count under `--limit limit`: ⌈limit/5⌉, None
    (all 9) when that is all of them."""
    per_count = MEMORIZATION_SETS // len(DUPLICATES)
    keep = -(-limit // len(DUPLICATES))
    return None if keep >= per_count else keep


def check_context(model: LoadedModel, config: PrivacyConfig) -> None:
    """A `UserError` when a causal LM's context cannot hold a row (BOS, source, target)."""
    needed = config.max_source_tokens + config.max_target_tokens + 1
    if model.kind is ModelKind.CAUSAL_LM and model.context_length and model.context_length < needed:
        raise UserError(f"privacy_extraction: {model.name} has a context of {model.context_length} tokens; "
                        f"--max-source-tokens + --max-target-tokens + 1 = {needed} do not fit")


def memory_estimate(model: LoadedModel, config: PrivacyConfig, method: str | None = None) -> Estimate:
    """What fine-tuning `model` with `config` (its method, or `method`) adds to memory (`memory.py`)."""
    shape = model_shape(model.model, model.kind is ModelKind.SEQ2SEQ, config.max_source_tokens,
                        config.max_target_tokens)
    return estimate(shape, method or config.finetune_method, config.finetune_batch_size,
                    model_device(model.model).type == "cuda", config.lora_rank, config.lora_target_modules)


def check_memory(model: LoadedModel, config: PrivacyConfig) -> dict:
    """A `UserError` when the fine-tuning's estimate exceeds what the model's device can give now
    (`memory.check_fits`); else the estimate and the device's memory for the results file's info."""
    return check_fits("privacy_extraction", model.name, model.dtype, config.finetune_method, config.lora_rank,
                      lambda method: memory_estimate(model, config, method), model_device(model.model))


@register
class PrivacyExtraction(Task):
    NAME = "privacy_extraction"
    # 4: fields scored without their format text; held-out persons (chance) and the gain over them;
    # 5: a pruned checkpoint fine-tunes sparse (--sparse-finetuning auto), its sparsity after fine-tuning recorded
    # (issue 76, not a version change: runs without --audit-canaries compute as before, and an audited run cached
    # before it runs again, `reusable`) the audited epsilon over seeds is the largest seed's, each seed's audit
    # corrected for their number (was their mean); the f-DP bound's tag says it is conditional; each audit
    # records r, v, its confidence per cell, its ceiling, every canary's score and the inclusion bits
    VERSION = 5
    LIMIT_VERSION = 2  # 2: --limit also cuts memorization-45 (and so the fine-tuning); 1 kept all 45
    DESCRIPTION = ("Memorization and PII leakage after fine-tuning: subset score and exact match of random "
                   "strings (seen 1-5 times, unique) and synthetic persons' fields, leakage ε (Inan et al.: a "
                   "perplexity ratio, not a DP guarantee), and each secret's extraction probability under "
                   "sampling ((n, p)-discoverable)")
    MODEL_KINDS = frozenset({ModelKind.SEQ2SEQ, ModelKind.CAUSAL_LM})
    HEADLINE = Headline(metric="subset_score", tags={"group": "memorization-45", "times": "all", "epoch": "8"},
                        label="memorization-45 subset score, 8 epochs", better="lower")
    SUMMARY = (HEADLINE,
               Headline(metric="exact_match", tags={"group": "memorization-45", "times": "all", "epoch": "8"},
                        label="memorization-45 exact match, 8 epochs", better="lower"),
               Headline(metric="exact_match", tags={"group": "privacy", "field": "all", "epoch": "8"},
                        label="PII exact match, 8 epochs", better="lower"),
               Headline(metric="epsilon", tags={"group": "unique", "epoch": "8"},
                        label=LEAKAGE_LABEL, better="lower"),
               Headline(metric="extractable", tags={"group": "memorization-45", "times": "all", "epoch": "8",
                                                    "attempts": "100", "level": "0.5"},
                        label="memorization-45 (100, 0.5)-extractable, 8 epochs", better="lower"))
    Config = PrivacyConfig
    NOT_SERVED = "it fine-tunes the model's weights, which a completions server does not expose"
    # read by the report alone (the extraction summary's n and p, the audits' confidence): a change reports the
    # cached records again, without fine-tuning
    REPORT_ONLY = frozenset({"extraction_attempts", "extraction_level", "audit_confidence"})

    def headlines(self, config: PrivacyConfig) -> tuple[Headline, tuple[Headline, ...]]:
        """`SUMMARY`, and for a run that audits (`--audit-canaries`) or trains with DP (`--dp-epsilon`) the
        audited ε (Steinke et al.'s bound, valid for any DP mechanism, at the run's confidence) beside the
        claimed ε, both after 8 epochs; a run without DP shows its claim as ∞ (`Headline.absent`), and the
        boards plot audited against claimed ε with the diagonal (`Headline.against`). The board gives the union
        of its runs' key metrics (`leaderboard.render.task_heads`): a run without the audit reads n/a there."""
        extra = []
        if config.audit_canaries:
            extra.append(Headline(metric="audited_epsilon", tags={"epoch": "8", "group": CANARIES, "bound": "steinke",
                                                                  "confidence": f"{config.audit_confidence:g}"},
                                  label=f"audited ε ({config.audit_confidence * 100:g}%, Steinke et al.), 8 epochs",
                                  better="lower", plot=True, against="claimed_epsilon"))
        if config.audit_canaries or config.dp_epsilon is not None:
            extra.append(Headline(metric="claimed_epsilon", tags={"epoch": "8"}, label="claimed DP ε, 8 epochs",
                                  better="lower", absent="∞"))
        return self.HEADLINE, self.SUMMARY + tuple(extra)

    def reusable(self, entry) -> bool:
        """An audited run cached before each audit recorded its evidence (issue 76: the canaries' scores and
        inclusion bits, each audit's r, v, corrected confidence and ceiling; the largest seed's bound, corrected
        for the seeds, instead of their mean) runs again."""
        audit = entry.info.get("audit")
        return audit is None or "inclusion" in audit

    def load_data(self, config: PrivacyConfig, context: RunContext) -> list[Secret]:
        """The secrets; with `--limit N` (a test run) at most N unique strings, N persons, N held-out
        persons and N canaries (the first of the full run's), and the first ⌈N/5⌉ memorization-45 strings of
        each duplicate count (every count stays scored). The fine-tuning trains on exactly these, so its
        work scales with N too."""
        n_unique, keep_per_count = config.n_unique, None
        persons = privacy_secrets(config.data_seed, config.n_persons, config.n_heldout_persons)
        if context.limit:
            n_unique, keep_per_count = min(n_unique, context.limit), limited_per_count(context.limit)
            persons = [s for group in PERSON_GROUPS for s in [p for p in persons if p.group == group][:context.limit]]
        canaries = audit_canaries(config.data_seed, config.n_unique, min(config.audit_canaries, context.limit or
                                                                         config.audit_canaries))
        return memorization_secrets(config.data_seed, n_unique, keep_per_count) + persons + canaries

    def check_model(self, model: LoadedModel, config: PrivacyConfig) -> None:
        check_context(model, config)
        check_memory(model, config)

    def score(self, model: LoadedModel, data: list[Secret], config: PrivacyConfig, context: RunContext) -> Records:
        """The public model's and every fine-tuned copy's readings of the secrets (greedy outputs, log p_z, the
        scored strings' target log-probabilities), the fine-tunings' facts and the white-box canaries' scores
        (records: `tasks.privacy_extraction.report`)."""
        check_context(model, config)
        memory = check_memory(model, config)  # before anything is copied: the fine-tuning fits the device now
        seq2seq = model.kind is ModelKind.SEQ2SEQ
        tokenizer = model.tokenizer
        fmt = "sentinel" if seq2seq and formats.has_sentinels(tokenizer) else "tagged"
        pairs = [formats.source_and_target(s, fmt) for s in data]
        keep_sentinels = [fmt == "sentinel" and s.group in PERSON_GROUPS for s in data]
        unique = [i for i, s in enumerate(data) if s.group == "unique"]
        canary_indices = [i for i, s in enumerate(data) if s.group == CANARIES]
        scored = unique + canary_indices  # whose target log-probabilities are read before and after
        scored_pairs = [pairs[i] for i in scored]
        settings = FinetuneSettings(max(config.epochs), config.learning_rate, config.finetune_batch_size,
                                    config.finetune_seed, config.max_source_tokens, config.max_target_tokens,
                                    config.lora_settings(), keeps_zeros(model, config))

        def logprobs(net) -> list[np.ndarray]:
            return target_logprobs(net, tokenizer, [s for s, _ in scored_pairs], [t for _, t in scored_pairs], seq2seq,
                                   context.batch_size, config.max_source_tokens, config.max_target_tokens,
                                   context.progress)

        public = logprobs(model.model)
        scheme = config.scheme()
        readings: list[dict[str, Any]] = []
        # epoch -> seconds: "0" the public model's, every later epoch a list in seed order
        evaluation_seconds: dict[str, Any] = {}
        durations: list[float] = []

        def read(net, indices: list[int]) -> Reading:
            """`net`'s greedy outputs and extraction log-probabilities of the secrets `indices`, and the
            unique strings' target log-probabilities when they are among them."""
            started = time.perf_counter()
            chosen = [pairs[i] for i in indices]
            outputs = predictions(net, tokenizer, chosen, seq2seq, [keep_sentinels[i] for i in indices], config,
                                  context.batch_size, context.progress)
            log_p = None
            if config.extraction:
                log_p = log_pz(pair_extraction_logprobs(net, tokenizer, [s for s, _ in chosen], [t for _, t in chosen],
                                                        seq2seq, scheme, context.batch_size, config.max_source_tokens,
                                                        config.max_target_tokens, context.progress))
            tuned = logprobs(net) if net is not model.model and set(scored) <= set(indices) else None
            return Reading(dict(zip(indices, outputs)), None if log_p is None else dict(zip(indices, log_p)), tuned,
                           time.perf_counter() - started)

        def record(epoch: int, seed: int | None, found: list[Reading]) -> None:
            """The reading after `epoch` epochs of the run with `seed` (None: the public model) from the
            readings that together cover every secret, and the seconds they took."""
            outputs = {i: o for r in found for i, o in r.outputs.items()}
            log_p = {i: v for r in found for i, v in r.log_p.items()} if config.extraction else None
            readings.append({
                "id": "public" if seed is None else f"seed-{seed}/epoch-{epoch}", "epoch": epoch, "finetune_seed": seed,
                "outputs": [outputs[i] for i in range(len(data))],
                "log_pz": None if log_p is None else [log_p[i] for i in range(len(data))],
                "target_logprobs": public if epoch == 0 else next(r.scored_logprobs for r in found
                                                                  if r.scored_logprobs is not None)})
            seconds = round(sum(r.seconds for r in found), 2)
            durations.append(seconds)
            if seed is None:
                evaluation_seconds[str(epoch)] = seconds
            else:
                evaluation_seconds.setdefault(str(epoch), []).append(seconds)

        experiments = finetune_experiments(data, config.finetunes)
        rows = {name: training_rows(tokenizer, [pairs[i] for i in indices], [data[i].times for i in indices], seq2seq,
                                    settings) for name, indices in experiments.items()}
        # the audit's delta: the DP run's, else the default a DP run on these rows would take (`default_delta`)
        audited_name = audited_experiment(data, experiments)
        audited_rows = len(rows[audited_name])
        claimed = config.dp_settings(audited_rows)
        audit_delta = claimed.delta if claimed is not None else default_delta(audited_rows)
        # the white-box canaries join the fine-tuning that holds the text canaries (`--finetunes separate`: the unique
        # strings'), drawn from --data-seed like them; with --limit N at most N
        gradient = (GradientCanaries(min(config.audit_gradient_canaries, context.limit or config.audit_gradient_canaries),
                                     config.data_seed) if config.audit_gradient_canaries else None)
        gradient_runs: list[dict] = []
        record(0, None, [read(model.model, list(range(len(data))))])
        seeds = [config.finetune_seed + k for k in range(config.finetune_seeds)]
        finetunings: list[dict] = []
        for number, seed in enumerate(seeds, 1):
            found_readings: dict[int, list[Reading]] = {}  # epoch -> a reading per experiment
            found_gradient: dict = {}
            for name, indices in experiments.items():
                def on_checkpoint(epoch: int, net, indices: list[int] = indices) -> None:
                    found_readings.setdefault(epoch, []).append(read(net, indices))

                # every seed (and experiment) fine-tunes a fresh copy; with LoRA a fresh adapter, on the loaded weights
                tuned_model = copy.deepcopy(model.model) if settings.lora is None else shared_weights_copy(model.model)
                label = f"seed {seed} ({number}/{len(seeds)})" + ("" if name == JOINT else f", {name}")
                dp = config.dp_settings(len(rows[name]))
                if gradient is not None and name == audited_name:
                    dp = dataclasses.replace(dp, gradient_canaries=gradient)
                with sublabelled(label):  # each run's bars say which run they are
                    trained = finetune(tuned_model, tokenizer, rows[name], dataclasses.replace(settings, seed=seed, dp=dp),
                                       set(config.epochs), on_checkpoint, context.progress)
                found_gradient = trained.pop("gradient_canaries", found_gradient)
                finetunings.append({"id": f"{name}/{seed}", "experiment": name, "finetune_seed": seed, "facts": trained})
                del tuned_model
            if found_gradient:
                gradient_runs.append({"id": str(seed), "finetune_seed": seed, **found_gradient})
            for epoch in sorted(found_readings):
                record(epoch, seed, found_readings[epoch])
        sources, targets = encode_pairs(tokenizer, [s for s, _ in pairs], [t for _, t in pairs], seq2seq, None, None)
        secrets = [{"id": s.sample_id, "group": s.group, "times": s.times,
                    **({"fields": s.fields} if s.group in PERSON_GROUPS else {"secret": s.secret}),
                    "source_tokens": len(source), "target_tokens": len(target)}
                   for s, source, target in zip(data, sources, targets)]
        run_facts = {"finetuning_memory": memory, "keeps_zeros": settings.keep_zeros,
                     "evaluation_seconds": evaluation_seconds,
                     "evaluation_samples_per_second": round(len(data) * len(durations) / sum(durations), 1)}
        if config.extraction:  # the report adds the attempts and level (`extraction_info`)
            run_facts["extraction"] = {"scheme": scheme.as_dict()}
        return {"format": fmt, "secrets": secrets, "readings": readings,
                "training_rows": {name: len(found) for name, found in rows.items()}, "finetunings": finetunings,
                "gradient_canaries": None if gradient is None else {"canaries": gradient.m, "runs": gradient_runs},
                "audit_delta": audit_delta,
                "dp": None if claimed is None else {"claimed_epsilon": claimed.epsilon, "delta": claimed.delta,
                                                    "no_noise_for_testing": claimed.no_noise_for_testing},
                "limit": context.limit, "facts": run_facts}

    def report(self, records: Records, config: PrivacyConfig, seed: int) -> TaskResult:
        return report(records, config, seed)
