"""`membench reference build`: the reference causal LMs and their manifests.

From a reference corpus (members / non-members by a seeded draw), train a byte-level BPE tokenizer
on documents of the same source outside the corpus (`corpus.outside_documents`: neither a member nor
a non-member under any split) and a small GPT-2 on the member documents (each cut to its first
`max_words_per_document` words), and save safetensors checkpoints before training (epoch 0: the
negative control) and after each epoch in `epochs`. A baseline build trains the same model on the
non-members instead. The manifest names every member and non-member document, what was trained on and
how often, the text the tokenizer was fitted on, and the task settings (`data`, `language`) that
evaluate a checkpoint on its own corpus.

The tokenizer is part of the model: one fitted on the members tokenizes them into fewer tokens than
the non-members, and an untrained model with it is no null (issue 77: token-count AUC 0.37, DC-PDD
0.62, dataset inference rejects; `bench/bench_tokenizer_leak.py`). `tokenizer_on="trained"` fits it
on the trained texts instead, as membench's builds did before, for that bench.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

from harness.core.io import atomic_write_text, cache_dir, canonical_json, sha256_text
from harness.files.staging import make_staging, publish_folder
from harness.model.identity import weights_identity
from harness.model.loading import weight_files
from harness.reference import train
from harness.reference.corpus import (
    CORPORA,
    REFERENCE,
    corpus_record,
    corpus_sha256,
    outside_documents,
    reference_corpus,
)
from harness.run.reproducible import NUMERICS, with_reference_threads
from harness.scoring.text import truncate_words

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
# Epochs of the `ref` attack's reference model (trained outside the split): a model of the same
# text, not one that has memorized its own documents
OUTSIDE_EPOCHS = 5
# The reference masked LM's trained checkpoint (`mlm_build`): the neighbour model of mink_membership's `ne`.
MLM_CHECKPOINT = "mlm-bert-e05"
# mink_membership's scores from the target's own token log-probs: the attacks of the checkpoints no
# control reads the other attacks of (`BuildConfig.task_settings`)
TOKEN_SCORES = "loss,zlib,min_k,min_k_pp"
# The name suffix of a checkpoint's run with LoRA fine-tuning (`BuildConfig.variants`)
LORA_SUFFIX = "-lora"
# The beam width B of paywall_memorization's near-verbatim bound on the English untrained, 30-epoch and
# non-member checkpoints in `membench run` (off by default in `membench evaluate`). Cooper et al. 2026 use
# B = 20; on xsum-gpt2-e30 (2026-11-28, Xeon) B = 4, 8 and 20 gave the members' (1, 0.5)- and (100, 0.5)-
# extractable shares alike (0.03, 0.22; at 10^4 draws 0.335, 0.335, 0.34; mean bound 0.0468, 0.0473,
# 0.0479) and added 17, 24 and 42 s to its 7 s of paywall_memorization: B = 4 shows the same rates in
# the 15-minute job. On the member articles only (`near_verbatim_groups`): the board plots the members'
# rates of the three models; every article added 41, 26 and 17 s to e00, e30 and the twin in the job.
JOB_NEAR_VERBATIM_BEAM = 4


class Recipe:
    """What every reference build's config (a frozen dataclass) shares: its settings as a dict, a
    digest of them and of the pinned numerics they are trained under (`reproducible.NUMERICS`),
    and the cache folder named after both."""

    name: str

    def as_dict(self) -> dict:
        return asdict(self)

    def variants(self) -> tuple[tuple[str, dict[str, str]], ...]:
        """The runs `membench run` makes of each checkpoint, as (the suffix of the run's model name,
        settings added to the checkpoint's task settings): one, at the settings of `task_settings`."""
        return (("", {}),)

    def digest(self) -> str:
        return sha256_text(canonical_json({**self.as_dict(), "numerics": NUMERICS}))[:10]

    def folder_name(self) -> str:
        """`<build name>-<digest>`: the build's folder in the cache and in the shipped weights."""
        return f"{self.name}-{self.digest()}"

    def default_folder(self) -> Path:
        return cache_dir() / "reference" / self.folder_name()


@dataclass(frozen=True)
class BuildConfig(Recipe):
    """One reference build: which corpus, trained on which half, with which settings."""

    corpus: str = "xsum"
    # members / non_members: that half of the corpus's split; outside: as many documents of the
    # corpus's source outside the corpus (`corpus.outside_documents`), a reference model for `ref`
    train_on: Literal["members", "non_members", "outside"] = "members"
    train: train.TrainConfig = train.TrainConfig()
    # the texts the tokenizer is fitted on: the corpus's outside documents (cut as the trained texts are), so
    # that members and non-members are alike to the untrained checkpoint; or the trained texts themselves
    tokenizer_on: Literal["outside", "trained"] = "outside"

    @property
    def name(self) -> str:
        return f"{self.corpus}-gpt2" + {"members": "", "non_members": "-nonmembers", "outside": "-outside"}[self.train_on]

    @property
    def TASKS(self) -> tuple[str, ...]:
        """The tasks these checkpoints are controls for, the ones `membench run` evaluates on them:
        the memorization tasks on their own corpus, and for English builds the bias tasks (whose
        word lists and sentences are English). The `outside` build (the other builds' reference
        model: it learned text of the same source, never the split) is the reference checkpoint of
        finetune_memorization, which trains a copy of it on the split's members."""
        if self.train_on == "outside":
            return ("finetune_memorization",)
        bias = ("weat", "stereoset") if CORPORA[self.corpus].language == "en" else ()
        return ("mink_membership", "paywall_memorization") + bias

    def variants(self) -> tuple[tuple[str, dict[str, str]], ...]:
        """Besides the run at the tasks' defaults, the `outside` build (finetune_memorization's reference
        checkpoint) is run again with `--finetune-method lora` (its default recipe, name suffix `-lora`):
        the control that LoRA's recipe still measures memorization (issue 50, `controls.lora_expectations`)."""
        if self.train_on == "outside":
            return (("", {}), (LORA_SUFFIX, {"finetune_method": "lora"}))
        return super().variants()

    def task_settings(self, epoch: int | None = None) -> dict[str, str]:
        """Task settings that evaluate this build's checkpoints on its own corpus; with `epoch`, those
        of its checkpoint after that many epochs. A checkpoint between the untrained and the last
        one (members, 1 epoch) runs mink_membership's token-log-prob scores only, as the non-member
        baseline does (`TOKEN_SCORES`): no control reads its other attacks (`controls.EXPECTATIONS`
        read them on the untrained and the last checkpoint), and they took 40 of its 50 s of
        mink_membership in the 15-minute job (issue 29)."""
        data = REFERENCE if self.corpus == "xsum" else f"{REFERENCE}:{self.corpus}"
        settings = {"data": data, "language": CORPORA[self.corpus].language, "reference_seed": str(self.train.seed),
                    # mink_membership (issue 20): the attacks beyond the token log-probs at the board's
                    # length only (CPU time); DC-PDD's token frequencies from text outside the split
                    "attack_lengths": "128", "dc_pdd_corpus": "outside"}
        between = epoch is not None and min(self.train.epochs) < epoch < max(self.train.epochs)
        if self.train_on == "non_members" or between:  # the baseline of the headline and of paywall only
            settings["attacks"] = TOKEN_SCORES
        elif self.corpus == "xsum":  # its reference model, and the reference masked LM for neighbours
            settings |= {"reference_model": f"{REFERENCE}:{self.corpus}-gpt2-outside-e{OUTSIDE_EPOCHS:02d}",
                         "neighbour_model": f"{REFERENCE}:{MLM_CHECKPOINT}", "neighbours": "10"}
        if self.corpus == "xsum" and not between:  # paywall's near-verbatim bound: e00, e30 and the twin (issue 61)
            settings |= {"near_verbatim_beam": str(JOB_NEAR_VERBATIM_BEAM), "near_verbatim_groups": "members"}
        return settings


def reference_builds(quick: bool = False) -> list[BuildConfig]:
    """What `membench run` builds: English members (untrained, 1 and 30 epochs), the English
    non-member baseline (30 epochs), the English reference model of the `ref` attack (5 epochs
    on documents outside the corpus) and Japanese members (untrained, 1 and 30 epochs).

    The recipe (issue 18) is sized so that the 30-epoch models reproduce their members' continuations
    (paywall_memorization) far above the baseline, on 2 CPU cores in about a minute per build: 200
    members per corpus (`corpus.N_DOCUMENTS`), each its own training sequence from position 0
    (`train.training_sequences`), English members cut to their first 250 words (every paywall
    reference sentence starts before word 201) in a 512-token context that holds the public part
    and the generation (vocabulary 2,048: about 2 tokens per word); Japanese articles whole
    (at most about 250 tokens) in a 256-token context.

    `quick`: the faster English builds the tests use: members cut to their first 64 words in a
    160-token context, so their signal is measured on those 64 words.
    """
    english = train.TrainConfig()
    if quick:
        english = replace(english, max_words_per_document=64, context=160)
    japanese = train.TrainConfig(context=256, max_words_per_document=512)
    return [BuildConfig("xsum", "members", english),
            BuildConfig("xsum", "non_members", replace(english, epochs=(max(english.epochs),))),
            BuildConfig("xsum", "outside", replace(english, epochs=(OUTSIDE_EPOCHS,))),
            BuildConfig("ja", "members", japanese)]


def quick_config() -> BuildConfig:
    """The quick English member build (see `reference_builds`)."""
    return reference_builds(quick=True)[0]


def is_built(folder: Path, data_sha256: str, quiet: bool = False) -> bool:
    """True when `folder` holds every checkpoint of a build from the training data as it is now
    (the manifest's `corpus.sha256`); `quiet`: no warning when the data changed."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return False
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # replaced by another process just now
        return False
    if data["corpus"].get("sha256") != data_sha256:
        if not quiet:
            log.warning("the training data changed since %s was built; rebuilding", folder)
        return False
    return all((folder / c["folder"] / "config.json").is_file() for c in data["checkpoints"])


def read_manifest(folder: Path) -> dict:
    return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))


def checkpoint_folders(folder: Path) -> list[Path]:
    """The checkpoint folders of a build, untrained first."""
    return [folder / c["folder"] for c in read_manifest(folder)["checkpoints"]]


@with_reference_threads
def build(config: BuildConfig = BuildConfig(), folder: Path | None = None, force: bool = False) -> Path:
    """Build the reference checkpoints into `folder` (default: the cache); returns the folder."""
    folder = Path(folder) if folder else config.default_folder()
    if is_built(folder, corpus_sha256(config.corpus)) and not force:
        log.info("reference checkpoints already built in %s", folder)
        return folder
    started = time.perf_counter()
    cfg = config.train
    corpus = CORPORA[config.corpus]
    documents = reference_corpus(cfg.seed, config.corpus)
    trained = (outside_documents(config.corpus) if config.train_on == "outside"
               else [d for d in documents if d.member == (config.train_on == "members")])
    training_texts = [truncate_words(d.text, cfg.max_words_per_document, corpus.language) or d.text
                      for d in trained]
    tokenizer_texts = training_texts if config.tokenizer_on == "trained" else [
        truncate_words(d.text, cfg.max_words_per_document, corpus.language) or d.text
        for d in outside_documents(config.corpus)]
    tokenizer = train.train_tokenizer(tokenizer_texts, cfg.vocab_size)
    model = train.untrained_model(tokenizer, cfg)
    sequences = train.training_sequences(tokenizer, training_texts, cfg.context)
    staging = staging_folder(folder)
    checkpoints, losses = [], {}

    def save(epoch: int) -> None:
        checkpoints.append(save_checkpoint(model, tokenizer, staging / f"{config.name}-e{epoch:02d}", epoch, epoch))

    def on_epoch_end(epoch: int, loss: float) -> None:
        losses[epoch] = round(loss, 5)
        if epoch in cfg.epochs:
            save(epoch)

    if 0 in cfg.epochs:
        save(0)
    train.train(model, sequences, cfg, on_epoch_end)
    manifest = {
        "description": f"membench reference causal LMs: GPT-2 trained on the {config.train_on} of "
                       f"the {config.corpus} corpus only",
        "config": config.as_dict(),
        "corpus": {**corpus_record(config.corpus, corpus_sha256(config.corpus), len(documents)),
                   "split_seed": cfg.seed},
        "trained_on": config.train_on,
        "tasks": list(config.TASKS),
        "task_settings": config.task_settings(),
        "tokenizer_text": (f"the {len(tokenizer_texts)} trained texts" if config.tokenizer_on == "trained" else
                           f"the {len(tokenizer_texts)} documents of the source outside the corpus, cut as the "
                           "trained texts are (neither members nor non-members)"),
        "training_text": f"each trained document cut to its first {cfg.max_words_per_document} words, "
                         f"prefixed with {train.DOC_SEPARATOR}, cut to its first {cfg.context} tokens: one "
                         "sequence per document, starting at position 0; shuffled each epoch",
        "n_training_tokens": sum(len(ids) for ids in sequences),
        "n_documents_cut_to_context": sum(len(ids) + 1 > cfg.context for ids in
                                          tokenizer(training_texts, add_special_tokens=False)["input_ids"]),
        "members": [d.doc_id for d in documents if d.member],
        "non_members": [d.doc_id for d in documents if not d.member],
        "trained_documents": [d.doc_id for d in trained],
        "epoch_mean_loss": losses,
        "checkpoints": checkpoints,
        "build_seconds": round(time.perf_counter() - started, 1),
    }
    return publish(staging, folder, manifest, force)


def save_checkpoint(model, tokenizer, target: Path, epoch: int, times_seen: int) -> dict:
    """Save a checkpoint (safetensors + tokenizer) and return its manifest record."""
    train.save_checkpoint(model, tokenizer, target)
    return {"epoch": epoch, "folder": target.name, "times_each_trained_document_seen": times_seen,
            "weights_sha256": weights_identity(weight_files(target, False))}


def staging_folder(folder: Path) -> Path:
    """A fresh folder beside `folder` to build into (`staging.make_staging`), so a failed build leaves
    nothing behind: deleted when this process exits unpublished, or by a later run when it was killed."""
    return make_staging(folder.parent)


def publish(staging: Path, folder: Path, manifest: dict, force: bool = False) -> Path:
    """Write the manifest (with the pinned numerics it was trained under) into `staging` and move
    it to `folder` (`staging.publish_folder`), replacing an older build (`force`, or a build from
    other training data). A current build there is another process's build of the same recipe,
    published while this one trained: that one is kept and this one discarded."""
    manifest = {**manifest, "numerics": NUMERICS}
    atomic_write_text(staging / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    replace = force or not is_built(folder, manifest["corpus"]["sha256"], quiet=True)
    if publish_folder(staging, folder, replace=replace):
        log.info("built reference checkpoints in %s (%.0f s)", folder, manifest["build_seconds"])
    return folder
