"""A task's records, and the sidecar file that carries them beside a results file.

A task runs in two stages (`harness.core.task.Task`): `score` makes the model passes and returns
its records, the per-item evidence every metric is computed from (per-text scores, generations,
per-(prompt, name) confidences, ...); `report` is a pure function of the records, the config and
the seed that returns every metric and info field the results file holds. The records are plain
JSON values (objects, lists, strings, numbers; NaN and +-Infinity are allowed, a score may be
undefined), normalised once by a JSON round trip (`normalise`), so the report made while scoring and
the report recomputed later from the file read the same bits.

Every results file that has records carries them in one sidecar beside it,
`<results stem>.records.json.gz` (`sidecar_name`): gzip (mtime 0, so equal records give equal
bytes) of

    {"format": "membench-records/1", "model_identity": <the results file's model.identity>,
     "tasks": {<task name>: {"version": <task version>, "config_hash": <its config_hash>,
                            "records": <the task's records>}}}

and each task entry records `records_sha256`, the sha256 of its records' canonical JSON
(`records_digest`). `membench verify` checks the sidecar against the file (`check_sidecar`),
recomputes the report from the records and compares it with the file.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import zlib
from pathlib import Path
from typing import Any

from harness.core.errors import UserError
from harness.core.io import GiB, MiB, atomic_write_bytes, read_regular_file

RECORDS_FORMAT = "membench-records/1"
SIDECAR_SUFFIX = ".records.json.gz"
# a sidecar is read whole: at most this compressed, and this once decompressed (a gzip bomb stops there)
SIDECAR_MAX_BYTES = 256 * MiB
RECORDS_MAX_BYTES = 1 * GiB

Records = dict[str, Any]


def _native(value: Any) -> Any:
    """`json.dumps`' fallback for NumPy values a scoring stage returns: arrays as lists, scalars as
    Python numbers (a float32 as the float64 of the same value)."""
    if hasattr(value, "tolist"):  # numpy arrays and scalars, without importing numpy here
        return value.tolist()
    raise TypeError(f"a record holds a {type(value).__name__}, which is no JSON value")


def dumps(records: Any) -> str:
    """Canonical JSON of records (or of a sidecar holding them): sorted keys, no whitespace; NaN and
    Infinity as Python writes them."""
    return json.dumps(records, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_native)


def normalise(records: Records) -> Records:
    """The records as the sidecar gives them back: every NumPy value a Python one, every tuple a list,
    every key a string. The runner reports from this, so what it writes is what `verify` recomputes."""
    return json.loads(dumps(records))


def records_digest(records: Records) -> str:
    """sha256 of the records' canonical JSON (`dumps`): the results file's `records_sha256`."""
    return hashlib.sha256(dumps(records).encode("utf-8")).hexdigest()


def sidecar_name(results_name: str) -> str:
    """The sidecar of results file `<stem>.json`: `<stem>.records.json.gz`."""
    return results_name.removesuffix(".json") + SIDECAR_SUFFIX


def sidecar_bytes(model_identity: str, tasks: dict[str, dict[str, Any]]) -> bytes:
    """The sidecar's bytes: `tasks` is task name -> {version, config_hash, records}."""
    payload = {"format": RECORDS_FORMAT, "model_identity": model_identity, "tasks": tasks}
    return gzip.compress(dumps(payload).encode("utf-8"), compresslevel=9, mtime=0)


def write_sidecar(path: Path, model_identity: str, tasks: dict[str, dict[str, Any]]) -> None:
    atomic_write_bytes(path, sidecar_bytes(model_identity, tasks))


def _decompress(data: bytes, origin: str) -> bytes:
    out, reader = io.BytesIO(), gzip.GzipFile(fileobj=io.BytesIO(data))
    try:
        while chunk := reader.read(MiB):
            out.write(chunk)
            if out.tell() > RECORDS_MAX_BYTES:
                raise UserError(f"{origin}: decompresses to over {RECORDS_MAX_BYTES // GiB} GiB; no records "
                                "sidecar is that large")
    except (OSError, EOFError, zlib.error) as err:
        raise UserError(f"{origin}: not a complete gzip file ({err or 'truncated'}); the records sidecar is "
                        "damaged or cut short") from None
    return out.getvalue()


def read_sidecar(path: Path) -> dict[str, Any]:
    """A sidecar's payload, its structure checked; a `UserError` (one line) for anything else: a file
    that is missing, truncated, no gzip, no JSON, or of another format."""
    origin = str(path)
    if not path.is_file():
        raise UserError(f"{origin}: records sidecar missing; without it the file's numbers cannot be recomputed")
    data = _decompress(read_regular_file(path, SIDECAR_MAX_BYTES, "records sidecar"), origin)
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise UserError(f"{origin}: not JSON ({err}); the records sidecar is damaged") from None
    if not isinstance(payload, dict) or payload.get("format") != RECORDS_FORMAT:
        raise UserError(f"{origin}: not a membench records sidecar (format {RECORDS_FORMAT!r} expected)")
    if not isinstance(payload.get("model_identity"), str) or not isinstance(payload.get("tasks"), dict):
        raise UserError(f"{origin}: a records sidecar needs model_identity (text) and tasks (an object)")
    for name, task in payload["tasks"].items():
        if not (isinstance(task, dict) and isinstance(task.get("records"), dict)
                and isinstance(task.get("version"), int) and isinstance(task.get("config_hash"), str)):
            raise UserError(f"{origin}: task {name!r} needs version, config_hash and records (an object)")
    return payload


def check_sidecar(payload: dict[str, Any], origin: str, model_identity: str,
                  entries: dict[str, tuple[int, str]]) -> None:
    """That the sidecar belongs to the results file: the same model identity, and for every task entry
    with records (name -> (version, config_hash)) records of that version and config; a `UserError`
    naming the first mismatch."""
    if payload["model_identity"] != model_identity:
        raise UserError(f"{origin}: records of model {payload['model_identity'][:16]}, but the results file's "
                        f"model is {model_identity[:16]}: the sidecar belongs to another model's file")
    for name, (version, config_hash) in entries.items():
        task = payload["tasks"].get(name)
        if task is None:
            raise UserError(f"{origin}: no records of task {name}, which the results file says it has")
        if task["version"] != version or task["config_hash"] != config_hash:
            raise UserError(f"{origin}: {name}'s records are of version {task['version']}, config "
                            f"{task['config_hash']}; the results file's are of version {version}, config "
                            f"{config_hash}: the sidecar belongs to another run")


def difference(field: str, recorded: Any, recomputed: Any) -> str | None:
    """The first place where a value recomputed from the records differs from the file's, as a phrase
    (`field`: where it sits), or None when they are the same JSON value bit for bit."""
    if isinstance(recorded, dict) and isinstance(recomputed, dict):
        for key in sorted(set(recorded) | set(recomputed), key=str):
            if key not in recorded or key not in recomputed:
                side = "the file" if key not in recorded else "the records"
                return f"{field}.{key} is not in {side}"
            found = difference(f"{field}.{key}", recorded[key], recomputed[key])
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(recomputed, list):
        if len(recorded) != len(recomputed):
            return f"{field} has {len(recorded)} entries in the file, {len(recomputed)} from the records"
        for index, (a, b) in enumerate(zip(recorded, recomputed)):
            found = difference(f"{field}[{index}]", a, b)
            if found:
                return found
        return None
    same = recorded == recomputed and type(recorded) is type(recomputed) or \
        (isinstance(recorded, float) and isinstance(recomputed, float) and math.isnan(recorded) and math.isnan(recomputed))
    if same:
        return None
    if isinstance(recorded, (int, float)) and isinstance(recomputed, (int, float)) \
            and not isinstance(recorded, bool) and not isinstance(recomputed, bool):
        return f"{field} is {recorded!r} in the file, {recomputed!r} from the records (difference " \
               f"{recorded - recomputed:+.3g})"
    return f"{field} is {recorded!r} in the file, {recomputed!r} from the records"


def record_list(records: Records, key: str, what: str = "item") -> list[dict[str, Any]]:
    """`records[key]`: a list of objects, each with an `id` (text) no other one has; a `UserError`
    naming the record at fault otherwise (records edited by hand, or cut and pasted twice)."""
    items = records.get(key)
    if not isinstance(items, list):
        raise UserError(f"records: {key} is missing or not a list")
    seen = set()
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise UserError(f"records: {key}[{index}] is not a {what} record with a text id")
        if item["id"] in seen:
            raise UserError(f"records: {what} {item['id']!r} appears twice in {key}")
        seen.add(item["id"])
    return items


def number(value: Any, where: str, low: float = -math.inf, high: float = math.inf, nan: bool = False) -> float:
    """A record's number checked: a JSON number (not a bool) within [low, high] (infinities count
    as within a bound that is infinite), NaN only where `nan` allows it; a `UserError` naming `where`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"records: {where} is {value!r}, not a number")
    if math.isnan(value):
        if nan:
            return float(value)
        raise UserError(f"records: {where} is NaN, which no scoring stage writes there")
    if not low <= value <= high:
        raise UserError(f"records: {where} is {value!r}, out of its range [{low}, {high}]")
    return float(value)


def facts(records: Records) -> dict[str, Any]:
    """`records["facts"]`: what the scoring stage recorded about its run (an object), for the report's info."""
    found = records.get("facts", {})
    if not isinstance(found, dict):
        raise UserError("records: facts is not an object")
    return found


def whole(value: Any, where: str, low: int = 0, high: float = math.inf) -> int:
    """A record's count or index: a JSON integer (not a bool, not 2.0) within [low, high]; a `UserError`
    naming `where` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"records: {where} is {value!r}, not a whole number")
    return int(number(value, where, low, high))


def text(value: Any, where: str, empty: bool = True) -> str:
    """A record's text (`empty`: the empty string allowed); a `UserError` naming `where` otherwise."""
    if not isinstance(value, str) or (not empty and not value):
        raise UserError(f"records: {where} is {value!r}, not {'a' if empty else 'a non-empty'} text")
    return value


def field(record: dict[str, Any], key: str, where: str) -> Any:
    """`record[key]`; a `UserError` naming `where` when the record has no such field."""
    if not isinstance(record, dict) or key not in record:
        raise UserError(f"records: {where} has no {key}")
    return record[key]
