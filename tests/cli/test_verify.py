"""`membench verify` and `membench report`: a results file's numbers recomputed from the records in its
sidecar, and every way a file and its records can be tampered with or damaged refused with one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.app.cli import main
from harness.core.records import SIDECAR_SUFFIX, records_digest
from tests.conftest import assert_user_error
from tests.helpers.records import copy_with_records, sidecar_of, sidecar_payload, write_records

TASKS = "stereoset,mink_membership"


@pytest.fixture(scope="module")
def scored(tiny_lm, tmp_path_factory) -> Path:
    """A results file of two two-stage tasks on the tiny GPT-2 (cut with --limit), and its sidecar."""
    out = tmp_path_factory.mktemp("verify-scored")
    assert main(["evaluate", "--model", str(tiny_lm), "--tasks", TASKS, "--limit", "24", "--output-path", str(out),
                 "--bootstrap-resamples", "20", "--no-cache"]) == 0
    return next(out.glob("*.json"))


def copy_of(scored: Path, folder: Path) -> Path:
    """The results file and its sidecar copied into `folder` (the file's path there)."""
    return copy_with_records(scored, sidecar_payload(scored), folder)


def edit_sidecar(path: Path, change) -> None:
    payload = sidecar_payload(path)
    change(payload)
    write_records(path, payload)


def edit_results(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_a_fresh_file_verifies_and_reports_identically(scored, capsys):
    results = json.loads(scored.read_text())
    assert results["records_file"] == scored.name.removesuffix(".json") + SIDECAR_SUFFIX
    assert {t["name"] for t in results["tasks"] if t.get("records_sha256")} == set(TASKS.split(","))
    capsys.readouterr()
    assert main(["verify", str(scored)]) == 0
    assert "ok (2 task(s) recomputed from their records)" in capsys.readouterr().out
    assert main(["report", str(scored)]) == 0
    assert capsys.readouterr().out.count("reported from its records, identical to the file") == 2


def test_a_headline_changed_by_a_thousandth_is_refused_naming_it(scored, tmp_path, capsys):
    path = copy_of(scored, tmp_path / "f")

    def bump(data):
        task = next(t for t in data["tasks"] if t["name"] == "stereoset")
        metric = next(m for m in task["metrics"] if m["name"] == "icat" and m["tags"] == {"domain": "all"})
        metric["value"] += 0.001
    edit_results(path, bump)
    assert_user_error(capsys, ["verify", str(path)], None, "stereoset", "metric icat{domain=all}.value",
                      "difference +0.001", "do not follow from its records")


def test_one_record_changed_is_refused(scored, tmp_path, capsys):
    path = copy_of(scored, tmp_path / "f")

    def change(payload):  # a member's loss: the loss AUC moves, or at least the digest does
        prefix = next(p for p in payload["tasks"]["mink_membership"]["records"]["prefixes"] if p["label"] == 1)
        prefix["scores"]["loss"] -= 50.0
    edit_sidecar(path, change)
    assert_user_error(capsys, ["verify", str(path)], None, "mink_membership")


def test_an_edit_that_moves_no_metric_is_caught_by_the_digest(scored, tmp_path, capsys):
    path = copy_of(scored, tmp_path / "f")
    edit_sidecar(path, lambda p: p["tasks"]["stereoset"]["records"]["facts"].update(scorer="edited"))
    assert_user_error(capsys, ["verify", str(path)], None, "stereoset")


@pytest.mark.parametrize("damage, needle", [
    ("missing", "records sidecar missing"),
    ("truncated", "not a complete gzip file"),
    ("not gzip", "not a complete gzip file"),
    ("another model", "belongs to another model's file"),
    ("another config", "belongs to another run"),
    ("duplicated record", "appears twice"),
    ("removed record", "do not follow from its records"),
    ("out of range", "out of its range"),
    ("NaN score", "is NaN"),
    ("no task", "no records of task"),
])
def test_a_damaged_or_swapped_sidecar_is_one_line_and_exit_2(scored, tmp_path, capsys, damage, needle):
    path = copy_of(scored, tmp_path / "f")
    side = sidecar_of(path)
    if damage == "missing":
        side.unlink()
    elif damage == "truncated":
        side.write_bytes(side.read_bytes()[: len(side.read_bytes()) // 2])
    elif damage == "not gzip":
        side.write_text("{}")
    elif damage == "another model":
        edit_sidecar(path, lambda p: p.update(model_identity="0" * 64))
    elif damage == "another config":
        edit_sidecar(path, lambda p: p["tasks"]["stereoset"].update(config_hash="0123456789abcdef"))
    elif damage == "duplicated record":
        edit_sidecar(path, lambda p: p["tasks"]["stereoset"]["records"]["examples"].append(
            p["tasks"]["stereoset"]["records"]["examples"][0]))
    elif damage == "removed record":
        edit_sidecar(path, lambda p: p["tasks"]["stereoset"]["records"]["examples"].pop())
    elif damage == "out of range":
        edit_sidecar(path, lambda p: p["tasks"]["mink_membership"]["records"]["prefixes"][0].update(n_tokens=0))
    elif damage == "NaN score":
        edit_sidecar(path, lambda p: p["tasks"]["stereoset"]["records"]["examples"][0]["scores"].update(
            stereotype=float("nan")))
    elif damage == "no task":
        edit_sidecar(path, lambda p: p["tasks"].pop("mink_membership"))
    assert_user_error(capsys, ["verify", str(path)], None, needle)


def test_a_sidecar_named_outside_the_folder_is_refused(scored, tmp_path, capsys):
    path = copy_of(scored, tmp_path / "f")
    edit_results(path, lambda d: d.update(records_file="../../etc/passwd.records.json.gz"))
    assert_user_error(capsys, ["verify", str(path)], None, "records_file")


def test_report_writes_a_re_reported_copy_and_nothing_on_failure(scored, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    capsys.readouterr()
    assert main(["report", str(scored), "--output-path", str(out)]) == 0
    written = out / scored.name
    assert json.loads(written.read_text())["tasks"] == json.loads(scored.read_text())["tasks"]
    assert main(["verify", str(written)]) == 0
    broken = copy_of(scored, tmp_path / "broken")
    sidecar_of(broken).unlink()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_user_error(capsys, ["report", str(broken), "--output-path", str(empty)], empty, "records sidecar missing")


def test_sample_needs_a_model(scored, capsys):
    assert_user_error(capsys, ["verify", str(scored), "--sample", "5"], None, "--sample", "--model")


def test_the_model_is_checked_by_identity_then_by_a_sample(scored, tiny_lm, tmp_path, capsys):
    capsys.readouterr()
    assert main(["verify", str(scored), "--model", str(tiny_lm), "--sample", "5"]) == 0
    out = capsys.readouterr().out
    assert "stereoset: 5 records scored again, within tolerance" in out
    assert "mink_membership: 5 records scored again, within tolerance" in out
    other = tmp_path / "other-lm"
    shutil.copytree(tiny_lm, other)
    config = json.loads((other / "config.json").read_text())
    config["layer_norm_epsilon"] = 1e-3  # another config: another identity, though the weights are the same
    (other / "config.json").write_text(json.dumps(config))
    assert_user_error(capsys, ["verify", str(scored), "--model", str(other)], None, "has identity",
                      "scored with another model")


def test_every_record_digest_is_the_files(scored):
    results = json.loads(scored.read_text())
    payload = sidecar_payload(scored)
    for task in results["tasks"]:
        assert records_digest(payload["tasks"][task["name"]]["records"]) == task["records_sha256"]


def test_a_report_only_setting_reports_the_cached_records_without_a_model_pass(tiny_lm, tmp_path, monkeypatch):
    """Changing a setting only the report reads (`Task.REPORT_ONLY`), or the reporting code
    (`REPORT_VERSION`), computes the numbers again from the cached records: no model pass."""
    from tasks.mink_membership.task import MinkMembership

    args = ["evaluate", "--model", str(tiny_lm), "--tasks", "mink_membership", "--limit", "24",
            "--bootstrap-resamples", "20"]
    assert main(args + ["--output-path", str(tmp_path / "a")]) == 0

    def no_model_pass(*_):
        raise AssertionError("scored again")
    monkeypatch.setattr(MinkMembership, "score", no_model_pass)
    monkeypatch.setattr(MinkMembership, "REPORT_VERSION", MinkMembership.REPORT_VERSION + 1)
    assert main(args + ["--di-alpha", "0.1", "--output-path", str(tmp_path / "b")]) == 0
    first, again = (json.loads(next((tmp_path / d).glob("*.json")).read_text())["tasks"][0] for d in "ab")
    assert again["config"]["di_alpha"] == 0.1 and again["report_version"] == first["report_version"] + 1
    assert again["records_sha256"] == first["records_sha256"]  # the same records, reported again
    with pytest.raises(AssertionError, match="scored again"):  # a setting the scoring reads does score
        main(args + ["--lengths", "32", "--output-path", str(tmp_path / "c")])
