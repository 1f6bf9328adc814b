"""`membench evaluate --base-url`: a server that fails gives one `membench: error:` line, exit status 2
and no file, within the bounded time (`--timeout`, `--max-retries`); a server that works gives a results
file of identity kind `served`, with the tasks a server cannot run skipped, each with its reason.

The server is tests/helpers/served_server.py's `ModelServer` in a thread: the tiny random GPT-2 and its
tokenizer behind vLLM's answers, misbehaving on demand (`FakeServer.mode`)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import assert_user_error, save_tiny_causal_lm, write_jsonl

from harness.app.cli import main
from harness.core.results import load_results
from harness.model.loading import ModelSpec, load
from leaderboard.build import render_markdown
from leaderboard.render import SERVED_LEGEND, SERVED_MARK
from tests.helpers.served_server import ModelServer

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa".split()


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory) -> Path:
    """The tiny GPT-2 with a context of 128 tokens: the tokenizer probes must fit (`TOKENIZER_PROBES`)."""
    return save_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm-128") / "tiny-gpt2", context=128)


@pytest.fixture(scope="module")
def lm(tiny_lm):
    return load(ModelSpec(str(tiny_lm), device="cpu"))


@pytest.fixture
def server(lm):
    fake = ModelServer(lm.model, lm.tokenizer, max_model_len=128)
    yield fake
    fake.close()


@pytest.fixture
def data(tmp_path) -> Path:
    # 100 words: finetune_memorization, which reads --data too, refuses texts under 96 words
    rows = [{"id": f"t{i}", "text": " ".join(WORDS[(i + j) % len(WORDS)] for j in range(100)), "label": i % 2}
            for i in range(8)]
    return write_jsonl(tmp_path / "texts.jsonl", rows)


def argv(url: str, model, data: Path, out: Path, *extra: str) -> list[str]:
    return ["evaluate", "--base-url", url, "--model", str(model), "--tasks", "mink_membership", "--data", str(data),
            "--lengths", "4,8", "--bootstrap-resamples", "20", "--output-path", str(out), "--timeout", "2",
            "--max-retries", "1", *extra]


def test_a_served_model_is_scored_and_recorded_as_served(server, tiny_lm, data, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(argv(server.url, tiny_lm, data, out, "--tasks", "all", "--limit", "8")) == 0
    err = capsys.readouterr().err
    results = load_results(next(out.glob("*.json")))
    assert results.model.identity_kind == "served" and results.model.weights_sha256 is None
    assert results.model.details["served_model"]["id"] == "xsum-gpt2-e30" and results.model.name == "xsum-gpt2-e30"
    entries = {t.name: t for t in results.tasks}
    assert entries["mink_membership"].status == "ok"
    not_run = entries["mink_membership"].info["attacks_not_run"]
    assert {"min_k_pp", "gradnorm"} <= set(not_run) and "completions server" in not_run["min_k_pp"]
    for name in ("finetune_memorization", "probe_memorization", "weat", "privacy_extraction"):
        assert entries[name].status == "skipped" and "cannot score a served model" in entries[name].skip_reason
        assert f"{name} skipped: {name} cannot score a served model" in err  # one line each, with its reason
    path = next(out.glob("*.json"))
    assert main(["verify", str(path)]) == 0  # its numbers follow from its records
    assert_user_error(capsys, ["verify", "--model", str(tiny_lm), str(path)], None, "scored through a completions server")
    markdown, _ = render_markdown(out)  # the board marks the served row, and says why
    assert f"xsum-gpt2-e30 ({results.model.identity[:8]})" in markdown and SERVED_LEGEND in markdown
    assert markdown.count(f" {SERVED_MARK}") >= 2  # the overview's cells and the task table's row


def test_server_down(tiny_lm, data, tmp_path, capsys, server):
    url = server.url
    server.close()
    assert_user_error(capsys, argv(url, tiny_lm, data, tmp_path / "out"), tmp_path / "out", "cannot reach", "2 attempts")


def test_server_hangs_past_the_timeout(tiny_lm, data, tmp_path, capsys, server):
    server.mode = "hang"
    started = time.monotonic()
    assert_user_error(capsys, argv(server.url, tiny_lm, data, tmp_path / "out", "--max-retries", "0"),
                      tmp_path / "out", "did not answer within 2 s")
    assert time.monotonic() - started < 10


def test_server_answers_with_an_error(tiny_lm, data, tmp_path, capsys, server):
    server.mode = "5xx"
    server.failures = 10
    assert_user_error(capsys, argv(server.url, tiny_lm, data, tmp_path / "out"), tmp_path / "out", "HTTP 500",
                      "engine overloaded", "2 attempts")


def test_server_returns_no_logprobs(tiny_lm, data, tmp_path, capsys, server):
    server.mode = "no-logprobs"
    assert_user_error(capsys, argv(server.url, tiny_lm, data, tmp_path / "out"), tmp_path / "out", "no log-probs")


def test_server_tokenizes_differently(tiny_lm, data, tmp_path, capsys, server):
    server.mode = "retokenize"
    assert_user_error(capsys, argv(server.url, tiny_lm, data, tmp_path / "out"), tmp_path / "out",
                      "tokenizes differently from the local tokenizer")


def test_server_truncates_the_prompt(tiny_lm, data, tmp_path, capsys, server):
    server.mode = "truncate"
    server.truncate_over = 20  # shorter than the tokenizer probes and the texts
    assert_user_error(capsys, argv(server.url, tiny_lm, data, tmp_path / "out"), tmp_path / "out",
                      "the server truncated the prompt")


@pytest.mark.parametrize(("extra", "needle"), [
    (["--engine", "local-completions", "--base-url", ""], "needs --base-url"),
    (["--engine", "hf"], "--base-url is for --engine local-completions"),
    (["--dtype", "bfloat16"], "--dtype sets how membench loads weights"),
    (["--attacks", "loss,min_k_pp"], "min_k_pp, which a served model cannot run"),
    (["--tasks", "mink_membership,finetune_memorization"], "finetune_memorization cannot score a served model"),
    (["--tasks", "mink_membership,paywall_memorization", "--extraction-top-k", "none", "--extraction-temperature",
      "0.5"], "paywall_memorization: p_z at temperature 0.5 without top-k needs the whole next-token distribution"),
    (["--tasks", "mink_membership,paywall_memorization", "--near-verbatim-beam", "4"],
     "--near-verbatim-beam searches over the model's whole next-token distributions"),
])
def test_flags_a_served_model_cannot_take(server, tiny_lm, data, tmp_path, capsys, extra, needle):
    assert_user_error(capsys, argv(server.url, tiny_lm, data, tmp_path / "out", *extra), tmp_path / "out", needle)
