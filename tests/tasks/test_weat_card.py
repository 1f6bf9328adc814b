"""The weat card states only what reproduces: its table of all-MiniLM-L6-v2's effect sizes and mean
|d|, the chance-floor figures of the untrained reference models, the reference T5s' mean |d|, and what a
full run computes and takes equal, at the card's rounding, the committed results files; the sizes of the word sets are
those of `weat_tests.json`. Caliskan et al.'s GloVe numbers and Yoon & Lee's Table 7 (the papers) are not
measurements of a committed file; the --preset paper table is its bench record's (tests/unit/test_bench_records.py)."""

from __future__ import annotations

import json
import re

from tests.helpers.committed import ROOT, committed_run, newest_committed, read_card, same, sentence

CARD, TEXT, VERSION = read_card("weat")
MINILM = "sentence-transformers/all-MiniLM-L6-v2"

ENTRIES = newest_committed("weat", VERSION)


def value(model: str, name: str, **tags: str) -> float:
    (found,) = [m.value for m in ENTRIES[model].metrics if m.name == name and m.tags == tags]
    return found


def test_the_minilm_table_is_the_committed_one():
    lines = CARD.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| representation | WEAT 1 |"))
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines[start + 2:start + 4]]
    assert [row[0] for row in rows] == ["static", "contextual (last layer)"]
    assert ENTRIES[MINILM].config["layer"] == -1
    for row in rows:
        representation = row[0].split()[0]
        wanted = [value(MINILM, "effect_size", representation=representation, test=f"weat{i}") for i in range(1, 11)]
        wanted += [value(MINILM, "mean_abs_d", representation=representation, group=group)
                   for group in ("race", "gender", "all")]
        assert len(row[1:]) == len(wanted) == 13
        for column, (text, number) in enumerate(zip(row[1:], wanted), start=1):
            assert same(text, number), (representation, column, text, number)


def test_the_chance_floor_figures_are_the_committed_ones():
    gpt2, bert = re.search(r"contextual mean \|d\| of ([\d.]+) \(xsum-gpt2-e00\) and ([\d.]+) \(mlm-bert-e00\)",
                           TEXT).groups()
    minilm = re.search(r"MiniLM's ([\d.]+) stands above that", TEXT).group(1)
    for text, model in ((gpt2, "xsum-gpt2-e00"), (bert, "mlm-bert-e00"), (minilm, MINILM)):
        number = value(model, "mean_abs_d", representation="contextual", group="all")
        assert same(text, number), (model, text, number)


def test_what_a_full_run_computes_and_takes_is_the_committed_one():
    """"WEAT 1–10: 359 words, each in 7 template sentences ...; 1.6 s on the trained reference masked
    LM, mlm-bert-e05, in `membench run`": every committed run's counts, and that run's time."""
    words, templates, seconds = sentence(
        TEXT, r"WEAT 1–10: (\d+) words, each in (\d+) template sentences, .*?; ([\d.]+) s on the trained "
              r"reference masked LM, mlm-bert-e05, in `membench run`\)")
    for model, entry in ENTRIES.items():
        assert (entry.counts["words"], entry.counts["templates"]) == (int(words), int(templates)), model
    assert same(seconds, ENTRIES["mlm-bert-e05"].wall_time_s), (seconds, ENTRIES["mlm-bert-e05"].wall_time_s)


def test_the_word_set_sizes_are_those_of_the_tests():
    """"with sets of 6–32 words": the smallest and largest of the ten tests' X, Y, A and B."""
    smallest, largest = sentence(TEXT, r"with sets of (\d+)–(\d+) words")
    tests = json.loads((ROOT / "tasks" / "weat" / "weat_tests.json").read_text(encoding="utf-8"))["tests"]
    sizes = [len(test[key]) for test in tests for key in "XYAB"]
    assert len(tests) == 10 and (int(smallest), int(largest)) == (min(sizes), max(sizes)), sizes


def test_the_reference_t5s_figures_are_the_committed_ones():
    """"the contextual mean |d| is 0.398 for `t5-ref` and 0.443 for `t5-ref-sparse70` (static 0.296 and 0.298)",
    from the files of the day the card names; `t5-ref`'s lies within the untrained models' chance floor the card
    gives (at most mlm-bert-e00's), and neither T5 shows WEAT 1's or 2's universal association (d > 0.8 with
    p < 0.01) in either representation."""
    (day,) = sentence(TEXT, r"In the committed files of `membench run` \((\d{4}-\d\d-\d\d), 2-core AMD EPYC, AVX2")
    dense, sparse, dense_static, sparse_static = sentence(
        TEXT, r"the contextual mean \|d\| is ([\d.]+) for `t5-ref` and ([\d.]+) for `t5-ref-sparse70` \(static "
              r"([\d.]+) and ([\d.]+)\)")
    for model, contextual, static in (("t5-ref", dense, dense_static), ("t5-ref-sparse70", sparse, sparse_static)):
        run = committed_run("weat", ENTRIES[model])
        assert run.created_at.date().isoformat() == day and run.environment.cpu_capability == "AVX2", model
        assert ENTRIES[model].config["preset"] == "default" and ENTRIES[model].counts["tests"] == 10, model
        for text, rep in ((contextual, "contextual"), (static, "static")):
            number = value(model, "mean_abs_d", representation=rep, group="all")
            assert same(text, number), (model, rep, text, number)
        for rep in ("static", "contextual"):
            for test in ("weat1", "weat2"):
                d = value(model, "effect_size", representation=rep, test=test)
                p = value(model, "p_value", representation=rep, test=test)
                assert not (d > 0.8 and p < 0.01), (model, rep, test, d, p)
    assert (value("t5-ref", "mean_abs_d", representation="contextual", group="all")
            <= value("mlm-bert-e00", "mean_abs_d", representation="contextual", group="all"))
