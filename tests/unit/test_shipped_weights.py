"""The shipped reference weights: verified file by file against SHA256SUMS before any is used."""

from __future__ import annotations

import pytest

from harness.core.errors import UserError
from harness.reference import shipped


def fake_build(parent, name="tiny-gpt2-0123456789", weights=b"\x00" * 64):
    folder = parent / name
    (folder / "tiny-gpt2-e00").mkdir(parents=True)
    (folder / "tiny-gpt2-e00" / "model.safetensors").write_bytes(weights)
    (folder / "tiny-gpt2-e00" / "config.json").write_text("{}")
    (folder / shipped.MANIFEST).write_text('{"checkpoints": []}')
    return folder


@pytest.fixture
def weights(tmp_path):
    shipped.verified_builds.cache_clear()
    yield tmp_path / "weights"
    shipped.verified_builds.cache_clear()


def test_a_shipped_build_is_found_by_its_folder_name_once_verified(tmp_path, weights):
    target = shipped.ship(fake_build(tmp_path / "cache"), set(), weights)
    assert target == weights / "tiny-gpt2-0123456789"
    assert (target / "tiny-gpt2-e00" / "model.safetensors").read_bytes() == b"\x00" * 64
    lines = (weights / shipped.SUMS).read_text().splitlines()
    assert [line.split("  ")[1] for line in lines] == ["tiny-gpt2-0123456789/manifest.json",
                                                       "tiny-gpt2-0123456789/tiny-gpt2-e00/config.json",
                                                       "tiny-gpt2-0123456789/tiny-gpt2-e00/model.safetensors"]
    assert shipped.shipped_folder("tiny-gpt2-0123456789", weights) == target
    assert shipped.shipped_folder("tiny-gpt2-fedcba9876", weights) is None  # another recipe: none shipped


@pytest.mark.parametrize("damage", ["edited", "missing", "unlisted", "bad line"])
def test_damaged_shipped_weights_are_refused_in_one_line(tmp_path, weights, damage):
    target = shipped.ship(fake_build(tmp_path / "cache"), set(), weights)
    shipped.verified_builds.cache_clear()
    model = target / "tiny-gpt2-e00" / "model.safetensors"
    if damage == "edited":  # e.g. a Git LFS pointer in place of the weights
        model.write_bytes(b"version https://git-lfs.github.com/spec/v1\n")
    elif damage == "missing":
        model.unlink()
    elif damage == "unlisted":
        (target / "tiny-gpt2-e00" / "pytorch_model.bin").write_bytes(b"pickle")
    else:
        (weights / shipped.SUMS).write_text("not a sum\n")
    with pytest.raises(UserError) as err:
        shipped.shipped_folder("tiny-gpt2-0123456789", weights)
    assert "\n" not in str(err.value)
    assert {"edited": "sha256", "missing": "missing", "unlisted": "does not list", "bad line": "sha256sum"}[damage] \
        in str(err.value)


def test_shipping_deletes_the_builds_of_recipes_no_longer_current(tmp_path, weights):
    """A changed recipe's old weights go; another current recipe of the same name (a quick one) stays."""
    current = {"tiny-gpt2-fedcba9876", "other-gpt2-5555555555", "tiny-gpt2-7777777777"}
    shipped.ship(fake_build(tmp_path / "a"), current, weights)
    shipped.ship(fake_build(tmp_path / "b", "other-gpt2-5555555555"), current | {"tiny-gpt2-0123456789"}, weights)
    shipped.ship(fake_build(tmp_path / "q", "tiny-gpt2-7777777777"), current | {"tiny-gpt2-0123456789"}, weights)
    newer = shipped.ship(fake_build(tmp_path / "c", "tiny-gpt2-fedcba9876", b"\x01" * 64), current, weights)
    assert sorted(path.name for path in weights.iterdir()) == [shipped.SUMS, "other-gpt2-5555555555",
                                                               "tiny-gpt2-7777777777", "tiny-gpt2-fedcba9876"]
    assert shipped.verified_builds(weights) == {"other-gpt2-5555555555", "tiny-gpt2-7777777777",
                                                "tiny-gpt2-fedcba9876"}
    assert shipped.shipped_folder("tiny-gpt2-fedcba9876", weights) == newer


@pytest.mark.parametrize("quick", [False, True])
def test_the_project_ships_every_reference_recipe(quick):
    """Every build `membench run` (and `--quick`, the tests' job) evaluates is shipped for its
    current recipe (a recipe changed without `membench reference build --ship` would be trained on
    each machine anew), and nothing else is."""
    from harness.reference.recipes import reference_recipes

    for config, _ in reference_recipes(quick):
        assert shipped.shipped_folder(config.folder_name()) is not None, config.folder_name()
    current = {config.folder_name() for quick in (False, True) for config, _ in reference_recipes(quick)}
    assert shipped.verified_builds() == current


def test_a_rebuild_says_which_checkpoints_match_the_shipped_weights(tmp_path, weights, monkeypatch):
    import json
    from dataclasses import dataclass

    from harness.app import job
    from harness.reference.build import Recipe

    @dataclass(frozen=True)
    class Tiny(Recipe):
        name: str = "tiny-gpt2"

    config = Tiny()

    def build_folder(parent, hashes):
        folder = parent / config.folder_name()
        folder.mkdir(parents=True)
        checkpoints = [{"folder": f"tiny-gpt2-e{k:02d}", "weights_sha256": h} for k, h in enumerate(hashes)]
        (folder / shipped.MANIFEST).write_text(json.dumps({"checkpoints": checkpoints}))
        return folder

    rebuilt = build_folder(tmp_path / "cache", ["a" * 64, "c" * 64])
    monkeypatch.setattr(job, "shipped_folder", lambda name: shipped.shipped_folder(name, weights))
    assert job.shipped_comparison(config, rebuilt) == [f"no shipped weights of recipe {config.digest()} to compare with"]
    shipped.ship(build_folder(tmp_path / "shipped", ["a" * 64, "b" * 64]), set(), weights)
    assert job.shipped_comparison(config, rebuilt) == [
        f"tiny-gpt2-e00: weights {'a' * 12}, identical to the shipped weights",
        f"tiny-gpt2-e01: weights {'c' * 12}, differs from the shipped {'b' * 12}"]
    assert job.shipped_comparison(config, weights / config.folder_name()) == []  # the shipped build itself


def test_the_one_epoch_checkpoint_runs_the_token_scores_only():
    """No control reads the attacks beyond the token log-probs on a checkpoint between the untrained
    and the last one, so `membench run` does not run them there (issue 29); the shipped manifests give
    each checkpoint's epoch."""
    from harness.app.job import checkpoint_task_settings
    from harness.reference.build import JOB_NEAR_VERBATIM_BEAM, TOKEN_SCORES, checkpoint_folders, reference_builds
    from harness.reference.recipes import PretrainedEncoder

    english, non_members, _, japanese = reference_builds()
    folder = shipped.shipped_folder(english.folder_name())
    assert folder is not None
    by_checkpoint = {path.name: checkpoint_task_settings(english, path) for path in checkpoint_folders(folder)}
    assert sorted(by_checkpoint) == ["xsum-gpt2-e00", "xsum-gpt2-e01", "xsum-gpt2-e30"]
    for name in ("xsum-gpt2-e00", "xsum-gpt2-e30"):
        assert "attacks" not in by_checkpoint[name]  # every attack: the task's default
        assert by_checkpoint[name]["neighbour_model"] == "reference:mlm-bert-e05"
    assert by_checkpoint["xsum-gpt2-e01"]["attacks"] == TOKEN_SCORES
    assert "neighbour_model" not in by_checkpoint["xsum-gpt2-e01"]
    assert japanese.task_settings(1)["attacks"] == TOKEN_SCORES and "attacks" not in japanese.task_settings(30)
    assert non_members.task_settings(30)["attacks"] == TOKEN_SCORES
    assert english.task_settings() == by_checkpoint["xsum-gpt2-e00"]  # without an epoch: the whole build's
    assert checkpoint_task_settings(PretrainedEncoder(), folder) == {}
    # paywall's near-verbatim bound (issue 61): the English untrained and 30-epoch checkpoints and the twin
    beam = str(JOB_NEAR_VERBATIM_BEAM)
    assert [by_checkpoint[name].get("near_verbatim_beam") for name in sorted(by_checkpoint)] == [beam, None, beam]
    assert non_members.task_settings(30)["near_verbatim_beam"] == beam
    assert by_checkpoint["xsum-gpt2-e30"]["near_verbatim_groups"] == "members"
    assert "near_verbatim_beam" not in japanese.task_settings(30)
