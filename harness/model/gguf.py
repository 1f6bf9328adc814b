"""GGUF checkpoints: llama.cpp's single-file format, weights (usually quantized) with the config and
the tokenizer in its metadata.

transformers reads them (`from_pretrained(folder, gguf_file=NAME)`), dequantizing every tensor with
the `gguf` library (NumPy code: the same numbers on every CPU) into the requested dtype. membench
takes one where it takes a checkpoint:

- `--model FILE.gguf`; a folder that holds exactly one `.gguf` and no config.json; a folder or a hub
  repo with `--gguf-file NAME` (a hub repo: only that file is downloaded).
- Identity: the file's sha256 stands for the weights, the tokenizer and the config alike, since the
  file holds all three; with the kind (`harness.model.identity`).
- Kind: the GGUF's `general.architecture` (llama, gemma3, t5, bert, ...), read as transformers' model
  type of that name.
- Recorded in the results file: the format, the file name, the architecture and the quantization
  (`general.file_type`, llama.cpp's `LlamaFileType`: Q4_1, Q4_K_M, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserError
from harness.core.io import check_regular_file
from harness.files.sources import first_line

SUFFIX = ".gguf"


@dataclass(frozen=True)
class GgufFacts:
    """What a GGUF file's metadata says about the model in it."""

    architecture: str  # general.architecture, e.g. llama
    quantization: str  # general.file_type by llama.cpp's name, e.g. Q4_K_M; "unknown" when absent


def is_gguf_file(path: Path) -> bool:
    return path.suffix.lower() == SUFFIX


def check_gguf_name(gguf_file: str) -> None:
    """A `UserError` unless `gguf_file` is a bare `.gguf` file name (no folder)."""
    if Path(gguf_file).name != gguf_file or not is_gguf_file(Path(gguf_file)):
        raise UserError(f"--gguf-file takes the name of a .gguf file, not {gguf_file!r}")


def gguf_in_folder(folder: Path, gguf_file: str | None) -> str | None:
    """The name of the GGUF file to load from `folder`: `gguf_file` (a `UserError` when it is not
    there), else the folder's only `.gguf` when it has no config.json; None for an ordinary
    checkpoint folder. Several `.gguf` files and no config.json: a `UserError` asking to pick one."""
    if gguf_file is not None:
        check_gguf_name(gguf_file)
        if not (folder / gguf_file).exists():
            found = ", ".join(sorted(p.name for p in folder.glob(f"*{SUFFIX}"))) or "none"
            raise UserError(f"{folder} has no {gguf_file} (its .gguf files: {found})")
        return gguf_file
    if (folder / "config.json").exists():
        return None
    found = sorted(p.name for p in folder.iterdir() if p.is_file() and is_gguf_file(p))
    if len(found) > 1:
        raise UserError(f"{folder} holds {len(found)} GGUF files ({', '.join(found)}): pick one with --gguf-file")
    return found[0] if found else None


def read_facts(path: Path) -> GgufFacts:
    """The architecture and quantization in a GGUF file's metadata; a `UserError` when the
    file is not a GGUF file the `gguf` library can read."""
    from gguf import GGUFReader, LlamaFileType

    check_regular_file(path, None, "GGUF file")
    try:
        fields = GGUFReader(path).fields
    except Exception as err:  # the reader raises ValueError, struct errors, numpy errors on a bad file
        raise UserError(f"cannot read {path} as a GGUF file: {type(err).__name__}: {first_line(err)}") from None

    def value(key: str):
        field = fields.get(key)
        return field.contents() if field is not None else None

    architecture = value("general.architecture")
    if not isinstance(architecture, str) or not architecture:
        raise UserError(f"{path}: the GGUF file names no general.architecture")
    file_type = value("general.file_type")
    try:
        quantization = LlamaFileType(int(file_type)).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except (TypeError, ValueError):
        quantization = "unknown"
    return GgufFacts(architecture=architecture, quantization=quantization)


def dequantizing_config(gguf_file: str) -> dict:
    """`from_pretrained` arguments that unpack every GGUF tensor into a dense one at load time.

    Newer transformers (GgufConfig) otherwise keep the weights in GGUF blocks where the `kernels`
    package has a matmul kernel for the device (other numbers than the dense weights every other
    machine gets), and even where they unpack every weight they leave a GGUF quantizer on the model,
    which `Trainer` refuses to fine-tune ("purely quantized models": privacy_extraction crashed on
    SmolLM2). With `dequantize=True` the model is a plain dense one, bit for bit the same weights
    (checked on SmolLM2-135M-Instruct and gemma-3-270m, 2026-11-26). Older transformers always
    dequantize and take no such argument ({})."""
    try:
        from transformers import GgufConfig
    except ImportError:
        return {}
    return {"quantization_config": GgufConfig(gguf_file=gguf_file, dequantize=True)}


def download_gguf(repo: str, gguf_file: str, revision: str | None) -> tuple[Path, str]:
    """(local folder, resolved revision) of `gguf_file` in the hub repo `repo`, downloaded alone;
    a `UserError` when the hub cannot be reached or lacks it."""
    from huggingface_hub import hf_hub_download

    try:
        path = Path(hf_hub_download(repo, gguf_file, revision=revision))
    except Exception as err:  # the hub client has many error types; all mean "could not get it"
        raise UserError(f"cannot fetch {gguf_file} of {repo!r} from the Hugging Face Hub (offline or unknown "
                        f"id?): {type(err).__name__}: {first_line(err)}") from None
    return path.parent, path.parent.name
