"""Loading a checkpoint safely: its kind, its identity, its tokenizer.

Safety rules: `trust_remote_code` stays off unless the user asks; pickle weights (*.bin, *.pt,
*.pth, *.ckpt) are refused unless the user allows them. Identity: `harness.model.identity` (weights,
tokenizer, config and kind). Integrity: a checkpoint whose weights leave any of the model's
tensors missing (so randomly initialised), hold tensors the model would silently drop, or give
another shape, and a checkpoint without a tokenizer, are user errors, not scores
(`check_load_report`). A checkpoint is a folder (config.json, weights, tokenizer files), a GGUF
file (`harness.model.gguf`), or `pretrained:<name>` (`harness.model.pretrained`).
"""

from __future__ import annotations

import functools
import json
import logging
import os
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from harness.core.errors import UserError, warn
from harness.core.io import (
    CONFIG_MAX_BYTES,
    TOKENIZER_MAX_BYTES,
    canonical_json,
    check_regular_file,
    read_regular_file,
    sha256_file,
    sha256_text,
)
from harness.core.model_types import LoadedModel, ModelIdentity, ModelKind
from harness.files.sources import first_line
from harness.model import gguf, served
from harness.model.attention import attention_implementation
from harness.model.identity import TOKENIZER_PATTERNS, config_sha256, files_sha256, model_identity, tokenizer_files
from harness.model.kinds import detect_kind_with_note, model_class, model_type_kind
from harness.model.pretrained import PREFIX, PRETRAINED, resolve_pretrained

log = logging.getLogger(__name__)

SAFE_WEIGHTS = ("*.safetensors",)
PICKLE_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt")
CONFIG_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                "special_tokens_map.json", "vocab.json", "vocab.txt", "merges.txt", "*.model",
                "added_tokens.json", "*.safetensors.index.json")


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
    # A built-in reference checkpoint: (build name, recipe digest). Its results are filed and shown
    # under the recipe, so a run on another machine replaces them (`harness.core.board_keys.board_key`).
    reference_recipe: tuple[str, str] | None = None
    # The GGUF file to load from the model folder or hub repo (`harness.model.gguf`); a `.gguf` given
    # as the model, or the only one in a folder without config.json, needs none.
    gguf_file: str | None = None
    # Score the checkpoint's untrained twin: its config and tokenizer with the architecture's own
    # initialization under this seed, in place of its weights (`random_twin`): a control, never the checkpoint.
    random_weights_seed: int | None = None
    # An OpenAI-compatible completions server that serves the model (`load_served`): `model` then names
    # the checkpoint whose tokenizer and config the server serves; its weights are neither read nor hashed.
    server: "ServerSpec | None" = None


@dataclass(frozen=True)
class ServerSpec:
    """Where a served model is (`--base-url`, `--served-model`), how long to wait for it (`--timeout`,
    `--max-retries`) and how many requests to keep in flight (`--num-concurrent`); lm-evaluation-harness's
    `local-completions` arguments of the same names."""

    base_url: str
    served_model: str | None = None
    api_key: str | None = None
    timeout_s: float = served.DEFAULT_TIMEOUT_S
    max_retries: int = served.DEFAULT_MAX_RETRIES
    batch_size: int = served.DEFAULT_BATCH_SIZE
    num_concurrent: int = 1


def looks_like_path(model: str) -> bool:
    """True for strings that can only be a local path (not a hub id such as `org/name`)."""
    return (model.startswith(("/", "./", "../", "~", ".\\")) or model.endswith(("/", os.sep))
            or model.count("/") > 1 or model in (".", ".."))


def resolve_local_folder(spec: ModelSpec, weights: bool = True) -> tuple[Path, bool, str | None]:
    """(folder, whether it came from the hub, resolved revision) for a local path, a hub id or a
    `pretrained:<name>` (`harness.model.pretrained`); its small files are checked (`check_checkpoint_files`).
    `weights=False`: of a hub id, only the config and tokenizer files are fetched."""
    path = Path(resolve_pretrained(spec.model)).expanduser()
    if path.exists():
        if not path.is_dir():
            raise UserError(f"model path is not a directory: {spec.model}")
        check_checkpoint_files(path)
        return path, False, spec.revision
    if looks_like_path(spec.model):
        raise UserError(f"model path does not exist: {spec.model}")
    folder, from_hub, revision = _download_from_hub(spec, weights)
    check_checkpoint_files(folder)
    return folder, from_hub, revision


def check_checkpoint_files(folder: Path) -> None:
    """A `UserError` unless every config and tokenizer file of the checkpoint (`CONFIG_FILES`), which
    membench or transformers reads, is a regular file (after following symlinks) of at most
    `CONFIG_MAX_BYTES` (config files) or `TOKENIZER_MAX_BYTES` (tokenizer files); see `harness.core.io`.
    The weight files are checked by `weight_files`."""
    tokenizer_names = {p for pattern in TOKENIZER_PATTERNS for p in folder.glob(pattern)}
    for path in sorted({p for pattern in CONFIG_FILES for p in folder.glob(pattern)}):
        if path in tokenizer_names:
            check_regular_file(path, TOKENIZER_MAX_BYTES, "tokenizer file")
        else:
            check_regular_file(path, CONFIG_MAX_BYTES, "checkpoint config file")


def _download_from_hub(spec: ModelSpec, weights: bool = True) -> tuple[Path, bool, str]:
    from huggingface_hub import snapshot_download

    patterns = list(CONFIG_FILES)
    if weights:
        patterns += list(SAFE_WEIGHTS) + (list(PICKLE_WEIGHTS) if spec.allow_pickle else [])
    if spec.trust_remote_code:
        patterns.append("*.py")
    try:
        folder = Path(snapshot_download(spec.model, revision=spec.revision, allow_patterns=patterns))
    except Exception as err:  # the hub client has many error types; all mean "could not get it"
        raise UserError(f"cannot fetch {spec.model!r} from the Hugging Face Hub (offline or unknown id?): "
                        f"{type(err).__name__}: {first_line(err)}") from None
    return folder, True, folder.name


def weight_files(folder: Path, allow_pickle: bool) -> list[Path]:
    """The weight files to hash and load, each a regular file (a symlink to a missing file or to a
    device such as /dev/zero is a `UserError`); refuses pickle-only checkpoints unless allowed."""
    safe = sorted(p for pattern in SAFE_WEIGHTS for p in folder.glob(pattern))
    if safe:
        for path in safe:
            check_regular_file(path, None, "weight file")
        return safe
    pickled = sorted(p for pattern in PICKLE_WEIGHTS for p in folder.glob(pattern))
    if pickled and not allow_pickle:
        names = ", ".join(p.name for p in pickled)
        raise UserError(f"{folder} has only pickle weights ({names}); loading them can run code: "
                        "pass --allow-pickle if you trust it")
    if not pickled:
        raise UserError(f"{folder} has no weight files (*.safetensors)")
    for path in pickled:
        check_regular_file(path, None, "weight file")
    return pickled


def read_config(folder: Path) -> dict:
    """config.json as a dictionary; a `UserError` when it is missing, not a regular file of at most
    `CONFIG_MAX_BYTES`, not a JSON object, or names its architectures as anything but a list of names."""
    config_path = folder / "config.json"
    if not os.path.lexists(config_path):
        raise UserError(f"{folder} is not a checkpoint: it has no config.json")
    raw = read_regular_file(config_path, CONFIG_MAX_BYTES, "config.json")
    try:
        config = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UserError(f"{config_path} is not valid JSON: {err}") from None
    if not isinstance(config, dict):
        raise UserError(f"{config_path} must hold a JSON object")
    architectures = config.get("architectures")
    if architectures is not None and not (isinstance(architectures, list)
                                          and all(isinstance(a, str) for a in architectures)):
        raise UserError(f"{config_path}: \"architectures\" must be a list of class names, not {architectures!r}")
    return config


def is_device_name(device: str) -> bool:
    """True for the devices `--device` takes: auto, cpu, cuda and cuda:N."""
    index = device.removeprefix("cuda:")
    return device in ("auto", "cpu", "cuda") or (index != device and index.isascii() and index.isdigit())


def resolve_device(device: str) -> str:
    """`auto`: cuda when CUDA is available, else cpu; cpu, cuda and cuda:N as they are, once checked
    (a `UserError` for another name, or a CUDA device this machine does not have)."""
    import torch

    if not is_device_name(device):
        raise UserError(f"unknown device {device!r}; choose cpu, cuda, cuda:N or auto")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device {device} requested but CUDA is not available")
    if device.startswith("cuda:") and int(device.removeprefix("cuda:")) >= torch.cuda.device_count():
        count = torch.cuda.device_count()
        raise UserError(f"--device {device}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}")
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


def text_config(model_config):
    """The configuration of a model's text part: the config itself, or its `text_config` (multimodal wrappers)."""
    getter = getattr(model_config, "get_text_config", None)
    return getter() if callable(getter) else model_config


def context_length(model_config) -> int | None:
    model_config = text_config(model_config)
    for attribute in ("n_positions", "max_position_embeddings", "n_ctx", "seq_length"):
        value = getattr(model_config, attribute, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def load_tokenizer(folder: Path, trust_remote_code: bool, gguf_file: str | None = None):
    """The checkpoint's tokenizer (from `gguf_file`'s metadata when given); a `UserError` when it has
    none or its vocabulary is empty."""
    from transformers import AutoTokenizer

    if gguf_file is None and not tokenizer_files(folder):
        raise UserError(f"{folder} has no tokenizer files ({', '.join(TOKENIZER_PATTERNS)}): "
                        "save the tokenizer the model was trained with into the checkpoint folder")
    where = folder / gguf_file if gguf_file else folder
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code,
                                                  **({"gguf_file": gguf_file} if gguf_file else {}))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise UserError(f"cannot load the tokenizer in {where}: {first_line(err) or type(err).__name__}") from None
    if len(tokenizer) - len(set(tokenizer.all_special_ids)) <= 0:
        raise UserError(f"the tokenizer in {where} has an empty vocabulary (only {len(tokenizer)} special tokens): "
                        "save the tokenizer the model was trained with into the checkpoint folder")
    if tokenizer.pad_token_id is None:
        # Pads are always masked out, so any id will do; reuse EOS (or id 0) without resizing the model.
        if tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        else:
            tokenizer.pad_token_id = 0
    return tokenizer


def default_name(model: str, from_hub: bool, folder: Path, gguf_file: str | None = None) -> str:
    """A model's display name unless the user gives one: the hub id, the local folder's name, or for a
    GGUF file its name without `.gguf` (after the hub id); a `pretrained:` folder is named by the hub
    id of its original (the wheel's folder name says nothing), as `membench run` names it."""
    declared = PRETRAINED.get(model.removeprefix(PREFIX)) if model.startswith(PREFIX) else None
    if declared is not None and not gguf_file:
        return declared.original
    if gguf_file:
        stem = Path(gguf_file).stem
        return f"{model}/{stem}" if from_hub else stem
    return model if from_hub else folder.resolve().name


def _listed(keys: list[str], first: int = 3) -> str:
    """`n tensors (a, b, c, ...)`: a count and the first few names."""
    more = ", ..." if len(keys) > first else ""
    return f"{len(keys)} tensor{'s' if len(keys) != 1 else ''} ({', '.join(keys[:first])}{more})"


def _part(key: str, prefix: str) -> str:
    """The first component of a tensor name below the base model's prefix (`bert.encoder.x` -> `encoder`)."""
    if prefix and key.startswith(prefix + "."):
        key = key[len(prefix) + 1:]
    return key.split(".")[0]


def check_load_report(model, report: dict, kind: ModelKind, source: str, gguf_file: str | None = None) -> None:
    """Log transformers' load report; a `UserError` when any tensor of the model did not come from the weights.

    transformers already leaves out what a class recreates itself (tied weights, non-persistent
    buffers, its `_keys_to_ignore_on_load_*` patterns). Two more things are allowed: weights of
    a head the model does not have (an MLM head when scoring as an encoder, BERT's next-sentence
    head when scoring as a masked LM), and a missing pooler of an encoder (membench never reads
    the pooler). Everything else missing is random, unexpected inside the model means the config
    describes a smaller model than the weights, and a shape mismatch means another config."""
    prefix = model.base_model_prefix
    base_parts = {name for name, _ in model.base_model.named_children()}
    missing = sorted(k for k in report["missing_keys"]
                     if not (kind is ModelKind.ENCODER and _part(k, prefix) == "pooler"))
    unexpected = sorted(k for k in report["unexpected_keys"] if _part(k, prefix) in base_parts)
    ignored = sorted((set(report["missing_keys"]) | set(report["unexpected_keys"])) - set(missing) - set(unexpected))
    mismatched = sorted(report["mismatched_keys"])
    tensors = set(model.state_dict())
    if missing or unexpected or mismatched:
        log.info("load report of %s: missing %s; unexpected %s; mismatched %s", source, missing, unexpected,
                 [m[0] for m in mismatched])
    else:
        log.info("load report of %s: all %d tensors loaded", source, len(tensors))
    if ignored:
        log.info("%s: not used when scoring as a %s model: %s", source, kind.value, ignored)
    where = f"cannot score {source} as a {kind.value} model:"
    # what describes the model's shape: config.json, or a GGUF file's own metadata
    described_by = "config.json" if gguf_file is None else f"the metadata of {gguf_file}"
    fix = ("use the config.json saved with these weights" if gguf_file is None else
           "a partial or damaged conversion?")
    if report["error_msgs"]:
        raise UserError(f"{where} loading the weights failed: {first_line(report['error_msgs'][0])}")
    if mismatched:
        name, stored, expected = mismatched[0]
        raise UserError(f"{where} the weights and {described_by} disagree on the shape of "
                        f"{_listed([m[0] for m in mismatched])} (first: weights {tuple(stored)}, config "
                        f"{tuple(expected)}): {fix}")
    if missing:
        if not tensors - set(report["missing_keys"]):
            example = "".join(f", e.g. {key}," for key in sorted(report["unexpected_keys"])[:1])
            hint = (f"the weights hold none of the model's tensors (their names{example} do not match "
                    f"{type(model).__name__}'s): is {described_by} from another model?")
        elif all(_part(k, prefix) not in base_parts for k in missing):
            hint = (f"the weights look like an encoder without its {kind.value} head: try --model-kind encoder, "
                    "or the checkpoint that has the head")
        else:
            hint = f"{described_by} describes a larger model than the weights hold (more layers?): {fix}"
        raise UserError(f"{where} the weights lack {_listed(missing)} of the model, which would be random; {hint}")
    if unexpected:
        raise UserError(f"{where} the weights hold {_listed(unexpected)} that the model has no place for; "
                        f"{described_by} describes a smaller model than the weights hold (fewer layers?): {fix}")


def locate_gguf(spec: ModelSpec) -> tuple[Path, str, bool, str | None] | None:
    """(folder, GGUF file name, whether it came from the hub, resolved revision) when `spec` names a
    GGUF checkpoint (`harness.model.gguf`), else None."""
    path = Path(resolve_pretrained(spec.model)).expanduser()
    if path.is_file() and gguf.is_gguf_file(path):
        if spec.gguf_file not in (None, path.name):
            raise UserError(f"--gguf-file {spec.gguf_file} names another file than --model {spec.model}")
        return path.parent, path.name, False, spec.revision
    if path.is_dir():
        name = gguf.gguf_in_folder(path, spec.gguf_file)
        return (path, name, False, spec.revision) if name else None
    if spec.gguf_file is not None and not path.exists() and not looks_like_path(spec.model):
        gguf.check_gguf_name(spec.gguf_file)
        folder, revision = gguf.download_gguf(spec.model, spec.gguf_file, spec.revision)
        return folder, spec.gguf_file, True, revision
    if spec.gguf_file is not None and not path.exists():
        raise UserError(f"model path does not exist: {spec.model}")
    return None


@dataclass(frozen=True)
class Checkpoint:
    """Where a checkpoint's parts are and what it is, before its weights are loaded: a folder
    (config.json, weights, tokenizer files) or a GGUF file in `folder` (`gguf_file`)."""

    folder: Path
    from_hub: bool
    revision: str | None
    config: dict
    kind: ModelKind
    weight_names: list[str]
    load_arguments: dict  # for from_pretrained: use_safetensors, or gguf_file
    details: dict  # for the results file

    @property
    def gguf_file(self) -> str | None:
        return self.load_arguments.get("gguf_file")

    def identity(self) -> ModelIdentity:
        """The checkpoint's identity: for a folder, the sha256 of its weights, tokenizer and config with
        the kind (`model_identity`); for a GGUF file, the file's sha256 (weights, tokenizer and config
        are all in it) with the kind. Reads every weight byte: computed when asked, not on locating."""
        if self.gguf_file:
            digest = sha256_file(self.folder / self.gguf_file)
            return ModelIdentity(weights_sha256=digest, tokenizer_sha256=digest, config_sha256=digest,
                                 kind=self.kind.value)
        files = [self.folder / name for name in self.weight_names]
        return model_identity(self.folder, files, self.config, self.kind.value)


def locate_checkpoint(spec: ModelSpec) -> Checkpoint:
    """The checkpoint `spec` names, GGUF (`locate_gguf`) or folder, its config read and its kind known;
    what `load`, `membench export-lm-eval` and `import-lm-eval` all start from."""
    located = locate_gguf(spec)
    return _gguf_checkpoint(spec, *located) if located else _folder_checkpoint(spec)


def _folder_checkpoint(spec: ModelSpec) -> Checkpoint:
    """A checkpoint folder: config.json, safetensors (or allowed pickle) weights, tokenizer files."""
    folder, from_hub, revision = resolve_local_folder(spec)
    config = read_config(folder)
    files = weight_files(folder, spec.allow_pickle)
    kind, note = (spec.kind, None) if spec.kind else detect_kind_with_note(config)
    if note:
        warn(f"{spec.model}: {note}")
    return Checkpoint(folder, from_hub, revision, config, kind, [p.name for p in files],
                      {"use_safetensors": files[0].suffix == ".safetensors"}, {})


def _gguf_checkpoint(spec: ModelSpec, folder: Path, name: str, from_hub: bool, revision: str | None) -> Checkpoint:
    """A GGUF file (`harness.model.gguf`): config and tokenizer from its metadata."""
    from transformers import AutoConfig

    path = folder / name
    facts = gguf.read_facts(path)
    try:
        parsed = AutoConfig.from_pretrained(folder, gguf_file=name)
        config = parsed.to_dict()
    except (ValueError, OSError, RuntimeError, KeyError, NotImplementedError) as err:
        raise UserError(f"cannot load {spec.model}: transformers cannot read {name} (architecture {facts.architecture}"
                        f", {facts.quantization}): {type(err).__name__}: {first_line(err)}") from None
    kind = spec.kind or model_type_kind(config.get("model_type"), config)
    if kind is None:
        raise UserError(f"cannot load {spec.model}: transformers reads its GGUF architecture {facts.architecture} as "
                        f"{config.get('model_type')}, of no kind membench scores: pass --model-kind")
    details = {"format": "gguf", "gguf_architecture": facts.architecture, "quantization": facts.quantization}
    # the parsed config goes to from_pretrained too: each parse reads every key of the file (seconds
    # for a 49k-token vocabulary)
    arguments = {"gguf_file": name, "config": parsed, **gguf.dequantizing_config(name)}
    return Checkpoint(folder, from_hub, revision, config, kind, [name], arguments, details)


@contextmanager
def _gguf_bar_follows_transformers():
    """transformers' GGUF reader draws its own tqdm bar while it dequantizes, deaf to
    `transformers.logging.disable_progress_bar()` (which `membench` calls unless -v): while
    transformers' bars are off, that one is too."""
    from transformers import modeling_gguf_pytorch_utils as reader
    from transformers.utils import logging as transformers_logging

    bar = getattr(reader, "tqdm", None)
    if bar is None or transformers_logging.is_progress_bar_enabled():
        yield
        return
    reader.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        reader.tqdm = bar


def state_sha256(model) -> str:
    """sha256 over the model's state dict: each entry's name, dtype, shape and bytes, in name order."""
    import hashlib

    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(f"{name} {tensor.dtype} {tuple(tensor.shape)}\n".encode())
        digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def random_twin(model, identity: ModelIdentity, seed: int) -> tuple[object, ModelIdentity, dict]:
    """The untrained twin of a loaded checkpoint: the same class, config (so the same architecture,
    sizes and dtype) and tokenizer, its parameters drawn by the class's own initialization (its
    constructor's `post_init`) under `torch.manual_seed(seed)` on the CPU. The control that a score needs a
    model that has learned: a pretrained LM's StereoSet LMS far above 50, its twin's near 50.
    Its identity's weights part is the sha256 of the drawn parameters (`state_sha256`), so it is
    never the checkpoint's row, and the results file records the seed and the checkpoint's weights."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        twin = type(model)(model.config).to(model.dtype)
    twin_identity = ModelIdentity(weights_sha256=state_sha256(twin), tokenizer_sha256=identity.tokenizer_sha256,
                                  config_sha256=identity.config_sha256, kind=identity.kind)
    return twin, twin_identity, {"random_weights": {"seed": seed, "of_weights_sha256": identity.weights_sha256,
                                                    "init": "constructor"}}


def load(spec: ModelSpec) -> LoadedModel:
    """Load the checkpoint described by `spec` onto its device, in eval mode (a served one: `load_served`)."""
    from safetensors import SafetensorError

    if spec.server is not None:
        return load_served(spec)
    checkpoint = locate_checkpoint(spec)
    folder, config, kind = checkpoint.folder, checkpoint.config, checkpoint.kind
    device = resolve_device(spec.device)
    torch_dtype = resolve_dtype(spec.dtype, device, config)
    tokenizer = load_tokenizer(folder, spec.trust_remote_code, checkpoint.gguf_file)
    placement = {"device_map": spec.device_map} if spec.device_map else {}
    # 16-bit on the CPU under pinned kernels: eager attention (harness/model/attention.py)
    attention = None if spec.device_map else attention_implementation(device, str(torch_dtype).removeprefix("torch."))
    placement |= {"attn_implementation": attention} if attention else {}
    try:
        with _gguf_bar_follows_transformers() if checkpoint.gguf_file else nullcontext():
            model, report = model_class(kind, config).from_pretrained(
                folder, dtype=torch_dtype, trust_remote_code=spec.trust_remote_code, output_loading_info=True,
                ignore_mismatched_sizes=True,  # mismatches are reported, then refused below
                **checkpoint.load_arguments, **placement,
            )
    except (ValueError, OSError, RuntimeError, SafetensorError, KeyError, NotImplementedError) as err:
        raise UserError(f"cannot load {spec.model} ({', '.join(checkpoint.weight_names)}) as a {kind.value} model: "
                        f"{type(err).__name__}: {first_line(err)}") from None
    check_load_report(model, report, kind, spec.model, checkpoint.gguf_file)
    identity, twin = checkpoint.identity(), {}
    if spec.random_weights_seed is not None:
        model, identity, twin = random_twin(model, identity, spec.random_weights_seed)
    if spec.device_map:
        model.eval()
        device = ",".join(sorted({str(p.device) for p in model.parameters()}))  # where the layers went
    else:
        model.to(device).eval()
    name = spec.name or default_name(spec.model, checkpoint.from_hub, folder, checkpoint.gguf_file)
    if twin:
        name = spec.name or f"{name}-untrained-seed{spec.random_weights_seed}"
    return LoadedModel(
        model=model, tokenizer=tokenizer, kind=kind, name=name, source=spec.model, revision=checkpoint.revision,
        identity=identity.identity, identity_parts=identity, from_hub=checkpoint.from_hub, device=device,
        dtype=str(torch_dtype).removeprefix("torch."), context_length=context_length(model.config),
        info={"architectures": config.get("architectures"), "model_type": config.get("model_type"),
              "weight_files": checkpoint.weight_names, **checkpoint.details,
              **({"device_map": spec.device_map} if spec.device_map else {}), **twin,
              **({"pruning": config["membench_pruning"]} if "membench_pruning" in config else {}),
              **({"reference_recipe": {"build": spec.reference_recipe[0], "digest": spec.reference_recipe[1]}}
                 if spec.reference_recipe else {})},
    )


# Texts a served model's tokenizer must split as the local one does (`CompletionsClient.check_tokenizer`):
# spaces, digits, punctuation, an URL, accents, Japanese and an emoji, where tokenizers tend to differ.
TOKENIZER_PROBES = (
    "The quick brown fox jumps over the lazy dog.",
    "  Two spaces, a tab\tand a newline\nin 2026: 3.14159 x 1,000,000 = 3141590?!",
    "https://example.com/a?b=c&d=e#f (e-mail: someone@example.org)",
    "Café naïve résumé Zürich — “quoted” ‘text’ …",
    "東京都の新聞記事は有料会員限定です。",
    "emoji 🙂 and symbols <>{}[]|\\~^",
)


def load_served(spec: ModelSpec) -> LoadedModel:
    """A model on an OpenAI-compatible completions server (`spec.server`), to be scored through it
    (`harness.model.served.CompletionsClient`): the tokenizer and config come from `spec.model` (a
    folder or hub id; its weights are not read), the server must tokenize as that tokenizer does
    (`TOKENIZER_PROBES`), and serve a causal LM. The identity hashes what can be known: what the server
    says of the model (GET /models), the tokenizer and the config; not the weights, which the server
    does not show (`served_identity`)."""
    server = spec.server
    mixed = [flag for flag, value in (("--random-weights", spec.random_weights_seed is not None),
                                      ("--device-map", spec.device_map), ("--gguf-file", spec.gguf_file),
                                      ("--dtype", spec.dtype != "auto")) if value]
    if mixed:
        raise UserError(f"{mixed[0]} sets how membench loads weights; with --base-url the server holds them")
    folder, from_hub, revision = resolve_local_folder(spec, weights=False)  # the server has the weights
    config = read_config(folder)
    kind = spec.kind or detect_kind_with_note(config)[0]
    if kind is not ModelKind.CAUSAL_LM:
        raise UserError(f"--base-url scores causal LMs through a completions server; {spec.model} is a {kind.value} model")
    tokenizer = load_tokenizer(folder, spec.trust_remote_code)
    client = served.CompletionsClient(server.base_url, server.served_model, api_key=server.api_key,
                                      timeout_s=server.timeout_s, max_retries=server.max_retries,
                                      batch_size=server.batch_size, num_concurrent=server.num_concurrent)
    # the model's own context, as in-process (multimodal wrappers keep it in their text config)
    client.model_context = context_length(SimpleNamespace(**config.get("text_config", config)))
    models = client.served_models()
    entry = next((m for m in models if m.id == client.model), None)
    if entry is None:
        listed = ", ".join(m.id for m in models) or "none"
        raise UserError(f"the server at {client.base_url} does not serve {client.model!r} (it serves {listed})")
    client.check_tokenizer(tokenizer, list(TOKENIZER_PROBES))
    identity = served_identity(entry, folder, config, kind)
    details = {"engine": "local-completions", "base_url": client.base_url, "served_model": entry.as_dict(),
               "tokenizer_source": spec.model, "weights": "not hashed: the server does not show them"}
    return LoadedModel(
        model=client, tokenizer=tokenizer, kind=kind, name=spec.name or entry.id.rstrip("/").rsplit("/", 1)[-1],
        source=f"{client.base_url} ({entry.id})", revision=revision, identity=identity.identity,
        identity_parts=identity, from_hub=from_hub, device="server", dtype="served",
        context_length=client.context_length(),
        info={"architectures": config.get("architectures"), "model_type": config.get("model_type"), **details},
        engine="local-completions")


def served_identity(entry: served.ServedModel, folder: Path, config: dict, kind: ModelKind) -> ModelIdentity:
    """A served model's identity (`harness.model.identity`'s formula, the weights' place taken by what the
    server reveals): weights_sha256 = sha256(canonical_json(the GET /models entry)), then the tokenizer
    files, the config and the kind. Not a hash of weights: results files record it as identity kind
    `served`, and the board marks the row (`leaderboard.render.SERVED_MARK`)."""
    return ModelIdentity(weights_sha256=sha256_text(canonical_json(entry.as_dict())),
                         tokenizer_sha256=files_sha256(tokenizer_files(folder)), config_sha256=config_sha256(config),
                         kind=kind.value)
