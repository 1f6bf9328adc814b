"""privacy_extraction's DP control pair (issue 76): the committed results files of `membench reference dp-control`
(the reference GPT-2 with 1,000 canaries, with DP at epsilon 8 and without) hold the expectations `membench run`
checks on them, every audit they report follows from the canary scores and inclusion bits they store, and
jax_privacy's own code gives the same bounds from the same guesses."""

from __future__ import annotations

import pytest

from harness.metrics.privacy_audit import epsilon_ceiling
from harness.reference.controls import DP_CONTROL_DP, DP_CONTROL_EXPECTATIONS, DP_CONTROL_NONE, committed_report
from tasks.privacy_extraction.audit import AUDIT_BOUNDS, recompute_audit
from tasks.privacy_extraction.task import PrivacyExtraction
from tests.helpers.committed import committed_files
from tests.helpers.jax_privacy import auditing

JAX_PRIVACY_TOL = 2e-6  # jax_privacy stops its root search at 1e-6 in epsilon (membench at 1e-10)


def dp_control_entries() -> dict:
    """Control name -> its privacy_extraction entry, from the committed files."""
    found = {results.model.name.removeprefix("membench-ref/"): results.task("privacy_extraction")
             for results in committed_files() if results.model.name.endswith((DP_CONTROL_NONE, DP_CONTROL_DP))}
    assert set(found) == {DP_CONTROL_NONE, DP_CONTROL_DP}, sorted(found)
    return found


def test_the_committed_dp_controls_hold_what_membench_run_checks_on_them():
    entries = dp_control_entries()
    assert all(e.version == PrivacyExtraction.VERSION and e.status == "ok" for e in entries.values())
    files = [r for r in committed_files() if r.model.name.endswith((DP_CONTROL_NONE, DP_CONTROL_DP))]
    assert all("reference_recipe" in r.model.details and r.run.limit is None for r in files)  # controls, full runs
    table, failed = committed_report(files, DP_CONTROL_EXPECTATIONS)
    assert failed == [] and [line.split()[-1] for line in table.splitlines()[2:]] == ["ok"] * 2, table
    assert entries[DP_CONTROL_DP].config["dp_epsilon"] == 8.0 and "dp_epsilon" not in entries[DP_CONTROL_NONE].config


def test_every_committed_audit_is_recomputed_from_its_scores_and_agrees_with_jax_privacy():
    """For each audit (epoch, fine-tuning seed) of both files: the bounds from the stored scores and inclusion
    bits are the reported ones, bit for bit; jax_privacy 2.0.0's `_epsilon_one_run` (Steinke et al.) and
    `_epsilon_one_run_fdp` (Mahloujifar et al.) at the audit's guesses (r, v) and its significance per cell
    after the correction give them within its root finder's tolerance; the recorded ceiling is the rule's."""
    jax_privacy = auditing()
    peers = dict(zip(AUDIT_BOUNDS, (jax_privacy._epsilon_one_run, jax_privacy._epsilon_one_run_fdp)))
    checked = 0
    for entry in dp_control_entries().values():
        audit = entry.info["audit"]
        seeds = entry.info["finetuning"]["seeds"]
        assert len(audit["inclusion"]) == audit["canaries"] == 1000 and audit["inclusion"].count("1") == audit[
            "included"]
        for run in audit["runs"]:
            reported = {m.tags["bound"]: m.per_seed[seeds.index(run["finetune_seed"])] for m in entry.metrics
                        if m.name == "audited_epsilon" and m.tags["epoch"] == str(run["epoch"])}
            assert recompute_audit(audit, run) == reported
            significance = 1 - run["confidence_per_cell"]
            assert significance == pytest.approx(0.05 / (8 * len(seeds)))
            for bound, peer in peers.items():
                guesses = run["guesses"][bound]
                assert peer(0, 1000, guesses["r"], guesses["v"], significance, audit["delta"]) == pytest.approx(
                    reported[bound], abs=JAX_PRIVACY_TOL)
            ceiling = epsilon_ceiling(1000, audit["delta"], audit["confidence"], family=run["family"])
            assert run["ceiling"] == {AUDIT_BOUNDS[0]: ceiling.epsilon_steinke, AUDIT_BOUNDS[1]: ceiling.epsilon_fdp}
            checked += 1
    assert checked == 4  # 2 files x epochs 4 and 8 x 1 seed


def test_the_committed_pair_holds_the_bench_record_s_audits():
    """The pair was first a bench record (bench_dp_audit--job-control, 2026-12-02); `membench reference dp-control`
    made the committed files on another day, pinned: every audited epsilon after 4 and 8 epochs is the record's, to
    1e-12 (one differs in its last bit)."""
    import json

    from tests.helpers.committed import ROOT

    record = json.loads((ROOT / "bench" / "results" / "bench_dp_audit--job-control.json").read_text())["report"]["runs"]
    entries = dp_control_entries()
    for name, label in ((DP_CONTROL_NONE, "gpt2-full-none"), (DP_CONTROL_DP, "gpt2-full-dp8")):
        for epoch, found in record[label]["epochs"].items():
            reported = {m.tags["bound"].removesuffix("-conditional"): m.per_seed for m in entries[name].metrics
                        if m.name == "audited_epsilon" and m.tags["epoch"] == epoch}
            assert reported == {bound: pytest.approx(found[f"audited_{bound}"], abs=1e-12)
                                for bound in ("steinke", "gaussian-fdp")}


def test_membench_reference_dp_control_makes_the_committed_files_settings():
    """The command's checkpoint is the committed files' (the shipped `xsum-gpt2-e30`, the same recipe digest) and
    its two runs' settings are the committed configs: running it again makes these files' runs."""
    from harness.app.dp_control import RUNS, SETTINGS, dp_control_checkpoint
    from harness.core.task import parse_settings
    from harness.run.runner import build_config

    checkpoint, (build, digest) = dp_control_checkpoint()
    assert checkpoint.name == "xsum-gpt2-e30" and build == "xsum-gpt2"
    entries = dp_control_entries()
    files = {r.model.name.removeprefix("membench-ref/"): r for r in committed_files()
             if r.model.name.endswith((DP_CONTROL_NONE, DP_CONTROL_DP))}
    for name, extra in RUNS:
        assert files[name].model.details["reference_recipe"] == {"build": build, "digest": digest}
        config = build_config(PrivacyExtraction, parse_settings([PrivacyExtraction], SETTINGS | extra))
        assert config.model_dump(mode="json") == entries[name].config
