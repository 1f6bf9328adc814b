"""paywall_memorization's extraction risk as a probability (issue 52), on the tiny random GPT-2: the
metrics against the per-text p_z in the samples, greedy agreement with the task's own greedy
generations, the near-verbatim bound above the verbatim p_z, p_z = 0 (-inf) in the results file,
and bad settings through the command line.

The data: prompts from TINY_TEXTS whose private part is the tiny model's own greedy continuation
(members: greedy decoding reproduces most of them) or another text's words (non-members)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY_TEXTS, assert_user_error, write_jsonl

from harness.app.cli import main
from harness.core.results import load_results
from harness.metrics.extraction import discoverable
from harness.model.loading import ModelSpec, load
from harness.scoring.batching import model_context
from harness.scoring.extraction import SamplingScheme
from harness.scoring.generation import greedy_continuations
from tasks.paywall_memorization.data import load_paywall_data
from harness.metrics.extraction_report import LOG10_PZ_FLOOR
from tasks.paywall_memorization.task import extraction_targets, target_log_pz

TASK = "paywall_memorization"
ATTEMPTS = ("1", "10", "100", "1000", "10000")


@pytest.fixture(scope="module")
def tiny_model(tiny_lm):
    return load(ModelSpec(str(tiny_lm), device="cpu"))


@pytest.fixture(scope="module")
def articles(tiny_model, tmp_path_factory) -> Path:
    """12 members (private part = the model's greedy continuation of 6 tokens) and 8 non-members."""
    words = " ".join(TINY_TEXTS).split()
    prompts = [" ".join(words[5 * k: 5 * k + 4 + k % 3]) for k in range(20)]
    greedy, _ = greedy_continuations(tiny_model.model, tiny_model.tokenizer, prompts, [6] * len(prompts),
                                     batch_size=8, progress=False)
    rows = []
    for k, (prompt, text) in enumerate(zip(prompts, greedy)):
        if k < 12 and text.strip():
            rows.append({"id": f"m{k}", "public": prompt, "private": text, "label": 1})
        else:
            rows.append({"id": f"n{k}", "public": prompt, "private": " " + " ".join(words[7 * k + 3: 7 * k + 8]),
                         "label": 0})
    return write_jsonl(tmp_path_factory.mktemp("paywall-x") / "articles.jsonl", rows)


def run_cli(tiny_lm, data: Path, out: Path, *extra: str):
    argv = ["evaluate", "--model", str(tiny_lm), "--tasks", TASK, "--data", str(data), "--output-path", str(out),
            "--device", "cpu", "--no-cache", "--log-samples", *extra]
    assert main(argv) == 0
    [path] = [p for p in out.glob("*.json")]
    entry = load_results(path).task(TASK)  # parse_results: no Infinity or NaN anywhere
    samples = {row["id"]: row for row in
               map(json.loads, (out / entry.samples_file).read_text(encoding="utf-8").splitlines())}
    return path, entry, samples


def metric(entry, name: str, **tags) -> float:
    [value] = [m.value for m in entry.metrics if m.name == name and all(m.tags.get(k) == v for k, v in tags.items())
               and set(m.tags) == {"group", "bin", *tags}]
    return value


def natural(value: float | None) -> float:
    return -math.inf if value is None else value * math.log(10.0)


@pytest.fixture(scope="module")
def default_run(tiny_lm, articles, tmp_path_factory):
    return run_cli(tiny_lm, articles, tmp_path_factory.mktemp("default"), "--near-verbatim-beam", "4")


def test_metrics_are_those_of_the_samples_p_z(default_run):
    """Default settings (T = 1, K = 40, n = 1..10^4, p = 0.5), the beam on (B = 4, tau = 0.9; narrow, for
    time): every group metric is
    recomputed from the per-text log10 p_z of the samples."""
    _, entry, samples = default_run
    assert entry.info["extraction"]["scheme"] == {"temperature": 1.0, "top_k": 40, "top_p": None, "greedy": False}
    assert entry.info["near_verbatim"]["n_bound_below_pz"] == 0
    for group, label in (("members", 1), ("non_members", 0)):
        log_pz = np.array([natural(s["log10_pz"]) for s in samples.values() if s["label"] == label])
        shares = [metric(entry, "extractable", group=group, attempts=n, level="0.5") for n in ATTEMPTS]
        assert shares == [float(np.mean(discoverable(log_pz, int(n), 0.5))) for n in ATTEMPTS]
        assert shares == sorted(shares)  # more draws, more extracted
        floored = np.maximum(log_pz / math.log(10.0), LOG10_PZ_FLOOR)
        # empirical quantiles, no interpolation: every one is some target's (floored) log10 p_z
        assert metric(entry, "log10_pz_median", group=group) == pytest.approx(
            float(np.sort(floored)[(len(floored) - 1) // 2]))
        for q in ("0.1", "0.25", "0.75", "0.9"):
            assert metric(entry, "log10_pz_quantile", group=group, quantile=q) in floored.tolist()
        assert metric(entry, "pz_zero_share", group=group) == float(np.mean(np.isneginf(log_pz)))
        assert metric(entry, "pz_mean", group=group) == pytest.approx(float(np.mean(np.exp(log_pz))))
        near = [metric(entry, "near_verbatim_extractable", group=group, attempts=n, level="0.5", threshold="0.9")
                for n in ATTEMPTS]
        assert all(a >= b for a, b in zip(near, shares))
    gap = metric(entry, "extractable_gap", group="members_minus_non_members", attempts="100", level="0.5")
    assert gap == pytest.approx(metric(entry, "extractable", group="members", attempts="100", level="0.5")
                                - metric(entry, "extractable", group="non_members", attempts="100", level="0.5"))
    # the members are the model's own greedy continuations: far likelier under sampling than the others
    assert metric(entry, "log10_pz_median_gap", group="members_minus_non_members") > 1.0


def test_near_verbatim_bound_is_at_least_the_verbatim_p_z(default_run):
    _, _, samples = default_run
    grew = False
    for s in samples.values():
        pz, bound = natural(s["log10_pz"]), natural(s["log10_near_verbatim"])
        assert bound >= pz - 1e-4, s
        grew |= bound > pz + 1e-3
    assert grew


def test_near_verbatim_on_the_members_only_gives_their_bounds_and_no_gap(tiny_lm, articles, tmp_path, default_run):
    """`--near-verbatim-groups members` (what `membench run` sets, issue 61): the members' bounds and metrics are
    those of the run over every article, the non-members get none, and there is no near-verbatim gap."""
    _, entry, samples = run_cli(tiny_lm, articles, tmp_path / "out", "--near-verbatim-beam", "4",
                                "--near-verbatim-groups", "members")
    _, every, every_samples = default_run
    assert entry.info["near_verbatim"]["groups"] == "members" and entry.info["near_verbatim"]["articles"] == 12
    assert {k: s["log10_near_verbatim"] for k, s in samples.items() if "log10_near_verbatim" in s} == {
        k: s["log10_near_verbatim"] for k, s in every_samples.items() if s["label"] == 1}
    near = {(m.name, tuple(sorted(m.tags.items())), m.value) for m in entry.metrics if m.name.startswith("near_")}
    assert near and near == {(m.name, tuple(sorted(m.tags.items())), m.value) for m in every.metrics
                             if m.name.startswith("near_") and m.tags["group"] == "members"}


def test_zero_p_z_is_none_in_the_samples_and_floored_in_the_summaries(tiny_lm, articles, tmp_path):
    """Top-k 1 samples only the argmax: most non-members have p_z = 0 (log p_z = -inf). The file still
    loads (`load_results`), the samples hold None, the medians the documented floor."""
    path, entry, samples = run_cli(tiny_lm, articles, tmp_path / "out", "--extraction-top-k", "1")
    text = path.read_text(encoding="utf-8")
    assert "Infinity" not in text and "NaN" not in text
    others = [s for s in samples.values() if s["label"] == 0]
    zero = sum(s["log10_pz"] is None for s in others)
    assert zero > len(others) / 2
    assert metric(entry, "pz_zero_share", group="non_members") == zero / len(others)
    assert metric(entry, "log10_pz_median", group="non_members") == LOG10_PZ_FLOOR
    assert all(m.value is not None and math.isfinite(m.value) for m in entry.metrics)
    # the near-verbatim search is off by default
    assert "near_verbatim" not in entry.info and not any(m.name.startswith("near_verbatim") for m in entry.metrics)
    # top-k 1 is greedy: p_z is 1 or 0, never between
    assert {s["log10_pz"] for s in samples.values()} <= {0.0, None}


def test_greedy_p_z_is_one_exactly_where_the_greedy_generation_is_the_reference(tiny_model, tiny_lm, articles,
                                                                                default_run):
    """The convention: the target is the reference's tokens (with the private part's leading whitespace)
    after the prompt tokens greedy generation starts from, cut to its budget. Greedy p_z is 1 exactly
    where greedy decoding chooses those tokens; then the task's generation (decoded, leading whitespace
    removed) is the reference: eidetic = its length, approximate = 1. Text that matches with other
    tokens (or a generation that stops at EOS) has p_z = 0."""
    _, _, samples = default_run
    examples = load_paywall_data(str(articles), "en", 200, 0, None).examples
    values, capped = target_log_pz(tiny_model, examples, SamplingScheme(greedy=True), batch_size=4, progress=False)
    assert set(values.tolist()) <= {0.0, -math.inf}
    prompts, targets, capped_too = extraction_targets(tiny_model.tokenizer, examples, model_context(tiny_model.model))
    assert capped == capped_too < len(examples) / 4  # a reference past the 16-token budget (C/2) is cut
    tokenizer = tiny_model.tokenizer
    for example, value, prompt, target in zip(examples, values, prompts, targets):
        whole = tokenizer(example.continuation_prefix + example.reference, add_special_tokens=False)["input_ids"]
        if len(whole) > len(target):  # capped: p_z is the budget's tokens', the text only covers part
            assert example.label == 0
            continue
        with torch.no_grad():
            row = torch.tensor([prompt])
            chosen = tiny_model.model.generate(input_ids=row, attention_mask=torch.ones_like(row), do_sample=False,
                                               max_new_tokens=len(target), pad_token_id=0)[0, len(prompt):].tolist()
        assert (value == 0.0) == (chosen == target), example.article_id
        sample = samples[example.article_id]
        if value == 0.0:
            assert sample["generation"] == example.reference
            assert sample["eidetic"] == len(example.reference) and sample["approximate"] == 1.0
        if sample["generation"] != example.reference:
            assert value == -math.inf
    reproduced = [e.label for e, v in zip(examples, values) if v == 0.0]
    assert reproduced.count(1) >= 4 and reproduced.count(0) == 0, reproduced


def test_extraction_off_leaves_the_greedy_metrics(tiny_lm, articles, tmp_path, default_run):
    _, entry, samples = run_cli(tiny_lm, articles, tmp_path / "out", "--extraction", "false", "--near-verbatim-beam",
                                "20")  # the beam runs only with extraction
    _, on, _ = default_run
    greedy = {(m.name, tuple(sorted(m.tags.items()))): m.value for m in on.metrics
              if m.name in ("eidetic_max", "eidetic_mean", "approximate_mean", "approximate_median")}
    assert {(m.name, tuple(sorted(m.tags.items()))): m.value for m in entry.metrics} == greedy
    assert "extraction" not in entry.info and all("log10_pz" not in s for s in samples.values())


GOOD_ROW = {"id": "ok", "public": "The quick brown fox jumps", "private": " over the lazy dog."}


@pytest.mark.parametrize("flag, value, needle", [
    ("--extraction-temperature", "0", "temperature must be > 0"),
    ("--extraction-temperature", "-1", "temperature must be > 0"),
    ("--extraction-top-k", "0", "top_k must be an integer >= 1"),
    ("--extraction-top-p", "0", "top_p must lie in (0, 1]"),
    ("--extraction-top-p", "1.5", "top_p must lie in (0, 1]"),
    ("--near-verbatim-threshold", "1.1", "threshold must lie in [0, 1]"),
    ("--near-verbatim-threshold", "-0.1", "threshold must lie in [0, 1]"),
    ("--extraction-level", "0", "level p must lie in (0, 1]"),
    ("--extraction-attempts", "10,0", "attempts n must be positive integers"),
    ("--near-verbatim-beam", "-1", "greater than or equal to 0"),
], ids=["T0", "T-neg", "K0", "P0", "P-big", "tau-big", "tau-neg", "level0", "n0", "beam-neg"])
def test_bad_extraction_settings(capsys, tmp_path, tiny_lm, flag, value, needle):
    data = write_jsonl(tmp_path / "articles.jsonl", [GOOD_ROW])
    out = tmp_path / "out"
    argv = ["evaluate", "--model", str(tiny_lm), "--tasks", TASK, "--data", str(data), "--output-path", str(out),
            "--device", "cpu", "--no-cache", flag, value]
    assert_user_error(capsys, argv, out, flag, needle)


def test_top_k_and_top_p_can_be_turned_off(tiny_lm, articles, tmp_path):
    _, entry, _ = run_cli(tiny_lm, articles, tmp_path / "out", "--extraction-top-k", "none", "--extraction-top-p",
                          "0.9", "--extraction-attempts", "1,100")
    assert entry.info["extraction"]["scheme"] == {"temperature": 1.0, "top_k": None, "top_p": 0.9, "greedy": False}
    assert {m.tags["attempts"] for m in entry.metrics if m.name == "extractable"} == {"1", "100"}
