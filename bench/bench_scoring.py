"""Speed of the harness's causal-LM scoring against two baselines, measured in one run.

On the final (30-epoch) reference model and the 400 reference texts cut to L = 128 words:
  harness   `causal_token_logprobs` (length-sorted batches, sliding windows, prefix sharing)
  (a) raw   the model's forward pass alone on exactly the harness's batches (no log-softmax,
            no gather, no bookkeeping): the ceiling the harness can approach
  (b) naive the original Min-K% code's loop: one text at a time, batch size 1, a log-softmax
            over the whole sequence and a Python loop of `.item()` per token (with the same
            sliding windows, since the texts are longer than the model's context)
Reported: seconds and the ratios raw/harness (target >= 0.9) and naive/harness (target >= 2),
plus the harness with the Min-K%++ distribution statistics (what the task runs), for reference.

    python bench/bench_scoring.py [--batch-size 16] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import torch

from harness.model.loading import ModelSpec, load
from harness.reference.build import BuildConfig, build, checkpoint_folders
from harness.reference.corpus import reference_corpus
from harness.scoring.causal import causal_token_logprobs, encode_with_bos, sliding_windows
from harness.scoring.text import truncate_words
from record import add_output_flag, emit


def harness_scoring(lm, texts, batch_size):
    causal_token_logprobs(lm.model, lm.tokenizer, texts, batch_size=batch_size, progress=False)


def harness_scoring_with_distribution(lm, texts, batch_size):
    """What mink_membership runs: also the next-token distribution's mean and std (Min-K%++)."""
    causal_token_logprobs(lm.model, lm.tokenizer, texts, batch_size=batch_size, progress=False,
                          distribution_stats=True)


@torch.no_grad()
def raw_forward(lm, texts, batch_size):
    """The same windows and batches as the harness, forward pass only."""
    encoded, _ = encode_with_bos(lm.tokenizer, texts)
    context = lm.context_length
    rows = [row.ids for i, ids in enumerate(encoded) for row in sliding_windows(ids, context, context // 2, i)]
    rows.sort(key=len, reverse=True)
    for start in range(0, len(rows), batch_size):
        batch = rows[start:start + batch_size]
        width = len(batch[0])
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for j, row in enumerate(batch):
            ids[j, : len(row)] = torch.tensor(row)
            mask[j, : len(row)] = 1
        lm.model(input_ids=ids, attention_mask=mask)


@torch.no_grad()
def naive_per_text(lm, texts, _batch_size):
    """Shi et al.'s `calculatePerplexity`, per text and window, batch size 1."""
    encoded, _ = encode_with_bos(lm.tokenizer, texts)
    context = lm.context_length
    for i, ids in enumerate(encoded):
        all_prob = []
        for row in sliding_windows(ids, context, context // 2, i):
            input_ids = torch.tensor(row.ids).unsqueeze(0)
            outputs = lm.model(input_ids, labels=input_ids)
            probabilities = torch.nn.functional.log_softmax(outputs.logits, dim=-1)
            for position in range(row.first_target, len(row.ids)):
                all_prob.append(probabilities[0, position - 1, row.ids[position]].item())


def best_times(functions: dict, lm, texts, batch_size, repeats) -> dict[str, float]:
    """Fastest of `repeats` rounds for each function; the rounds interleave the functions, so a
    slow spell of the machine hits all of them alike."""
    times = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            started = time.perf_counter()
            function(lm, texts, batch_size)
            times[name].append(time.perf_counter() - started)
    return {name: min(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--length", type=int, default=128)
    add_output_flag(parser)
    args = parser.parse_args()
    torch.manual_seed(0)
    folder = checkpoint_folders(build(BuildConfig()))[-1]
    lm = load(ModelSpec(str(folder), device="cpu"))
    texts = [cut for d in reference_corpus(0) if (cut := truncate_words(d.text, args.length))]
    harness_scoring(lm, texts[:32], args.batch_size)  # warm-up
    functions = {"harness": harness_scoring, "raw_forward": raw_forward, "naive_per_text": naive_per_text,
                 "harness_with_distribution": harness_scoring_with_distribution}
    seconds = best_times(functions, lm, texts, args.batch_size, args.repeats)
    report = {
        "model": folder.name, "texts": len(texts), "length_words": args.length,
        "batch_size": args.batch_size, "threads": torch.get_num_threads(),
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "raw_over_harness": round(seconds["raw_forward"] / seconds["harness"], 3),
        "naive_over_harness": round(seconds["naive_per_text"] / seconds["harness"], 3),
    }
    emit(report, args.output)


if __name__ == "__main__":
    main()
