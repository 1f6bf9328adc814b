"""`--batch-size auto` and batches that fit the device (`harness.scoring.fitting`): a batch that runs out of
memory is halved and the values stay those of the plain loop; the largest batch each step ran is recorded;
the per-text gradients of `gradient_norms` batch as far as an accelerator's memory allows, with values equal
to MIMIR's loop; and on a CPU `auto` keeps the sizes the board was scored with."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.app.cli import main
from harness.core.results import load_results
from harness.interop.lm_eval_import import lm_eval_batch_size
from harness.model.loading import ModelSpec, load
from harness.run.runner import EvaluateOptions, starting_batch_size
from harness.scoring import budgets, distributed, fitting, gradients
from harness.scoring.batching import model_context
from harness.scoring.causal import encode_with_bos
from harness.scoring.gradients import gradient_batch, gradient_norms

TEXTS = ["the quick brown fox jumps over the lazy dog by the river bank",
         "members of parliament debated the budget late into the night",
         "a journey of a thousand miles begins with a single step they say",
         "zebra crossings are striped", "one more text to score here", "and the last one"]


def out_of_memory() -> torch.OutOfMemoryError:
    return torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def scorer_fitting(limit: int, calls: list[list[int]]):
    """A score_batch that runs out of memory on batches larger than `limit` (index -> 10 * index)."""
    def score(batch: list[int]) -> list[int]:
        calls.append(list(batch))
        if len(batch) > limit:
            raise out_of_memory()
        return [10 * i for i in batch]
    return score


def test_a_batch_that_runs_out_of_memory_is_halved_and_the_values_kept(capsys):
    fitting.reset()
    calls: list[list[int]] = []
    done = distributed.run_batches([[7, 6, 5, 4, 3, 2, 1, 0], [8, 9, 10]], scorer_fitting(3, calls), "scoring",
                                   progress=False)
    assert done == {i: 10 * i for i in range(11)}
    # 8 -> 4 -> 2 fit; the next batch starts at the size that fitted, in order
    assert calls == [[7, 6, 5, 4, 3, 2, 1, 0], [7, 6, 5, 4], [7, 6], [5, 4], [3, 2], [1, 0], [8, 9], [10]]
    assert fitting.step_sizes() == {"scoring": 2}
    err = capsys.readouterr().err
    assert "membench: warning: scoring: a batch of 8 ran out of memory; going on with batches of 4" in err
    assert "a batch of 4 ran out of memory; going on with batches of 2" in err


def test_batches_that_fit_run_as_planned_and_the_largest_is_recorded():
    fitting.reset()
    calls: list[list[int]] = []
    distributed.run_batches([[0, 1, 2], [3]], scorer_fitting(99, calls), "generating", progress=False)
    distributed.run_batches([[4, 5, 6, 7, 8]], scorer_fitting(99, calls), "scoring", progress=False)
    assert calls == [[0, 1, 2], [3], [4, 5, 6, 7, 8]]
    assert fitting.step_sizes() == {"generating": 3, "scoring": 5}
    fitting.reset()
    assert fitting.step_sizes() == {}


def test_other_errors_and_a_batch_of_one_out_of_memory_are_raised():
    def broken(batch):
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        distributed.run_batches([[0, 1]], broken, "x", progress=False)
    with pytest.raises(torch.OutOfMemoryError):
        distributed.run_batches([[0, 1, 2, 3]], scorer_fitting(0, []), "x", progress=False)


@pytest.fixture(scope="module")
def lm(tiny_lm):
    return load(ModelSpec(model=str(tiny_lm), device="cpu"))


def test_gradient_norms_halve_on_out_of_memory_and_stay_mimirs(lm, monkeypatch, caplog):
    """A batch of per-text gradients that does not fit is halved (not sent to the per-text fallback), and
    the norms are those of batches that fit: equal to MIMIR's loop (`looped_norm`) within 1e-5."""
    plain = gradient_norms(lm.model, lm.tokenizer, TEXTS, p=math.inf, batch_size=6)
    real = gradients.batched_norms

    def fits_three(model, rows, *args):
        if len(rows) > 3:
            raise out_of_memory()
        return real(model, rows, *args)

    monkeypatch.setattr(gradients, "batched_norms", fits_three)
    fitting.reset()
    halved = gradient_norms(lm.model, lm.tokenizer, TEXTS, p=math.inf, batch_size=6)
    assert fitting.step_sizes() == {"gradient norms": 3}
    assert "one text at a time" not in caplog.text
    np.testing.assert_allclose(halved, plain, rtol=1e-5)
    encoded, _ = encode_with_bos(lm.tokenizer, TEXTS)
    mimir = [float(gradients.looped_norm(lm.model, ids[:model_context(lm.model)], math.inf)) for ids in encoded]
    np.testing.assert_allclose(halved, mimir, rtol=1e-5)


def test_gradient_batches_follow_the_accelerators_free_memory(lm, monkeypatch):
    """On a CPU: `GRADIENT_BUDGET` numbers (the tiny model: as many texts as asked, up to 16). On an accelerator:
    60% of its free memory over a text's two copies of the parameters and three float32 logits tensors."""
    n_params = sum(p.numel() for p in lm.model.parameters())
    vocabulary = lm.model.config.vocab_size
    assert gradient_batch(lm.model, 30, 16) == min(16, gradients.GRADIENT_BUDGET // n_params)
    per_text = 2 * n_params * 4 + 3 * 4 * 30 * vocabulary
    monkeypatch.setattr(budgets, "on_accelerator", lambda device: True)
    monkeypatch.setattr(budgets, "free_bytes", lambda device: int(10.5 * per_text / 0.6))
    assert gradient_batch(lm.model, 30, 256) == 10
    assert gradient_batch(lm.model, 30, 4) == 4  # never above the batch size asked for
    monkeypatch.setattr(budgets, "free_bytes", lambda device: 0)
    assert gradient_batch(lm.model, 30, 256) == 1


def test_auto_starts_at_the_cap_on_an_accelerator_and_keeps_the_cpu_sizes():
    auto = EvaluateOptions(batch_size="auto", max_batch_size=128, cpu_batch_size=64)
    assert starting_batch_size(auto, "cuda:0") == 128
    assert starting_batch_size(auto, "cpu") == 64
    assert starting_batch_size(EvaluateOptions(batch_size=8), "cuda") == 8


def test_lm_eval_batch_sizes_read_as_membench_records_them():
    assert [lm_eval_batch_size(x) for x in ("8", "auto", "auto:4", "", "0")] == [8, "auto", "auto", 1, 1]


def test_batch_size_auto_on_a_cpu_scores_what_16_scores_and_is_recorded(capsys, tmp_path, tiny_lm):
    """`membench evaluate --batch-size auto` on a CPU: the numbers of `--batch-size 16`, the results file
    records `auto` with its cap and each step's batch; a bad value is one line, exit 2."""
    data = tmp_path / "articles.jsonl"
    rows = [{"id": str(i), "public": f"Story {i}: the quick brown fox jumps over the lazy dog",
             "private": f" near river {i}. It was late.", "label": i % 2} for i in range(20)]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    files = {}
    for batch in ("16", "auto"):
        out = tmp_path / batch
        argv = ["evaluate", "--model", str(tiny_lm), "--tasks", "paywall_memorization", "--data", str(data),
                "--output-path", str(out), "--device", "cpu", "--no-cache", "--batch-size", batch]
        assert main(argv) == 0
        files[batch] = load_results(Path(capsys.readouterr().out.splitlines()[-1]))
    fixed, auto = files["16"], files["auto"]
    assert fixed.run.batch_size == 16 and fixed.run.max_batch_size is None
    assert auto.run.batch_size == "auto" and auto.run.max_batch_size == 256
    entry, fixed_entry = auto.task("paywall_memorization"), fixed.task("paywall_memorization")
    assert set(entry.batch_sizes) == {"generating", "extraction"} and entry.batch_sizes == fixed_entry.batch_sizes
    assert [m.value for m in entry.metrics] == [m.value for m in fixed_entry.metrics]
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", "--model", str(tiny_lm), "--tasks", "paywall_memorization", "--batch-size", "big"])
    assert exit_info.value.code == 2
    assert "--batch-size: expected a positive integer, got 'big'" in capsys.readouterr().err
