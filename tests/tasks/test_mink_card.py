"""The mink_membership card states only what reproduces: every figure of its table of measured AUCs, and the
untrained models' DC-PDD AUCs quoted in the prose, equal the committed results file they come from; the untrained
model's AUCs on the shifted split equal the results file committed beside the card (`measured/`); every figure of
its blind-baseline table, and the texts each control split keeps per length, are recomputed here (the blind
baselines never query a model). The bench sentences are checked by tests/unit/test_bench_records.py."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from harness.metrics import memorization as m
from harness.scoring.text import truncate_words
from tasks.mink_membership.blind import blind_scores
from tasks.mink_membership.data import load_membership_data
from tasks.mink_membership.task import MinkConfig, MinkMembership
from tests.helpers.committed import card_table, committed_files, flat, measured_beside_card, same, sentence

ROOT = Path(__file__).resolve().parents[2]
CARD = (ROOT / "tasks" / "mink_membership" / "README.md").read_text(encoding="utf-8")
TEXT = flat(CARD)
COLUMNS = {"LOSS": "loss", "zlib": "zlib", "Min-K% 20": "min_k_20", "Min-K%++ 20": "min_k_pp_20", "ref": "ref",
           "ne": "ne", "ReCaLL": "recall", "DC-PDD": "dc_pdd", "gradnorm": "gradnorm"}


# The attacks compute what they computed in this version (the changelog: v5 and v6 changed the blind baselines only).
ATTACKS_SINCE = 4


def committed_mink() -> dict[str, dict[str, float]]:
    """model name (the reference prefix dropped) -> score -> AUC at 128 words, of the newest committed
    mink_membership entry of each model whose attacks are today's (`ATTACKS_SINCE`)."""
    found: dict[str, tuple] = {}
    for results in committed_files():
        entry = results.task("mink_membership")
        if entry is None or entry.status != "ok" or not ATTACKS_SINCE <= entry.version <= MinkMembership.VERSION:
            continue
        name = results.model.name.removeprefix("membench-ref/")
        if name not in found or (entry.version, results.created_at) > found[name][0]:
            aucs = {metric.tags["score"]: metric.value for metric in entry.metrics
                    if metric.name == "auc" and metric.tags.get("length") == "128"}
            found[name] = ((entry.version, results.created_at), entry.config, aucs)
    return {name: {"data": config["data"], "dc_pdd_corpus": config["dc_pdd_corpus"], **aucs}
            for name, (_, config, aucs) in found.items()}


@cache
def split_texts(split: str):
    """The labelled texts of a built-in split (`reference`, `reference:shifted`, `reference:era`)."""
    return load_membership_data(split, "train", None, "label", 0, None).texts


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
        texts = split_texts(split)
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


def test_the_blind_auc_below_chance_is_the_tables():
    """"0.434 at 128 words on the reference split": the table's `blind_bow` cell (recomputed above)."""
    (auc,) = sentence(TEXT, r"held-out fold: ([\d.]+) at 128 words on the reference split\)")
    header, rows = card_table(CARD, "data")
    (row,) = [row for row in rows if row[:2] == ["`reference`", "`blind_bow`"]]
    assert auc == row[header.index("128")]


def test_the_untrained_dc_pdd_aucs_are_the_committed_ones():
    """"the untrained models read {} (English) and {} (Japanese), inside their null bands" (DC-PDD at 128 words), of
    the committed runs, which used `--dc-pdd-corpus outside` as every reference checkpoint's did."""
    english, japanese = sentence(TEXT, r"the untrained models read ([\d.]+) \(English\) and ([\d.]+) \(Japanese\), "
                                       r"inside their null\W+bands")
    committed = committed_mink()
    for text, model in ((english, "xsum-gpt2-e00"), (japanese, "ja-gpt2-e00")):
        assert same(text, committed[model]["dc_pdd"]), (model, text, committed[model]["dc_pdd"])
    assert "checkpoints from `membench run`, with `--dc-pdd-corpus outside`," in TEXT
    for model in ("xsum-gpt2-e00", "xsum-gpt2-e01", "xsum-gpt2-e30", "xsum-gpt2-nonmembers-e30",
                  "ja-gpt2-e00", "ja-gpt2-e01", "ja-gpt2-e30"):
        assert committed[model]["dc_pdd_corpus"] == "outside", model


def test_the_untrained_model_on_the_shifted_split_is_its_committed_results_file():
    """"on `reference:shifted` the untrained reference model ... reads LOSS AUC {}, Min-K% {} and zlib {} at 128
    words": the results file committed beside the card (`measured/`), made by the command the card gives, of the
    shipped untrained checkpoint (its weights' sha256 in the build's manifest)."""
    results = measured_beside_card("mink_membership")
    entry = results.task("mink_membership")
    assert entry.status == "ok" and ATTACKS_SINCE <= entry.version <= MinkMembership.VERSION
    assert results.run.limit is None and entry.config["data"] == "reference:shifted"
    folder, name, attacks = sentence(
        TEXT, r"made by `membench evaluate --model (harness/reference/weights/\S+) --model-name (\S+) --tasks "
              r"mink_membership --data reference:shifted --attacks (\S+)`\)")
    assert (results.model.source, results.model.name, entry.config["attacks"]) == (folder, name, attacks.split(","))
    manifest = json.loads((ROOT / folder).parent.joinpath("manifest.json").read_text(encoding="utf-8"))
    (checkpoint,) = [c for c in manifest["checkpoints"] if c["folder"] == Path(folder).name]
    assert checkpoint["epoch"] == 0 and checkpoint["weights_sha256"] == results.model.weights_sha256
    aucs = {m.tags["score"]: m.value for m in entry.metrics if m.name == "auc" and m.tags.get("length") == "128"}
    figures = sentence(TEXT, r"nothing, reads LOSS AUC ([\d.]+), Min-K% ([\d.]+) and zlib ([\d.]+) at 128 words")
    for text, score in zip(figures, ("loss", "min_k_20", "zlib"), strict=True):
        assert same(text, aucs[score]), (score, text, aucs[score])
    [test] = [m.value for m in entry.metrics if m.name == "di_p_value" and m.tags == {"length": "128"}]
    [guard] = [m.value for m in entry.metrics if m.name == "di_guard_p_value" and m.tags == {}]
    stated = sentence(TEXT, r"finds\W+the set too \(p = (\S+) at 128\W+words, (\S+) null standard deviations out\), "
                            r"and its IID guard says why: it rejects on the texts\W+alone \(p = (\S+), (\S+) out\)")
    found = entry.info["dataset_inference"]
    assert same(stated[0], test) and same(stated[1], found["128"]["null_sds"])
    assert same(stated[2], guard) and same(stated[3], found["guard"]["null_sds"])
    assert any("IID guard rejects" in line for line in entry.warnings)


def kept(split: str, lengths: list[int]) -> list[str]:
    """"members/non-members" of `split` that have at least L words, per L."""
    texts = split_texts(split)
    counts = []
    for length in lengths:
        labels = [t.label for t in texts if truncate_words(t.text, length, "en") is not None]
        counts.append(f"{labels.count(1)}/{labels.count(0)}")
    return counts


def test_the_control_splits_texts_per_length_are_recomputed():
    """The Data table's counts of the texts `reference:shifted` and `reference:era` keep per L (members/non-members
    with at least L words), recomputed from the data."""
    pairs, lengths = sentence(TEXT, r"about as many of each: ((?:\d+/\d+, )+\d+/\d+) at ([\d, ]+) words\)")
    assert pairs.split(", ") == kept("reference:shifted", [int(x) for x in lengths.split(", ")])
    (pairs,) = sentence(TEXT, r"Per L: ((?:\d+/\d+, )+\d+/\d+) at 32 … 512 words\.")
    assert pairs.split(", ") == kept("reference:era", list(MinkConfig().lengths))


def test_the_departures_from_the_paper_are_the_committed_runs():
    """The k = 10 against k = 20 AUCs, the members that reach 512 words and the Japanese texts too short
    for 512 words, as the card's "Departures from the paper" gives them, are the committed files'; its table
    names the version and the day of those runs."""
    from tests.helpers.committed import committed_run, newest_committed

    header, _ = card_table(CARD, "the seed")
    version, day = re.fullmatch(r"effect, in the committed reference runs \(v(\d+), `membench run` of "
                                r"(\d{4}-\d\d-\d\d)\)", header[-1]).groups()
    entries = newest_committed("mink_membership", int(version))
    assert int(version) == MinkMembership.VERSION, "the table cites runs of an older version"
    for model in ("xsum-gpt2-e01", "xsum-gpt2-e30", "ja-gpt2-e01", "ja-gpt2-e30"):
        assert committed_run("mink_membership", entries[model]).created_at.date().isoformat() == day, model

    def auc(model: str, k: int, length: str) -> float:
        [found] = [x.value for x in entries[model].metrics
                   if x.name == "auc" and x.tags == {"score": f"min_k_{k}", "length": length}]
        return found

    assert "(English: AUC 1.0 at both k from 32 to 256 words)" in TEXT
    assert all(auc("xsum-gpt2-e30", k, length) == 1.0 for k in (10, 20) for length in ("32", "64", "128", "256"))
    [reach] = map(int, sentence(TEXT, r"\((\d+) of the 200 members reach 512 words\)"))
    assert reach == entries["xsum-gpt2-e30"].counts["members@512"]
    [too_short] = map(int, sentence(TEXT, r"never reach 512 words \((\d+) of 400 too short\)"))
    assert too_short == entries["ja-gpt2-e30"].counts["too_short@512"] == 400


def test_the_paper_preset_table_prints_the_default_headline_as_the_measured_table_does():
    """The default's headline in "What the paper preset changes" (Min-K% 20% AUC at 128 words, from
    bench_paper_presets--ishihara, whose figures tests/unit/test_bench_records.py checks) is written as the table
    of measured AUCs writes the committed run's: the bench's default runs are those runs, and a value is printed
    one way."""
    _, presets = card_table(CARD, "checkpoint")
    header, measured = card_table(CARD, "model")
    column = header.index("Min-K% 20")
    written = {row[0]: row[column] for row in measured}
    committed = committed_mink()
    for row in presets:
        model = row[0].strip("`")
        auc = row[1].split(" / ")[0]
        assert auc == written[model], (model, auc, written[model])
        assert auc == f"{committed[model]['min_k_20']:.3f}", (model, auc, committed[model]["min_k_20"])


def test_the_dataset_inference_page_s_direction_example_is_the_committed_file():
    """docs/dataset-inference.md: "after 1 epoch the reference GPT-2's committed results file reads LOSS AUC {} at
    128 words, zlib {} and Min-K% at 5% {}": scores of one model that separate by very different margins."""
    page = flat((ROOT / "docs" / "dataset-inference.md").read_text(encoding="utf-8"))
    loss, zlib, min_k = sentence(page, r"committed results file reads LOSS AUC ([\d.]+) at 128 words,\W+zlib ([\d.]+) "
                                       r"and Min-K% at 5% ([\d.]+);")
    aucs = committed_mink()["xsum-gpt2-e01"]
    assert same(loss, aucs["loss"]) and same(zlib, aucs["zlib"]) and same(min_k, aucs["min_k_5"])
    assert aucs["zlib"] < aucs["loss"] < aucs["min_k_5"]
