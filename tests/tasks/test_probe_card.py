"""The probe_memorization card states only what reproduces: its table of all-MiniLM-L6-v2's
memorization effect in the default run (the CoNLL-2003 sample), the run's sizes stated with it and
the range of the standard deviations equal the committed results file. The UD EWT table (run by
hand, not committed) and the paper's finding are not measurements of a committed file; the bench's
figures are checked against its record by tests/unit/test_bench_records.py, the default run's time
here."""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers.committed import newest_committed, same

ROOT = Path(__file__).resolve().parents[2]
CARD = (ROOT / "tasks" / "probe_memorization" / "README.md").read_text(encoding="utf-8")
TEXT = " ".join(CARD.split())  # the prose with its line breaks as spaces
VERSION = int(re.search(r"\(version (\d+)\)", CARD).group(1))
MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def test_the_default_run_table_is_the_committed_one():
    entry = newest_committed("probe_memorization", VERSION)[MINILM]
    assert "conll" in entry.info["data_source"]
    lines = CARD.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| representation | probe | 50 |"))
    header = [cell.strip() for cell in lines[start].strip().strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines[start + 2:start + 6]]
    sizes = [cell.split()[0] for cell in header[2:]]
    assert sizes == ["50", "100", "all"] and header[-1] == f"all ({entry.counts['pool_sentences']})"
    effects = {(m.tags["representation"], m.tags["probe"], m.tags["train_size"]): m
               for m in entry.metrics if m.name == "memorization_effect"}
    assert len(effects) == 4 * 3 and {tuple(row[:2]) for row in rows} == {key[:2] for key in effects}
    for representation, probe, *cells in rows:
        for size, text in zip(sizes, cells, strict=True):
            number = effects[representation, probe, size].value
            assert same(text, number), (representation, probe, size, text, number)
    low, high = re.search(r"standard deviations ([\d.]+)–([\d.]+)\)", TEXT).groups()
    stds = [m.std for m in effects.values()]
    assert same(low, min(stds)) and same(high, max(stds)), (low, high, stds)


def test_the_default_runs_sizes_are_the_committed_ones():
    entry = newest_committed("probe_memorization", VERSION)[MINILM]
    pool, evaluation, tokens, skipped_1, skipped_2, repetitions, seed = re.search(
        r"\(the CoNLL-2003 sample, offline; (\d+) pool / (\d+) evaluation sentences, ([\d,]+) evaluation tokens; "
        r"sizes ([\d,]+) and ([\d,]+) skipped; R = (\d+), seed (\d+)\)", TEXT).groups()
    assert (int(pool), int(evaluation), int(tokens.replace(",", ""))) == (
        entry.counts["pool_sentences"], entry.counts["eval_sentences"], entry.counts["eval_tokens"])
    assert entry.info["skipped_train_sizes"] == [skipped_1.replace(",", ""), skipped_2.replace(",", "")]
    assert int(repetitions) == entry.counts["repetitions"] == entry.config["repetitions"]
    assert int(seed) == entry.seed


def test_the_default_run_s_time_is_the_committed_one():
    (seconds,) = re.search(r"MiniLM's default run took (\d+) s in `membench run`", " ".join(CARD.split())).groups()
    assert same(seconds, newest_committed("probe_memorization", VERSION)[MINILM].wall_time_s)
