"""probe_memorization: seen/unseen word sets, micro-averaging, control labels, CoNLL(-U) reading,
one-line errors through the CLI, the MiniLM + UD English EWT control, and an end-to-end run."""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import assert_user_error

from harness.app.cli import main
from harness.app.verify import verify_file
from harness.core.errors import UserError
from harness.core.results import load_results
from harness.core.task import RunContext
from harness.model.loading import ModelSpec, load
from harness.reference.pretrained import minilm_folder
from tasks.probe_memorization import method, probes
from tasks.probe_memorization.data import (
    ProbeData,
    Sentence,
    load_conll_sample,
    parse_conll,
    parse_conllu,
    split_sample,
)
from tasks.probe_memorization.probes import Fit, run_fits
from tasks.probe_memorization.task import ProbeMemorization, ProbeMemorizationConfig
from tests.helpers.records import copy_with_records, sidecar_payload

TASK = "probe_memorization"
EWT = Path(__file__).resolve().parents[3] / "shared" / "data" / "ud_english_ewt"


def sentence(text: str, tags: str | None = None) -> Sentence:
    words = tuple(text.split())
    return Sentence(words, tuple(tags.split()) if tags else tuple("X" for _ in words))


# ---------------------------------------------------------------- the method, by hand


def test_seen_and_unseen_word_sets_on_a_toy_split():
    seen_half = [sentence("the cat sat"), sentence("a dog ran")]
    unseen_half = [sentence("the dog slept"), sentence("one bird flew")]
    held_out = [sentence("the cat saw one bird"), sentence("a fish sat")]
    vocabulary: dict[str, int] = {}
    ids = [np.array([vocabulary.setdefault(w, len(vocabulary)) for w in s.words])
           for s in seen_half + unseen_half + held_out]
    seen, unseen = method.seen_unseen_types(np.concatenate(ids[:2]), np.concatenate(ids[2:4]), len(vocabulary))
    names = list(vocabulary)
    assert {names[i] for i in np.flatnonzero(seen)} == {"cat", "sat", "a", "ran"}
    assert {names[i] for i in np.flatnonzero(unseen)} == {"slept", "one", "bird", "flew"}
    # "the" and "dog" are in both halves, "saw" and "fish" in neither: ignored
    eval_ids = np.concatenate(ids[4:])
    assert seen[eval_ids].tolist() == [False, True, False, False, False, True, False, True]
    assert unseen[eval_ids].tolist() == [False, False, False, True, True, False, False, False]
    # a tuning set's words (Rosa et al.'s footnote 2) are neither, whichever half holds them
    tuning = np.array([vocabulary["cat"], vocabulary["bird"], vocabulary["dog"]])
    seen, unseen = method.seen_unseen_types(np.concatenate(ids[:2]), np.concatenate(ids[2:4]), len(vocabulary), tuning)
    assert {names[i] for i in np.flatnonzero(seen)} == {"sat", "a", "ran"}
    assert {names[i] for i in np.flatnonzero(unseen)} == {"slept", "one", "flew"}


def test_sentence_tokens_and_splits():
    offsets = np.array([0, 3, 5, 9])
    assert method.sentence_tokens(offsets, np.array([2, 0])).tolist() == [5, 6, 7, 8, 0, 1, 2]
    split = method.draw_split(11, 7, seed=0, repetition=0)
    assert len(split.seen) == len(split.unseen) == 3
    assert not set(split.seen) & set(split.unseen)
    again = method.draw_split(11, 7, seed=0, repetition=0)
    assert split.seen.tolist() == again.seen.tolist() and split.unseen.tolist() == again.unseen.tolist()
    others = {tuple(method.draw_split(11, 7, seed=0, repetition=r).seen) for r in range(10)}
    assert len(others) > 1


def test_micro_averaging_and_standard_deviations():
    tally = method.Tally()
    # repetition 1: 6 eval tokens; seen = tokens 0-3 (3 correct), unseen = tokens 4-5 (1 correct)
    tally.add(np.array([1, 1, 1, 0, 1, 0], bool), np.array([1, 1, 1, 1, 0, 0], bool),
              np.array([0, 0, 0, 0, 1, 1], bool), np.array([1, 0, 0, 0, 0, 0], bool))
    # repetition 2: seen = token 0 (correct), unseen = tokens 1-3 (none correct)
    tally.add(np.array([1, 0, 0, 0, 1, 1], bool), np.array([1, 0, 0, 0, 0, 0], bool),
              np.array([0, 1, 1, 1, 0, 0], bool), np.array([1, 1, 1, 0, 0, 0], bool))
    s = method.summarize(tally)
    assert s.seen == pytest.approx(4 / 5)  # micro: (3 + 1) / (4 + 1); the macro mean would be 0.875
    assert s.unseen == pytest.approx(1 / 5)  # (1 + 0) / (2 + 3)
    assert s.effect == pytest.approx(0.6)
    assert s.effect_std == pytest.approx(np.std([0.75 - 0.5, 1.0 - 0.0], ddof=1))
    assert s.seen_std == pytest.approx(np.std([0.75, 1.0], ddof=1))
    assert s.accuracy == pytest.approx(7 / 12)
    assert s.control == pytest.approx(4 / 12)
    assert s.selectivity == pytest.approx(3 / 12)
    assert s.selectivity_std == pytest.approx(np.std([4 / 6 - 1 / 6, 3 / 6 - 3 / 6], ddof=1))
    assert s.accuracy_std == pytest.approx(abs(4 / 6 - 3 / 6) / np.sqrt(2))  # two values: |a - b| / sqrt(2)
    assert s.control_std == pytest.approx(abs(1 / 6 - 3 / 6) / np.sqrt(2))
    assert (s.n_seen, s.n_unseen, s.n_eval, s.repetitions) == (5, 5, 12, 2)


def test_one_repetition_or_no_tokens_leaves_undefined_values_empty():
    tally = method.Tally()
    tally.add(np.array([1, 0], bool), np.array([0, 0], bool), np.array([1, 1], bool), None)
    s = method.summarize(tally)
    assert s.seen is None and s.effect is None and s.effect_std is None and s.accuracy_std is None
    assert s.unseen == 0.5 and s.control is None and s.selectivity is None


def test_control_labels_are_fixed_per_type_and_follow_the_tag_distribution():
    pool_tags = np.array([0] * 50 + [1] * 30 + [2] * 20 + [3] * 0)  # tag 3 occurs only outside the pool
    labels = method.control_labels(pool_tags, n_types=20000, n_tags=4, seed=7)
    assert labels.shape == (20000,)
    share = np.bincount(labels, minlength=4) / len(labels)
    assert share == pytest.approx([0.5, 0.3, 0.2, 0.0], abs=0.015)
    assert np.array_equal(labels, method.control_labels(pool_tags, 20000, 4, seed=7))
    assert not np.array_equal(labels, method.control_labels(pool_tags, 20000, 4, seed=8))
    # per token, the label is its type's: every token of a type gets the same one
    types = np.array([5, 9, 5, 5, 9, 1])
    per_token = labels[types]
    assert per_token[0] == per_token[2] == per_token[3] and per_token[1] == per_token[4]


# ---------------------------------------------------------------- reading data

CONLLU = """# sent_id = 1
# text = I don't know.
1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_
4.1\tknows\t_\t_\t_\t_\t_\t_\t_\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# sent_id = 2
1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t_\t_
"""


def test_conllu_skips_multiword_tokens_and_empty_nodes():
    sentences = parse_conllu(CONLLU, "x.conllu")
    assert sentences == [Sentence(("I", "do", "n't", "know", "."), ("PRON", "AUX", "PART", "VERB", "PUNCT")),
                         Sentence(("Yes",), ("INTJ",))]


def test_conll2003_reading_and_the_sample_split():
    text = "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n"
    assert parse_conll(text, "x.conll") == [Sentence(("EU", "rejects"), ("NNP", "VBZ")),
                                             Sentence(("Peter",), ("NNP",))]
    pool, held_out = split_sample([sentence(str(i)) for i in range(8)])
    assert [s.words[0] for s in held_out] == ["2", "5"]
    assert [s.words[0] for s in pool] == ["0", "1", "3", "4", "6", "7"]
    data = load_conll_sample()
    assert (len(data.pool), len(data.eval)) == (151, 75)
    assert data.pool[0].words[:3] == ("SOCCER", "-", "JAPAN") and "NNP" in data.pool[0].tags


@pytest.fixture
def out(tmp_path) -> Path:
    return tmp_path / "out"


@pytest.fixture
def good_conllu(tmp_path) -> Path:
    path = tmp_path / "good.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    return path


def evaluate_argv(out: Path, *extra: str) -> list[str]:
    return ["evaluate", "--model", str(minilm_folder()), "--tasks", TASK, "--output-path", str(out),
            "--device", "cpu", "--no-cache", *extra]


@pytest.mark.parametrize("line, needles", [
    ("1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_", [":4:", "expected 10 tab-separated CoNLL-U columns, found 9"]),
    ("x\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_", [":4:", "bad token id 'x'"]),
    ("1\tI\tI\t_\tPRP\t_\t3\tnsubj\t_\t_", [":4:", "no UPOS tag"]),
    ("3\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_", [":4:", "token id 3 where 1 was expected"]),
])
def test_malformed_conllu_is_one_line_exit_2(capsys, tmp_path, out, good_conllu, line, needles):
    bad = tmp_path / "bad.conllu"
    bad.write_text("# sent_id = 1\n# text = I\n\n" + line + "\n", encoding="utf-8")
    assert_user_error(capsys, evaluate_argv(out, "--train", str(bad), "--eval", str(good_conllu)), out,
                      str(bad), *needles)


def test_malformed_conll_and_missing_files(capsys, tmp_path, out, good_conllu):
    bad = tmp_path / "bad.conll"
    bad.write_text("EU NNP\nrejects\n", encoding="utf-8")
    assert_user_error(capsys, evaluate_argv(out, "--train", str(good_conllu), "--eval", str(bad)), out,
                      f"{bad}:2", "at least 2 whitespace-separated columns")
    missing = tmp_path / "missing.conllu"
    assert_user_error(capsys, evaluate_argv(out, "--train", str(missing), "--eval", str(good_conllu)), out,
                      "not found", str(missing))
    assert_user_error(capsys, evaluate_argv(out, "--train", str(good_conllu)), out, "--eval")


def test_bad_settings_are_one_line_exit_2(capsys, out, good_conllu):
    files = ["--train", str(good_conllu), "--eval", str(good_conllu)]
    assert_user_error(capsys, evaluate_argv(out, *files, "--layer", "7"), out, "layer 7 does not exist", "0..6")
    assert_user_error(capsys, evaluate_argv(out, *files, "--pooling", "last"), out, "--pooling", "mean")
    assert_user_error(capsys, evaluate_argv(out, *files, "--train-sizes", "1,all"), out, "--train-sizes")
    assert_user_error(capsys, evaluate_argv(out, *files, "--probes", "svm"), out, "--probes")
    # a pool of under 4 sentences holds out no tuning sentence (a quarter at most)
    assert_user_error(capsys, evaluate_argv(out, *files, "--tuning-sentences", "500"), out,
                      "--tuning-sentences 500: the pool leaves no tuning token")


# ---------------------------------------------------------------- runs on the real encoder


@pytest.fixture(scope="module")
def minilm(membench_cache):
    return load(ModelSpec(model=str(minilm_folder()), device="cpu"))


def test_run_encodes_each_sentence_once_and_agrees_with_a_naive_count(monkeypatch, minilm):
    import tasks.probe_memorization.task as task_module

    calls = []
    real = task_module.contextual_span_vectors

    def counting(model, kind, tokenizer, texts, spans, **kwargs):
        calls.append(len(texts))
        return real(model, kind, tokenizer, texts, spans, **kwargs)

    monkeypatch.setattr(task_module, "contextual_span_vectors", counting)
    sample = load_conll_sample()
    data = ProbeData(sample.pool, sample.eval[:30], sample.source, sample.tagset)
    config = ProbeMemorizationConfig(train_sizes=(10, 40), repetitions=3, probes=("linear",))
    result = ProbeMemorization().run(minilm, data, config, RunContext(seed=3, progress=False))
    assert calls == [len(data.pool) + len(data.eval)]  # one extraction, whatever the repetitions and sizes

    eval_words = [w for s in data.eval for w in s.words]
    for record in result.samples:
        split = method.draw_split(len(data.pool), int(record["train_size"]), 3, record["repetition"])
        seen_words = {w for i in split.seen for w in data.pool[i].words}
        unseen_words = {w for i in split.unseen for w in data.pool[i].words}
        assert record["seen_tokens"] == sum(w in seen_words - unseen_words for w in eval_words)
        assert record["unseen_tokens"] == sum(w in unseen_words - seen_words for w in eval_words)
        assert record["train_tokens"] == sum(len(data.pool[i].words) for i in split.seen)
    by_name = {(m.name, m.tags["representation"], m.tags["train_size"]): m for m in result.metrics}
    for rep in ("static", "contextual"):
        rows = [r for r in result.samples if r["representation"] == rep and r["train_size"] == "40"]
        seen = sum(r["seen_correct"] for r in rows) / sum(r["seen_tokens"] for r in rows)
        unseen = sum(r["unseen_correct"] for r in rows) / sum(r["unseen_tokens"] for r in rows)
        assert by_name["seen_accuracy", rep, "40"].value == pytest.approx(seen)
        assert by_name["memorization_effect", rep, "40"].value == pytest.approx(seen - unseen)
        # the probe learned something: well above the majority tag (NNP, about a third of the tokens)
        assert by_name["accuracy", rep, "40"].value > 0.5
        assert by_name["selectivity", rep, "40"].value > 0.1


def test_the_paper_preset_probes_whole_words_with_settings_tuned_on_held_out_sentences(minilm):
    """--preset paper: only words MiniLM keeps as one token are trained on and evaluated, and each probe's
    setting is the grid value best on held-out pool sentences (a quarter of this small pool), which no
    training size draws; the words of those sentences are neither seen nor unseen (the paper's footnote 2)."""
    from tasks.probe_memorization import tuning

    sample = load_conll_sample()
    data = ProbeData(sample.pool, sample.eval[:30], sample.source, sample.tagset)
    config = ProbeMemorizationConfig(preset="paper", train_sizes=(20, "all"), repetitions=2,
                                     representations=("static",), control=False)
    assert (config.word_units, config.tuning_sentences) == ("whole", 500)
    result = ProbeMemorization().run(minilm, data, config, RunContext(seed=3, progress=False))
    whole = {w for s in data.pool + data.eval for w in s.words if len(minilm.tokenizer.tokenize(w)) == 1}
    eval_words = [w for s in data.eval for w in s.words]
    assert result.counts["eval_tokens"] == sum(w in whole for w in eval_words) < len(eval_words)
    assert result.counts["multi_subword_eval_tokens"] == len(eval_words) - result.counts["eval_tokens"]
    held_out, drawn = tuning.hold_out(len(data.pool), 500, 3)
    assert result.counts["tuning_sentences"] == len(held_out) == 151 // 4 and len(drawn) == 151 - 37
    assert result.counts["tuning_tokens"] == sum(w in whole for i in held_out for w in data.pool[i].words)
    tuning_words = {w for i in held_out for w in data.pool[i].words}
    assert result.counts["tuning_word_types"] == len(tuning_words)
    assert result.counts["tuning_eval_tokens"] == sum(w in whole and w in tuning_words for w in eval_words) > 0
    excluded = 0
    for record in result.samples:
        size = len(drawn) if record["train_size"] == "all" else int(record["train_size"])
        split = method.draw_split(len(drawn), size, 3, record["repetition"])
        assert record["train_tokens"] == sum(w in whole for i in drawn[split.seen] for w in data.pool[i].words)
        seen_words = {w for i in drawn[split.seen] for w in data.pool[i].words if w in whole}
        unseen_words = {w for i in drawn[split.unseen] for w in data.pool[i].words if w in whole}
        for key, only in (("seen_tokens", seen_words - unseen_words), ("unseen_tokens", unseen_words - seen_words)):
            assert record[key] == sum(w in whole and w in only - tuning_words for w in eval_words), key
            excluded += sum(w in whole and w in only & tuning_words for w in eval_words)
    assert excluded > 0  # the exclusion took some seen-only or unseen-only words out
    tuned = result.info["tuning"]
    for probe, grid in (("linear", tuning.LINEAR_C_GRID), ("mlp", tuning.MLP_EPOCHS_GRID)):
        accuracies = tuned[f"static/{probe}"]["accuracy"]
        assert list(accuracies) == [str(v) for v in grid] and all(0.5 < a <= 1 for a in accuracies.values())
        assert tuned[f"static/{probe}"]["chosen"] == grid[int(np.argmax(list(accuracies.values())))]


@pytest.mark.parametrize("cuda_initialised, method", [(False, "fork"), (True, "spawn")])
def test_fits_in_worker_processes_predict_what_one_process_predicts(monkeypatch, cuda_initialised, method):
    """`run_fits` in two worker processes gives the same predictions, in the same order, as in this
    process: each fit is the same single-threaded computation. Once this process has initialised
    CUDA (a model scored on a GPU) the workers are spawned, never forked: a forked child's PyTorch
    touches CUDA and fails (`CUDA error: initialization error`, issue 41)."""
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: cuda_initialised)
    started = []
    real_context = probes.multiprocessing.get_context
    monkeypatch.setattr(probes.multiprocessing, "get_context", lambda name=None: started.append(name) or real_context(name))
    sent = []
    real_sharing = probes.shared_with_workers

    @contextlib.contextmanager
    def sharing(shared, method):
        with real_sharing(shared, method) as given:
            sent.append(given.vectors)
            yield given

    monkeypatch.setattr(probes, "shared_with_workers", sharing)
    rng = np.random.default_rng(0)
    vectors = {"static": rng.normal(size=(120, 8)).astype(np.float32),
               "contextual": rng.normal(size=(120, 8)).astype(np.float32)}
    tags = rng.integers(0, 3, size=120)
    fits = [Fit(kind, rep, np.arange(start, start + 60), [tags[start:start + 60], tags[::-1][start:start + 60]], seed)
            for seed, (kind, rep, start) in enumerate([("linear", "static", 0), ("mlp", "contextual", 10),
                                                       ("mlp", "static", 20), ("linear", "contextual", 30)])]
    eval_rows = np.arange(90, 120)
    alone = list(run_fits(fits, vectors, eval_rows, 3, 3, workers=1))
    side_by_side = list(run_fits(fits, vectors, eval_rows, 3, 3, workers=2))
    assert started == [method]
    # forked workers share the matrices; spawned ones map them from .npy files, not a pickled copy each
    assert all(isinstance(matrix, np.ndarray if method == "fork" else str) for matrix in sent[0].values())
    assert len(side_by_side) == len(fits)
    for (mine, _), (theirs, seconds) in zip(alone, side_by_side):
        assert len(theirs) == 2 and seconds > 0
        for a, b in zip(mine, theirs):
            np.testing.assert_array_equal(a, b)
    assert not all(np.array_equal(alone[0][0][0], other[0][0]) for other in alone[1:])  # the fits differ


def test_evaluate_writes_a_results_file(capsys, out, minilm):
    code = main(evaluate_argv(out, "--source", "conll-sample", "--repetitions", "2", "--train-sizes", "20,all",
                              "--mlp-epochs", "2", "--limit", "25", "--log-samples"))
    assert code == 0, capsys.readouterr().err
    path = Path(capsys.readouterr().out.splitlines()[-1])
    entry = load_results(path).task(TASK)
    assert entry.status == "ok" and entry.version == ProbeMemorization.VERSION == 4
    assert entry.counts["eval_sentences"] == 25 and entry.counts["pool_sentences"] == 151
    for head in [entry.headline, *entry.summary]:
        metric = next(m for m in entry.metrics
                      if m.name == head.metric and all(m.tags.get(k) == v for k, v in head.tags.items()))
        assert -1 <= metric.value <= 1 and metric.std is not None and metric.std >= 0
    assert not [m.name for m in entry.metrics if m.name.endswith("_std")]  # the spread is in `std` (v2)
    # the std of each metric is that of its per-repetition values in the samples
    lines = [json.loads(line) for line in (path.parent / entry.samples_file).read_text().splitlines()]
    accuracies = [m for m in entry.metrics if m.name == "accuracy"]
    assert len(accuracies) == 2 * 2 * 2  # sizes x representations x probes
    for metric in accuracies:
        per_repetition = [r["correct"] / entry.counts["eval_tokens"] for r in lines
                          if all(r[k] == metric.tags[k] for k in ("representation", "probe", "train_size"))]
        assert len(per_repetition) == 2 and metric.std == pytest.approx(np.std(per_repetition, ddof=1))
    timings = entry.info["timings"]
    assert timings["extraction"]["contextual"]["tokens_per_s"] > 0
    assert set(timings["probe_training"]) == {"linear", "mlp"}
    assert entry.info["train_sizes"] == {"20": 20, "all": 151}
    assert entry.info["skipped_train_sizes"] == []
    assert len(lines) == 2 * 2 * 2 * 2  # sizes x repetitions x representations x probes
    # the numbers follow from the records in the sidecar (`membench verify`), and an edited record shows
    results = load_results(path)
    assert results.records_file and (path.parent / results.records_file).is_file() and entry.records_sha256
    verify_file(path)
    payload = sidecar_payload(path)
    records = payload["tasks"][TASK]["records"]
    edited = copy.deepcopy(payload)
    fit = next(f for f in edited["tasks"][TASK]["records"]["fits"] if f["id"] == "contextual/linear/all/0")
    gold = records["tokens"]["labels"][0]
    fit["predicted"][0] = gold if fit["predicted"][0] != gold else (gold + 1) % len(records["tags"])
    with pytest.raises(UserError, match=r"\{probe=linear,representation=contextual,train_size=all\}.*do not follow "
                                        "from its records"):
        verify_file(copy_with_records(path, edited, out / "edited"))
    # records the scoring stage cannot have made fail with one line naming the record
    config = ProbeMemorizationConfig.model_validate(entry.config)
    for edit, needle in [
        (lambda r: r["fits"].append(r["fits"][0]), "fit 'static/linear/20/0' appears twice in fits"),
        (lambda r: r["fits"][1]["predicted"].__setitem__(3, len(r["tags"])),
         r"fit 'static/mlp/20/0' predicted holds \d+, an unknown id"),
        (lambda r: r["counts"].__setitem__("pool_tokens", -1), r"counts.pool_tokens is -1, out of its range"),
        (lambda r: r["splits"][0].pop("seen_types"), "split '20/0' has no seen_types"),
        (lambda r: r["fits"].pop(), "no fit 'contextual/mlp/all/1'"),
        (lambda r: r["tokens"]["types"].pop(), "tokens.types has .* entries, not one per evaluation token"),
    ]:
        bad = copy.deepcopy(records)
        edit(bad)
        with pytest.raises(UserError, match=needle):
            ProbeMemorization().report(bad, config, entry.seed)


@pytest.mark.slow  # probes trained on all of UD English EWT dev
@pytest.mark.skipif(not EWT.is_dir(), reason=f"UD English EWT not found at {EWT}")
def test_minilm_on_ewt_memorizes_more_with_static_embeddings_and_less_with_more_data(minilm):
    """Rosa et al. 2020's qualitative finding with the linear probe, on all-MiniLM-L6-v2 and UD English
    EWT (dev = pool, test = evaluation), 3 splits per size. On this encoder it holds from about 500
    training sentences on (the table in the task card): at 50 sentences the contextual gap is the larger
    one, and with the MLP probe the two are close at every size."""
    data = ProbeMemorization().load_data(ProbeMemorizationConfig(
        train=str(EWT / "en_ewt-ud-dev.conllu"), eval=str(EWT / "en_ewt-ud-test.conllu")), RunContext())
    config = ProbeMemorizationConfig(train_sizes=(50, 1000, "all"), repetitions=3, probes=("linear",), control=False)
    result = ProbeMemorization().run(minilm, data, config, RunContext(seed=0, progress=False))
    effect = {(m.tags["representation"], m.tags["train_size"]): m.value for m in result.metrics
              if m.name == "memorization_effect"}
    for size in ("1000", "all"):  # static embeddings: the larger seen/unseen gap
        assert effect["static", size] > effect["contextual", size] + 0.03, effect
    # the gap shrinks as the training set grows
    assert effect["contextual", "50"] > effect["contextual", "1000"] + 0.05 > effect["contextual", "all"] + 0.05, effect
    assert effect["static", "1000"] > effect["static", "all"] + 0.02, effect
    assert effect["contextual", "all"] > 0.02, effect  # and the probe still memorizes with all 2,001 sentences
