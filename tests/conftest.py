"""Shared fixtures (a private membench cache, a tiny random causal LM, the quick reference build) and
the `slow` mark.

Tests are grouped by layer: `unit/` (the library below the application), `tasks/` (one file per
task), `cli/` (the command line end to end), `board/` (results files, LEADERBOARD.md, the web
board), `reference/` (the reference builds and their controls); `helpers/` holds what several
share. `slow` marks every test of `cli/` and `reference/` and every test that uses a reference
build (`BUILD_FIXTURES`), so `pytest -m "not slow"` is the fast loop; `pytest` runs everything.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from harness.run.heap import reuse_freed_memory
from harness.run.reproducible import pinned_environment

# Pinned before PyTorch, MKL and OpenBLAS load (they read these once): the test builds come out
# as `membench run` and `membench reference build` make them, on any x86-64 CPU with AVX2.
os.environ.update(pinned_environment())
reuse_freed_memory()  # as every membench command does (harness/run/heap.py)

from harness.reference import train  # noqa: E402

# Folders whose every test is slow: they drive the whole command line or train reference builds.
SLOW_FOLDERS = ("cli", "reference")
# Fixtures that train (or fetch and score with) a reference build: a test that uses one is slow.
BUILD_FIXTURES = frozenset({"quick_reference", "reference_ner", "quick_mlm", "reference_t5", "english", "japanese",
                            "runs", "aucs", "attacks", "family_root"})


def pytest_collection_modifyitems(config, items) -> None:
    """Mark `slow` the tests of `SLOW_FOLDERS` and those that use a `BUILD_FIXTURES` fixture."""
    tests = Path(__file__).parent
    for item in items:
        folder = Path(item.path).relative_to(tests).parts[0]
        if folder in SLOW_FOLDERS or BUILD_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


TINY_TEXTS = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "A journey of a thousand miles begins with a single step forward.",
    "Members of parliament debated the new budget late into the night.",
    "The football club announced the signing of a new striker on Monday.",
] * 8


@pytest.fixture(scope="session", autouse=True)
def membench_cache(tmp_path_factory) -> Path:
    """Every test session gets its own cache unless MEMBENCH_TEST_CACHE names a shared one."""
    root = Path(os.environ.get("MEMBENCH_TEST_CACHE") or tmp_path_factory.mktemp("membench-cache"))
    os.environ["MEMBENCH_CACHE"] = str(root)
    return root


def save_tiny_causal_lm(folder: Path, context: int = 32, seed: int = 0) -> Path:
    """A 1-layer GPT-2 with random weights and a BPE tokenizer without a pad token."""
    tokenizer = train.train_tokenizer(TINY_TEXTS, vocab_size=300)
    config = train.TrainConfig(seed=seed, init_seed=seed, vocab_size=300, context=context, n_embd=32, n_layer=1, n_head=2)
    model = train.untrained_model(tokenizer, config)
    train.save_checkpoint(model, tokenizer, folder)
    return folder


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory) -> Path:
    return save_tiny_causal_lm(tmp_path_factory.mktemp("tiny-lm") / "tiny-gpt2")


@pytest.fixture(scope="session")
def quick_outside(membench_cache) -> Path:
    """The quick English `outside` build's checkpoint (5 epochs on documents of the source outside the
    split, first 64 words each), shipped: a model of the text that never saw a member or non-member."""
    from harness.reference.build import reference_builds
    from tests.helpers.shipped_builds import shipped_build

    return shipped_build(reference_builds(quick=True)[2]) / "xsum-gpt2-outside-e05"


@pytest.fixture(scope="session")
def quick_reference(membench_cache) -> Path:
    """The quick reference build (first 64 words of each member; untrained, 1 and 30 epochs), shipped."""
    from harness.reference.build import quick_config
    from tests.helpers.shipped_builds import shipped_build

    return shipped_build(quick_config())


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


# What `membench evaluate` says about its tasks where stderr is no terminal (`harness.app.report`):
# `membench: <task> · <model>: started` and `...: done in N s: ...`.
TASK_LINE = re.compile(r"membench: \S+ · .+: (started|done in \d+ s: .*)")


def without_task_lines(stderr: str) -> list[str]:
    """The lines of `stderr` but the task start and end lines (`TASK_LINE`), which a log shows before
    an error or an interrupt that comes while tasks run."""
    return [line for line in stderr.splitlines() if not TASK_LINE.fullmatch(line)]


def assert_user_error(capsys, argv: list[str], out: Path | None, *needles: str) -> str:
    """Run the CLI; check the one-line error contract (besides task start and end lines); return the error line."""
    capsys.readouterr()  # drop anything printed while fixtures were set up
    from harness.app.cli import main

    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2, captured
    assert "Traceback" not in captured.err + captured.out
    lines = without_task_lines(captured.err)
    assert len(lines) == 1, f"expected one stderr line, got {lines!r}"
    line = lines[0]
    assert line.startswith("membench: error: "), line
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    assert captured.out == ""
    if out is not None:
        assert not out.exists() or list(out.iterdir()) == [], sorted(out.iterdir())
    return line
