"""The OpenAI-compatible completions client (harness/model/served.py) against a fake server from the
standard library that answers like vLLM (tests/helpers/served_server.py) and misbehaves on
demand: down, hanging, 5xx then OK, 4xx, no log-probs, truncating, tokenizing otherwise, not JSON.
Each failure is one line naming what went wrong, within the retry bound."""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from harness.core.errors import UserError
from harness.model.served import CompletionsClient, ServerHTTPError
from tests.helpers.served_server import MODEL, TOP, FakeServer, fake_logprob


class CharTokenizer:
    """A local tokenizer like the fake server's: one token per character, id = ord."""

    bos_token_id = None

    def __call__(self, texts, add_special_tokens=True):
        assert add_special_tokens is False
        return {"input_ids": [[ord(c) for c in text] for text in texts]}

    def decode(self, ids):
        return "".join(chr(i) for i in ids)


@pytest.fixture
def server():
    fake = FakeServer()
    yield fake
    fake.close()


def client(url: str, **options) -> CompletionsClient:
    settings = {"timeout_s": 2.0, "max_retries": 2, "backoff_s": 0.01, "backoff_cap_s": 0.05, "batch_size": 2}
    return CompletionsClient(url, **{**settings, **options})


def user_error(call, *needles: str) -> str:
    """Run `call`; check it raises a one-line UserError holding every needle; return the line."""
    with pytest.raises(UserError) as caught:
        call()
    line = str(caught.value)
    assert "\n" not in line, line
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    return line


PROMPTS = [[7, 3, 9, 12], [5, 5], [1, 2, 3, 4, 5, 6], [40], [8, 0, 2]]


def expected_scores(prompt: list[int]) -> tuple[list[float], list[bool]]:
    logprobs = [fake_logprob(prompt[:t], prompt[t]) for t in range(1, len(prompt))]
    hits = [(sum(prompt[:t]) + prompt[t]) % 5 == 0 for t in range(1, len(prompt))]  # ties count as hits
    return logprobs, hits


def assert_scores(scores, prompts=PROMPTS):
    assert len(scores) == len(prompts)
    for prompt, score in zip(prompts, scores):
        logprobs, hits = expected_scores(prompt)
        np.testing.assert_array_equal(score.token_ids, prompt[1:])
        np.testing.assert_allclose(score.logprobs, logprobs)
        np.testing.assert_allclose(score.top_logprobs, [TOP] * len(logprobs))
        assert score.argmax_hits().tolist() == hits


# -- the happy path ---------------------------------------------------------------------------------

def test_served_models_record_identity_and_the_only_model_is_taken(server):
    c = client(server.url)
    (model,) = c.served_models()
    assert model.as_dict() == {"id": "xsum-gpt2-e30", "owned_by": "vllm", "root": "/weights/xsum-gpt2-e30",
                               "parent": None, "max_model_len": 512}
    assert c.model == "xsum-gpt2-e30"


def test_several_served_models_are_refused_without_a_name(server):
    server.models = [MODEL, {**MODEL, "id": "my-lora", "parent": "xsum-gpt2-e30"}]
    user_error(lambda: client(server.url).model, "serves 2 models", "xsum-gpt2-e30, my-lora", "name the one")
    assert client(server.url, model="my-lora").model == "my-lora"


def test_prompt_logprobs_in_batches_with_vllm_token_ids(server):
    # lm-eval's base_url form (the endpoint itself) is accepted too
    scores = client(server.url + "/completions").prompt_logprobs(PROMPTS)
    assert_scores(scores)
    assert any(scores[2].argmax_hits()) and not all(scores[2].argmax_hits())  # the check can fail both ways
    posts = server.posts()
    assert [len(p["prompt"]) for p in posts] == [2, 2, 1]  # batch_size 2
    assert posts[0]["prompt"] == PROMPTS[:2]
    assert {k: posts[0][k] for k in ("model", "echo", "logprobs", "max_tokens", "temperature",
                                     "return_tokens_as_token_ids")} == {
        "model": "xsum-gpt2-e30", "echo": True, "logprobs": 1, "max_tokens": 0, "temperature": 0.0,
        "return_tokens_as_token_ids": True}


def test_a_server_refusing_max_tokens_0_is_asked_for_one_token_which_is_dropped(server):
    server.mode = "refuse-max-tokens-0"
    c = client(server.url)
    assert_scores(c.prompt_logprobs(PROMPTS))
    # refused once, then max_tokens 1 for every request
    assert [p["max_tokens"] for p in server.posts()] == [0, 1, 1, 1]


def test_an_openai_server_without_vllm_extensions_is_read_by_token_strings(server):
    server.mode = "openai"
    c = client(server.url)
    assert_scores(c.prompt_logprobs(PROMPTS))
    posts = server.posts()
    assert "return_tokens_as_token_ids" in posts[0] and all("return_tokens_as_token_ids" not in p for p in posts[1:])
    assert len(posts) == 4  # the one rejected request, then the three batches


def test_generate_greedy_and_sampled_with_token_ids(server):
    c = client(server.url)
    out = c.generate([[1, 2], [10], [20, 21, 22]], max_tokens=[3, 2, 3])
    assert [[g.token_ids for g in gens] for gens in out] == [[[3, 4, 5]], [[11, 12]], [[23, 24, 25]]]
    assert out[0][0].text == "\x03\x04\x05" and out[0][0].finish_reason == "length"
    posts = server.posts()
    assert [(p["max_tokens"], p["prompt"]) for p in posts] == [(2, [[10]]), (3, [[1, 2], [20, 21, 22]])]
    assert posts[0]["temperature"] == 0.0 and "seed" not in posts[0] and posts[0]["return_token_ids"] is True

    sampled = c.generate([[1], [2]], max_tokens=2, temperature=1.0, seed=7, n=2, stop=["\n"])
    assert [[g.token_ids for g in gens] for gens in sampled] == [[[2, 3], [3, 4]], [[3, 4], [4, 5]]]
    assert {k: server.posts()[-1][k] for k in ("n", "seed", "stop", "temperature")} == {
        "n": 2, "seed": 7, "stop": ["\n"], "temperature": 1.0}


def test_concurrent_requests_give_what_one_at_a_time_gives(server):
    c = client(server.url, num_concurrent=3)
    assert_scores(c.prompt_logprobs(PROMPTS))
    assert sorted(len(p["prompt"]) for p in server.posts()) == [1, 2, 2]
    prompts, limits = [[1, 2], [10], [20, 21, 22], [30], [5, 6]], [3, 2, 3, 2, 3]
    assert c.generate(prompts, limits) == client(server.url).generate(prompts, limits)
    server.mode = "no-logprobs"  # a failure in one thread is the call's
    user_error(lambda: c.prompt_logprobs(PROMPTS), "no log-probs")


def test_generate_without_token_ids_from_a_plain_server(server):
    server.mode = "openai"
    (gens,) = client(server.url).generate([[1, 2]], max_tokens=2)
    assert gens[0].text == "\x03\x04" and gens[0].token_ids is None


def test_check_tokenizer_agrees_by_ids_and_by_strings(server):
    texts = ["abcab", "hello"]
    client(server.url).check_tokenizer(CharTokenizer(), texts)
    assert server.posts()[0]["prompt"] == texts and server.posts()[0]["add_special_tokens"] is False
    server.mode = "openai"
    client(server.url).check_tokenizer(CharTokenizer(), texts)


def test_a_bos_the_server_puts_before_a_text_is_no_mismatch(server):
    server.mode = "bos-for-text"
    tokenizer = CharTokenizer()
    tokenizer.bos_token_id = 0
    client(server.url).check_tokenizer(tokenizer, ["hello"])
    tokenizer.bos_token_id = None
    user_error(lambda: client(server.url).check_tokenizer(tokenizer, ["hello"]), "differs at token 0")


# -- failures ----------------------------------------------------------------------------------------

def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_a_server_that_is_down_is_retried_then_refused():
    c = client(closed_port_url())
    began = time.monotonic()
    user_error(lambda: c.prompt_logprobs(PROMPTS), "cannot reach the server at http://127.0.0.1:",
               "connection refused", "(3 attempts")
    assert time.monotonic() - began < c.max_seconds()


def test_an_unknown_host_is_refused_at_once():
    c = client("http://no-such-host.invalid:8000/v1", max_retries=5, backoff_s=10, backoff_cap_s=10)
    began = time.monotonic()
    user_error(lambda: c.served_models(), "unknown host 'no-such-host.invalid'")
    assert time.monotonic() - began < 5  # not retried: five waits would take 50 s


def test_a_hanging_server_times_out_within_the_bound(server):
    server.mode = "hang"
    c = client(server.url, model="m", timeout_s=0.3, max_retries=1)
    began = time.monotonic()
    user_error(lambda: c.prompt_logprobs(PROMPTS), "did not answer within 0.3 s", "(2 attempts")
    elapsed = time.monotonic() - began
    assert 0.6 <= elapsed < c.max_seconds() + 0.5
    assert len(server.posts()) == 2


@pytest.mark.parametrize("status", [500, 503, 429])
def test_5xx_and_429_are_retried_and_then_it_works(server, status):
    server.mode, server.failures, server.status = "5xx", 2, status
    c = client(server.url, model="m", max_retries=2, backoff_s=0.01, backoff_cap_s=0.1)
    began = time.monotonic()
    assert_scores(c.prompt_logprobs(PROMPTS[:2]), PROMPTS[:2])
    elapsed = time.monotonic() - began
    assert len(server.posts()) == 3
    # waits 0.01 s and 0.02 s; a 429's Retry-After (1 s here) is waited up to the cap, 0.1 s
    assert (elapsed >= 0.2) == (status == 429) and elapsed < 0.5


def test_5xx_beyond_the_retries_shows_the_servers_message(server):
    server.mode, server.failures = "5xx", 10
    c = client(server.url, model="m", max_retries=2)
    user_error(lambda: c.prompt_logprobs(PROMPTS), "answered HTTP 500 to POST /completions",
               "engine overloaded, try again", "(3 attempts")
    assert len(server.posts()) == 3


def test_a_400_is_not_retried_and_shows_the_servers_message(server):
    server.mode = "400"
    c = client(server.url, model="m", max_retries=3)
    with pytest.raises(ServerHTTPError):
        c.prompt_logprobs(PROMPTS)
    user_error(lambda: c.prompt_logprobs(PROMPTS), "answered HTTP 400", "maximum context length is 512")
    assert len(server.posts()) == 2  # one per call: no retry


def test_a_server_without_logprobs_is_refused(server):
    server.mode = "no-logprobs"
    user_error(lambda: client(server.url).prompt_logprobs(PROMPTS), "returned no log-probs",
               "`echo` with `logprobs`")


def test_a_truncated_prompt_is_refused(server):
    server.mode = "truncate"
    user_error(lambda: client(server.url).prompt_logprobs(PROMPTS),
               "the server truncated the prompt: sent 6 tokens, got 4 back (prompt 2)")


def test_tokens_added_to_a_prompt_are_refused(server):
    server.mode = "add-bos"
    user_error(lambda: client(server.url).prompt_logprobs(PROMPTS),
               "the server added tokens to the prompt: sent 4 tokens, got 5 back (prompt 0)")


@pytest.mark.parametrize("mode", ["retokenize", "openai+retokenize"])
def test_a_server_that_tokenizes_otherwise_is_refused(server, mode):
    texts = ["hello", "xyabz"]
    c = client(server.url)
    if mode.startswith("openai"):  # compared by token strings
        server.mode = "openai"
        c.check_tokenizer(CharTokenizer(), texts)  # learns that the extensions are rejected
    server.mode = "retokenize"
    expected = "server 1000, local 97" if mode == "retokenize" else "server 'ab', local 'a'"
    user_error(lambda: c.check_tokenizer(CharTokenizer(), texts),
               "tokenizes differently", "text 1 ('xyabz')", "differs at token 2", expected)


def test_an_answer_that_is_not_json_is_refused(server):
    server.mode = "not-json"
    user_error(lambda: client(server.url, model="m").prompt_logprobs(PROMPTS), "not JSON", "502 Bad Gateway")


def test_an_answer_without_choices_is_refused(server):
    server.mode = "no-choices"
    user_error(lambda: client(server.url, model="m").generate([[1]], 2), "without `choices`")


def test_an_answer_with_too_few_choices_is_refused(server):
    server.mode = "short"
    user_error(lambda: client(server.url, model="m").generate([[1], [2]], 2, n=2),
               "answered 3 choices for 4 asked for")
