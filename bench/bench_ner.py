"""Speed of the ner_prompt_memorization scoring against the transformers pipeline, in one run, and
the extrapolated cost of the paper-sized job (400 prompts x 3,302 names) for a BERT-base model.

Inputs: the first --prompts built-in prompts x the first --names reference names (dev and test,
in- and out-train), each prompt filled with each name. Compared on the same sentences:
  membench   `ConfidenceTable.get`: each (prompt, name) once, sentences sorted by length and
             batched (--batch-size), the name's subword probabilities read from one forward pass
  pipeline   `transformers.pipeline("token-classification")` called sentence by sentence (what a
             user would write; it returns only the top label per token, so it does less work)
Models: the trained reference NER model (2 layers, 128 wide) and a BERT-base-sized token
classifier (12 layers, 768 wide, random weights, the reference tokenizer); the BERT-base rows use
--base-prompts prompts. Each is timed in --repeats interleaved rounds and the fastest is kept.

    python bench/bench_ner.py [--prompts 40] [--names 50] [--base-prompts 8] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import time

import torch
from transformers import BertConfig, BertForTokenClassification, pipeline

from harness.model.loading import ModelSpec, load
from harness.reference.checkpoints import resolve_reference_model
from harness.reference.ner_build import NerBuildConfig
from tasks.ner_prompt_memorization.prompts import builtin_prompts, fill
from tasks.ner_prompt_memorization.strategies import ConfidenceTable
from tasks.ner_prompt_memorization.task import entity_labels
from record import add_output_flag, emit

PAPER_PROMPTS, PAPER_NAMES = 400, 3302


def bert_base_like(reference) -> BertForTokenClassification:
    """BERT-base's shape (12 x 768, 110M parameters without the embeddings) with the reference
    model's labels and vocabulary; random weights (speed does not depend on them)."""
    torch.manual_seed(0)
    config = BertConfig(vocab_size=reference.config.vocab_size, id2label=reference.config.id2label,
                        label2id=reference.config.label2id, max_position_embeddings=512)
    return BertForTokenClassification(config).eval()


def time_both(model, tokenizer, labels, prompts: list[str], names: list[str], batch_size: int,
              repeats: int) -> dict:
    classifier = pipeline("token-classification", model=model, tokenizer=tokenizer, device=-1)
    sentences = [fill(p, n)[0] for p in prompts for n in names]
    best = {"membench": float("inf"), "pipeline": float("inf")}
    for _ in range(repeats):
        started = time.perf_counter()
        ConfidenceTable(model, tokenizer, labels, batch_size, False).get(prompts, names)
        best["membench"] = min(best["membench"], time.perf_counter() - started)
        started = time.perf_counter()
        for sentence in sentences:
            classifier(sentence)
        best["pipeline"] = min(best["pipeline"], time.perf_counter() - started)
    return {"sentences": len(sentences), "membench_s": round(best["membench"], 3),
            "pipeline_s": round(best["pipeline"], 3),
            "membench_sentences_per_s": round(len(sentences) / best["membench"], 1),
            "pipeline_sentences_per_s": round(len(sentences) / best["pipeline"], 1),
            "speedup": round(best["pipeline"] / best["membench"], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=40)
    parser.add_argument("--names", type=int, default=50, help="names per list (x4 lists)")
    parser.add_argument("--base-prompts", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    add_output_flag(parser)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    lm = load(ModelSpec(resolve_reference_model("reference:ner-bert-e06"), device="cpu"))  # the shipped weights
    labels = entity_labels(lm, "PER").ids
    layout = NerBuildConfig().names().as_layout()
    names = [n for split in layout.values() for side in split.values() for n in side[: args.names]]
    prompts = [p.text for p in builtin_prompts().typed[:: max(1, 440 // args.prompts)]][: args.prompts]
    report = {"torch_threads": torch.get_num_threads(), "batch_size": args.batch_size,
              "reference_ner": time_both(lm.model, lm.tokenizer, labels, prompts, names, args.batch_size,
                                         args.repeats)}
    base = time_both(bert_base_like(lm.model), lm.tokenizer, labels, prompts[: args.base_prompts], names,
                     args.batch_size, args.repeats)
    report["bert_base_sized"] = base
    paper_sentences = (PAPER_PROMPTS + 7) * PAPER_NAMES  # typed prompts + no/one/five mix prompts
    report["paper_job_bert_base_hours"] = {
        "sentences": paper_sentences,
        "membench": round(paper_sentences / base["membench_sentences_per_s"] / 3600, 2),
        "pipeline": round(paper_sentences / base["pipeline_sentences_per_s"] / 3600, 2),
        "note": "typed prompts and baselines x all names; PTE adds its candidates on the dev names",
    }
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
