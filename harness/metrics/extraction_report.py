"""Extraction risk as the generating tasks report it, a pure function of each target's log p_z: a group's
metrics (`probability_metrics`, `probability_gaps`) and the info entry that says how p_z was measured
(`extraction_info`); the settings are `harness.scoring.extraction_report.ExtractionConfig`.

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
from typing import Any

import numpy as np

from harness.core.results import Metric
from harness.metrics import extraction as x

# log10 p_z below this (p_z = 0 included: a target token outside the kept set) counts as this in the
# medians and quantiles, so that every summary is a finite number; `pz_zero_share` reports p_z = 0 apart
LOG10_PZ_FLOOR = -1000.0
QUANTILES = (0.1, 0.25, 0.75, 0.9)


def extraction_info(scheme: dict[str, Any], config, targets: str, **facts: Any) -> dict[str, Any]:
    """The results file's `info.extraction`: the sampling scheme (`SamplingScheme.as_dict`), the attempts
    and level of `config` (an `ExtractionConfig`), the floor, facts of the scoring (e.g. how many targets
    were capped) and what the targets are."""
    return {"scheme": scheme, "attempts": list(config.extraction_attempts), "level": config.extraction_level,
            "log10_pz_floor": LOG10_PZ_FLOOR, **facts, "targets": targets}


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


def probability_metrics(log_p: np.ndarray, config, tags: dict, prefix: str = "") -> list[Metric]:
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


def probability_gaps(members: np.ndarray, others: np.ndarray, config, tags: dict,
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
