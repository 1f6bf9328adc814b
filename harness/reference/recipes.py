"""The recipe registry: every reference build `membench run` and `membench reference build` know.

A recipe says what decides a build's weights (`Recipe.digest`); `reference_recipes` pairs each with
the function that builds it. `PretrainedEncoder` stands beside them for all-MiniLM-L6-v2, which is
fetched (`pretrained.minilm_folder`), not built.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from harness.reference.build import build, reference_builds
from harness.reference.mlm_build import MlmBuildConfig, build_mlm
from harness.reference.ner_build import NerBuildConfig, build_ner
from harness.reference.pretrained import MINILM_TASKS
from harness.reference.stereotype_build import StereotypeBuildConfig, build_stereotype
from harness.reference.t5_build import T5BuildConfig, build_t5


@dataclass(frozen=True)
class PretrainedEncoder:
    """The real pretrained encoder all-MiniLM-L6-v2 (`pretrained.MINILM`), scored as it is."""

    name: str = "sentence-transformers/all-MiniLM-L6-v2"
    TASKS = MINILM_TASKS

    def task_settings(self) -> dict[str, str]:
        return {}

    def variants(self) -> tuple[tuple[str, dict[str, str]], ...]:
        return (("", {}),)


def reference_recipes(quick: bool = False, seed: int = 0) -> list[tuple[object, Callable[..., Path]]]:
    """Every reference build as (its recipe, the function that builds it: `fn(recipe, folder=None,
    force=False) -> folder`): the causal LMs of `reference_builds` (their split and training seeded
    by `seed`), the NER token classifier, the T5 models, the masked LM and (not `quick`) the
    known-truth SS twins fine-tuned from the English member build."""
    causal = [replace(config, train=replace(config.train, seed=seed)) for config in reference_builds(quick)]
    stereotype = [] if quick else [(StereotypeBuildConfig(base=causal[0]), build_stereotype)]
    return ([(config, build) for config in causal]
            + [(NerBuildConfig(), build_ner), (T5BuildConfig(), build_t5), (MlmBuildConfig(), build_mlm)]
            + stereotype)
