"""WEAT word sets: the ten tests of Caliskan et al. 2017 (`weat_tests.json` beside this file, with
its citation and the source study of every list), or tests in the same format from a user's file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserError
from harness.core.io import SETTINGS_MAX_BYTES, parse_json_object, read_utf8

BUILTIN = Path(__file__).with_name("weat_tests.json")
GROUPS = ("race", "gender", "other")


@dataclass(frozen=True)
class WeatTest:
    """Target sets X, Y and attribute sets A, B of one test, and the group it counts towards."""

    test_id: str
    title: str
    group: str
    x: tuple[str, ...]
    y: tuple[str, ...]
    a: tuple[str, ...]
    b: tuple[str, ...]

    def words(self) -> list[str]:
        return list(dict.fromkeys(self.x + self.y + self.a + self.b))


@dataclass(frozen=True)
class WeatData:
    tests: list[WeatTest]
    source: str


def _test(row: dict, where: str) -> WeatTest:
    if not isinstance(row, dict) or not isinstance(row.get("id"), str):
        raise UserError(f"{where}: a test must be an object with an 'id'")
    sets = {}
    for key in ("X", "Y", "A", "B"):
        words = row.get(key)
        if not isinstance(words, list) or len(words) < 2 or not all(isinstance(w, str) and w.strip() for w in words):
            raise UserError(f"{where} ({row['id']}): {key} must be a list of at least two words")
        if len(set(words)) != len(words):
            raise UserError(f"{where} ({row['id']}): {key} lists a word twice")
        sets[key] = tuple(w.strip() for w in words)
    group = row.get("group", "other")
    if group not in GROUPS:
        raise UserError(f"{where} ({row['id']}): group must be one of {', '.join(GROUPS)}, not {group!r}")
    return WeatTest(row["id"], str(row.get("title", row["id"])), group, sets["X"], sets["Y"], sets["A"], sets["B"])


def load_weat(path: str | None, selected: tuple[str, ...]) -> WeatData:
    """The tests of `path` (default: the built-in ten), keeping those named in `selected` (all when empty)."""
    file = Path(path).expanduser() if path else BUILTIN
    rows = parse_json_object(read_utf8(file, SETTINGS_MAX_BYTES, "WEAT tests file"), str(file)).get("tests")
    if not isinstance(rows, list) or not rows:
        raise UserError(f"{file}: expected an object with a non-empty 'tests' list")
    tests = [_test(row, f"{file} tests[{i}]") for i, row in enumerate(rows)]
    ids = [t.test_id for t in tests]
    if len(set(ids)) != len(ids):
        raise UserError(f"{file}: two tests share an id")
    unknown = [name for name in selected if name not in ids]
    if unknown:
        raise UserError(f"unknown WEAT test {unknown[0]!r}; the file has {', '.join(ids)}")
    if selected:
        tests = [t for t in tests if t.test_id in selected]
    source = "built-in WEAT 1-10 (Caliskan et al. 2017)" if not path else f"local file {path}"
    return WeatData(tests, source)
