"""A tokenizer fitted to the members leaks membership before any training (issue 77, item 3).

Two untrained GPT-2s of the English reference recipe, scored by `mink_membership` on the reference XSum split
(200 members, 200 non-members) at 128 words, pinned, in a child process each:

- `members-tokenizer`: the shipped `xsum-gpt2-e00`, the untrained checkpoint of the member build, whose
  tokenizer was trained on the build's training texts, that is on the members;
- `outside-tokenizer`: `xsum-gpt2-outside-e05` with `--random-weights 0`: the same architecture with freshly
  drawn weights, and the tokenizer of the `outside` build, trained on documents of the source outside the split
  (neither members nor non-members).

Reported per model: every score's ROC AUC (members positive) at 128 words, the AUC of the token count of each
text's first 128 words (no model: the tokenizer alone; below 0.5 means members take fewer tokens), and dataset
inference at 128 words (p, statistic, the texts it kept). An untrained model is a null only if its members and
non-members are exchangeable; a score whose AUC leaves 0.5 on `members-tokenizer` but not on `outside-tokenizer`
reads the tokenizer.

    python bench/bench_tokenizer_leak.py --output bench/results/bench_tokenizer_leak.json
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.evaluations import evaluate_pinned, metric_value, rerun_pinned  # noqa: E402
from bench.record import add_output_flag, emit  # noqa: E402

LENGTH = 128
ATTACKS = ("loss", "zlib", "min_k", "min_k_pp", "recall", "dc_pdd", "gradnorm")  # no second model (ref, ne)
FLAGS = ["--data", "reference", "--lengths", str(LENGTH), "--attack-lengths", str(LENGTH), "--attacks",
         ",".join(ATTACKS), "--dc-pdd-corpus", "outside", "--bootstrap-resamples", "100"]
MODELS = {"members-tokenizer": ("xsum-gpt2-e00", []),
          "outside-tokenizer": ("xsum-gpt2-outside-e05", ["--random-weights", "0"])}


def token_count_auc(folder: Path) -> float:
    """ROC AUC (members positive) of the token count of each reference text's first LENGTH words under the
    tokenizer in `folder`: 0.5 when the tokenizer cannot tell the halves apart."""
    from transformers import AutoTokenizer

    from harness.metrics.memorization import roc_auc
    from harness.reference.corpus import reference_corpus

    tokenizer = AutoTokenizer.from_pretrained(folder)
    documents = reference_corpus()
    counts = [len(tokenizer(" ".join(d.text.split()[:LENGTH]))["input_ids"]) for d in documents]
    return round(roc_auc([d.member for d in documents], counts), 4)


def report_of(entry: dict, folder: Path) -> dict:
    """One model's row: every score's AUC at LENGTH words, the token count's AUC, and dataset inference."""
    scores = sorted({m["tags"]["score"] for m in entry["metrics"] if m["name"] == "auc"
                     and m["tags"].get("length") == str(LENGTH) and "score" in m["tags"]})
    inference = entry["info"]["dataset_inference"][str(LENGTH)]
    return {"auc": {score: metric_value(entry, "auc", score=score, length=str(LENGTH)) for score in scores},
            "token_count_auc": token_count_auc(folder),
            "dataset_inference": {key: inference.get(key) for key in ("p_value", "rejected", "statistic",
                                                                       "n_suspect", "n_validation", "dropped_rows",
                                                                       "features", "share_lower")},
            "wall_time_s": entry["wall_time_s"]}


def main() -> None:
    if (status := rerun_pinned()) is not None:
        raise SystemExit(status)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_output_flag(parser)
    args = parser.parse_args()
    from harness.reference.checkpoints import built_checkpoints

    built = built_checkpoints()
    report: dict = {"length_words": LENGTH, "flags": FLAGS, "models": {}}
    for label, (checkpoint, extra) in MODELS.items():
        with tempfile.TemporaryDirectory() as scratch:
            entries, seconds = evaluate_pinned(built[checkpoint], "mink_membership", FLAGS + extra,
                                               Path(scratch) / "out")
        report["models"][label] = {"checkpoint": checkpoint, "flags": extra, "seconds": round(seconds, 1),
                                   **report_of(entries["mink_membership"], built[checkpoint])}
        print(f"{label}: {report['models'][label]}", file=sys.stderr, flush=True)
    emit(report, args.output)


if __name__ == "__main__":
    main()
