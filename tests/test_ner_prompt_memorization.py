"""ner_prompt_memorization: M-MEM from ranks, the strategies, the file layouts, the controls."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from statsmodels.stats.contingency_tables import cochrans_q as statsmodels_cochrans_q
from transformers import BertConfig, BertForTokenClassification

from harness import metrics as m
from harness.cli import main
from harness.models import ModelSpec, load
from harness.reference import ner_data
from harness.reference.build import read_manifest
from harness.reference.ner_build import NerBuildConfig, build_ner, train_tokenizer, untrained_model
from harness.results import load_results
from harness.token_classes import span_label_probs
from tasks.ner_prompt_memorization import prompts as P
from tasks.ner_prompt_memorization import strategies as st
from tests.conftest import assert_user_error

TINY_SENTENCES = ["Anna Berg met Tom Diaz in Oslo .", "The bank said profits rose .", "Have you seen Lee Park ?"] * 4


def save_tiny_ner(folder: Path, labels: tuple[str, ...] = ner_data.LABELS) -> Path:
    """A 1-layer BERT token classifier with random weights and the given labels."""
    tokenizer = train_tokenizer(TINY_SENTENCES, vocab_size=200)
    config = NerBuildConfig(hidden_size=32, n_layer=1, n_head=2, intermediate_size=64, max_positions=64)
    model = untrained_model(len(tokenizer), config)
    if labels != ner_data.LABELS:
        id2label = dict(enumerate(labels))
        model = BertForTokenClassification(BertConfig(**{**model.config.to_dict(), "id2label": id2label,
                                                         "label2id": {v: k for k, v in id2label.items()}}))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_ner(tmp_path_factory) -> Path:
    return save_tiny_ner(tmp_path_factory.mktemp("tiny-ner") / "tiny-ner")


@pytest.fixture(scope="session")
def reference_ner(membench_cache) -> dict[int, Path]:
    folder = build_ner()
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
    assert [st.length_bin(n, (5, 10, 15)) for n in (1, 5, 6, 15, 16, 40)] == ["1-5", "1-5", "6-10", "11-15",
                                                                              "16+", "16+"]


# ---------------------------------------------------------------- scoring

def test_span_label_probs_match_a_single_sentence_forward_and_ignore_the_batch(tiny_ner):
    lm = load(ModelSpec(str(tiny_ner)))
    texts = ["Anna Berg met Tom .", "I saw Lee Park today in the city of Oslo .", "Tom"]
    spans = [(0, 9), (6, 14), (0, 3)]
    one = span_label_probs(lm.model, lm.tokenizer, texts, spans, [1, 2], batch_size=1)
    many = span_label_probs(lm.model, lm.tokenizer, texts, spans, [1, 2], batch_size=3)
    for a, b in zip(one, many):
        np.testing.assert_allclose(a, b, atol=1e-6)
    encoded = lm.tokenizer(texts[1], return_offsets_mapping=True)
    with torch.no_grad():
        probs = torch.softmax(lm.model(input_ids=torch.tensor([encoded["input_ids"]])).logits[0], -1)
    inside = [i for i, (s, e) in enumerate(encoded["offset_mapping"]) if e > s and s < 14 and e > 6]
    np.testing.assert_allclose(one[1], probs[inside][:, [1, 2]].numpy(), atol=1e-6)


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
    # separate files: the same names and prompts give the same numbers
    names_file, prompts_file = tmp_path / "names.json", tmp_path / "prompts.json"
    layout = json.loads(paper_file.read_text())
    names_file.write_text(json.dumps({k: layout[k] for k in ("dev", "test")}))
    prompts_file.write_text(json.dumps({k: v for k, v in layout.items() if k.endswith("_prompt")}))
    again = run_task(tmp_path / "out2", tiny_ner, "--names", str(names_file), "--prompts", str(prompts_file))
    assert again["metrics"] == entry["metrics"]


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
                      "needs B-PER and I-PER labels", "B-LOC")
    assert_user_error(capsys, ["evaluate", "--model", str(model), "--tasks", "ner_prompt_memorization",
                               "--names", str(tmp_path / "missing.json"), "--output-path", str(out)], out,
                      "name file not found")


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
    assert abs(metric(untrained, "m_mem", strategy="opt_best") - 0.5) < 0.1
    assert abs(metric(untrained, "m_mem", strategy="ept_mean") - 0.5) < 0.1
    # the trained model's prompt ranking carries over from dev to test
    assert metric(trained, "kendall_tau", by="dev_vs_test") > 0.3


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


def test_a_named_task_skipped_for_the_model_kind_is_a_warning(capsys, tmp_path, tiny_lm):
    code = main(["evaluate", "--model", str(tiny_lm), "--tasks", "ner_prompt_memorization",
                 "--output-path", str(tmp_path)])
    captured = capsys.readouterr()
    assert code == 0
    assert "membench: warning: ner_prompt_memorization skipped: ner_prompt_memorization scores token-classifier" \
        in captured.err


def test_the_board_compares_models_prompt_rankings_with_kendalls_tau():
    from harness.results import TaskEntry
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
    from harness.spans import span_token_indices as _span_token_indices

    tokenizer = (train_tokenizer(TINY_SENTENCES, vocab_size=200) if kind == "wordpiece"
                 else train.train_tokenizer(TINY_SENTENCES, vocab_size=300))
    for prompt in ("I met MASK today.", "MASK won.", "Say hi to MASK!"):
        sentence, (start, end) = P.fill(prompt, "Anna Berg")
        encoding = tokenizer.backend_tokenizer.encode(sentence)
        chosen = _span_token_indices(encoding.offsets, encoding.special_tokens_mask, start, end)
        assert tokenizer.decode([encoding.ids[i] for i in chosen]).strip() == "Anna Berg"
