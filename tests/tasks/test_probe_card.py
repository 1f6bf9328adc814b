"""The probe_memorization card states only what reproduces: its table of all-MiniLM-L6-v2's
memorization effect in the default run (the CoNLL-2003 sample), the run's sizes stated with it and
the range of the standard deviations equal the committed results file. The UD EWT table (run by
hand, committed beside the card) is its results file; the paper's Table 1 figures are its text's
(../shared/seeds/); the bench's figures are checked against its record by
tests/unit/test_bench_records.py, the default run's time here. The CoNLL-2003 sample's sizes are
recomputed from the sample itself."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from harness.core.results import TaskEntry
from tests.helpers.committed import measured_beside_card, newest_committed, read_card, same, sentence

ROOT = Path(__file__).resolve().parents[2]
CARD, TEXT, VERSION = read_card("probe_memorization")
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
# A run without a tuning set computes what it computed in this version (the changelog: v4 changed runs with
# a tuning set only), so the committed default runs of this version on stand for today's.
DEFAULT_SINCE = 3
SEEDS = ROOT.parent / "shared" / "seeds"  # the seed papers as text (../shared/seeds/README.md)


def default_run() -> TaskEntry:
    """The committed MiniLM default run (the board's): the newest entry of the newest version from DEFAULT_SINCE on."""
    for version in range(VERSION, DEFAULT_SINCE - 1, -1):
        found = newest_committed("probe_memorization", version).get(MINILM)
        if found is not None:
            return found
    raise AssertionError(f"no committed probe_memorization run of {MINILM} of version {DEFAULT_SINCE} to {VERSION}")


def test_the_default_run_table_is_the_committed_one():
    entry = default_run()
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
    entry = default_run()
    pool, evaluation, tokens, skipped_1, skipped_2, repetitions, seed = re.search(
        r"\(the CoNLL-2003 sample, offline; (\d+) pool / (\d+) evaluation sentences, ([\d,]+) evaluation tokens; "
        r"sizes ([\d,]+) and ([\d,]+) skipped; R = (\d+), seed (\d+)\)", TEXT).groups()
    assert (int(pool), int(evaluation), int(tokens.replace(",", ""))) == (
        entry.counts["pool_sentences"], entry.counts["eval_sentences"], entry.counts["eval_tokens"])
    assert entry.info["skipped_train_sizes"] == [skipped_1.replace(",", ""), skipped_2.replace(",", "")]
    assert int(repetitions) == entry.counts["repetitions"] == entry.config["repetitions"]
    assert int(seed) == entry.seed


def test_the_default_run_s_time_is_the_committed_one():
    (seconds,) = re.search(r"MiniLM's default run took (\d+) s in `membench run`", TEXT).groups()
    assert same(seconds, default_run().wall_time_s)


def test_the_conll_samples_sizes_are_the_samples():
    """"226 sentences, 3,140 tokens ... (38 distinct here ...) ... 151 pool and 75 evaluation sentences": the
    sample as the data loader reads it (`load_conll_sample`, the same file the default run reads)."""
    from tasks.probe_memorization.data import load_conll_sample

    sentences, tokens, tags, pool, evaluation = sentence(
        TEXT, r"\): ([\d,]+) sentences, ([\d,]+) tokens of Reuters news .*?\((\d+) distinct here, punctuation tags "
              r"included\), not UPOS\..*?: ([\d,]+) pool and ([\d,]+) evaluation sentences\.")
    data = load_conll_sample()
    every = data.pool + data.eval
    assert [int(x.replace(",", "")) for x in (sentences, tokens, tags, pool, evaluation)] == [
        len(every), sum(len(s.words) for s in every), len({tag for s in every for tag in s.tags}),
        len(data.pool), len(data.eval)]


def ewt_results():
    """The EWT run's results file, committed beside the card (`measured/`)."""
    return measured_beside_card("probe_memorization")


def test_the_ewt_table_is_its_committed_results_file():
    """"Measured: all-MiniLM-L6-v2 ... on UD English EWT": every cell of the table, and the sizes in its
    heading, equal the results file committed beside the card (`measured/`, made by the command the card
    gives; not in submissions/, since the board shows the default run)."""
    from leaderboard.collect import read_submissions

    results = ewt_results()
    entry = results.task("probe_memorization")
    (default_run,) = [r for _, r in read_submissions(ROOT / "submissions") if r.model.name == MINILM]
    assert entry.status == "ok" and DEFAULT_SINCE <= entry.version <= VERSION and results.model.identity == default_run.model.identity
    assert "en_ewt-ud-dev.conllu" in entry.info["data_source"]
    counts = entry.counts
    heading = re.search(r"dev \(([\d,]+) sentences, ([\d,]+) tokens\) as pool, test \(([\d,]+) sentences, ([\d,]+) "
                        r"tokens\) as evaluation, (\d+) UPOS tags, R = (\d+), seed (\d+)\.", TEXT).groups()
    assert [int(x.replace(",", "")) for x in heading] == [
        counts["pool_sentences"], counts["pool_tokens"], counts["eval_sentences"], counts["eval_tokens"],
        counts["tags"], counts["repetitions"], entry.seed]
    metrics = {(m.name, m.tags["representation"], m.tags["probe"], m.tags["train_size"]): m for m in entry.metrics}
    lines = CARD.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| representation | probe | sentences |"))
    table = itertools.takewhile(lambda line: line.startswith("|"), lines[start + 2:])
    rows = [[cell.strip().replace("**", "") for cell in line.strip().strip("|").split("|")] for line in table]
    assert len(rows) == 20
    for representation, probe, size, accuracy, seen, unseen, effect, control, selectivity in rows:
        size = "all" if size.startswith("all") else size
        key = (representation, probe, size)
        assert same(accuracy, metrics[("accuracy", *key)].value), key
        assert same(control, metrics[("control_accuracy", *key)].value), key
        for cell, name in ((seen, "seen_accuracy"), (unseen, "unseen_accuracy"), (effect, "memorization_effect"),
                           (selectivity, "selectivity")):
            value, std = cell.split("±")
            assert same(value, metrics[(name, *key)].value) and same(std, metrics[(name, *key)].std), (key, name, cell)
    assert f"all ({counts['pool_sentences']:,})".replace(",", "") in " ".join(row[2] for row in rows)


def test_the_ewt_reading_states_its_results_file():
    """The figures of "Reading it against the paper's finding" are the EWT table's."""
    m = {(x.name, x.tags["representation"], x.tags["probe"], x.tags["train_size"]): x.value
         for x in ewt_results().task("probe_memorization").metrics}

    def effect(representation, probe, size):
        return m["memorization_effect", representation, probe, size]

    def spread(name, *keys):
        values = [m[(name, *key)] for key in keys]
        return min(values), max(values)

    expected = [
        (r"contextual linear ([\d.]+) → ([\d.]+), static MLP ([\d.]+) → ([\d.]+)\)",
         [effect("contextual", "linear", "50"), effect("contextual", "linear", "all"),
          effect("static", "mlp", "50"), effect("static", "mlp", "all")]),
        (r"gap falls least \(([\d.]+) → ([\d.]+)\)", [effect("static", "linear", "50"), effect("static", "linear", "all")]),
        (r"from 500 sentences on \(all: ([\d.]+) vs ([\d.]+)\)",
         [effect("static", "linear", "all"), effect("contextual", "linear", "all")]),
        (r"static embeddings: ([\d.]+) vs ([\d.]+)\)",
         [m["accuracy", "contextual", "linear", "50"], m["accuracy", "static", "linear", "50"]]),
        (r"unseen words fall to ([\d.]+)–([\d.]+),",
         spread("unseen_accuracy", ("contextual", "linear", "50"), ("contextual", "linear", "100"))),
        (r"at every size \(all: ([\d.]+) vs ([\d.]+)\)", [effect("static", "mlp", "all"), effect("contextual", "mlp", "all")]),
        (r"control accuracy ([\d.]+)–([\d.]+) vs ([\d.]+)–([\d.]+) with all sentences",
         [*spread("control_accuracy", ("static", "linear", "all"), ("static", "mlp", "all")),
          *spread("control_accuracy", ("contextual", "linear", "all"), ("contextual", "mlp", "all"))]),
        (r"selectivity is lower \(([\d.]+)–([\d.]+) vs ([\d.]+)–([\d.]+)\)",
         [*spread("selectivity", ("static", "linear", "all"), ("static", "mlp", "all")),
          *spread("selectivity", ("contextual", "linear", "all"), ("contextual", "mlp", "all"))]),
    ]
    for pattern, values in expected:
        found = re.search(pattern, TEXT)
        assert found, f"the card no longer says: {pattern}"
        assert all(same(text, value) for text, value in zip(found.groups(), values, strict=True)), (pattern, values)
    for representation in ("static", "contextual"):  # "the gap shrinks ... for both representations and both probes"
        for probe in ("linear", "mlp"):
            assert effect(representation, probe, "all") < effect(representation, probe, "50")
    assert all(effect("contextual", "mlp", size) > effect("static", "mlp", size) for size in ("50", "100", "500", "1000", "all"))
    # "Selectivity ... agrees with its finding from 100 sentences on, for both probes ... At 50 sentences it is not lower"
    for probe in ("linear", "mlp"):
        static, contextual = (m["selectivity", rep, probe, "50"] for rep in ("static", "contextual"))
        assert static >= contextual, probe
        assert all(m["selectivity", "static", probe, size] < m["selectivity", "contextual", probe, size]
                   for size in ("100", "500", "1000", "all")), probe
    found = re.search(r"At 50 sentences it is not lower: static ([\d.]+) vs contextual ([\d.]+) \(linear\), "
                      r"([\d.]+) vs ([\d.]+) \(MLP\)", TEXT)
    assert found, "the card no longer gives the selectivity at 50 sentences"
    assert all(same(text, m["selectivity", rep, probe, "50"]) for text, (probe, rep) in zip(
        found.groups(), itertools.product(("linear", "mlp"), ("static", "contextual")), strict=True))


def table_1() -> dict[tuple[str, str], dict[int, float]]:
    """The paper's Table 1 as its text gives it (../shared/seeds/): (representation, probe) -> training
    sentences -> the seen - unseen difference in points. The left half of each row is the encoder output
    states (contextual), the right half the word embeddings (static)."""
    path = SEEDS / "004_f9a8c18659d92c8d.txt"
    if not path.is_file():
        pytest.skip(f"the seed paper is not here ({path})")
    table: dict[tuple[str, str], dict[int, float]] = {}
    probe = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("| Encoder output states,"):
            probe = "linear" if "linear classifier" in line else "mlp"
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if probe and len(cells) == 14 and re.fullmatch(r"[\d,]+", cells[0]):
            for rep, half in (("contextual", cells[:6]), ("static", cells[7:13])):
                table.setdefault((rep, probe), {})[int(half[0].replace(",", ""))] = float(half[3])
    return table


def test_against_table_1_quotes_the_paper():
    """"Against Table 1": the gaps the card quotes are the paper's Table 1 (its text in ../shared/seeds/), and
    what it says of the table holds there: static above contextual at every size and probe, no contextual gap
    above the largest quoted, no gap growing with the training set; the Departures' sizes are the table's."""
    table = table_1()
    sizes = [50, 100, 500, 1000, 5000, 10000, 30000]
    assert all(list(table[rep, probe]) == sizes for rep in ("static", "contextual") for probe in ("linear", "mlp"))
    stated = sentence(TEXT, r"Table 1's sizes: ([\d, and]+) training sentences")[0]
    assert [int(x) for x in re.findall(r"\d+", stated.replace(",", ""))] == sizes
    quoted = sentence(TEXT, r"the linear probe's gap is ([\d.]+) points for the word embeddings against ([\d.]+) for the "
                            r"encoder output states at 50 sentences and ([\d.]+) against ([\d.]+) at 30,000; the MLP's "
                            r"is ([\d.]+) against ([\d.]+) at 50 and ([\d.]+) against ([\d.]+) at 30,000\. No contextual "
                            r"gap in it exceeds ([\d.]+) points")
    expected = [table[rep, probe][size] for probe in ("linear", "mlp") for size in (50, 30000)
                for rep in ("static", "contextual")]
    assert [float(x) for x in quoted] == [*expected, max(max(table["contextual", p].values()) for p in ("linear", "mlp"))]
    for probe in ("linear", "mlp"):
        assert all(table["static", probe][size] > table["contextual", probe][size] for size in sizes), probe
        for rep in ("static", "contextual"):
            gaps = [table[rep, probe][size] for size in sizes]
            assert all(later <= earlier for earlier, later in zip(gaps, gaps[1:])), (rep, probe)
