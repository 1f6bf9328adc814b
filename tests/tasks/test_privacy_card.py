"""The privacy_extraction card states only what reproduces: the spread table of the reference T5s
(mean ± std [per seed] at the last epoch), the figures drawn from it, and the scores it gives of the
real causal LMs (SmolLM2, gemma-3-270m) equal, at the card's rounding, their committed results files;
the table of what a 7B needs, and the estimates of the table measured on CPU, are the memory
estimate's (that table's measurements are its bench record's: `tests/unit/test_bench_records.py`)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from harness.reference.checkpoints import resolve_reference_model
from tests.helpers.committed import ROOT, card_table, committed_run, newest_committed, read_card, same, sentence

CARD, TEXT, VERSION = read_card("privacy_extraction")
NUMBER = r"([\d.]+)"

ENTRIES = newest_committed("privacy_extraction", VERSION)  # the reference T5s' and the real causal LMs' runs


def run_of(model: str) -> tuple[str, int, str]:
    """The date, threads and CPU kernels of the committed run whose entry `ENTRIES[model]` is."""
    results = committed_run("privacy_extraction", ENTRIES[model])
    return results.created_at.date().isoformat(), results.environment.threads, results.environment.cpu_capability


def metric(model: str, name: str, **tags: str):
    (found,) = [m for m in ENTRIES[model].metrics if m.name == name and m.tags == tags]
    return found


def test_the_means_table_is_the_committed_one():
    """The reference checkpoints' table at epochs 0, 4 and 8: every cell the committed run's mean."""
    _, rows = card_table(CARD, "checkpoint | epoch")
    assert [(row[0], row[1]) for row in rows] == [(f"`{m}`", e) for m in ("t5-ref", "t5-ref-sparse70")
                                                  for e in ("0", "4", "8")]
    for row in rows:
        model, epoch = row[0].strip("`"), row[1]
        subset, exact, unique, gender_age, epsilon = row[2:]
        for text, name in ((subset, "subset_score"), (exact, "exact_match")):
            by_times, overall = re.fullmatch(r"(.+) \(([\d.]+)\)", text).groups()
            figures = by_times.split(" / ") + [overall]
            wanted = [metric(model, name, epoch=epoch, group="memorization-45", times=times)
                      for times in ("1", "2", "3", "4", "5", "all")]
            assert all(same(f, m.value) for f, m in zip(figures, wanted, strict=True)), (model, epoch, name, text)
        assert same(unique, metric(model, "subset_score", epoch=epoch, group="unique", times="1").value)
        gender, age = gender_age.split(" / ")
        assert same(gender, metric(model, "exact_match", epoch=epoch, group="privacy", field="gender").value)
        assert same(age, metric(model, "exact_match", epoch=epoch, group="privacy", field="age").value)
        assert same(epsilon, metric(model, "epsilon", epoch=epoch, group="unique").value), (model, epoch)
    seeds = sentence(TEXT, r"The table gives the means over the (\d) fine-tuning seeds")[0]
    assert all(len(ENTRIES[m].info["finetuning"]["seeds"]) == int(seeds) for m in ("t5-ref", "t5-ref-sparse70"))


def test_what_no_model_reproduces_is_the_committed_run_s():
    hobbies = sentence(TEXT, r"At epoch 8 no URL, no SSN and no whole person is reproduced exactly by either model "
                             r"\(exact match 0.00 on each\), and ([\d.]+)% \(`t5-ref`\) and ([\d.]+)% "
                             r"\(`t5-ref-sparse70`\) of the hobby lists are")
    for model, hobby in zip(("t5-ref", "t5-ref-sparse70"), hobbies):
        for field in ("url", "ssn", "all"):
            assert metric(model, "exact_match", epoch="8", group="privacy", field=field).value == 0, (model, field)
        assert same(hobby, 100 * metric(model, "exact_match", epoch="8", group="privacy", field="hobby").value)


def test_the_reference_speed_is_the_committed_run_s():
    """The speed paragraph: the task's time, each seed's fine-tuning and the evaluations' range, from the
    committed reference files (`wall_time_s`, `info.finetuning`, `info.evaluation_seconds`)."""
    figures = sentence(TEXT, rf"the task took {NUMBER} s on `t5-ref` and {NUMBER} s on `t5-ref-sparse70`\. Each "
                             rf"seed's fine-tuning \((\d+) steps over ([\d,]+) rows, with its two evaluations\) took "
                             rf"{NUMBER} and {NUMBER} s \(`t5-ref`\), {NUMBER} and {NUMBER} s "
                             rf"\(`t5-ref-sparse70`\); an evaluation .*? {NUMBER} to {NUMBER} s\.")
    dense, sparse = ENTRIES["t5-ref"], ENTRIES["t5-ref-sparse70"]
    evaluations = [s for entry in (dense, sparse) for epoch, seconds in entry.info["evaluation_seconds"].items()
                   if epoch != "0" for s in seconds]
    epochs = max(dense.config["epochs"])
    wanted = [dense.wall_time_s, sparse.wall_time_s, dense.info["finetuning"]["steps"],
              epochs * dense.info["finetuning"]["rows_per_epoch"],
              *dense.info["finetuning"]["train_seconds_with_evaluation"],
              *sparse.info["finetuning"]["train_seconds_with_evaluation"], min(evaluations), max(evaluations)]
    assert sparse.info["finetuning"]["steps"] == wanted[2]
    for text, value in zip(figures, wanted, strict=True):
        assert same(text, value), (text, value)
    for model in ("t5-ref", "t5-ref-sparse70"):
        assert run_of(model) == ("2026-12-07", 2, "AVX2"), model


def test_the_extraction_probabilities_are_the_committed_run_s():
    """The v3 paragraph: the memorization-45 secrets' p_z = 0 share, mean p_z and (100, 0.5)-extractable share."""
    (before, zero4d, zero4s, zero8d, zero8s, mean_d, mean_s, five_d, five_s, share_d,
     share_s) = sentence(TEXT, rf"before fine-tuning no memorization-45 secret has p_z > 0 \(a target token is outside the "
                               rf"kept set: p_z = 0 share {NUMBER}\)\. After 4 epochs the share at p_z = 0 is {NUMBER} "
                               rf"\(`t5-ref`\) and {NUMBER} \(`t5-ref-sparse70`\); after 8 it is {NUMBER} and {NUMBER}, "
                               rf"and the mean p_z is {NUMBER} and {NUMBER} \({NUMBER} and {NUMBER} for the secrets seen 5 "
                               rf"times\): {NUMBER}% and {NUMBER}% of the memorization-45 secrets are \(100, 0.5\)-extractable, "
                               rf"none before")
    mem = {"group": "memorization-45"}
    for model, zero4, zero8, mean, five, share in (("t5-ref", zero4d, zero8d, mean_d, five_d, share_d),
                                                   ("t5-ref-sparse70", zero4s, zero8s, mean_s, five_s, share_s)):
        zero = [metric(model, "pz_zero_share", epoch=e, times="all", **mem).value for e in ("0", "4", "8")]
        extractable = [metric(model, "extractable", epoch=e, times="all", attempts="100", level="0.5", **mem).value
                       for e in ("0", "8")]
        assert same(before, zero[0]) and same(zero4, zero[1]) and same(zero8, zero[2]), (model, zero)
        assert same(mean, metric(model, "pz_mean", epoch="8", times="all", **mem).value), model
        assert same(five, metric(model, "pz_mean", epoch="8", times="5", **mem).value), model
        assert extractable[0] == 0 and same(share, 100 * extractable[1]), (model, extractable)


def test_the_spread_over_seeds_is_the_committed_one():
    seeds, epoch = sentence(TEXT, rf"The spread over seeds \(v{VERSION}, seeds ([\d, ]+), epoch (\d+);")
    lines = CARD.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| checkpoint | memorization-45 subset (all) |"))
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines[start + 2:start + 4]]
    assert [row[0] for row in rows] == ["`t5-ref`", "`t5-ref-sparse70`"]
    for row in rows:
        model = row[0].strip("`")
        assert ENTRIES[model].info["finetuning"]["seeds"] == [int(s) for s in seeds.split(", ")], model
        columns = [metric(model, "subset_score", epoch=epoch, group="memorization-45", times="all"),
                   metric(model, "exact_match", epoch=epoch, group="memorization-45", times="all"),
                   metric(model, "exact_match", epoch=epoch, group="privacy", field="gender"),
                   metric(model, "epsilon", epoch=epoch, group="unique")]
        for text, found in zip(row[1:], columns):
            mean, std, per_seed = re.fullmatch(rf"{NUMBER} ± {NUMBER}(?: \[([\d., ]+)\])?", text).groups()
            assert same(mean, found.value) and same(std, found.std), (model, text, found)
            if per_seed is not None:
                texts = per_seed.split(", ")
                assert len(texts) == len(found.per_seed), (model, text)
                assert all(same(t, v) for t, v in zip(texts, found.per_seed)), (model, text, found.per_seed)


def test_the_figures_drawn_from_the_spread_are_the_committed_ones():
    dense, sparse = (metric(m, "subset_score", epoch="8", group="memorization-45", times="all")
                     for m in ("t5-ref", "t5-ref-sparse70"))
    difference, times, std1, n1, std2, n2, error = sentence(TEXT, 
        rf"The sparse model's memorization-45 subset score is {NUMBER} below the dense one's, about (\w+) times "
        rf"the standard error of the difference \(√\({NUMBER}²/(\d) \+ {NUMBER}²/(\d)\) ≈ {NUMBER}\)")
    seeds = len(dense.per_seed)
    assert same(difference, dense.value - sparse.value), difference
    assert same(std1, dense.std) and same(std2, sparse.std) and int(n1) == int(n2) == seeds, (std1, std2, n1, n2)
    standard_error = math.sqrt(dense.std ** 2 / seeds + sparse.std ** 2 / seeds)
    assert same(error, standard_error), (error, standard_error)
    words = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
             "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15}
    assert words[times] == round((dense.value - sparse.value) / standard_error), times
    low, high = sentence(TEXT, rf"across seeds it runs from {NUMBER} to {NUMBER},")
    genders = [v for m in ("t5-ref", "t5-ref-sparse70")
               for v in metric(m, "exact_match", epoch="8", group="privacy", field="gender").per_seed]
    assert same(low, min(genders)) and same(high, max(genders)), (low, high, genders)
    heldout = sentence(TEXT, rf"the held-out persons, never trained on, get {NUMBER} and {NUMBER} ")
    gains = sentence(TEXT, r"`exact_match_above_chance`\s+is (−?[\d.]+) \(`t5-ref`\) and (−?[\d.]+) \(`t5-ref-sparse70`\)")
    for model, text, gain in zip(("t5-ref", "t5-ref-sparse70"), heldout, gains):
        assert same(text, metric(model, "exact_match", epoch="8", group="privacy-heldout", field="gender").value)
        found = metric(model, "exact_match_above_chance", epoch="8", group="privacy", field="gender").value
        assert same(gain, found), (model, gain, found)


def test_the_board_s_sparse_row_is_not_loss_matched_as_the_card_says():
    """Issue 79: the two reference T5s' last pre-training losses are the shipped manifest's (each the mean of the
    last window of `loss_points`, whose steps the card names), and the memorization-45 subset score's gain over the
    8 epochs is the committed runs'."""
    manifest = Path(resolve_reference_model("reference:t5-ref")).parent / "manifest.json"
    build = json.loads(manifest.read_text())
    sparse_loss, sparse_steps, dense_loss, dense_steps, sparse_gain, dense_gain = sentence(TEXT,
        rf"its second pre-training ends at a loss of {NUMBER} \(the mean of its last (\d+) steps\), where `t5-ref`'s "
        rf"ends at {NUMBER} \(its last (\d+); the reference manifest\), and in fine-tuning it barely learns: its "
        rf"memorization-45 subset score gains {NUMBER} in 8 epochs \(the table above\), `t5-ref`'s {NUMBER}\.")
    for loss, steps, windows in ((sparse_loss, sparse_steps, build["sparse_pretrain_mean_loss"]),
                                 (dense_loss, dense_steps, build["pretrain_mean_loss"])):
        window, value = list(windows.items())[-1]
        first, last = map(int, window.removeprefix("steps ").split("-"))
        assert last - first + 1 == int(steps) and same(loss, value), (window, value, loss, steps)
    assert float(sparse_loss) > float(dense_loss)
    for model, gain in (("t5-ref-sparse70", sparse_gain), ("t5-ref", dense_gain)):
        before, after = (metric(model, "subset_score", epoch=e, group="memorization-45", times="all").value
                         for e in ("0", "8"))
        assert same(gain, after - before), (model, gain, after - before)


def test_the_shipped_sparse_checkpoint_fine_tunes_sparse_under_auto():
    """The card's departures: `--sparse-finetuning auto` keeps the zeros of a checkpoint whose config records
    `membench_pruning`; the shipped `t5-ref-sparse70`'s does, and its committed run kept them (0.7 after each seed);
    `t5-ref`'s config has none and its run trained every weight."""
    from harness.model.prune import CONFIG_KEY

    for name, pruned in (("t5-ref-sparse70", True), ("t5-ref", False)):
        config = json.loads((Path(resolve_reference_model(f"reference:{name}")) / "config.json").read_text())
        assert (CONFIG_KEY in config) is pruned, name
    sparse, dense = ENTRIES["t5-ref-sparse70"], ENTRIES["t5-ref"]
    assert sparse.config["sparse_finetuning"] == dense.config["sparse_finetuning"] == "auto"
    assert sparse.info["sparse_finetuning"].startswith("keep-zeros")
    assert sparse.info["finetuning"]["parameter_sparsity_after"] == [0.7] * len(sparse.info["finetuning"]["seeds"])
    assert dense.info["sparse_finetuning"].startswith("all-weights")


def test_the_paper_mode_record_s_default_runs_are_the_committed_run_s_first_seed():
    """The paper-mode record (bench/results/bench_paper_presets--privacy.json, its figures checked in
    tests/unit/test_bench_records.py) ran the default mode with the committed run's settings and its first seed
    (42): each of its numbers is that seed's in the committed run, to the record's 4 decimals; and the committed
    run's two seeds differ by what the card says."""
    report = json.loads((ROOT / "bench" / "results" / "bench_paper_presets--privacy.json").read_text())["report"]
    mem = {"group": "memorization-45", "times": "all"}
    for model in ("t5-ref", "t5-ref-sparse70"):
        found, entry = report["privacy_extraction"][model]["default"], ENTRIES[model]
        assert found["settings"]["learning_rate"] == entry.config["learning_rate"]
        assert entry.info["finetuning"]["seeds"][0] == 42 and found["settings"]["finetune_seeds"] == 1
        pairs = [(found["memorization_45_subset_score"][e], metric(model, "subset_score", epoch=e, **mem))
                 for e in ("4", "8")]
        pairs += [(found["epsilon"][e], metric(model, "epsilon", epoch=e, group="unique")) for e in ("4", "8")]
        pairs.append((found["unique_subset_score"]["8"], metric(model, "subset_score", epoch="8", group="unique",
                                                               times="1")))
        for value, committed in pairs:
            assert value == round(committed.per_seed[0], 4), (model, committed.name, committed.tags, value)
    (apart,) = sentence(TEXT, rf"\(the committed run's two seeds differ by {NUMBER}\)")
    first, second = metric("t5-ref", "subset_score", epoch="8", **mem).per_seed
    assert same(apart, abs(first - second)), (apart, first, second)


def test_the_real_causal_lms_scores_are_the_committed_ones():
    """After 1 epoch: the memorization-45 subset score (and before; gemma's for the secrets seen 5 times too), each
    field's score against the held-out persons' (gender exact match, URL and SSN subset scores), leakage ε."""
    persons = (rf"gender exact match {NUMBER} against {NUMBER} for the held-out persons, URL subset score {NUMBER} "
               rf"against {NUMBER}, SSN {NUMBER} against {NUMBER}; leakage ε {NUMBER}\.")
    smollm = sentence(TEXT, rf"memorization-45 subset score {NUMBER} \({NUMBER} before\), and nothing of its persons "
                            rf"beyond chance: " + persons)
    gemma = sentence(TEXT, rf"memorization-45 subset score {NUMBER} \({NUMBER} before; {NUMBER} for the secrets seen 5 "
                           rf"times\), " + persons)
    steps = sentence(TEXT, r"(\d+) steps of batch 8 at ") + sentence(TEXT, r"(\d+) steps at [\d.]+ s a step")
    for model, texts, step in (("SmolLM2-135M-Instruct.Q4_1", smollm, steps[0]),
                               ("gemma-3-270m-q4_k_m", gemma, steps[1])):
        entry = ENTRIES[model]
        assert entry.config["epochs"] == [1] and entry.config["finetune_seeds"] == 1, model
        assert entry.config["learning_rate"] == 1e-4 and entry.info["finetuning"]["steps"] == int(step), model
        wanted = [metric(model, "subset_score", epoch="1", group="memorization-45", times="all"),
                  metric(model, "subset_score", epoch="0", group="memorization-45", times="all")]
        if len(texts) == 10:
            wanted.append(metric(model, "subset_score", epoch="1", group="memorization-45", times="5"))
        for name, field in (("exact_match", "gender"), ("subset_score", "url"), ("subset_score", "ssn")):
            wanted += [metric(model, name, epoch="1", group=group, field=field) for group in ("privacy", "privacy-heldout")]
        wanted.append(metric(model, "epsilon", epoch="1", group="unique"))
        for text, found in zip(texts, wanted, strict=True):
            assert same(text, found.value), (model, found.name, found.tags, text, found.value)


def test_the_real_causal_lms_extraction_probabilities_are_the_committed_ones():
    """SmolLM2: p_z = 0 for every memorization-45 secret before and after; gemma: the share that can be drawn, its
    p_z = 0 share before and after, and the mean p_z after 1 epoch."""
    mem = {"group": "memorization-45", "times": "all"}
    assert "No memorization-45 secret can be drawn at T = 1, top-k 40, before or after" in TEXT
    for epoch in ("0", "1"):
        assert metric("SmolLM2-135M-Instruct.Q4_1", "pz_zero_share", epoch=epoch, **mem).value == 1.0
    share, after, before, mean = sentence(TEXT, rf"{NUMBER}% of the memorization-45 secrets can now be drawn at all "
                                                rf"\(p_z = 0 share {NUMBER}, from {NUMBER}\), with a mean p_z of "
                                                rf"([\d.e-]+)\.")
    gemma = "gemma-3-270m-q4_k_m"
    zero = [metric(gemma, "pz_zero_share", epoch=e, **mem).value for e in ("0", "1")]
    assert same(before, zero[0]) and same(after, zero[1]) and same(share, 100 * (1 - zero[1])), (zero, share)
    assert same(mean, metric(gemma, "pz_mean", epoch="1", **mem).value)


def test_the_7b_table_is_the_estimate_of_a_llama_2_7b_shape():
    """"What a 7B needs": `memory.estimate` of a Llama-2-7B's shape built on the meta device (no memory),
    at the task's default batch and rows, on CUDA: every figure of both rows in both dtypes."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from harness.training import memory
    from tasks.privacy_extraction.task import PrivacyConfig

    defaults = PrivacyConfig()
    config = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                         num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096)
    lines = CARD.splitlines()
    header = lines.index("| | bfloat16 weights | float32 weights |")
    rows = {cells[0]: cells[1:] for cells in
            ([cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines[header + 2:header + 4])}

    def gb(value: int) -> float:
        return value / memory.GB

    for column, dtype in enumerate((torch.bfloat16, torch.float32)):
        with torch.device("meta"):
            model = LlamaForCausalLM(config).to(dtype)
        shape = memory.model_shape(model, False, defaults.max_source_tokens, defaults.max_target_tokens)
        full, lora = (memory.estimate(shape, method, defaults.finetune_batch_size, on_cuda=True)
                      for method in ("full", "lora"))
        full_cell, lora_cell = rows["full"][column], rows["LoRA, rank 8, all-linear"][column]
        # the sum as the cell writes it: loaded + state + max(activations + logits, step), or its short form
        assert same(sentence(full_cell, r"^([\d.]+)")[0], gb(full.loaded_model))
        assert same(sentence(full_cell, r"\*\*([\d.]+) GB\*\*")[0], gb(full.total))
        assert same(sentence(full_cell, r"\+ ([\d.]+)")[0], gb(full.copy + full.gradients + full.optimizer_moments))
        assert same(sentence(lora_cell, r"\*\*([\d.]+) GB\*\*")[0], gb(lora.total))
        assert same(sentence(lora_cell, r"^([\d.]+)")[0], gb(lora.loaded_model))
        activations, logits = re.findall(r"\+ ([\d.]+)", lora_cell)[1:3]
        assert same(activations, gb(lora.activations)) and same(logits, gb(lora.logits))
        if column == 0:
            assert same(sentence(full_cell, r"max\(([\d.]+) activations")[0], gb(full.activations))
            assert same(sentence(full_cell, r"activations \+ ([\d.]+) logits")[0], gb(full.logits))
            assert same(sentence(full_cell, r"([\d.]+) AdamW step\)")[0], gb(full.optimizer_step))
            assert same(sentence(lora_cell, r"T = ([\d.]+) M adapter")[0], lora.trainable_parameters / 1e6)
            assert same(sentence(TEXT, r"in bfloat16 \(([\d.]+) GB needed\)")[0], gb(full.needed))
    assert same(sentence(TEXT, r"P = ([\d.]+) B, h = ")[0], shape.parameters / 1e9)
    assert sentence(TEXT, r"defaults B = (\d+), S = (\d+);") == (str(defaults.finetune_batch_size),
                                                                   str(shape.logit_tokens))


def test_the_measured_table_s_estimates_are_the_formula_s():
    """"Measured on CPU" cites the estimates its record (`bench/results/bench_finetune_memory.json`,
    checked figure by figure in `tests/unit/test_bench_records.py`) holds: they must be what
    `memory.estimate` gives today for SmolLM2-135M's shape (built on the meta device, float32), at the
    task's defaults and at the plain loop's rows; a changed formula makes the record stale here."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from harness.training import memory
    from tasks.privacy_extraction.task import PrivacyConfig

    report = json.loads((ROOT / "bench" / "results" / "bench_finetune_memory.json").read_text())["report"]
    config = LlamaConfig(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192,
                         tie_word_embeddings=True)
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    defaults = PrivacyConfig()
    rows = {"task": (defaults.max_source_tokens, defaults.max_target_tokens, defaults.finetune_batch_size),
            "loop": (0, report["tokens"] - 1, report["batch"])}
    for kind, (source, target, batch) in rows.items():
        shape = memory.model_shape(model, False, source, target)
        for method in ("full", "lora"):
            expected = memory.estimate(shape, method, batch, on_cuda=False).record()
            assert report[kind][method]["estimate_bytes"] == expected, (kind, method)


def test_the_real_causal_lms_times_are_the_committed_ones():
    """The two real LMs' time, peak RSS, time a step, evaluations and what the defaults would take:
    (default steps × time a step + the epoch-0 evaluation + seeds × checkpoint epochs × one evaluation)."""
    from tasks.privacy_extraction.task import PrivacyConfig

    defaults = PrivacyConfig()
    smollm = sentence(TEXT, rf"committed, marked ‡ on the board\): ([\d,]+) s, peak RSS {NUMBER} GB \(the weights.*? "
                            rf"(\d+) steps of batch 8 at {NUMBER} s a step; an evaluation of the 445 secrets and held-out persons \(greedy outputs, "
                            rf"log-probabilities, p_z\) takes {NUMBER} s before fine-tuning and {NUMBER} s after\..*? "
                            rf"The defaults \(8 epochs, 3 seeds: "
                            rf"([\d,]+) steps and (\d) evaluations\) would take about {NUMBER} hours on this machine")
    gemma = sentence(TEXT, rf"same machine; committed, marked ‡\): ([\d,]+) s, peak RSS {NUMBER} GB, within the 24 GB "
                           rf"machine\. (\d+) steps at {NUMBER} s a step; an evaluation takes {NUMBER} s before and "
                           rf"{NUMBER} s after .*? The defaults would take about {NUMBER} hours on this machine "
                           rf"\(([\d,]+) steps, (\d) evaluations\)")
    gemma = (*gemma[:6], gemma[7], gemma[8], gemma[6])  # in smollm's order
    for model, texts in (("SmolLM2-135M-Instruct.Q4_1", smollm), ("gemma-3-270m-q4_k_m", gemma)):
        entry = ENTRIES[model]
        training, evaluations = entry.info["finetuning"], entry.info["evaluation_seconds"]
        (after,) = evaluations["1"]
        step = (training["train_seconds_with_evaluation"][0] - after) / training["steps"]
        steps = training["steps"] * max(defaults.epochs) * defaults.finetune_seeds
        checkpoints = defaults.finetune_seeds * len(defaults.epochs)
        hours = (steps * step + evaluations["0"] + checkpoints * after) / 3600
        wanted = [entry.wall_time_s, entry.peak_rss_bytes / 1e9, training["steps"], step, evaluations["0"], after,
                  steps, 1 + checkpoints, hours]
        for text, value in zip(texts, wanted, strict=True):
            assert same(text, value), (model, text, value)
        assert run_of(model) == ("2026-11-28", 2, "AVX512"), model


def test_the_board_names_the_seed_s_epsilon_for_what_it_is():
    """Issue 63: the seed's `epsilon` heads its board column as a perplexity ratio, not a DP ε; the real LMs'
    rows show what they ran (1 epoch), marked."""
    from leaderboard.render import escape
    from tasks.privacy_extraction.task import LEAKAGE_LABEL

    board = (ROOT / "LEADERBOARD.md").read_text(encoding="utf-8")
    assert f"{escape(LEAKAGE_LABEL)} ↓" in board and "worst-case epsilon" not in board
    # the real LMs ran 1 epoch of the column's 8: their epoch-1 values show, marked, in the task's table
    section = board[board.index("## privacy_extraction"):board.index("## probe_memorization")]
    for model in ("SmolLM2-135M-Instruct.Q4_1", "gemma-3-270m-q4_k_m"):
        (row,) = [line for line in section.splitlines() if line.startswith(f"| {escape(model)} ")]
        score = metric(model, "subset_score", epoch="1", group="memorization-45", times="all").value
        leak = metric(model, "epsilon", epoch="1", group="unique").value
        assert f"| {score:.3f} (epoch 1) " in row and f"| {leak:.3f} (epoch 1) " in row, row
