"""Train a tiny GPT-2 with the reference build code (tokenizer, model, AdamW epochs) and print the
sha256 of its saved weights. The determinism tests run it under emulated CPUs
(`ATEN_CPU_CAPABILITY`), pinned by `harness.run.reproducible.run_pinned` as the reference builds are,
or `--unpinned` to show what the pins remove.

usage: python tests/helpers/tiny_training.py OUTPUT_FOLDER [--unpinned]
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.run import reproducible

TEXTS = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "A journey of a thousand miles begins with a single step forward.",
    "Members of parliament debated the new budget late into the night.",
    "The football club announced the signing of a new striker on Monday.",
] * 16


def main() -> int:
    if "--unpinned" not in sys.argv:
        status = reproducible.run_pinned([sys.executable, __file__, *sys.argv[1:]])
        if status is not None:
            return status
    from harness.model.identity import weights_identity
    from harness.model.loading import weight_files
    from harness.reference import train

    folder = Path(sys.argv[1])
    config = train.TrainConfig(vocab_size=300, context=32, n_embd=64, n_layer=2, n_head=2, epochs=(3,))
    tokenizer = train.train_tokenizer(TEXTS, config.vocab_size)
    model = train.untrained_model(tokenizer, config)
    sequences = train.training_sequences(tokenizer, TEXTS, config.context)
    train.train(model, sequences, config, lambda epoch, loss: None)
    train.save_checkpoint(model, tokenizer, folder)
    print(weights_identity(weight_files(folder, False)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
