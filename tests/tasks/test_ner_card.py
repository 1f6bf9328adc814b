"""The ner_prompt_memorization card states only what reproduces: its table of the current reference
checkpoints (ner-bert-e06, ner-bert-e00), the control margins' measured values and the sentence count
and time of the cost section equal, at the card's rounding, the committed results files; the build's
time and training text are the shipped manifest's; the built-in prompts' counts are recomputed from
the prompt file; the untrained model's standard error is the Mann-Whitney formula's (the bench's
figures are checked against its record by tests/unit/test_bench_records.py). The paper's numbers
are quoted, not measured."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np

from harness.app.parser import JOB_BATCH_SIZE
from harness.core.records import read_sidecar
from harness.reference.build import read_manifest
from harness.reference.ner_build import NerBuildConfig
from tasks.ner_prompt_memorization import prompts as P
from tests.helpers.committed import ROOT, committed_run, flat, newest_committed, read_card, same, sentence
from tests.helpers.shipped_builds import shipped_build

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


def test_the_build_is_the_shipped_manifest_s():
    manifest = read_manifest(shipped_build(NerBuildConfig()))
    sentences, in_train, mentions, background = re.match(
        r"(\d+) sentences: each of the (\d+) in-train names in (\d+) template sentences, each of the (\d+) "
        r"background names in one", manifest["training_text"]).groups()
    assert int(mentions) == manifest["config"]["mentions_per_name"] == 1  # the card: "in one template sentence"
    assert int(in_train) == 2 * manifest["config"]["names_per_list"]
    (card_background,) = sentence(TEXT, r"(\d+) background names from the words left over")
    (card_epochs, card_sentences) = sentence(TEXT, r"is trained for (\d+) epochs on (\d+) news-style sentences")
    assert int(card_background) == int(background) and int(card_sentences) == int(sentences)
    assert int(card_epochs) == max(manifest["config"]["epochs"])
    seconds, cores = sentence(TEXT, r"Build: ([\d.]+) s on (\d+) CPU cores \(`membench reference build`; the "
                                    r"manifest's `build_seconds`\)")
    assert same(seconds, manifest["build_seconds"]), (seconds, manifest["build_seconds"])
    assert f"{cores} threads" in manifest["numerics"]


def test_the_builtin_prompt_counts_are_the_prompt_file_s():
    typed = P.builtin_prompts().typed
    types, positions = Counter(p.type for p in typed), Counter(p.name_position for p in typed)
    total, each, start, middle, end, shortest, longest = map(int, sentence(
        TEXT, r"\| (\d+) prompts written for membench \((\d+) each declarative, exclamatory, imperative, "
              r"interrogative; (\d+) start / (\d+) middle / (\d+) end name positions; (\d+) to (\d+) tokens\)"))
    assert total == len(typed)
    assert set(types) == set(P.PROMPT_TYPES) and set(types.values()) == {each}
    assert (start, middle, end) == (positions["start"], positions["middle"], positions["end"])
    assert (shortest, longest) == (min(p.n_tokens for p in typed), max(p.n_tokens for p in typed))
    assert int(sentence(TEXT, r"all (\d+) built-in prompts")[0]) == len(typed)
    assert int(sentence(TEXT, r"every typed prompt \((\d+) built-in\)")[0]) == len(typed)
    # the repository's README, the task's row
    (readme,) = sentence(flat((ROOT / "README.md").read_text(encoding="utf-8")),
                         r"\| \[`ner_prompt_memorization`\]\([^)]*\) \| \d+ \| [^|]*\| [^|]*under (\d+) prompts")
    assert int(readme) == len(typed)


def test_the_untrained_model_s_standard_error_is_the_mann_whitney_null_s():
    names, error = sentence(TEXT, r"with (\d+) names a side the M-MEM of a model that ranks the names at random has a "
                                  r"standard error of about ([\d.]+) ")
    counts = ENTRIES["ner-bert-e00"].counts
    n_in, n_out = counts["test_in"], counts["test_out"]
    assert int(names) == n_in == n_out
    assert same(error, math.sqrt((n_in + n_out + 1) / (12 * n_in * n_out))), error


def test_the_table_s_date_and_machine_are_the_committed_run_s():
    date, capability = sentence(TEXT, r"Measured by `membench run` on (\d{4}-\d\d-\d\d) \(2 cores of an AMD EPYC, "
                                      r"(\w+);")
    for model in ("ner-bert-e06", "ner-bert-e00"):
        run = committed_run("ner_prompt_memorization", ENTRIES[model])
        assert run.created_at.date().isoformat() == date, (model, run.created_at)
        assert run.environment.cpu_capability == capability and run.environment.threads == 2, model


def test_the_no_prompt_baseline_is_at_chance_as_the_card_says():
    """The departure "no masked-LM pretraining": the trained reference model's no-prompt test M-MEM is the
    committed one and within one Mann-Whitney null standard error of 0.5 (chance)."""
    (baseline,) = sentence(TEXT, r"its no-prompt test M-MEM is ([\d.]+) \(`ner-bert-e06`, the table above\), chance")
    measured = value("ner-bert-e06", "m_mem", strategy="no_prompt")
    assert same(baseline, measured), (baseline, measured)
    counts = ENTRIES["ner-bert-e06"].counts
    n_in, n_out = counts["test_in"], counts["test_out"]
    assert abs(measured - 0.5) < math.sqrt((n_in + n_out + 1) / (12 * n_in * n_out))


def test_the_ties_departure_is_the_committed_records_():
    """The departure "a tie counts 1/2", from the committed records of ner-bert-e06: no tied test pair under
    any typed prompt or baseline; the pairs with exactly half the votes; EPT majority by membench's rule
    (the committed metric) and by the paper's (more than half, else 0)."""
    half, pairs, votes, ours, papers = sentence(
        TEXT, r"On `ner-bert-e06` \(float64 confidences\) no test pair ties under any typed prompt or baseline; "
              r"(\d+) of the ([\d,]+) test pairs have exactly half the (\d+) votes, so `ept_majority` is ([\d.]+), "
              r"([\d.]+) by the paper's rule")
    entry = ENTRIES["ner-bert-e06"]
    run = committed_run("ner_prompt_memorization", entry)
    records = read_sidecar(ROOT / "submissions" / run.records_file)["tasks"]["ner_prompt_memorization"]["records"]
    names = records["names"]

    def side(rows: list[dict], key: str) -> np.ndarray:
        return np.array([[row[name] for name in names[key]] for row in rows])

    typed = [p["confidences"] for p in records["prompts"]]
    every = typed + [b["confidences"] for b in records["baselines"]]
    assert not np.any(side(every, "test_in")[:, :, None] == side(every, "test_out")[:, None, :])
    wins = (side(typed, "test_in")[:, :, None] > side(typed, "test_out")[:, None, :]).sum(axis=0)
    assert int(votes) == len(typed) == entry.counts["typed_prompts"]
    assert int(pairs.replace(",", "")) == wins.size and int(half) == int(np.sum(2 * wins == len(typed)))
    assert same(ours, value("ner-bert-e06", "m_mem", strategy="ept_majority"))
    assert same(papers, float(np.mean(2 * wins > len(typed))))
