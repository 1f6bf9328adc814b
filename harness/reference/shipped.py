"""The reference checkpoints shipped with membench, verified against a sha256 manifest.

Thirty epochs of training amplify last-bit differences between CPUs: the same pinned recipe gave
other weights on an AMD EPYC than on an Intel Xeon (issue 29), so a board made from weights each
machine trains for itself cannot reproduce on another. So the weights every control is scored on
are part of the project: `weights/<build name>-<recipe digest>/` beside this module holds each build
folder as `membench reference build` wrote it (its `manifest.json` and checkpoint folders), and
`weights/SHA256SUMS` the sha256 of every file in them (`sha256sum` format, paths relative to
`weights/`). `membench run` evaluates these; `membench reference build` trains them again, a
replication to compare with, never a replacement (`membench reference build --ship` replaces them,
for a maintainer who changed a recipe).

A shipped build is found by its recipe's digest (`Recipe.digest`: every setting and the pinned
numerics), so a changed recipe is not served the old weights: it has none shipped and is built.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

from harness.core.errors import UserError
from harness.core.io import atomic_write_text, sha256_file
from harness.files.staging import make_staging, publish_folder
from harness.reference.build import MANIFEST, read_manifest

WEIGHTS = Path(__file__).parent / "weights"
SUMS = "SHA256SUMS"


def read_sums(weights: Path = WEIGHTS) -> dict[str, str]:
    """{relative path: sha256} from `SHA256SUMS` (empty when nothing is shipped)."""
    sums = Path(weights) / SUMS
    if not sums.is_file():
        return {}
    listed = {}
    for number, line in enumerate(sums.read_text(encoding="utf-8").splitlines(), 1):
        digest, _, path = line.partition("  ")
        if len(digest) != 64 or not path:
            raise UserError(f"{sums}:{number}: not a `sha256sum` line; restore the file with `git checkout`")
        listed[path] = digest
    return listed


@functools.cache
def verified_builds(weights: Path = WEIGHTS) -> frozenset[str]:
    """The names of the shipped build folders, once every file `SHA256SUMS` lists is there with its
    sha256 and no file is there unlisted. A `UserError` naming the first file that is not: a shipped
    weight that changed (a partial checkout, a Git LFS pointer in place of the file, an edit) would
    give a number that is no control."""
    listed = read_sums(weights)
    found = {path.relative_to(weights).as_posix() for path in Path(weights).rglob("*") if path.is_file()} - {SUMS}
    for path in sorted(found - set(listed)):
        raise UserError(f"{weights / path}: a file in the shipped reference weights that {SUMS} does not list; "
                        f"remove it, or ship the build again (`membench reference build --ship`)")
    for path, digest in sorted(listed.items()):
        if path not in found:
            raise UserError(f"{weights / path}: a shipped reference weight file is missing; restore it with "
                            f"`git checkout -- {weights}`")
        if sha256_file(weights / path) != digest:
            raise UserError(f"{weights / path}: its sha256 is not the one in {SUMS} (a Git LFS pointer or an edited "
                            f"file?); restore it with `git checkout -- {weights}`")
    return frozenset(path.split("/")[0] for path in listed)


def shipped_folder(folder_name: str, weights: Path = WEIGHTS) -> Path | None:
    """The shipped, verified build folder `<build name>-<recipe digest>`; None when none is shipped."""
    return Path(weights) / folder_name if folder_name in verified_builds(weights) else None


def ship(built: Path, current: set[str], weights: Path = WEIGHTS) -> Path:
    """Copy the build folder `built` into the shipped weights (unless the shipped build of its
    recipe has the same weights: then it stays as it is, manifest included), delete the shipped
    builds of no recipe in `current` (folder names `<build name>-<digest>` of today's recipes, full
    and quick: an older recipe's weights are never used again), and rewrite `SHA256SUMS`. Returns
    the shipped folder."""
    built = Path(built)
    if not (built / MANIFEST).is_file():
        raise UserError(f"{built}: not a finished reference build (no {MANIFEST})")
    weights = Path(weights)
    if weights_of(built) != weights_of(weights / built.name):
        staging = make_staging(weights)
        shutil.copytree(built, staging, dirs_exist_ok=True)
        publish_folder(staging, weights / built.name, replace=True)
    for older in weights.iterdir():
        if older.is_dir() and older.name not in current | {built.name}:
            shutil.rmtree(older)
    write_sums(weights)
    return weights / built.name


def weights_of(folder: Path) -> dict[str, str] | None:
    """{checkpoint folder: its weights' sha256} from a build folder's manifest; None without one."""
    if not (Path(folder) / MANIFEST).is_file():
        return None
    return {c["folder"]: c["weights_sha256"] for c in read_manifest(Path(folder))["checkpoints"]}


def write_sums(weights: Path = WEIGHTS) -> None:
    """`SHA256SUMS` of every file under `weights` (sorted paths), and forget what was verified."""
    files = sorted(path for path in Path(weights).rglob("*") if path.is_file() and path.name != SUMS)
    lines = [f"{sha256_file(path)}  {path.relative_to(weights).as_posix()}" for path in files]
    atomic_write_text(Path(weights) / SUMS, "\n".join(lines) + "\n")
    verified_builds.cache_clear()
