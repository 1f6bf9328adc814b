"""The membership attacks that need a second model (reference model, neighbourhood) and the inputs of
ReCaLL and DC-PDD this task chooses (ReCaLL's prefix, DC-PDD's corpus). Each attack takes the cut
texts to score (by key) and returns key -> score, higher = more likely a member; a text it cannot
score is left out (counted by the task). ReCaLL's, DC-PDD's and the gradient norm's scores:
`harness.scoring.membership`, shared with finetune_memorization. Formulas:
`harness.metrics.memorization`; the card gives sources.
"""

from __future__ import annotations

from pathlib import Path
from typing import Hashable

from harness.core.errors import UserError
from harness.core.io import read_jsonl_objects, read_utf8
from harness.core.model_types import LoadedModel
from harness.metrics import memorization as m
from harness.reference.corpus import corpus_of_data
from harness.scoring.causal import TokenScores, causal_token_logprobs
from tasks.mink_membership.data import CONTROL_SPLITS
from tasks.mink_membership.neighbours import cached_neighbours

Key = Hashable


def reference_scores(reference: LoadedModel, texts: dict[Key, str], target: dict[Key, TokenScores],
                     config, batch_size: int, progress) -> dict[Key, float]:
    """`ref`: the target's LOSS score minus the reference model's on the same text (its own
    tokenizer, the same first-token rule and sliding windows)."""
    keys = [k for k in texts if k in target]
    scored, _ = causal_token_logprobs(reference.model, reference.tokenizer, [texts[k] for k in keys],
                                      batch_size=batch_size, stride=config.stride, progress=progress,
                                      add_start=config.first_token == "score")
    return {k: m.reference_score(target[k].logprobs, s.logprobs) for k, s in zip(keys, scored) if len(s.logprobs)}


def neighbourhood_scores(target_model: LoadedModel, neighbour_model: LoadedModel, texts: dict[Key, str],
                         target: dict[Key, TokenScores], config, seed: int, batch_size: int,
                         progress) -> tuple[dict[Key, float], dict[Key, int]]:
    """`ne`: the text's LOSS score minus the mean LOSS score of its neighbours (`tasks.mink_membership.neighbours`,
    made by `neighbour_model`); also each text's number of neighbours (fewer than asked for when
    a short text has fewer distinct swaps)."""
    keys = [k for k in texts if k in target]
    neighbours = cached_neighbours(neighbour_model, [texts[k] for k in keys], config.neighbours,
                                   config.neighbour_swap_fraction, seed, batch_size * 4, progress)
    flat = [text for found in neighbours for text in found]
    scored, _ = causal_token_logprobs(target_model.model, target_model.tokenizer, flat, batch_size=batch_size,
                                      stride=config.stride, progress=progress,
                                      add_start=config.first_token == "score")
    out, counts, start = {}, {}, 0
    for k, found in zip(keys, neighbours):
        mine = [s.logprobs for s in scored[start:start + len(found)] if len(s.logprobs)]
        start += len(found)
        counts[k] = len(mine)
        if mine:
            out[k] = m.neighbourhood_score(target[k].logprobs, mine)
    return out, counts


def read_texts(path: Path) -> list[str]:
    """Texts of a file: JSONL rows with a string `text` field, or else one text per non-empty line."""
    if path.suffix in (".jsonl", ".json"):
        texts = []
        for number, row in read_jsonl_objects(path):
            if not isinstance(row.get("text"), str):
                raise UserError(f"{path}:{number}: missing string field 'text'")
            texts.append(row["text"])
        return texts
    return [line for line in read_utf8(path).splitlines() if line.strip()]


def recall_prefix(config, nonmembers: list[tuple[Key, str]]) -> tuple[str, list[Key]]:
    """ReCaLL's prefix P: the first `recall_shots` non-blank non-member texts (MIMIR: `data_nonmember[:num_shots]`)
    or texts of the file `recall_prefix` names, joined without separator (MIMIR); and the keys of
    the texts used (left out of the evaluation of ReCaLL)."""
    if config.recall_prefix == "nonmembers":
        shots = [(k, text) for k, text in nonmembers if text.strip()][: config.recall_shots]
        return "".join(text for _, text in shots), [k for k, _ in shots]
    path = Path(config.recall_prefix).expanduser()
    if not path.is_file():
        raise UserError(f"--recall-prefix: no such file: {config.recall_prefix}")
    texts = read_texts(path)[: config.recall_shots]
    if not texts:
        raise UserError(f"--recall-prefix: {config.recall_prefix} holds no text")
    return "".join(texts), []


def dc_pdd_corpus(config, nonmembers: list[str]) -> tuple[list[str], str]:
    """The reference corpus of DC-PDD's token frequencies and a description of it."""
    if config.dc_pdd_corpus == "nonmembers":
        return nonmembers, f"the data's {len(nonmembers)} non-member texts, whole"
    if config.dc_pdd_corpus == "outside":
        if config.data in CONTROL_SPLITS:
            raise UserError(f"--dc-pdd-corpus outside: only with a reference corpus as --data, not the control "
                            f"{config.data} (its non-members are not the corpus's); use nonmembers or a file")
        corpus = corpus_of_data(config.data)
        if corpus is None:
            raise UserError("--dc-pdd-corpus outside: only with a reference corpus as --data (its source's "
                            "documents beyond the corpus); give a file instead")
        texts = [text for _, text in corpus.load_source()[corpus.n_documents:]]
        return texts, f"the {len(texts)} documents of the {corpus.name} source beyond its first {corpus.n_documents}"
    path = Path(config.dc_pdd_corpus).expanduser()
    if not path.is_file():
        raise UserError(f"--dc-pdd-corpus: no such file: {config.dc_pdd_corpus}")
    texts = read_texts(path)
    if not texts:
        raise UserError(f"--dc-pdd-corpus: {config.dc_pdd_corpus} holds no text")
    return texts, f"{len(texts)} texts of {config.dc_pdd_corpus}"
