"""A board of many synthetic models, to check that the plots and the web board scale: valid
results files with varied names (long ones, `$`, a leading `_`, HTML), kinds, values across a
range, intervals and seed spreads, a line task (a numeric tag) and a bar task. Seeded: the same
files every time."""

from __future__ import annotations

import random
from pathlib import Path

from harness.core.results import Headline, Metric, TaskEntry
from tests.helpers.board_files import make_results, submit

KINDS = ("causal-lm", "masked-lm", "seq2seq", "encoder")
BAR_HEADLINE = Headline(metric="icat", tags={"domain": "all"}, label="ICAT", better="higher")
SS = Headline(metric="ss", tags={"domain": "all"}, label="SS", better="ideal", ideal=50.0)


def synthetic_name(rng: random.Random, k: int) -> str:
    stems = ["org/model", "a-rather-long-organisation-name/an-even-longer-model-name-with-a-suffix",
             "$price$ model", "_private", "<b>bold</b> & co", "日本語モデル", "x"]
    return f"{stems[k % len(stems)]}-{k:02d}-{rng.randrange(1000):03d}"


def bar_entry(rng: random.Random) -> TaskEntry:
    """A stereoset-like entry: ICAT (higher is better, with an interval) and SS (ideal 50)."""
    icat = round(rng.uniform(30, 90), 3)
    ss = round(rng.uniform(40, 65), 3)
    metrics = [Metric(name="icat", value=icat, ci_low=icat - rng.uniform(0.5, 4), ci_high=icat + rng.uniform(0.5, 4),
                      n=500, tags={"domain": "all"}),
               Metric(name="ss", value=ss, std=round(rng.uniform(0.1, 2), 3), tags={"domain": "all"})]
    return TaskEntry(name="bar_task", version=1, status="ok", config={}, config_hash="0123456789abcdef", seed=0,
                     metrics=metrics, headline=BAR_HEADLINE, summary=[BAR_HEADLINE, SS], wall_time_s=2.0)


def write_synthetic_submissions(folder: Path, n_models: int = 60, seed: int = 0) -> list[Path]:
    """`n_models` results files in `folder`, each with a line task (`mink_membership`, AUC at three
    lengths) and a bar task (`bar_task`)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(n_models):
        results = make_results(synthetic_name(rng, k), f"{k:02x}{rng.getrandbits(248):062x}",
                               auc=round(rng.uniform(0.35, 0.99), 4), limit=5 if k % 17 == 3 else None)
        model = results.model.model_copy(update={"kind": KINDS[k % len(KINDS)]})
        if k % 11 == 5:
            model = model.model_copy(update={"details": {"pruning": {"parameter_sparsity": 0.5}}})
        results = results.model_copy(update={"model": model, "tasks": results.tasks + [bar_entry(rng)]})
        paths.append(submit(folder, results, f"synthetic-{k:02d}.json"))
    return paths
