"""A model's identity: everything in a checkpoint that can change a score, as one sha256.

identity = sha256(canonical_json({"weights": weights_sha256, "tokenizer": tokenizer_sha256,
                                  "config": config_sha256, "kind": kind}))

- weights: `weights_sha256` of the weight files (the same for a local folder and a hub snapshot;
  the hub commit is recorded beside it as the revision),
- tokenizer: sha256 of the sorted (name, sha256) pairs of the tokenizer files present,
- config: sha256 of config.json's canonical JSON, without the keys that only record who saved it,
- kind: the model kind the checkpoint is scored as (`--model-kind` or the detected one).

The results cache, the results file name and the leaderboard's model key all use it, so equal
weights with another tokenizer, config or kind are another model everywhere.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.io import canonical_json, sha256_file, sha256_text
from harness.core.model_types import ModelIdentity

TOKENIZER_PATTERNS = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.*",
                      "merges.txt", "*.model", "added_tokens.json")
# config.json keys that say which library version saved the file, not what the model computes.
CONFIG_METADATA_KEYS = ("transformers_version", "_name_or_path")


def weights_identity(files: list[Path]) -> str:
    """sha256 of the single weight file, or of the lines `<name> <sha256>` of all of them, sorted."""
    digests = [(p.name, sha256_file(p)) for p in files]
    if len(digests) == 1:
        return digests[0][1]
    return sha256_text("".join(f"{name} {digest}\n" for name, digest in sorted(digests)))


def tokenizer_files(folder: Path) -> list[Path]:
    """The tokenizer files present in `folder` (see `TOKENIZER_PATTERNS`), sorted by name."""
    found = {p for pattern in TOKENIZER_PATTERNS for p in Path(folder).glob(pattern) if p.is_file()}
    return sorted(found, key=lambda p: p.name)


def files_sha256(files: list[Path]) -> str:
    """sha256 of the canonical JSON of the sorted [name, sha256] pairs of `files`."""
    return sha256_text(canonical_json(sorted([p.name, sha256_file(p)] for p in files)))


def config_sha256(config: dict) -> str:
    """sha256 of a config.json dictionary's canonical JSON, without `CONFIG_METADATA_KEYS`."""
    return sha256_text(canonical_json({k: v for k, v in config.items() if k not in CONFIG_METADATA_KEYS}))


def model_identity(folder: Path, weights: list[Path], config: dict, kind: str) -> ModelIdentity:
    """The identity of the checkpoint in `folder` scored as `kind`."""
    return ModelIdentity(weights_sha256=weights_identity(weights),
                         tokenizer_sha256=files_sha256(tokenizer_files(folder)),
                         config_sha256=config_sha256(config), kind=kind)
