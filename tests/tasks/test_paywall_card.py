"""The paywall_memorization card states only what reproduces: every figure it gives of the reference
LMs (the controls table, the rise with training, the baseline on its own articles, the prompts cut)
equals, at the card's rounding, the committed results file of that checkpoint. The seed's numbers,
the former builds' (issue 18) and the recipe's settings are not measurements of a committed file."""

from __future__ import annotations

import re

from tests.helpers.committed import newest_committed, read_card, same, sentence

CARD, TEXT, VERSION = read_card("paywall_memorization")
NUMBER = r"([\d.,]+)"

ENTRIES = newest_committed("paywall_memorization", VERSION)


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
