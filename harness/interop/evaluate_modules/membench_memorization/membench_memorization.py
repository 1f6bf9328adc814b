"""membench memorization metric: eidetic (forward match) and approximate (Levenshtein) memorization of
generated continuations against held-back references (Ishihara & Takahashi 2024).

A thin `evaluate` wrapper of `harness.metrics.memorization` (forward_match, approximate_memorization,
memorization_summary): the numbers equal those of membench's `paywall_memorization` task.
"""

from __future__ import annotations

import datasets
import evaluate

from harness.metrics.memorization import approximate_memorization, forward_match, memorization_summary

_CITATION = """\
@inproceedings{ishihara-takahashi-2024-quantifying,
  title     = {Quantifying Memorization and Detecting Training Data of Pre-trained Language Models
               using {J}apanese Newspaper},
  author    = {Ishihara, Shotaro and Takahashi, Hiromu},
  booktitle = {Proceedings of the 17th International Natural Language Generation Conference},
  year      = {2024},
  url       = {https://arxiv.org/abs/2404.17143}
}
"""

_DESCRIPTION = """\
Memorization metrics of membench (Ishihara & Takahashi 2024): how much of a held-back reference
continuation (e.g. the paywalled part of an article) a model reproduces when prompted with the text
before it. Per example, the eidetic score is the number of leading characters of the generation equal
to the reference (their common prefix), and the approximate score is
1 - Levenshtein(generation, reference) / max(len(generation), len(reference)) in characters (1.0 when
both are empty). Reports the max and mean of the eidetic scores and the mean and median of the
approximate scores; higher means more memorization. Comparison is on characters, so it works for
languages without spaces (Japanese) as it does for English; strings are compared as given (strip
leading whitespace yourself if your generations start with it; membench's task does).
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): generated continuations, one per example.
    references (`list` of `str`): the held-back reference continuations, one per example.
    return_per_example (`bool`, default `False`): also return the per-example scores.
Returns:
    eidetic_max (`float`, >= 0): the longest forward match, in characters.
    eidetic_mean (`float`, >= 0): the mean forward match, in characters.
    approximate_mean (`float`, 0..1): the mean approximate-memorization similarity.
    approximate_median (`float`, 0..1): its median.
    eidetic (`list` of `int`), approximate (`list` of `float`): per example, only if return_per_example.
Examples:
    >>> import evaluate
    >>> from harness.interop.evaluate_modules import module_path
    >>> memorization = evaluate.load(module_path("membench_memorization"))
    >>> memorization.compute(predictions=["abcxy"], references=["abcde"])
    {'eidetic_max': 3.0, 'eidetic_mean': 3.0, 'approximate_mean': 0.6, 'approximate_median': 0.6}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class MembenchMemorization(evaluate.Metric):
    """Eidetic and approximate memorization of continuations (membench `harness.metrics.memorization`)."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("string"),
                                        "references": datasets.Value("string")}),
            reference_urls=["https://arxiv.org/abs/2404.17143"],
        )

    def _compute(self, predictions, references, return_per_example: bool = False) -> dict:
        if not predictions:
            raise ValueError("membench_memorization needs at least one prediction/reference pair")
        eidetic = [forward_match(g, r) for g, r in zip(predictions, references)]
        approximate = [approximate_memorization(g, r) for g, r in zip(predictions, references)]
        out: dict = memorization_summary(eidetic, approximate)
        if return_per_example:
            out["eidetic"] = eidetic
            out["approximate"] = approximate
        return out
