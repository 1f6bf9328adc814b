"""The contract between the runner and a task, and the task registry.

A task is a class with NAME, VERSION (an int; bump it whenever what the task computes changes),
DESCRIPTION, MODEL_KINDS, HEADLINE (optionally SUMMARY), a pydantic `Config`, `load_data` and its two
stages: `score` (the model passes: model, data -> records, `harness.core.records`) and `report` (a pure
function: records, config, seed -> every metric and info field; it imports no torch). VERSION counts
what `score` computes, REPORT_VERSION what `report` does with it, so a change to the reporting alone
reports the cached records again, without a model pass. A task not yet split overrides `run` instead
(both stages in one; its entries carry no records and the board marks them unverified). It registers itself with
`@register`; the application imports every package under `tasks/` (`harness.app.registry.discover`),
and the runner, handed task classes, never names one. `--limit` (a test run) reaches `load_data` as `RunContext.limit`; each task card
says what it cuts, and LIMIT_VERSION is bumped when only that changes.
"""

from __future__ import annotations

import typing
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from harness.core.errors import UserError
from harness.core.model_types import LoadedModel, ModelKind
from harness.core.records import Records, normalise
from harness.core.results import Headline, Metric, TaskEntry

# Flags the runner owns; a task config field may not reuse these names.
RESERVED_FIELDS = frozenset({"model", "revision", "model_kind", "tasks", "batch_size", "device", "dtype",
                             "limit", "seed", "log_samples", "output_path", "trust_remote_code",
                             "allow_pickle", "model_name", "no_cache", "verbose"})

# The largest seed membench takes (`--seed`, `--reference-seed`, ...): numpy's global seed, which
# the reference training sets, takes 0 to 2**32 - 1, and its generators refuse negative seeds.
MAX_SEED = 2**32 - 1

# Where `--batch-size auto` starts on an accelerator (`--max-batch-size`'s default; `harness.scoring.fitting`
# halves a batch that does not fit).
DEFAULT_MAX_BATCH_SIZE = 256


def is_sequence(annotation) -> bool:
    """Whether a config field holds several values (a tuple or list, optional or not): its command-line
    flag and its `membench run` setting take them comma-separated."""
    if typing.get_origin(annotation) in (tuple, list):
        return True
    return any(is_sequence(arg) for arg in typing.get_args(annotation) if arg is not type(None))


def split_commas(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_settings(tasks: list[type["Task"]], settings: dict[str, str]) -> dict[str, Any]:
    """Settings written as on the command line (strings; several values comma-separated) turned into
    the values the flags would give: a field that holds several values gets the list."""
    fields = {name: field for task in tasks for name, field in task.Config.model_fields.items()}
    return {key: split_commas(value) if key in fields and is_sequence(fields[key].annotation) else value
            for key, value in settings.items()}


class TaskConfig(BaseModel):
    """Base of every task's settings: frozen, and unknown fields are an error. The dump (the results file's
    config and its hash, the cache key) holds every field but those `fields_left_out` names."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        left_out = self.fields_left_out()
        return {k: v for k, v in handler(self).items() if k not in left_out}

    def fields_left_out(self) -> tuple[str, ...]:
        """Fields left out of the dump as set now: a setting added later, while it is off, so that results made
        before it existed keep their config hash. A mixin that adds such fields extends this (with super())."""
        return ()


PRESET_HELP = ("'paper': the conditions of the task's paper wherever they can be built offline (its card's "
               "'Departures from the paper' lists them and what stands in); settings given explicitly win")


class PaperPreset(BaseModel):
    """A task config's `preset` (`--preset paper`): its task's paper mode. Mixed into the Config of a task
    that follows a paper; `PAPER` holds the settings of the paper's conditions. With `preset="paper"` the
    fields not given take their `PAPER` values instead of the defaults, so the config, its hash (the cache
    key) and the results file hold what ran, and `preset` and those fields are changed settings, which the
    board names (`harness.run.runner.changed_settings`)."""

    preset: Literal["default", "paper"] = Field("default", description=PRESET_HELP)
    PAPER: ClassVar[dict[str, Any]] = {}

    @classmethod
    def paper_settings(cls, given: dict[str, Any]) -> dict[str, Any]:
        """The paper's settings for a config given `given` (the settings as given): `PAPER`; a task
        whose paper's conditions depend on a given setting (its language, say) overrides this."""
        return cls.PAPER

    @model_validator(mode="before")
    @classmethod
    def _paper_settings(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("preset") == "paper":
            return {**cls.paper_settings(data), **data}
        return data


class LimitTooSmall(UserError):
    """`--limit` leaves a task too little data to compute its metrics (membership inference with one
    class, say). The runner skips that task with this message as its reason; the data is fine."""


@dataclass(frozen=True)
class RunContext:
    """Runner settings a task may use; none of them may change what a text scores."""

    batch_size: int = 16
    limit: int | None = None
    seed: int = 0
    progress: bool | None = None
    # The auxiliary models the task asked for (`Task.auxiliary_models`), by role, loaded by the runner.
    models: dict[str, LoadedModel] = field(default_factory=dict)


@dataclass
class TaskResult:
    """What a task returns: metrics, sample counts, per-sample records and facts about the run."""

    metrics: list[Metric]
    counts: dict[str, int]
    samples: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    # Per-item values of a metric, series name -> item id -> value (see `results.TaskEntry`).
    item_scores: dict[str, dict[str, float]] = field(default_factory=dict)
    # Why `metrics` is empty, when the task can tell (the data had nothing it could score); the
    # runner records a task without metrics as skipped, with this reason.
    no_metrics_reason: str | None = None
    # What a reader of the metrics must know (one line each), e.g. that the data invalidates them; the
    # runner writes them into the results file (`TaskEntry.warnings`) and onto stderr.
    warnings: list[str] = field(default_factory=list)


class Task(ABC):
    NAME: ClassVar[str]
    VERSION: ClassVar[int]
    DESCRIPTION: ClassVar[str]
    MODEL_KINDS: ClassVar[frozenset[ModelKind]]
    HEADLINE: ClassVar[Headline]
    # Metrics for the board's summary table of this task (one column each), when its full table is long.
    SUMMARY: ClassVar[tuple[Headline, ...]] = ()
    # What `--limit` cuts (a test run's data): bump it when that changes but full runs do not, so
    # the cache serves no limited run of the old rule (full runs' cache keys and VERSION stay).
    LIMIT_VERSION: ClassVar[int] = 1
    # What `report` does with the records: bump it when only that changes (VERSION, what `score` computes,
    # stays, and cached records are reported again without a model pass).
    REPORT_VERSION: ClassVar[int] = 1
    # Config fields only `report` reads: left out of the records' cache key, so a run that changes only
    # these reports the cached records again.
    REPORT_ONLY: ClassVar[frozenset[str]] = frozenset()
    Config: ClassVar[type[TaskConfig]] = TaskConfig
    # Why the task cannot score a model on a completions server (`LoadedModel.served`: prompt log-probs and
    # generations only), one line; None for a task whose scoring stage runs through one.
    NOT_SERVED: ClassVar[str | None] = "its scoring stage runs the model's weights in this process"

    @abstractmethod
    def load_data(self, config: TaskConfig, context: RunContext) -> Any:
        """Read and check the task's data; called before any model is loaded, so bad data fails fast."""

    def score(self, model: LoadedModel, data: Any, config: TaskConfig, context: RunContext) -> Records:
        """The scoring stage: the model passes over `data`, as records (JSON values, `harness.core.records`)
        that hold everything `report` reads, the facts about the run it reports included. Never loads a
        model and never writes a file."""
        raise NotImplementedError(f"{self.NAME} has no scoring stage (it overrides `run`)")

    def report(self, records: Records, config: TaskConfig, seed: int) -> TaskResult:
        """The reporting stage: every metric, count, sample and info field from the records (normalised,
        as the sidecar gives them back), `config` and `seed`; pure (the same bits from the same records,
        no model, no torch), and a `UserError` naming the record at fault for records it cannot have
        made (a duplicated item, a value out of range)."""
        raise NotImplementedError(f"{self.NAME} has no reporting stage (it overrides `run`)")

    # `membench verify --model --sample`: how far a value scored again may lie from the recorded one, as
    # |recorded - again| <= SAMPLE_TOLERANCE * (1 + |recorded|) (the same weights, other batches: float32 rounding)
    SAMPLE_TOLERANCE: ClassVar[float] = 1e-4

    def sample_values(self, records: Records) -> dict[str, dict[str, Any]]:
        """For `membench verify --model --sample`: item id -> the values of the item that scoring it again
        must reproduce (numbers within `SAMPLE_TOLERANCE`, texts exactly), only those that depend on no
        other item; {} where the task cannot score a sample of its items again (then only the model's
        identity is checked)."""
        return {}

    def sample_data(self, data: Any, config: TaskConfig, ids: list[str]) -> tuple[Any, TaskConfig]:
        """The data holding only the items `ids` (keys of `sample_values`) and the config to score them
        with (the attacks that need other items or models left out)."""
        raise NotImplementedError(f"{self.NAME} cannot score a sample of its items again")

    @classmethod
    def has_records(cls) -> bool:
        """Whether the task runs in two stages (`score`, `report`) and so writes records."""
        return cls.score is not Task.score

    def run(self, model: LoadedModel, data: Any, config: TaskConfig, context: RunContext) -> TaskResult:
        """Both stages: `report` of `score`'s records, normalised as the sidecar keeps them. A task
        not yet split overrides this instead."""
        return self.report(normalise(self.score(model, data, config, context)), config, context.seed)

    def headlines(self, config: TaskConfig) -> tuple[Headline, tuple[Headline, ...]]:
        """The headline and summary the board shows of a run with `config`: `HEADLINE` and `SUMMARY`,
        unless a setting names the metric a paper reads (mink_membership's `--headline-k`)."""
        return self.HEADLINE, self.SUMMARY

    def auxiliary_models(self, config: TaskConfig) -> dict[str, str]:
        """Other models the task scores with besides the evaluated one (a reference model, say), as
        role -> model id, path or `reference:<checkpoint>`. The runner loads them as it loads the
        evaluated model (same device, dtype and safety settings), puts their identities into the
        cache key and hands them to `run` as `context.models[role]`."""
        return {}

    def check_model(self, model: LoadedModel, config: TaskConfig) -> None:
        """Raise a `UserError` when a model of a supported kind still cannot be scored with `config`
        (say, it lacks labels the task reads). Called for every task before any task runs."""

    def lm_eval_export(self, data: Any, config: TaskConfig, tokenizer, context: int | None):
        """This task on `data` as an lm-evaluation-harness task (`harness.interop.lm_eval_export.LmEvalTask`)
        for a causal LM with `tokenizer` and context length `context`. Only the tasks lm-eval's
        request types can express override it; `membench export-lm-eval` exports those."""
        return None

    def reusable(self, entry: TaskEntry) -> bool:
        """Whether a cached entry of this version and config may be served instead of running again: False
        for one made before the task recorded something it records now (the runner then runs the task)."""
        return True

    def skip_reason(self, model: LoadedModel) -> str | None:
        """Why this task cannot score `model`, or None when it can."""
        if model.kind not in self.MODEL_KINDS:
            kinds = ", ".join(sorted(k.value for k in self.MODEL_KINDS))
            return f"{self.NAME} scores {kinds} models, not {model.kind.value} models"
        return None

    def check_served(self, model: LoadedModel) -> None:
        """A `UserError` (`NOT_SERVED`) when `model` is served and the task cannot score it through a server."""
        if model.served and self.NOT_SERVED:
            raise UserError(f"{self.NAME} cannot score a served model: {self.NOT_SERVED}")


_REGISTRY: dict[str, type[Task]] = {}


def register(cls: type[Task]) -> type[Task]:
    """Class decorator: add a task to the registry after checking its declaration."""
    if not isinstance(getattr(cls, "VERSION", None), int) or cls.VERSION < 1:
        raise TypeError(f"{cls.__name__}.VERSION must be a positive int")
    clash = RESERVED_FIELDS.intersection(cls.Config.model_fields)
    if clash:
        raise TypeError(f"{cls.__name__}.Config reuses runner flag names: {sorted(clash)}")
    if cls.NAME in _REGISTRY and _REGISTRY[cls.NAME] is not cls:
        raise TypeError(f"two tasks are named {cls.NAME!r}")
    _REGISTRY[cls.NAME] = cls
    return cls


def registered_tasks() -> dict[str, type[Task]]:
    """The tasks registered so far, by name (the application imports them all: `harness.app.registry`)."""
    return dict(sorted(_REGISTRY.items()))


def select_from(registry: dict[str, type[Task]], names: str) -> list[type[Task]]:
    """The tasks of `registry` named in a comma-separated list, or all of them for `all`."""
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    if not wanted:
        raise UserError("no task named; see `membench tasks`")
    if wanted == ["all"]:
        return list(registry.values())
    unknown = [n for n in wanted if n not in registry]
    if unknown:
        raise UserError(f"unknown task {unknown[0]!r}; known tasks: {', '.join(registry)}")
    return [registry[n] for n in dict.fromkeys(wanted)]
