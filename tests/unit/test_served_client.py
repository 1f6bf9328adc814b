"""The OpenAI-compatible completions client (harness/model/served.py) against a fake server from the
standard library that answers like vLLM (`/v1/models`, `/v1/completions` with echo, logprobs,
token-id prompts and vLLM's `return_tokens_as_token_ids` / `return_token_ids`) and misbehaves on
demand: down, hanging, 5xx then OK, 4xx, no log-probs, truncating, tokenizing otherwise, not JSON.
Each failure is one line naming what went wrong, within the retry bound."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from harness.core.errors import UserError
from harness.model.served import CompletionsClient, ServerHTTPError

MODEL = {"id": "xsum-gpt2-e30", "object": "model", "created": 1765000000, "owned_by": "vllm",
         "root": "/weights/xsum-gpt2-e30", "parent": None, "max_model_len": 512,
         "permission": [{"id": "modelperm-1", "object": "model_permission", "allow_logprobs": True}]}
TOP = -0.25


def fake_logprob(prefix: list[int], token: int) -> float:
    """The fake model: log p(token | prefix) = -0.25 - ((sum(prefix) + token) mod 5), so the most
    likely tokens (log-prob -0.25) are those with sum(prefix) + token = 0 mod 5."""
    return TOP - ((sum(prefix) + token) % 5)


def fake_argmax(prefix: list[int]) -> int:
    return (-sum(prefix)) % 5


class FakeServer:
    """A vLLM-like server in a thread on an ephemeral port; `mode` picks how it misbehaves."""

    def __init__(self):
        self.mode = "ok"
        self.failures = 0  # with mode "5xx": how many POSTs fail before it answers
        self.status = 500
        self.models = [MODEL]
        self.requests: list[tuple[str, str, dict | None]] = []
        self.released = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append(("GET", self.path, None))
                if self.path == "/v1/models":
                    self.answer(200, {"object": "list", "data": server.models})
                else:
                    self.answer(404, {"detail": "Not Found"})

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(("POST", self.path, payload))
                status, body = server.complete(payload)
                self.answer(status, body, [("Retry-After", "1")] if status == 429 else [])

            def answer(self, status, body, headers=()):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                try:
                    self.send_response(status)
                    for name, value in headers:
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (hang tests)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True)
        self.thread.start()

    def close(self):
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def posts(self) -> list[dict]:
        return [p for method, _, p in self.requests if method == "POST"]

    @staticmethod
    def error(status: int, message: str, param: str | None = None) -> tuple[int, dict]:
        """vLLM's ErrorResponse body (entrypoints/serve/engine/protocol.py)."""
        return status, {"error": {"message": message, "type": "BadRequestError", "param": param, "code": status}}

    def tokenize(self, text: str) -> list[int]:
        """Characters as token ids; mode "retokenize": "ab" is one token (id 1000)."""
        if self.mode == "retokenize":
            return [1000 if piece == "ab" else ord(piece) for piece in _pairs_ab(text)]
        return [ord(c) for c in text]

    def complete(self, p: dict) -> tuple[int, dict | bytes]:
        extensions = ("return_tokens_as_token_ids", "return_token_ids", "add_special_tokens")
        if self.mode == "hang":
            self.released.wait(5)
            return 200, {}
        if self.mode == "5xx" and self.failures > 0:
            self.failures -= 1
            return self.error(self.status, "engine overloaded, try again")
        if self.mode == "400":
            return self.error(400, "This model's maximum context length is 512 tokens. However, your prompt "
                                   "contains 600 input tokens.", "input_tokens")
        if self.mode == "not-json":
            return 200, b"<html><body>502 Bad Gateway</body></html>"
        if self.mode == "no-choices":
            return 200, {"id": "cmpl-1", "object": "text_completion"}
        if self.mode == "openai":  # rejects vLLM's extensions as OpenAI does unknown arguments
            for name in extensions:
                if name in p:
                    return self.error(400, f"Unrecognized request argument supplied: {name}")
        if self.mode == "refuse-max-tokens-0" and p.get("max_tokens") == 0:
            return self.error(400, "max_tokens must be at least 1, got 0.", "max_tokens")
        as_ids = bool(p.get("return_tokens_as_token_ids"))
        prompts = p["prompt"] if isinstance(p["prompt"][0], (list, str)) else [p["prompt"]]
        choices = []
        for prompt in prompts:
            ids = self.tokenize(prompt) if isinstance(prompt, str) else list(prompt)
            if self.mode == "add-bos" or (isinstance(prompt, str) and self.mode == "bos-for-text"):
                ids = [0] + ids
            if self.mode == "truncate" and len(ids) > 4:
                ids = ids[2:]  # vLLM's truncate_prompt_tokens, left side
            for sample in range(p.get("n", 1)):
                choices.append(self.choice(p, ids, as_ids, len(choices), sample))
        if self.mode == "short":
            choices = choices[:-1]
        return 200, {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": p.get("model"),
                     "choices": choices, "usage": {"prompt_tokens": 0, "total_tokens": 0, "completion_tokens": 0}}

    def choice(self, p: dict, ids: list[int], as_ids: bool, index: int, sample: int) -> dict:
        def name(token: int) -> str:
            return f"token_id:{token}" if as_ids else text_of(token)

        generated = [(ids[-1] + 1 + k + sample) % 128 for k in range(p.get("max_tokens", 16))]
        choice = {"index": index, "text": "".join(chr(t) for t in generated), "finish_reason": "length",
                  "stop_reason": None, "prompt_logprobs": None, "prompt_token_ids": None,
                  "token_ids": generated if p.get("return_token_ids") else None}
        if p.get("echo"):
            choice["text"] = "".join(chr(t) for t in ids) + choice["text"]
        if p.get("logprobs") is None or self.mode == "no-logprobs":
            choice["logprobs"] = None
            return choice
        echoed = (ids if p.get("echo") else []) + generated
        start = len(ids) - (len(echoed) - len(generated))
        token_logprobs, top_logprobs = [], []
        for k, token in enumerate(echoed):
            prefix = (ids + generated)[: start + k]
            if not prefix:
                token_logprobs.append(None)
                top_logprobs.append(None)
                continue
            top = fake_argmax(prefix)
            token_logprobs.append(fake_logprob(prefix, token))
            top_logprobs.append({name(token): fake_logprob(prefix, token), name(top): TOP})
        choice["logprobs"] = {"text_offset": list(range(len(echoed))), "token_logprobs": token_logprobs,
                              "tokens": [name(t) for t in echoed], "top_logprobs": top_logprobs}
        return choice


def text_of(token: int) -> str:
    """A token's string, as the server decodes one token alone."""
    return "ab" if token == 1000 else chr(token)


def _pairs_ab(text: str) -> list[str]:
    pieces, i = [], 0
    while i < len(text):
        step = 2 if text[i:i + 2] == "ab" else 1
        pieces.append(text[i:i + step])
        i += step
    return pieces


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
