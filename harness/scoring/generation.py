"""Greedy continuations of prompts by a causal LM, batched with left padding.

- Each prompt gets the tokenizer's BOS when it has one (as in `harness.scoring.causal`).
- A prompt plus its new tokens must fit the context window C: new tokens are capped at C // 2,
  and a longer prompt keeps its last C - room tokens, where room is the budget rounded up to a
  multiple of 8 (so prompts with nearby budgets batch together; the count of cut prompts is
  recorded). The cut depends on the prompt and its budget alone, never on the batch.
- Prompts are sorted by budget and length and left-padded, so every row ends at the same
  position; a batch closes early when its longest prompt plus its largest budget would pass C.
  Greedy decoding (`do_sample=False`, one beam) runs for the largest budget in the batch and each
  output is cut to its own budget (greedy tokens do not depend on how long decoding continues).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from harness.model.served import CompletionsClient
from harness.scoring.batching import model_context, padding_id
from harness.scoring.causal import encode_with_bos
from harness.scoring.distributed import run_batches

BUDGET_STEP = 8


@dataclass
class GenerationInfo:
    bos_token_id: int | None
    context_length: int
    max_new_tokens_cap: int
    n_prompts: int
    n_prompts_cut: int
    n_budgets_capped: int

    def as_dict(self) -> dict:
        return asdict(self)


def prompt_cuts(tokenizer, prompts: list[str], max_new_tokens: list[int], context: int):
    """(encoded prompts with BOS, the token ids each prompt is generated from, budgets, rooms, BOS id):
    budgets capped at `context // 2`; a prompt keeps its last `context - room` tokens."""
    if len(prompts) != len(max_new_tokens):
        raise ValueError("one max_new_tokens per prompt")
    cap = max(1, context // 2)
    budgets = [max(1, min(n, cap)) for n in max_new_tokens]
    # Room is made for the budget rounded up to a multiple of BUDGET_STEP, so prompts with nearby
    # budgets are cut alike and share full batches; each output is still cut to its own budget.
    rooms = [min(cap, -(-budget // BUDGET_STEP) * BUDGET_STEP) for budget in budgets]
    encoded, bos = encode_with_bos(tokenizer, prompts)
    cut = [ids[-(context - room):] for ids, room in zip(encoded, rooms)]
    return encoded, cut, budgets, rooms, bos


@torch.no_grad()
def greedy_continuations(model, tokenizer, prompts: list[str], max_new_tokens: list[int], batch_size: int = 16,
                         max_length: int | None = None, progress: bool | None = None,
                         ) -> tuple[list[str], GenerationInfo]:
    """The greedy continuation of each prompt, decoded to text (special tokens dropped)."""
    context = max_length or model_context(model)
    cap = max(1, context // 2)
    encoded, cut, budgets, rooms, bos = prompt_cuts(tokenizer, prompts, max_new_tokens, context)
    info = GenerationInfo(bos, context, cap, len(prompts), sum(len(c) < len(e) for c, e in zip(cut, encoded)),
                          sum(b < n for b, n in zip(budgets, max_new_tokens)))
    if isinstance(model, CompletionsClient):
        return _served_continuations(model, tokenizer, cut, budgets, rooms), info
    pad = padding_id(tokenizer)
    device = next(model.parameters()).device
    order = sorted(range(len(prompts)), key=lambda i: (rooms[i], len(cut[i])))
    batches = _fitting_batches(order, [len(c) for c in cut], rooms, batch_size, context)

    def generate_batch(batch: list[int]) -> list[str]:
        width = max(len(cut[i]) for i in batch)
        input_ids = np.full((len(batch), width), pad, dtype=np.int64)
        attention = np.zeros((len(batch), width), dtype=np.int64)
        for j, i in enumerate(batch):
            input_ids[j, width - len(cut[i]):] = cut[i]
            attention[j, width - len(cut[i]):] = 1
        generated = model.generate(
            input_ids=torch.from_numpy(input_ids).to(device), attention_mask=torch.from_numpy(attention).to(device),
            max_new_tokens=max(budgets[i] for i in batch), do_sample=False, num_beams=1, pad_token_id=pad,
        )
        return [tokenizer.decode(generated[j, width: width + budgets[i]].tolist(), skip_special_tokens=True)
                for j, i in enumerate(batch)]

    done = run_batches(batches, generate_batch, "generating", progress)
    return [done[i] for i in range(len(prompts))], info


def _served_continuations(client: CompletionsClient, tokenizer, cut: list[list[int]], budgets: list[int],
                          rooms: list[int]) -> list[str]:
    """`greedy_continuations` through a completions server: the same prompt tokens (`prompt_cuts`) sent as
    token ids with `temperature: 0`, each asked for its room (its budget rounded up to `BUDGET_STEP`, so
    that prompts of nearby budgets share a request: the client sends one `max_tokens` a request) and cut
    to its budget, as in-process (the server stops at the end token, as generate does); the generated
    ids decoded here as in-process (special tokens dropped). A server that returns no ids is asked again
    for each prompt's own budget, and its text taken."""
    generated = client.generate(cut, rooms, temperature=0.0)
    if any(g[0].token_ids is None for g in generated):
        return [g[0].text for g in client.generate(cut, budgets, temperature=0.0)]
    return [tokenizer.decode(g[0].token_ids[:budget], skip_special_tokens=True) for g, budget in zip(generated, budgets)]


def _fitting_batches(order: list[int], lengths: list[int], budgets: list[int], batch_size: int,
                     context: int) -> list[list[int]]:
    """Consecutive runs of `order`, at most `batch_size` long, whose longest prompt plus largest
    budget fits the context."""
    batches, current, width, budget = [], [], 0, 0
    for i in order:
        if current and (len(current) == batch_size or max(width, lengths[i]) + max(budget, budgets[i]) > context):
            batches.append(current)
            current, width, budget = [], 0, 0
        current.append(i)
        width, budget = max(width, lengths[i]), max(budget, budgets[i])
    return batches + ([current] if current else [])
