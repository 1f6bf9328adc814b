"""WEAT: the definitions by hand, the permutation test against enumeration, agreement with the WEFE
package on the same vectors and word sets, the built-in lists, and the CLI contract."""

from __future__ import annotations

import copy
import importlib
import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from harness.app.verify import verify_file
from harness.core.errors import UserError
from harness.core.task import RunContext
from harness.files.sources import WheelFolder
from harness.metrics.bias import weat_associations, weat_effect_size, weat_p_value, weat_statistic
from harness.model.loading import ModelSpec, load
from harness.reference.pretrained import minilm_folder
from tasks.weat.data import load_weat
from tasks.weat.report import weat_test_result
from tasks.weat.task import Weat, WeatConfig, associations, word_vectors
from tests.conftest import assert_user_error
from tests.helpers.records import copy_with_records, sidecar_payload

# The WEFE package (Badilla et al. 2020), read from its pinned wheel: its metadata pins numpy<=1.26,
# so it is not installed; its own imports (gensim, semantic_version, pandas) are test dependencies.
WEFE = WheelFolder("wefe", "1.0.1", "12654a91109cc2244e772bbdc881f692eec34488fe919fd918a929528f6faa00", "wefe")


def run_test(test, vectors, config, seed):
    """One test's d, statistic and p-value from word vectors: the scoring stage's associations, reported."""
    return weat_test_result(*associations(test, vectors), config, seed)


def test_associations_statistic_and_effect_size_by_hand():
    # 2-D unit vectors: A = {(1,0)}, B = {(0,1)}; s(w) = cos(w, A) - cos(w, B)
    a, b = np.array([[1.0, 0.0]]), np.array([[0.0, 2.0]])  # lengths do not matter: cosines
    x = np.array([[1.0, 0.0], [3.0, 3.0]])      # s = 1, 0
    y = np.array([[0.0, 1.0], [-1.0, 0.0]])     # s = -1, -1
    s_x, s_y = weat_associations(x, a, b), weat_associations(y, a, b)
    np.testing.assert_allclose(s_x, [1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(s_y, [-1.0, -1.0], atol=1e-12)
    assert weat_statistic(s_x, s_y) == pytest.approx(1.0 - (-2.0))
    # (mean 0.5 - mean -1) / sample std of {1, 0, -1, -1} (mean -0.25; squares 1.5625, .0625, .5625, .5625 -> 2.75/3)
    assert weat_effect_size(s_x, s_y) == pytest.approx(1.5 / np.sqrt(2.75 / 3))


def naive_p_value(s_x, s_y) -> float:
    """Pr over all equal-size splits of X u Y that the statistic exceeds the observed one, by loop."""
    values = list(s_x) + list(s_y)
    observed = weat_statistic(s_x, s_y)
    greater = total = 0
    for chosen in itertools.combinations(range(len(values)), len(s_x)):
        rest = [values[i] for i in range(len(values)) if i not in chosen]
        total += 1
        greater += weat_statistic([values[i] for i in chosen], rest) > observed + 1e-12
    return greater / total


def test_exact_p_value_matches_enumeration_and_sampling_approaches_it():
    rng = np.random.default_rng(3)
    s_x, s_y = rng.normal(0.3, 1, 7), rng.normal(0, 1, 7)
    p, exact, partitions = weat_p_value(s_x, s_y)
    assert exact and partitions == 3432
    assert p == pytest.approx(naive_p_value(s_x, s_y))
    sampled, exact, partitions = weat_p_value(s_x, s_y, max_exact=10, samples=40_000, seed=1)
    assert not exact and partitions == 40_000
    assert sampled == pytest.approx(p, abs=0.01)
    assert weat_p_value(s_x, s_y, max_exact=10, samples=1000, seed=5) == weat_p_value(s_x, s_y, max_exact=10,
                                                                                       samples=1000, seed=5)
    # ties: equal sums do not count as greater
    assert weat_p_value(np.array([1.0, 1.0]), np.array([1.0, 1.0]))[0] == 0.0


def test_sampled_p_value_counts_the_observed_partition():
    # X holds the two largest values: no partition of the 5 values has a larger sum than the observed one
    s_x, s_y = np.array([5.0, 4.0]), np.array([0.0, 0.1, 0.2])
    assert weat_p_value(s_x, s_y) == (0.0, True, 10)  # exact: 0 of C(5, 2) = 10 partitions are greater
    # sampled: (0 + 1) / (1000 + 1) (Phipson & Smyth 2010), never 0
    assert weat_p_value(s_x, s_y, max_exact=5, samples=1000, seed=0) == (1 / 1001, False, 1000)
    # X holds the two smallest: every other partition is greater, exactly 9 / 10; sampled, count is the
    # draws that are not the observed partition (about 9 in 10), and the +1 keeps p at most 1
    low_x, high_y = np.array([0.0, 0.1]), np.array([5.0, 4.0, 0.2])
    assert weat_p_value(low_x, high_y) == (0.9, True, 10)
    p, exact, partitions = weat_p_value(low_x, high_y, max_exact=5, samples=1000, seed=0)
    count = p * 1001 - 1
    assert not exact and partitions == 1000 and count == pytest.approx(round(count)) and 850 < count < 950


def test_the_builtin_tests_are_the_papers_ten():
    tests = load_weat(None, ()).tests
    assert [t.test_id for t in tests] == [f"weat{i}" for i in range(1, 11)]
    assert {t.test_id for t in tests if t.group == "race"} == {"weat3", "weat4", "weat5"}
    assert {t.test_id for t in tests if t.group == "gender"} == {"weat6", "weat7", "weat8"}
    sizes = {t.test_id: (len(t.x), len(t.y), len(t.a), len(t.b)) for t in tests}
    assert sizes["weat1"] == (25, 25, 25, 25) and sizes["weat3"] == (32, 32, 25, 25)
    assert sizes["weat5"] == (16, 16, 8, 8) and sizes["weat9"] == (6, 6, 7, 7)


def test_the_paper_preset_runs_the_seeds_seven_tests_in_its_groups():
    """Yoon & Lee's Table 7: WEAT 1, 2, 3, 4, 6, 7, 8; race = WEAT 3 and 4, gender = WEAT 6, 7, 8, and its
    Average over all seven: the report's mean |d| per group of a paper-mode run is over exactly those."""
    config = WeatConfig(preset="paper", representations=("static",), max_exact_partitions=1, permutation_samples=100)
    assert config.tests == ("weat1", "weat2", "weat3", "weat4", "weat6", "weat7", "weat8")
    assert WeatConfig(preset="paper", tests=("weat5",)).tests == ("weat5",)  # a given --tests wins
    tests = load_weat(None, config.tests).tests
    rng = np.random.default_rng(0)
    records = {"tests": [{"id": t.test_id, "group": t.group, "x": list(t.x), "y": list(t.y), "a": list(t.a),
                          "b": list(t.b)} for t in tests],
               "associations": [{"id": f"static/{t.test_id}", "representation": "static", "test": t.test_id,
                                 "x": rng.uniform(-0.5, 0.5, len(t.x)).tolist(),
                                 "y": rng.uniform(-0.5, 0.5, len(t.y)).tolist()} for t in tests],
               "unknown_words": [], "facts": {"data_source": "built-in"}}
    metrics = Weat().report(records, config, seed=0).metrics
    d = {m.tags["test"]: abs(m.value) for m in metrics if m.name == "effect_size"}
    s = {m.tags["test"]: m.value for m in metrics if m.name == "statistic"}  # s(X, Y, A, B), the seed's metric
    assert set(d) == set(s) == set(config.tests)
    for group, members in (("race", ("weat3", "weat4")), ("gender", ("weat6", "weat7", "weat8")),
                           ("all", config.tests)):
        (mean,) = [m for m in metrics if m.name == "mean_abs_d" and m.tags["group"] == group]
        assert mean.n == len(members) and mean.value == pytest.approx(np.mean([d[t] for t in members])), group


@pytest.fixture(scope="module")
def wefe(membench_cache):
    folder = WEFE.fetch()
    sys.path.insert(0, str(folder.parent))
    try:
        yield importlib.import_module("wefe")
    finally:
        sys.path.remove(str(folder.parent))


def test_builtin_lists_agree_with_wefes_transcription_but_for_the_documented_fixes(wefe):
    theirs = json.loads((Path(wefe.__file__).parent / "datasets" / "data" / "WEAT.json").read_text())
    ours = {t.test_id: t for t in load_weat(None, ()).tests}
    # WEFE keeps four names the paper's supplement marks as deleted (italics) in WEAT 4/5, and has
    # "short" (the word2vec variant) for "short-term" and "Bill" for "Billy".
    known = {"Jay", "Kristen", "Tremayne", "Latonya", "short", "short-term", "Bill", "Billy"}
    pairs = {"weat1": ("flowers", "insects", "pleasant_5", "unpleasant_5a"),
             "weat2": ("instruments", "weapons", "pleasant_5", "unpleasant_5a"),
             "weat3": ("european_american_names_5", "african_american_names_5", "pleasant_5", "unpleasant_5b"),
             "weat4": ("european_american_names_7", "african_american_names_7", "pleasant_5", "unpleasant_5b"),
             "weat5": ("european_american_names_7", "african_american_names_7", "pleasant_9", "unpleasant_9"),
             "weat6": ("male_names", "female_names", "career", "family"),
             "weat7": ("math", "arts", "male_terms", "female_terms"),
             "weat8": ("science", "arts_2", "male_terms_2", "female_terms_2"),
             "weat9": ("mental_disease", "physical_disease", "temporary", "permanent"),
             "weat10": ("young_people_names", "old_people_names", "pleasant_9", "unpleasant_9")}
    for test_id, keys in pairs.items():
        for mine, key in zip((ours[test_id].x, ours[test_id].y, ours[test_id].a, ours[test_id].b), keys):
            assert set(mine) ^ set(theirs[key]) <= known, (test_id, key, set(mine) ^ set(theirs[key]))


@pytest.fixture(scope="module")
def minilm(membench_cache):
    return load(ModelSpec(model=str(minilm_folder())))


def test_effect_sizes_agree_with_wefe_on_the_same_vectors(wefe, minilm):
    from gensim.models import KeyedVectors
    from wefe.metrics import WEAT
    from wefe.query import Query
    from wefe.word_embedding_model import WordEmbeddingModel

    config, paper = WeatConfig(), WeatConfig(preset="paper")
    data = load_weat(None, ("weat1", "weat6", "weat9"))
    words = list(dict.fromkeys(w for t in data.tests for w in t.words()))
    for representation in ("static", "contextual"):
        vectors = word_vectors(minilm, words, representation, config, RunContext(progress=False))
        keyed = KeyedVectors(vector_size=vectors.shape[1])
        keyed.add_vectors(words, vectors)
        model = WordEmbeddingModel(keyed, "minilm")
        by_word = dict(zip(words, vectors))
        for test in data.tests:
            ours = run_test(test, by_word, config, seed=0)
            query = Query([list(test.x), list(test.y)], [list(test.a), list(test.b)], ["X", "Y"], ["A", "B"])
            theirs = WEAT().run_query(query, model, return_effect_size=True)
            n = len(test.x) + len(test.y)
            # WEFE divides by the population std (ddof=0): d_wefe = d * sqrt(n / (n - 1))
            assert theirs["effect_size"] == pytest.approx(ours["effect_size"] * np.sqrt(n / (n - 1)), rel=1e-5)
            # the paper preset divides by the population std, as WEFE and the code the seed cites
            assert theirs["effect_size"] == pytest.approx(run_test(test, by_word, paper, seed=0)["effect_size"], rel=1e-5)
            assert theirs["weat"] == pytest.approx(ours["statistic"], rel=1e-5, abs=1e-7)


def test_a_real_encoder_shows_the_universal_associations(minilm):
    """Flowers/insects and instruments/weapons x pleasant/unpleasant: positive, significant effects
    in every embedding studied (Caliskan et al. 2017: d = 1.50 and 1.53 with GloVe)."""
    config = WeatConfig(tests=("weat1", "weat2"), permutation_samples=20_000)
    data = load_weat(None, config.tests)
    words = list(dict.fromkeys(w for t in data.tests for w in t.words()))
    for representation in ("static", "contextual"):
        by_word = dict(zip(words, word_vectors(minilm, words, representation, config, RunContext(progress=False))))
        for test in data.tests:
            result = run_test(test, by_word, config, seed=0)
            assert result["effect_size"] > 0.8 and result["p_value"] < 0.01, (representation, test.test_id, result)


def test_evaluate_writes_per_test_and_summary_metrics(tiny_lm, tmp_path, capsys):
    from harness.app.cli import main

    out = tmp_path / "out"
    assert main(["evaluate", "--model", str(tiny_lm), "--tasks", "weat", "--tests", "weat6,weat7,weat9",
                 "--output-path", str(out), "--no-cache", "--log-samples"]) == 0
    path = next(out.glob("*.json"))
    results = json.loads(path.read_text())
    entry = results["tasks"][0]
    metrics = {(m["name"], tuple(sorted(m["tags"].items()))): m for m in entry["metrics"]}
    for rep in ("static", "contextual"):
        d = [metrics["effect_size", (("representation", rep), ("test", t))]["value"] for t in ("weat6", "weat7", "weat9")]
        assert metrics["mean_abs_d", (("group", "all"), ("representation", rep))]["value"] == pytest.approx(np.mean(np.abs(d)))
        assert metrics["mean_abs_d", (("group", "gender"), ("representation", rep))]["value"] == pytest.approx(np.mean(np.abs(d[:2])))
        assert ("mean_abs_d", (("group", "race"), ("representation", rep))) not in metrics  # no race test ran
        assert metrics["p_value", (("representation", rep), ("test", "weat6"))]["n"] == 12870  # C(16, 8): exact
    assert set(entry["item_scores"]) == {"effect_size/static", "effect_size/contextual"}
    assert entry["counts"]["tests"] == 3
    # the numbers follow from the records in the sidecar (`membench verify`), and an edited record shows
    assert (out / results["records_file"]).is_file() and entry["records_sha256"]
    verify_file(path)
    payload = sidecar_payload(path)
    records = payload["tasks"]["weat"]["records"]
    edited = copy.deepcopy(payload)
    next(r for r in edited["tasks"]["weat"]["records"]["associations"] if r["id"] == "static/weat6")["x"][0] += 0.5
    with pytest.raises(UserError, match=r"effect_size\{representation=static,test=weat6\}.*do not follow from its records"):
        verify_file(copy_with_records(path, edited, tmp_path / "edited"))
    # records the scoring stage cannot have made fail with one line naming the record
    config = WeatConfig.model_validate(entry["config"])
    for edit, needle in [
        (lambda r: r["associations"].append(r["associations"][0]), "association 'static/weat6' appears twice"),
        (lambda r: r["associations"][1]["y"].__setitem__(2, 2.5), r"static/weat7' y\[2\].*out of its range"),
        (lambda r: r["associations"].pop(), "no association record contextual/weat9"),
        (lambda r: r["tests"][0].pop("group"), "test 'weat6' needs a group"),
        (lambda r: r["unknown_words"].append("nowhere"), "unknown word 'nowhere' is in no test"),
    ]:
        bad = copy.deepcopy(records)
        edit(bad)
        with pytest.raises(UserError, match=needle):
            Weat().report(bad, config, entry["seed"])
    paper = tmp_path / "paper"
    assert main(["evaluate", "--model", str(tiny_lm), "--tasks", "weat", "--tests", "weat6,weat7,weat9",
                 "--representations", "static", "--preset", "paper", "--output-path", str(paper), "--no-cache"]) == 0
    entry = json.loads(next(paper.glob("*.json")).read_text())["tasks"][0]
    assert entry["config"]["effect_size_std"] == "population"
    assert {"preset", "effect_size_std", "headline_representation"} <= set(entry["changed_settings"])
    assert entry["headline"]["tags"] == {"representation": "static", "group": "all"}  # the seed's per-word vectors
    sizes = {t.test_id: len(t.x) + len(t.y) for t in load_weat(None, ("weat6", "weat7", "weat9")).tests}
    for m in entry["metrics"]:  # the same associations; d divided by the population std: × sqrt(n / (n - 1))
        if m["name"] == "effect_size":
            default, n = metrics["effect_size", tuple(sorted(m["tags"].items()))]["value"], sizes[m["tags"]["test"]]
            assert m["value"] == pytest.approx(default * np.sqrt(n / (n - 1)), rel=1e-9)


@pytest.mark.parametrize("flags, needle", [
    (["--templates", "No slot here."], "exactly one {}"),
    (["--layer", "9"], "layer 9 does not exist"),
    (["--tests", "weat11"], "unknown WEAT test 'weat11'"),
    (["--weat-tests", "/no/such/file.json"], "no such file"),
    (["--pooling", "max"], "--pooling"),
])
def test_bad_weat_settings_are_one_line(tiny_lm, tmp_path, capsys, flags, needle):
    out = tmp_path / "out"
    assert_user_error(capsys, ["evaluate", "--model", str(tiny_lm), "--tasks", "weat", "--output-path", str(out)]
                      + flags, out, needle)


def test_a_malformed_tests_file_is_one_line(tiny_lm, tmp_path, capsys):
    bad = tmp_path / "tests.json"
    bad.write_text(json.dumps({"tests": [{"id": "t", "X": ["a", "b"], "Y": ["c"], "A": ["d", "e"], "B": ["f", "g"]}]}))
    out = tmp_path / "out"
    assert_user_error(capsys, ["evaluate", "--model", str(tiny_lm), "--tasks", "weat", "--weat-tests", str(bad),
                               "--output-path", str(out)], out, "Y must be a list of at least two words")
