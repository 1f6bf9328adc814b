"""Loading a checkpoint safely: its kind, its identity, its tokenizer.

Safety rules: `trust_remote_code` stays off unless the user asks; pickle weights (*.bin, *.pt,
*.pth, *.ckpt) are refused unless the user allows them. Identity: the sha256 of the weight files
for a local checkpoint, the resolved commit for a hub checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from harness.data import first_line
from harness.errors import UserError
from harness.io import sha256_file, sha256_text

log = logging.getLogger(__name__)

SAFE_WEIGHTS = ("*.safetensors",)
PICKLE_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt")
CONFIG_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                "special_tokens_map.json", "vocab.json", "vocab.txt", "merges.txt", "*.model",
                "added_tokens.json", "*.safetensors.index.json")


class ModelKind(str, Enum):
    CAUSAL_LM = "causal-lm"
    MASKED_LM = "masked-lm"
    SEQ2SEQ = "seq2seq"
    TOKEN_CLASSIFIER = "token-classifier"
    ENCODER = "encoder"


# Suffix of `config.architectures[0]` -> kind; first match wins.
_ARCHITECTURE_SUFFIXES = (
    ("ForCausalLM", ModelKind.CAUSAL_LM),
    ("LMHeadModel", ModelKind.CAUSAL_LM),
    ("ForMaskedLM", ModelKind.MASKED_LM),
    ("ForTokenClassification", ModelKind.TOKEN_CLASSIFIER),
    ("ForConditionalGeneration", ModelKind.SEQ2SEQ),
    ("ForSeq2SeqLM", ModelKind.SEQ2SEQ),
)


@dataclass(frozen=True)
class ModelSpec:
    """What the user asked to load."""

    model: str
    revision: str | None = None
    kind: ModelKind | None = None
    device: str = "auto"
    dtype: str = "auto"
    trust_remote_code: bool = False
    allow_pickle: bool = False
    name: str | None = None
    # `from_pretrained(device_map=...)`, e.g. "auto": accelerate spreads the layers over the GPUs
    # (and CPU) for a model larger than one device; `device` then only picks the `auto` dtype.
    device_map: str | None = None


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
    identity_kind: str
    device: str
    dtype: str
    context_length: int | None
    info: dict = field(default_factory=dict)


def detect_kind(config: dict) -> ModelKind:
    """The model kind from a checkpoint's config.json dictionary."""
    for architecture in config.get("architectures") or []:
        for suffix, kind in _ARCHITECTURE_SUFFIXES:
            if architecture.endswith(suffix):
                if kind is ModelKind.SEQ2SEQ and not config.get("is_encoder_decoder", True):
                    continue
                return kind
    if config.get("is_encoder_decoder"):
        return ModelKind.SEQ2SEQ
    return ModelKind.ENCODER


def looks_like_path(model: str) -> bool:
    """True for strings that can only be a local path (not a hub id such as `org/name`)."""
    return (model.startswith(("/", "./", "../", "~", ".\\")) or model.endswith(("/", os.sep))
            or model.count("/") > 1 or model in (".", ".."))


def resolve_local_folder(spec: ModelSpec) -> tuple[Path, str, str | None]:
    """(folder, identity kind, resolved revision) for a local path or a hub id."""
    path = Path(spec.model).expanduser()
    if path.exists():
        if not path.is_dir():
            raise UserError(f"model path is not a directory: {spec.model}")
        return path, "weights-sha256", spec.revision
    if looks_like_path(spec.model):
        raise UserError(f"model path does not exist: {spec.model}")
    return _download_from_hub(spec)


def _download_from_hub(spec: ModelSpec) -> tuple[Path, str, str]:
    from huggingface_hub import snapshot_download

    patterns = list(CONFIG_FILES) + list(SAFE_WEIGHTS) + (list(PICKLE_WEIGHTS) if spec.allow_pickle else [])
    if spec.trust_remote_code:
        patterns.append("*.py")
    try:
        folder = Path(snapshot_download(spec.model, revision=spec.revision, allow_patterns=patterns))
    except Exception as err:  # the hub client has many error types; all mean "could not get it"
        raise UserError(f"cannot fetch {spec.model!r} from the Hugging Face Hub (offline or unknown id?): "
                        f"{type(err).__name__}: {first_line(err)}") from None
    return folder, "hub-commit", folder.name


def weight_files(folder: Path, allow_pickle: bool) -> list[Path]:
    """The weight files to hash and load; refuses pickle-only checkpoints unless allowed."""
    safe = sorted(p for pattern in SAFE_WEIGHTS for p in folder.glob(pattern))
    if safe:
        return safe
    pickled = sorted(p for pattern in PICKLE_WEIGHTS for p in folder.glob(pattern))
    if pickled and not allow_pickle:
        names = ", ".join(p.name for p in pickled)
        raise UserError(f"{folder} has only pickle weights ({names}); loading them can run code: "
                        "pass --allow-pickle if you trust it")
    if not pickled:
        raise UserError(f"{folder} has no weight files (*.safetensors)")
    return pickled


def weights_identity(files: list[Path]) -> str:
    """sha256 of the single weight file, or of the lines `<name> <sha256>` of all of them, sorted."""
    digests = [(p.name, sha256_file(p)) for p in files]
    if len(digests) == 1:
        return digests[0][1]
    return sha256_text("".join(f"{name} {digest}\n" for name, digest in sorted(digests)))


def read_config(folder: Path) -> dict:
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise UserError(f"{folder} is not a checkpoint: it has no config.json")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UserError(f"{config_path} is not valid JSON: {err}") from None
    if not isinstance(config, dict):
        raise UserError(f"{config_path} must hold a JSON object")
    return config


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device {device} requested but CUDA is not available")
    if device != "cpu" and not device.startswith("cuda"):
        raise UserError(f"unknown device {device!r}; choose cpu, cuda or auto")
    return device


def resolve_dtype(dtype: str, device: str, config: dict):
    """float32 on CPU for `auto`; on CUDA the checkpoint's own dtype (float32 when it names none)."""
    import torch

    names = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype == "auto":
        if device == "cpu":
            return torch.float32
        declared = config.get("torch_dtype") or config.get("dtype") or "float32"
        return names.get(str(declared), torch.float32)
    if dtype not in names:
        raise UserError(f"unknown dtype {dtype!r}; choose auto, float32, bfloat16 or float16")
    return names[dtype]


def _auto_class(kind: ModelKind):
    import transformers

    return {
        ModelKind.CAUSAL_LM: transformers.AutoModelForCausalLM,
        ModelKind.MASKED_LM: transformers.AutoModelForMaskedLM,
        ModelKind.SEQ2SEQ: transformers.AutoModelForSeq2SeqLM,
        ModelKind.TOKEN_CLASSIFIER: transformers.AutoModelForTokenClassification,
        ModelKind.ENCODER: transformers.AutoModel,
    }[kind]


def context_length(model_config) -> int | None:
    for attribute in ("n_positions", "max_position_embeddings", "n_ctx", "seq_length"):
        value = getattr(model_config, attribute, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def load_tokenizer(folder: Path, trust_remote_code: bool):
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise UserError(f"cannot load the tokenizer in {folder}: {str(err).splitlines()[0]}") from None
    if tokenizer.pad_token_id is None:
        # Pads are always masked out, so any id will do; reuse EOS (or id 0) without resizing the model.
        if tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        else:
            tokenizer.pad_token_id = 0
    return tokenizer


def default_name(model: str, identity_kind: str, folder: Path) -> str:
    """A model's display name unless the user gives one: the hub id, or the local folder's name."""
    return model if identity_kind == "hub-commit" else folder.resolve().name


def load(spec: ModelSpec) -> LoadedModel:
    """Load the checkpoint described by `spec` onto its device, in eval mode."""
    from safetensors import SafetensorError

    folder, identity_kind, revision = resolve_local_folder(spec)
    config = read_config(folder)
    files = weight_files(folder, spec.allow_pickle)
    identity = revision if identity_kind == "hub-commit" else weights_identity(files)
    kind = spec.kind or detect_kind(config)
    device = resolve_device(spec.device)
    torch_dtype = resolve_dtype(spec.dtype, device, config)
    tokenizer = load_tokenizer(folder, spec.trust_remote_code)
    placement = {"device_map": spec.device_map} if spec.device_map else {}
    try:
        model = _auto_class(kind).from_pretrained(
            folder, dtype=torch_dtype, trust_remote_code=spec.trust_remote_code,
            use_safetensors=files[0].suffix == ".safetensors", **placement,
        )
    except (ValueError, OSError, RuntimeError, SafetensorError) as err:
        raise UserError(f"cannot load {spec.model} ({', '.join(p.name for p in files)}) as a {kind.value} model: "
                        f"{type(err).__name__}: "
                        f"{first_line(err)}") from None
    if spec.device_map:
        model.eval()
        device = ",".join(sorted({str(p.device) for p in model.parameters()}))  # where the layers went
    else:
        model.to(device).eval()
    name = spec.name or default_name(spec.model, identity_kind, folder)
    return LoadedModel(
        model=model, tokenizer=tokenizer, kind=kind, name=name, source=spec.model, revision=revision,
        identity=identity, identity_kind=identity_kind, device=device,
        dtype=str(torch_dtype).removeprefix("torch."), context_length=context_length(model.config),
        info={"architectures": config.get("architectures"), "model_type": config.get("model_type"),
              "weight_files": [p.name for p in files],
              **({"device_map": spec.device_map} if spec.device_map else {}),
              **({"pruning": config["membench_pruning"]} if "membench_pruning" in config else {})},
    )
