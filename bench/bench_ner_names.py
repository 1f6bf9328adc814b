"""Xia et al.'s M-MEM on known truth, with two kinds of out-train names: does the reference NER model
memorize its names, or only the words they are made of?

For each shipped reference NER checkpoint (untrained `ner-bert-e00`, trained `ner-bert-e06`) and each
names source of `ner_prompt_memorization`:
- `reference` (the default): out-train names made of words that never occur in training;
- `reference:shared` (`--preset paper`): out-train names recombined from the in-train names' own words
  (`ReferenceNames.shared_words`): every word trained on as a person's name, the pair never;
runs `membench evaluate --reproducible --tasks ner_prompt_memorization` (all 440 built-in prompts,
100 + 100 names per split) and records the strategies' test M-MEM, the prompts' spread and the
standard error of an M-MEM under the null (Mann-Whitney: sqrt((n_in + n_out + 1) / (12 n_in n_out))).

    python bench/bench_ner_names.py --output bench/results/bench_ner_names.json
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evaluations import evaluate_pinned  # noqa: E402
from record import add_output_flag, emit  # noqa: E402

CHECKPOINTS = ("ner-bert-e00", "ner-bert-e06")
NAMES = ("reference", "reference:shared")
STRATEGIES = ("opt_best", "opt_worst", "no_prompt", "one_prompt", "mix_prompt", "ept_majority", "ept_mean",
              "ept_weighted")


def summary(entry: dict) -> dict:
    def value(name: str, **tags: str) -> float:
        [found] = [m["value"] for m in entry["metrics"] if m["name"] == name and m["tags"] == tags]
        return round(found, 4)

    counts = entry["counts"]
    n_in, n_out = counts["test_in"], counts["test_out"]
    return {"m_mem": {s: value("m_mem", strategy=s) for s in STRATEGIES},
            "prompt_m_mem_iqr": value("prompt_m_mem_iqr", split="test"),
            "kendall_tau_dev_test": value("kendall_tau", by="dev_vs_test"),
            "null_standard_error": round(math.sqrt((n_in + n_out + 1) / (12 * n_in * n_out)), 4),
            "names_source": entry["info"]["names_source"], "test_names": [n_in, n_out],
            "sentences_scored": counts["scored_sentences"], "version": entry["version"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_output_flag(parser)
    args = parser.parse_args()
    from harness.reference.checkpoints import resolve_reference_model

    report: dict = {"checkpoints": {}}
    with tempfile.TemporaryDirectory(prefix="bench-ner-names-") as tmp:
        for checkpoint in CHECKPOINTS:
            folder = resolve_reference_model(f"reference:{checkpoint}")
            report["checkpoints"][checkpoint] = {}
            for k, names in enumerate(NAMES):
                entries, seconds = evaluate_pinned(folder, "ner_prompt_memorization", ["--names", names],
                                                   Path(tmp) / f"{checkpoint}-{k}")
                entry = entries["ner_prompt_memorization"]
                report["checkpoints"][checkpoint][names] = {**summary(entry), "wall_s": round(seconds, 1)}
                print(checkpoint, names, report["checkpoints"][checkpoint][names]["m_mem"], file=sys.stderr)
    trained = report["checkpoints"]["ner-bert-e06"]
    report["headline_drop"] = round(trained["reference"]["m_mem"]["opt_best"]
                                    - trained["reference:shared"]["m_mem"]["opt_best"], 4)
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
