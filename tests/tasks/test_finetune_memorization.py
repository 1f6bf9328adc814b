"""finetune_memorization: known members trained into a copy, measured epoch by epoch."""

from __future__ import annotations

import copy
import json

import pytest

from harness.app.cli import main
from harness.app.verify import verify_file
from harness.core.errors import UserError
from harness.core.records import normalise
from harness.core.results import Metric
from harness.core.task import RunContext
from tasks.finetune_memorization.data import load_known_data
from tasks.finetune_memorization.report import epochs_to_threshold, exact_memorization, report
from tasks.finetune_memorization.task import FinetuneMemorizationConfig
from tests.conftest import assert_user_error
from tests.helpers.records import copy_with_records, sidecar_payload

SMALL = ["--members", "12", "--words", "40", "--prompt-words", "20", "--bootstrap-resamples", "50",
         "--k-percents", "20"]


def evaluate(model, out, *flags: str, tasks: str = "finetune_memorization") -> dict:
    code = main(["evaluate", "--model", str(model), "--tasks", tasks, "--output-path", str(out), "--log-samples",
                 "--batch-size", "8", *flags])
    assert code == 0
    [path] = out.glob("*.json")
    return json.loads(path.read_text())


def metric(entry: dict, name: str, **tags: str) -> float | None:
    [found] = [x for x in entry["metrics"] if x["name"] == name and x["tags"] == tags]
    return found["value"]


def test_known_data_cuts_texts_keeps_both_classes_and_splits_prompts():
    data = load_known_data("reference", 0, 5, 40, 20, "en", None)
    assert [t.label for t in data.texts].count(1) == 5 and [t.label for t in data.texts].count(0) == 5
    for t in data.texts:
        assert len(t.text.split()) == 40 and len(t.prompt.split()) == 20
        assert t.prompt + t.continuation == t.text and t.reference == t.continuation.strip()
    limited = load_known_data("reference", 0, 5, 40, 20, "en", 3)
    assert [t.label for t in limited.texts].count(1) == 2 and [t.label for t in limited.texts].count(0) == 1
    assert limited.texts == [t for t in data.texts if t in limited.texts]  # a cut, never other texts


def test_bad_data_is_one_line_and_exit_2(tmp_path, tiny_lm, capsys):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"text": "a b c d e f", "label": 1}) + "\n" + json.dumps({"text": "x"}) + "\n")
    out = tmp_path / "out"
    base = ["evaluate", "--model", str(tiny_lm), "--tasks", "finetune_memorization", "--output-path", str(out)]
    assert_user_error(capsys, [*base, "--data", str(rows)], out, "rows.jsonl:2: needs a string 'text' and a 'label'")
    assert_user_error(capsys, [*base, "--words", "20", "--prompt-words", "20"], out,
                      "--prompt-words 20 must be below --words 20")
    assert_user_error(capsys, [*base, "--data", str(tmp_path / "missing.jsonl")], out, "no such file")


def test_exact_memorization_pools_tokens_per_group_and_gives_the_gap():
    facts = {0: {"tokens": 4, "argmax_hits": 3}, 1: {"tokens": 6, "argmax_hits": 1}, 2: {"tokens": 5, "argmax_hits": 1}}
    found = {x.tags["group"]: x.value for x in exact_memorization([1, 1, 0], facts, {"epoch": "1"})}
    assert found == pytest.approx({"members": 4 / 10, "non_members": 1 / 5, "gap": 4 / 10 - 1 / 5})


def test_epochs_to_threshold_is_the_first_measured_epoch_reaching_it():
    def auc(epoch: int, value: float, trained_on: str = "members") -> Metric:
        return Metric(name="auc", value=value, n=10, tags={"score": "min_k_20", "epoch": str(epoch),
                                                            "trained_on": trained_on})

    metrics = [auc(0, 0.5), auc(1, 0.8), auc(2, 0.95), auc(4, 0.99), auc(1, 0.99, "non_members")]
    assert epochs_to_threshold(metrics, [1, 2, 4], 0.9) == 2
    assert epochs_to_threshold(metrics, [1, 2, 4], 0.995) is None
    assert epochs_to_threshold(metrics, [1, 2, 4], 0.5) == 0


def test_defaults_are_the_recorded_recipe():
    config = FinetuneMemorizationConfig()
    assert (config.members, config.words, config.epochs, config.learning_rate, config.finetune_method) == \
        (64, 96, (1, 2, 4), 1e-4, "full")
    assert "gradnorm" not in config.attacks


@pytest.mark.slow
def test_training_on_members_is_detected_and_on_non_members_reversed(tmp_path, quick_outside):
    """On the quick reference model of the same source (it never saw the split): epoch 0 near chance, the
    members detected after training at a high learning rate, and the copy trained on the non-members
    reverses the AUC; the epoch-0 per-text scores are mink_membership's on the same texts."""
    results = evaluate(quick_outside, tmp_path / "run", *SMALL, "--epochs", "1,3", "--learning-rate", "3e-3",
                       "--extraction-top-k", "none")  # at top-k 40 no 20-word continuation of this model is drawable
    [entry] = results["tasks"]
    assert entry["status"] == "ok"
    at = {epoch: metric(entry, "auc", score="min_k_20", epoch=str(epoch), trained_on="members") for epoch in (0, 1, 3)}
    reversed_auc = metric(entry, "auc", score="min_k_20", epoch="1", trained_on="non_members")
    assert abs(at[0] - 0.5) <= 0.25
    assert at[3] >= at[1] >= 0.8 and reversed_auc <= 0.3
    gap = metric(entry, "exact_memorization", group="gap", epoch="3", trained_on="members")
    assert gap > metric(entry, "exact_memorization", group="gap", epoch="0", trained_on="members")
    assert metric(entry, "approximate_mean", group="members", epoch="3", trained_on="members") > \
        metric(entry, "approximate_mean", group="non_members", epoch="3", trained_on="members")
    assert metric(entry, "epochs_to_auc", score="min_k_20", threshold="0.9") in (1, 3)
    # extraction: the members' continuations grow likelier to be drawn with training, the non-members' stay
    # near the checkpoint's; the copy trained on the non-members reverses the gap
    pz = {(group, epoch): metric(entry, "log10_pz_median", group=group, epoch=str(epoch), trained_on="members")
          for group in ("members", "non_members") for epoch in (0, 1, 3)}
    assert pz["members", 3] > pz["members", 1] > pz["members", 0]
    assert abs(pz["non_members", 3] - pz["non_members", 0]) < pz["members", 3] - pz["members", 0]
    assert metric(entry, "pz_mean_gap", group="gap", epoch="3", trained_on="members") > 0
    assert metric(entry, "log10_pz_median_gap", group="gap", epoch="1", trained_on="non_members") < 0
    assert entry["info"]["extraction"]["scheme"]["top_k"] is None
    # dataset inference: no evidence at epoch 0, members found after training (12 texts a side), no guard alarm
    p = {epoch: metric(entry, "di_p_value", epoch=str(epoch), trained_on="members") for epoch in (0, 1, 3)}
    assert p[3] <= p[1] < 0.05 < p[0]  # both may sit at the smallest p-value, 1 / (99 + 1)
    found = entry["info"]["dataset_inference"]["members@3"]
    assert found["null_sds"] > entry["info"]["dataset_inference"]["members@1"]["null_sds"] > 2
    # every text counted: used on a side, or dropped (the ReCaLL shot, texts whose prefix + text overran the context)
    assert found["n_suspect"] + found["n_validation"] + found["dropped_rows"] == 24
    assert "dc_pdd" not in found["features"] and "min_k_20" in found["features"]
    assert metric(entry, "di_guard_p_value") > 0.05 and not entry.get("warnings")
    assert entry["info"]["training"]["members"]["steps"] == 3 * 2  # 12 members, batch 8, 3 epochs
    assert entry["info"]["training"]["non_members"]["steps"] == 2
    # the same texts through mink_membership: the same per-text scores at epoch 0 (one code path)
    data = load_known_data("reference", 0, 12, 40, 20, "en", None)
    rows = tmp_path / "texts.jsonl"
    rows.write_text("".join(json.dumps({"text": t.text, "label": t.label}) + "\n" for t in data.texts))
    mink = evaluate(quick_outside, tmp_path / "mink", "--data", str(rows), "--lengths", "40", "--k-percents", "20",
                    "--attacks", "loss,zlib,min_k,min_k_pp,recall,dc_pdd", "--bootstrap-resamples", "50",
                    "--blind-baselines", "bag_of_words", "--di-permutations", "99", "--di-stop-early", "false",
                    tasks="mink_membership")
    mine = [json.loads(line) for line in (tmp_path / "run" / entry["samples_file"]).read_text().splitlines()]
    theirs = [json.loads(line) for line in
              (tmp_path / "mink" / mink["tasks"][0]["samples_file"]).read_text().splitlines()]
    at_zero = [s["scores"] for s in mine if s["epoch"] == 0]
    assert len(at_zero) == len(theirs) == 24
    for ours, other in zip(at_zero, theirs):
        shared = {k: v for k, v in other["scores"].items() if not k.startswith("blind")}
        assert ours == shared
    # the blind baseline agrees with mink_membership's (same texts, folds and seed)
    assert metric(entry, "auc", score="blind_bow") == pytest.approx(
        metric(mink["tasks"][0], "auc", score="blind_bow", length="40"))
    # and so does dataset inference at epoch 0 (same scores, features, seed and settings: finetune_memorization's)
    assert metric(mink["tasks"][0], "di_p_value", length="40") == p[0]
    # the numbers follow from the records in the sidecar (`membench verify`), and an edited record shows
    [path] = (tmp_path / "run").glob("*.json")
    assert results["records_file"] and (path.parent / results["records_file"]).is_file() and entry["records_sha256"]
    verify_file(path)
    payload = sidecar_payload(path)
    records = payload["tasks"]["finetune_memorization"]["records"]
    edited = copy.deepcopy(payload)
    member = next(t["id"] for t in records["texts"] if t["label"] == 1)
    reading = next(r for r in edited["tasks"]["finetune_memorization"]["records"]["readings"]
                   if r["id"] == f"members@1/{member}")
    reading["argmax_hits"] = 0 if reading["argmax_hits"] else reading["tokens"]
    with pytest.raises(UserError, match=r"exact_memorization\{epoch=1,group=members,trained_on=members\}.*do not "
                                        "follow from its records"):
        verify_file(copy_with_records(path, edited, tmp_path / "edited"))
    # records the scoring stage cannot have made fail with one line naming the record
    config = FinetuneMemorizationConfig.model_validate(entry["config"])
    first = f"members@0/{records['texts'][0]['id']}"

    def at(r: dict, key: str) -> dict:
        return next(x for x in r["readings"] if x["id"] == key)

    for edit, needle in [
        (lambda r: r["texts"].append(r["texts"][0]), f"text {records['texts'][0]['id']!r} appears twice in texts"),
        (lambda r: r["texts"][0].__setitem__("label", 2), r"has label 2, not 1 \(member\) or 0"),
        (lambda r: at(r, first).__setitem__("argmax_hits", at(r, first)["tokens"] + 1),
         rf"reading '{first}' argmax_hits .* out of its range"),
        (lambda r: at(r, first).__setitem__("log_pz", 0.5), rf"reading '{first}' log_pz .* out of its range"),
        (lambda r: at(r, first).pop("generation"), rf"reading '{first}' needs its generation"),
        (lambda r: at(r, first)["scores"].__setitem__("min_k_30", -1.0), "a score 'min_k_30' the config's attacks"),
        (lambda r: r["readings"].remove(at(r, first)), "checkpoint 'members@0' has no reading of text"),
        (lambda r: r["texts"][1]["blind"].__setitem__("blind_bow", 1.5), r"blind_bow is 1.5, out of its range"),
        (lambda r: r["facts"].pop("training"), "facts lack training"),
    ]:
        bad = copy.deepcopy(records)
        edit(bad)
        with pytest.raises(UserError, match=needle):
            report(normalise(bad), config, 0)


def test_lora_trains_an_adapter_and_leaves_the_loaded_model_alone(tiny_lm):
    import torch

    from harness.model.loading import ModelSpec, load
    from tasks.finetune_memorization.task import FinetuneMemorization

    lm = load(ModelSpec(str(tiny_lm)))
    before = {name: p.detach().clone() for name, p in lm.model.named_parameters()}
    task = FinetuneMemorization()
    config = FinetuneMemorizationConfig(members=4, words=16, prompt_words=8, epochs=(1,), control_epochs=1,
                                        finetune_method="lora", lora_rank=4, learning_rate=1e-2,
                                        bootstrap_resamples=10, k_percents=(20,))
    context = RunContext(batch_size=4, progress=False)
    result = task.run(lm, task.load_data(config, context), config, context)
    training = result.info["training"]
    # rank 4 on the tiny GPT-2's c_attn (32 -> 96), attn.c_proj (32 -> 32), c_fc (32 -> 128), mlp.c_proj (128 -> 32)
    adapter = 4 * (32 + 96) + 4 * (32 + 32) + 4 * (32 + 128) + 4 * (128 + 32)
    assert training["members"]["trainable_parameters"] == training["non_members"]["trainable_parameters"] == adapter
    after = dict(lm.model.named_parameters())
    assert after.keys() == before.keys() and all(torch.equal(after[n], before[n]) for n in before)
    epochs = {(m.tags.get("epoch"), m.tags.get("trained_on")) for m in result.metrics if m.name == "auc"}
    assert epochs == {("0", "members"), ("1", "members"), ("1", "non_members"), (None, None)}  # None: blind
    assert result.counts == {"members": 4, "non_members": 4, "too_short": 0, "texts": 8}


def test_dp_training_records_its_claim_for_each_training(tiny_lm):
    """--dp-epsilon reaches both trainings (members, the reversed control), each with its own claim and DP
    record; the recipe is written as before DP existed."""
    from harness.model.loading import ModelSpec, load
    from tasks.finetune_memorization.task import FinetuneMemorization

    lm = load(ModelSpec(str(tiny_lm)))
    task = FinetuneMemorization()
    config = FinetuneMemorizationConfig(members=4, words=16, prompt_words=8, epochs=(1,), control_epochs=1,
                                        finetune_method="lora", lora_rank=4, learning_rate=1e-2, dp_epsilon=8.0,
                                        bootstrap_resamples=10, k_percents=(20,))
    context = RunContext(batch_size=4, progress=False)
    training = task.run(lm, task.load_data(config, context), config, context).info["training"]
    for trained_on in ("members", "non_members"):
        record = training[trained_on]["dp"]
        assert record["claimed_epsilon"] == 8.0 and record["delta"] == 1e-5 and record["noise_multiplier"] > 0
    assert "dp" not in training["recipe"]
