"""`membench reference build`: the reference causal LMs and their manifest.

From the reference corpus (members / non-members by a seeded draw), train a byte-level BPE
tokenizer and a small GPT-2 on the member documents (each cut to its first
`max_words_per_document` words), and save safetensors checkpoints before training (epoch 0: the
negative control) and after each epoch in `epochs`. The manifest names every member and
non-member document and how often each checkpoint saw the members.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from harness.io import atomic_write_text, cache_dir, canonical_json, sha256_text
from harness.models import weight_files, weights_identity
from harness.reference import train
from harness.reference.corpus import XSUM_SOURCE, reference_corpus
from harness.text import truncate_words

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class BuildConfig:
    train: train.TrainConfig = train.TrainConfig()

    def as_dict(self) -> dict:
        return {"train": self.train.as_dict()}

    def digest(self) -> str:
        return sha256_text(canonical_json(self.as_dict()))[:10]


def quick_config() -> BuildConfig:
    """A faster build for tests: the same split and architecture, trained on each member's first
    64 words only with a 64-token context, so its signal is measured at L <= 64."""
    return BuildConfig(train=replace(train.TrainConfig(), max_words_per_document=64, context=64))


def default_folder(config: BuildConfig) -> Path:
    return cache_dir() / "reference" / f"xsum-gpt2-{config.digest()}"


def checkpoint_name(epoch: int) -> str:
    return f"xsum-gpt2-e{epoch:02d}"


def is_built(folder: Path) -> bool:
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return False
    data = json.loads(manifest.read_text(encoding="utf-8"))
    return all((folder / c["folder"] / "config.json").is_file() for c in data["checkpoints"])


def read_manifest(folder: Path) -> dict:
    return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))


def checkpoint_folders(folder: Path) -> list[Path]:
    """The checkpoint folders of a build, untrained first."""
    return [folder / c["folder"] for c in read_manifest(folder)["checkpoints"]]


def build(config: BuildConfig = BuildConfig(), folder: Path | None = None, force: bool = False) -> Path:
    """Build the reference checkpoints into `folder` (default: the cache); returns the folder."""
    folder = Path(folder) if folder else default_folder(config)
    if is_built(folder) and not force:
        log.info("reference checkpoints already built in %s", folder)
        return folder
    started = time.perf_counter()
    documents = reference_corpus(config.train.seed)
    members = [d for d in documents if d.member]
    cfg = config.train
    training_texts = [truncate_words(d.text, cfg.max_words_per_document) or d.text for d in members]
    tokenizer = train.train_tokenizer(training_texts, cfg.vocab_size)
    model = train.untrained_model(tokenizer, cfg)
    blocks = train.training_blocks(tokenizer, training_texts, cfg.context)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=_parent(folder)))
    checkpoints, losses = [], {}

    def save(epoch: int) -> None:
        target = staging / checkpoint_name(epoch)
        train.save_checkpoint(model, tokenizer, target)
        checkpoints.append({"epoch": epoch, "folder": target.name, "times_each_member_seen": epoch,
                            "weights_sha256": weights_identity(weight_files(target, False))})

    def on_epoch_end(epoch: int, loss: float) -> None:
        losses[epoch] = round(loss, 5)
        if epoch in cfg.epochs:
            save(epoch)

    save(0)
    train.train(model, blocks, cfg, on_epoch_end)
    manifest = {
        "description": "membench reference causal LMs: GPT-2 trained on the member documents only",
        "config": config.as_dict(),
        "corpus": {"source": XSUM_SOURCE.describe(), "license": XSUM_SOURCE.license,
                   "split_seed": cfg.seed, "n_documents": len(documents)},
        "training_text": f"each member document cut to its first {cfg.max_words_per_document} words, "
                         f"prefixed with {train.DOC_SEPARATOR}, concatenated, cut into "
                         f"{cfg.context}-token blocks, shuffled each epoch",
        "n_training_tokens": int(blocks.numel()),
        "members": [d.doc_id for d in members],
        "non_members": [d.doc_id for d in documents if not d.member],
        "epoch_mean_loss": losses,
        "checkpoints": checkpoints,
        "build_seconds": round(time.perf_counter() - started, 1),
    }
    atomic_write_text(staging / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    if folder.exists():
        shutil.rmtree(folder)
    staging.rename(folder)
    log.info("built reference checkpoints in %s (%.0f s)", folder, manifest["build_seconds"])
    return folder


def _parent(folder: Path) -> Path:
    folder.parent.mkdir(parents=True, exist_ok=True)
    return folder.parent
