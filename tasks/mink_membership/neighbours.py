"""Neighbour texts for the neighbourhood membership attack (Mattern et al. 2023), made by a masked LM.

A neighbour is the text with a few word pieces swapped for ones a masked LM finds likely in their
place, as MIMIR's BERT neighbours (`neighbor_strategy="random"`, `original_tokenization_swap`):

1. The text is tokenized by the masked LM's tokenizer (cut to its context). For every position i
   that is not a special token, the input (word) embedding of token i is passed through dropout
   (p = 0.7, as Mattern et al. and MIMIR; the mask drawn from a generator seeded by `seed`, the
   token sequence and i), and the masked LM predicts position i. Of its 6 most probable tokens,
   the most probable one that is neither the original token nor a special token is the position's
   candidate, scored p(candidate) / (1 - p(original)) (with p(original) = 1: / 0.1, as MIMIR).
2. A neighbour swaps s = max(1, int(n * swap_fraction)) positions at once (n: the token count with
   special tokens, MIMIR's `pct_swap_bert`, default 0.05). 1,000 draws of s distinct positions
   (seeded) are scored by the sum of their candidates' scores; the N best distinct draws are the
   neighbours (MIMIR keeps repeated draws; membench keeps each set of positions once).
3. Each swap replaces the token's characters in the original text (its offsets) by the candidate's
   text (WordPiece's `##` removed), so the rest of the text, beyond the masked LM's context too,
   stays as it was.

Departure from MIMIR, on purpose: MIMIR feeds the output of BERT's embeddings module (word,
position and type embeddings, normalized) back in as `inputs_embeds`, so the model adds position
embeddings a second time; membench drops out the word embedding only and lets the model embed
it as usual (Mattern et al.'s description). Computed once per distinct token sequence, in
length-sorted batches of (sequence, position) rows; only the predicted position goes through
the output head for BERT and RoBERTa masked LMs. Neighbours are cached on disk per masked-LM
identity and settings (`cached_neighbours`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
import torch

from harness.core.errors import UserError
from harness.core.io import atomic_write_text, cache_dir, canonical_json, sha256_text
from harness.scoring.batching import model_context, padding_id, right_pad
from harness.scoring.distributed import is_main, run_batches
from harness.scoring.spans import length_batches

DROPOUT = 0.7     # Mattern et al. 2023; MIMIR's `token_dropout`
TOP_K = 6         # candidates read per position (MIMIR)
TRIALS = 1000     # random draws of positions per text (MIMIR)
ALGORITHM = 1     # bump when what a neighbour is changes: it is part of the cache key


@dataclass(frozen=True)
class Candidate:
    position: int  # token index in the masked LM's encoding
    token_id: int
    score: float


def _stable_seed(*parts) -> list[int]:
    """A numpy seed sequence from `parts` that is the same in every process and on every machine."""
    digest = hashlib.sha256(repr(parts).encode("utf-8")).digest()
    return [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]


def _output_head(model):
    """The module that maps final hidden states to vocabulary logits, when the architecture has a
    known one (BERT's `cls`, RoBERTa's `lm_head`); None: the whole model is run."""
    for name in ("cls", "lm_head"):
        head = getattr(model, name, None)
        if isinstance(head, torch.nn.Module):
            return head
    return None


@torch.no_grad()
def position_candidates(model, tokenizer, sequences: list[list[int]], seed: int, batch_size: int = 64,
                        progress: bool | None = None) -> list[list[Candidate]]:
    """Step 1 of the module docstring for each token sequence (special tokens included)."""
    special = set(tokenizer.all_special_ids)
    rows = [(k, i) for k, ids in enumerate(sequences) for i, token in enumerate(ids) if token not in special]
    device = next(model.parameters()).device
    pad = padding_id(tokenizer)
    embed = model.get_input_embeddings()
    head = _output_head(model)
    keep = 1.0 - DROPOUT
    hashes = [sha256_text(canonical_json(ids)) for ids in sequences]

    def candidates_of(batch: list[int]) -> list[Candidate | None]:
        input_ids, attention = right_pad([sequences[rows[r][0]] for r in batch], pad)
        embeds = embed(input_ids.to(device))
        positions = torch.tensor([rows[r][1] for r in batch], device=device)
        picked = torch.arange(len(batch), device=device)
        masks = [np.random.default_rng(_stable_seed(seed, hashes[rows[r][0]], rows[r][1])).random(embeds.shape[-1])
                 >= DROPOUT for r in batch]
        dropout = torch.tensor(np.stack(masks), dtype=embeds.dtype, device=device) / keep
        embeds[picked, positions] = embeds[picked, positions] * dropout
        if head is not None:
            hidden = model.base_model(inputs_embeds=embeds, attention_mask=attention.to(device)).last_hidden_state
            logits = head(hidden[picked, positions])
        else:
            logits = model(inputs_embeds=embeds, attention_mask=attention.to(device)).logits[picked, positions]
        probs = torch.softmax(logits.float(), dim=-1)
        top_probs, top_ids = torch.topk(probs, TOP_K, dim=-1)
        out = []
        for j, r in enumerate(batch):
            original = sequences[rows[r][0]][rows[r][1]]
            p_original = float(probs[j, original])
            found = None
            for p, token in zip(top_probs[j].tolist(), top_ids[j].tolist()):
                if token != original and token not in special:
                    found = Candidate(rows[r][1], int(token), p / (1 - (0.9 if p_original == 1 else p_original)))
                    break
            out.append(found)
        return out

    done = run_batches(length_batches([len(sequences[k]) for k, _ in rows], batch_size), candidates_of,
                       "neighbour candidates", progress)
    per_sequence: list[list[Candidate]] = [[] for _ in sequences]
    for r in range(len(rows)):
        if done[r] is not None:
            per_sequence[rows[r][0]].append(done[r])
    return per_sequence


def pick_swaps(candidates: list[Candidate], n_tokens: int, n_neighbours: int, swap_fraction: float,
               seed: list[int]) -> list[list[Candidate]]:
    """Step 2: the swaps of each neighbour (at most `n_neighbours`, fewer when fewer distinct draws
    exist), best first, each sorted by position."""
    if not candidates:
        return []
    n_swap = min(max(1, int(n_tokens * swap_fraction)), len(candidates))
    rng = np.random.default_rng(seed)
    scores = np.array([c.score for c in candidates])
    draws: dict[tuple[int, ...], float] = {}
    for _ in range(TRIALS):
        chosen = tuple(sorted(rng.choice(len(candidates), n_swap, replace=False).tolist()))
        draws.setdefault(chosen, float(scores[list(chosen)].sum()))
    best = sorted(draws, key=lambda key: -draws[key])[:n_neighbours]  # stable: first drawn wins ties
    return [[candidates[i] for i in key] for key in best]


def swap_text(text: str, offsets: list[tuple[int, int]], swaps: list[Candidate], tokenizer) -> str:
    """Step 3: `text` with each swapped token's characters replaced by its candidate's text."""
    pieces, end_before = [], 0
    for swap in swaps:
        start, end = offsets[swap.position]
        pieces += [text[end_before:start], tokenizer.decode([swap.token_id]).replace("##", "").strip()]
        end_before = end
    return "".join(pieces) + text[end_before:]


def neighbour_texts(model, tokenizer, texts: list[str], n_neighbours: int, swap_fraction: float, seed: int,
                    batch_size: int = 64, progress: bool | None = None) -> list[list[str]]:
    """The neighbours of each text (the module docstring), computed once per distinct text."""
    if not getattr(tokenizer, "is_fast", False):
        raise UserError(f"the neighbour model's tokenizer ({type(tokenizer).__name__}) gives no character "
                        "offsets; the neighbourhood attack needs a fast tokenizer")
    if tokenizer.mask_token_id is None:
        raise UserError("the neighbour model has no mask token: --neighbour-model must be a masked LM")
    distinct = list(dict.fromkeys(texts))
    encoded = tokenizer(distinct, truncation=True, max_length=model_context(model), return_offsets_mapping=True)
    sequences = [list(ids) for ids in encoded["input_ids"]]
    candidates = position_candidates(model, tokenizer, sequences, seed, batch_size, progress)
    out = {}
    for text, ids, offsets, found in zip(distinct, sequences, encoded["offset_mapping"], candidates):
        draws = pick_swaps(found, len(ids), n_neighbours, swap_fraction,
                           _stable_seed(seed, sha256_text(canonical_json(ids)), "draws"))
        out[text] = [swap_text(text, [tuple(o) for o in offsets], swaps, tokenizer) for swaps in draws]
    return [out[text] for text in texts]


def cached_neighbours(mlm, texts: list[str], n_neighbours: int, swap_fraction: float, seed: int,
                      batch_size: int = 64, progress: bool | None = None) -> list[list[str]]:
    """`neighbour_texts` of `mlm` (a `harness.core.model_types.LoadedModel`), read from and added to the cache
    file of (its identity, the settings, ALGORITHM): texts already there are not computed again."""
    key = sha256_text(canonical_json({"n": n_neighbours, "fraction": swap_fraction, "seed": seed,
                                      "algorithm": ALGORITHM}))[:16]
    path = cache_dir() / "neighbours" / mlm.identity / f"{key}.json"
    stored: dict[str, list[str]] = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    missing = list(dict.fromkeys(t for t in texts if sha256_text(t) not in stored))
    if missing:
        made = neighbour_texts(mlm.model, mlm.tokenizer, missing, n_neighbours, swap_fraction, seed, batch_size,
                               progress)
        stored.update({sha256_text(text): found for text, found in zip(missing, made)})
        if is_main():
            atomic_write_text(path, json.dumps(stored, ensure_ascii=False))
    return [stored[sha256_text(t)] for t in texts]
