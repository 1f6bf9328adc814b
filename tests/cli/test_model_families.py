"""Every model family users submit loads as the right kind and runs `--tasks all`: each task is ok
or skipped with a reason, never a traceback (issue 16). The checkpoints are tiny and random
(`model_families`), built once per test cache; settings that only set how much work a task does
are turned down so the whole matrix takes a minute or two of CPU."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.app.registry import select
from harness.model import kinds
from harness.model import loading as models
from harness.run import runner
from tests.helpers.model_families import FAMILIES, build_family

# Only the amount of work: permutations, probe repetitions and sizes, fine-tuning runs and epochs, and the
# length of what trains and is generated (finetune_memorization's texts and continuations, privacy_extraction's
# targets).
CHEAP = {"permutation_samples": 100, "max_exact_partitions": 100, "train_sizes": (4,), "repetitions": 1,
         "probes": ("linear",), "control": False, "finetune_seeds": 1, "epochs": (1,), "bootstrap_resamples": 10,
         "lengths": (8,), "tests": ("weat1",), "words": 24, "prompt_words": 16, "max_target_tokens": 24}
LIMIT = 2


@pytest.fixture(scope="module")
def family_root(membench_cache) -> Path:
    root = Path(os.environ["MEMBENCH_CACHE"]) / "model-families"
    root.mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture(scope="module")
def all_tasks():
    return select("all")


@pytest.mark.parametrize("family", FAMILIES, ids=[f.name for f in FAMILIES])
def test_family_runs_every_task_it_can(family, family_root, all_tasks, tmp_path, capsys):
    folder = build_family(family, family_root)
    options = runner.EvaluateOptions(output_path=tmp_path, limit=LIMIT, log_samples=True, progress=False,
                                     all_tasks=True)
    path = runner.evaluate(models.ModelSpec(model=str(folder)), all_tasks, CHEAP, options)
    results = json.loads(path.read_text())
    assert results["model"]["kind"] == family.kind
    status = {entry["name"]: entry for entry in results["tasks"]}
    ran = {name for name, entry in status.items() if entry["status"] == "ok"}
    assert ran == family.tasks, {name: entry.get("skip_reason") for name, entry in status.items()}
    for entry in status.values():
        if entry["status"] == "skipped":
            assert entry["skip_reason"]
        else:
            assert entry["metrics"], entry["name"]
    warnings = capsys.readouterr().err
    if family.architectures == []:  # the kind came from model_type: the user is told
        assert "names no architecture" in warnings
    if family.kind == "causal-lm":
        tokenizer = models.load_tokenizer(folder, trust_remote_code=False)
        for task in ("mink_membership", "paywall_memorization"):
            samples = [json.loads(line) for line in (tmp_path / status[task]["samples_file"]).read_text().splitlines()]
            assert samples and {s["start_token"] for s in samples} == {family.start_token}
        assert tokenizer.bos_token == family.start_token


def test_original_t5_config_is_seq2seq():
    config = {"architectures": ["T5WithLMHeadModel"], "model_type": "t5", "is_encoder_decoder": True}
    assert kinds.detect_kind(config) is models.ModelKind.SEQ2SEQ


def test_multimodal_wrapper_is_causal():
    config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "text_config": {}}
    assert kinds.detect_kind(config) is models.ModelKind.CAUSAL_LM
    for architecture, model_type in (("LlavaForConditionalGeneration", "llava"),
                                     ("Mistral3ForConditionalGeneration", "mistral3"),
                                     ("Qwen2VLForConditionalGeneration", "qwen2_vl")):
        config = {"architectures": [architecture], "model_type": model_type, "text_config": {}}
        assert kinds.detect_kind(config) is models.ModelKind.CAUSAL_LM, architecture


def test_kind_from_model_type_is_a_guess_said_aloud():
    kind, note = kinds.detect_kind_with_note({"model_type": "gpt2"})
    assert kind is models.ModelKind.CAUSAL_LM and "model_type 'gpt2'" in note
    assert kinds.detect_kind_with_note({"model_type": "bert"})[0] is models.ModelKind.MASKED_LM
    assert kinds.detect_kind_with_note({"model_type": "t5", "is_encoder_decoder": True})[0] is models.ModelKind.SEQ2SEQ
    kind, note = kinds.detect_kind_with_note({"model_type": "no-such-type"})
    assert kind is models.ModelKind.ENCODER and "--model-kind" in note
    assert kinds.detect_kind_with_note({"architectures": ["BertForMaskedLM"]}) == (models.ModelKind.MASKED_LM, None)


def test_unknown_architecture_name_falls_back_on_its_suffix():
    assert kinds.detect_kind({"architectures": ["MyRemoteForCausalLM"]}) is models.ModelKind.CAUSAL_LM
    assert kinds.detect_kind({"architectures": ["MyRemoteWithLMHeadModel"], "is_encoder_decoder": True}) \
        is models.ModelKind.SEQ2SEQ


def test_architectures_must_be_a_list_of_names():
    from harness.core.errors import UserError

    with pytest.raises(UserError, match="architectures"):
        kinds.detect_kind({"architectures": 5})


def named_family(name: str):
    return next(f for f in FAMILIES if f.name == name)


def test_causal_hidden_states_start_with_bos_like_scores(family_root):
    """One rule (`causal_start_token`): a GPT-2-style tokenizer adds no BOS, yet the hidden states of
    a causal LM are read from [BOS] + the text, as its scores are; an encoder keeps [CLS] ... [SEP]."""
    from harness.scoring.causal import causal_start_token, encode_with_bos
    from harness.scoring.spans import align_spans

    tokenizer = models.load_tokenizer(build_family(named_family("gpt2"), family_root), trust_remote_code=False)
    bos = causal_start_token(tokenizer)
    assert bos is not None and tokenizer("a dog")["input_ids"][0] != bos
    ids, positions = align_spans(tokenizer, ["a dog"], [[(2, 5)]], 100, bos)
    assert ids[0] == encode_with_bos(tokenizer, ["a dog"])[0][0] and ids[0][0] == bos
    assert tokenizer.decode(ids[0][positions[0][0][0]]).strip() in ("dog", "d")
    bert = models.load_tokenizer(build_family(named_family("bert"), family_root), trust_remote_code=False)
    ids, _ = align_spans(bert, ["a dog"], [[(2, 5)]], 100)
    assert ids[0][0] == bert.cls_token_id and ids[0][-1] == bert.sep_token_id


def test_tasks_all_skips_a_task_that_refuses_the_model_but_a_named_one_is_an_error(family_root, tmp_path, capsys):
    from harness.app.cli import main
    from tests.helpers.model_families import _BERT_LIKE, BERT_TOKENS, NER_TASKS, Family, _labels

    no_person = Family("ner-no-person", "BertConfig", "BertForTokenClassification",
                       dict(_BERT_LIKE, **_labels(["O", "B-LOC", "I-LOC"])), BERT_TOKENS, "token-classifier", NER_TASKS)
    folder = build_family(no_person, family_root)
    base = ["evaluate", "--model", str(folder), "--output-path", str(tmp_path), "--limit", "2"]
    assert main(base + ["--tasks", "ner_prompt_memorization"]) == 2
    assert "B-LOC" in capsys.readouterr().err
    assert main(base + ["--tasks", "all"]) == 0
    out = capsys.readouterr()
    entry = json.loads(Path(out.out.splitlines()[-1]).read_text())["tasks"]
    ner = next(e for e in entry if e["name"] == "ner_prompt_memorization")
    assert ner["status"] == "skipped" and "B-LOC" in ner["skip_reason"]
    assert "ner_prompt_memorization skipped" in out.err
    assert "weat skipped" not in out.err  # another kind: expected under `all`, not worth a warning


def test_limit_too_small_for_membership_skips_that_task_only(family_root, tmp_path, capsys):
    folder = build_family(named_family("gpt2"), family_root)
    options = runner.EvaluateOptions(output_path=tmp_path, limit=1, progress=False, all_tasks=True, use_cache=False)
    tasks = select("mink_membership,stereoset,paywall_memorization")
    settings = {"lengths": (8,), "bootstrap_resamples": 10}
    results = json.loads(runner.evaluate(models.ModelSpec(model=str(folder)), tasks, settings, options).read_text())
    status = {e["name"]: e for e in results["tasks"]}
    assert status["mink_membership"]["status"] == "skipped"
    assert "--limit 1" in status["mink_membership"]["skip_reason"]
    assert status["stereoset"]["status"] == status["paywall_memorization"]["status"] == "ok"
    assert "mink_membership skipped: --limit 1" in capsys.readouterr().err
