"""Per-token log-probs of texts under a served model: `causal_token_logprobs`'s contract and numbers,
with the model passes sent to an OpenAI-compatible completions server (`harness.model.served`).

For a text x_1..x_n (after the start token x_0 where there is one, `encode_with_bos`), token t's score
is log p(x_t | x_<t), and with `top_logprobs` max_z log p(z | x_<t). The server computes them when
asked to echo a prompt of token ids with its log-probs: OpenAI's completions API with `echo: true,
logprobs: 1, max_tokens: 0` (https://platform.openai.com/docs/api-reference/completions; `logprobs: 1`
gives each prompt token's log-prob and the most likely token's), as vLLM implements it
(`vllm/entrypoints/openai/completion/serving.py`, vLLM 0.32: with `echo` and `max_tokens: 0` the
choice's log-probs are the prompt's, `prompt_logprobs`, one forward pass over the prompt).

Everything but the model passes is `causal_token_logprobs`'s own (`windowed_token_scores`): the same
start token, the same deduplication of texts that are prefixes of others, and the same sliding windows
over texts longer than the context (`max_length`, else the server's `max_model_len`), each window
sent as one prompt, of which only the tokens `causal_token_logprobs` scores in that window are read.
So the numbers equal the in-process ones up to the two engines' floating-point differences.

Min-K%++'s statistics of the whole next-token distribution (`distribution_stats`) need every
vocabulary log-prob at every position, which a server does not return: they are refused.
"""

from __future__ import annotations

from harness.core.errors import UserError
from harness.scoring.causal import ScoringInfo, TokenScores, scatter_rows, windowed_token_scores


def served_context(client) -> int:
    """The context length the server serves `client.model` with (vLLM's `max_model_len` in GET /models)."""
    name = client.model
    lengths = [m.max_model_len for m in client.served_models() if m.id == name]
    if not lengths or lengths[0] is None:
        raise UserError(f"the server at {client.base_url} does not say the context length of {name!r} "
                        "(max_model_len in GET /models): give the scoring context length (max_length)")
    return int(lengths[0])


def served_token_logprobs(client, tokenizer, texts: list[str], max_length: int | None = None,
                          stride: int | None = None, start_token: int | None = None, add_start: bool = True,
                          top_logprobs: bool = False, distribution_stats: bool = False
                          ) -> tuple[list[TokenScores], ScoringInfo]:
    """`causal_token_logprobs(model, tokenizer, texts, ...)` for the model `client`
    (`harness.model.served.CompletionsClient`) serves: per text, its scored tokens' log-probs (and with
    `top_logprobs` the most likely next token's), and how they were scored. The context is `max_length`,
    else the server's `max_model_len`. `distribution_stats` raises a `UserError`: a server does not
    return the full next-token distribution."""
    if distribution_stats:
        raise UserError("Min-K%++'s next-token distribution statistics (distribution_stats) need the whole "
                        "vocabulary's log-probs, which a completions server does not return: score in-process")
    context = max_length or served_context(client)

    def score_rows(rows, lengths):
        echoed = client.prompt_logprobs([row.ids.tolist() for row in rows])
        # a prompt's arrays hold tokens 1..n-1; the row scores tokens first_target.. of it
        row_scores = {i: (echo.logprobs[row.first_target - 1:], None, None,
                          echo.top_logprobs[row.first_target - 1:] if top_logprobs else None)
                      for i, (row, echo) in enumerate(zip(rows, echoed))}
        return scatter_rows(rows, lengths, row_scores, False, top_logprobs)

    return windowed_token_scores(tokenizer, texts, context, stride, start_token, add_start, score_rows)
