"""ner_prompt_memorization: M-MEM from ranks, the strategies, the file layouts, the controls."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import chi2
from statsmodels.stats.contingency_tables import cochrans_q as statsmodels_cochrans_q

from harness.app.cli import main
from harness.app.verify import verify_file
from harness.core.errors import UserError
from harness.core.results import load_results
from harness.metrics import memorization as m
from harness.model.loading import ModelSpec, load
from harness.reference import ner_data
from harness.reference.build import read_manifest
from harness.reference.ner_build import NerBuildConfig
from harness.reference.wordpiece import train_wordpiece_tokenizer
from harness.scoring.token_classes import span_label_probs
from tasks.ner_prompt_memorization import prompts as P
from tasks.ner_prompt_memorization import report as ner_report
from tasks.ner_prompt_memorization import strategies as st
from tasks.ner_prompt_memorization.entities import entity_label_set
from tasks.ner_prompt_memorization.task import NerConfig, NerPromptMemorization, entity_labels
from tests.conftest import assert_user_error
from tests.helpers.records import copy_with_records, sidecar_payload
from tests.helpers.shipped_builds import shipped_build
from tests.helpers.tiny_models import TINY_SENTENCES, save_tiny_ner


@pytest.fixture(scope="session")
def tiny_ner(tmp_path_factory) -> Path:
    return save_tiny_ner(tmp_path_factory.mktemp("tiny-ner") / "tiny-ner")


@pytest.fixture(scope="session")
def reference_ner(membench_cache) -> dict[int, Path]:
    folder = shipped_build(NerBuildConfig())
    return {c["epoch"]: folder / c["folder"] for c in read_manifest(folder)["checkpoints"]}


def small_names(per_list: int = 6) -> dict:
    names = ner_data.reference_names(per_list=per_list)
    return names.as_layout()


@pytest.fixture()
def paper_file(tmp_path) -> Path:
    """The paper's combined layout: names and every prompt list in one JSON object (a subset of the
    built-in prompts: 3 per type)."""
    typed = P.builtin_prompts().typed
    layout = {**small_names(), "empty_prompt": ["MASK"], "one_prompt": ["My name is MASK."],
              "mix_prompt": ["I know MASK.", "MASK is here.", "Is MASK here?", "Call MASK.", "Wow, MASK!"]}
    for prompt_type in P.PROMPT_TYPES:
        layout[f"{prompt_type}_prompt"] = [p.text for p in typed if p.type == prompt_type][:3]
    path = tmp_path / "paper.json"
    path.write_text(json.dumps(layout), encoding="utf-8")
    return path


# ---------------------------------------------------------------- metrics

def naive_share(higher: np.ndarray, lower: np.ndarray) -> float:
    return float(np.mean([1.0 if a > b else 0.5 if a == b else 0.0 for a in higher for b in lower]))


def test_m_mem_from_ranks_equals_the_pairwise_count_on_random_data():
    rng = np.random.default_rng(3)
    higher = rng.integers(0, 12, size=(5, 40)).astype(float)  # small integers: many ties
    lower = rng.integers(0, 12, size=(5, 33)).astype(float)
    shares = m.preference_share(higher, lower)
    assert shares.shape == (5,)
    for row in range(5):
        assert shares[row] == pytest.approx(naive_share(higher[row], lower[row]), abs=1e-12)
    continuous = rng.normal(size=(2, 50))
    assert m.preference_share(continuous[0], continuous[1])[0] == pytest.approx(naive_share(*continuous), abs=1e-12)


def test_pair_preferences_majority_vote_and_cochrans_q_against_loops_and_statsmodels():
    rng = np.random.default_rng(4)
    higher, lower = rng.integers(0, 4, size=(7, 9)).astype(float), rng.integers(0, 4, size=(7, 5)).astype(float)
    prefs = m.pair_preferences(higher, lower, chunk=4)
    assert prefs.shape == (45, 7)
    for i in range(9):
        for j in range(5):
            expected = [1.0 if a > b else 0.5 if a == b else 0.0 for a, b in zip(higher[:, i], lower[:, j])]
            assert prefs[i * 5 + j].tolist() == expected
    votes = prefs.astype(float).sum(axis=1)
    expected_majority = np.mean([1.0 if v > 3.5 else 0.5 if v == 3.5 else 0.0 for v in votes])
    assert m.majority_vote_share(prefs) == pytest.approx(expected_majority)
    assert m.preference_share(higher, lower) == pytest.approx(prefs.astype(float).mean(axis=0))
    binary = rng.random((60, 6)) < 0.4
    q, p = m.cochrans_q(binary)
    reference = statsmodels_cochrans_q(binary.astype(float))
    assert (q, p) == pytest.approx((reference.statistic, reference.pvalue))
    assert m.cochrans_q(np.ones((5, 3), bool)) == (None, None)
    assert m.cochrans_q(np.array([[1, 1], [0, 0]], bool)) == (None, None)


def test_cochrans_q_blocks_are_the_zipped_name_pairs():
    # 3 prompts (rows), in-train names a-e and one extra (f), out-train names v-z: block i = (i-th in, i-th out)
    conf_in = np.array([[0.9, 0.9, 0.9, 0.1, 0.9, 0.9],
                        [0.9, 0.1, 0.9, 0.1, 0.5, 0.9],
                        [0.5, 0.5, 0.9, 0.1, 0.9, 0.9]])
    conf_out = np.full((3, 5), 0.5)
    success = ner_report.zipped_successes(conf_in, conf_out)
    assert success.tolist() == [[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0], [1, 0, 1]]  # a tie (0.5) is no success
    # by hand: C = (4, 2, 2), T = 8, sum R^2 = 18; Q = (k-1)(k sum C^2 - T^2) / (k T - sum R^2) = 2 * 8 / 6;
    # chi-square with 2 degrees of freedom: p = exp(-Q / 2)
    q, p = m.cochrans_q(success)
    assert q == pytest.approx(8 / 3) and p == pytest.approx(np.exp(-4 / 3))


def test_tied_with_finds_every_prompt_sharing_a_value():
    dev = np.array([0.5, 0.75, 0.25, 0.75, 0.25, 0.75])
    assert ner_report.tied_with(dev, int(np.argmax(dev))).tolist() == [1, 3, 5]
    assert ner_report.tied_with(dev, int(np.argmin(dev))).tolist() == [2, 4]
    assert ner_report.tied_with(dev, 0).tolist() == [0]


# ---------------------------------------------------------------- prompts

def test_annotation_filling_and_token_removal():
    prompt = P.annotate("p", "Did  you meet MASK's sister?", "interrogative")
    assert (prompt.text, prompt.name_position, prompt.n_tokens) == ("Did you meet MASK's sister?", "middle", 6)
    assert P.annotate("p", "MASK, sit down.", "imperative").name_position == "start"
    assert P.annotate("p", "I met MASK.", "declarative").name_position == "end"
    assert P.annotate("p", "MASK", "baseline").n_tokens == 0
    sentence, (a, b) = P.fill("I met MASK.", "Anna Berg")
    assert sentence == "I met Anna Berg." and sentence[a:b] == "Anna Berg"
    text = "Don't tell MASK's secret!"
    assert [P.remove_token(text, i) for i in P.removable_tokens(text)] == [
        "tell MASK's secret!", "Don't MASK's secret!", "Don't tell MASK secret!", "Don't tell MASK's!",
        "Don't tell MASK's secret"]
    # removing a token never joins two words (nor the slot and a word)
    assert P.remove_token("Whoa, MASK, that was mind-blowing!", 7) == "Whoa, MASK, that was mind blowing!"
    assert P.remove_token("I met MASK -known son.", 3) == "I met MASK known son."
    assert P.remove_token("Say hi to non-MASK people.", 4) == "Say hi to non MASK people."
    reached, frontier = set(), {"Whoa, MASK, that was mind-blowing!", "MASK partners with non-profit groups."}
    while frontier:  # every prompt on every elimination path of these two
        reached |= frontier
        frontier = {P.remove_token(t, i) for t in frontier for i in P.removable_tokens(t)} - reached
    for t in reached:
        assert [t[a:b] for a, b in P.token_spans(t)].count(P.SLOT) == 1, t
    for bad in ("No slot here.", "MASK and MASK.", "MASKED words"):
        with pytest.raises(Exception, match="exactly once"):
            P.annotate("p", bad, "declarative")


def test_builtin_prompt_set_has_every_type_position_and_length():
    prompts = P.builtin_prompts()
    typed = prompts.typed
    for prompt_type in P.PROMPT_TYPES:
        mine = [p for p in typed if p.type == prompt_type]
        assert len(mine) >= 100
        positions = {p.name_position for p in mine}
        assert positions == {"start", "middle", "end"}
        lengths = [p.n_tokens for p in mine]
        assert min(lengths) <= 4 and max(lengths) >= 20
    assert len({p.text for p in typed}) == len(typed)
    assert prompts.no_prompt.text == "MASK" and prompts.one_prompt.text == "My name is MASK."
    assert len(prompts.mix) == 5
    # the stored annotations are checked against the text on every read
    raw = json.loads(P.BUILTIN_PATH.read_text(encoding="utf-8"))
    assert all({"prompt_id", "type", "name_position", "n_tokens"} <= set(item) for item in raw["prompts"])


def test_length_bins():
    assert [ner_report.length_bin(n, (5, 10, 15)) for n in (1, 5, 6, 15, 16, 40)] == ["1-5", "1-5", "6-10", "11-15",
                                                                              "16+", "16+"]


# ---------------------------------------------------------------- scoring

def test_span_label_probs_match_a_single_sentence_forward_and_ignore_the_batch(tiny_ner, monkeypatch):
    import harness.scoring.token_classes as token_classes

    lm = load(ModelSpec(str(tiny_ner)))
    texts = ["Anna Berg met Tom .", "I saw Lee Park today in the city of Oslo .", "Tom"]
    spans = [(0, 9), (6, 14), (0, 3)]
    many = span_label_probs(lm.model, lm.tokenizer, texts, spans, [1, 2], batch_size=1)  # one batch: 3 short rows
    monkeypatch.setattr(token_classes, "context_batches", lambda lengths, *_: [[k] for k in range(len(lengths))])
    one = span_label_probs(lm.model, lm.tokenizer, texts, spans, [1, 2], batch_size=1)
    for a, b in zip(one, many):
        np.testing.assert_allclose(a, b, atol=1e-6)
    encoded = lm.tokenizer(texts[1], return_offsets_mapping=True)
    with torch.no_grad():
        probs = torch.softmax(lm.model(input_ids=torch.tensor([encoded["input_ids"]])).logits[0], -1)
    inside = [i for i, (s, e) in enumerate(encoded["offset_mapping"]) if e > s and s < 14 and e > 6]
    np.testing.assert_allclose(one[1], probs[inside][:, [1, 2]].numpy(), atol=1e-6)


def test_confidences_near_one_do_not_tie(tiny_ner):
    """A confident model: B-PER's logit 25 above the others, so P(B-PER) = 1 - 8 e^-25 e^-delta ~ 1 - 1e-10
    with small name-dependent deltas; float32 rounds every one of them to 1.0, float64 keeps them apart."""
    lm = load(ModelSpec(str(tiny_ner)))
    labels = [ner_data.LABELS.index("B-PER"), ner_data.LABELS.index("I-PER")]
    with torch.no_grad():
        lm.model.classifier.bias.zero_()
        lm.model.classifier.bias[labels[0]] = 25.0
    names = ["Anna Berg", "Tom Diaz", "Lee Park", "Oslo", "Anna", "Tom Berg"]
    probs = span_label_probs(lm.model, lm.tokenizer, [f"I met {n} ." for n in names],
                             [(6, 6 + len(n)) for n in names], labels)
    assert all(p.dtype == np.float64 for p in probs)
    conf = st.ConfidenceTable(lm.model, lm.tokenizer, labels, 4, False).get(["I met MASK ."], names)[0]
    assert np.all(conf > 1 - 1e-9) and np.all(conf < 1)
    assert len(set(conf.tolist())) == len(names)  # no ties in float64 ...
    assert set(conf.astype(np.float32).tolist()) == {1.0}  # ... where float32 ties them all at 1.0
    shares = m.preference_share(conf[:3], conf[3:])[0]
    assert shares in {k / 9 for k in range(10)}  # strict wins and losses only, no half-ties


def test_each_prompt_name_pair_is_scored_once(tiny_ner, monkeypatch):
    lm = load(ModelSpec(str(tiny_ner)))
    seen: list[str] = []
    original = st.span_label_probs

    def counting(model, tokenizer, texts, *args, **kwargs):
        seen.extend(texts)
        return original(model, tokenizer, texts, *args, **kwargs)

    monkeypatch.setattr(st, "span_label_probs", counting)
    table = st.ConfidenceTable(lm.model, lm.tokenizer, [1, 2], 4, False)
    first = table.get(["I met MASK.", "MASK won."], ["Anna Berg", "Tom Diaz"])
    again = table.get(["MASK won.", "I met MASK.", "Hi MASK!"], ["Tom Diaz", "Anna Berg"])
    assert len(seen) == len(set(seen)) == 6 == table.n_scored
    assert again[0, 0] == first[1, 1] and again[1, 1] == first[0, 0]


# ---------------------------------------------------------------- the task through the CLI

def run_task(out: Path, model: Path, *extra: str) -> dict:
    code = main(["evaluate", "--model", str(model), "--tasks", "ner_prompt_memorization", "--output-path", str(out),
                 "--log-samples", "--batch-size", "32", *extra])
    assert code == 0
    [path] = out.glob("*.json")
    return load_results(path).tasks[0].model_dump()


def metric(entry: dict, name: str, **tags: str) -> float:
    [value] = [x["value"] for x in entry["metrics"] if x["name"] == name and x["tags"] == tags]
    return value


def test_paper_layout_file_runs_every_strategy_and_analysis(tmp_path, tiny_ner, paper_file):
    entry = run_task(tmp_path / "out", tiny_ner, "--names", str(paper_file), "--prompts", str(paper_file))
    strategies = {x["tags"]["strategy"] for x in entry["metrics"] if "strategy" in x["tags"]}
    assert strategies == {"no_prompt", "one_prompt", "mix_prompt", "opt_best", "opt_worst", "pte_best",
                          "pte_worst", "ept_majority", "ept_mean", "ept_weighted", "ept_max", "ept_min"}
    assert entry["counts"]["typed_prompts"] == 12 and entry["counts"]["test_in"] == 6
    for x in entry["metrics"]:
        if x["name"] == "m_mem":
            assert 0.0 <= x["value"] <= 1.0
    groups = {(x["tags"].get("by"), x["tags"].get("group")) for x in entry["metrics"] if x["name"] == "m_mem"}
    assert {("prompt_type", t) for t in P.PROMPT_TYPES} <= groups
    # (a random tiny model ranks the prompts alike on test, so tau may be undefined here; the
    # reference control checks its value)
    assert {"kendall_tau", "kendall_p", "cochran_q", "cochran_p"} <= {x["name"] for x in entry["metrics"]}
    samples = [json.loads(line) for line in (tmp_path / "out" / entry["samples_file"]).read_text().splitlines()]
    assert len(samples) == 12 and len(entry["item_scores"]["test_m_mem_by_prompt"]) == 12
    # a BIO model: B-PER and I-PER are read, as in v2 (same text)
    assert entry["version"] == 5
    dev = np.array([s["dev_m_mem"] for s in samples])
    test = np.array([s["test_m_mem"] for s in samples])
    assert metric(entry, "prompts_at_ceiling", split="dev") == np.mean(dev == 1.0)
    assert metric(entry, "prompts_at_ceiling", split="test") == np.mean(test == 1.0)
    assert metric(entry, "prompt_m_mem_iqr", split="test") == pytest.approx(np.percentile(test, 75) - np.percentile(test, 25))
    assert entry["info"]["confidence"] == ("mean over the name's subword tokens of max(P(B-PER), P(I-PER)), "
                                           "softmax in float64; ties count 1/2")
    assert entry["info"]["labels"] == ["B-PER", "I-PER"] and entry["info"]["label_scheme"] == "BIO"
    best = max(samples, key=lambda s: s["dev_m_mem"])
    assert metric(entry, "m_mem", strategy="opt_best") == pytest.approx(best["test_m_mem"])
    for strategy in ("pte_best", "pte_worst"):
        steps = entry["info"]["pte"][strategy]["steps"]
        assert steps[0]["removed"] is None
        assert len(P.removable_tokens(steps[-1]["prompt"])) == 1
        assert all(len(P.removable_tokens(a["prompt"])) == len(P.removable_tokens(b["prompt"])) + 1
                   for a, b in zip(steps, steps[1:]))
        dev = [s["dev_m_mem"] for s in steps]
        chosen = max(dev) if strategy == "pte_best" else min(dev)
        assert dev[[s["prompt"] for s in steps].index(entry["info"]["pte"][strategy]["chosen"])] == chosen
    # the numbers follow from the records in the sidecar (`membench verify`), and an edited record shows
    [path] = (tmp_path / "out").glob("*.json")
    sidecar = path.parent / json.loads(path.read_text())["records_file"]
    assert sidecar.is_file() and entry["records_sha256"] and entry["report_version"] == 1
    verify_file(path)
    payload = sidecar_payload(path)
    records = payload["tasks"]["ner_prompt_memorization"]["records"]
    edited = copy.deepcopy(payload)
    [no_prompt] = [b for b in edited["tasks"]["ner_prompt_memorization"]["records"]["baselines"] if b["id"] == "no_prompt"]
    high = float(metric(entry, "m_mem", strategy="no_prompt") == 0)  # every pair reversed: M-MEM 0 (1 where it was 0)
    no_prompt["confidences"].update({**{n: high for n in records["names"]["test_in"]},
                                     **{n: 1 - high for n in records["names"]["test_out"]}})
    with pytest.raises(UserError, match=r"m_mem\{strategy=no_prompt\}.*do not follow from its records"):
        verify_file(copy_with_records(path, edited, tmp_path / "edited"))
    # records the scoring stage cannot have made fail with one line naming the record
    config, name = NerConfig.model_validate(entry["config"]), records["names"]["test_in"][0]
    start = records["pte_best"][0]
    for edit, needle in [
        (lambda r: r["prompts"].append(r["prompts"][0]), f"prompt {records['prompts'][0]['id']!r} appears twice"),
        (lambda r: r["prompts"][1]["confidences"].update({name: 1.5}), f"confidence of {name!r} is 1.5, out of its range"),
        (lambda r: r["mix_draws"][0].pop("confidence"), "Mix-PT draw .* confidence is None, not a number"),
        (lambda r: r["pte_best"][0]["confidences"].update({name: float(start["confidences"][name] == 0)}),
         "in pte_best step .*the task scores each \\(prompt, name\\) once"),
        (lambda r: r.update(scored_sentences=-1), "scored_sentences is -1"),
        (lambda r: r["facts"].update(label_scheme="BIOES"), "label_scheme is 'BIOES'"),
        (lambda r: r["names"].pop("dev_out"), "names needs exactly the lists"),
    ]:
        broken = copy.deepcopy(records)
        edit(broken)
        with pytest.raises(UserError, match=needle):
            NerPromptMemorization().report(broken, config, 0)
    # separate files: the same names and prompts give the same numbers
    names_file, prompts_file = tmp_path / "names.json", tmp_path / "prompts.json"
    layout = json.loads(paper_file.read_text())
    names_file.write_text(json.dumps({k: layout[k] for k in ("dev", "test")}))
    prompts_file.write_text(json.dumps({k: v for k, v in layout.items() if k.endswith("_prompt")}))
    again = run_task(tmp_path / "out2", tiny_ner, "--names", str(names_file), "--prompts", str(prompts_file))
    assert again["metrics"] == entry["metrics"]


def fake_scoring(monkeypatch, confidence) -> None:
    """Score every (prompt, name) as confidence(prompt, name) instead of running the model."""

    def scored(model, tokenizer, texts, spans, *args, **kwargs):
        return [np.array([[confidence(t[:a] + P.SLOT + t[b:], t[a:b])] * 2]) for t, (a, b) in zip(texts, spans)]

    monkeypatch.setattr(st, "span_label_probs", scored)


@pytest.mark.parametrize("swap", [False, True])
def test_opt_reports_prompts_tied_on_dev_and_cochrans_q_uses_zipped_pairs(tmp_path, tiny_ner, paper_file,
                                                                         monkeypatch, swap):
    layout = json.loads(paper_file.read_text())
    decl = layout["declarative_prompt"]  # 3 prompts; the other 9 typed prompts score 0.5 for every name
    first, second, worst = decl
    if swap:  # the same two tied prompts in the other file order
        layout["declarative_prompt"] = [second, first, worst]
    path = tmp_path / "paper.json"
    path.write_text(json.dumps(layout))
    dev_in, dev_out = set(layout["dev"]["in_train"]), set(layout["dev"]["out_train"])
    test_in = set(layout["test"]["in_train"])

    def confidence(prompt: str, name: str) -> float:
        if prompt in (first, second) and name in dev_in | dev_out:  # both: dev M-MEM 1
            return 0.9 if name in dev_in else 0.1
        if prompt == first:  # test M-MEM 1
            return 0.9 if name in test_in else 0.1
        if prompt == worst and name in dev_in | dev_out:  # dev M-MEM 0
            return 0.1 if name in dev_in else 0.9
        return 0.5  # second prompt on test, and everything else: M-MEM 1/2

    fake_scoring(monkeypatch, confidence)
    entry = run_task(tmp_path / "out", tiny_ner, "--names", str(path), "--prompts", str(path))
    # the headline is the first tied prompt in file order; the tie and its test range are reported
    assert metric(entry, "m_mem", strategy="opt_best") == (0.5 if swap else 1.0)
    assert metric(entry, "tied_prompts", strategy="opt_best") == 2
    assert metric(entry, "tied_m_mem_min", strategy="opt_best") == 0.5
    assert metric(entry, "tied_m_mem_max", strategy="opt_best") == 1.0
    best = entry["info"]["opt"]["best"]
    assert best["text"] == (second if swap else first) and best["tied_test_m_mem"] == [0.5, 1.0]
    assert len(best["tied_prompt_ids"]) == 2
    assert metric(entry, "tied_prompts", strategy="opt_worst") == 1
    assert metric(entry, "m_mem", strategy="opt_worst") == metric(entry, "tied_m_mem_min", strategy="opt_worst") \
        == metric(entry, "tied_m_mem_max", strategy="opt_worst") == 0.5
    # Cochran's Q: 6 zipped test pairs succeed under the first prompt only (12 prompts): C = (6, 0, ...),
    # T = 6, every R_i = 1, so Q = 11 (12 * 36 - 36) / (72 - 6) = 66. (All 36 pairs as blocks would give 396.)
    [q] = [x for x in entry["metrics"] if x["name"] == "cochran_q"]
    assert q["n"] == 6 and q["value"] == pytest.approx(66.0)
    assert metric(entry, "cochran_p", by="prompt") == pytest.approx(chi2.sf(66.0, 11))


@pytest.mark.parametrize("change, needle", [
    (lambda d: d.pop("dev"), "expected a 'dev' object"),
    (lambda d: d["test"].update(out_train=[]), "test.out_train must be a non-empty list"),
    (lambda d: d["dev"]["out_train"].append(d["dev"]["in_train"][0]), "both in-train and out-train"),
    (lambda d: d.update(declarative_prompt=["No slot at all."]), "exactly once"),
    (lambda d: d.update(mix_prompt="MASK"), None),
])
def test_bad_name_and_prompt_files_are_one_line_errors(capsys, tmp_path, tiny_ner, paper_file, change, needle):
    layout = json.loads(paper_file.read_text())
    change(layout)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(layout))
    out = tmp_path / "out"
    argv = ["evaluate", "--model", str(tiny_ner), "--tasks", "ner_prompt_memorization", "--names", str(bad),
            "--prompts", str(bad), "--output-path", str(out)]
    if needle is None:  # a single string where a list is expected is read as a one-item list
        assert main(argv) == 0
        return
    assert_user_error(capsys, argv, out, needle)


def test_a_model_without_person_labels_is_a_clear_error(capsys, tmp_path, paper_file):
    model = save_tiny_ner(tmp_path / "loc-only", labels=("O", "B-LOC", "I-LOC"))
    out = tmp_path / "out"
    assert_user_error(capsys, ["evaluate", "--model", str(model), "--tasks", "ner_prompt_memorization",
                               "--names", str(paper_file), "--output-path", str(out)], out,
                      "needs PER labels in the model's id2label", "B-PER and I-PER", "has: O, B-LOC, I-LOC")
    assert_user_error(capsys, ["evaluate", "--model", str(model), "--tasks", "ner_prompt_memorization",
                               "--names", str(tmp_path / "missing.json"), "--output-path", str(out)], out,
                      "name file not found")


def test_loc_names_are_scored_with_the_loc_labels(tmp_path, tiny_ner, paper_file, monkeypatch):
    loc_file = tmp_path / "loc_names.json"  # the paper's file name says LOC
    loc_file.write_text(paper_file.read_text())
    seen: list[list[int]] = []
    original = st.span_label_probs

    def recording(model, tokenizer, texts, spans, labels, *args, **kwargs):
        seen.append(list(labels))
        return original(model, tokenizer, texts, spans, labels, *args, **kwargs)

    monkeypatch.setattr(st, "span_label_probs", recording)
    entry = run_task(tmp_path / "out", tiny_ner, "--names", str(loc_file), "--prompts", str(loc_file),
                     "--entity-type", "LOC")
    assert entry["config"]["entity_type"] == "LOC"
    assert {tuple(x) for x in seen} == {(ner_data.LABELS.index("B-LOC"), ner_data.LABELS.index("I-LOC"))}
    assert "max(P(B-LOC), P(I-LOC))" in entry["info"]["confidence"]
    assert entry["info"]["labels"] == ["B-LOC", "I-LOC"] and entry["info"]["label_scheme"] == "BIO"


@pytest.mark.parametrize("file_name, declared, flags, needles", [
    ("loc_names.json", None, [], ["holds LOC names (its file name says so)", "--entity-type LOC"]),
    ("names.json", "ORG", ["--entity-type", "LOC"], ["holds ORG names (its \"entity_type\" says so)"]),
    ("names.json", "city", [], ["cannot tell the entity type", "'city'"]),
    ("loc_names.json", "ORG", ["--entity-type", "ORG"], ["file name says LOC but its \"entity_type\" says ORG"]),
    ("names.json", None, ["--entity-type", "loc"], ["--entity-type", "'LOC'"]),
])
def test_a_names_file_of_another_entity_type_is_a_one_line_error(capsys, tmp_path, tiny_ner, paper_file, file_name,
                                                                 declared, flags, needles):
    layout = json.loads(paper_file.read_text())
    if declared is not None:
        layout["entity_type"] = declared
    path = tmp_path / file_name
    path.write_text(json.dumps(layout))
    out = tmp_path / "out"
    assert_user_error(capsys, ["evaluate", "--model", str(tiny_ner), "--tasks", "ner_prompt_memorization",
                               "--names", str(path), "--prompts", str(paper_file), "--output-path", str(out), *flags],
                      out, *needles)


def test_other_entity_types_need_their_own_names_prompts_and_labels(capsys, tmp_path, tiny_ner, paper_file):
    out = tmp_path / "out"
    base = ["evaluate", "--model", str(tiny_ner), "--tasks", "ner_prompt_memorization", "--output-path", str(out)]
    assert_user_error(capsys, [*base, "--entity-type", "ORG"], out, "--names reference holds person names")
    assert_user_error(capsys, [*base, "--entity-type", "ORG", "--names", str(paper_file)], out,
                      "the built-in prompts are written for person names")
    layout = json.loads(paper_file.read_text())
    no_baselines = tmp_path / "org_prompts.json"
    no_baselines.write_text(json.dumps({k: v for k, v in layout.items() if k.endswith("_prompt") and "mix" not in k}))
    assert_user_error(capsys, [*base, "--entity-type", "ORG", "--names", str(paper_file), "--prompts",
                               str(no_baselines)], out, "lacks 'mix_prompt'")
    per_only = save_tiny_ner(tmp_path / "per-only", labels=("O", "B-PER", "I-PER"))
    assert_user_error(capsys, ["evaluate", "--model", str(per_only), "--tasks", "ner_prompt_memorization",
                               "--entity-type", "ORG", "--names", str(paper_file), "--prompts", str(paper_file),
                               "--output-path", str(out)], out, "needs ORG labels", "B-ORG and I-ORG",
                      "has: O, B-PER, I-PER")


def test_repeated_names_are_scored_once_and_reported(tmp_path, tiny_ner, paper_file, caplog):
    layout = json.loads(paper_file.read_text())
    repeated = layout["dev"]["in_train"][1]
    layout["dev"]["in_train"] += [repeated, " " + repeated.replace(" ", "  ")]  # the same name after normalizing
    path = tmp_path / "names.json"
    path.write_text(json.dumps(layout))
    with caplog.at_level("WARNING"):
        entry = run_task(tmp_path / "out", tiny_ner, "--names", str(path), "--prompts", str(paper_file))
    assert entry["counts"]["dev_in"] == 6 and entry["counts"]["duplicate_names"] == 2
    assert entry["info"]["duplicate_names"] == {"dev.in_train": {repeated: 3}}
    assert any("2 repeated names" in r.getMessage() and repr(repeated) in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------- label schemes

@pytest.mark.parametrize("labels, entity_type, names, scheme", [
    (("O", "PER", "LOC"), "PER", ["PER"], "IO"),
    (ner_data.LABELS, "PER", ["B-PER", "I-PER"], "BIO"),
    (("O", "B-PERSON", "I-PERSON", "B-GPE", "I-GPE"), "PER", ["B-PERSON", "I-PERSON"], "BIO"),  # OntoNotes
    (("O", "S-PER", "E-PER", "I-PER", "B-PER", "S-LOC"), "PER", ["B-PER", "I-PER", "E-PER", "S-PER"], "IOBES"),
    (("O", "u_loc", "b_loc", "i_loc", "l_loc", "U-PER"), "LOC", ["b_loc", "i_loc", "l_loc", "u_loc"], "BILOU"),
    (("O", "B-ORGANIZATION", "I-ORGANIZATION", "B-ORGANIZATIONS"), "ORG", ["B-ORGANIZATION", "I-ORGANIZATION"],
     "BIO"),
    (("O", "MISC", "PER"), "MISC", ["MISC"], "IO"),
])
def test_the_labels_of_an_entity_type_and_their_scheme(labels, entity_type, names, scheme):
    found = entity_label_set(dict(enumerate(labels)), entity_type)
    assert found.names == names and found.scheme == scheme
    assert found.ids == [labels.index(name) for name in names]


@pytest.mark.parametrize("labels, needles", [
    (("O", "B-PER", "I-PER", "B-PERSON", "I-PERSON"), ["marks PER under 2 names", "PER: B-PER, I-PER",
                                                       "PERSON: B-PERSON, I-PERSON"]),
    (("O", "B-PER", "I-PER", "B-PER"), ["the same label under several ids", "B-PER, B-PER (ids 1, 3)"]),
    (("O", "B-PER", "i_per", "I-PER"), ["the same label under several ids", "i_per, I-PER (ids 2, 3)"]),
    (("O", "PER", "B-PER", "I-PER"), ["both bare and with a prefix", "PER, B-PER, I-PER"]),
    (("O", "B-PER", "S-PER", "U-PER"), ["mixes IOBES (E-, S-) and BILOU (L-, U-)", "B-PER, S-PER, U-PER"]),
])
def test_ambiguous_label_sets_are_one_line_errors_naming_the_labels(capsys, tmp_path, paper_file, labels, needles):
    model = save_tiny_ner(tmp_path / "ambiguous", labels=labels)
    out = tmp_path / "out"
    assert_user_error(capsys, ["evaluate", "--model", str(model), "--tasks", "ner_prompt_memorization",
                               "--names", str(paper_file), "--prompts", str(paper_file), "--output-path", str(out)],
                      out, "ner_prompt_memorization --entity-type PER", *needles)


def test_bio_confidences_are_the_max_of_b_and_i_as_in_v2(tiny_ner):
    """The BIO path reads B-PER and I-PER only: the confidence is, bit for bit, the mean over the
    name's tokens of max(P(B-PER), P(I-PER)) (v2's rule), also against one unbatched forward pass."""
    lm = load(ModelSpec(str(tiny_ner)))
    b, i = ner_data.LABELS.index("B-PER"), ner_data.LABELS.index("I-PER")
    labels = entity_labels(lm, "PER")
    assert labels.ids == [b, i] and labels.scheme == "BIO"
    prompts, names = ["I met MASK .", "MASK won the race ."], ["Anna Berg", "Tom Diaz", "Lee Park", "Oslo"]
    conf = st.ConfidenceTable(lm.model, lm.tokenizer, labels.ids, 3, False).get(prompts, names)
    filled = [P.fill(prompt, name) for prompt in prompts for name in names]
    probs = span_label_probs(lm.model, lm.tokenizer, [t for t, _ in filled], [span for _, span in filled], [b, i],
                             batch_size=3)
    assert conf.ravel().tolist() == [float(np.maximum(p[:, 0], p[:, 1]).mean()) for p in probs]
    for (text, (start, end)), value in zip(filled, conf.ravel()):
        encoded = lm.tokenizer(text, return_offsets_mapping=True)
        with torch.no_grad():
            logits = lm.model(input_ids=torch.tensor([encoded["input_ids"]])).logits[0].double()
        inside = [k for k, (s, e) in enumerate(encoded["offset_mapping"]) if e > s and s < end and e > start]
        p = torch.softmax(logits, -1)[inside]
        assert value == pytest.approx(float(torch.maximum(p[:, b], p[:, i]).mean()), abs=1e-6)


@pytest.mark.parametrize("labels, tag", [
    (("O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"), "S-PER"),
    (("O", "B-PER", "I-PER", "L-PER", "U-PER"), "U-PER"),
    (("O", "PER", "LOC"), "PER"),
])
def test_a_confident_single_token_person_tagger_gets_confidence_near_one(tmp_path, labels, tag):
    """The head is set so that every token is `tag` (S-PER, U-PER, PER) with P = 1 - (k-1) e^-30: a
    single-token name is a person beyond doubt. v2 read B-PER and I-PER only (P ~ e^-30 each)."""
    lm = load(ModelSpec(str(save_tiny_ner(tmp_path / "tagger", labels=labels))))
    with torch.no_grad():
        lm.model.classifier.weight.zero_()
        lm.model.classifier.bias.zero_()
        lm.model.classifier.bias[labels.index(tag)] = 30.0
    names = ["Tom", "Anna", "Lee", "Oslo"]
    probs = span_label_probs(lm.model, lm.tokenizer, [f"I met {n} ." for n in names],
                             [(6, 6 + len(n)) for n in names], [labels.index(tag)])
    assert all(p.shape == (1, 1) for p in probs)  # one token each
    found = entity_labels(lm, "PER")
    assert tag in found.names
    conf = st.ConfidenceTable(lm.model, lm.tokenizer, found.ids, 4, False).get(["I met MASK ."], names)[0]
    assert np.all(conf > 1 - 1e-12)
    if "B-PER" in labels:
        old = [labels.index("B-PER"), labels.index("I-PER")]
        assert np.all(st.ConfidenceTable(lm.model, lm.tokenizer, old, 4, False).get(["I met MASK ."], names) < 1e-12)


def test_an_iobes_model_runs_and_records_its_labels(tmp_path, paper_file):
    model = save_tiny_ner(tmp_path / "iobes", labels=("O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "S-LOC"))
    entry = run_task(tmp_path / "out", model, "--names", str(paper_file), "--prompts", str(paper_file))
    assert entry["info"]["labels"] == ["B-PER", "I-PER", "E-PER", "S-PER"]
    assert entry["info"]["label_scheme"] == "IOBES"
    assert "max(P(B-PER), P(I-PER), P(E-PER), P(S-PER))" in entry["info"]["confidence"]


# ---------------------------------------------------------------- reference controls

@pytest.fixture(scope="session")
def control_prompts(tmp_path_factory) -> Path:
    """Every 11th built-in prompt (10 per type), in the paper's layout."""
    typed = P.builtin_prompts().typed[::11]
    path = tmp_path_factory.mktemp("prompts") / "prompts.json"
    path.write_text(json.dumps({f"{t}_prompt": [p.text for p in typed if p.type == t] for t in P.PROMPT_TYPES}))
    return path


def test_reference_ner_model_memorizes_its_names_and_the_untrained_one_does_not(tmp_path, reference_ner,
                                                                             control_prompts):
    trained = run_task(tmp_path / "trained", reference_ner[max(reference_ner)], "--prompts", str(control_prompts),
                       "--limit", "50")
    untrained = run_task(tmp_path / "untrained", reference_ner[0], "--prompts", str(control_prompts),
                         "--limit", "50")
    assert trained["counts"]["test_in"] == 50
    assert metric(trained, "m_mem", strategy="opt_best") >= 0.6
    assert metric(trained, "m_mem", strategy="ept_mean") >= 0.6
    # the untrained model's best dev prompt is the best of 40 noisy prompts on 50 names a side (standard
    # error about 0.06 per prompt): measured 0.609 on test; the mean over prompts is the tighter check
    assert abs(metric(untrained, "m_mem", strategy="opt_best") - 0.5) < 0.15
    assert abs(metric(untrained, "m_mem", strategy="ept_mean") - 0.5) < 0.1
    # the trained model's prompt ranking carries over from dev to test
    assert metric(trained, "kendall_tau", by="dev_vs_test") > 0.3
    # No ceiling (issue 18): the former build put most prompts at or near M-MEM 1.0. On this subset
    # (40 prompts, 50 names a side) the current build measured: no prompt at dev 1.0, best prompt
    # test 0.959, per-prompt test IQR 0.313 (0.519 to 0.832).
    assert metric(trained, "prompts_at_ceiling", split="dev") < 0.05
    assert 0.8 <= metric(trained, "m_mem", strategy="opt_best") <= 0.99
    assert metric(trained, "prompt_m_mem_iqr", split="test") >= 0.15
    samples = [json.loads(line) for line in (tmp_path / "trained" / trained["samples_file"]).read_text().splitlines()]
    test = np.array([s["test_m_mem"] for s in samples])
    assert metric(trained, "prompt_m_mem_iqr", split="test") == pytest.approx(np.subtract(*np.percentile(test, [75, 25])))
    assert metric(trained, "prompts_at_ceiling", split="dev") == np.mean([s["dev_m_mem"] == 1.0 for s in samples])
    # Against out-train names made of the trained names' own words (the paper preset's) the trained model is
    # near chance: it learned which words are names, not its names (bench_ner_names: 0.5445 on all prompts)
    shared = run_task(tmp_path / "shared", reference_ner[max(reference_ner)], "--prompts", str(control_prompts),
                      "--limit", "50", "--preset", "paper")
    assert shared["config"]["names"] == "reference:shared" and {"names", "preset"} <= set(shared["changed_settings"])
    assert abs(metric(shared, "m_mem", strategy="ept_mean") - 0.5) < 0.1
    assert metric(trained, "m_mem", strategy="opt_best") - metric(shared, "m_mem", strategy="opt_best") > 0.25


def test_reference_names_are_disjoint_and_of_one_shape():
    names = ner_data.reference_names()
    words_in = {w for n in names.in_train for w in n.split()}
    words_out = {w for n in names.out_train for w in n.split()}
    assert not words_in & words_out
    assert not {w for n in names.background for w in n.split()} & (words_in | words_out)
    assert all(len(n.split()) == 2 for n in names.in_train + names.out_train)
    assert len(names.dev_in) == len(names.test_out) == 100
    trained_words = {w for s in ner_data.training_sentences(names, 3, 0) for w, _ in s}
    assert words_in <= trained_words and not words_out & trained_words


def test_shared_names_recombine_the_in_train_words_into_names_never_trained_on():
    build = NerBuildConfig()
    names = build.names()
    shared = names.shared_words()
    assert (shared.dev_in, shared.test_in, shared.background) == (names.dev_in, names.test_in, names.background)
    trained = " | ".join(" ".join(w for w, _ in s) for s in ner_data.training_sentences(
        names, build.mentions_per_name, build.seed))
    for ins, outs in ((shared.dev_in, shared.dev_out), (shared.test_in, shared.test_out)):
        assert len(set(outs)) == len(outs) == len(ins)
        # every word of the split's in-train names, as often on both sides, in new pairs only
        for position in (0, 1):
            assert sorted(n.split()[position] for n in outs) == sorted(n.split()[position] for n in ins)
        assert not set(outs) & (set(names.in_train) | set(names.background))
        assert not any(name in trained for name in outs) and all(name in trained for name in ins)
    assert shared.dev_out[0] == f"{names.dev_in[0].split()[0]} {names.dev_in[1].split()[1]}"


def test_the_paper_preset_takes_the_papers_settings_unless_given_and_is_a_changed_setting(capsys, tmp_path, tiny_lm):
    from harness.run.runner import EvaluateOptions, changed_settings, config_hash
    from tasks.ner_prompt_memorization.task import NerConfig

    paper = NerConfig(preset="paper")
    assert paper.names == NerConfig.PAPER["names"] == ner_data.SHARED_NAMES
    assert changed_settings(paper) == ["names", "preset"]
    assert NerConfig(preset="paper", names="reference").names == "reference"  # given explicitly: it wins
    assert changed_settings(NerConfig()) == [] and NerConfig().names == "reference"
    assert config_hash(paper, EvaluateOptions(), "float32") != config_hash(NerConfig(), EvaluateOptions(), "float32")
    # a task without a paper mode has no --preset: one line, naming the flag
    assert_user_error(capsys, ["evaluate", "--model", str(tiny_lm), "--tasks", "stereoset", "--preset", "paper",
                               "--output-path", str(tmp_path)], tmp_path, "--preset")


def test_a_named_task_skipped_for_the_model_kind_is_a_warning(capsys, tmp_path, tiny_lm):
    code = main(["evaluate", "--model", str(tiny_lm), "--tasks", "ner_prompt_memorization",
                 "--output-path", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0
    assert "membench: warning: ner_prompt_memorization skipped: ner_prompt_memorization scores token-classifier" \
        in captured.err


def test_the_board_compares_models_prompt_rankings_with_kendalls_tau():
    from harness.core.results import TaskEntry
    from leaderboard.collect import BoardEntry
    from leaderboard.render import agreement_table

    def entry(scores: dict) -> TaskEntry:
        return TaskEntry(name="ner_prompt_memorization", version=1, status="ok", config={}, config_hash="x",
                         seed=0, item_scores={"test_m_mem_by_prompt": scores})

    board = [BoardEntry("a", "aaaaaaaa", "token-classifier", entry({"p1": 0.1, "p2": 0.2, "p3": 0.3}), 1),
             BoardEntry("b", "bbbbbbbb", "token-classifier", entry({"p1": 0.3, "p2": 0.2, "p3": 0.1, "p4": 0.5}), 1),
             BoardEntry("c", "cccccccc", "token-classifier", entry({"p1": 0.5, "p2": 0.6, "p3": 0.9}), 1)]
    table = agreement_table("ner_prompt_memorization", board)
    rows = [line for line in table.splitlines() if line.startswith("| test")]
    assert len(rows) == 3
    assert "| a (aaaaaaaa) | b (bbbbbbbb) | 3 | -1.000 |" in " ".join(" ".join(r.split()) for r in rows)
    assert "| a (aaaaaaaa) | c (cccccccc) | 3 | 1.000 |" in " ".join(" ".join(r.split()) for r in rows)
    assert agreement_table("ner_prompt_memorization", board[:1]) is None


@pytest.mark.parametrize("kind", ["wordpiece", "byte-level"])
def test_the_name_span_selects_exactly_the_names_tokens(kind):
    from harness.reference import train
    from harness.scoring.spans import span_token_indices as _span_token_indices

    tokenizer = (train_wordpiece_tokenizer(TINY_SENTENCES, vocab_size=200) if kind == "wordpiece"
                 else train.train_tokenizer(TINY_SENTENCES, vocab_size=300))
    for prompt in ("I met MASK today.", "MASK won.", "Say hi to MASK!"):
        sentence, (start, end) = P.fill(prompt, "Anna Berg")
        encoding = tokenizer.backend_tokenizer.encode(sentence)
        [chosen] = _span_token_indices(encoding.offsets, encoding.special_tokens_mask, [(start, end)])
        assert tokenizer.decode([encoding.ids[i] for i in chosen]).strip() == "Anna Berg"
