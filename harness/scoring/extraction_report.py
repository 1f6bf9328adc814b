"""Extraction risk as the generating tasks report it: the settings they share (`ExtractionConfig`) and a
group's metrics from each target's log p_z (`probability_metrics`, `probability_gaps`).

p_z is the probability that one draw of the sampling scheme reproduces a target exactly (Hayes et al.
2024, *Measuring memorization in language models via probabilistic extraction*;
`harness.scoring.extraction`); a target is (n, p)-discoverable when 1 - (1 - p_z)^n >= p
(`harness.metrics.extraction`). Metrics, per group (tags: the caller's):
  extractable        share of targets (n, p)-discoverable, one per n (tags `attempts`, `level`)
  log10_pz_median    median of log10 p_z (the lower median: no interpolation)
  log10_pz_quantile  its 0.1, 0.25, 0.75 and 0.9 empirical quantiles (tag `quantile`)
  pz_zero_share      share of targets with p_z = 0 (a token outside the kept set)
  pz_mean            mean p_z: the expected share of targets one draw extracts
log10 p_z is floored at LOG10_PZ_FLOOR (p_z = 0 included), so every summary is a finite number.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from pydantic import Field, field_validator, model_validator

from harness.core.errors import UserError
from harness.core.results import Metric
from harness.core.task import TaskConfig
from harness.metrics import extraction as x
from harness.scoring.extraction import SamplingScheme

# log10 p_z below this (p_z = 0 included: a target token outside the kept set) counts as this in the
# medians and quantiles, so that every summary is a finite number; `pz_zero_share` reports p_z = 0 apart
LOG10_PZ_FLOOR = -1000.0
QUANTILES = (0.1, 0.25, 0.75, 0.9)


class ExtractionConfig(TaskConfig):
    """(n, p)-discoverable extraction's settings, shared by the tasks that report it."""

    extraction: bool = Field(True, description="(n, p)-discoverable extraction (Hayes et al. 2024): the exact "
                             "probability p_z that one draw of the sampling scheme reproduces each reference, and "
                             "the share extractable in n draws; off: not computed (nor, where a task has one, the "
                             "near-verbatim bound)")
    extraction_temperature: float = Field(1.0, description="extraction: the sampling temperature T (> 0)")
    extraction_top_k: int | None = Field(40, description="extraction: top-k K, an integer >= 1 ('none': no top-k)")
    extraction_top_p: float | None = Field(None, description="extraction: top-p P in (0, 1] ('none' or 1: no top-p)")
    extraction_attempts: tuple[int, ...] = Field(x.DEFAULT_ATTEMPTS, min_length=1, description="extraction: the "
                                                 "numbers of draws n at which the share (n, p)-extractable is reported")
    extraction_level: float = Field(x.DEFAULT_LEVEL, description="extraction: the level p in (0, 1]: extractable "
                                    "when n draws give the reference at least once with probability >= p")

    @field_validator("extraction_top_k", "extraction_top_p", mode="before")
    @classmethod
    def _none_from_text(cls, value: Any) -> Any:
        """'none' (any case) on the command line turns top-k or top-p off."""
        return None if isinstance(value, str) and value.strip().lower() in ("none", "off") else value

    @model_validator(mode="after")
    def _check_sampling(self) -> "ExtractionConfig":
        """Bad sampling or level settings: one line naming the flags (the runner adds the task's name)."""
        flags = "--extraction-temperature / --extraction-top-k / --extraction-top-p"
        first_bad_setting([(flags, self.scheme().check),
                           ("--extraction-attempts / --extraction-level",
                            lambda: x.check_attempts(self.extraction_attempts, self.extraction_level))])
        return self

    def scheme(self) -> SamplingScheme:
        """The sampling scheme whose p_z is measured."""
        return SamplingScheme(temperature=self.extraction_temperature, top_k=self.extraction_top_k,
                              top_p=self.extraction_top_p)


def first_bad_setting(checks: list[tuple[str, Callable[[], Any]]]) -> None:
    """Run each (flags, check) in order; the first check's `UserError` becomes a ValueError "flags: message",
    which a config validator raises and the runner turns into one line naming the task."""
    for flags, check in checks:
        try:
            check()
        except UserError as err:
            raise ValueError(f"{flags}: {err}") from None


def floored_log10(log_p: np.ndarray) -> np.ndarray:
    """log10 of probabilities given as natural logs, floored at LOG10_PZ_FLOOR (p = 0 included)."""
    return np.maximum(np.asarray(log_p, dtype=np.float64) / math.log(10.0), LOG10_PZ_FLOOR)


def finite_log10(value: float) -> float | None:
    """A sample's log10 p_z: None where p_z = 0 (the samples file holds no Infinity)."""
    return float(value / math.log(10.0)) if math.isfinite(value) else None


def quantile(values: np.ndarray, q: float) -> float:
    """The empirical q-quantile without interpolation (the lower median for q = 0.5 and an even count):
    always one of the values, so the floor is never averaged with a real log10 p_z."""
    return float(np.quantile(values, q, method="inverted_cdf"))


def probability_metrics(log_p: np.ndarray, config: ExtractionConfig, tags: dict, prefix: str = "") -> list[Metric]:
    """A group's extraction metrics (module docstring) from each target's log probability (p_z, or a
    near-verbatim bound with `prefix` 'near_verbatim_')."""
    n, level = len(log_p), config.extraction_level
    summary = x.extraction_summary(log_p, config.extraction_attempts, level)
    out = [Metric(name=f"{prefix}extractable", value=summary[f"extractable_at_{k}"], n=n,
                  tags={**tags, "attempts": str(k), "level": f"{level:g}"}) for k in config.extraction_attempts]
    values = floored_log10(log_p)
    out.append(Metric(name=f"{prefix}log10_pz_median", value=quantile(values, 0.5), n=n, tags=tags))
    out += [Metric(name=f"{prefix}log10_pz_quantile", value=quantile(values, q), n=n,
                   tags={**tags, "quantile": f"{q:g}"}) for q in QUANTILES]
    out.append(Metric(name=f"{prefix}pz_zero_share", value=float(np.mean(np.isneginf(log_p))), n=n, tags=tags))
    out.append(Metric(name=f"{prefix}pz_mean", value=summary["mean_pz"], n=n, tags=tags))
    return out


def probability_gaps(members: np.ndarray, others: np.ndarray, config: ExtractionConfig, tags: dict,
                     prefix: str = "") -> list[Metric]:
    """Members minus non-members (the caller's group tag, e.g. `members_minus_non_members`): `extractable_gap`
    per n, `log10_pz_median_gap` (of the floored medians) and `pz_mean_gap`; positive = members more
    extractable."""
    level, n = config.extraction_level, len(members) + len(others)
    gap = x.extraction_gap(members, others, config.extraction_attempts, level)
    out = [Metric(name=f"{prefix}extractable_gap", value=gap[f"extractable_at_{k}"], n=n,
                  tags={**tags, "attempts": str(k), "level": f"{level:g}"}) for k in config.extraction_attempts]
    median = quantile(floored_log10(members), 0.5) - quantile(floored_log10(others), 0.5)
    out.append(Metric(name=f"{prefix}log10_pz_median_gap", value=median, n=n, tags=tags))
    out.append(Metric(name=f"{prefix}pz_mean_gap", value=gap["mean_pz"], n=n, tags=tags))
    return out
