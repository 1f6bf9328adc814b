"""Null bands of the untrained twins (issue 77): on a checkpoint whose members and non-members are exchangeable,
every per-text score's ROC AUC is a draw from its null distribution, and `membench run` checks that each lies
inside its band.

Exchangeable by construction (`NULLS`):
- mink_membership on the causal builds' untrained checkpoints (`xsum-gpt2-e00`, `ja-gpt2-e00`): weights drawn
  before any training, a tokenizer fitted on documents outside the split (`BuildConfig.tokenizer_on`);
- mink_membership on the real models (`REAL_MODELS`, their committed files): the reference XSum split is a
  seeded random draw from one pool, which no training can tell apart;
- finetune_memorization's copy before fine-tuning (epoch 0) on every model: the split is a seeded random draw
  the checkpoint has not been trained on;
- ner_prompt_memorization on the untrained NER model (`ner-bert-e00`): M-MEM is the AUC of in-train against
  out-of-train names on the test names (a prompt chosen on the dev names is a fixed score on them), its
  tokenizer built from in- and out-of-train names alike.

Under that null a fixed score's AUC over n1 members and n0 non-members is the Mann-Whitney U / (n1 n0), with mean
1/2 and variance (n1 + n0 + 1) / (12 n1 n0) (Mann & Whitney 1947; ties only narrow it). The band is
1/2 +- z sd with z = Phi^-1(1 - alpha / (2 K)), K the AUCs read on the checkpoint's task (Bonferroni): a correct
build fails the check with probability at most alpha (`NULL_BAND_ALPHA`), whatever the dependence between its
scores. n1 and n0 are the task's counts, scaled to the score's own n where an attack scored fewer texts (ReCaLL
past the context, its prefix's own text). A selected score (`min_k_best`: the best k on these very texts) is no
fixed score and is not read. The blind baselines' out-of-fold scores were fitted on the other folds' labels,
which moves their null below 1/2 (`blind_bow` 0.434 on the reference split); the band holds them too, and their
readings show how near its edge they come.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from tabulate import tabulate

from harness.core.results import Metric, ResultsFile, TaskEntry
from harness.reference.controls import GEMMA, SMOLLM2, control_name

NULL_BAND_ALPHA = 0.01  # the chance that a correct build's twin fails the check, per checkpoint and task
SELECTED = "_best"  # a score name ending so is chosen on the evaluation texts


@dataclass(frozen=True)
class NullSpec:
    """Which AUCs of `task` are nulls: on the models `models` (control names; empty: every model), metric
    `metric` with the tag and value `fixed` where given (finetune's epoch 0), named by tag `label`, over the
    members and non-members counted at `counts` (format fields: the metric's tags); `n_counts_texts`: the metric's
    n counts the texts it was computed on (an attack that scored fewer), not pairs (M-MEM's n1 n0); a label
    ending in `selected` names a score chosen on these very texts, not read (NER's `opt_best` was chosen on the
    dev names: a fixed score on the test names)."""

    task: str
    models: tuple[str, ...]
    metric: str
    label: str
    counts: tuple[str, str]
    fixed: tuple[str, str] | None = None
    n_counts_texts: bool = True
    selected: str | None = SELECTED

    def applies(self, model: str) -> bool:
        return not self.models or model in self.models

    def reads(self, metric: Metric) -> bool:
        if metric.name != self.metric or metric.value is None or self.label not in metric.tags:
            return False
        if self.selected is not None and metric.tags[self.label].endswith(self.selected):
            return False
        return self.fixed is None or metric.tags.get(self.fixed[0]) == self.fixed[1]

    def where(self, metric: Metric) -> str:
        """Where a reading was taken, for people: `loss at 128 words`, `min_k_20 before fine-tuning`."""
        if "length" in metric.tags:
            return f"{metric.tags[self.label]} at {metric.tags['length']} words"
        if self.fixed is not None:
            return f"{metric.tags[self.label]} before fine-tuning"
        return metric.tags[self.label]


REAL_MODELS = (SMOLLM2, GEMMA)  # their committed files are read, not run again (`controls.REAL_MODEL_EXPECTATIONS`)
NULLS = (
    NullSpec("mink_membership", ("xsum-gpt2-e00", "ja-gpt2-e00", *REAL_MODELS), "auc", "score",
             ("members@{length}", "nonmembers@{length}")),
    NullSpec("finetune_memorization", (), "auc", "score", ("members", "non_members"), fixed=("epoch", "0")),
    NullSpec("ner_prompt_memorization", ("ner-bert-e00",), "m_mem", "strategy", ("test_in", "test_out"),
             n_counts_texts=False, selected=None),
)


@dataclass(frozen=True)
class BandReading:
    """One score's AUC on a null checkpoint, with the texts it was computed on and its band's half-width (in AUC)."""

    model: str
    task: str
    where: str
    auc: float
    members: float
    non_members: float
    half_width: float

    @property
    def sd(self) -> float:
        return null_sd(self.members, self.non_members)

    @property
    def null_sds(self) -> float:
        """How far the AUC lies from 1/2, in null standard deviations (signed)."""
        return (self.auc - 0.5) / self.sd

    @property
    def band_sds(self) -> float:
        return self.half_width / self.sd

    @property
    def inside(self) -> bool:
        return abs(self.auc - 0.5) <= self.half_width


def null_sd(members: float, non_members: float) -> float:
    """The standard deviation of the AUC of a fixed score under exchangeability: sqrt((n1 + n0 + 1) / (12 n1 n0))."""
    return math.sqrt((members + non_members + 1) / (12 * members * non_members))


def band_z(count: int, alpha: float = NULL_BAND_ALPHA) -> float:
    """The band's half-width in null standard deviations for `count` AUCs read together."""
    return float(norm.isf(alpha / (2 * count)))


def entry_readings(model: str, entry: TaskEntry, spec: NullSpec, alpha: float) -> list[BandReading]:
    """The null readings of one finished task entry."""
    metrics = [m for m in entry.metrics if spec.reads(m)]
    found = []
    for metric in metrics:
        members, non_members = (entry.counts[key.format(**metric.tags)] for key in spec.counts)
        scale = (metric.n or members + non_members) / (members + non_members) if spec.n_counts_texts else 1.0
        members, non_members = members * scale, non_members * scale
        found.append(BandReading(model, spec.task, spec.where(metric), metric.value, members, non_members,
                                 band_z(len(metrics), alpha) * null_sd(members, non_members)))
    return found


def band_readings(files: list[ResultsFile], alpha: float = NULL_BAND_ALPHA,
                  versions: dict[str, int] | None = None) -> list[BandReading]:
    """Every null AUC (`NULLS`) among `files`; with `versions` (task -> version), of those task versions only."""
    found = []
    for results in files:
        model = control_name(results.model.name)
        for spec in NULLS:
            if spec.applies(model):
                found += [reading for entry in results.tasks if entry.name == spec.task and entry.status == "ok"
                          and (versions is None or versions.get(entry.name) == entry.version)
                          for reading in entry_readings(model, entry, spec, alpha)]
    return found


def band_report(files: list[ResultsFile], alpha: float = NULL_BAND_ALPHA, versions: dict[str, int] | None = None,
                tokenizers: dict[str, str] | None = None) -> tuple[str, list[BandReading]]:
    """A table, one row per null checkpoint and task (AUCs read, the band in null standard deviations, the reading
    farthest from 1/2, the outcome; an untrained twin not among `files` reads "not measured"), with a row per
    untrained causal checkpoint's tokenizer given in `tokenizers` (`tokenizer_readings`), and the readings outside
    their band."""
    readings = band_readings(files, alpha, versions) + tokenizer_readings(tokenizers or {}, alpha)
    groups: dict[tuple[str, str], list[BandReading]] = {
        (model, spec.task): [] for spec in NULLS for model in spec.models}
    for reading in readings:
        groups.setdefault((reading.model, reading.task), []).append(reading)
    rows = []
    for (model, task), mine in groups.items():
        if not mine:
            rows.append([model, task, "0", "", "", "not measured"])
            continue
        far = max(mine, key=lambda r: abs(r.null_sds))
        outside = [r for r in mine if not r.inside]
        rows.append([model, task, str(len(mine)), f"{far.band_sds:.2f}",
                     f"{far.where}: AUC {far.auc:.4f}, {far.null_sds:+.2f}",
                     "ok" if not outside else f"FAILED ({len(outside)} outside)"])
    table = tabulate(rows, headers=["null checkpoint", "task", "AUCs", "band (null sds)",
                                    "farthest from 0.5 (null sds)", "outcome"], disable_numparse=True)
    return table, [r for r in readings if not r.inside]


TOKENIZER_LENGTH = 128  # words: the headline length
TOKENIZER_TWINS = {"xsum-gpt2-e00": "xsum", "ja-gpt2-e00": "ja"}  # untrained checkpoint -> its reference corpus


def tokenizer_readings(folders: dict[str, str], alpha: float = NULL_BAND_ALPHA) -> list[BandReading]:
    """The untrained causal checkpoints' tokenizers alone (`folders`: checkpoint name -> its folder): the AUC of
    each reference text's token count at `TOKENIZER_LENGTH` words (`token_count_auc`), one reading with a band of
    its own (K = 1). A tokenizer fitted on the members reads -3.27 null sds (bench_tokenizer_leak), beyond its
    band of 2.58 but inside the 3.88 the model's 95 AUCs share: the check that names that leak."""
    from transformers import AutoTokenizer

    found = []
    for model, corpus in TOKENIZER_TWINS.items():
        if model in folders:
            auc, members, non_members = token_count_auc(AutoTokenizer.from_pretrained(folders[model]), corpus,
                                                        TOKENIZER_LENGTH)
            found.append(BandReading(model, "tokenizer", f"token count at {TOKENIZER_LENGTH} words", auc, members,
                                     non_members, band_z(1, alpha) * null_sd(members, non_members)))
    return found


def real_model_files(files: list[ResultsFile]) -> list[ResultsFile]:
    """The real models' files among `files` (the committed submissions), whose null readings the job checks too."""
    return [results for results in files if control_name(results.model.name) in REAL_MODELS]


def token_count_auc(tokenizer, corpus: str = "xsum", length: int = 128, seed: int = 0) -> tuple[float, int, int]:
    """The tokenizer's own reading, before any model: the ROC AUC (members positive) of the token count of each
    reference text's first `length` words (`truncate_words`; the whole text where shorter), with the members and
    non-members it was read on. Below 1/2: members take fewer tokens, as under a tokenizer fitted on them."""
    from harness.metrics.memorization import roc_auc
    from harness.reference.corpus import CORPORA, reference_corpus
    from harness.scoring.text import truncate_words

    documents = reference_corpus(seed, corpus)
    language = CORPORA[corpus].language
    texts = [truncate_words(d.text, length, language) or d.text for d in documents]
    counts = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    labels = [d.member for d in documents]
    return float(roc_auc(np.array(labels), np.array(counts))), sum(labels), len(labels) - sum(labels)
