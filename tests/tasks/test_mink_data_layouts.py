"""mink_membership reads the field's benchmarks in their own layouts: WikiMIA (one split per
length, `input` + `label`; `--split all`) and MIMIR (a `member` and a `nonmember` text per row,
a configuration per domain), from the hub by id (here: local datasets of the same layout served in
place of the hub) and from local JSONL and Parquet files."""

from __future__ import annotations

import json

import datasets
import huggingface_hub.constants
import pytest
from conftest import assert_user_error, write_jsonl

from harness.app.cli import main
from harness.core.errors import UserError
from harness.core.results import load_results
from harness.files.sources import HubDataset
from tasks.mink_membership.data import WIKIMIA_SPLITS, load_membership_data

WIKIMIA_ROWS = {split: {"input": [f"event {n} words {i}" for i in range(4)], "label": [1, 0, 1, 0]}
                for n, split in zip((32, 64, 128, 256), WIKIMIA_SPLITS)}
MIMIR_ROWS = {"member": ["a member text one", "a member text two"],
              "nonmember": ["a nonmember text one", "a nonmember text two"]}


@pytest.fixture
def hub(monkeypatch):
    """`HubDataset.load` serves local datasets of the hub's layouts; records what was asked for."""
    asked = []

    def load(self):
        asked.append((self.repo_id, self.config, self.split))
        if self.repo_id == "swj0419/WikiMIA":
            return datasets.Dataset.from_dict(WIKIMIA_ROWS[self.split])
        if self.repo_id == "iamgroot42/mimir":
            return datasets.Dataset.from_dict(MIMIR_ROWS)
        return datasets.Dataset.from_dict({"sentence": ["x"], "target": [1]})

    monkeypatch.setattr(HubDataset, "load", load)
    return asked


def test_wikimia_one_split(hub):
    data = load_membership_data("swj0419/WikiMIA", "WikiMIA_length64", None, "label", 0, None)
    assert hub == [("swj0419/WikiMIA", None, "WikiMIA_length64")]
    assert [(t.text_id, t.text, t.label) for t in data.texts] == [
        ("0", "event 64 words 0", 1), ("1", "event 64 words 1", 0), ("2", "event 64 words 2", 1),
        ("3", "event 64 words 3", 0)]
    assert data.source == "hub dataset swj0419/WikiMIA (WikiMIA_length64)"


def test_wikimia_all_length_splits(hub):
    data = load_membership_data("swj0419/WikiMIA", "all", None, "label", 0, None)
    assert [split for _, _, split in hub] == list(WIKIMIA_SPLITS)
    assert len(data.texts) == 16 and sum(t.label for t in data.texts) == 8
    assert data.texts[0].text_id == "WikiMIA_length32:0" and data.texts[-1].text_id == "WikiMIA_length256:3"
    assert data.texts[-1].text == "event 256 words 3"


def test_mimir_subset_and_split(hub):
    data = load_membership_data("iamgroot42/mimir", "ngram_13_0.2", None, "label", 0, None, subset="arxiv")
    assert hub == [("iamgroot42/mimir", "arxiv", "ngram_13_0.2")]
    assert [(t.text_id, t.text, t.label) for t in data.texts] == [
        ("0/member", "a member text one", 1), ("0/nonmember", "a nonmember text one", 0),
        ("1/member", "a member text two", 1), ("1/nonmember", "a nonmember text two", 0)]
    assert data.source == "hub dataset iamgroot42/mimir (arxiv, ngram_13_0.2)"


def test_comma_separated_splits_and_limit(hub):
    data = load_membership_data("swj0419/WikiMIA", "WikiMIA_length32,WikiMIA_length128", None, "label", 0, 3)
    assert [split for _, _, split in hub] == ["WikiMIA_length32", "WikiMIA_length128"]
    assert [t.text_id for t in data.texts] == ["WikiMIA_length32:0", "WikiMIA_length32:1", "WikiMIA_length32:2"]


def test_layouts_that_fit_neither_are_named(hub):
    with pytest.raises(UserError, match="has sentence, target"):
        load_membership_data("someone/other", "train", None, "label", 0, None)
    with pytest.raises(UserError, match="--split all is known only for swj0419/WikiMIA"):
        load_membership_data("someone/other", "all", None, "label", 0, None)


@pytest.mark.slow  # datasets' offline hub lookup takes about 20 s
def test_offline_hub_fails_fast_naming_the_dataset(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the libraries read the variable once, when imported (before this test in a whole run, which then
    # waited 23 s for network timeouts)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    with pytest.raises(UserError, match="swj0419/WikiMIA"):
        load_membership_data("swj0419/WikiMIA", "WikiMIA_length32", None, "label", 0, None)


def evaluate(tiny_lm, data, out) -> object:
    argv = ["evaluate", "--model", str(tiny_lm), "--tasks", "mink_membership", "--data", str(data), "--lengths", "3",
            "--attacks", "loss,min_k", "--k-percents", "20", "--bootstrap-resamples", "10", "--device", "cpu",
            "--output-path", str(out), "--no-cache"]
    assert main(argv) == 0
    [path] = out.glob("*.json")
    return load_results(path).task("mink_membership")


def test_mimir_layout_jsonl_end_to_end(tiny_lm, tmp_path):
    rows = [{"member": f"member text number {i}", "nonmember": f"other text number {i}"} for i in range(3)]
    entry = evaluate(tiny_lm, write_jsonl(tmp_path / "mimir.jsonl", rows), tmp_path / "out")
    assert (entry.counts["members@3"], entry.counts["nonmembers@3"], entry.counts["texts"]) == (3, 3, 6)


def test_parquet_in_either_layout_end_to_end(tiny_lm, tmp_path):
    datasets.Dataset.from_dict(MIMIR_ROWS).to_parquet(tmp_path / "mimir.parquet")
    entry = evaluate(tiny_lm, tmp_path / "mimir.parquet", tmp_path / "out1")
    assert (entry.counts["members@3"], entry.counts["nonmembers@3"]) == (2, 2)
    datasets.Dataset.from_dict(WIKIMIA_ROWS["WikiMIA_length32"]).to_parquet(tmp_path / "wikimia.parquet")
    entry = evaluate(tiny_lm, tmp_path / "wikimia.parquet", tmp_path / "out2")
    assert (entry.counts["members@3"], entry.counts["nonmembers@3"]) == (2, 2)
    assert "Parquet file" in entry.info["data_source"]


def test_bad_local_files(tiny_lm, tmp_path, capsys):
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    base = ["evaluate", "--model", str(tiny_lm), "--tasks", "mink_membership", "--device", "cpu",
            "--output-path", str(tmp_path / "out")]
    assert_user_error(capsys, base + ["--data", str(bad)], tmp_path / "out", "not a readable Parquet file")
    (tmp_path / "half.jsonl").write_text(json.dumps({"member": "only a member"}) + "\n")
    assert_user_error(capsys, base + ["--data", str(tmp_path / "half.jsonl")], tmp_path / "out", "'text'")
