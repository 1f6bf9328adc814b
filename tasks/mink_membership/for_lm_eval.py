"""The LOSS membership attack as an lm-evaluation-harness task (`loglikelihood_rolling`).

lm-eval returns a text's summed token log-probability (the first token conditioned on its prefix
token, BOS or else EOS), not per-token values, so of this task's scores only LOSS (Yeom et al.
2018; the mean token log-probability, `harness.metrics.memorization.loss_score`) can be computed there: each
document carries its token count under the export's tokenizer and `doc_item` divides. Min-K%,
Min-K%++ and zlib stay membench's own. AUC and TPR@FPR per prefix length are membench's
`roc_auc` and `tpr_at_fpr` (FPR < level, and FPR <= level as `..._inclusive`), over the finite
scores as in the task; the results import as the entry `loss_membership`. lm-eval always scores a
text's first token (conditioned on its prefix token), so only `first_token: score` exports.
"""

from __future__ import annotations

import numpy as np

from harness.core.errors import UserError
from harness.core.results import Headline
from harness.interop.lm_eval_export import ExportedMetric, LmEvalTask
from harness.metrics import memorization as m
from harness.scoring.text import truncate_words
from tasks.mink_membership.data import MembershipData

ENTRY = "loss_membership"


def export(task, data: MembershipData, config, tokenizer, context: int | None) -> LmEvalTask:
    """One document per (text, prefix length L) whose text has L words, with its token count."""
    if config.first_token != "score":
        raise UserError("export-lm-eval: lm-eval scores every token of a text (the first conditioned on its "
                        "prefix token), so --first-token skip cannot be exported; use --first-token score")
    docs = []
    for item in data.texts:
        for length in config.lengths:
            cut = truncate_words(item.text, length, config.language)
            if cut is not None:
                docs.append({"id": item.text_id, "label": item.label, "length": length, "text": cut})
    counts = [len(ids) for ids in tokenizer([d["text"] for d in docs], add_special_tokens=False)["input_ids"]]
    for doc, n in zip(docs, counts):
        doc["n_tokens"] = n
    docs = [d for d in docs if d["n_tokens"] > 0]
    lengths = [length for length in config.lengths if any(d["length"] == length for d in docs)]
    metrics = []
    for length in lengths:
        tags = {"score": "loss", "length": str(length)}
        metrics.append(ExportedMetric(f"auc_{length}", "auc", tags, False))
        metrics += [ExportedMetric(f"tpr@{level:g}fpr{kind}_{length}", f"tpr@{level:g}fpr{kind}", tags, False)
                    for level in config.fpr_levels for kind in ("", "_inclusive")]
    if not lengths:
        raise UserError(f"{data.source}: no text has {min(config.lengths)} words, the shortest prefix length")
    summary = [Headline(metric="auc", tags={"score": "loss", "length": str(length)},
                        label=f"LOSS AUC, {length} words", better="lower") for length in lengths]
    # the length of mink_membership's headline when exported, else the longest
    headline = next((h for h in summary if h.tags["length"] == task.HEADLINE.tags["length"]),
                    max(summary, key=lambda h: int(h.tags["length"])))
    notes = []
    if context is not None:
        long = sum(d["n_tokens"] + 1 > context for d in docs)
        if long:
            notes.append(f"{long} of {len(docs)} texts are longer than the model's context of {context} tokens: "
                         "lm-eval scores them in disjoint rolling windows, membench in sliding windows of "
                         "stride context/2, so their LOSS values differ")
    settings = {"output_type": "loglikelihood_rolling", "doc_to_text": "", "doc_to_target": "text"}
    return LmEvalTask(
        name="membench_loss_membership", entry_name=ENTRY, version=task.VERSION,
        config={**config.model_dump(mode="json"), "lengths": lengths, "scores": ["loss"]},
        data_source=data.source, headline=headline, summary=summary, settings=settings, docs=docs,
        metrics=metrics, module=__name__,
        counts={"texts": len(data.texts), "documents": len(docs),
                **{f"members@{n}": sum(d["label"] == 1 and d["length"] == n for d in docs) for n in lengths},
                **{f"nonmembers@{n}": sum(d["label"] == 0 and d["length"] == n for d in docs) for n in lengths}},
        notes=notes)


def doc_item(doc: dict, results: list) -> list:
    """[length, label, LOSS score]: the mean token log-probability (higher = more likely a member)."""
    (loglikelihood,) = results
    return [doc["length"], doc["label"], float(loglikelihood) / doc["n_tokens"]]


def aggregate(items: list, name: str, tags: dict[str, str]) -> float | None:
    """AUC or TPR@FPR of the finite LOSS scores at one prefix length; None with one class only."""
    rows = [item for item in items if str(item[0]) == tags["length"]]
    labels = np.array([row[1] for row in rows], dtype=int)
    scores = np.array([row[2] for row in rows], dtype=float)
    labels, scores = labels[np.isfinite(scores)], scores[np.isfinite(scores)]
    if len(set(labels.tolist())) < 2:
        return None
    if name == "auc":
        return m.roc_auc(labels, scores)
    inclusive = name.endswith("_inclusive")
    level = float(name.removesuffix("_inclusive").removeprefix("tpr@").removesuffix("fpr"))
    return m.tpr_at_fpr(labels, scores, level, inclusive)
