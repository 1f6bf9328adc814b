"""The null checkpoints' bands (`harness.reference.null_bands`, issue 77): the Mann-Whitney null of an AUC,
Bonferroni over the scores read, counts scaled to a score's own texts (not to M-MEM's pairs), selected scores and
trained checkpoints left out, finetune's copy before fine-tuning read on any model, today's versions only, and
the job's table failing on a reading outside its band."""

from __future__ import annotations

import numpy as np
import pytest

from harness.core.results import Metric
from harness.reference.controls import SMOLLM2
from harness.reference.null_bands import band_readings, band_report, band_z, null_sd, real_model_files
from tests.helpers.board_files import make_results


def results_of(name: str, task: str, metrics: list[Metric], counts: dict[str, int], version: int = 1):
    """A results file of control `name` with one `task` entry holding `metrics` and `counts`."""
    results = make_results(name=f"membench-ref/{name}", task=task)
    entry = results.tasks[0].model_copy(update={"metrics": metrics, "counts": counts, "version": version})
    return results.model_copy(update={"tasks": [entry]})


def twin(name: str, aucs: dict[tuple[str, str], tuple[float, int]]):
    """A mink_membership file of control `name` with AUCs {(score, length): (value, n)}, 100 members and 100
    non-members at every length."""
    metrics = [Metric(name="auc", value=value, n=n, tags={"score": score, "length": length})
               for (score, length), (value, n) in aucs.items()]
    counts = {f"{side}@{length}": 100 for side in ("members", "nonmembers") for _, length in aucs}
    return results_of(name, "mink_membership", metrics, counts)


def test_the_null_sd_is_the_spread_of_a_fixed_score_under_relabeling():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=200)
    ranks = scores.argsort().argsort() + 1
    aucs = []
    for _ in range(4000):
        labels = rng.permutation(np.r_[np.ones(100), np.zeros(100)])
        aucs.append((ranks[labels == 1].sum() - 100 * 101 / 2) / (100 * 100))
    assert np.std(aucs) == pytest.approx(null_sd(100, 100), rel=0.05)


def test_a_score_outside_its_band_fails_and_selected_scores_are_not_read():
    sd = null_sd(100, 100)
    z = band_z(3)
    inside = {("loss", "128"): (0.5 + 0.9 * z * sd, 200), ("dc_pdd", "128"): (0.5 - 0.9 * z * sd, 200),
              ("recall", "128"): (0.5, 134), ("min_k_best", "128"): (0.9, 200)}
    table, outside = band_report([twin("xsum-gpt2-e00", inside)])
    assert outside == [] and "ok" in table and "not measured" in table  # ja-gpt2-e00 is absent
    readings = band_readings([twin("xsum-gpt2-e00", inside)])
    assert {r.where for r in readings} == {"loss at 128 words", "dc_pdd at 128 words", "recall at 128 words"}
    [recall] = [r for r in readings if r.where.startswith("recall")]
    assert (recall.members, recall.non_members) == (67, 67) and recall.sd > sd  # its own 134 texts, a wider band
    leaky = {**inside, ("dc_pdd", "128"): (0.5 + 1.1 * z * sd, 200)}
    table, outside = band_report([twin("xsum-gpt2-e00", leaky)])
    assert [r.where for r in outside] == ["dc_pdd at 128 words"] and "FAILED (1 outside)" in table
    assert band_readings([twin("xsum-gpt2-e30", leaky)]) == []  # a trained checkpoint has no null band
    assert band_readings([twin("xsum-gpt2-e00", leaky)], versions={"mink_membership": 2}) == []  # another version


def test_finetune_before_fine_tuning_on_any_model_and_ner_m_mem_over_names_not_pairs():
    sd = null_sd(64, 64)
    metrics = [Metric(name="auc", value=0.5 + 4 * sd, n=128, tags={"score": "loss", "epoch": "0",
                                                                  "trained_on": "members"}),
               Metric(name="auc", value=0.99, n=128, tags={"score": "loss", "epoch": "4", "trained_on": "members"})]
    finetuned = results_of(SMOLLM2, "finetune_memorization", metrics, {"members": 64, "non_members": 64})
    [reading] = band_readings([finetuned])
    assert reading.where == "loss before fine-tuning" and not reading.inside  # 4 sds, beyond band_z(1) = 2.58
    assert real_model_files([finetuned, twin("xsum-gpt2-e00", {})]) == [finetuned]
    ner = results_of("ner-bert-e00", "ner_prompt_memorization",
                     [Metric(name="m_mem", value=0.55, n=10000, tags={"strategy": "opt_best"})],
                     {"test_in": 100, "test_out": 100})
    [m_mem] = band_readings([ner])
    assert (m_mem.members, m_mem.non_members) == (100, 100) and m_mem.inside  # 1.22 sds of 100 x 100 names
