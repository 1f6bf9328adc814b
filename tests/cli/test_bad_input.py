"""Bad input gives one `membench: error:` line on stderr, exit status 2, and writes nothing;
awkward but valid input (no pad token, empty or over-long texts, a model kind a task cannot
score) still gives a valid results file. Everything runs `harness.app.cli.main` in-process but the last few
tests, which run the real command line (what reaches stderr there, a file-size limit)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import assert_user_error, without_task_lines, write_jsonl

from harness.app.cli import main
from harness.core.results import load_results

TASK = "mink_membership"
FAST = ["--lengths", "1,2", "--bootstrap-resamples", "20", "--device", "cpu", "--no-cache"]


def good_rows() -> list[dict]:
    """Both classes, distinct first words, each text a few words long."""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    return [{"text": f"{word} went to the market on a sunny day", "label": i % 2} for i, word in enumerate(words)]


@pytest.fixture
def out(tmp_path) -> Path:
    return tmp_path / "out"


@pytest.fixture
def good_data(tmp_path) -> Path:
    return write_jsonl(tmp_path / "good.jsonl", good_rows())


def evaluate_argv(model, data, out: Path, *extra: str) -> list[str]:
    return ["evaluate", "--model", str(model), "--tasks", TASK, "--data", str(data),
            "--output-path", str(out), *FAST, *extra]


# ---------------------------------------------------------------- models


def test_nonexistent_model_path(capsys, tmp_path, out, good_data):
    missing = tmp_path / "nope"
    assert_user_error(capsys, evaluate_argv(missing, good_data, out), out, "does not exist", str(missing))


def test_model_folder_without_config(capsys, tmp_path, out, good_data):
    folder = tmp_path / "not-a-checkpoint"
    folder.mkdir()
    (folder / "README.md").write_text("hello\n")
    assert_user_error(capsys, evaluate_argv(folder, good_data, out), out, "config.json", str(folder))


def test_model_path_is_a_file(capsys, tmp_path, out, good_data):
    assert_user_error(capsys, evaluate_argv(good_data, good_data, out), out, "not a directory")


@pytest.fixture
def pickle_only_lm(tiny_lm, tmp_path) -> Path:
    """tiny_lm with model.safetensors replaced by a torch.save'd state dict."""
    import torch
    from safetensors.torch import load_file

    folder = tmp_path / "pickle-lm"
    shutil.copytree(tiny_lm, folder)
    state = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save(state, folder / "pytorch_model.bin")
    return folder


def test_pickle_only_weights_refused_without_allow_pickle(capsys, pickle_only_lm, out, good_data):
    line = assert_user_error(capsys, evaluate_argv(pickle_only_lm, good_data, out), out,
                             "pytorch_model.bin", "--allow-pickle")
    assert "pickle" in line


def test_pickle_only_weights_load_with_allow_pickle(capsys, pickle_only_lm, out, good_data):
    """The refusal above is about the flag, not about a broken checkpoint."""
    assert main(evaluate_argv(pickle_only_lm, good_data, out, "--allow-pickle")) == 0
    [path] = out.glob("*.json")
    results = load_results(path)
    assert results.model.details["weight_files"] == ["pytorch_model.bin"]
    assert results.task(TASK).status == "ok"


def test_config_json_not_an_object(capsys, tiny_lm, tmp_path, out, good_data):
    folder = tmp_path / "list-config"
    shutil.copytree(tiny_lm, folder)
    (folder / "config.json").write_text("[1, 2]\n")
    assert_user_error(capsys, evaluate_argv(folder, good_data, out), out, "config.json")


def test_corrupt_safetensors(capsys, tiny_lm, tmp_path, out, good_data):
    folder = tmp_path / "corrupt"
    shutil.copytree(tiny_lm, folder)
    (folder / "model.safetensors").write_bytes(b"not a safetensors file")
    assert_user_error(capsys, evaluate_argv(folder, good_data, out), out, "model.safetensors")


# ---------------------------------------------------------------- tasks


def test_unknown_task(capsys, tiny_lm, out):
    argv = ["evaluate", "--model", str(tiny_lm), "--tasks", "no_such_task", "--output-path", str(out)]
    assert_user_error(capsys, argv, out, "unknown task", "no_such_task", TASK)


# ---------------------------------------------------------------- results files (`membench validate`)


def minimal_results() -> dict:
    return {
        "schema_version": 1, "created_at": "2024-01-01T00:00:00+00:00",
        "harness": {"version": "0.1.0", "git_commit": None},
        "model": {"name": "m", "source": "m", "revision": None, "identity": "0" * 64,
                  "identity_kind": "weights-sha256", "kind": "causal-lm", "dtype": "float32", "device": "cpu"},
        "environment": {"python": "3.12", "torch": "2", "transformers": "5", "platform": "linux"},
        "run": {"batch_size": 16, "limit": None, "seed": 0},
        "tasks": [],
    }


def test_validate_accepts_the_minimal_file(capsys, tmp_path):
    """Control for the cases below: the base document itself is valid."""
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(minimal_results()))
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.strip() == f"{path}: ok (m, 0 task(s))"


def test_validate_not_json(capsys, tmp_path):
    path = tmp_path / "results.json"
    path.write_text("{this is not json\n")
    assert_user_error(capsys, ["validate", str(path)], None, str(path), "not valid JSON")


def test_validate_missing_required_fields(capsys, tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"schema_version": 1, "created_at": "2024-01-01T00:00:00+00:00"}))
    assert_user_error(capsys, ["validate", str(path)], None, str(path), "harness", "required")


def test_validate_missing_nested_field(capsys, tmp_path):
    raw = minimal_results()
    del raw["model"]["identity"]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(raw))
    assert_user_error(capsys, ["validate", str(path)], None, "model.identity", "required")


def test_validate_unknown_schema_version(capsys, tmp_path):
    raw = minimal_results()
    raw["schema_version"] = 99
    path = tmp_path / "results.json"
    path.write_text(json.dumps(raw))
    assert_user_error(capsys, ["validate", str(path)], None, str(path), "schema_version", "99")


def test_validate_not_utf8(capsys, tmp_path):
    path = tmp_path / "results.json"
    raw = json.dumps(minimal_results()).encode("utf-8")
    assert b'"name": "m"' in raw
    path.write_bytes(raw.replace(b'"name": "m"', b'"name": "caf\xe9"'))  # Latin-1, not UTF-8
    assert_user_error(capsys, ["validate", str(path)], None, str(path), "UTF-8")


def test_validate_missing_file(capsys, tmp_path):
    path = tmp_path / "absent.json"
    assert_user_error(capsys, ["validate", str(path)], None, str(path), "no such file")


# ---------------------------------------------------------------- datasets (--data)


def test_empty_dataset(capsys, tiny_lm, tmp_path, out):
    data = tmp_path / "empty.jsonl"
    data.write_text("")
    assert_user_error(capsys, evaluate_argv(tiny_lm, data, out), out, str(data), "no texts")


def test_rows_without_label(capsys, tiny_lm, tmp_path, out):
    data = write_jsonl(tmp_path / "nolabel.jsonl", [{"text": r["text"]} for r in good_rows()])
    assert_user_error(capsys, evaluate_argv(tiny_lm, data, out), out, f"{data}:1", "label")


def test_only_one_class(capsys, tiny_lm, tmp_path, out):
    data = write_jsonl(tmp_path / "members.jsonl", [dict(r, label=1) for r in good_rows()])
    assert_user_error(capsys, evaluate_argv(tiny_lm, data, out), out, str(data), "both classes")


def test_dataset_inference_asked_for_with_too_few_texts(capsys, tiny_lm, good_data, out):
    """3 texts a side cannot both fit and test dataset inference: refused when the user asks for it (a
    setting named); left at its defaults it is only not run (info), and the other metrics are kept."""
    assert_user_error(capsys, evaluate_argv(tiny_lm, good_data, out, "--di-alpha", "0.05"), out, str(good_data),
                      "at least 4 texts on each side")


def test_dataset_inference_settings_out_of_range(capsys, tiny_lm, good_data, out):
    assert_user_error(capsys, evaluate_argv(tiny_lm, good_data, out, "--di-alpha", "1.5"), out, "--di-alpha", "less than 1")
    # 9 relabelings cannot reach p <= 0.05 (the smallest permutation p-value is 1 / 10)
    assert_user_error(capsys, evaluate_argv(tiny_lm, good_data, out, "--di-permutations", "9"), out,
                      "--di-permutations 9 cannot give a p-value at or below --di-alpha 0.05", "at least 19")
    # mink_membership's 39 relabelings reach 0.025, not 0.01: a stricter alpha says how many it needs
    assert_user_error(capsys, evaluate_argv(tiny_lm, good_data, out, "--di-alpha", "0.01"), out,
                      "--di-permutations 39 cannot give a p-value at or below --di-alpha 0.01", "at least 99")
    assert_user_error(capsys, evaluate_argv(tiny_lm, good_data, out, "--di-stop-early", "maybe"), out,
                      "--di-stop-early: Input should be a valid boolean")
    assert_user_error(capsys, evaluate_argv(tiny_lm, good_data, out, "--di-penalty", "-0.1"), out,
                      "--di-penalty", "greater than or equal to 0")


def test_malformed_json_line(capsys, tiny_lm, tmp_path, out):
    data = tmp_path / "broken.jsonl"
    lines = [json.dumps(r) for r in good_rows()]
    lines[2] = '{"text": "unterminated, "label": 1'
    data.write_text("\n".join(lines) + "\n")
    assert_user_error(capsys, evaluate_argv(tiny_lm, data, out), out, f"{data}:3", "not valid JSON")


def test_bad_label_value(capsys, tiny_lm, tmp_path, out):
    rows = good_rows()
    rows[1]["label"] = "yes"
    data = write_jsonl(tmp_path / "badlabel.jsonl", rows)
    assert_user_error(capsys, evaluate_argv(tiny_lm, data, out), out, f"{data}:2", "'yes'")


def test_non_utf8_data(capsys, tiny_lm, tmp_path, out):
    data = tmp_path / "latin1.jsonl"
    data.write_bytes(b'{"text": "caf\xe9 au lait", "label": 1}\n{"text": "th\xe9 vert", "label": 0}\n')
    assert_user_error(capsys, evaluate_argv(tiny_lm, data, out), out, str(data), "UTF-8")


def test_missing_data_file(capsys, tiny_lm, tmp_path, out):
    data = tmp_path / "absent.jsonl"
    assert_user_error(capsys, evaluate_argv(tiny_lm, data, out), out, "not found", str(data))


def test_zero_length(capsys, tiny_lm, tmp_path, out):
    rows = good_rows() + [{"text": "", "label": 0}]
    data = write_jsonl(tmp_path / "with-empty.jsonl", rows)
    argv = evaluate_argv(tiny_lm, data, out)
    argv[argv.index("1,2")] = "0"
    assert_user_error(capsys, argv, out, "--lengths")


# ---------------------------------------------------------------- awkward input that must work


def test_tiny_lm_tokenizer_has_no_pad_token(tiny_lm):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_lm)
    assert tokenizer.pad_token is None and tokenizer.pad_token_id is None
    assert tokenizer.eos_token is not None


def test_no_pad_token_empty_and_long_texts(capsys, tiny_lm, tmp_path, out):
    """A tokenizer without pad token, an empty text, and a text far past the 32-token context."""
    long_text = " ".join(f"word{i}" for i in range(400))
    rows = ([{"id": "empty", "text": "", "label": 0}] + good_rows()
            + [{"id": "long", "text": long_text, "label": 1}])
    data = write_jsonl(tmp_path / "awkward.jsonl", rows)
    argv = evaluate_argv(tiny_lm, data, out, "--log-samples")
    argv[argv.index("1,2")] = "1,2,50"
    capsys.readouterr()
    assert main(argv) == 0
    [path] = out.glob("*.json")
    assert capsys.readouterr().out.splitlines()[-1] == str(path)  # after the results table
    results = load_results(path)
    entry = results.task(TASK)
    assert entry.status == "ok"
    n = len(rows)
    assert entry.counts["texts"] == n
    # the empty text is too short at every length; at 50 words only the long text remains
    assert entry.counts["too_short@1"] == 1 and entry.counts["too_short@2"] == 1
    assert entry.counts["members@1"] == 4 and entry.counts["nonmembers@1"] == 3
    assert entry.counts["too_short@50"] == n - 1
    assert (entry.counts["members@50"], entry.counts["nonmembers@50"]) == (1, 0)
    scoring = entry.info["scoring"]
    assert scoring["context_length"] == 32
    assert scoring["n_windows"] > scoring["n_scored_sequences"]  # the long text needed a sliding window
    aucs = {m.tags["length"]: m for m in entry.metrics if m.name == "auc" and m.tags["score"] == "min_k_20"}
    assert set(aucs) == {"1", "2", "50"}
    for length in ("1", "2"):
        assert 0.0 <= aucs[length].value <= 1.0 and aucs[length].n == n - 1
    assert aucs["50"].value is None and aucs["50"].n == 1  # one class only: undefined, not a crash
    samples = [json.loads(line) for line in (out / entry.samples_file).read_text().splitlines()]
    long50 = [s for s in samples if s["id"] == "long" and s["length"] == 50]
    assert len(long50) == 1 and long50[0]["n_tokens"] > 32
    assert all(s["id"] != "empty" for s in samples)
    assert all(all(v == v for v in s["scores"].values()) for s in samples)  # no NaN scores


def test_task_that_cannot_score_the_kind_is_skipped(tiny_lm, out, good_data):
    assert main(evaluate_argv(tiny_lm, good_data, out, "--model-kind", "encoder")) == 0
    [path] = out.glob("*.json")
    results = load_results(path)
    assert results.model.kind == "encoder"
    entry = results.task(TASK)
    assert entry is not None
    assert entry.status == "skipped"
    assert "causal-lm" in entry.skip_reason and "encoder" in entry.skip_reason
    assert entry.metrics == []


V2_ATTACKS = "loss,zlib,min_k,min_k_pp"


@pytest.fixture
def nan_lm(tiny_lm, tmp_path) -> Path:
    """tiny_lm with the position embedding of position 5 set to NaN: a sequence of more than 5 token
    ids (BOS included) gives NaN logits, a shorter one finite logits (scored one text per batch)."""
    import torch
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "nan-lm"
    shutil.copytree(tiny_lm, folder)
    state = load_file(folder / "model.safetensors")
    state["transformer.wpe.weight"][5] = torch.nan
    save_file(state, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def test_nan_scores_are_counted_and_dropped_with_a_warning(capsys, caplog, nan_lm, tmp_path, out):
    """A model that emits NaN on some texts: those texts are left out of the metrics, counted, and
    warned about; the metrics equal those of a run without them."""
    finite = [{"id": "m1", "text": "a b c", "label": 1}, {"id": "m2", "text": "b a c", "label": 1},
              {"id": "n1", "text": "c a b", "label": 0}, {"id": "n2", "text": "a c b", "label": 0}]
    broken = [{"id": "m3", "text": "alpha went to", "label": 1}, {"id": "n3", "text": "charlie went to", "label": 0}]
    both = write_jsonl(tmp_path / "both.jsonl", finite + broken)
    only_finite = write_jsonl(tmp_path / "finite.jsonl", finite)
    # the attacks scored from the token log-probs only (recall's prefix would make every text NaN here)
    argv = evaluate_argv(nan_lm, both, out, "--log-samples", "--batch-size", "1", "--attacks", V2_ATTACKS)
    argv[argv.index("1,2")] = "2"
    capsys.readouterr()
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert "2 text prefixes have a non-finite score" in caplog.text  # logging.warning: on stderr from the CLI
    [path] = out.glob("*.json")
    entry = load_results(path).task(TASK)
    assert entry.counts["non_finite@2"] == 2 and entry.counts["members@2"] == 3
    assert entry.info["non_finite_scores"] == {name: 2 for name in entry.info["non_finite_scores"]}
    assert {"loss@2", "zlib@2", "min_k_20@2", "min_k_pp_60@2"} <= set(entry.info["non_finite_scores"])
    samples = [json.loads(line) for line in (out / entry.samples_file).read_text().splitlines()]
    assert {s["id"] for s in samples if s["scores"]["loss"] is None} == {"m3", "n3"}  # null, not NaN
    # the same metrics as a run on the four finite texts alone
    argv = evaluate_argv(nan_lm, only_finite, tmp_path / "out2", "--batch-size", "1", "--attacks", V2_ATTACKS)
    argv[argv.index("1,2")] = "2"
    assert main(argv) == 0
    [alone] = (tmp_path / "out2").glob("*.json")
    reference = load_results(alone).task(TASK)
    assert reference.counts["non_finite@2"] == 0 and "non_finite_scores" not in reference.info
    # the blind baselines never query the model: they score all six texts of the first run (four of the second)
    def model_scored(e):
        return [(m.name, m.tags, m.value, m.ci_low, m.ci_high, m.n) for m in e.metrics
                if not m.tags["score"].startswith("blind_")]
    assert model_scored(entry) == model_scored(reference)
    assert {m[-1] for m in model_scored(entry)} == {4}


# ---------------------------------------------------------------- issue 17: seeds, odd files, writes that fail


def test_negative_seed_is_refused_at_parsing(capsys, tiny_lm, tmp_path, out, good_data):
    """numpy refuses negative seeds (and its global seed anything from 2**32): refused before any work,
    as a usage error (argparse exits with status 2)."""
    for argv in (evaluate_argv(tiny_lm, good_data, out, "--seed", "-1"),
                 ["export-lm-eval", str(out), "--model", str(tiny_lm), "--seed", "-1"],
                 ["reference", "build", "--quick", "--seed", "-1"],
                 evaluate_argv(tiny_lm, good_data, out, "--seed", str(2**32))):
        capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
        captured = capsys.readouterr()
        [line] = captured.err.splitlines()
        assert line.startswith("membench: error: argument --seed: expected a seed from 0 to 4294967295"), line
        assert captured.out == "" and not out.exists()


@pytest.mark.parametrize("value", ["-1", str(2**32)])
def test_reference_seed_out_of_range(capsys, tiny_lm, out, value):
    argv = ["evaluate", "--model", str(tiny_lm), "--tasks", TASK, "--reference-seed", value, "--output-path", str(out)]
    assert_user_error(capsys, argv, out, "--reference-seed")


def test_architectures_not_a_list(capsys, tiny_lm, tmp_path, out, good_data):
    """Detected or given with --model-kind, a config.json whose architectures is not a list of names is refused."""
    folder = tmp_path / "arch5"
    shutil.copytree(tiny_lm, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(config, architectures=5)))
    for extra in ((), ("--model-kind", "causal-lm")):
        assert_user_error(capsys, evaluate_argv(folder, good_data, out, *extra), out, "config.json", "architectures",
                          "list of class names")


def _copy_with_link(tiny_lm: Path, folder: Path, name: str, target: str) -> Path:
    shutil.copytree(tiny_lm, folder)
    (folder / name).unlink()
    (folder / name).symlink_to(target)
    return folder


def test_dangling_weights_symlink(capsys, tiny_lm, tmp_path, out, good_data):
    folder = _copy_with_link(tiny_lm, tmp_path / "dangling", "model.safetensors", str(tmp_path / "gone.safetensors"))
    assert_user_error(capsys, evaluate_argv(folder, good_data, out), out, "model.safetensors", "does not exist")


@pytest.mark.parametrize("name", ["model.safetensors", "config.json", "tokenizer.json"])
def test_checkpoint_file_linked_to_dev_zero(capsys, tiny_lm, tmp_path, out, good_data, name):
    """A weights, config or tokenizer file that is a link to /dev/zero would be read forever."""
    folder = _copy_with_link(tiny_lm, tmp_path / "zero", name, "/dev/zero")
    assert_user_error(capsys, evaluate_argv(folder, good_data, out), out, name, "/dev/zero", "not a regular file")


def test_output_path_is_a_file_checked_before_any_work(capsys, tmp_path, good_data):
    """Refused before the model is even looked at: the missing model is not what the error says."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    for output in (afile, afile / "sub"):
        line = assert_user_error(capsys, evaluate_argv(tmp_path / "no-model", good_data, output), None,
                                 "--output-path", f"{afile} is not a folder")
        assert "no-model" not in line
    assert afile.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_output_path_unwritable(capsys, tmp_path, good_data, tiny_lm):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert_user_error(capsys, evaluate_argv(tiny_lm, good_data, locked / "out"), None, "--output-path",
                          "permission denied")
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)


def test_membench_cache_is_a_file(capsys, monkeypatch, tmp_path, tiny_lm, out, good_data):
    afile = tmp_path / "cache-file"
    afile.write_text("x")
    monkeypatch.setenv("MEMBENCH_CACHE", str(afile))
    assert_user_error(capsys, evaluate_argv(tiny_lm, good_data, out), out, f"MEMBENCH_CACHE={afile}", "not a folder")


def test_leaderboard_output_is_a_folder(capsys, monkeypatch, tmp_path):
    work = tmp_path / "work"
    (work / "subs").mkdir(parents=True)
    monkeypatch.chdir(work)
    assert_user_error(capsys, ["leaderboard", "--submissions", "subs", "--output", "."], None, "--output", "folder")
    assert sorted(p.name for p in work.iterdir()) == ["subs"]  # no plots folder, no temporary file


def test_prune_output_under_a_file(capsys, tiny_lm, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert_user_error(capsys, ["prune", "--model", str(tiny_lm), "--sparsity", "0.5", "--output", str(afile / "sub")],
                      None, "--output", f"{afile} is not a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_export_into_an_existing_file(capsys, tiny_lm, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert_user_error(capsys, ["export-lm-eval", str(afile), "--model", str(tiny_lm)], None, f"{afile} is not a folder")
    assert afile.read_text() == "x"


def exported_meta() -> dict:
    """`metadata.membench` as `membench export-lm-eval` writes it (`task_yaml`), for a made-up task."""
    from harness.core.results import Headline
    from harness.interop.lm_eval_export import ExportedMetric, LmEvalTask, task_yaml

    head = Headline(metric="auc", tags={"score": "loss"}, label="AUC", better="higher")
    task = LmEvalTask(name="membench_x", entry_name="mink_membership", version=1, config={"data": "x"},
                      data_source="s", headline=head, summary=[head], settings={}, docs=[],
                      metrics=[ExportedMetric("auc", "auc", {"score": "loss"}, True)],
                      module="tasks.mink_membership.for_lm_eval", counts={"texts": 4})
    facts = {"model": {"name": "m", "revision": "", "tokenizer_fingerprint": "0" * 16}, "limit": None, "seed": 0}
    return json.loads(json.dumps(task_yaml(task, Path("x.jsonl"), facts)["metadata"]["membench"]))


def lm_eval_results(model: Path, membench_meta) -> dict:
    """An lm-eval results file of one task whose `metadata.membench` is `membench_meta`."""
    return {"results": {"membench_x": {"auc,none": 0.5}},
            "configs": {"membench_x": {"metadata": {"version": 1, "membench": membench_meta}}},
            "n-samples": {"membench_x": {"original": 4, "effective": 4}},
            "config": {"model_args": f"pretrained={model},dtype=float32"}}


def _without(key: str):
    return lambda meta: meta.pop(key)


@pytest.mark.parametrize("edit, needle", [
    (_without("metrics"), "metadata.membench.metrics: Field required"),
    (_without("task"), "metadata.membench.task"),
    (_without("config"), "metadata.membench.config"),
    (lambda meta: meta.update(version="three"), "metadata.membench.version"),
    (lambda meta: meta.update(metrics=[{"key": 1}]), "metadata.membench.metrics.0"),
    (lambda meta: meta.update(metrics="auc"), "metadata.membench.metrics"),
    (lambda meta: meta.update(headline={"metric": "auc"}), "metadata.membench.headline"),
    (lambda meta: meta.update(config="x"), "metadata.membench.config"),
    (lambda meta: meta.update(model="m"), "metadata.membench.model"),
    (lambda meta: meta.update(counts={"n": "many"}), "metadata.membench.counts"),
    (lambda meta: meta.update(task="Not A Task"), "metadata.membench.task"),
])
def test_import_with_incomplete_or_ill_typed_metadata(capsys, tiny_lm, tmp_path, edit, needle):
    meta = exported_meta()
    edit(meta)
    path = tmp_path / "results_x.json"
    path.write_text(json.dumps(lm_eval_results(tiny_lm, meta)))
    out = tmp_path / "out"
    assert_user_error(capsys, ["import-lm-eval", str(path), "--output-path", str(out)], out, str(path), needle)


def test_import_reads_the_metadata_export_writes(capsys, tiny_lm, tmp_path):
    """Control for the cases above: the metadata as exported passes its check, and the import goes on
    to the model (whose tokenizer is not the one recorded)."""
    path = tmp_path / "results_x.json"
    path.write_text(json.dumps(lm_eval_results(tiny_lm, exported_meta())))
    out = tmp_path / "out"
    assert_user_error(capsys, ["import-lm-eval", str(path), "--output-path", str(out)], out, "membench_x",
                      "tokenizer", "export again")


@pytest.mark.parametrize("change, needle", [
    (lambda raw: raw["configs"]["membench_x"].update(metadata=5), "configs.membench_x.metadata must be an object"),
    (lambda raw: raw["configs"]["membench_x"]["metadata"].update(membench="m"), "metadata.membench must be an object"),
    (lambda raw: raw.update(config=[1]), "config must be an object"),
    (lambda raw: raw["config"].update(model_args=[1]), "model_args"),
    (lambda raw: raw.update({"n-samples": {"membench_x": 3}}), "n-samples.membench_x must be an object"),
    (lambda raw: raw["results"].update(membench_x=[0.5]), "results.membench_x must be an object"),
])
def test_import_with_ill_typed_lm_eval_fields(capsys, tiny_lm, tmp_path, change, needle):
    raw = lm_eval_results(tiny_lm, exported_meta())
    change(raw)
    path = tmp_path / "results_x.json"
    path.write_text(json.dumps(raw))
    out = tmp_path / "out"
    assert_user_error(capsys, ["import-lm-eval", str(path), "--output-path", str(out)], out, needle)


def test_stray_world_size_without_a_launcher(capsys, monkeypatch, tiny_lm, out, good_data):
    from harness.scoring.distributed import LAUNCHER_VARIABLES, RENDEZVOUS_VARIABLES

    for name in LAUNCHER_VARIABLES + RENDEZVOUS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert_user_error(capsys, evaluate_argv(tiny_lm, good_data, out), out, "WORLD_SIZE=2", "MASTER_ADDR",
                      "torchrun", "accelerate launch", "unset WORLD_SIZE")


def test_an_os_error_is_one_line(capsys, monkeypatch):
    """The safety net: an OSError no command turned into a message of its own."""
    from harness.app import cli

    def fail(_):
        raise PermissionError(13, "Permission denied", "/some/file")

    monkeypatch.setitem(cli.COMMANDS, "tasks", fail)
    assert_user_error(capsys, ["tasks"], None, "permission denied: /some/file")


# ---------------------------------------------------------------- issue 17: endless and oversized inputs


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo.json"
    os.mkfifo(path)
    return path


def test_validate_refuses_devices_fifos_and_oversized_files(capsys, monkeypatch, tmp_path):
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    for path in (link, Path("/dev/zero"), _fifo(tmp_path)):
        assert_user_error(capsys, ["validate", str(path)], None, str(path), "not a regular file")
    good = tmp_path / "ok.json"
    good.write_text(json.dumps(minimal_results()))
    monkeypatch.setattr("harness.core.results.RESULTS_MAX_BYTES", 100)
    assert_user_error(capsys, ["validate", str(good)], None, str(good), "more than membench reads from a results file")


def test_weat_tests_from_dev_zero(capsys, tiny_lm, out):
    argv = ["evaluate", "--model", str(tiny_lm), "--tasks", "weat", "--weat-tests", "/dev/zero", "--device", "cpu",
            "--output-path", str(out)]
    assert_user_error(capsys, argv, out, "/dev/zero", "not a regular file")


def test_data_file_linked_to_dev_zero(capsys, tiny_lm, tmp_path, out):
    link = tmp_path / "data.jsonl"
    link.symlink_to("/dev/zero")
    assert_user_error(capsys, evaluate_argv(tiny_lm, link, out), out, str(link), "not a regular file")
    assert_user_error(capsys, evaluate_argv(tiny_lm, _fifo(tmp_path), out), out, "a FIFO")


# ---------------------------------------------------------------- issue 17: the real command line, in a subprocess


ROOT = Path(__file__).resolve().parents[2]


def _membench(argv: list[str], tmp_path: Path, file_size_limit: int | None = None) -> subprocess.CompletedProcess:
    import resource

    from harness.scoring.distributed import LAUNCHER_VARIABLES

    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    env.update(MEMBENCH_CACHE=str(tmp_path / "cache"), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1",
               PYTHONDONTWRITEBYTECODE="1", TOKENIZERS_PARALLELISM="false")

    def limit():
        if file_size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run([sys.executable, "-m", "harness", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, preexec_fn=limit)


def _one_error_line(done: subprocess.CompletedProcess, *needles: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert done.stdout == ""
    lines = without_task_lines(done.stderr)
    assert len(lines) == 1 and lines[0].startswith("membench: error: "), lines
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def test_missing_stereoset_data_is_one_line(tmp_path, tiny_lm):
    """Not a warning about the source and then the error: one line."""
    out = tmp_path / "out"
    done = _membench(["evaluate", "--model", str(tiny_lm), "--tasks", "stereoset", "--stereoset-data",
                      str(tmp_path / "missing.json"), "--device", "cpu", "--output-path", str(out)], tmp_path)
    _one_error_line(done, "missing.json", "not found")
    assert not out.exists()


def test_file_size_limit_while_writing_the_results(monkeypatch, tmp_path, tiny_lm, good_data):
    """ulimit -f: the results file cannot be written (EFBIG; SIGXFSZ ignored): one line, no partial file.
    A first run (in this process, pinned alike) fills the cache, so the second writes nothing but the
    samples file before the results file."""
    LIMIT = 16384
    argv = [a for a in evaluate_argv(tiny_lm, good_data, tmp_path / "first") if a != "--no-cache"]
    monkeypatch.setenv("MEMBENCH_CACHE", str(tmp_path / "cache"))  # the cache _membench gives the second run
    assert main(argv + ["--log-samples"]) == 0
    [written] = (tmp_path / "first").glob("*.json")
    [samples] = (tmp_path / "first").glob("*.samples.jsonl")
    # the samples file fits under the limit, the results file does not: the samples file written first is removed
    assert samples.stat().st_size < LIMIT < written.stat().st_size, (samples.stat().st_size, written.stat().st_size)
    out = tmp_path / "second"
    argv[argv.index("--output-path") + 1] = str(out)
    done = _membench(argv + ["--log-samples"], tmp_path, file_size_limit=LIMIT)
    _one_error_line(done, "cannot write", "file too large")
    assert not out.exists() or list(out.iterdir()) == [], sorted(out.iterdir())
