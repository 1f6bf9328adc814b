"""The finetune_memorization card states only what reproduces: every figure of its table of measured
curves is the committed results file's (the newest finetune_memorization entry of each model), and the
costs, intervals, sizes and characters it states are those the files record."""

from __future__ import annotations

import re
from pathlib import Path

from tasks.finetune_memorization.task import FinetuneMemorization
from tests.helpers.committed import card_table, flat, newest_committed, same, sentence

ROOT = Path(__file__).resolve().parents[2]
CARD = (ROOT / "tasks" / "finetune_memorization" / "README.md").read_text(encoding="utf-8")
# column header -> (metric, the column's tags beside the row's epoch and trained_on)
COLUMNS = {"Min-K% 20": ("auc", {"score": "min_k_20"}), "LOSS": ("auc", {"score": "loss"}),
           "zlib": ("auc", {"score": "zlib"}), "Min-K%++ 20": ("auc", {"score": "min_k_pp_20"}),
           "ReCaLL": ("auc", {"score": "recall"}), "DC-PDD": ("auc", {"score": "dc_pdd"}),
           "exact gap": ("exact_memorization", {"group": "gap"}), "approximate gap": ("approximate_mean", {"group": "gap"}),
           "eidetic chars, members": ("eidetic_mean", {"group": "members"}),
           "(100, 0.5)-extractable, members": ("extractable", {"group": "members", "attempts": "100", "level": "0.5"}),
           "p_z = 0, members": ("pz_zero_share", {"group": "members"})}


def formatted(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}".replace("-0.000", "0.000")


def test_every_figure_of_the_curves_is_the_committed_one():
    header, rows = card_table(CARD, "model")
    entries = newest_committed(FinetuneMemorization.NAME, FinetuneMemorization.VERSION)
    assert {row[0] for row in rows} == set(entries)  # every committed model, and no other
    for row in rows:
        model, trained_on, epoch = row[0], row[1].replace("-", "_"), row[2]
        values = {(m.name, tuple(sorted(m.tags.items()))): m.value for m in entries[model].metrics}
        for column, cell in zip(header[3:], row[3:]):
            metric, column_tags = COLUMNS[column]
            tags = tuple(sorted({**column_tags, "epoch": epoch, "trained_on": trained_on}.items()))
            assert cell == formatted(values.get((metric, tags))), (model, trained_on, epoch, column)


def test_the_stated_costs_are_the_recorded_ones():
    """`model: N s in all; training X s an epoch; an evaluation Y s; peak RSS Z GB` lines: N the task's wall
    time, X the members' training time without its evaluations over its epochs, Y the mean evaluation
    time, Z the entry's peak resident memory (GB = 1e9 bytes, as `harness/training/memory.py`)."""
    entries = newest_committed(FinetuneMemorization.NAME, FinetuneMemorization.VERSION)
    stated = re.findall(r"^- `([^`]+)`: (\d+) s in all; training (\d+) s an epoch; an evaluation (\d+) s; "
                        r"peak RSS ([\d.]+) GB$", CARD, re.M)
    assert {model for model, *_ in stated} == set(entries)
    for model, total, epoch, evaluation, rss in stated:
        entry = entries[model]
        training = entry.info["training"]["members"]
        seconds = entry.info["evaluation_seconds"]
        trained = training["train_seconds_with_evaluation"] - sum(
            value for key, value in seconds.items() if key.startswith("members@") and key != "members@0")
        epochs = max(entry.config["epochs"])
        assert int(total) == round(entry.wall_time_s)
        assert int(epoch) == round(trained / epochs)
        assert int(evaluation) == round(sum(seconds.values()) / len(seconds))
        assert same(rss, entry.peak_rss_bytes / 1e9), (model, rss, entry.peak_rss_bytes)


def test_the_prose_repeats_only_figures_of_the_table_and_the_files():
    """Every three-decimal figure of the section's prose is a cell of the table; the epochs to AUC 0.9 it
    names are the files' `epochs_to_auc`."""
    section = CARD.split("## Reference numbers", 1)[1].split("\n## ", 1)[0]
    prose = "\n".join(line for line in section.splitlines() if not line.startswith("|"))
    cells = {cell for line in section.splitlines() if line.startswith("|")
             for cell in line.strip("|").replace(" ", "").split("|")}
    figures = re.findall(r"(?<![\d.])\d\.\d{3}(?![\d])", prose)
    assert figures and set(figures) <= cells, set(figures) - cells
    reached = {name: entry.metrics for name, entry in
               newest_committed(FinetuneMemorization.NAME, FinetuneMemorization.VERSION).items()}
    epochs = {name: next(m.value for m in metrics if m.name == "epochs_to_auc") for name, metrics in reached.items()}
    text = " ".join(prose.split())
    assert (f"reached after {epochs['SmolLM2-135M-Instruct.Q4_1']:g} epochs by SmolLM2, after "
            f"{epochs['gemma-3-270m-q4_k_m']:g} by gemma") in text
    assert epochs["xsum-gpt2-outside-e05"] is None and "not within 4 by the reference GPT-2" in text


def test_the_stated_intervals_are_the_recorded_ones():
    """"their 95% bootstrap intervals ...: ±H at epoch 0, narrower as the AUC nears 0 or 1": H is the
    half-width of every table attack's AUC interval at epoch 0, and every AUC of those attacks below 0.1 or
    above 0.9 has a narrower one; the epoch-0 Min-K% 20% intervals include 0.5, as the reading says."""
    (half,) = sentence(flat(CARD), r"intervals are in the files: ±([\d.]+) at epoch 0, narrower as the AUC nears 0 or 1")
    scores = {tags["score"] for metric, tags in COLUMNS.values() if metric == "auc"}
    for model, entry in newest_committed(FinetuneMemorization.NAME, FinetuneMemorization.VERSION).items():
        aucs = [m for m in entry.metrics if m.name == "auc" and m.tags.get("score") in scores]
        at_zero = [m for m in aucs if m.tags["epoch"] == "0"]
        assert len(at_zero) == len(scores)
        widths = [(m.ci_high - m.ci_low) / 2 for m in at_zero]
        assert all(same(half, width) for width in widths), (model, half, widths)
        assert all((m.ci_high - m.ci_low) / 2 < min(widths) for m in aucs if not 0.1 <= m.value <= 0.9), model
        (min_k,) = [m for m in at_zero if m.tags["score"] == "min_k_20"]
        assert min_k.ci_low <= 0.5 <= min_k.ci_high, (model, min_k)
    assert "their intervals include 0.5" in flat(CARD)


def test_the_stated_sizes_and_characters_are_the_recorded_ones():
    """The parameter counts of "Memorization speed orders by size" are those the files' memory estimate
    read from each model (`info.training_memory`), and gemma's members' characters after 4 epochs its
    `eidetic_mean`."""
    entries = newest_committed(FinetuneMemorization.NAME, FinetuneMemorization.VERSION)
    gpt2, smol, gemma = sentence(flat(CARD), r"for the reference GPT-2 \(([\d.]+) M parameters\), [\d.]+ for SmolLM2 "
                                             r"\(([\d.]+) M\) and [\d.]+ for gemma-3-270m \(([\d.]+) M\)")
    stated = {"xsum-gpt2-outside-e05": gpt2, "SmolLM2-135M-Instruct.Q4_1": smol, "gemma-3-270m-q4_k_m": gemma}
    for model, text in stated.items():
        parameters = entries[model].info["training_memory"]["estimate_bytes"]["parameters"]
        assert same(text, parameters / 1e6), (model, text, parameters)
    (characters,) = sentence(flat(CARD), r"gemma's members give back (\d+) characters on average after 4 epochs")
    (eidetic,) = [m.value for m in entries["gemma-3-270m-q4_k_m"].metrics if m.name == "eidetic_mean"
                  and m.tags == {"group": "members", "epoch": "4", "trained_on": "members"}]
    assert same(characters, eidetic), (characters, eidetic)


def lora_recipe_runs(record: str) -> dict[tuple, dict]:
    """(method, rank, alpha, learning rate) -> the run of that recipe (every linear layer, for LoRA) in a
    committed bench_lora_recipe record."""
    import json

    runs = {}
    for run in json.loads((ROOT / "bench" / "results" / f"bench_lora_recipe--{record}.json").read_text())["report"]["runs"]:
        recipe = run["recipe"]
        if recipe["finetune_method"] == "full":
            runs["full", None, None, recipe["learning_rate"]] = run
        elif recipe["lora_target_modules"] == "all-linear":
            runs["LoRA", recipe["lora_rank"], recipe["lora_alpha"], recipe["learning_rate"]] = run
    return runs


def recipe_key(cell: str) -> tuple:
    """`full, 1e-4` / `LoRA 16/32, 4e-3` (rank/alpha, learning rate), bold or not -> `lora_recipe_runs`' key."""
    method, rate = cell.strip("*").split(", ")
    if method == "full":
        return "full", None, None, float(rate)
    rank, alpha = method.removeprefix("LoRA ").split("/")
    return "LoRA", int(rank), int(alpha), float(rate)


def test_the_lora_sweep_table_is_its_records():
    """Every cell of the LoRA table is its bench record's: the Min-K% 20% AUC at each epoch and the gap to
    full fine-tuning after 4 epochs (full minus LoRA); the chosen (bold) recipe is today's default."""
    from harness.training.method import FULL_LEARNING_RATE, LORA_RECIPE

    header, rows = card_table(CARD, "sweep model")
    assert header == ["sweep model", "recipe", "epoch 0", "1", "2", "4", "full − LoRA, epoch 4"]
    records = {"reference GPT-2": lora_recipe_runs("reference"), "SmolLM2-135M-Instruct": lora_recipe_runs("smollm2")}
    assert {row[0] for row in rows} == set(records)
    for model, recipe, *cells in rows:
        run = records[model][recipe_key(recipe)]
        aucs = [run["min_k_20_auc"][epoch] for epoch in ("0", "1", "2", "4")]
        full = records[model]["full", None, None, FULL_LEARNING_RATE]["min_k_20_auc"]["4"]
        expected = aucs + ([] if recipe.startswith("full") else [full - aucs[-1]])
        assert len(cells) == 5 and all(same(cell, value) for cell, value in zip(cells, expected)), (model, recipe)
    chosen = {recipe_key(row[1]) for row in rows if row[1].startswith("**")}
    assert chosen == {("LoRA", LORA_RECIPE.rank, LORA_RECIPE.alpha, LORA_RECIPE.learning_rate)}


def test_the_lora_over_full_rise_ratios_are_the_records():
    """The rise of the Min-K% 20% AUC above epoch 0 after 1, 2 and 4 epochs, LoRA's (the default recipe)
    over full fine-tuning's, on each sweep model, as the card states them."""
    from harness.training.method import FULL_LEARNING_RATE, LORA_RECIPE

    found = sentence(flat(CARD), r"is ([\d.]+), ([\d.]+) and ([\d.]+) after 1, 2 and 4 epochs on the reference GPT-2, "
                                 r"and ([\d.]+), ([\d.]+) and ([\d.]+) on SmolLM2")
    expected = []
    for record in ("reference", "smollm2"):
        runs = lora_recipe_runs(record)
        full = runs["full", None, None, FULL_LEARNING_RATE]["min_k_20_auc"]
        lora = runs["LoRA", LORA_RECIPE.rank, LORA_RECIPE.alpha, LORA_RECIPE.learning_rate]["min_k_20_auc"]
        expected += [(lora[e] - lora["0"]) / (full[e] - full["0"]) for e in ("1", "2", "4")]
    assert all(same(text, value) for text, value in zip(found, expected)), (found, expected)


def test_the_stated_exact_gaps_of_lora_and_full_are_the_records():
    from harness.training.method import FULL_LEARNING_RATE, LORA_RECIPE

    found = sentence(flat(CARD), r"the exact-memorization gap is ([\d.]+) with LoRA against ([\d.]+) with full fine-tuning "
                                 r"on the reference GPT-2, and ([\d.]+) against ([\d.]+) on SmolLM2")
    expected = []
    for record in ("reference", "smollm2"):
        runs = lora_recipe_runs(record)
        expected += [runs["LoRA", LORA_RECIPE.rank, LORA_RECIPE.alpha, LORA_RECIPE.learning_rate]["exact_gap"]["4"],
                     runs["full", None, None, FULL_LEARNING_RATE]["exact_gap"]["4"]]
    assert all(same(text, value) for text, value in zip(found, expected)), (found, expected)


def test_the_stated_dataset_inference_p_values_are_the_files():
    """"after 0, 1, 2 and 4 epochs: SmolLM2 {}, {}, {}, {}; gemma-3-270m ...; the reference GPT-2 ... (with LoRA ...)"
    and the copies trained on the non-members: each the committed file's di_p_value, as written."""
    entries = newest_committed(FinetuneMemorization.NAME, FinetuneMemorization.VERSION)

    def p(model: str, epoch: int, trained_on: str = "members") -> float:
        [found] = [m.value for m in entries[model].metrics
                   if m.name == "di_p_value" and m.tags == {"epoch": str(epoch), "trained_on": trained_on}]
        return found

    number = r"([\d.e-]+)"
    curve = ", ".join([number] * 4)
    stated = sentence(flat(CARD), rf"after 0, 1, 2 and 4 epochs: SmolLM2 {curve}; gemma-3-270m {curve}; the reference "
                                  rf"GPT-2 {curve} \(with LoRA {curve}\)\. The copies trained on the non-members for "
                                  rf"one epoch: SmolLM2 {number}, gemma {number}, the reference GPT-2 {number} ")
    models = ("SmolLM2-135M-Instruct.Q4_1", "gemma-3-270m-q4_k_m", "xsum-gpt2-outside-e05", "xsum-gpt2-outside-e05-lora")
    expected = [p(model, epoch) for model in models for epoch in (0, 1, 2, 4)]
    expected += [p(model, 1, "non_members") for model in models[:3]]
    assert len(stated) == len(expected)
    for text, value in zip(stated, expected):
        assert same(text, value), (text, value)
    # where p sits at its floor, how far past the relabelings: the files' null_sds
    sds = ", ".join([r"([−\d.]+)"] * 3)
    stated = sentence(flat(CARD), rf"after 1, 2 and 4 epochs: SmolLM2 {sds}; gemma-3-270m {sds}; the reference "
                                  rf"GPT-2 {sds}\.")
    expected = [entries[model].info["dataset_inference"][f"members@{epoch}"]["null_sds"]
                for model in models[:3] for epoch in (1, 2, 4)]
    assert all(same(text.replace("−", "-"), value) for text, value in zip(stated, expected, strict=True)), (stated, expected)
    # the guard sees the texts only: one value for every model (to rounding in the fits' last digits)
    guard = [m.value for entry in entries.values() for m in entry.metrics if m.name == "di_guard_p_value"]
    assert len(guard) == len(entries) and max(guard) - min(guard) < 1e-9
    assert same(sentence(flat(CARD), r"The IID guard reads\s+([\d.]+) on these texts")[0], guard[0])


def test_the_stated_extraction_shares_are_the_files():
    """"(with 10,000 draws, N% of them after 4 epochs)": gemma's members' (10,000, 0.5)-extractable share, to the
    percent; "No non-member is (10,000, 0.5)-extractable at any checkpoint of any row": every committed row's."""
    entries = newest_committed(FinetuneMemorization.NAME, FinetuneMemorization.VERSION)
    text = flat(CARD)
    (percent,) = sentence(text, r"with 10,000 draws, (\d+)% of them after 4 epochs")
    [gemma] = [m.value for m in entries["gemma-3-270m-q4_k_m"].metrics if m.name == "extractable" and m.tags == {
        "group": "members", "epoch": "4", "trained_on": "members", "attempts": "10000", "level": "0.5"}]
    assert int(percent) == round(100 * gemma), (percent, gemma)
    assert "No non-member is (10,000, 0.5)-extractable at any checkpoint of any row" in text
    for model, entry in entries.items():
        shares = [m.value for m in entry.metrics if m.name == "extractable" and m.tags["group"] == "non_members"
                  and m.tags["attempts"] == "10000"]
        assert len(shares) == 5 and not any(shares), (model, shares)
