"""lm-evaluation-harness interop: exported tasks run in `lm_eval` agree with `membench evaluate`.

One export of StereoSet, paywall memorization and LOSS membership for the quick reference GPT-2
(15 epochs), run by the installed `lm_eval` (offline, float32, CPU), imported back, and compared
with `membench evaluate` on the same model, data and limit: every metric within 1e-4, and every
document's score too (generations identical).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.app.cli import main
from harness.app.registry import discover
from harness.core.results import load_results
from tests.conftest import assert_user_error

LIMIT = "30"
LENGTHS = "16"  # within the quick model's 64-token context (longer texts: see the card's differences)
TASKS = "mink_membership,paywall_memorization,stereoset"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_lm_eval(root: Path, model_args: str, exported: Path, batch_size: int) -> Path:
    """Run the installed `lm_eval` (offline, float32, CPU) on the exported tasks; its results file."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(root / "hf"),
           "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"{model_args},dtype=float32",
         "--include_path", str(exported), "--tasks", "membench", "--device", "cpu", "--batch_size", str(batch_size),
         "--output_path", str(root / "lm-eval-out"), "--log_samples"],
        env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return next((root / "lm-eval-out").rglob("results_*.json"))


def import_results(lm_eval_results: Path, out: Path, *flags: str):
    """`membench import-lm-eval` of lm-eval's results file into `out`; the results file it wrote."""
    assert main(["import-lm-eval", str(lm_eval_results), *flags, "--output-path", str(out)]) == 0
    return load_results(next(out.glob("*.json")))


@pytest.fixture(scope="module")
def runs(quick_reference, tmp_path_factory):
    """(export folder, lm-eval output folder, imported results, membench results folder)."""
    root = tmp_path_factory.mktemp("lm-eval")
    model = str(quick_reference / "xsum-gpt2-e30")
    exported = root / "tasks"
    assert main(["export-lm-eval", str(exported), "--model", model, "--limit", LIMIT, "--lengths", LENGTHS]) == 0
    lm_eval_results = run_lm_eval(root, f"pretrained={model}", exported, batch_size=8)
    imported = import_results(lm_eval_results, root / "imported")
    native = root / "native"
    assert main(["evaluate", "--model", model, "--tasks", TASKS, "--limit", LIMIT, "--lengths", LENGTHS,
                 "--dtype", "float32", "--no-cache", "--log-samples", "--output-path", str(native)]) == 0
    return exported, lm_eval_results.parent, imported, native


def native_results(native: Path):
    return load_results(next(p for p in native.glob("*.json")))


def lm_eval_samples(folder: Path, task: str) -> list[dict]:
    return read_jsonl(next(folder.glob(f"samples_{task}_*.jsonl")))


def test_every_exported_metric_agrees_with_membench(runs):
    _, _, imported, native = runs
    mine = native_results(native)
    pairs = {"loss_membership": "mink_membership", "paywall_memorization": "paywall_memorization",
             "stereoset": "stereoset"}
    assert sorted(t.name for t in imported.tasks) == sorted(pairs)
    compared = 0
    for entry in imported.tasks:
        reference = {(m.name, tuple(sorted(m.tags.items()))): m.value for m in mine.task(pairs[entry.name]).metrics}
        for metric in entry.metrics:
            expected = reference[(metric.name, tuple(sorted(metric.tags.items())))]
            assert metric.value == pytest.approx(expected, abs=1e-4), (entry.name, metric)
            compared += 1
        assert entry.version == discover()[pairs[entry.name]].VERSION
    assert compared >= 3 * 1 + 8 + 4 * 4  # loss (auc, 2 tpr), paywall (2 groups x 4), stereoset (>= 4 domains x 4)
    # same settings, same hash: the imported StereoSet and paywall entries are the same runs
    for name in ("stereoset", "paywall_memorization"):
        assert imported.task(name).config_hash == mine.task(name).config_hash
    assert imported.model.identity == mine.model.identity


def test_every_document_scores_alike(runs):
    _, out, _, native = runs
    stem = next(native.glob("*.json")).stem
    ours = {t: read_jsonl(native / f"{stem}.{t}.samples.jsonl") for t in TASKS.split(",")}
    theirs = {d["doc"]["id"]: d["ss_all"] for d in lm_eval_samples(out, "membench_stereoset")}
    assert len(theirs) == len(ours["stereoset"]) == int(LIMIT)
    for sample in ours["stereoset"]:
        _, _, *scores = theirs[sample["id"]]
        assert scores == pytest.approx(list(sample["scores"].values()), abs=1e-4)
    theirs = {d["doc"]["id"]: d["auc_16"][2] for d in lm_eval_samples(out, "membench_loss_membership")}
    assert len(theirs) == len(ours["mink_membership"])
    for sample in ours["mink_membership"]:
        assert theirs[sample["id"]] == pytest.approx(sample["scores"]["loss"], abs=1e-4)
    generations = {d["doc"]["id"]: d["filtered_resps"][0].lstrip() for d in lm_eval_samples(out, "membench_paywall_memorization")}
    assert {s["id"]: s["generation"] for s in ours["paywall_memorization"]} == generations


def test_yaml_files_carry_the_task_version_and_absolute_data_paths(runs):
    import yaml

    exported, *_ = runs

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    for path in sorted(exported.glob("*.yaml")):
        config = yaml.load(path.read_text(encoding="utf-8"), Loader=Loader)
        membench = config["metadata"]["membench"]
        source_task = "mink_membership" if membench["task"] == "loss_membership" else membench["task"]
        assert config["metadata"]["version"] == discover()[source_task].VERSION
        data_file = Path(config["dataset_kwargs"]["data_files"]["test"])
        assert data_file.is_absolute() and data_file.is_file()
        assert {m["metric"] for m in config["metric_list"]} == {m["key"] for m in membench["metrics"]}
    assert (exported / "utils.py").is_file()


def test_imported_results_go_on_the_board(runs, tmp_path):
    _, lm_eval_out, _, _ = runs
    submissions = tmp_path / "submissions"
    results = next(lm_eval_out.glob("results_*.json"))
    assert main(["import-lm-eval", str(results), "--output-path", str(submissions), "--model-name", "via-lm-eval"]) == 0
    board = tmp_path / "BOARD.md"
    assert main(["leaderboard", "--submissions", str(submissions), "--output", str(board)]) == 0
    text = board.read_text(encoding="utf-8")
    assert "via-lm-eval" in text and "## loss_membership" in text
    assert "Task card: [tasks/mink_membership/README.md]" in text  # the card of the task it comes from


def edited_results(runs, tmp_path, edit) -> Path:
    _, lm_eval_out, _, _ = runs
    raw = json.loads(next(lm_eval_out.glob("results_*.json")).read_text(encoding="utf-8"))
    edit(raw)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def test_import_refuses_a_run_with_lm_eval_limit(runs, tmp_path, capsys):
    def limited(raw):
        raw["n-samples"]["membench_stereoset"]["effective"] = 5

    path = edited_results(runs, tmp_path, limited)
    out = tmp_path / "out"
    assert_user_error(capsys, ["import-lm-eval", str(path), "--output-path", str(out)], out, "--limit")


def test_import_refuses_a_model_with_another_tokenizer(runs, tmp_path, capsys):
    def other_tokenizer(raw):
        raw["configs"]["membench_stereoset"]["metadata"]["membench"]["model"]["tokenizer_fingerprint"] = "0" * 16

    path = edited_results(runs, tmp_path, other_tokenizer)
    out = tmp_path / "out"
    assert_user_error(capsys, ["import-lm-eval", str(path), "--output-path", str(out)], out, "tokenizer", "export again")


def test_import_refuses_a_file_without_exported_tasks(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"results": {"hellaswag": {}}, "configs": {"hellaswag": {"metadata": {}}}}))
    assert_user_error(capsys, ["import-lm-eval", str(path), "--output-path", str(tmp_path / "out")], tmp_path / "out",
                      "export-lm-eval")


def test_export_refuses_tasks_lm_eval_cannot_express(quick_reference, tmp_path, capsys):
    out = tmp_path / "tasks"
    assert_user_error(capsys, ["export-lm-eval", str(out), "--model", str(quick_reference / "xsum-gpt2-e30"),
                               "--tasks", "weat"], out, "weat", "exportable: ")


def test_a_gguf_checkpoint_goes_through_lm_eval_and_back(tmp_path):
    """A `.gguf` file: the export names lm-eval's `gguf_file` (lm-eval's HF model reads GGUF through
    transformers, as membench does), lm-eval runs it, and the import gives the identity, format and
    quantization `membench evaluate` records, with the same LOSS scores."""
    import yaml

    from tests.helpers.tiny_gguf import save_tiny_gguf

    model = save_tiny_gguf(tmp_path / "model" / "tiny-llama.Q8_0.gguf", quantize=True)
    exported = tmp_path / "tasks"
    settings = ["--tasks", "mink_membership", "--limit", "12", "--lengths", "4"]  # within its 64-token context
    assert main(["export-lm-eval", str(exported), "--model", str(model), *settings]) == 0
    membench_meta = yaml.safe_load((exported / "membench_loss_membership.yaml").read_text(encoding="utf-8").replace(
        "!function", ""))["metadata"]["membench"]
    model_args = membench_meta["model"]["model_args"]
    assert model_args == f"pretrained={model.parent.resolve()},gguf_file={model.name}"
    lm_eval_results = run_lm_eval(tmp_path, model_args, exported, batch_size=4)
    imported = import_results(lm_eval_results, tmp_path / "imported")
    native = tmp_path / "native"
    assert main(["evaluate", "--model", str(model), *settings, "--dtype", "float32", "--no-cache",
                 "--output-path", str(native)]) == 0
    mine = native_results(native)
    assert imported.model.identity == mine.model.identity and imported.model.name == mine.model.name
    for key in ("format", "quantization", "weight_files"):
        assert imported.model.details[key] == mine.model.details[key]
    assert imported.model.details["quantization"] == "Q8_0"
    for elsewhere in (model, model.parent):  # --model: the file, or a folder holding lm-eval's gguf_file
        moved = import_results(lm_eval_results, tmp_path / f"imported-{elsewhere.name}", "--model", str(elsewhere))
        assert moved.model.identity == mine.model.identity
    ours = {(m.name, tuple(sorted(m.tags.items()))): m.value for m in mine.task("mink_membership").metrics}
    loss = imported.task("loss_membership").metrics
    assert loss and all(m.value == pytest.approx(ours[(m.name, tuple(sorted(m.tags.items())))], abs=1e-4)
                        for m in loss)


def test_export_takes_a_pickle_checkpoint_only_when_allowed(quick_reference, tmp_path, capsys):
    import shutil

    import torch
    from safetensors.torch import load_file

    source = quick_reference / "xsum-gpt2-e30"
    pickled = tmp_path / "pickled"
    shutil.copytree(source, pickled, ignore=shutil.ignore_patterns("*.safetensors"))
    torch.save(load_file(source / "model.safetensors"), pickled / "pytorch_model.bin")
    out = tmp_path / "tasks"
    flags = ["export-lm-eval", str(out), "--model", str(pickled), "--tasks", "mink_membership", "--limit", "4",
             "--lengths", LENGTHS]
    assert_user_error(capsys, flags, out, "pickle", "--allow-pickle")
    assert main([*flags, "--allow-pickle"]) == 0 and (out / "membench_loss_membership.yaml").is_file()
