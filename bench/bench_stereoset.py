"""Speed of StereoSet's masked-LM and causal-LM scoring against scoring one query at a time, in one run.

Masked LMs. The scorer asks one query per (option, token of its template word): the context with the
word's first i tokens and one mask. Compared on the same examples (the first --examples of the dev
set's intrasentence part, all three options each):
  membench   `option_scores` (`harness.scoring.masked.mask_fill_probs`): every distinct query text once
             (the three options share their first query), sorted by length, in batches of --batch-size
  one-by-one the official code's loop at batch size 1: one forward pass per query, in data order
Both give the same scores (checked here). Models: the reference masked LM (mlm-bert) and a
BERT-base-sized masked LM (12 x 768, random weights, the reference tokenizer; --base-examples
examples).

Causal LMs (the official recipe, `causal_context="official"`): p(w1 | <|endoftext|>) from one pass over
the start token, p(wi | w1..wi-1) from a pass over the bare sentence.
  membench   `option_scores`: one start-token pass shared by every sentence, then the bare sentences
             through `causal_token_logprobs` (length-sorted batches of --batch-size)
  one-by-one the official `eval_generative_models.py` loop: one start-token pass, then one forward
             pass per sentence, in data order
Models: the reference GPT-2 (--causal-model, default the quick reference build's final (30-epoch) model,
built if missing) and a GPT-2-small-sized causal LM (12 x 768, random weights, the reference
tokenizer; --base-examples examples). Each is timed in --repeats interleaved rounds and the
fastest is kept.

    python bench/bench_stereoset.py [--kinds masked,causal] [--examples 200] [--base-examples 30]
                                    [--batch-size 64] [--causal-model PATH]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from transformers import BertConfig, BertForMaskedLM, GPT2Config, GPT2LMHeadModel

from harness.core.model_types import ModelKind
from harness.model.loading import ModelSpec, load
from harness.reference.build import build, checkpoint_folders, quick_config
from harness.reference.mlm_build import build_mlm
from tasks.stereoset.data import DEFAULT, LABELS, load_stereoset
from tasks.stereoset.scoring import masked_lm_queries, option_scores, start_token
from record import add_output_flag, emit


def one_by_one(model, tokenizer, examples) -> np.ndarray:
    """Each query in its own forward pass; an option's score is the mean of its token probabilities."""
    texts, targets, owner = masked_lm_queries(tokenizer, [(e, label) for e in examples for label in LABELS])
    probs = np.zeros(len(texts))
    for q, (text, target) in enumerate(zip(texts, targets)):
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
        at = int((ids[0] == tokenizer.mask_token_id).nonzero()[0, 0])
        probs[q] = torch.softmax(model(input_ids=ids).logits[0, at].float(), -1)[target].item()
    return (np.bincount(owner, weights=probs) / np.bincount(owner)).reshape(len(examples), len(LABELS))


def one_by_one_causal(model, tokenizer, examples) -> np.ndarray:
    """The official generative loop: p(w1) from one start-token pass, then each sentence in its own pass."""
    start = start_token(tokenizer, "official")
    first = torch.log_softmax(model(input_ids=torch.tensor([[start]])).logits[0, 0].float(), -1)
    scores = np.zeros((len(examples), len(LABELS)))
    for e, example in enumerate(examples):
        for j, label in enumerate(LABELS):
            ids = tokenizer.encode(example.sentences[label], add_special_tokens=False)
            logprobs = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
            rest = logprobs[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
            scores[e, j] = torch.cat([first[ids[:1]], rest]).mean().item()
    return scores


def time_both(lm, examples, batch_size: int, repeats: int) -> dict:
    if lm.kind is ModelKind.CAUSAL_LM:
        texts = [e.sentences[label] for e in examples for label in LABELS]
        naive_scorer = one_by_one_causal
    else:
        texts, _, _ = masked_lm_queries(lm.tokenizer, [(e, label) for e in examples for label in LABELS])
        naive_scorer = one_by_one
    best = {"membench": float("inf"), "one_by_one": float("inf")}
    for _ in range(repeats):
        started = time.perf_counter()
        ours, _ = option_scores(lm, examples, batch_size, progress=False)
        best["membench"] = min(best["membench"], time.perf_counter() - started)
        started = time.perf_counter()
        naive = naive_scorer(lm.model, lm.tokenizer, examples)
        best["one_by_one"] = min(best["one_by_one"], time.perf_counter() - started)
    return {"examples": len(examples), "queries": len(texts), "distinct_queries": len(set(texts)),
            "max_abs_difference": float(np.max(np.abs(ours - naive))),
            "membench_s": round(best["membench"], 3), "one_by_one_s": round(best["one_by_one"], 3),
            "membench_queries_per_s": round(len(texts) / best["membench"], 1),
            "one_by_one_queries_per_s": round(len(texts) / best["one_by_one"], 1),
            "speedup": round(best["one_by_one"] / best["membench"], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--base-examples", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--kinds", default="masked,causal", help="which scorers to time: masked, causal or both")
    parser.add_argument("--causal-model", help="a causal LM folder (default: the quick reference GPT-2, 15 epochs)")
    add_output_flag(parser)
    args = parser.parse_args()
    kinds = {kind.strip() for kind in args.kinds.split(",")}
    torch.set_grad_enabled(False)
    examples = load_stereoset(DEFAULT, None).examples
    report = {"torch_threads": torch.get_num_threads(), "batch_size": args.batch_size}
    if "masked" in kinds:
        folder = checkpoint_folders(build_mlm())[-1]  # built (trained) first, if missing
        lm = load(ModelSpec(str(folder), device="cpu"))
        report["reference_mlm"] = time_both(lm, examples[: args.examples], args.batch_size, args.repeats)
        torch.manual_seed(0)
        lm.model = BertForMaskedLM(BertConfig(vocab_size=lm.model.config.vocab_size, max_position_embeddings=512)).eval()
        report["bert_base_sized"] = time_both(lm, examples[: args.base_examples], args.batch_size, args.repeats)
    if "causal" in kinds:
        folder = args.causal_model or checkpoint_folders(build(quick_config()))[-1]
        lm = load(ModelSpec(str(folder), device="cpu", dtype="float32"))
        report["reference_gpt2"] = {"model": str(folder), **time_both(lm, examples[: args.examples], args.batch_size,
                                                                      args.repeats)}
        torch.manual_seed(0)
        config = lm.model.config
        lm.model = GPT2LMHeadModel(GPT2Config(vocab_size=config.vocab_size, n_positions=1024,
                                              bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id)).eval()
        report["gpt2_small_sized"] = time_both(lm, examples[: args.base_examples], args.batch_size, args.repeats)
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
