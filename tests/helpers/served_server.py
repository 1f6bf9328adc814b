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
        self.truncate_over = 4  # with mode "truncate": prompts of more tokens lose their first two
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
            if self.mode == "truncate" and len(ids) > self.truncate_over:
                ids = ids[2:]  # vLLM's truncate_prompt_tokens, left side
            limit, wanted = self.models[0].get("max_model_len"), len(ids) + max(1, p.get("max_tokens", 16))
            if limit and wanted > limit:  # vLLM 0.32's answer: room for one output token even when asked for none
                return self.error(400, f"The decoder prompt (length {len(ids)}) plus the number of requested output "
                                       f"tokens (at least 1) is longer than the maximum model length of {limit}.")
            for sample in range(p.get("n", 1)):
                choices.append(self.choice(p, ids, as_ids, len(choices), sample))
        if self.mode == "short":
            choices = choices[:-1]
        return 200, {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": p.get("model"),
                     "choices": choices, "usage": {"prompt_tokens": 0, "total_tokens": 0, "completion_tokens": 0}}

    def scores(self, sequence: list[int], top_n: int = 1) -> list[tuple[float, dict[int, float]]]:
        """The model: per token t >= 1 of `sequence`, (log p(token_t | tokens_<t), the `top_n` most likely
        tokens there with their log-probs)."""
        return [(fake_logprob(sequence[:t], sequence[t]),
                 {(fake_argmax(sequence[:t]) + 5 * j) % 128: TOP for j in range(top_n)})
                for t in range(1, len(sequence))]

    def generated(self, ids: list[int], max_tokens: int, sample: int) -> list[int]:
        """The continuation the fake model generates (not a real model's)."""
        return [(ids[-1] + 1 + k + sample) % 128 for k in range(max_tokens)]

    def choice(self, p: dict, ids: list[int], as_ids: bool, index: int, sample: int) -> dict:
        def name(token: int) -> str:
            return f"token_id:{token}" if as_ids else text_of(token)

        generated = self.generated(ids, p.get("max_tokens", 16), sample)
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
        scores = self.scores(ids + generated, max(1, int(p["logprobs"])))
        token_logprobs, top_logprobs = [], []
        for k, token in enumerate(echoed):
            if start + k == 0:
                token_logprobs.append(None)
                top_logprobs.append(None)
                continue
            value, top = scores[start + k - 1]
            token_logprobs.append(value)
            # vLLM: the token itself first, then the top ones
            top_logprobs.append({name(token): value, **{name(t): v for t, v in top.items()}})
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


class ModelServer(FakeServer):
    """The fake server with a transformers causal LM and its tokenizer behind it: echo log-probs (top
    ones too) from one float32 forward pass per prompt, greedy generations (`generate`, one prompt at a
    time), texts tokenized by `tokenizer` (mode "retokenize": one token per character instead)."""

    def __init__(self, model, tokenizer=None, max_model_len: int | None = 32):
        super().__init__()
        self.model, self.tokenizer = model, tokenizer
        self.models = [{**MODEL, "max_model_len": max_model_len}]

    def tokenize(self, text: str) -> list[int]:
        if self.tokenizer is None:
            return super().tokenize(text)
        if self.mode == "retokenize":  # each character alone: the tokenizer's merges never apply
            return [i for c in text for i in self.tokenizer(c, add_special_tokens=False)["input_ids"]]
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def scores(self, sequence: list[int], top_n: int = 1) -> list[tuple[float, dict[int, float]]]:
        import torch

        with torch.no_grad():
            logits = self.model(input_ids=torch.tensor([sequence])).logits[0].float()
        log_p = torch.log_softmax(logits, dim=-1)
        tops = log_p.topk(top_n, dim=-1)
        return [(log_p[t - 1, sequence[t]].item(),
                 dict(zip(tops.indices[t - 1].tolist(), tops.values[t - 1].tolist())))
                for t in range(1, len(sequence))]

    def generated(self, ids: list[int], max_tokens: int, sample: int) -> list[int]:
        import torch

        if max_tokens == 0:
            return []
        with torch.no_grad():
            out = self.model.generate(torch.tensor([ids]), max_new_tokens=max_tokens, do_sample=False,
                                      pad_token_id=self.model.config.eos_token_id or 0)
        new = out[0, len(ids):].tolist()
        eos = self.model.config.eos_token_id
        return new[:new.index(eos) + 1] if eos in new else new  # vLLM stops at the end token
