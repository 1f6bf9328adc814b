"""The ner_prompt_memorization card states only what reproduces: its table of the current reference
checkpoints (ner-bert-e06, ner-bert-e00), the control margins' measured values and the sentence count
and time of the cost section equal, at the card's rounding, the committed results files (the bench's
figures are checked against its record by tests/unit/test_bench_records.py). The former build's
tables (ner-bert-e20, v1/v2), the subset figures of the task test and the paper's numbers are not
measurements of a committed file."""

from __future__ import annotations

import re

import numpy as np

from harness.app.parser import JOB_BATCH_SIZE
from tests.helpers.committed import newest_committed, read_card, same

CARD, TEXT, VERSION = read_card("ner_prompt_memorization")

ENTRIES = newest_committed("ner_prompt_memorization", VERSION)


def value(model: str, name: str, **tags: str) -> float:
    (found,) = [m.value for m in ENTRIES[model].metrics if m.name == name and m.tags == tags]
    return found


def numbers(cell: str) -> list[str]:
    return re.findall(r"\d+(?:\.\d+)?", cell)


def test_the_reference_table_is_the_committed_one():
    lines = CARD.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| checkpoint | prompts at dev M-MEM 1.0 |"))
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines[start + 2:start + 4]]
    assert [row[0].split()[0] for row in rows] == ["`ner-bert-e06`", "`ner-bert-e00`"]
    for label, ceiling, opt, spread, baselines, ept, tau in rows:
        model = label.split()[0].strip("`")
        entry = ENTRIES[model]
        assert entry.config["names"] == "reference" and entry.config["prompts"] == "builtin", model
        typed = entry.counts["typed_prompts"]
        at_ceiling, of = numbers(ceiling)
        assert int(of) == typed and int(at_ceiling) == round(value(model, "prompts_at_ceiling", split="dev") * typed)
        per_prompt = list(entry.item_scores["test_m_mem_by_prompt"].values())
        assert len(per_prompt) == typed, model
        wanted = [(opt, [value(model, "m_mem", strategy=s) for s in ("opt_best", "opt_worst")]),
                  (spread, [*np.percentile(per_prompt, [25, 50, 75]), value(model, "prompt_m_mem_iqr", split="test")]),
                  (baselines, [value(model, "m_mem", strategy=s) for s in ("no_prompt", "one_prompt", "mix_prompt")]),
                  (ept, [value(model, "m_mem", strategy=s) for s in ("ept_majority", "ept_mean")]),
                  (tau, [value(model, "kendall_tau", by="dev_vs_test")])]
        for cell, values in wanted:
            texts = numbers(cell)
            assert len(texts) == len(values), (model, cell)
            assert all(same(t, v) for t, v in zip(texts, values)), (model, cell, values)


def test_the_control_margins_and_the_cost_are_the_committed_ones():
    ceiling, headline, iqr, untrained = re.search(
        r"at dev M-MEM 1\.0 \(measured (\d+)\); the headline between 0\.8 and 0\.99 \(([\d.]+)\) and above the "
        r"untrained model's; the IQR of per-prompt test M-MEM at least 0\.05 \(([\d.]+)\); the untrained headline "
        r"within 0\.5 ± 0\.1 \(([\d.]+)\)", TEXT).groups()
    assert int(ceiling) == round(value("ner-bert-e06", "prompts_at_ceiling", split="dev")
                                 * ENTRIES["ner-bert-e06"].counts["typed_prompts"])
    assert same(headline, value("ner-bert-e06", "m_mem", strategy="opt_best")), headline
    assert same(iqr, value("ner-bert-e06", "prompt_m_mem_iqr", split="test")), iqr
    assert same(untrained, value("ner-bert-e00", "m_mem", strategy="opt_best")), untrained
    prompts, names, sentences = re.search(
        r"On the reference model \((\d+) prompts × (\d+) names, ([\d,]+) sentences\)", TEXT).groups()
    counts = ENTRIES["ner-bert-e06"].counts
    assert int(prompts) == counts["typed_prompts"]
    assert int(names) == counts["dev_in"] + counts["dev_out"] + counts["test_in"] + counts["test_out"]
    assert int(sentences.replace(",", "")) == counts["scored_sentences"], sentences
    seconds, batch = re.search(r"`membench run` scores the task in (\d+) s on 2 CPU cores \(batch (\d+);", TEXT).groups()
    assert same(seconds, ENTRIES["ner-bert-e06"].wall_time_s) and int(batch) == JOB_BATCH_SIZE
