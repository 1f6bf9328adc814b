"""The reference builds the tests score: the shipped weights of a recipe (`harness.reference.shipped`),
never trained in a test run. Training is tested on tiny builds (tests/reference/)."""

from __future__ import annotations

from pathlib import Path

from harness.reference.build import read_manifest
from harness.reference.shipped import shipped_folder


def shipped_build(config) -> Path:
    """The shipped folder of `config`'s recipe; fails the test when none is shipped (ship it:
    `membench reference build [--quick] --ship`)."""
    folder = shipped_folder(config.folder_name())
    assert folder is not None, f"no shipped weights of {config.folder_name()}: `membench reference build --ship`"
    return folder


def shipped_checkpoints(config) -> dict[str, Path]:
    """{checkpoint folder name: its path} of `config`'s shipped build, untrained first."""
    folder = shipped_build(config)
    return {c["folder"]: folder / c["folder"] for c in read_manifest(folder)["checkpoints"]}
