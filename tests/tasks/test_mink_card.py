"""The mink_membership card states only what reproduces: every figure of its table of measured AUCs equals
the committed results file it comes from, and every figure of its blind-baseline table is recomputed here
(the blind baselines never query a model)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from harness.core.results import load_results
from harness.metrics import memorization as m
from harness.scoring.text import truncate_words
from tasks.mink_membership.blind import blind_scores
from tasks.mink_membership.data import load_membership_data
from tasks.mink_membership.task import MinkConfig, MinkMembership
from tests.helpers.committed import card_table

ROOT = Path(__file__).resolve().parents[2]
CARD = (ROOT / "tasks" / "mink_membership" / "README.md").read_text(encoding="utf-8")
COLUMNS = {"LOSS": "loss", "zlib": "zlib", "Min-K% 20": "min_k_20", "Min-K%++ 20": "min_k_pp_20", "ref": "ref",
           "ne": "ne", "ReCaLL": "recall", "DC-PDD": "dc_pdd", "gradnorm": "gradnorm"}


# The attacks compute what they computed in this version (the changelog: v5 and v6 changed the blind baselines only).
ATTACKS_SINCE = 4


def committed_mink() -> dict[str, dict[str, float]]:
    """model name (the reference prefix dropped) -> score -> AUC at 128 words, of the newest committed
    mink_membership entry of each model whose attacks are today's (`ATTACKS_SINCE`)."""
    found: dict[str, tuple] = {}
    for path in sorted((ROOT / "submissions").glob("*.json")):
        results = load_results(path)
        entry = results.task("mink_membership")
        if entry is None or entry.status != "ok" or not ATTACKS_SINCE <= entry.version <= MinkMembership.VERSION:
            continue
        name = results.model.name.removeprefix("membench-ref/")
        if name not in found or (entry.version, results.created_at) > found[name][0]:
            aucs = {metric.tags["score"]: metric.value for metric in entry.metrics
                    if metric.name == "auc" and metric.tags.get("length") == "128"}
            found[name] = ((entry.version, results.created_at), entry.config["data"], aucs)
    return {name: {"data": data, **aucs} for name, (_, data, aucs) in found.items()}


def test_every_measured_auc_is_the_committed_one():
    header, rows = card_table(CARD, "model")
    committed = committed_mink()
    assert len(rows) >= 9
    for row in rows:
        model, data, cells = row[0], row[1], dict(zip(header[2:], row[2:]))
        assert model in committed, f"{model}: no committed mink_membership results file of v{ATTACKS_SINCE} or later"
        assert committed[model]["data"] == data, model
        for column, text in cells.items():
            score = COLUMNS[column]
            if text == "":
                assert committed[model].get(score) is None, (model, column, "measured but not in the card")
            else:
                assert committed[model].get(score) is not None, (model, column)
                assert float(text) == pytest.approx(committed[model][score], abs=5e-4), (model, column)


def test_every_blind_auc_is_recomputed():
    header, rows = card_table(CARD, "data")
    lengths = [int(cell) for cell in header[2:]]
    config = MinkConfig()
    assert lengths == list(config.lengths) and len(rows) == 6
    by_split: dict[str, dict[str, list[float]]] = {}
    for split in {re.sub(r"`", "", row[0]) for row in rows}:
        texts = load_membership_data(split, "train", None, "label", 0, None).texts
        values: dict[str, list[float]] = {"blind_bow": [], "blind_date": []}
        for length in lengths:
            cut = {i: truncate_words(t.text, length, "en") for i, t in enumerate(texts)}
            cut = {i: text for i, text in cut.items() if text is not None}
            scores, _ = blind_scores(cut, {i: texts[i].label for i in cut}, config, 0)
            labels = np.array([texts[i].label for i in cut])
            for name in values:
                values[name].append(m.roc_auc(labels, np.array([scores[i][name] for i in cut])))
        by_split[split] = values
    for row in rows:
        split, score = row[0].strip("`"), row[1].strip("`")
        np.testing.assert_allclose([float(cell) for cell in row[2:]], by_split[split][score], atol=5e-4,
                                   err_msg=f"{split} {score}")
