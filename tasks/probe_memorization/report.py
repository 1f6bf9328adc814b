"""probe_memorization's reporting stage: the seen/unseen accuracies, the memorization effect, the
control accuracy and selectivity of every (representation, probe, training size) from the records,
a pure function (`harness.core.task.Task.report`): no model, no torch, no probe training.

Records (`ProbeMemorization.score`; tags and word types as ids, evaluation tokens in order):

    {"tags": [tag name, ...],                     # sorted; a label is an index into it
     "tokens": {"labels": [tag id per evaluation token], "types": [word type id per evaluation token],
                "control": [control label per evaluation token] or null (--control false)},
     "counts": {pool_sentences, pool_tokens, eval_sentences, word_types, and with --word-units whole
                multi_subword_pool_tokens, multi_subword_eval_tokens, with --tuning-sentences
                tuning_sentences, tuning_tokens, tuning_word_types (the word types of the tuning
                sentences) and tuning_eval_tokens (the evaluation tokens of those types)},
     "train_sizes": [{"label": "50" | "all", "sentences": N}, ...],   # the usable sizes, in order
     "splits": [{"id": "<size>/<repetition>", "train_size", "repetition", "train_tokens",
                 "seen_types": [...], "unseen_types": [...]}],  # the evaluation tokens' word types that
                                                                # are seen-only / unseen-only in the split
                                                                # (none of the tuning sentences' types)
     "fits": [{"id": "<representation>/<probe>/<size>/<repetition>", "representation", "probe",
               "train_size", "repetition", "predicted": [tag id per evaluation token],
               "control_predicted": [...] or null}],
     "facts": {data_source, tagset, skipped_train_sizes, layer_index, tuning (null, or {tuning_tokens,
               train_tokens, fits: [{id: "<representation>/<probe>", setting, chosen,
               accuracy: [{value, accuracy}, ...]}]}), timings}}
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.core.errors import UserError
from harness.core.records import Records, facts, number, record_list, field, text, whole
from harness.core.results import Metric
from harness.core.task import TaskResult
from tasks.probe_memorization import method

COUNTS = ("pool_sentences", "pool_tokens", "eval_sentences", "word_types")
WHOLE_COUNTS = ("multi_subword_pool_tokens", "multi_subword_eval_tokens")
TUNING_COUNTS = ("tuning_sentences", "tuning_tokens", "tuning_word_types", "tuning_eval_tokens")
FACTS = ("data_source", "tagset", "skipped_train_sizes", "layer_index", "tuning", "timings")
# the timing fields in the order the scoring stage writes them (the records keep keys sorted)
EXTRACTION_FIELDS = ("seconds", "distinct_sentences", "subword_tokens", "words", "tokens_per_s", "words_per_s")
TRAINING_FIELDS = ("seconds", "fits", "mean_fit_s")


def metrics_of(summary: method.Summary, tags: dict[str, str], control: bool) -> list[Metric]:
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


def ids(values: Any, where: str, n: int, length: int | None = None) -> np.ndarray:
    """A list of ids in [0, n) (of `length` entries where given), as an int64 array."""
    if not isinstance(values, list):
        raise UserError(f"records: {where} is missing or not a list")
    if length is not None and len(values) != length:
        raise UserError(f"records: {where} has {len(values)} entries, not one per evaluation token ({length})")
    if any(kind is not int for kind in set(map(type, values))):
        raise UserError(f"records: {where} holds a value that is not an integer id")
    found = np.asarray(values, dtype=np.int64)
    if len(found) and (found.min() < 0 or found.max() >= n):
        bad = int(found[(found < 0) | (found >= n)][0])
        raise UserError(f"records: {where} holds {bad}, an unknown id (ids run 0..{n - 1})")
    return found


def ordered(record: Any, keys: tuple[str, ...], where: str) -> dict[str, Any]:
    """`record`'s `keys`, in that order (each there)."""
    if not isinstance(record, dict):
        raise UserError(f"records: {where} is not an object")
    return {key: field(record, key, where) for key in keys}


def checked_timings(record: Any, representations: tuple[str, ...], probes: tuple[str, ...]) -> dict[str, Any]:
    """`info.timings` (measured while scoring) in the order the scoring stage wrote it: the extraction
    of each representation, the probe training of each probe, the worker count."""
    timings = ordered(record, ("extraction", "probe_training", "probe_workers"), "facts.timings")
    extraction = ordered(timings["extraction"], representations, "facts.timings.extraction")
    training = ordered(timings["probe_training"], probes, "facts.timings.probe_training")
    return {"extraction": {rep: ordered(extraction[rep], EXTRACTION_FIELDS, f"facts.timings.extraction.{rep}")
                           for rep in representations},
            "probe_training": {probe: ordered(training[probe], TRAINING_FIELDS, f"facts.timings.probe_training.{probe}")
                               for probe in probes},
            "probe_workers": timings["probe_workers"]}


def checked_sizes(records: Records) -> list[tuple[str, int]]:
    sizes = records.get("train_sizes")
    if not isinstance(sizes, list):
        raise UserError("records: train_sizes is missing or not a list")
    out = []
    for index, size in enumerate(sizes):
        where = f"train_sizes[{index}]"
        if not isinstance(size, dict):
            raise UserError(f"records: {where} is not an object")
        label = text(field(size, "label", where), f"{where}.label")
        sentences = whole(field(size, "sentences", where), f"{where}.sentences")
        if sentences < 2:
            raise UserError(f"records: {where}.sentences is {sentences}; a training size holds 2 sentences or more")
        if label in (seen for seen, _ in out):
            raise UserError(f"records: training size {label!r} appears twice in train_sizes")
        out.append((label, sentences))
    return out


def checked_tuning(record: Any) -> dict | None:
    """`info.tuning` from the records' tuning record: the tuning and training token counts and, per
    (representation, probe), the setting tuned, the value chosen and each grid value's accuracy."""
    if record is None:
        return None
    if not isinstance(record, dict):
        raise UserError("records: facts.tuning is not an object")
    out: dict[str, Any] = {key: whole(field(record, key, "facts.tuning"), f"facts.tuning.{key}")
                           for key in ("tuning_tokens", "train_tokens")}
    for fit in record_list(record, "fits", "tuning fit"):
        where = f"tuning fit {fit['id']!r}"
        accuracy = field(fit, "accuracy", where)
        if not isinstance(accuracy, list) or not all(isinstance(a, dict) for a in accuracy):
            raise UserError(f"records: {where}'s accuracy is not a list of {{value, accuracy}} objects")
        values = [number(field(a, "value", where), f"{where} grid value", 0) for a in accuracy]
        if len(set(values)) != len(values):
            raise UserError(f"records: {where} has a grid value twice")
        out[fit["id"]] = {
            "setting": text(field(fit, "setting", where), f"{where}.setting"),
            "chosen": field(fit, "chosen", where),
            "accuracy": {str(a["value"]): round(number(a["accuracy"], f"{where} accuracy at {a['value']}", 0, 1), 4)
                         for a in accuracy}}
        if fit["chosen"] not in [a["value"] for a in accuracy]:
            raise UserError(f"records: {where} chose {fit['chosen']!r}, which is not one of its grid values")
    return out


def report(records: Records, representations: tuple[str, ...], probes: tuple[str, ...], repetitions: int,
           control: bool, word_units: str, tuning: bool) -> TaskResult:
    """The TaskResult of the records of a run with these settings (its config's)."""
    tags = records.get("tags")
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags) or len(set(tags)) != len(tags):
        raise UserError("records: tags is missing or not a list of distinct tag names")
    counts_record = records.get("counts")
    if not isinstance(counts_record, dict):
        raise UserError("records: counts is missing or not an object")
    wanted = COUNTS + (WHOLE_COUNTS if word_units == "whole" else ()) + (TUNING_COUNTS if tuning else ())
    scored = {key: whole(field(counts_record, key, "counts"), f"counts.{key}") for key in wanted}
    n_types = scored["word_types"]

    tokens = records.get("tokens")
    if not isinstance(tokens, dict):
        raise UserError("records: tokens is missing or not an object")
    labels = ids(field(tokens, "labels", "tokens"), "tokens.labels", len(tags))
    n_eval = len(labels)
    types = ids(field(tokens, "types", "tokens"), "tokens.types", n_types, n_eval)
    control_labels = field(tokens, "control", "tokens")
    if control != (control_labels is not None):
        raise UserError(f"records: tokens.control is {'missing' if control else 'there'}, but the config's "
                        f"control is {control}")
    if control:
        control_labels = ids(control_labels, "tokens.control", len(tags), n_eval)

    sizes = checked_sizes(records)
    splits = {s["id"]: s for s in record_list(records, "splits", "split")}
    fits = {f["id"]: f for f in record_list(records, "fits", "fit")}
    expected_splits = [f"{label}/{r}" for label, _ in sizes for r in range(repetitions)]
    expected_fits = [f"{rep}/{probe}/{label}/{r}" for label, _ in sizes for r in range(repetitions)
                     for rep in representations for probe in probes]
    for kind, found, expected in (("split", splits, expected_splits), ("fit", fits, expected_fits)):
        missing = [i for i in expected if i not in found]
        if missing:
            raise UserError(f"records: no {kind} {missing[0]!r}, which the run's settings make")
        extra = [i for i in found if i not in set(expected)]
        if extra:
            raise UserError(f"records: {kind} {extra[0]!r} is not one the run's settings make")

    masks = {}
    for split_id in expected_splits:
        split = splits[split_id]
        where = f"split {split_id!r}"
        seen_types = ids(field(split, "seen_types", where), f"{where} seen_types", n_types)
        unseen_types = ids(field(split, "unseen_types", where), f"{where} unseen_types", n_types)
        if np.intersect1d(seen_types, unseen_types).size:
            raise UserError(f"records: {where} has word type {int(np.intersect1d(seen_types, unseen_types)[0])} "
                            "both seen-only and unseen-only")
        masks[split_id] = (whole(field(split, "train_tokens", where), f"{where} train_tokens"),
                           np.isin(types, seen_types), np.isin(types, unseen_types))

    tallies = {(rep, probe, label): method.Tally() for rep in representations for probe in probes
               for label, _ in sizes}
    samples = []
    for fit_id in expected_fits:
        fit = fits[fit_id]
        rep, probe, label, repetition = fit_id.rsplit("/", 3)
        where = f"fit {fit_id!r}"
        for key, value in (("representation", rep), ("probe", probe), ("train_size", label),
                           ("repetition", int(repetition))):
            if field(fit, key, where) != value or isinstance(fit[key], bool):
                raise UserError(f"records: {where} has {key} {fit[key]!r}, not the {value!r} of its id")
        train_tokens, seen, unseen = masks[f"{label}/{repetition}"]
        correct = ids(field(fit, "predicted", where), f"{where} predicted", len(tags), n_eval) == labels
        control_predicted = field(fit, "control_predicted", where)
        if control != (control_predicted is not None):
            raise UserError(f"records: {where} has {'no ' if control else ''}control_predicted, but the config's "
                            f"control is {control}")
        control_correct = (ids(control_predicted, f"{where} control_predicted", len(tags), n_eval) == control_labels
                           if control else None)
        tallies[rep, probe, label].add(correct, seen, unseen, control_correct)
        samples.append({"representation": rep, "probe": probe, "train_size": label,
                        "repetition": int(repetition), "train_tokens": train_tokens,
                        "seen_correct": int(correct[seen].sum()), "seen_tokens": int(seen.sum()),
                        "unseen_correct": int(correct[unseen].sum()), "unseen_tokens": int(unseen.sum()),
                        "correct": int(correct.sum()),
                        "control_correct": None if control_correct is None else int(control_correct.sum())})

    metrics = []
    for (rep, probe, label), tally in tallies.items():
        metrics += metrics_of(method.summarize(tally), {"representation": rep, "probe": probe, "train_size": label},
                              control)
    counts = {"pool_sentences": scored["pool_sentences"], "pool_tokens": scored["pool_tokens"],
              "eval_sentences": scored["eval_sentences"], "eval_tokens": n_eval, "word_types": n_types,
              "tags": len(tags), "repetitions": repetitions}
    counts |= {key: scored[key] for key in wanted if key not in COUNTS}

    known = facts(records)
    for key in FACTS:
        field(known, key, "facts")
    skipped = known["skipped_train_sizes"]
    if not isinstance(skipped, list) or not all(isinstance(s, str) for s in skipped):
        raise UserError("records: facts.skipped_train_sizes is not a list of size labels")
    if tuning != (known["tuning"] is not None):
        raise UserError(f"records: facts.tuning is {'missing' if tuning else 'there'}, but the config's "
                        f"tuning_sentences is {'set' if tuning else '0'}")
    info = {"data_source": known["data_source"], "tagset": known["tagset"],
            "train_sizes": {label: size for label, size in sizes}, "skipped_train_sizes": skipped,
            "layer_index": known["layer_index"], "word_units": word_units, "tuning": checked_tuning(known["tuning"]),
            "timings": checked_timings(known["timings"], representations, probes)}
    return TaskResult(metrics=metrics, counts=counts, samples=samples, info=info)
