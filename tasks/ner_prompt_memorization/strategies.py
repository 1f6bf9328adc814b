"""Confidences of names in prompts, and the prompt strategies of Xia et al. 2024 built on them.

Confidence of a name in a prompt: the slot replaced by the name, the sentence run through the NER
model; per subword token of the name the max of P(l) over the labels l of the entity type X
(softmax in float64; `entities.entity_label_set`: max(P(B-X), P(I-X)) for a BIO model, as in the
paper; max(P(B-X), P(I-X), P(E-X), P(S-X)) for IOBES, likewise BILOU; P(X) for IO); the mean over
the name's tokens (float64).
M-MEM of a prompt: the share of (in-train, out-train) pairs whose in-train name is more confident,
ties 1/2 (`harness.metrics.memorization.preference_share`, from ranks).
What needs the model is here (the scoring stage); the arithmetic of the strategies on the recorded
confidences is in `report.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.metrics.memorization import preference_share
from harness.scoring.token_classes import span_label_probs
from tasks.ner_prompt_memorization.prompts import Prompt, fill, removable_tokens, remove_token, token_spans


class ConfidenceTable:
    """Confidence of each (prompt text, name), computed once, in batches, and kept: the mean over the
    name's subword tokens t of max over `entity_labels` l of P(l | t)."""

    def __init__(self, model, tokenizer, entity_labels: list[int], batch_size: int, progress: bool | None):
        self.model, self.tokenizer, self.entity_labels = model, tokenizer, entity_labels
        self.batch_size, self.progress = batch_size, progress
        self._values: dict[tuple[str, str], float] = {}

    @property
    def n_scored(self) -> int:
        return len(self._values)

    def get(self, texts: list[str], names: list[str]) -> np.ndarray:
        """Confidences, shape (len(texts), len(names)); scores only the pairs not seen before."""
        missing = list(dict.fromkeys((t, n) for t in texts for n in names if (t, n) not in self._values))
        if missing:
            filled = [fill(text, name) for text, name in missing]
            probs = span_label_probs(self.model, self.tokenizer, [s for s, _ in filled], [span for _, span in filled],
                                     self.entity_labels, self.batch_size, self.progress, desc="scoring names")
            for key, p in zip(missing, probs):
                self._values[key] = float(p.max(axis=1).mean())
        return np.array([[self._values[t, n] for n in names] for t in texts], dtype=np.float64)

    def m_mem(self, texts: list[str], in_names: list[str], out_names: list[str]) -> np.ndarray:
        """M-MEM of each prompt text."""
        return preference_share(self.get(texts, in_names), self.get(texts, out_names))


@dataclass(frozen=True)
class Step:
    """One prompt on a token-elimination trajectory."""

    text: str
    removed: str | None
    importance: float | None  # dev M-MEM before removing the token minus after
    dev_m_mem: float


def eliminate_tokens(table: ConfidenceTable, start: Prompt, keep_best: bool, dev_in: list[str],
                     dev_out: list[str]) -> list[Step]:
    """Prompt token elimination (PTE): from `start`, repeatedly remove one token besides the slot,
    until one is left. Importance of a token = dev M-MEM of the prompt minus dev M-MEM without the
    token. `keep_best` (from the best prompt): remove the least important token; otherwise (from
    the worst prompt): remove the most important one. All candidates of a step are scored together."""
    text = start.text
    current = float(table.m_mem([text], dev_in, dev_out)[0])
    steps = [Step(text, None, None, current)]
    while len(removable_tokens(text)) > 1:
        indices = removable_tokens(text)
        candidates = [remove_token(text, i) for i in indices]
        scores = table.m_mem(candidates, dev_in, dev_out)
        pick = int(np.argmax(scores) if keep_best else np.argmin(scores))
        a, b = token_spans(text)[indices[pick]]
        steps.append(Step(candidates[pick], text[a:b], current - float(scores[pick]), float(scores[pick])))
        text, current = candidates[pick], float(scores[pick])
    return steps


def mix_assignment(names: list[str], n_prompts: int, seed: int) -> dict[str, int]:
    """Mix-PT: each name gets one of the mix prompts, drawn with a seeded generator in name order."""
    draws = np.random.default_rng(seed).integers(0, n_prompts, size=len(names))
    return {name: int(k) for name, k in zip(names, draws)}

