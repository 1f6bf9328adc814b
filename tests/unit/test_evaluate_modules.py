"""The `evaluate` metric modules of harness/evaluate_modules: they load offline from their folders
with `evaluate.load`, give exactly the numbers of membench's own functions and tasks, match
hand-computed cases, and reject bad input.

evaluate copies each module script into its modules cache and writes arrow files into its metrics
cache; the `evaluate_lib` fixture points both (and HF_HOME) at a temporary folder, so nothing is
written to the user's home.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from harness.interop.evaluate_modules import MODULES, module_path
from harness.metrics import memorization as metrics
from harness.metrics.bias import stereoset_scores

EXACT = {"abs": 1e-12, "rel": 0}


@pytest.fixture(scope="module")
def evaluate_lib(tmp_path_factory):
    """The `evaluate` package with every cache in a temporary folder."""
    root = tmp_path_factory.mktemp("hf-home")
    caches = {"HF_MODULES_CACHE": root / "modules", "HF_METRICS_CACHE": root / "metrics",
              "HF_EVALUATE_CACHE": root / "evaluate"}
    caches["HF_MODULES_CACHE"].mkdir()
    dynamic = [name for name in sys.modules if name.split(".")[0] == "evaluate_modules"]
    saved = {name: sys.modules.pop(name) for name in dynamic}  # evaluate's dynamic-module package
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HOME", str(root))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        for name, path in caches.items():
            mp.setenv(name, str(path))
        import evaluate  # reads the environment on first import; patch config in case it was imported before
        for name, path in caches.items():
            mp.setattr(evaluate.config, name, path)
        mp.syspath_prepend(str(caches["HF_MODULES_CACHE"]))
        try:
            yield evaluate
        finally:
            for name in [n for n in sys.modules if n.split(".")[0] == "evaluate_modules"]:
                del sys.modules[name]
            sys.modules.update(saved)


@pytest.fixture(scope="module")
def load(evaluate_lib):
    return lambda name, **kwargs: evaluate_lib.load(module_path(name), **kwargs)


# A compute that raises inside `_compute` keeps the lock of the instance's arrow cache file, and
# the next instance then waits 1 s for it before taking another file name (evaluate 0.4.x): the
# bad-input tests keep their data in memory instead.
IN_MEMORY = {"keep_in_memory": True}


def test_module_paths_and_cache_location(load, evaluate_lib):
    for name in MODULES:
        folder = Path(module_path(name))
        assert folder.is_absolute() and (folder / f"{name}.py").is_file() and (folder / "README.md").is_file()
        module = load(name)
        assert "Nadeem" in module.citation or "Shi" in module.citation or "Ishihara" in module.citation
    copied = sorted(p.name for p in Path(evaluate_lib.config.HF_MODULES_CACHE).rglob("membench_*.py"))
    assert copied == sorted(f"{name}.py" for name in MODULES)
    with pytest.raises(ValueError, match="membench_membership, membench_memorization, membench_stereoset"):
        module_path("membench_nonsense")


# ---------------------------------------------------------------- membership

def test_membership_equals_membench_and_the_task(load):
    from harness.metrics.detection import detection_metrics

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 300)
    scores = np.round(rng.normal(0.6 * labels, 1.0), 1)  # rounded: many ties
    assert len(np.unique(scores)) < 100
    levels = (0.1, 0.01, 0.05)
    got = load("membench_membership").compute(predictions=scores.tolist(), references=labels.tolist(),
                                              fpr_levels=levels, bootstrap_resamples=200, seed=7)
    expected = {"auc": metrics.roc_auc(labels, scores)}
    for level in levels:
        expected[f"tpr@{level:g}fpr"] = metrics.tpr_at_fpr(labels, scores, level)
        expected[f"tpr@{level:g}fpr_inclusive"] = metrics.tpr_at_fpr(labels, scores, level, inclusive=True)
    expected["auc_ci_low"], expected["auc_ci_high"] = metrics.bootstrap_auc_interval(labels, scores, 200, 0.95, 7)
    assert got == pytest.approx(expected, **EXACT) and list(got) == list(expected)
    # the same names and values as the mink_membership task's metrics
    task = detection_metrics(labels, scores, {}, levels, 200, seed=7)
    assert [m.name for m in task] == list(got)[:7]
    assert {m.name: m.value for m in task} == pytest.approx({k: got[k] for k in list(got)[:7]}, **EXACT)
    assert (task[0].ci_low, task[0].ci_high) == (got["auc_ci_low"], got["auc_ci_high"])


def test_membership_hand_computed(load):
    membership = load("membench_membership")
    # members 0.9, 0.4; non-members 0.6, 0.1: 3 of the 4 member/non-member pairs ordered right;
    # at FPR 0 the threshold 0.9 already finds one of the two members
    assert membership.compute(predictions=[0.9, 0.4, 0.6, 0.1], references=[1, 1, 0, 0]) == \
        {"auc": 0.75, "tpr@0.1fpr": 0.5, "tpr@0.1fpr_inclusive": 0.5, "tpr@0.01fpr": 0.5,
         "tpr@0.01fpr_inclusive": 0.5}
    # ties: both members tie a non-member at 0.5 (1/2 each) and beat the one at 0.2: AUC 3/4;
    # no threshold separates any member without FPR 1/2, so TPR at FPR < 0.5 is 0, at FPR <= 0.5 it is 1
    assert membership.compute(predictions=[0.5, 0.5, 0.5, 0.2], references=[1, 0, 1, 0], fpr_levels=(0.1, 0.5)) == \
        {"auc": 0.75, "tpr@0.1fpr": 0.0, "tpr@0.1fpr_inclusive": 0.0, "tpr@0.5fpr": 0.0,
         "tpr@0.5fpr_inclusive": 1.0}
    # batches accumulate
    membership.add_batch(predictions=[0.9, 0.4], references=[1, 1])
    membership.add_batch(predictions=[0.6, 0.1], references=[0, 0])
    assert membership.compute()["auc"] == 0.75


@pytest.mark.parametrize("kwargs, message", [
    ({"predictions": [0.1, 0.2, 0.3], "references": [1, 0]}, "Mismatch in the number"),
    ({"predictions": [0.1, 0.2], "references": [1, 1]}, "both classes"),
    ({"predictions": [0.1, 0.2], "references": [1, 0.7]}, "0/1 labels"),  # not truncated to 0
    ({"predictions": [0.1, float("nan")], "references": [1, 0]}, "finite"),
    ({"predictions": [0.1, 0.2], "references": [1, 0], "fpr_levels": (0.0,)}, "between 0 and 1"),
    ({"predictions": [0.1, 0.2], "references": [1, 0], "bootstrap_resamples": -1}, ">= 0"),
])
def test_membership_bad_input(load, kwargs, message):
    with pytest.raises(ValueError, match=message):
        load("membench_membership", **IN_MEMORY).compute(**kwargs)


# ---------------------------------------------------------------- memorization

def continuation_pairs(seed: int = 0, n: int = 60) -> tuple[list[str], list[str]]:
    """References over an English + Japanese alphabet; generations that copy a random prefix of
    their reference and continue at random; plus empty and identical strings."""
    rng = np.random.default_rng(seed)
    alphabet = list("abcde fgh.") + list("東京都の人口は面積、。")
    references, generations = [], []
    for _ in range(n):
        reference = "".join(rng.choice(alphabet, rng.integers(0, 40)))
        kept = int(rng.integers(0, len(reference) + 1))
        generations.append(reference[:kept] + "".join(rng.choice(alphabet, rng.integers(0, 20))))
        references.append(reference)
    generations += ["", "", "同じ文章です。", "abc"]
    references += ["", "x", "同じ文章です。", ""]
    return generations, references


def test_memorization_equals_membench_and_the_task(load):
    from tasks.paywall_memorization.report import summary

    generations, references = continuation_pairs()
    got = load("membench_memorization").compute(predictions=generations, references=references,
                                                return_per_example=True)
    eidetic = np.array([metrics.forward_match(g, r) for g, r in zip(generations, references)])
    approximate = np.array([metrics.approximate_memorization(g, r) for g, r in zip(generations, references)])
    assert 0 < (eidetic > 0).mean() < 1 and 0 < (approximate == 1).sum() < len(approximate)
    assert got["eidetic"] == eidetic.tolist() and got["approximate"] == pytest.approx(approximate.tolist(), **EXACT)
    task = {m.name: m.value for m in summary(len(generations), eidetic, approximate, {})}
    summary_keys = ["eidetic_max", "eidetic_mean", "approximate_mean", "approximate_median"]
    assert list(task) == summary_keys
    assert {k: got[k] for k in summary_keys} == pytest.approx(task, **EXACT)
    assert task == pytest.approx(metrics.memorization_summary(eidetic, approximate), **EXACT)
    assert set(load("membench_memorization").compute(predictions=generations, references=references)) == \
        set(summary_keys)


def test_memorization_hand_computed(load):
    memorization = load("membench_memorization")
    # "abc" shared, then 2 substitutions in 5 characters
    assert memorization.compute(predictions=["abcxy"], references=["abcde"]) == \
        {"eidetic_max": 3.0, "eidetic_mean": 3.0, "approximate_mean": 0.6, "approximate_median": 0.6}
    # Japanese: 東京都の shared (4 characters), 人口 vs 面積 = 2 substitutions in 7; "" vs "x": 0 and 0;
    # "" vs "": 0 matched characters, approximate 1 by definition
    got = memorization.compute(predictions=["東京都の人口は", "", ""], references=["東京都の面積は", "x", ""],
                               return_per_example=True)
    assert got["eidetic"] == [4, 0, 0]
    assert got["approximate"] == pytest.approx([5 / 7, 0.0, 1.0], **EXACT)
    assert got["eidetic_max"] == 4.0 and got["eidetic_mean"] == pytest.approx(4 / 3, **EXACT)
    assert got["approximate_mean"] == pytest.approx((5 / 7 + 1) / 3, **EXACT) and got["approximate_median"] == 5 / 7


@pytest.mark.parametrize("kwargs, message", [
    ({"predictions": ["a", "b"], "references": ["a"]}, "Mismatch in the number"),
    ({"predictions": [], "references": []}, "at least one"),
    ({"predictions": [1, 2], "references": ["a", "b"]}, "format"),
])
def test_memorization_bad_input(load, kwargs, message):
    with pytest.raises(ValueError, match=message):
        load("membench_memorization", **IN_MEMORY).compute(**kwargs)


# ---------------------------------------------------------------- StereoSet

def stereoset_examples(seed: int = 0, n: int = 240):
    rng = np.random.default_rng(seed)
    domains = ("gender", "profession", "race", "religion")
    targets = [f"term{i}" for i in range(12)]
    target = rng.choice(targets, n)
    bias_type = np.array([domains[int(t[4:]) % 4] for t in target])  # each term in one domain, as in StereoSet
    scores = np.round(rng.normal(0, 1, (n, 3)) + [0.2, 0.0, -0.5], 1)  # rounded: ties
    return [SimpleNamespace(target=t, bias_type=b) for t, b in zip(target, bias_type)], scores


def test_stereoset_equals_membench_and_the_task(load):
    from tasks.stereoset.report import domain_metrics

    examples, scores = stereoset_examples()
    assert (scores[:, 0] == scores[:, 1]).sum() > 5  # ties between stereotype and anti-stereotype
    targets, domains = [e.target for e in examples], [e.bias_type for e in examples]
    inputs = {"stereotype": scores[:, 0].tolist(), "anti_stereotype": scores[:, 1].tolist(),
              "unrelated": scores[:, 2].tolist(), "targets": targets}
    stereoset = load("membench_stereoset")
    overall = stereoset.compute(**inputs)
    assert overall == pytest.approx(stereoset_scores(targets, scores[:, 0], scores[:, 1], scores[:, 2]), **EXACT)
    got = stereoset.compute(**inputs, domains=domains)
    task = {(m.name if m.tags["domain"] == "all" else f"{m.name}_{m.tags['domain']}"): m.value
            for m in domain_metrics(targets, domains, scores)}
    assert len(task) == 20 and task == pytest.approx({k: got[k] for k in task}, **EXACT)
    assert set(got) - set(task) == {f"examples_{d}" for d in ("gender", "profession", "race", "religion")} | {"examples"}
    assert sum(got[f"examples_{d}"] for d in ("gender", "profession", "race", "religion")) == len(examples)


def test_stereoset_hand_computed(load):
    stereoset = load("membench_stereoset")
    # term A: a tie of stereotype and anti-stereotype (counts as anti), then a stereotype win:
    #   SS_A = 50; meaningful options beating unrelated: 2 + 1 of 4, LMS_A = 75.
    # term B: anti wins, only the anti beats unrelated: SS_B = 0, LMS_B = 50.
    # Means over terms: SS 25 (per example it would be 33.3), LMS 62.5, ICAT 62.5 * 25 / 50 = 31.25.
    inputs = {"stereotype": [-1.0, -1.0, -5.0], "anti_stereotype": [-1.0, -3.0, -4.0],
              "unrelated": [-2.0, -2.0, -4.5], "targets": ["A", "A", "B"]}
    assert stereoset.compute(**inputs) == {"lms": 62.5, "ss": 25.0, "icat": 31.25, "examples": 3, "targets": 2}
    got = stereoset.compute(**inputs, domains=["gender", "gender", "race"])
    assert {k: v for k, v in got.items() if k.endswith(("_gender", "_race"))} == {
        "lms_gender": 75.0, "ss_gender": 50.0, "icat_gender": 75.0, "examples_gender": 2, "targets_gender": 1,
        "lms_race": 50.0, "ss_race": 0.0, "icat_race": 0.0, "examples_race": 1, "targets_race": 1}
    # batches accumulate; domains come with compute
    stereoset.add_batch(**{k: v[:2] for k, v in inputs.items()})
    stereoset.add_batch(**{k: v[2:] for k, v in inputs.items()})
    assert stereoset.compute(domains=["gender", "gender", "race"]) == got


@pytest.mark.parametrize("change, message", [
    ({"unrelated": [-2.0, -2.0]}, "Mismatch in the number"),
    ({"targets": None}, "missing"),
    ({"domains": ["gender"]}, "domains has 1 values for 3 examples"),
    ({"stereotype": [-1.0, float("nan"), -5.0]}, "NaN"),
    ({"targets": [1, 2, 3]}, "format"),
])
def test_stereoset_bad_input(load, change, message):
    inputs = {"stereotype": [-1.0, -1.0, -5.0], "anti_stereotype": [-1.0, -3.0, -4.0],
              "unrelated": [-2.0, -2.0, -4.5], "targets": ["A", "A", "B"], **change}
    with pytest.raises(ValueError, match=message):
        load("membench_stereoset", **IN_MEMORY).compute(**{k: v for k, v in inputs.items() if v is not None})


# ---------------------------------------------------------------- the examples in the metric docs

@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(evaluate_lib, name):
    """The `Examples:` of each module's `_KWARGS_DESCRIPTION` (what `evaluate` shows as its usage)
    run as doctests and print what they say they print."""
    import doctest
    import importlib.util

    path = Path(module_path(name)) / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"doctest_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    test = doctest.DocTestParser().get_doctest(module._KWARGS_DESCRIPTION, {}, name, str(path), 0)
    assert test.examples, f"{name} documents no example"
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_the_interop_page_example_prints_what_it_says(evaluate_lib):
    """docs/interop.md's Python example, run as written: its last call gives the dict its comment shows."""
    import ast
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "interop.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    *statements, shown = [line for line in code.strip().splitlines() if line]
    assert shown.startswith("# {")
    namespace: dict = {}
    exec("\n".join(statements[:-1]), namespace)  # noqa: S102 - the page's own example
    assert eval(statements[-1], namespace) == ast.literal_eval(shown.removeprefix("# "))  # noqa: S307
