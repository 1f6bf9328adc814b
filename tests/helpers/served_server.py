"""A fake OpenAI-compatible completions server that answers like vLLM (`/v1/models`, `/v1/completions`
with echo, logprobs, token-id prompts and vLLM's `return_tokens_as_token_ids` / `return_token_ids`), in
a thread on an ephemeral port, and misbehaves on demand (`FakeServer.mode`). Its model is a formula
(`fake_logprob`) unless a subclass overrides `FakeServer.scores` (tests/unit/test_served_scoring.py puts
a transformers model there)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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

    def scores(self, sequence: list[int]) -> list[tuple[float, int, float]]:
        """The model: per token t >= 1 of `sequence`, (log p(token_t | tokens_<t), the most likely token
        there, its log-prob)."""
        return [(fake_logprob(sequence[:t], sequence[t]), fake_argmax(sequence[:t]), TOP)
                for t in range(1, len(sequence))]

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
        scores = self.scores(ids + generated)
        token_logprobs, top_logprobs = [], []
        for k, token in enumerate(echoed):
            if start + k == 0:
                token_logprobs.append(None)
                top_logprobs.append(None)
                continue
            value, top, top_value = scores[start + k - 1]
            token_logprobs.append(value)
            top_logprobs.append({name(token): value, name(top): top_value})
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
