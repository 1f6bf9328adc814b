"""`membench report` and `membench verify`: a results file's numbers recomputed from the records in its
sidecar (`harness.core.records`), without a model.

For every task entry with records, the sidecar must belong to the file (the same model identity, the
same task version and config hash: `check_sidecar`), today's reporting stage of the task
(`Task.report`) must be the one that made the file (`report_version`), and what it computes from
the records (metrics, counts, item scores, warnings, info) must equal the file's bit for bit; last,
the records must be the ones whose sha256 the file names. A task entry without records (a task not
split into two stages, a file made before records) cannot be recomputed: it is `unverified`, which
the board shows.

With the model (`verify_with_model`), the records are checked against it too: the model's identity
must be the file's, and a random sample of each task's records, scored again, must agree within the
task's tolerance (`Task.sample_values`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.app.registry import discover
from harness.core.errors import UserError
from harness.core.records import check_sidecar, difference, normalise, read_sidecar, records_digest
from harness.core.results import Metric, ResultsFile, TaskEntry, load_results
from harness.core.task import RunContext, Task, TaskResult

# What the reporting stage computes into a task entry, in the order it is compared.
REPORTED_FIELDS = ("metrics", "counts", "item_scores", "warnings", "info")


@dataclass
class Recomputed:
    """A results file and, for each task entry with records, the report recomputed from them."""

    path: Path
    results: ResultsFile
    reports: dict[str, TaskResult] = field(default_factory=dict)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def unverified(self) -> list[str]:
        """The tasks that ran but carry no records."""
        return [t.name for t in self.results.tasks if t.status == "ok" and not t.verifiable]


def metric_label(metric: dict[str, Any]) -> str:
    """`auc{length=128,score=min_k_20}`: a metric named as the board names it."""
    tags = ",".join(f"{k}={v}" for k, v in sorted(metric.get("tags", {}).items()))
    return f"{metric.get('name')}{{{tags}}}" if tags else str(metric.get("name"))


def reported(entry_fields: dict[str, Any]) -> dict[str, Any]:
    """The reported fields of a task entry as its results file holds them (JSON values)."""
    dumped = json.loads(TaskEntry.model_validate({"name": "x", "version": 1, "status": "ok", "config": {},
                                                  "config_hash": "", "seed": 0, **entry_fields}).model_dump_json())
    return {key: dumped.get(key, [] if key in ("metrics", "warnings") else {}) for key in REPORTED_FIELDS}


def first_difference(entry: TaskEntry, result: TaskResult) -> str | None:
    """Where the report recomputed from the records differs from the entry, as one phrase; None when it
    is the same bit for bit. A metric is named by its name and tags, and the difference is given."""
    in_file = reported(entry.model_dump(include=set(REPORTED_FIELDS)))
    again = reported({"metrics": [m.model_dump() if isinstance(m, Metric) else m for m in result.metrics],
                      "counts": result.counts, "item_scores": result.item_scores, "warnings": result.warnings,
                      "info": result.info})
    mine, theirs = in_file["metrics"], again["metrics"]
    for index, (a, b) in enumerate(zip(mine, theirs)):
        if (a.get("name"), a.get("tags")) != (b.get("name"), b.get("tags")):
            return f"metric {index} is {metric_label(a)} in the file, {metric_label(b)} from the records"
        found = difference(f"metric {metric_label(a)}", {k: v for k, v in a.items() if k not in ("name", "tags")},
                           {k: v for k, v in b.items() if k not in ("name", "tags")})
        if found:
            return found
    if len(mine) != len(theirs):
        extra = theirs[len(mine)] if len(theirs) > len(mine) else mine[len(theirs)]
        side = "the records give" if len(theirs) > len(mine) else "the file has"
        return f"{side} metric {metric_label(extra)}, which the other lacks ({len(mine)} metrics in the file, " \
               f"{len(theirs)} from the records)"
    for key in REPORTED_FIELDS[1:]:
        found = difference(key, in_file[key], again[key])
        if found:
            return found
    return None


def task_of(entry: TaskEntry, registry: dict[str, type[Task]], origin: str, same_reporting: bool = True) -> Task:
    """The registered task that can report the entry's records: the same task version (what the records
    are) and, with `same_reporting`, the same reporting version (what the file's numbers were computed with)."""
    cls = registry.get(entry.name)
    if cls is None:
        raise UserError(f"{origin}: task {entry.name} is unknown to this membench; it cannot report its records")
    if entry.version != cls.VERSION:
        raise UserError(f"{origin}: {entry.name}'s records are of task version {entry.version}, this membench's task "
                        f"is version {cls.VERSION}: recompute with the membench that made it")
    if same_reporting and entry.report_version != cls.REPORT_VERSION:
        raise UserError(f"{origin}: {entry.name} was reported by reporting version {entry.report_version}, this "
                        f"membench's is {cls.REPORT_VERSION}: `membench report --output-path DIR` reports it again")
    return cls()


def recompute(path: Path, registry: dict[str, type[Task]] | None = None, same_reporting: bool = True) -> Recomputed:
    """Read a results file and its sidecar, check that they belong together, and report every task
    with records again from them (a `UserError` for a sidecar that is missing, damaged or another run's,
    or for records the task's report refuses). `same_reporting`: only with the reporting version that
    made the file (`verify`); False: with today's (`report`)."""
    registry = registry if registry is not None else discover()
    results = load_results(path)
    done = Recomputed(path, results)
    with_records = [t for t in results.tasks if t.verifiable]
    if not with_records:
        return done
    sidecar = path.parent / results.records_file
    payload = read_sidecar(sidecar)
    check_sidecar(payload, str(sidecar), results.model.identity,
                  {t.name: (t.version, t.config_hash) for t in with_records})
    for entry in with_records:
        task = task_of(entry, registry, str(path), same_reporting)
        records = payload["tasks"][entry.name]["records"]
        try:
            config = task.Config.model_validate(entry.config)
        except ValueError as err:
            raise UserError(f"{path}: {entry.name}'s config is not one this task takes: "
                            f"{str(err).splitlines()[-1].strip()}") from None
        try:
            done.reports[entry.name] = task.report(records, config, entry.seed)
        except UserError as err:
            raise UserError(f"{sidecar}: {entry.name}: {err}") from None
        except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as err:
            # records a scoring stage never writes (a field of the wrong kind, say): the report cannot read them
            raise UserError(f"{sidecar}: {entry.name}: records the report cannot read ({type(err).__name__}: "
                            f"{err}); they were edited or damaged") from None
        done.records[entry.name] = records
    return done


def verify_file(path: Path, registry: dict[str, type[Task]] | None = None) -> Recomputed:
    """`recompute`, then a `UserError` naming the first number that does not follow from the records
    (metric, and difference), or records that are not those whose sha256 the file names."""
    done = recompute(path, registry)
    for entry in done.results.tasks:
        if entry.name not in done.reports:
            continue
        found = first_difference(entry, done.reports[entry.name])
        if found:
            raise UserError(f"{path}: {entry.name}: {found}: the file's numbers do not follow from its records")
        if records_digest(done.records[entry.name]) != entry.records_sha256:
            raise UserError(f"{path}: {entry.name}: the records in {done.results.records_file} are not those whose "
                            "sha256 the file names (records_sha256): the sidecar was edited")
    return done


def re_reported(done: Recomputed) -> ResultsFile:
    """The results file with every task that has records reported again by today's reporting stage
    (its version recorded); the rest as it was."""
    tasks = []
    registry = discover()
    for entry in done.results.tasks:
        result = done.reports.get(entry.name)
        if result is None:
            tasks.append(entry)
            continue
        tasks.append(entry.model_copy(update={
            "metrics": result.metrics, "counts": result.counts, "info": result.info,
            "item_scores": result.item_scores, "warnings": result.warnings,
            "report_version": registry[entry.name].REPORT_VERSION}))
    return done.results.model_copy(update={"tasks": tasks})


@dataclass
class SampleCheck:
    """What `verify_with_model` found for one task: records scored again and the largest difference seen
    (as a share of the tolerance), or why no sample was scored."""

    task: str
    scored: int = 0
    worst: float = 0.0
    skipped: str | None = None


def sample_differences(task: Task, before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]
                       ) -> tuple[float, str | None]:
    """The largest |before - after| / (tolerance x (1 + |before|)) over the items scored again, and the
    first item whose value lies beyond the tolerance (or differs, for a text), as a phrase; None: all within."""
    worst = 0.0
    for item, values in after.items():
        for name, again in values.items():
            recorded = before[item].get(name)
            if isinstance(recorded, str) or isinstance(again, str):
                if recorded != again:
                    return worst, f"record {item}: {name} was {recorded!r}, scored again {again!r}"
                continue
            if recorded is None or (math.isnan(recorded) and math.isnan(again)) or recorded == again:
                continue
            share = abs(recorded - again) / (task.SAMPLE_TOLERANCE * (1 + abs(recorded)))
            if not share <= 1:
                return share, (f"record {item}: {name} was {recorded!r}, scored again {again!r} (difference "
                               f"{recorded - again:+.3g}, beyond the tolerance {task.SAMPLE_TOLERANCE:g} x (1 + |value|))")
            worst = max(worst, share)
    return worst, None


def verify_with_model(path: Path, model: str, sample: int, seed: int = 0, device: str = "auto",
                      batch_size: int = 16) -> tuple[Recomputed, list[SampleCheck]]:
    """`verify_file`, then the model: its identity must be the file's (a `UserError` naming both), and for
    every task that can (`Task.sample_values`) `sample` of its records, drawn at random (`seed`), are
    scored again and must agree within the task's tolerance."""
    import random

    from harness.core.model_types import ModelKind
    from harness.model.loading import ModelSpec, load

    done = verify_file(path)
    results = done.results
    if results.model.identity_kind == "served":
        raise UserError(f"{path}: {results.model.name} was scored through a completions server, whose weights were "
                        "not hashed: no local weights can be checked against it (`membench verify` without --model "
                        "recomputes its numbers from the records)")
    lm = load(ModelSpec(model=model, kind=ModelKind(results.model.kind), dtype=results.model.dtype, device=device))
    if lm.identity != results.model.identity:
        raise UserError(f"{path}: --model {model} has identity {lm.identity[:16]}, the file's model "
                        f"{results.model.name} has {results.model.identity[:16]}: these records were scored with "
                        "another model (or another tokenizer, config or kind)")
    registry, checks = discover(), []
    for entry in results.tasks:
        if entry.name not in done.reports:
            continue
        task = registry[entry.name]()
        before = task.sample_values(done.records[entry.name])
        if not before:
            checks.append(SampleCheck(entry.name, skipped="this task cannot score a sample of its records again; "
                                                         "the model's identity is checked"))
            continue
        ids = random.Random(seed).sample(sorted(before), min(sample, len(before)))
        config = task.Config.model_validate(entry.config)
        context = RunContext(batch_size=batch_size, limit=results.run.limit, seed=entry.seed, progress=False)
        data, config = task.sample_data(task.load_data(config, context), config, ids)
        after = task.sample_values(normalise(task.score(lm, data, config, context)))
        missing = [item for item in ids if item not in after]
        if missing:
            raise UserError(f"{path}: {entry.name}: record {missing[0]} was not scored again (the data it came from "
                            "has changed?)")
        worst, found = sample_differences(task, before, {item: after[item] for item in ids})
        if found:
            raise UserError(f"{path}: {entry.name}: {found}: the records do not follow from this model")
        checks.append(SampleCheck(entry.name, scored=len(ids), worst=worst))
    return done, checks
