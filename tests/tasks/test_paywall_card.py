"""The paywall_memorization card states only what reproduces: every figure it gives of the reference
LMs (the controls table and its date, the rise with training, the baseline on its own articles, the
prompts cut, the paper-preset table's default column, the Japanese 1-epoch model's generations of commas) equals,
at the card's rounding, the committed results file of that checkpoint (or its records sidecar); how many
members' reference sentences the English recipe's cut keeps is recomputed from the data. The seed's
numbers and the recipe's settings are not measurements of a committed file."""

from __future__ import annotations

import re

from harness.core.records import read_sidecar
from harness.reference.corpus import reference_corpus
from harness.reference.train import TrainConfig
from harness.scoring.text import truncate_words
from tasks.paywall_memorization.data import load_paywall_data
from tasks.paywall_memorization.task import PaywallConfig
from tests.helpers.committed import ROOT, card_table, committed_run, newest_committed, read_card, same, sentence

CARD, TEXT, VERSION = read_card("paywall_memorization")
NUMBER = r"([\d.,]+)"

# The greedy metrics the card cites (eidetic, approximate, the prompts cut) are the same from v1 on: v2
# added the extraction metrics (issue 52) beside them. So each checkpoint's newest committed entry of
# any version from GREEDY_SINCE to the card's (the highest one found wins).
GREEDY_SINCE = 1
ENTRIES = {name: entry for version in range(GREEDY_SINCE, VERSION + 1)
           for name, entry in newest_committed("paywall_memorization", version).items()}


def value(model: str, metric: str, group: str) -> float:
    (found,) = [m.value for m in ENTRIES[model].metrics
                if m.name == metric and m.tags == {"group": group, "bin": "all"}]
    return found


def test_the_controls_table_is_the_committed_one():
    lines = CARD.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| control |"))
    measured = [line.strip().strip("|").split("|")[-1].strip() for line in lines[start + 2:start + 7]]
    approx, eidetic = "approximate_mean", "eidetic_mean"
    # (first value, second value, how the third compares them) per row
    rows = [(("xsum-gpt2-e30", approx, "members"), ("xsum-gpt2-nonmembers-e30", approx, "members"), "+"),
            (("xsum-gpt2-e30", eidetic, "members"), ("xsum-gpt2-nonmembers-e30", eidetic, "members"), "x"),
            (("ja-gpt2-e30", approx, "members"), ("ja-gpt2-e30", approx, "non_members"), "+"),
            (("ja-gpt2-e30", eidetic, "members"), ("ja-gpt2-e30", eidetic, "non_members"), "x")]
    for text, (first, second, how) in zip(measured, rows):
        a, b, c = re.fullmatch(rf"{NUMBER} vs {NUMBER} \(\+?{NUMBER}x?\)", text).groups()
        x, y = value(*first), value(*second)
        assert same(a, x) and same(b, y), (text, x, y)
        assert same(c, x - y if how == "+" else x / y), (text, x - y if how == "+" else x / y)
    assert same(measured[4], value("ja-gpt2-e00", approx, "members")), measured[4]


def test_the_rise_with_training_and_the_baseline_are_the_committed_ones():
    english_and_japanese = sentence(TEXT, rf"English members {NUMBER} \(untrained\), {NUMBER} \(1 epoch\), {NUMBER} "
                                    rf"\(30 epochs\); Japanese {NUMBER}, {NUMBER}, {NUMBER}\.")
    models = [f"{corpus}-gpt2-e{epochs}" for corpus in ("xsum", "ja") for epochs in ("00", "01", "30")]
    for text, model in zip(english_and_japanese, models):
        assert same(text, value(model, "approximate_mean", "members")), (model, text)
    approx, eidetic = sentence(TEXT, rf"its own training articles \(the non-members\) as the member model does its own: "
                               rf"approximate {NUMBER}, eidetic {NUMBER}\.")
    assert same(approx, value("xsum-gpt2-nonmembers-e30", "approximate_mean", "non_members")), approx
    assert same(eidetic, value("xsum-gpt2-nonmembers-e30", "eidetic_mean", "non_members")), eidetic


def test_the_prompts_cut_are_the_committed_counts():
    cut, english, japanese = sentence(TEXT, r"(\d+) of the (\d+) English prompts is cut .*?none of the (\d+) Japanese ones")
    for model in ("xsum-gpt2-e00", "xsum-gpt2-e01", "xsum-gpt2-e30", "xsum-gpt2-nonmembers-e30"):
        generation = ENTRIES[model].info["generation"]
        assert (generation["n_prompts_cut"], generation["n_prompts"]) == (int(cut), int(english)), model
    for model in ("ja-gpt2-e00", "ja-gpt2-e01", "ja-gpt2-e30"):
        generation = ENTRIES[model].info["generation"]
        assert (generation["n_prompts_cut"], generation["n_prompts"]) == (0, int(japanese)), model


def test_the_controls_tables_date_is_the_committed_runs():
    """"measured (`membench run`, {date})": the day of the committed runs of every checkpoint in the table."""
    header, _ = card_table(CARD, "control")
    (date,) = re.fullmatch(r"measured \(`membench run`, (\d{4}-\d\d-\d\d)\)", header[-1]).groups()
    for model in ("xsum-gpt2-e30", "xsum-gpt2-nonmembers-e30", "ja-gpt2-e30", "ja-gpt2-e00"):
        assert committed_run("paywall_memorization", ENTRIES[model]).created_at.date().isoformat() == date, model


def test_the_english_cut_keeps_the_members_reference_sentences():
    """"each cut to its first {} words (these hold the whole reference sentence of {} of the {} members, and the
    start of the other's)", recomputed: each member's training text (`harness/reference/build.py`: its first
    `max_words_per_document` words) against the task's prompt and reference of that article."""
    words, whole, members = sentence(TEXT, r"each cut to its first (\d+) words \(these hold the whole reference sentence "
                                           r"of (\d+) of the (\d+) members, and the start of the other's\)")
    assert int(words) == TrainConfig().max_words_per_document
    examples = {e.article_id: e for e in load_paywall_data("reference", "en", PaywallConfig().max_public_words, 0,
                                                           None).examples}
    held, started = 0, 0
    trained = [d for d in reference_corpus(0, "xsum") if d.member]
    for document in trained:
        example = examples[document.doc_id]
        cut = truncate_words(document.text, int(words), "en") or document.text
        start = example.prompt + example.continuation_prefix
        assert document.text.startswith(start + example.reference), document.doc_id
        held += cut.startswith(start + example.reference)
        started += cut.startswith(start) and len(cut) > len(start)
    assert (held, started, len(trained)) == (int(whole), int(members), int(members))


def test_the_paper_preset_table_prints_the_default_runs_as_the_committed_ones():
    """The default column of "What the paper preset changes" (bench_paper_presets--ishihara, whose figures
    tests/unit/test_bench_records.py checks) is the committed runs' approximate means, each rounded once from the
    file's value, and a value the controls table gives too is written the same way there: one value, one way."""
    _, rows = card_table(CARD, "checkpoint")
    written = {}
    for row in rows:
        model = row[0].strip("`")
        for cell, group in zip(row[1:3], ("members", "non_members")):
            default = cell.split(" → ")[0]
            assert default == f"{value(model, 'approximate_mean', group):.3f}", (model, group, default)
            written[model, group] = default
    _, controls = card_table(CARD, "control")
    japanese = re.fullmatch(rf"{NUMBER} vs {NUMBER} \(\+{NUMBER}\)", controls[2][-1]).groups()
    assert japanese[:2] == (written["ja-gpt2-e30", "members"], written["ja-gpt2-e30", "non_members"])
    assert controls[0][-1].startswith(f"{written['xsum-gpt2-e30', 'members']} vs ")


def test_the_japanese_one_epoch_generations_of_commas_are_the_committed_run_s():
    """"generates nothing but commas (`、`) for most articles (the committed run: {} of {})": counted in the
    records sidecar of the committed ja-gpt2-e01 run."""
    commas, total = map(int, sentence(TEXT, r"generates nothing but commas \(`、`\) for most articles \(the committed "
                                            r"run: (\d+) of (\d+)\)"))
    results = committed_run("paywall_memorization", ENTRIES["ja-gpt2-e01"])
    payload = read_sidecar(ROOT / "submissions" / results.records_file)
    examples = payload["tasks"]["paywall_memorization"]["records"]["examples"]
    assert (sum(1 for e in examples if e["generation"] and set(e["generation"]) == {"、"}), len(examples)) == (
        commas, total)
    assert 2 * commas > total  # "most"
