"""Task `paywall_memorization`: metrics, article splitting, bad input, batched generation, and the
reference controls (member model vs non-member baseline; Japanese memorization rising with epochs).

The reference evaluations go through the results cache, so with a warm cache they cost the load of
the data only. The English control file is named by its content hash, so its cache key changes
whenever its content does.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY_TEXTS, assert_user_error, write_jsonl

from harness.app.cli import main
from harness.app.registry import select
from harness.core.results import load_results
from harness.metrics import memorization as metrics
from harness.model.loading import ModelSpec, load
from harness.reference.build import read_manifest, reference_builds
from harness.reference.corpus import reference_corpus
from harness.run.runner import EvaluateOptions, evaluate
from harness.scoring.generation import _fitting_batches, greedy_continuations
from harness.scoring.text import truncate_words
from tasks.paywall_memorization.data import first_sentence, split_article
from tests.helpers.shipped_builds import shipped_build

TASK = "paywall_memorization"
SUMMARY = ("eidetic_max", "eidetic_mean", "approximate_mean", "approximate_median")


def metric(entry, name: str, group: str = "members", bin_: str = "all") -> float:
    return next(m.value for m in entry.metrics if m.name == name and m.tags.get("group") == group
                and m.tags.get("bin") == bin_)


# ---------------------------------------------------------------- metrics


def test_forward_match_counts_the_common_prefix():
    assert metrics.forward_match("abcdef", "abcxef") == 3
    assert metrics.forward_match("", "abc") == 0
    assert metrics.forward_match("abc", "abc") == 3
    assert metrics.forward_match("東京都に住む", "東京都で働く") == 3


def test_approximate_memorization_hand_cases():
    assert metrics.approximate_memorization("abc", "abc") == 1.0
    assert metrics.approximate_memorization("abc", "abd") == pytest.approx(1 - 1 / 3)
    assert metrics.approximate_memorization("ab", "abcd") == pytest.approx(0.5)
    assert metrics.approximate_memorization("abcd", "ab") == pytest.approx(0.5)
    assert metrics.approximate_memorization("", "") == 1.0
    assert metrics.approximate_memorization("", "abc") == 0.0
    assert metrics.approximate_memorization("今日は晴れ", "今日は雨") == pytest.approx(1 - 2 / 5)


# ---------------------------------------------------------------- splitting


def test_split_ten_words_keeps_the_original_characters():
    text = "one two\nthree  four five six\tseven eight nine ten"
    public, private = split_article(text, "en", 200)
    assert public == "one two\nthree  four five"
    assert private == " six\tseven eight nine ten"
    assert public + private == text


def test_split_caps_the_public_part_at_200_words():
    text = " ".join(f"w{i}" for i in range(500))
    public, private = split_article(text, "en", 200)
    assert public.split() == [f"w{i}" for i in range(200)]
    assert public + private == text


def test_split_one_word_is_too_short():
    assert split_article("alone", "en", 200) is None
    assert split_article("   ", "en", 200) is None


def test_split_japanese_by_fugashi_words():
    text = "今日は晴れです。明日は雨が降ります。"  # 12 MeCab tokens
    assert split_article(text, "ja", 200) == ("今日は晴れです。明日", "は雨が降ります。")
    assert split_article(text, "ja", 3) == ("今日は晴れ", "です。明日は雨が降ります。")


def test_first_sentence_english_uses_pysbd():
    assert first_sentence(" Mr. Smith went home. Then he slept.", "en") == ("Mr. Smith went home.", True)
    assert first_sentence(" He paid $3.50 at 5 p.m. on Monday. Then left.", "en") == (
        "He paid $3.50 at 5 p.m. on Monday.", True)


def test_first_sentence_ending_inside_quotes_counts_as_ended():
    assert first_sentence(' He said "stop."', "en") == ('He said "stop."', True)
    assert first_sentence(" (It rained.)", "en") == ("(It rained.)", True)


def test_first_sentence_without_an_end_is_the_whole_private_part():
    assert first_sentence("  and then nothing happened  ", "en") == ("and then nothing happened", False)
    assert first_sentence("明日は雨", "ja") == ("明日は雨", False)


def test_first_sentence_japanese():
    assert first_sentence("今日は晴れ。明日は雨。", "ja") == ("今日は晴れ。", True)
    assert first_sentence("本当？はい。", "ja") == ("本当？", True)


# ---------------------------------------------------------------- bad input through the CLI


def paywall_argv(model: Path, data, out: Path, *extra: str) -> list[str]:
    return ["evaluate", "--model", str(model), "--tasks", TASK, "--data", str(data), "--output-path", str(out),
            "--device", "cpu", "--no-cache", *extra]


GOOD_ROW = {"id": "ok", "public": "The quick brown fox jumps", "private": " over the lazy dog."}


@pytest.mark.parametrize("row, needle", [
    ({"public": "a b", "private": " c."}, "missing field 'id'"),
    ({"id": "x"}, "needs 'public' and 'private', or 'text'"),
    ({"id": "x", "public": "The fox jumps"}, "'public' and 'private' must both be strings"),
    ({"id": "x", "private": " over the dog."}, "'public' and 'private' must both be strings"),
    ({"id": "x", "text": 7}, "needs 'public' and 'private', or 'text'"),
    ({"id": "x", "public": "  \n", "private": " over the dog."}, "empty public part"),
    ({"id": "x", "public": "The fox jumps", "private": " "}, "empty private part"),
    ({"id": "x", "text": "a b c d", "label": 2}, "label must be 1 (member) or 0 (non-member), got 2"),
    ({"id": "x", "text": "a b c d", "label": "1"}, "label must be 1"),
    ({"id": "x", "text": "a b c d", "label": 1.0}, "label must be 1"),
], ids=["no-id", "no-parts", "no-private", "no-public", "text-not-string", "empty-public", "empty-private",
        "label-2", "label-string", "label-float"])
def test_bad_rows(capsys, tmp_path, tiny_lm, row, needle):
    data = write_jsonl(tmp_path / "articles.jsonl", [GOOD_ROW, row])
    out = tmp_path / "out"
    assert_user_error(capsys, paywall_argv(tiny_lm, data, out), out, needle, f"{data}:2")


def test_non_utf8_file(capsys, tmp_path, tiny_lm):
    data = tmp_path / "latin1.jsonl"
    data.write_bytes('{"id": "a", "text": "café au lait ce matin"}\n'.encode("latin-1"))
    out = tmp_path / "out"
    assert_user_error(capsys, paywall_argv(tiny_lm, data, out), out, "not UTF-8", str(data))


def test_malformed_json_line(capsys, tmp_path, tiny_lm):
    data = tmp_path / "broken.jsonl"
    data.write_text(json.dumps(GOOD_ROW) + '\n{"id": "b", "text": \n', encoding="utf-8")
    out = tmp_path / "out"
    assert_user_error(capsys, paywall_argv(tiny_lm, data, out), out, "not valid JSON", f"{data}:2")


def test_missing_file(capsys, tmp_path, tiny_lm):
    out = tmp_path / "out"
    missing = tmp_path / "nope.jsonl"
    assert_user_error(capsys, paywall_argv(tiny_lm, missing, out), out, "not found", str(missing))


def test_japanese_corpus_needs_language_ja(capsys, tmp_path, tiny_lm):
    out = tmp_path / "out"
    assert_user_error(capsys, paywall_argv(tiny_lm, "reference:ja", out), out, "reference corpus ja", "--language ja")


def test_unknown_reference_corpus(capsys, tmp_path, tiny_lm):
    out = tmp_path / "out"
    assert_user_error(capsys, paywall_argv(tiny_lm, "reference:xx", out), out, "unknown reference corpus 'xx'",
                      "xsum")


def test_documented_handling_of_awkward_rows(capsys, tmp_path, tiny_lm):
    """Too-short `text` rows are skipped and counted; a private part without a sentence end is used
    whole (and the record says so); rows without labels give group `all`."""
    data = write_jsonl(tmp_path / "articles.jsonl", [
        {"id": "a", "public": "The quick brown fox jumps over the lazy dog",
         "private": " near the river bank. A journey begins."},
        {"id": "b", "public": "Members of parliament debated", "private": "  the new budget late into the night "},
        {"id": "c", "text": "football"},
        {"id": "d", "text": "The football club announced the signing of a new striker on Monday. It was big."},
    ])
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(paywall_argv(tiny_lm, data, out, "--log-samples")) == 0, capsys.readouterr()
    results_path = Path(capsys.readouterr().out.splitlines()[-1])
    assert results_path.parent == out
    entry = load_results(results_path).task(TASK)
    assert entry.status == "ok"
    assert entry.counts == {"articles": 4, "too_short_to_split": 1, "no_sentence_end": 1, "all": 3}
    assert {m.tags["group"] for m in entry.metrics} == {"all"}
    assert {m.tags["bin"] for m in entry.metrics} == {"all", "1", "2", "3"}
    assert metric(entry, "eidetic_mean", "all") is not None
    samples = {row["id"]: row for row in
               map(json.loads, (out / entry.samples_file).read_text(encoding="utf-8").splitlines())}
    assert set(samples) == {"a", "b", "d"}
    assert samples["a"]["reference"] == "near the river bank." and samples["a"]["sentence_end_found"] is True
    assert samples["b"]["reference"] == "the new budget late into the night"
    assert samples["b"]["sentence_end_found"] is False
    assert samples["d"]["reference"] == "a new striker on Monday." and samples["d"]["sentence_end_found"] is True
    assert samples["d"]["public_words"] == 7  # 15 words: the first 7 are public
    assert all(row["label"] is None for row in samples.values())


# ---------------------------------------------------------------- batched generation


def test_fitting_batches_by_hand():
    lengths, budgets = [10, 20, 30, 5, 25, 12], [5, 5, 10, 20, 8, 3]
    assert _fitting_batches([5, 0, 1, 4, 2, 3], lengths, budgets, 2, 40) == [[5, 0], [1, 4], [2], [3]]
    # 30 + 10 fits 40 exactly; 30 + 20 does not
    assert _fitting_batches([5, 0, 1, 4, 2, 3], lengths, budgets, 8, 40) == [[5, 0, 1, 4, 2], [3]]
    assert _fitting_batches([], [], [], 4, 40) == []


def test_fitting_batches_respect_context_and_size():
    rng = random.Random(0)
    for _ in range(200):
        n, context, size = rng.randint(1, 30), rng.choice([32, 64, 128]), rng.randint(1, 9)
        budgets = [rng.randint(1, context // 2) for _ in range(n)]
        lengths = [rng.randint(1, context - b) for b in budgets]
        order = list(range(n))
        rng.shuffle(order)
        batches = _fitting_batches(order, lengths, budgets, size, context)
        assert [i for batch in batches for i in batch] == order
        for batch in batches:
            assert 1 <= len(batch) <= size
            assert max(lengths[i] for i in batch) + max(budgets[i] for i in batch) <= context


@pytest.fixture(scope="module")
def tiny_model(tiny_lm):
    return load(ModelSpec(str(tiny_lm), device="cpu"))


def generation_cases() -> tuple[list[str], list[int]]:
    """~20 prompts from 0 to ~90 words (the tiny LM's context is 32 tokens) and budgets 1..40."""
    words = " ".join(TINY_TEXTS).split()
    rng = random.Random(1)
    lengths = [0, 1, 2, 3, 5, 7, 8, 10, 12, 15, 18, 20, 24, 30, 40, 50, 60, 75, 90, 4, 9, 11]
    budgets = [1, 40, 3, 16, 17, 5, 8, 2, 30, 9, 12, 4, 16, 1, 20, 6, 10, 7, 13, 15, 11, 14]
    prompts = [" ".join(words[(start := rng.randrange(60)): start + n]) for n in lengths]
    return prompts, budgets


def spy_on_generate(model, calls: list) -> None:
    original = type(model).generate.__get__(model)

    def generate(*args, **kwargs):
        calls.append((tuple(kwargs["input_ids"].shape), kwargs["max_new_tokens"]))
        return original(*args, **kwargs)

    model.generate = generate


def test_batched_generation_equals_one_at_a_time(tiny_model):
    prompts, budgets = generation_cases()
    model, tokenizer = tiny_model.model, tiny_model.tokenizer
    calls_batched, calls_single = [], []
    try:
        spy_on_generate(model, calls_batched)
        batched, info = greedy_continuations(model, tokenizer, prompts, budgets, batch_size=8, progress=False)
        spy_on_generate(model, calls_single)
        single, info_single = greedy_continuations(model, tokenizer, prompts, budgets, batch_size=1, progress=False)
    finally:
        del model.generate
    assert batched == single
    assert info == info_single
    assert info.context_length == 32 and info.max_new_tokens_cap == 16
    assert info.n_prompts == len(prompts)
    assert info.n_prompts_cut >= 4  # the 30..90-word prompts pass the 32-token context
    assert info.n_budgets_capped == sum(b > 16 for b in budgets)
    assert len(calls_single) == len(prompts)
    assert len(calls_batched) < len(prompts) / 2
    for (rows, width), new_tokens in calls_batched + calls_single:
        assert rows <= 8
        assert width + new_tokens <= 32  # never past the context


def test_generation_checks_its_arguments(tiny_model):
    with pytest.raises(ValueError):
        greedy_continuations(tiny_model.model, tiny_model.tokenizer, ["a", "b"], [3], progress=False)
    assert greedy_continuations(tiny_model.model, tiny_model.tokenizer, [], [], progress=False)[0] == []


# ---------------------------------------------------------------- reference controls


def checkpoint_by_epoch(folder: Path) -> dict[int, Path]:
    return {c["epoch"]: folder / c["folder"] for c in read_manifest(folder)["checkpoints"]}


def evaluate_paywall(folder: Path, overrides: dict, out: Path):
    path = evaluate(ModelSpec(str(folder)), select(TASK), overrides, EvaluateOptions(output_path=out, progress=False))
    return load_results(path).task(TASK)


@pytest.fixture(scope="module")
def member_texts_64(membench_cache) -> Path:
    """The member documents cut to their first 64 words: what the quick builds were trained on."""
    rows = [{"id": d.doc_id, "text": truncate_words(d.text, 64) or d.text, "label": 1}
            for d in reference_corpus(0) if d.member]
    text = "".join(json.dumps(row) + "\n" for row in rows)
    path = membench_cache / "paywall-tests" / f"members64-{hashlib.sha256(text.encode()).hexdigest()[:12]}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file():
        path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def english(member_texts_64, tmp_path_factory):
    """Entries of the 30-epoch quick member model and of the 30-epoch non-member baseline."""
    out = tmp_path_factory.mktemp("paywall-en")
    member, baseline = (checkpoint_by_epoch(shipped_build(config))[30] for config in reference_builds(quick=True)[:2])
    overrides = {"data": str(member_texts_64)}
    return {"member": evaluate_paywall(member, overrides, out), "baseline": evaluate_paywall(baseline, overrides, out)}


@pytest.fixture(scope="module")
def japanese(membench_cache, tmp_path_factory):
    """Entries of the Japanese member build at every epoch."""
    out = tmp_path_factory.mktemp("paywall-ja")
    [config] = [b for b in reference_builds() if b.name == "ja-gpt2"]
    return {epoch: evaluate_paywall(folder, {"data": "reference:ja", "language": "ja"}, out)
            for epoch, folder in checkpoint_by_epoch(shipped_build(config)).items()}


def test_member_model_memorizes_more_than_the_baseline(english):
    """The control of issue 18 on the quick builds (members cut to 64 words): the member model reproduces
    its members' continuations far better than the baseline. Measured: approximate 1.000 vs 0.186,
    eidetic 58.95 vs 0.31 characters; asserted: at least +0.10 and 2x (the margins of `membench run`)."""
    member, baseline = english["member"], english["baseline"]
    assert member.counts["members"] + member.counts["too_short_to_split"] == 200
    assert member.counts["members"] >= 195
    assert "non_members" not in member.counts
    assert metric(member, "approximate_mean") >= metric(baseline, "approximate_mean") + 0.10
    assert metric(member, "eidetic_mean") >= 2 * metric(baseline, "eidetic_mean")


def test_japanese_memorization_rises_with_epochs(japanese):
    """The full Japanese build: approximate memorization of members rises with epochs, and after 30
    epochs members are far above non-members; asserted: at least +0.10 and 2x (the margins of `membench run`).
    The measured values are the committed runs' of the shipped build, in the card's "Controls" (checked against
    those files by test_paywall_card.py)."""
    assert sorted(japanese) == [0, 1, 30]
    approximate = [metric(japanese[epoch], "approximate_mean") for epoch in (0, 1, 30)]
    assert approximate[0] < approximate[1] < approximate[2], approximate
    assert metric(japanese[30], "eidetic_mean") > metric(japanese[1], "eidetic_mean")
    assert approximate[0] < 0.05  # the untrained model reproduces (almost) nothing
    final = japanese[30]
    assert final.counts["members"] == final.counts["non_members"] == 200
    assert metric(final, "approximate_mean") >= metric(final, "approximate_mean", group="non_members") + 0.10
    assert metric(final, "eidetic_mean") >= 2 * metric(final, "eidetic_mean", group="non_members")


def check_bins(entry, group: str, n_bins: int = 5) -> None:
    bins = [m for m in entry.metrics if m.tags.get("group") == group and m.tags.get("bin") != "all"]
    assert sorted({m.tags["bin"] for m in bins}) == [str(b) for b in range(1, n_bins + 1)]
    ranges, sizes = [], []
    for number in range(1, n_bins + 1):
        found = [m for m in bins if m.tags["bin"] == str(number)]
        assert sorted(m.name for m in found) == sorted(SUMMARY)
        assert len({m.tags["public_words"] for m in found}) == 1 and len({m.n for m in found}) == 1
        match = re.fullmatch(r"(\d+)-(\d+)", found[0].tags["public_words"])
        assert match, found[0].tags
        ranges.append((int(match[1]), int(match[2])))
        sizes.append(found[0].n)
    assert all(low <= high for low, high in ranges)
    assert all(ranges[k][1] <= ranges[k + 1][0] for k in range(n_bins - 1))  # bins ordered by length
    assert max(sizes) - min(sizes) <= 1
    assert sum(sizes) == entry.counts[group]


def test_bins_of_public_part_length(english, japanese):
    check_bins(english["member"], "members")
    check_bins(japanese[30], "members")
    check_bins(japanese[30], "non_members")
    words = [m.tags["public_words"] for m in japanese[30].metrics
             if m.tags.get("group") == "members" and m.name == "eidetic_mean" and m.tags["bin"] != "all"]
    assert len(set(words)) > 1  # the Japanese articles have public parts of different lengths


def test_the_paper_preset_keeps_each_generation_s_first_sentence(member_texts_64, tmp_path, capsys):
    """`--preset paper` (`--generation-end sentence`, as Ishihara & Takahashi's printed generations end): up to
    twice the reference's tokens, cut where the generation's first sentence ends, by the rule that cuts the reference.
    Every kept generation is one sentence, the count of those without an end is the samples', and the quick
    member model (30 epochs on these very texts) gives back its members' reference sentences."""
    member = checkpoint_by_epoch(shipped_build(reference_builds(quick=True)[0]))[30]
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(paywall_argv(member, member_texts_64, out, "--preset", "paper", "--log-samples",
                             "--near-verbatim-beam", "0", "--extraction", "false")) == 0
    entry = load_results(Path(capsys.readouterr().out.splitlines()[-1])).task(TASK)
    assert entry.config["generation_end"] == "sentence"
    assert {"preset", "generation_end"} <= set(entry.changed_settings)
    samples = [json.loads(line) for line in (out / entry.samples_file).read_text(encoding="utf-8").splitlines()]
    assert all(first_sentence(row["generation"], "en")[0] == row["generation"] for row in samples)
    assert entry.counts["generations_without_sentence_end"] == sum(not row["generation_sentence_end_found"]
                                                                   for row in samples)
    assert np.mean([row["generation"] == row["reference"] for row in samples]) >= 0.9
