"""A served model: a client for an OpenAI-compatible completions server (vLLM, or any server that
answers the same requests), for prompt log-probs and generations.

The requests are OpenAI's completions API (https://platform.openai.com/docs/api-reference/completions,
the "legacy" API: `prompt`, `echo`, `logprobs`, `max_tokens`, `temperature`, `n`, `seed`, `stop`) and
`GET /models` (https://platform.openai.com/docs/api-reference/models/list). Where vLLM offers more,
its extensions are asked for and used when the server honours them (vLLM's
`entrypoints/openai/completion/protocol.py`, `CompletionRequest`):

- `return_tokens_as_token_ids`: echoed tokens and `top_logprobs` keys come as "token_id:<id>", so
  tokens are compared by id, not by their decoded strings (two ids can decode alike);
- `return_token_ids`: a generation's token ids beside its text;
- `add_special_tokens: false`: a text sent as a string is tokenized without a BOS.

A server that rejects one of them with an HTTP 400 naming it is asked again without it (and not
asked for it again); one that ignores it is read by the standard fields.

Options follow lm-evaluation-harness's `local-completions` where they fit: `base_url` (its
`.../v1/completions` form is accepted too), `timeout_s` (its `timeout`), `max_retries`, `batch_size`
(prompts a request), `num_concurrent` (requests in flight at once).

Time is bounded: an attempt ends `timeout_s` after it starts (connecting, sending and reading the
whole answer); only a connection error, a timeout, HTTP 429 or HTTP 5xx is retried, at most
`max_retries` times, after waiting min(backoff_cap_s, backoff_s * 2**k) before retry k (or the
server's Retry-After, up to backoff_cap_s). So one request takes at most `max_seconds()` =
(max_retries + 1) * timeout_s + sum_k min(backoff_cap_s, backoff_s * 2**k). Every failure is a
`UserError`: one line naming the server.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np

from harness.core.errors import UserError

DEFAULT_TIMEOUT_S = 300.0  # lm-eval's default `timeout`
DEFAULT_MAX_RETRIES = 3
DEFAULT_BACKOFF_S = 1.0
DEFAULT_BACKOFF_CAP_S = 10.0
DEFAULT_BATCH_SIZE = 16
TOKEN_ID_PREFIX = "token_id:"  # vLLM's `format_token_id_placeholder`
# /models fields that change with every answer (a timestamp, fresh permission ids), not the model
VOLATILE_MODEL_FIELDS = ("object", "created", "permission")
READ_CHUNK = 1 << 16


@dataclass(frozen=True)
class ServedModel:
    """One entry of `GET /models`: what the server reveals of a model's identity."""

    id: str
    owned_by: str | None = None
    root: str | None = None           # vLLM: the path or hub name the weights were loaded from
    parent: str | None = None         # vLLM: the base model of a LoRA adapter
    max_model_len: int | None = None  # vLLM: the context length it serves
    extra: dict = field(default_factory=dict)  # any other field, less `VOLATILE_MODEL_FIELDS`

    def as_dict(self) -> dict:
        return {"id": self.id, "owned_by": self.owned_by, "root": self.root, "parent": self.parent,
                "max_model_len": self.max_model_len, **self.extra}


@dataclass
class PromptLogprobs:
    """Scores of one prompt's tokens 1..n-1 (token 0 has no context), all arrays of length n - 1.

    The same fields as the in-process `harness.scoring.causal.TokenScores`."""

    token_ids: np.ndarray     # the prompt's tokens from the second on
    logprobs: np.ndarray      # log p(token_t | tokens_<t); vLLM sends -9999.0 for -inf
    top_logprobs: np.ndarray  # max_z log p(z | tokens_<t): the largest of the server's top_logprobs
    # with `top_n` > 1: per token, the server's `top_n` most likely tokens there, id -> log p
    top: list[dict[int, float]] | None = None

    def argmax_hits(self) -> np.ndarray:
        """Per token, whether it is the model's most likely next token (ties count as hits)."""
        return self.logprobs >= self.top_logprobs


@dataclass(frozen=True)
class Generation:
    """One generated continuation."""

    text: str
    token_ids: list[int] | None  # None where the server does not return them
    finish_reason: str | None    # "length" (max_tokens reached) or "stop" (a stop string or EOS)


@dataclass
class _Echo:
    tokens: list[str]
    token_ids: list[int] | None
    token_logprobs: list
    top_logprobs: list


class CompletionsClient:
    """Prompt log-probs and generations from an OpenAI-compatible server at `base_url` (".../v1")."""

    def __init__(self, base_url: str, model: str | None = None, *, api_key: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, max_retries: int = DEFAULT_MAX_RETRIES,
                 backoff_s: float = DEFAULT_BACKOFF_S, backoff_cap_s: float = DEFAULT_BACKOFF_CAP_S,
                 batch_size: int = DEFAULT_BATCH_SIZE, num_concurrent: int = 1):
        base = base_url.rstrip("/")
        if base.endswith("/completions"):  # lm-eval's base_url names the endpoint itself
            base = base[: -len("/completions")]
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UserError(f"not an http(s) URL: {base_url!r}")
        if (timeout_s <= 0 or max_retries < 0 or backoff_s < 0 or backoff_cap_s < 0 or batch_size < 1
                or num_concurrent < 1):
            raise ValueError("timeout_s, batch_size and num_concurrent must be positive, max_retries and backoffs "
                             "non-negative")
        self.base_url = base
        self.api_key = api_key
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.backoff_cap_s = float(backoff_cap_s)
        self.batch_size = int(batch_size)
        self.num_concurrent = int(num_concurrent)
        self._model = model
        # the served model's own context, where known (`context_length`); set by the loader from its config
        self.model_context: int | None = None
        self._max_model_len: int | None = None  # the server's, once read (`context_length`)
        self._rejected: set[str] = set()  # vLLM extensions this server answered 400 to
        self._echo_max_tokens = 0         # 1 once the server has refused max_tokens=0 with echo

    # -- requests --------------------------------------------------------------------------------

    def max_seconds(self) -> float:
        """The most one request can take, retries and waits included (see the module docstring)."""
        waits = sum(min(self.backoff_cap_s, self.backoff_s * 2 ** k) for k in range(self.max_retries))
        return (self.max_retries + 1) * self.timeout_s + waits

    def _attempt(self, method: str, url: str, body: bytes | None) -> tuple[int, bytes, http.client.HTTPMessage]:
        """One HTTP exchange, ended `timeout_s` after it starts (raises TimeoutError then)."""
        parts = urlsplit(url)
        deadline = time.monotonic() + self.timeout_s

        def remaining() -> float:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            return left

        kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        connection = kind(parts.hostname, parts.port, timeout=self.timeout_s)
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            connection.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body, headers)
            sock = connection.sock  # kept: getresponse() may hand the socket over to the response
            sock.settimeout(remaining())
            response = connection.getresponse()
            chunks = []
            while not response.isclosed():  # it closes itself once the whole body is read
                sock.settimeout(remaining())
                chunk = response.read(READ_CHUNK)
                if not chunk:
                    break
                chunks.append(chunk)
            return response.status, b"".join(chunks), response.headers
        finally:
            connection.close()

    def _call(self, method: str, path: str, payload: dict | None = None) -> dict:
        """The JSON answer to one request, retried as the module docstring says."""
        url = self.base_url + path
        body = None if payload is None else json.dumps(payload).encode()
        where = f"the server at {self.base_url}"
        start = time.monotonic()
        for attempt in range(self.max_retries + 1):
            retry_after = 0.0
            try:
                status, data, headers = self._attempt(method, url, body)
            except socket.gaierror:
                raise UserError(f"cannot reach {where}: unknown host {urlsplit(url).hostname!r}") from None
            except ssl.SSLError as error:
                raise UserError(f"cannot reach {where}: TLS failed ({_one_line(str(error))})") from None
            except TimeoutError:
                failure = f"{where} did not answer within {self.timeout_s:g} s"
            except (OSError, http.client.HTTPException) as error:
                failure = f"cannot reach {where}: {_describe_connection_error(error)}"
            else:
                if 200 <= status < 300:
                    return _parse_json(data, where)
                failure = f"{where} answered HTTP {status} to {method} {path}: {_error_message(data)}"
                if status != 429 and status < 500:
                    raise ServerHTTPError(failure, status, data)
                retry_after = _retry_after(headers)
            if attempt == self.max_retries:
                tries = "1 attempt" if attempt == 0 else f"{attempt + 1} attempts"
                raise UserError(f"{failure} ({tries}, {time.monotonic() - start:.1f} s)")
            time.sleep(min(self.backoff_cap_s, max(self.backoff_s * 2 ** attempt, retry_after)))
        raise AssertionError("unreachable")

    def _completions(self, payload: dict, extensions: dict) -> dict:
        """POST /completions with `payload` and those vLLM `extensions` the server has not rejected; a
        400 that names an extension (vLLM's error `param`, or its message) sends it again without it."""
        while True:
            asked = {k: v for k, v in extensions.items() if k not in self._rejected}
            try:
                return self._call("POST", "/completions", {**payload, **asked})
            except ServerHTTPError as error:
                named = [k for k in asked if error.names(k)]
                if not named:
                    raise
                self._rejected.update(named)

    # -- what the server serves ------------------------------------------------------------------

    def served_models(self) -> list[ServedModel]:
        """GET /models: the models the server serves, with what it says of each (vLLM's `ModelCard`)."""
        answer = self._call("GET", "/models")
        entries = answer.get("data")
        if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("id"), str)
                                                    for e in entries):
            raise UserError(f"the server at {self.base_url} answered GET /models without a list of models "
                            f"with ids: {_one_line(json.dumps(answer))}")
        known = ("id", "owned_by", "root", "parent", "max_model_len")
        return [ServedModel(**{k: e.get(k) for k in known},
                            extra={k: v for k, v in e.items() if k not in known and k not in VOLATILE_MODEL_FIELDS})
                for e in entries]

    @property
    def model(self) -> str:
        """The model asked for: the one given, else the only one the server serves."""
        if self._model is None:
            ids = [m.id for m in self.served_models()]
            if len(ids) != 1:
                listed = ", ".join(ids) if ids else "none"
                raise UserError(f"the server at {self.base_url} serves {len(ids)} models ({listed}): "
                                "name the one to score")
            self._model = ids[0]
        return self._model

    def context_length(self) -> int:
        """The context membench scores `model` in: the longest prompt the server scores, its `max_model_len`
        (GET /models) less one, since vLLM makes room for one output token even when asked for none
        (HTTP 400 "The decoder prompt (length 512) plus the number of requested output tokens (at least
        1) is longer than the maximum model length of 512", vLLM 0.32); at most `model_context`, the
        model's own context where it is known (its config.json), as in-process. So a server started with
        a `max_model_len` one more than the model's context (vLLM: `--max-model-len 513` for a 512-token
        GPT-2, with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1) is scored in the very windows of the in-process run;
        one that leaves less, in windows that much shorter."""
        if self._max_model_len is None:  # asked once: every scoring call reads it
            name = self.model
            lengths = [m.max_model_len for m in self.served_models() if m.id == name]
            if not lengths or not isinstance(lengths[0], int) or lengths[0] < 3:
                raise UserError(f"the server at {self.base_url} does not say the context length of {name!r} "
                                "(max_model_len in GET /models), which membench needs to fit prompts to it")
            self._max_model_len = lengths[0]
        return min(self._max_model_len - 1, self.model_context or self._max_model_len)

    # -- prompt log-probs ------------------------------------------------------------------------

    def _echo(self, prompts: list, top_n: int = 1) -> list[_Echo]:
        """POST /completions echoing `prompts` (token-id lists or strings) with their log-probs:
        `echo: true, logprobs: top_n, max_tokens: 0, temperature: 0`. `logprobs: 1` returns, per
        position, the prompt token's log-prob and the most likely token's (OpenAI: the top
        `logprobs` tokens, plus the sampled one; vLLM puts the prompt token first). A server that
        refuses `max_tokens: 0` (an HTTP 400 naming max_tokens) is asked for 1 token, and the
        generated token is dropped (lm-eval's `local-completions` always asks for 1)."""
        payload = {"model": self.model, "prompt": prompts, "echo": True, "logprobs": top_n, "temperature": 0.0,
                   "max_tokens": self._echo_max_tokens}
        extensions = {"return_tokens_as_token_ids": True}
        if prompts and isinstance(prompts[0], str):
            extensions["add_special_tokens"] = False
        try:
            answer = self._completions(payload, extensions)
        except ServerHTTPError as error:
            if self._echo_max_tokens != 0 or not error.names("max_tokens"):
                raise
            answer = self._completions({**payload, "max_tokens": 1}, extensions)
            self._echo_max_tokens = 1
        choices = self._choices(answer, len(prompts))
        return [self._echoed(choice) for choice in choices]

    def _choices(self, answer: dict, expected: int) -> list[dict]:
        """The answer's `choices`, in `index` order, checked to be `expected` many."""
        choices = answer.get("choices")
        if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
            raise UserError(f"the server at {self.base_url} answered without `choices`: "
                            f"{_one_line(json.dumps(answer))}")
        if len(choices) != expected:
            raise UserError(f"the server at {self.base_url} answered {len(choices)} choices for {expected} "
                            "asked for")
        return sorted(choices, key=lambda c: c.get("index", 0))

    def _echoed(self, choice: dict) -> _Echo:
        logprobs = choice.get("logprobs")
        if not isinstance(logprobs, dict) or not logprobs.get("token_logprobs"):
            raise UserError(f"the server at {self.base_url} returned no log-probs for the prompt: it does not "
                            "answer `echo` with `logprobs` (OpenAI completions)")
        lists = {k: logprobs.get(k) for k in ("tokens", "token_logprobs", "top_logprobs")}
        missing = [k for k, v in lists.items() if not isinstance(v, list)]
        lengths = {len(v) for v in lists.values() if isinstance(v, list)}
        if missing or len(lengths) != 1:
            raise UserError(f"the server at {self.base_url} answered log-probs without "
                            f"{', '.join(missing) or 'lists of one length'} (tokens, token_logprobs, top_logprobs)")
        tokens = lists["tokens"]
        ids = None
        if "return_tokens_as_token_ids" not in self._rejected and tokens and all(
                isinstance(t, str) and t.startswith(TOKEN_ID_PREFIX) and t[len(TOKEN_ID_PREFIX):].isdigit()
                for t in tokens):
            ids = [int(t[len(TOKEN_ID_PREFIX):]) for t in tokens]
        return _Echo(tokens, ids, lists["token_logprobs"], lists["top_logprobs"])

    def prompt_logprobs(self, prompts: list[list[int]], top_n: int = 1) -> list[PromptLogprobs]:
        """Per prompt (token ids, sent as they are: no BOS is added), log p(token_t | tokens_<t) for
        t >= 1 and the log-prob of the most likely token there, and with `top_n` > 1 the `top_n` most
        likely tokens' (`PromptLogprobs.top`, by token id: the server must return ids, vLLM's
        `return_tokens_as_token_ids`); `batch_size` prompts a request. The server must echo exactly
        the tokens sent (else: truncated, or tokens added)."""
        if any(len(p) == 0 for p in prompts):
            raise ValueError("an empty prompt has no tokens to score")
        batches = [[[int(t) for t in p] for p in prompts[start:start + self.batch_size]]
                   for start in range(0, len(prompts), self.batch_size)]

        def score(batch: list[list[int]]) -> list[_Echo]:
            try:
                return self._echo(batch, top_n)
            except ServerHTTPError as error:
                if top_n > 1 and error.names("logprobs"):
                    raise UserError(f"{error} (asked for the top {top_n} log-probs; vLLM: start it with "
                                    f"--max-logprobs {top_n} or more)") from None
                raise

        sent = [prompt for batch in batches for prompt in batch]
        echoes = [echo for found in self._each(score, batches) for echo in found]
        return [self._scored(index, prompt, echo, top_n) for index, (prompt, echo) in enumerate(zip(sent, echoes))]

    def _each(self, request, batches: list) -> list:
        """`request(batch)` for every batch, in order: one at a time, or `num_concurrent` at once (a
        server such as vLLM batches the requests it has in flight); the first failure is raised."""
        if self.num_concurrent == 1 or len(batches) < 2:
            return [request(batch) for batch in batches]
        _ = self.model  # asked once, before the threads
        with ThreadPoolExecutor(max_workers=self.num_concurrent) as pool:
            return list(pool.map(request, batches))

    def _scored(self, index: int, sent: list[int], echo: _Echo, top_n: int = 1) -> PromptLogprobs:
        n = len(sent)
        got = len(echo.tokens) - self._echo_max_tokens  # without the generated token
        if got < n:
            raise UserError(f"the server truncated the prompt: sent {n} tokens, got {got} back (prompt {index}); "
                            "send shorter prompts or serve a longer context (vLLM: --max-model-len)")
        if got > n:
            raise UserError(f"the server added tokens to the prompt: sent {n} tokens, got {got} back "
                            f"(prompt {index}); it must take token ids as they are")
        if echo.token_ids is not None and echo.token_ids[:n] != sent:
            at = next(i for i, (a, b) in enumerate(zip(sent, echo.token_ids)) if a != b)
            raise UserError(f"the server echoed other tokens than it was sent: prompt {index}, token {at}: "
                            f"sent {sent[at]}, got {echo.token_ids[at]}")
        if top_n > 1 and echo.token_ids is None:
            raise UserError(f"the server at {self.base_url} does not name its top tokens by id (vLLM's "
                            "return_tokens_as_token_ids), which the top log-probs need")
        logprobs, tops, tables = [], [], []
        for t in range(1, n):
            value, top = echo.token_logprobs[t], echo.top_logprobs[t]
            if not isinstance(value, (int, float)) or not isinstance(top, dict) or not top:
                raise UserError(f"the server at {self.base_url} returned no log-probs for token {t} of prompt "
                                f"{index}: it does not answer `echo` with `logprobs` (OpenAI completions)")
            logprobs.append(float(value))
            tops.append(max(float(v) for v in top.values()))
            if top_n > 1:
                tables.append(self._top_table(top, top_n, index, t))
        return PromptLogprobs(np.asarray(sent[1:], dtype=np.int64), np.asarray(logprobs, dtype=np.float64),
                              np.asarray(tops, dtype=np.float64), tables if top_n > 1 else None)

    def _top_table(self, top: dict, top_n: int, index: int, t: int) -> dict[int, float]:
        """The `top_n` most likely tokens at position t (id -> log p) from the server's `top_logprobs`,
        which holds them and, where it is not among them, the prompt's own token (OpenAI: "plus the
        sampled one"); fewer than `top_n` others is an error."""
        table = {}
        for key, value in top.items():
            if not (isinstance(key, str) and key.startswith(TOKEN_ID_PREFIX) and key[len(TOKEN_ID_PREFIX):].isdigit()):
                raise UserError(f"the server at {self.base_url} named a top token {key!r}, not by id (vLLM's "
                                "return_tokens_as_token_ids)")
            table[int(key[len(TOKEN_ID_PREFIX):])] = float(value)
        ranked = sorted(table.items(), key=lambda item: -item[1])[:top_n]
        if len(table) < top_n:
            raise UserError(f"the server at {self.base_url} returned {len(table)} top log-probs for token {t} of "
                            f"prompt {index} where {top_n} were asked for")
        return dict(ranked)

    # -- generations -----------------------------------------------------------------------------

    def generate(self, prompts: list[list[int]], max_tokens: list[int] | int, temperature: float = 0.0,
                 seed: int | None = None, n: int = 1, stop: list[str] | None = None) -> list[list[Generation]]:
        """Per prompt (token ids), its `n` continuations of at most `max_tokens` tokens (one number, or
        one per prompt): POST /completions with `max_tokens`, `temperature` (0: greedy), `n`, `seed`
        and `stop` when given (vLLM takes at most 4 stop strings: VLLM_MAX_STOP_STRINGS), and vLLM's
        `return_token_ids` for the generated ids. Prompts with the same max_tokens go
        `batch_size` a request; a prompt's continuations are choices prompt * n .. prompt * n + n - 1."""
        limits = ([int(max_tokens)] * len(prompts) if isinstance(max_tokens, (int, np.integer))
                  else [int(m) for m in max_tokens])
        if len(limits) != len(prompts):
            raise ValueError(f"{len(limits)} max_tokens for {len(prompts)} prompts")
        batches = []
        for limit in sorted(set(limits)):
            chosen = [i for i, m in enumerate(limits) if m == limit]
            batches += [chosen[start:start + self.batch_size] for start in range(0, len(chosen), self.batch_size)]

        def request(batch: list[int]) -> list[dict]:
            payload = {"model": self.model, "prompt": [[int(t) for t in prompts[i]] for i in batch],
                       "max_tokens": limits[batch[0]], "temperature": temperature, "n": n}
            if seed is not None:
                payload["seed"] = int(seed)
            if stop:
                payload["stop"] = list(stop)
            return self._choices(self._completions(payload, {"return_token_ids": True}), len(batch) * n)

        out: list[list[Generation] | None] = [None] * len(prompts)
        for batch, choices in zip(batches, self._each(request, batches)):
            for k, i in enumerate(batch):
                out[i] = [self._generation(c) for c in choices[k * n:(k + 1) * n]]
        return out

    def _generation(self, choice: dict) -> Generation:
        text, ids = choice.get("text"), choice.get("token_ids")
        if not isinstance(text, str):
            raise UserError(f"the server at {self.base_url} answered a choice without `text`: "
                            f"{_one_line(json.dumps(choice))}")
        if ids is not None and not (isinstance(ids, list) and all(isinstance(t, int) for t in ids)):
            raise UserError(f"the server at {self.base_url} answered `token_ids` that are not a list of ints")
        return Generation(text, ids, choice.get("finish_reason"))

    # -- tokenizer agreement ---------------------------------------------------------------------

    def check_tokenizer(self, tokenizer, texts: list[str]) -> None:
        """Refuse a server that tokenizes `texts` otherwise than `tokenizer` does (without special
        tokens): the texts go as strings with echo and log-probs, and the echoed tokens are compared by
        id where the server returns ids (vLLM's `return_tokens_as_token_ids`), else by string, each
        local token decoded alone (`tokenizer.decode([id])`, as vLLM decodes one token). A server that
        ignores `add_special_tokens: false` and puts the tokenizer's BOS first is not a mismatch."""
        if any(not text for text in texts):
            raise ValueError("an empty text has no tokens to compare")
        local = tokenizer(list(texts), add_special_tokens=False)["input_ids"] if texts else []
        bos = getattr(tokenizer, "bos_token_id", None)
        for start in range(0, len(texts), self.batch_size):
            echoes = self._echo(list(texts[start:start + self.batch_size]))
            for offset, echo in enumerate(echoes):
                index = start + offset
                ids = [int(i) for i in local[index]]
                end = len(echo.tokens) - self._echo_max_tokens
                if echo.token_ids is not None:
                    server, mine = echo.token_ids[:end], ids
                    if bos is not None and server == [bos] + mine:
                        server = mine
                else:
                    server, mine = echo.tokens[:end], [tokenizer.decode([i]) for i in ids]
                    if bos is not None and len(server) == len(mine) + 1 and server[1:] == mine:
                        server = server[1:]
                if len(server) < len(mine) and server == mine[len(mine) - len(server):]:
                    raise UserError(f"the server truncated the prompt: text {index} ({_one_line(texts[index], 40)!r}) "
                                    f"came back as its last {len(server)} of {len(mine)} tokens")
                if server != mine:
                    at = next((i for i, (a, b) in enumerate(zip(server, mine)) if a != b), min(len(server), len(mine)))
                    theirs = repr(server[at]) if at < len(server) else "(end)"
                    ours = repr(mine[at]) if at < len(mine) else "(end)"
                    raise UserError(f"the server tokenizes differently from the local tokenizer: text {index} "
                                    f"({_one_line(texts[index], 40)!r}) differs at token {at}: server {theirs}, "
                                    f"local {ours}")


class ServerHTTPError(UserError):
    """An HTTP error answer that is not retried (a 4xx other than 429)."""

    def __init__(self, message: str, status: int, body: bytes):
        super().__init__(message)
        self.status = status
        self.param, self.server_message = _error_fields(body)

    def names(self, name: str) -> bool:
        """Whether the server's error is about request field `name` (vLLM's `param`, else its message)."""
        if self.status not in (400, 422):
            return False
        return self.param == name or (self.param is None and name in (self.server_message or ""))


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _parse_json(data: bytes, where: str) -> dict:
    try:
        answer = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise UserError(f"{where} answered with something that is not JSON: "
                        f"{_one_line(data.decode('utf-8', 'replace'), 80)!r}") from None
    if not isinstance(answer, dict):
        raise UserError(f"{where} answered JSON that is not an object: {_one_line(json.dumps(answer), 80)}")
    return answer


def _error_fields(data: bytes) -> tuple[str | None, str | None]:
    """(param, message) of an error body: OpenAI's and vLLM's {"error": {"message", "param", ...}},
    {"error": "..."}, FastAPI's {"detail": ...} or {"message": ...}; (None, None) if none of these."""
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None, None
    if not isinstance(body, dict):
        return None, None
    error = body.get("error")
    if isinstance(error, dict) and error.get("message") is not None:
        param = error.get("param")
        return (param if isinstance(param, str) else None), str(error["message"])
    for key in ("error", "detail", "message"):
        if body.get(key) is not None:
            value = body[key]
            return None, value if isinstance(value, str) else json.dumps(value)
    return None, None


def _error_message(data: bytes) -> str:
    """The server's own message from an error body, else the start of the body."""
    message = _error_fields(data)[1]
    if message is None:
        message = data.decode("utf-8", "replace") or "(empty body)"
    return _one_line(message)


def _retry_after(headers) -> float:
    """The seconds of a Retry-After header (0 when absent or a date)."""
    try:
        return max(0.0, float(headers.get("Retry-After", 0)))
    except (TypeError, ValueError):
        return 0.0


def _describe_connection_error(error: Exception) -> str:
    if isinstance(error, ConnectionRefusedError):
        return "connection refused (is the server running?)"
    if isinstance(error, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(error, http.client.HTTPException):
        return f"not an HTTP answer ({type(error).__name__})"
    return _one_line(str(error) or type(error).__name__)
