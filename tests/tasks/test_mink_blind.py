"""mink_membership v4 (issue 31): blind baselines beside the attacks, and the controls with known truth.
On the reference split (members and non-members both XSum) the blind AUC stays at 0.5 +- 0.1; on the
shifted split (`reference:shifted`: XSum members, StereoSet non-members) it is high and the run warns
in the results file and on stderr; the untrained reference model's attacks sit at chance only on the
reference split. Also the k sweep, TPR intervals and the low-FPR support."""

from __future__ import annotations

import numpy as np
import pytest

from harness.app.registry import select
from harness.core.results import load_results
from harness.metrics import blind as b
from harness.metrics import memorization as m
from harness.model.loading import ModelSpec
from harness.reference.build import checkpoint_folders
from harness.run.runner import EvaluateOptions, evaluate
from harness.scoring.text import truncate_words
from tasks.mink_membership.blind import DISTINGUISHABLE
from tasks.mink_membership.data import load_membership_data


def cut(data: str, length: int) -> tuple[list[str], np.ndarray]:
    rows = [(truncate_words(t.text, length, "en"), t.label)
            for t in load_membership_data(data, "train", None, "label", 0, None).texts]
    return [text for text, _ in rows if text], np.array([label for text, label in rows if text])


def test_shifted_split_is_length_matched():
    texts = load_membership_data("reference:shifted", "train", None, "label", 0, None).texts
    members, others = [t for t in texts if t.label == 1], [t for t in texts if t.label == 0]
    assert len(members) == len(others) == 200
    reference = {t.text_id for t in load_membership_data("reference", "train", None, "label", 0, None).texts
                 if t.label == 1}
    assert {t.text_id for t in members} == reference  # what the reference checkpoints were trained on
    assert all(o.text_id.startswith("stereoset:") for o in others)
    assert all(len(o.text.split()) >= len(t.text.split()) for t, o in zip(members, others))
    for length in (32, 128, 512):
        kept = [sum(len(t.text.split()) >= length for t in group) for group in (members, others)]
        assert abs(kept[0] - kept[1]) <= 5, (length, kept)


@pytest.mark.parametrize("length", [32, 128])
def test_blind_controls_with_known_truth(length):
    same, shifted = cut("reference", length), cut("reference:shifted", length)
    assert abs(m.roc_auc(same[1], b.bag_of_words_scores(*same)) - 0.5) <= 0.1
    assert m.roc_auc(shifted[1], b.bag_of_words_scores(*shifted)) >= 0.9


def aucs(entry) -> dict[str, float]:
    return {metric.tags["score"]: metric.value for metric in entry.metrics if metric.name == "auc"}


@pytest.fixture(scope="module")
def untrained(quick_reference, tmp_path_factory) -> dict:
    """{data: mink_membership entry} of the untrained quick reference model at 32 words, on the first 100
    members and 100 non-members."""
    settings = {"lengths": ["32"], "bootstrap_resamples": "100", "k_percents": ["5", "20"],
                "attacks": ["loss", "zlib", "min_k"]}
    model = ModelSpec(str(checkpoint_folders(quick_reference)[0]))
    out = tmp_path_factory.mktemp("blind")
    return {data: load_results(evaluate(model, select("mink_membership"), {**settings, "data": data},
                                        EvaluateOptions(output_path=out / data.replace(":", "-"), limit=200)))
            .task("mink_membership") for data in ("reference", "reference:shifted")}


def test_untrained_model_on_the_shifted_split(untrained):
    """The untrained model learnt nothing: on the reference split its attacks sit at chance; on the
    shifted split they need not (zlib divides by the compressed length, which differs by source; on
    the full untrained build LOSS and Min-K% reach 0.6 and more too, see the card), and the blind
    baseline and the warning say why."""
    shifted, same = aucs(untrained["reference:shifted"]), aucs(untrained["reference"])
    assert shifted["blind_bow"] >= 0.8 and abs(same["blind_bow"] - 0.5) <= 0.1
    for score in ("loss", "min_k_20"):
        assert abs(same[score] - 0.5) <= 0.1, (score, same[score])
    assert shifted["zlib"] >= 0.8 and shifted["zlib"] - same["zlib"] >= 0.2
    [warning] = untrained["reference:shifted"].warnings
    assert DISTINGUISHABLE in warning and "blind_bow" in warning
    assert untrained["reference"].warnings == []


def test_warning_on_stderr_also_from_the_cache(quick_reference, tmp_path, capsys):
    settings = {"lengths": ["32"], "bootstrap_resamples": "20", "k_percents": ["20"], "attacks": ["loss"],
                "data": "reference:shifted"}
    model = ModelSpec(str(checkpoint_folders(quick_reference)[0]))
    for run in range(2):  # the second from the cache
        evaluate(model, select("mink_membership"), settings, EvaluateOptions(output_path=tmp_path / str(run), limit=80))
        assert "membench: warning: mink_membership: blind baseline AUC >= 0.6" in capsys.readouterr().err


def test_k_sweep_intervals_and_low_fpr_support(untrained):
    entry = untrained["reference:shifted"]
    found = aucs(entry)
    [best] = [metric for metric in entry.metrics if metric.tags.get("score") == "min_k_best"]
    k = max((5, 20), key=lambda k: (found[f"min_k_{k}"], -k))
    assert (best.value, best.tags["k"], best.ci_low) == (found[f"min_k_{k}"], str(k), None)
    tprs = [metric for metric in entry.metrics if metric.name.startswith("tpr@")]
    assert {metric.name for metric in tprs} >= {"tpr@0.1fpr", "tpr@0.01fpr", "tpr@0.001fpr"}
    assert all(metric.ci_low is not None and metric.ci_low <= metric.ci_high for metric in tprs)
    support = entry.info["low_fpr"]["0.001"]
    assert support["per_length"]["32"] == {"nonmembers": 100, "false_positives": 0, "false_positives_inclusive": 0}
    assert "single highest-scoring non-member" in support["note"]
    assert entry.info["low_fpr"]["0.1"]["per_length"]["32"] == {"nonmembers": 100, "false_positives": 9,
                                                                "false_positives_inclusive": 10}
