"""The results file: one pydantic schema used on write, on `membench validate` and by the leaderboard."""

from __future__ import annotations

import math
import numbers
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from harness.core.errors import UserError
from harness.core.io import RESULTS_MAX_BYTES, atomic_write_text, parse_json_object, read_utf8

# 2: the model's identity covers its weights, tokenizer, config and kind (`harness.model.identity`), and
# `model` records each part's sha256. 1: the identity was the weights sha256 or the hub commit.
SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)


class _Strict(BaseModel):
    # NaN and Infinity are not JSON numbers, and no float field takes one (`parse_results` refuses a
    # file holding one, naming the field; an undefined number is None, null in the file)
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _not_finite(value: Any) -> bool:
    """True for NaN and +-inf (Python's or NumPy's floats), as a task may compute for an undefined number."""
    return isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral) and not math.isfinite(value)


def _finite_or_none(value: Any) -> Any:
    return None if _not_finite(value) else value


def reached_ceiling(value: float, ceiling: float | None) -> bool:
    """Whether a measured value reached the most its measurement could show (to 1e-9): only a ceiling above 0
    counts, since a ceiling of 0 is a measurement that can show nothing."""
    return bool(ceiling) and value >= ceiling - 1e-9


class Metric(_Strict):
    """One number. `tags` locate it (e.g. score=min_k_20, length=128); value None = undefined.

    A task that trains something inside it repeats the training over seeds: `std` is then the sample
    standard deviation (ddof=1) of the metric over the runs and `per_seed` each run's value, in seed
    order; `value` is their mean unless the task card says otherwise. Both are left out of the file
    when absent, as is `ceiling` (the most the measurement could show: the board writes "≥" where the
    value reaches it).

    A non-finite number given in code (NaN from an undefined mean, say) is stored as None, so that
    membench never writes NaN or Infinity; a results file holding one is refused (`parse_results`).
    """

    name: str
    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    std: float | None = None
    per_seed: list[float | None] | None = None
    n: int | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    # the most this metric could show with the evidence it had (a one-run audit's ceiling at its corrected
    # confidence, `harness.metrics.privacy_audit.epsilon_ceiling`): a value that reaches it reads "≥ value",
    # the measurement's limit, not the model's
    ceiling: float | None = None

    @property
    def at_ceiling(self) -> bool:
        """`reached_ceiling` of the value."""
        return self.value is not None and reached_ceiling(self.value, self.ceiling)

    @field_validator("value", "ci_low", "ci_high", "std", "ceiling", mode="before")
    @classmethod
    def _undefined_if_not_finite(cls, value: Any) -> Any:
        return _finite_or_none(value)

    @field_validator("per_seed", mode="before")
    @classmethod
    def _undefined_seeds_if_not_finite(cls, values: Any) -> Any:
        return [_finite_or_none(v) for v in values] if isinstance(values, (list, tuple)) else values

    @model_serializer(mode="wrap")
    def _omit_absent_spread(self, handler) -> dict[str, Any]:
        data = handler(self)
        for key in ("std", "per_seed", "ceiling"):
            if data.get(key) is None:
                data.pop(key, None)
        return data


class Headline(_Strict):
    """Which metric the board shows for a task, and which direction is better: higher, lower, or
    closer to `ideal` (StereoSet's SS is best at 50).

    How the boards plot it (each left out of the file at its default, so files without them read
    and write as they always did):

    - `plot`: a key metric of the task's `summary` is also drawn as a plot of its own on both
      boards, against its numeric tag as the headline's plot is (e.g. a dataset-inference p-value
      per epoch); False: it is a column of the summary table only.
    - `log_scale`: a plot of this metric (its own, or the task's plot when it is the headline) has
      a log10 value axis; values <= 0 are left out of that plot, and its note says so.
    - `reference_line`: a dashed line across that plot's value axis at this value (e.g. a test's
      level alpha = 0.05); positive where `log_scale` is set. None: no line.
    - `count`: the metric is a count (epochs, ranks): shown without decimals where it is whole.
    - `absent`: what the boards show for a finished run without this metric, instead of n/a, where its
      absence is itself the value (privacy_extraction's claimed ε: `∞`, a run without DP claims none).
      None: n/a.
    - `against`: with `plot`, its plot of its own draws one point per run: this metric's value against the
      run's value of the key metric of the same summary whose metric is `against`, in the same units, with
      the diagonal y = x (a bound against a claim: privacy_extraction's audited ε against the claimed ε). A
      run without a value of that one stands at the right edge, labelled by its `absent`. None: against the
      metric's numeric tag, as every other plot.
    """

    metric: str
    tags: dict[str, str] = Field(default_factory=dict)
    label: str
    better: Literal["higher", "lower", "ideal"]
    ideal: float | None = None
    plot: bool = False
    log_scale: bool = False
    reference_line: float | None = None
    count: bool = False
    absent: str | None = None
    against: str | None = None

    @model_validator(mode="after")
    def _ideal_given(self) -> "Headline":
        if (self.better == "ideal") != (self.ideal is not None):
            raise ValueError("give `ideal` exactly when better is 'ideal'")
        return self

    @model_validator(mode="after")
    def _reference_line_drawable(self) -> "Headline":
        if self.log_scale and self.reference_line is not None and self.reference_line <= 0:
            raise ValueError("a reference_line on a log10 axis (log_scale) must be above 0")
        return self

    @model_validator(mode="after")
    def _against_is_a_plot_of_another_metric(self) -> "Headline":
        if self.against is not None and (not self.plot or self.log_scale or self.against == self.metric):
            raise ValueError("`against` needs `plot`, a linear value axis, and another metric than its own")
        return self

    @model_serializer(mode="wrap")
    def _omit_display_defaults(self, handler) -> dict[str, Any]:
        data = handler(self)
        for key, default in _DISPLAY_DEFAULTS.items():
            if key in data and data[key] is default:
                del data[key]
        return data

    def direction(self) -> str:
        """A short mark of the better direction: ↑, ↓, or →50."""
        return {"higher": "↑", "lower": "↓"}.get(self.better) or f"→{self.ideal:g}"


# The display settings of a headline at their defaults, which the file leaves out.
_DISPLAY_DEFAULTS = {"plot": False, "log_scale": False, "reference_line": None, "count": False, "absent": None,
                     "against": None}

TASK_NAME_PATTERN = r"^[a-z][a-z0-9_]*$"


class TaskEntry(_Strict):
    name: str = Field(pattern=TASK_NAME_PATTERN)
    version: int = Field(ge=1)
    status: Literal["ok", "skipped"]
    skip_reason: str | None = None
    config: dict[str, Any]
    config_hash: str
    # The names of the `config` fields whose value differs from the task Config's default (sorted):
    # a run with cut (or otherwise changed) settings, which the board marks. [] when every setting
    # was the default; None where it is not known (files written before the field, imported runs).
    # What was computed is in `config` and `config_hash`: this is derived from them, not hashed.
    changed_settings: list[str] | None = None
    seed: int
    metrics: list[Metric] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    headline: Headline | None = None
    # The few metrics the board's summary table of the task shows (its headline among them).
    summary: list[Headline] = Field(default_factory=list)
    info: dict[str, Any] = Field(default_factory=dict)
    wall_time_s: float = 0.0
    # The process's peak resident memory while the task ran (the loaded model included), in bytes;
    # None where the kernel cannot say (`harness.run.heap.peak_rss_bytes`) and in older files.
    peak_rss_bytes: int | None = Field(None, ge=0)
    samples_file: str | None = None
    # Per-item values of one metric (series name -> item id -> value), e.g. the test M-MEM of
    # every prompt; the board compares how models rank the items (Kendall's tau).
    item_scores: dict[str, dict[str, float]] = Field(default_factory=dict)
    # What a reader of the metrics must know, one line each (e.g. mink_membership: members and
    # non-members are distinguishable without the model); left out of the file when there is none.
    warnings: list[str] = Field(default_factory=list)
    # The largest batch each step of the task ran (`scoring`, `generating`, `gradient norms`, ...:
    # `harness.scoring.fitting`), what `--batch-size auto` chose; left out when unknown (older files,
    # cached entries of older runs). The numbers do not depend on it.
    batch_sizes: dict[str, Annotated[int, Field(ge=1)]] = Field(default_factory=dict)
    # The sha256 of the task's records (`harness.core.records.records_digest`), which the results file's
    # sidecar holds, and the version of the reporting stage that computed the metrics from them
    # (`Task.REPORT_VERSION`); both left out where the task wrote no records (a task not yet split
    # into scoring and reporting, files made before records, imported runs): the board marks it unverified.
    records_sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    report_version: int | None = Field(None, ge=1)

    @model_serializer(mode="wrap")
    def _omit_no_warnings(self, handler) -> dict[str, Any]:
        data = handler(self)
        for key in ("warnings", "batch_sizes", "records_sha256", "report_version"):
            if not data.get(key):
                data.pop(key, None)
        return data

    @property
    def verifiable(self) -> bool:
        """Whether the entry's numbers can be recomputed: it ran and its records are in the sidecar."""
        return self.status == "ok" and self.records_sha256 is not None

    @field_validator("item_scores", mode="before")
    @classmethod
    def _drop_non_finite_items(cls, series: Any) -> Any:
        """An item whose value is not finite (undefined) is left out of its series, as code gives it."""
        if not isinstance(series, dict):
            return series
        return {name: {k: v for k, v in items.items() if not _not_finite(v)} if isinstance(items, dict) else items
                for name, items in series.items()}

    def headline_metric(self, head: "Headline | None" = None) -> "Metric | None":
        """The metric `head` (default: the task's headline) names, None when there is none."""
        head = head or self.headline
        if head is None:
            return None
        return next((m for m in self.metrics
                     if m.name == head.metric and all(m.tags.get(k) == v for k, v in head.tags.items())), None)


_SHA256 = r"^[0-9a-f]{64}$"
_IDENTITY_PARTS = ("weights_sha256", "tokenizer_sha256", "config_sha256")


class ModelInfo(_Strict):
    """The model a file scores. Schema 2: `identity` is `harness.model.identity`'s hash of the parts
    recorded beside it (identity_kind `model-sha256`), or for a model scored through a completions
    server (identity_kind `served`: its weights cannot be hashed) of its tokenizer, config and, in the
    weights' place, `details.served_sha256`, the sha256 of what the server says of the model; schema 1:
    the weights sha256 or hub commit, and no parts."""

    name: str
    source: str
    revision: str | None
    identity: str = Field(pattern=r"^[0-9a-f]{7,64}$")
    identity_kind: Literal["model-sha256", "served", "weights-sha256", "hub-commit"]
    weights_sha256: str | None = Field(None, pattern=_SHA256)
    tokenizer_sha256: str | None = Field(None, pattern=_SHA256)
    config_sha256: str | None = Field(None, pattern=_SHA256)
    kind: Literal["causal-lm", "masked-lm", "seq2seq", "token-classifier", "encoder"]
    dtype: str
    device: str
    details: dict[str, Any] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _omit_absent_parts(self, handler) -> dict[str, Any]:
        data = handler(self)
        for key in _IDENTITY_PARTS:
            if data.get(key) is None:
                data.pop(key, None)
        return data

    def check_schema(self, schema_version: int) -> None:
        """A `ValueError` when the identity fields are not those of `schema_version`."""
        parts = [key for key in _IDENTITY_PARTS if getattr(self, key) is not None]
        if schema_version == 1 and (parts or self.identity_kind == "model-sha256"):
            raise ValueError("a schema 1 file's model.identity_kind is weights-sha256 or hub-commit, "
                             f"without {', '.join(_IDENTITY_PARTS)}")
        if schema_version >= 2 and self.identity_kind == "served":
            if parts != list(_IDENTITY_PARTS[1:]) or not re.fullmatch(_SHA256, str(self.details.get("served_sha256"))):
                raise ValueError("a served model's identity (identity_kind served) has tokenizer_sha256, config_sha256 "
                                 "and details.served_sha256 in place of weights_sha256")
        elif schema_version >= 2 and (len(parts) < len(_IDENTITY_PARTS) or self.identity_kind != "model-sha256"):
            raise ValueError(f"a schema {schema_version} file's model.identity_kind is model-sha256 or served, "
                             f"with {', '.join(_IDENTITY_PARTS)}")


class HarnessInfo(_Strict):
    version: str
    git_commit: str | None


class Environment(_Strict):
    python: str
    torch: str
    transformers: str
    platform: str
    # The numerics (harness/run/reproducible.py): PyTorch's CPU kernels, its threads, and whether the run
    # was pinned (`harness.run.reproducible`) to give the same bits under any CPU capability. Absent in older files.
    cpu_capability: str | None = None
    threads: int | None = None
    pinned: bool | None = None
    # The accelerator (harness/run/accelerator.py): the type of device the model ran on (cpu, cuda, mps),
    # the parameters' dtype and transformers' attention implementation (eager, sdpa, ...); on CUDA the
    # GPU's name, the GPUs the process saw, the CUDA version PyTorch was built with and the driver's
    # version. Each is left out of the file when absent (older files; the GPU fields of a CPU run).
    device: str | None = None
    dtype: str | None = None
    attn_implementation: str | None = None
    gpu_name: str | None = None
    gpu_count: int | None = Field(None, ge=0)
    cuda: str | None = None
    gpu_driver: str | None = None

    @model_serializer(mode="wrap")
    def _omit_absent_accelerator(self, handler) -> dict[str, Any]:
        data = handler(self)
        for key in _ACCELERATOR_FIELDS:
            if data.get(key) is None:
                data.pop(key, None)
        return data


_ACCELERATOR_FIELDS = ("device", "dtype", "attn_implementation", "gpu_name", "gpu_count", "cuda", "gpu_driver")


class RunSettings(_Strict):
    # `--batch-size`: a number, or `auto` (the largest batch that fits, found by trying, each task's
    # `batch_sizes` saying what ran) with its cap `max_batch_size` (left out of the file otherwise).
    batch_size: int | str
    max_batch_size: Annotated[int, Field(ge=1)] | None = None
    limit: Annotated[int, Field(ge=1)] | None
    seed: int
    # Data-parallel processes that shared the scoring (`harness.scoring.distributed`); left out of the file
    # when 1, so single-process files read as they always did.
    processes: int = Field(1, ge=1)

    @field_validator("batch_size")
    @classmethod
    def _positive_or_auto(cls, value: int | str) -> int | str:
        if value == "auto" or (isinstance(value, int) and value >= 1):
            return value
        raise ValueError(f"must be a positive integer or 'auto', got {value!r}")

    @model_serializer(mode="wrap")
    def _omit_one_process(self, handler) -> dict[str, Any]:
        data = handler(self)
        if data.get("processes") == 1:
            del data["processes"]
        if data.get("max_batch_size") is None:
            data.pop("max_batch_size", None)
        return data


class ResultsFile(_Strict):
    schema_version: Literal[1, 2]
    created_at: AwareDatetime
    harness: HarnessInfo
    model: ModelInfo
    environment: Environment
    run: RunSettings
    tasks: list[TaskEntry]
    # The records sidecar beside the file (`harness.core.records.sidecar_name`), where a task wrote records.
    # A file name in the results file's folder, never a path.
    records_file: str | None = Field(None, pattern=r"^[A-Za-z0-9_-][A-Za-z0-9._-]*\.records\.json\.gz$")

    @model_serializer(mode="wrap")
    def _omit_no_records(self, handler) -> dict[str, Any]:
        data = handler(self)
        if data.get("records_file") is None:
            data.pop("records_file", None)
        return data

    @model_validator(mode="after")
    def _model_fits_schema(self) -> "ResultsFile":
        self.model.check_schema(self.schema_version)
        if any(t.records_sha256 for t in self.tasks) and not self.records_file:
            raise ValueError("tasks with records_sha256 need records_file, the sidecar that holds their records")
        return self

    def task(self, name: str) -> TaskEntry | None:
        return next((t for t in self.tasks if t.name == name), None)


def _field_path(error: dict) -> str:
    """The dotted path of a field; a key that is no printable text (a newline, say) as an escaped literal."""
    parts = (str(part) if str(part).isprintable() else ascii(str(part)) for part in error["loc"])
    return ".".join(parts) or "(top level)"


def _not_text(value: str) -> str | None:
    """Why a JSON string is no Unicode text (a lone surrogate, which JSON's \\u escapes can write and
    nothing can print or draw), or None."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"holds a lone surrogate ({value[err.start]!a}), not Unicode text"
    return None


def _unfit_value(value: Any, path: tuple = ()) -> tuple[tuple, str] | None:
    """The path of the first value of parsed JSON that no results file may hold, anywhere in it, and
    why: NaN or +-Infinity (Python's json reads the literals NaN and Infinity, and 1e999 as inf), or
    a string, or key, that is no Unicode text; None when there is none."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, f"{value!r} is not a finite number (JSON has no NaN or Infinity; an undefined value is null)"
    if isinstance(value, str):
        problem = _not_text(value)
        return (path, problem) if problem else None
    if isinstance(value, dict):
        for key, child in value.items():
            problem = _not_text(key)
            if problem:
                return (*path, key), f"its key {problem}"
            found = _unfit_value(child, (*path, key))
            if found:
                return found
    if isinstance(value, list):
        for index, child in enumerate(value):
            found = _unfit_value(child, (*path, index))
            if found:
                return found
    return None


def parse_results(text: str, origin: str) -> ResultsFile:
    """Validate a results file's text; `UserError` naming `origin` and the field at fault."""
    raw = parse_json_object(text, origin)
    unfit = _unfit_value(raw)
    if unfit:  # anywhere, `info` and `config` too, which the schema leaves free-form
        path, problem = unfit
        raise UserError(f"{origin}: field {_field_path({'loc': path})}: {problem}")
    if "schema_version" not in raw:
        raise UserError(f"{origin}: missing field schema_version")
    if raw["schema_version"] not in READABLE_SCHEMA_VERSIONS or isinstance(raw["schema_version"], bool):
        raise UserError(f"{origin}: unknown schema_version {raw['schema_version']!r} "
                        f"(this membench reads {' and '.join(map(str, READABLE_SCHEMA_VERSIONS))})")
    try:
        return ResultsFile.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        raise UserError(f"{origin}: field {_field_path(first)}: {first['msg']}") from None


def load_results(path: Path) -> ResultsFile:
    return parse_results(read_utf8(path, RESULTS_MAX_BYTES, "results file"), str(path))


def write_results(results: ResultsFile, path: Path) -> None:
    """Validate again and write atomically. The file holds no NaN or Infinity: the models store a
    non-finite metric value as None and leave a non-finite item score out."""
    ResultsFile.model_validate(results.model_dump())
    atomic_write_text(path, results.model_dump_json(indent=2) + "\n")


def safe_file_stem(name: str, max_length: int = 80) -> str:
    """A file-name-safe rendering of a model name: no separators, spaces or leading dots."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-_")
    stem = re.sub(r"\.{2,}", ".", stem)[:max_length].strip(".-_")
    return stem or "model"
