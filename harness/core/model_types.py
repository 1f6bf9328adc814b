"""The types every layer shares about a model: its kind, its identity and a loaded model.

Loading lives in `harness.model.loading`, the identity's hashing in `harness.model.identity`; a
task sees only these types (`harness.core.task`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from harness.core.io import canonical_json, sha256_text


class ModelKind(str, Enum):
    CAUSAL_LM = "causal-lm"
    MASKED_LM = "masked-lm"
    SEQ2SEQ = "seq2seq"
    TOKEN_CLASSIFIER = "token-classifier"
    ENCODER = "encoder"


@dataclass(frozen=True)
class ModelIdentity:
    """The parts of a model's identity, each a sha256 (but `kind`), and their combined hash."""

    weights_sha256: str
    tokenizer_sha256: str
    config_sha256: str
    kind: str

    @property
    def identity(self) -> str:
        """sha256 of the canonical JSON of the four parts."""
        return sha256_text(canonical_json({"weights": self.weights_sha256, "tokenizer": self.tokenizer_sha256,
                                           "config": self.config_sha256, "kind": self.kind}))


@dataclass
class LoadedModel:
    """A model ready to score, with everything the results file says about it."""

    model: object
    tokenizer: object
    kind: ModelKind
    name: str
    source: str
    revision: str | None
    identity: str
    identity_parts: ModelIdentity
    from_hub: bool
    device: str
    dtype: str
    context_length: int | None
    info: dict = field(default_factory=dict)
    # How the model's passes run: "hf" (transformers, in this process; `model` is the torch module) or
    # "local-completions" (an OpenAI-compatible server; `model` is `harness.model.served.CompletionsClient`),
    # lm-evaluation-harness's names for the two.
    engine: str = "hf"

    @property
    def served(self) -> bool:
        """Whether the model runs on a server: only what prompt log-probs and generations compute can be scored."""
        return self.engine != "hf"

    @property
    def weights_sha256(self) -> str:
        """The sha256 of the weight files alone (`harness.model.identity.weights_identity`)."""
        return self.identity_parts.weights_sha256
