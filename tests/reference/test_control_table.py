"""Reference results keyed by recipe, the reproduction table of `membench run`, and files left
alone when a re-run reproduces their numbers."""

from __future__ import annotations

import json

import pytest

from harness.app.registry import discover, select
from harness.core.board_keys import board_key
from harness.core.records import sidecar_name
from harness.core.results import load_results
from harness.model.loading import ModelSpec
from harness.reference.controls import EXPECTATIONS, TOLERANCES, Expectation, compare, headlines, readings, tags_of
from harness.run.runner import EvaluateOptions, evaluate
from leaderboard.collect import newest_entries, read_submissions
from tests.conftest import save_tiny_causal_lm

WEAT = {"tests": ["weat1"], "permutation_samples": "200"}


def test_every_task_and_expectation_is_declared_once():
    assert set(TOLERANCES) == set(discover())
    assert all(reason for _, reason in TOLERANCES.values())
    assert {e.task for e in EXPECTATIONS} <= set(TOLERANCES)


def test_expectations_compare_numbers_and_other_controls():
    values = {("mink_membership", "a-e15", None, ()): 0.95, ("mink_membership", "a-e01", None, ()): 0.6,
              ("mink_membership", "a-e00", None, ()): 0.58}
    assert Expectation("mink_membership", "a-e15", ">=", 0.9).holds(values) is True
    assert Expectation("mink_membership", "a-e15", ">", "a-e01").holds(values) is True
    assert Expectation("mink_membership", "a-e01", ">", "a-e15").holds(values) is False
    assert Expectation("mink_membership", "a-e00", "near", 0.5, 0.1).holds(values) is True
    assert Expectation("mink_membership", "a-e00", "near", 0.5, 0.05).holds(values) is False
    assert Expectation("mink_membership", "missing", ">=", 0.9).holds(values) is None
    # a margin above, a factor of, another checkpoint
    assert Expectation("mink_membership", "a-e15", ">=", "a-e01", margin=0.35).holds(values) is True
    assert Expectation("mink_membership", "a-e15", ">=", "a-e01", margin=0.36).holds(values) is False
    assert Expectation("mink_membership", "a-e15", ">=", "a-e01", factor=1.5).holds(values) is True
    assert Expectation("mink_membership", "a-e15", ">=", "a-e01", factor=1.6).holds(values) is False


def test_expectations_read_any_metric_and_compare_a_checkpoints_own_groups():
    members, others = tags_of(group="members", bin="all"), tags_of(group="non_members", bin="all")
    values = {("paywall_memorization", "m", "eidetic_mean", members): 3.0,
              ("paywall_memorization", "m", "eidetic_mean", others): 1.2,
              ("paywall_memorization", "b", "eidetic_mean", members): 1.6}
    own = Expectation("paywall_memorization", "m", ">=", "m", metric="eidetic_mean", tags=members,
                      other_tags=others, factor=2)
    assert own.holds(values) is True
    assert own.describe() == "eidetic_mean{bin=all, group=members} of m >= 2 × its group=non_members"
    assert Expectation("paywall_memorization", "m", ">=", "b", metric="eidetic_mean", tags=members,
                       factor=2).holds(values) is False  # 3.0 < 2 x 1.6
    assert Expectation("paywall_memorization", "m", ">=", "b", metric="eidetic_mean",
                       tags=tags_of(group="all")).holds(values) is None
    assert Expectation("paywall_memorization", "m", ">=", "b", margin=0.1).describe() == "m >= b + 0.1"


def test_compare_flags_moves_beyond_tolerance_and_failed_directions():
    before = {("mink_membership", "xsum-gpt2-e30"): 0.99, ("paywall_memorization", "xsum-gpt2-e30"): 0.30}
    after = {("mink_membership", "xsum-gpt2-e30"): 0.85,  # moved 0.14 > 0.03, and below 0.9
             ("paywall_memorization", "xsum-gpt2-e30"): 0.31,  # within 0.02
             ("paywall_memorization", "xsum-gpt2-nonmembers-e30"): 0.20}  # new
    report = compare(before, after)
    assert report.outside_tolerance == [("mink_membership", "xsum-gpt2-e30")]
    assert [e.describe() for e in report.failed] == ["xsum-gpt2-e30 >= 0.9"]
    lines = {line.split()[0] + " " + line.split()[1]: line for line in report.table.splitlines()[2:]}
    assert "-0.1400" in lines["xsum-gpt2-e30 mink_membership"] and " NO " in lines["xsum-gpt2-e30 mink_membership"]
    assert "+0.0100" in lines["xsum-gpt2-e30 paywall_memorization"]
    assert "xsum-gpt2-e30 >= xsum-gpt2-nonmembers-e30 + 0.1: ok" in lines["xsum-gpt2-e30 paywall_memorization"]
    assert "eidetic_mean{bin=all, group=members} of xsum-gpt2-e30 >= 2 × eidetic_mean{bin=all, group=members} of " \
           "xsum-gpt2-nonmembers-e30: not measured" in lines["xsum-gpt2-e30 paywall_memorization"]
    assert lines["xsum-gpt2-nonmembers-e30 paywall_memorization"].rstrip().endswith(" new")


def test_headlines_of_another_task_version_are_not_compared(tiny_lm, tmp_path):
    """A committed number of an older task version is not a 'before' for the current version."""
    results = load_results(evaluate(ModelSpec(str(tiny_lm), name="membench-ref/tiny-e00"), select("weat"), WEAT,
                                    EvaluateOptions(output_path=tmp_path)))
    entry = results.task("weat")
    value = entry.headline_metric().value
    assert entry.headline.metric == "mean_abs_d" and value > 0
    assert headlines([results]) == {("weat", "tiny-e00"): value}
    assert headlines([results], {"weat": entry.version}) == {("weat", "tiny-e00"): value}
    assert headlines([results], {"weat": entry.version + 1}) == {}
    read = readings([results])
    assert read[("weat", "tiny-e00", None, ())] == value
    assert read[("weat", "tiny-e00", "mean_abs_d", tags_of(**entry.headline.tags))] == value
    assert readings([results], {"weat": entry.version + 1}) == {}


def test_a_reference_checkpoint_is_filed_under_its_recipe(tmp_path):
    """Two builds of one recipe with other weights (another machine): one file, one board row."""
    out = tmp_path / "submissions"
    paths = []
    for seed in (0, 1):
        folder = save_tiny_causal_lm(tmp_path / f"seed{seed}" / "tiny-e00", seed=seed)
        spec = ModelSpec(str(folder), name="membench-ref/tiny-e00", reference_recipe=("tiny", "0123456789"))
        paths.append(evaluate(spec, select("weat"), WEAT, EvaluateOptions(output_path=out, limit=4)))
    assert paths[0] == paths[1] and "__0123456789__" in paths[0].name
    assert [p.name for p in out.glob("*.json")] == [paths[0].name]
    results = load_results(paths[0])
    assert board_key(results.model) == "0123456789"
    assert results.model.details["reference_recipe"] == {"build": "tiny", "digest": "0123456789"}
    assert len(newest_entries(read_submissions(out))) == 1


def test_every_checkpoint_of_a_recipe_is_compared_with_its_own_committed_file(tmp_path):
    """The checkpoints of one build share its recipe digest; each keeps its own 'before'."""
    from harness.app.job import newest_by_key

    out = tmp_path / "submissions"
    for epoch in ("e00", "e01"):
        folder = save_tiny_causal_lm(tmp_path / epoch / f"tiny-{epoch}", seed=int(epoch[1:]))
        spec = ModelSpec(str(folder), name=f"membench-ref/tiny-{epoch}", reference_recipe=("tiny", "0123456789"))
        evaluate(spec, select("weat"), WEAT, EvaluateOptions(output_path=out, limit=4))
    before = newest_by_key(out)
    assert sorted(before) == [("0123456789", "membench-ref/tiny-e00"), ("0123456789", "membench-ref/tiny-e01")]
    values = headlines([results for _, results in before.values()])
    assert sorted(values) == [("weat", "tiny-e00"), ("weat", "tiny-e01")]
    assert values[("weat", "tiny-e00")] != values[("weat", "tiny-e01")]


def test_an_unsafe_recipe_digest_is_not_a_key(tiny_lm, tmp_path):
    path = evaluate(ModelSpec(str(tiny_lm)), select("weat"), WEAT, EvaluateOptions(output_path=tmp_path, limit=4))
    model = load_results(path).model
    forged = model.model_copy(update={"details": {**model.details, "reference_recipe": {"digest": "../../x"}}})
    assert board_key(forged) == model.identity


@pytest.mark.parametrize("tamper", [None, "within", "beyond", "summary", "version", "report version",
                                    "no records"])
def test_a_rerun_that_reproduces_the_committed_file_leaves_it_alone(tiny_lm, tmp_path, tamper):
    """`membench run` keeps a committed results file its run reproduced: the same tasks and
    settings, each headline within its task's tolerance, and its records; otherwise it puts the new
    file there, with its records."""
    from harness.app.job import newest_by_key, place_results

    committed, scratch = tmp_path / "submissions", tmp_path / "scratch"
    spec = ModelSpec(str(tiny_lm), name="membench-ref/tiny-e00", reference_recipe=("tiny", "0123456789"))
    path = evaluate(spec, select("weat"), WEAT, EvaluateOptions(output_path=committed, limit=4))
    data = json.loads(path.read_text())
    data["created_at"] = "2020-01-01T00:00:00Z"
    data["model"]["source"] = "/another/machine/tiny-gpt2"  # where it was loaded from: not a number
    entry = data["tasks"][0]
    headline = next(m for m in entry["metrics"] if m["name"] == entry["headline"]["metric"]
                    and m["tags"] == entry["headline"]["tags"])
    tolerance = TOLERANCES["weat"][0]
    if tamper in ("within", "beyond"):  # another machine's number, within or beyond the tolerance
        headline["value"] += tolerance * (0.5 if tamper == "within" else 1.5)
    if tamper == "summary":  # a file from before the task named its key metrics: the board would miss them
        entry["summary"] = []
    if tamper == "version":
        entry["version"] -= 1
    if tamper == "report version":  # reported by other reporting code: `membench verify` would refuse it
        entry["report_version"] += 1
    if tamper == "no records":  # a file made before records: the same numbers, which the run now gives evidence for
        del data["records_file"], entry["records_sha256"], entry["report_version"]
        (committed / sidecar_name(path.name)).unlink()
    path.write_text(json.dumps(data))
    new = evaluate(spec, select("weat"), WEAT, EvaluateOptions(output_path=scratch, limit=4))
    assert new.name == path.name
    written, kept = place_results(committed, [(new, load_results(new))], newest_by_key(committed))
    now = json.loads(path.read_text())
    if tamper in (None, "within"):
        assert (written, kept) == ([], [path]) and now == data
    else:
        assert (written, kept) == ([path], []) and now == json.loads(new.read_text())
        assert (committed / now["records_file"]).read_bytes() == (scratch / now["records_file"]).read_bytes()


def test_a_run_deletes_the_earlier_file_of_the_same_reference_checkpoint(tmp_path):
    """After a task version changes, the new file has another name; `membench run` deletes the old one, and
    after new weights are shipped for a recipe, every file of its older recipe."""
    import shutil

    from harness.app.job import remove_superseded

    out = tmp_path / "submissions"
    folder = save_tiny_causal_lm(tmp_path / "tiny-e00")
    spec = ModelSpec(str(folder), name="membench-ref/tiny-e00", reference_recipe=("tiny", "0123456789"))
    new = evaluate(spec, select("weat"), WEAT, EvaluateOptions(output_path=out, limit=4))
    old = new.with_name(new.name.replace(new.stem.rsplit("__", 1)[1], "0ld0ld00"))
    shutil.copy(new, old)
    (out / f"{old.stem}.weat.samples.jsonl").write_text("{}\n")
    other = evaluate(ModelSpec(str(folder), name="someone-else"), select("weat"), WEAT,
                     EvaluateOptions(output_path=out, limit=4))
    shutil.copy(out / sidecar_name(new.name), out / sidecar_name(old.name))
    assert remove_superseded(out, [new]) == [old]
    with_records = [name for path in (new, other) for name in (path.name, sidecar_name(path.name))]
    assert sorted(p.name for p in out.iterdir()) == sorted(with_records)
    # new weights shipped for the recipe: the files of the older recipe's checkpoints go, others' stay
    assert remove_superseded(out, [other], {("tiny", "fedcba9876")}) == [new]
    assert sorted(p.name for p in out.iterdir()) == sorted([other.name, sidecar_name(other.name)])


def test_real_model_controls_read_their_submissions_and_fail_only_on_a_reading():
    """`membench run` checks the real models' controls on their committed files (it does not score
    them): SmolLM2's LMS at least 80, its untrained twin's near 50; a missing file is not measured,
    a reading on the wrong side fails the job."""
    from harness.core.results import Metric
    from harness.reference.controls import REAL_MODEL_EXPECTATIONS, SMOLLM2, committed_report
    from tests.helpers.board_files import make_results

    def stereoset(name: str, lms: float):
        results = make_results(name=name, task="stereoset")
        entry = results.tasks[0].model_copy(update={"metrics": [Metric(name="lms", value=lms, tags={"domain": "all"})]})
        return results.model_copy(update={"tasks": [entry]})

    table, failed = committed_report([])
    assert failed == [] and table.count("not measured") == len(REAL_MODEL_EXPECTATIONS)
    table, failed = committed_report([stereoset(SMOLLM2, 91.3), stereoset(f"{SMOLLM2}-untrained-seed0", 51.0)])
    assert failed == [] and "91.3000" in table and table.count(" ok") == 2
    _, failed = committed_report([stereoset(SMOLLM2, 79.0), stereoset(f"{SMOLLM2}-untrained-seed0", 56.0)])
    assert [e.model for e in failed] == [SMOLLM2, f"{SMOLLM2}-untrained-seed0"]
    # the submissions keep older versions: with today's versions an older file read after today's stands for nothing
    older = stereoset(SMOLLM2, 79.0)
    older = older.model_copy(update={"tasks": [older.tasks[0].model_copy(update={"version": 0})]})
    today = {"stereoset": stereoset(SMOLLM2, 91.3).tasks[0].version}
    _, failed = committed_report([stereoset(SMOLLM2, 91.3), older], versions=today)
    assert failed == [] and committed_report([stereoset(SMOLLM2, 91.3), older])[1] != []


def test_the_dp_controls_compare_a_run_s_audit_with_its_own_claim_and_with_the_run_without_dp():
    """The DP pair's expectations (issue 76), read as the job reads them from committed files: the DP run's
    audited ε at most its claimed ε (another metric of the same run: `Expectation.other_metric`), the run without
    DP above the DP run; either on the wrong side fails, a missing file is not measured."""
    from harness.core.results import Metric
    from harness.reference.controls import (
        DP_CONTROL_DP,
        DP_CONTROL_EXPECTATIONS,
        DP_CONTROL_NONE,
        REFERENCE_PREFIX,
        committed_report,
    )
    from tests.helpers.board_files import make_results

    def audited(name: str, value: float, claimed: float | None = None):
        results = make_results(name=f"{REFERENCE_PREFIX}{name}", task="privacy_extraction")
        metrics = [Metric(name="audited_epsilon", value=value, n=1000,
                          tags={"epoch": "8", "group": "canary", "bound": "steinke", "confidence": "0.95"})]
        if claimed is not None:
            metrics.append(Metric(name="claimed_epsilon", value=claimed, tags={"epoch": "8", "delta": "1e-05"}))
        return results.model_copy(update={"tasks": [results.tasks[0].model_copy(update={"metrics": metrics})]})

    table, failed = committed_report([], DP_CONTROL_EXPECTATIONS)
    assert failed == [] and table.count("not measured") == 2
    table, failed = committed_report([audited(DP_CONTROL_NONE, 3.0), audited(DP_CONTROL_DP, 0.0, 8.0)],
                                     DP_CONTROL_EXPECTATIONS)
    assert failed == [] and table.count(" ok") == 2 and "<= its claimed_epsilon{delta=1e-05, epoch=8}" in table
    _, failed = committed_report([audited(DP_CONTROL_NONE, 3.0), audited(DP_CONTROL_DP, 8.5, 8.0)],
                                 DP_CONTROL_EXPECTATIONS)
    assert [e.op for e in failed] == ["<=", ">"]  # above its claim, and no longer below the run without DP
    _, failed = committed_report([audited(DP_CONTROL_NONE, 0.0), audited(DP_CONTROL_DP, 0.0, 8.0)],
                                 DP_CONTROL_EXPECTATIONS)
    assert [e.model for e in failed] == [DP_CONTROL_NONE]


def test_the_committed_real_models_pass_their_controls_and_strict_validation(capsys):
    """The real rows in submissions/ (SmolLM2-135M-Instruct, its untrained twin and gemma-3-270m, by
    `membench evaluate`) pass `membench validate --strict`, and the controls only they give hold on
    them: LMS 89.3 and 90.3 against the twin's 49.2, finetune_memorization's known truth."""
    from pathlib import Path

    from harness.app.cli import main
    from harness.reference.controls import GEMMA, REAL_MODEL_EXPECTATIONS, SMOLLM2, committed_report

    folder = Path(__file__).resolve().parents[2] / "submissions"
    files = read_submissions(folder)
    real = [path for path, results in files if results.model.name.startswith((SMOLLM2, GEMMA))]
    # each model's runs may span several files (a task run on its own, a task's newer version)
    assert {results.model.name for _, results in files if results.model.name.startswith((SMOLLM2, GEMMA))} == {
        SMOLLM2, f"{SMOLLM2}-untrained-seed0", GEMMA}
    assert main(["validate", "--strict", *map(str, real)]) == 0
    versions = {name: task.VERSION for name, task in discover().items()}  # today's, as `membench run` reads them
    table, failed = committed_report([results for _, results in files], versions=versions)
    outcomes = [line.split()[-1] for line in table.splitlines()[2:]]
    assert failed == [] and outcomes == ["ok"] * len(REAL_MODEL_EXPECTATIONS), table


def test_the_reference_checkpoint_of_finetune_memorization_is_also_run_with_lora(monkeypatch, tmp_path):
    """`membench run` evaluates the outside build twice: at the defaults and with LoRA's default recipe,
    a run of its own name (`-lora`) whose controls are the LoRA recipe's (`lora_expectations`)."""
    from harness.app import job
    from harness.reference.build import LORA_SUFFIX, reference_builds
    from harness.reference.controls import LORA_GAIN_MARGIN

    [outside] = [config for config in reference_builds() if config.train_on == "outside"]
    assert [suffix for suffix, _ in outside.variants()] == ["", LORA_SUFFIX]
    assert all(config.variants() == (("", {}),) for config in reference_builds() if config.train_on != "outside")
    runs = []
    monkeypatch.setattr(job, "checkpoint_task_settings", lambda config, checkpoint: config.task_settings(5))
    monkeypatch.setattr(job, "evaluate_reported", lambda spec, tasks, settings, options: runs.append((spec, settings)))
    job.evaluate_controls([(outside, [tmp_path / "xsum-gpt2-outside-e05"])], discover(), EvaluateOptions(), "cpu")
    assert [spec.name for spec, _ in runs] == ["membench-ref/xsum-gpt2-outside-e05",
                                               "membench-ref/xsum-gpt2-outside-e05-lora"]
    assert "finetune_method" not in runs[0][1] and runs[1][1]["finetune_method"] == "lora"
    assert runs[0][0].reference_recipe == runs[1][0].reference_recipe
    lora = [e for e in EXPECTATIONS if e.model == f"xsum-gpt2-outside-e05{LORA_SUFFIX}"]
    assert [e.describe() for e in lora] == [
        f"auc{{epoch=4, score=min_k_20, trained_on=members}} of xsum-gpt2-outside-e05-lora >= its epoch=0 + "
        f"{LORA_GAIN_MARGIN:g}",
        "auc{epoch=1, score=min_k_20, trained_on=non_members} of xsum-gpt2-outside-e05-lora < 0.5"]


def test_the_committed_reference_files_pass_every_expected_direction():
    """The expectations of `membench run` hold on the committed files (the reference checkpoints', the
    LoRA recipe's among them, and all-MiniLM-L6-v2's): a failing committed control fails here, not
    only in the 15-minute job."""
    from pathlib import Path

    folder = Path(__file__).resolve().parents[2] / "submissions"
    values = readings([results for _, results in read_submissions(folder)])
    outcomes = {e.describe(): e.holds(values) for e in EXPECTATIONS}
    assert all(outcomes.values()), [name for name, ok in outcomes.items() if not ok]


def test_the_committed_lora_control_ran_today_s_default_recipe():
    """The committed LoRA control is a run of the default recipe (`LORA_RECIPE`): a changed recipe fails
    here until `membench run` has run it, and that run fails its controls (and the test above) if the
    recipe no longer learns."""
    from pathlib import Path

    from harness.reference.build import LORA_SUFFIX
    from harness.training.method import LORA_RECIPE

    folder = Path(__file__).resolve().parents[2] / "submissions"
    [entry] = [results.task("finetune_memorization") for _, results in read_submissions(folder)
               if results.model.name == f"membench-ref/xsum-gpt2-outside-e05{LORA_SUFFIX}"]
    recipe = {key: entry.config[key] for key in
              ("learning_rate", "lora_rank", "lora_alpha", "lora_target_modules", "lora_dropout")}
    assert recipe == {"learning_rate": LORA_RECIPE.learning_rate, "lora_rank": LORA_RECIPE.rank,
                      "lora_alpha": LORA_RECIPE.alpha, "lora_target_modules": list(LORA_RECIPE.target_modules),
                      "lora_dropout": LORA_RECIPE.dropout}
