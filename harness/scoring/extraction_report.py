"""Extraction risk's settings, shared by the generating tasks (`ExtractionConfig`); the metrics they report
from each target's log p_z are `harness.metrics.extraction_report`'s.

p_z is the probability that one draw of the sampling scheme reproduces a target exactly (Hayes et al.
2024, *Measuring memorization in language models via probabilistic extraction*;
`harness.scoring.extraction`); a target is (n, p)-discoverable when 1 - (1 - p_z)^n >= p
(`harness.metrics.extraction`).
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import Field, field_validator, model_validator

from harness.core.errors import UserError
from harness.core.task import TaskConfig
from harness.metrics import extraction as x
from harness.scoring.extraction import SamplingScheme


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
