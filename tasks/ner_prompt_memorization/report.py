"""ner_prompt_memorization's reporting stage: every strategy's M-MEM and every analysis from the records
(the confidence of each (prompt, name) the strategies read), a pure function (`harness.core.task.Task.report`):
no model, no torch.

Records (`task.NerPromptMemorization.score`; a confidence is in [0, 1], `strategies.ConfidenceTable`):

    {"names": {"dev_in": [name, ...], "dev_out": [...], "test_in": [...], "test_out": [...]},
     "prompts": [{id, text, type, name_position, n_tokens, confidences: {name: confidence}}],
                  the typed prompts in file order, each with every name of both splits
     "baselines": [{id: "no_prompt" | "one_prompt", text, confidences: {test name: confidence}}],
     "mix_prompts": [text, ...], "mix_draws": [{id: test name, prompt: index into mix_prompts, confidence}],
     "pte_best", "pte_worst": [{id: the step's prompt, removed: the token it removed (null at the start),
                               confidences: {dev or test name: confidence}}], a token-elimination trajectory,
     "scored_sentences": the distinct (prompt, name) pairs the model scored (PTE's candidates too),
     "facts": {names_source, prompts_source, labels, label_scheme, duplicate_names}}

A (prompt, name) pair in several records has one confidence (the task scores it once).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.stats import kendalltau, rankdata

from harness.core.errors import UserError
from harness.core.records import Records, facts, number, record_list
from harness.core.records import text as checked_text  # `text` names prompt texts here
from harness.core.results import Metric
from harness.core.task import TaskResult
from harness.metrics import memorization as m
from tasks.ner_prompt_memorization.prompts import annotate, remove_token, removable_tokens, token_spans

NAME_LISTS = ("dev_in", "dev_out", "test_in", "test_out")
BASELINES = ("no_prompt", "one_prompt")
PTE = (("pte_best", True), ("pte_worst", False))
SCHEMES = ("IO", "BIO", "IOBES", "BILOU")
POSITIONS = ("start", "middle", "end")


# ---------------------------------------------------------------- the strategies' arithmetic (pure)

def tied_with(values: np.ndarray, k: int) -> np.ndarray:
    """Indices (ascending) of the entries equal to values[k], k among them. Exact equality: M-MEM is
    U / (n_in n_out) with U a sum of (half-)integer ranks, so equal pair counts give equal floats."""
    return np.flatnonzero(values == values[k])


def chosen_index(dev_m_mem: list[float], best: bool) -> int:
    """PTE's BM-PT (best=True): the trajectory's prompt with the highest dev M-MEM; WM-PT: the lowest.
    The earliest on ties."""
    return int(np.argmax(dev_m_mem) if best else np.argmin(dev_m_mem))


def zipped_successes(conf_in: np.ndarray, conf_out: np.ndarray) -> np.ndarray:
    """Blocks of Cochran's Q: success[i, r] = conf_in[r, i] > conf_out[r, i] for the first
    min(n_in, n_out) names of each side (rows of the inputs: prompts; columns: names).

    Each block is one zipped pair (the i-th in-train name, the i-th out-train name), as in Xia et
    al.'s notebook (`src/data_analysis.ipynb`), so no name is in two blocks and the blocks are
    independent; a tie is no success. (All n_in x n_out pairs would share names between blocks.)"""
    n = min(conf_in.shape[1], conf_out.shape[1])
    return (conf_in[:, :n] > conf_out[:, :n]).T


def ensemble_confidences(confidences: np.ndarray, weights: np.ndarray) -> dict[str, np.ndarray]:
    """Per-name confidences over all prompts (rows): mean, weighted mean (weights = the prompts'
    dev M-MEM), max and min."""
    return {"ept_mean": confidences.mean(axis=0),
            "ept_weighted": weights @ confidences / weights.sum(),
            "ept_max": confidences.max(axis=0),
            "ept_min": confidences.min(axis=0)}


def length_bin(n_tokens: int, edges: tuple[int, ...]) -> str:
    """`1-5`, `6-10`, ... `16+` for edges (5, 10, 15)."""
    low = 1
    for edge in edges:
        if n_tokens <= edge:
            return f"{low}-{edge}"
        low = edge + 1
    return f"{low}+"


def group_order(value: str) -> tuple:
    """Natural order of analysis groups: positions start, middle, end; length bins by their lower edge."""
    positions = {"start": 0, "middle": 1, "end": 2}
    if value in positions:
        return (0, positions[value], "")
    head = value.split("-")[0].rstrip("+")
    return (1, int(head), "") if head.isdigit() else (2, 0, value)


# ---------------------------------------------------------------- reading the records

class _Pairs:
    """Every (prompt, name) confidence the records hold, checked: a number in [0, 1], and one value per
    pair wherever it appears (the task scores each pair once)."""

    def __init__(self):
        self.values: dict[tuple[str, str], tuple[float, str]] = {}

    def check(self, text: str, confidences: Any, names: list[str], where: str) -> dict[str, float]:
        if not isinstance(confidences, dict):
            raise UserError(f"records: {where} needs confidences, an object name -> confidence")
        if len(confidences) != len(names) or not all(n in confidences for n in names):
            missing = [n for n in names if n not in confidences]
            extra = sorted(set(confidences) - set(names))
            said = f"lacks name {missing[0]!r}" if missing else f"has name {extra[0]!r}, which is in no list it reads"
            raise UserError(f"records: {where}'s confidences {said}")
        for name in names:
            value = number(confidences[name], f"{where} confidence of {name!r}", 0.0, 1.0)
            seen = self.values.setdefault((text, name), (value, where))
            if seen[0] != value:
                raise UserError(f"records: the confidence of {name!r} in {text!r} is {seen[0]!r} in {seen[1]}, "
                                f"{value!r} in {where}; the task scores each (prompt, name) once")
        return confidences


def checked_names(records: Records) -> dict[str, list[str]]:
    """The four name lists: non-empty lists of distinct names, no name both in-train and out-train."""
    names = records.get("names")
    if not isinstance(names, dict) or set(names) != set(NAME_LISTS):
        raise UserError(f"records: names needs exactly the lists {', '.join(NAME_LISTS)}")
    for key in NAME_LISTS:
        values = names[key]
        if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values):
            raise UserError(f"records: names.{key} is not a non-empty list of names")
        if len(set(values)) != len(values):
            raise UserError(f"records: names.{key} holds a name twice (the task keeps one of each)")
    for split in ("dev", "test"):
        both = set(names[f"{split}_in"]) & set(names[f"{split}_out"])
        if both:
            raise UserError(f"records: {sorted(both)[0]!r} is both in-train and out-train in {split}")
    return names


def checked_prompts(records: Records, every: list[str], pairs: _Pairs) -> list[dict]:
    """The typed prompts, each annotated as its text says, with a confidence for every name."""
    prompts = record_list(records, "prompts", "prompt")
    if not prompts:
        raise UserError("records: prompts is empty; the task scores at least one typed prompt")
    for p in prompts:
        where = f"prompt {p['id']!r}"
        text = checked_text(p.get("text"), f"{where} text", empty=False)
        kind = checked_text(p.get("type"), f"{where} type", empty=False)
        try:
            annotated = annotate(p["id"], text, kind)
        except UserError as err:
            raise UserError(f"records: {err}") from None
        found = (text, p.get("name_position"), p.get("n_tokens"))
        if found != (annotated.text, annotated.name_position, annotated.n_tokens) or type(p["n_tokens"]) is not int:
            raise UserError(f"records: {where} says name_position {found[1]!r}, n_tokens {found[2]!r}; its text "
                            f"{text!r} has {annotated.name_position}, {annotated.n_tokens}")
        pairs.check(text, p.get("confidences"), every, where)
    return prompts


def checked_baselines(records: Records, test_names: list[str], pairs: _Pairs) -> dict[str, dict]:
    baselines = {b["id"]: b for b in record_list(records, "baselines", "baseline")}
    if set(baselines) != set(BASELINES):
        raise UserError(f"records: baselines needs exactly {', '.join(BASELINES)}, not {', '.join(sorted(baselines))}")
    for key, b in baselines.items():
        pairs.check(checked_text(b.get("text"), f"baseline {key!r} text", empty=False), b.get("confidences"), test_names,
                    f"baseline {key!r}")
    return baselines


def checked_mix(records: Records, test_names: list[str], pairs: _Pairs) -> dict[str, dict]:
    """Mix-PT's draws by name: one for each test name, of a mix prompt."""
    texts = records.get("mix_prompts")
    if not isinstance(texts, list) or not texts:
        raise UserError("records: mix_prompts is not a non-empty list of prompts")
    for k, text in enumerate(texts):
        checked_text(text, f"mix_prompts[{k}]", empty=False)
    draws = {d["id"]: d for d in record_list(records, "mix_draws", "Mix-PT draw")}
    missing, extra = sorted(set(test_names) - set(draws)), sorted(set(draws) - set(test_names))
    if missing:
        raise UserError(f"records: mix_draws has no draw of test name {missing[0]!r}")
    if extra:
        raise UserError(f"records: mix_draws has a draw of {extra[0]!r}, which is no test name")
    for name, d in draws.items():
        k = d.get("prompt")
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < len(texts):
            raise UserError(f"records: Mix-PT draw {name!r} prompt is {k!r}, not an index into the "
                            f"{len(texts)} mix_prompts")
        number(d.get("confidence"), f"Mix-PT draw {name!r} confidence", 0.0, 1.0)
        pairs.check(texts[k], {name: d["confidence"]}, [name], f"Mix-PT draw {name!r}")
    return draws


def checked_steps(records: Records, strategy: str, start: str, names: list[str], pairs: _Pairs) -> list[dict]:
    """A token-elimination trajectory: from `start`, each step one removable token less (the token it
    names), until at most one is left."""
    steps = record_list(records, strategy, "PTE step")
    if not steps or steps[0]["id"] != start or steps[0].get("removed") is not None:
        raise UserError(f"records: {strategy} must start at {start!r} (with nothing removed), the OPT prompt the "
                        f"confidences choose")
    for before, step in zip(steps, steps[1:]):
        removed, text = step.get("removed"), before["id"]
        indices = removable_tokens(text)
        spans = token_spans(text)
        if len(indices) < 2 or not any(remove_token(text, i) == step["id"] and text[slice(*spans[i])] == removed
                                       for i in indices):
            raise UserError(f"records: {strategy} step {step['id']!r} is not {text!r} without the token {removed!r}")
    if len(removable_tokens(steps[-1]["id"])) > 1:
        raise UserError(f"records: {strategy} ends at {steps[-1]['id']!r}, which has tokens left to remove")
    for step in steps:
        pairs.check(step["id"], step.get("confidences"), names, f"{strategy} step {step['id']!r}")
    return steps


def checked_facts(records: Records) -> dict[str, Any]:
    found = facts(records)
    for key in ("names_source", "prompts_source"):
        checked_text(found.get(key), f"facts.{key}", empty=False)
    labels = found.get("labels")
    if not isinstance(labels, list) or not labels or not all(isinstance(x, str) and x for x in labels):
        raise UserError("records: facts.labels is not a non-empty list of label names")
    if found.get("label_scheme") not in SCHEMES:
        raise UserError(f"records: facts.label_scheme is {found.get('label_scheme')!r}, not one of {', '.join(SCHEMES)}")
    duplicates = found.get("duplicate_names")
    if not isinstance(duplicates, dict) or not all(
            isinstance(repeated, dict) and all(isinstance(t, int) and not isinstance(t, bool) and t >= 2
                                               for t in repeated.values()) for repeated in duplicates.values()):
        raise UserError("records: facts.duplicate_names is not an object list -> {name: times (2 or more)}")
    return found


def _matrix(rows: list[dict], names: list[str]) -> np.ndarray:
    return np.array([[row[name] for name in names] for row in rows], dtype=np.float64).reshape(len(rows), len(names))


# ---------------------------------------------------------------- the report

def report(records: Records, length_bins: tuple[int, ...]) -> TaskResult:
    names = checked_names(records)
    dev_in, dev_out, test_in, test_out = (names[key] for key in NAME_LISTS)
    every = list(dict.fromkeys(dev_in + dev_out + test_in + test_out))
    test_names = test_in + test_out
    pairs = _Pairs()
    typed = checked_prompts(records, every, pairs)
    baselines = checked_baselines(records, test_names, pairs)
    draws = checked_mix(records, test_names, pairs)
    found = checked_facts(records)
    confidences = [p["confidences"] for p in typed]
    dev = m.preference_share(_matrix(confidences, dev_in), _matrix(confidences, dev_out))
    test = m.preference_share(_matrix(confidences, test_in), _matrix(confidences, test_out))
    test_rank = rankdata(-test, method="min").astype(int)
    pairs_n = len(test_in) * len(test_out)
    metrics: list[Metric] = []

    def add(name: str, value: float | None, n: int, **tags: str) -> None:
        value = None if value is None or not np.isfinite(value) else float(value)
        metrics.append(Metric(name=name, value=value, n=n, tags=tags))

    def test_m_mem(rows: list[dict]) -> np.ndarray:
        return m.preference_share(_matrix(rows, test_in), _matrix(rows, test_out))

    # Baselines: the name alone, One-PT, Mix-PT.
    for key in BASELINES:
        add("m_mem", float(test_m_mem([baselines[key]["confidences"]])[0]), pairs_n, strategy=key)
    mix = {name: d["confidence"] for name, d in draws.items()}
    add("m_mem", float(test_m_mem([mix])[0]), pairs_n, strategy="mix_prompt")
    # OPT: the best and worst prompts on dev (the first in file order among ties), reported on test;
    # the prompts tied with them on dev and the range of their test M-MEM.
    best, worst = int(np.argmax(dev)), int(np.argmin(dev))
    opt_info = {}
    for strategy, k in (("opt_best", best), ("opt_worst", worst)):
        tied = tied_with(dev, k)
        add("m_mem", test[k], pairs_n, strategy=strategy)
        add("test_rank", test_rank[k], len(typed), strategy=strategy)
        add("tied_prompts", len(tied), len(typed), strategy=strategy)
        add("tied_m_mem_min", test[tied].min(), pairs_n, strategy=strategy)
        add("tied_m_mem_max", test[tied].max(), pairs_n, strategy=strategy)
        opt_info[strategy.removeprefix("opt_")] = {
            "prompt_id": typed[k]["id"], "text": typed[k]["text"], "dev_m_mem": float(dev[k]),
            "tied_prompt_ids": [typed[j]["id"] for j in tied],
            "tied_test_m_mem": [float(test[tied].min()), float(test[tied].max())]}
    # PTE: token elimination from the best and the worst prompt.
    trajectories = {}
    for (strategy, keep_best), k in zip(PTE, (best, worst)):
        steps = checked_steps(records, strategy, typed[k]["text"], every, pairs)
        rows = [s["confidences"] for s in steps]
        step_devs = [float(d) for d in m.preference_share(_matrix(rows, dev_in), _matrix(rows, dev_out))]
        step_tests = test_m_mem(rows)
        chosen = chosen_index(step_devs, keep_best)
        add("m_mem", float(step_tests[chosen]), pairs_n, strategy=strategy)
        trajectories[strategy] = {"chosen": steps[chosen]["id"], "steps": [
            {"prompt": s["id"], "removed": s["removed"], "importance": None if j == 0 else step_devs[j - 1] - d,
             "dev_m_mem": d, "test_m_mem": float(t)} for j, (s, d, t) in enumerate(zip(steps, step_devs, step_tests))]}
    scored = records.get("scored_sentences")
    if isinstance(scored, bool) or not isinstance(scored, int) or scored < len(pairs.values):
        raise UserError(f"records: scored_sentences is {scored!r}, not a count of at least the "
                        f"{len(pairs.values)} (prompt, name) pairs the records hold")
    # EPT: ensembles over all typed prompts (weights: dev M-MEM), on test.
    conf_in, conf_out = _matrix(confidences, test_in), _matrix(confidences, test_out)
    weights = dev if dev.sum() > 0 else np.ones_like(dev)
    ensembles_in, ensembles_out = ensemble_confidences(conf_in, weights), ensemble_confidences(conf_out, weights)
    preferences = m.pair_preferences(conf_in, conf_out)
    add("m_mem", m.majority_vote_share(preferences), pairs_n, strategy="ept_majority")
    for strategy in ensembles_in:
        add("m_mem", m.preference_share(ensembles_in[strategy], ensembles_out[strategy])[0], pairs_n, strategy=strategy)
    # Analyses.
    tau = kendalltau(dev, test)
    add("kendall_tau", tau.statistic, len(typed), by="dev_vs_test")
    add("kendall_p", tau.pvalue, len(typed), by="dev_vs_test")
    # Prompt spread: does the choice of prompt matter, or do the prompts sit at a ceiling?
    for split, values in (("dev", dev), ("test", test)):
        add("prompts_at_ceiling", float(np.mean(values == 1.0)), len(typed), split=split)
    q1, q3 = np.percentile(test, [25, 75])
    add("prompt_m_mem_iqr", q3 - q1, len(typed), split="test")
    # Cochran's Q over independent blocks: the zipped pairs (i-th in-train name, i-th out-train name).
    zipped = zipped_successes(conf_in, conf_out)
    q, q_p = m.cochrans_q(zipped)
    add("cochran_q", q, len(zipped), by="prompt")
    add("cochran_p", q_p, len(zipped), by="prompt")
    groupings = {"prompt_type": [p["type"] for p in typed], "name_position": [p["name_position"] for p in typed],
                 "prompt_length": [length_bin(p["n_tokens"], length_bins) for p in typed]}
    for tag, groups in groupings.items():
        groups = np.array(groups)
        for group in dict.fromkeys(sorted(groups, key=group_order)):
            add("m_mem", test[groups == group].mean(), int((groups == group).sum()), by=tag, group=group)
    samples = [{"prompt_id": p["id"], "text": p["text"], "type": p["type"], "name_position": p["name_position"],
                "n_tokens": p["n_tokens"], "dev_m_mem": float(d), "test_m_mem": float(t), "test_rank": int(r)}
               for p, d, t, r in zip(typed, dev, test, test_rank)]
    probabilities = ", ".join(f"P({name})" for name in found["labels"])
    info: dict[str, Any] = {
        "names_source": found["names_source"], "prompts_source": found["prompts_source"],
        "opt": opt_info,
        "pte": trajectories,
        "confidence": f"mean over the name's subword tokens of max({probabilities}), softmax in float64; "
                      f"ties count 1/2",
        "labels": list(found["labels"]),
        "label_scheme": found["label_scheme"],
        "cochran_blocks": f"{len(zipped)} zipped (in-train, out-train) test pairs",
        "duplicate_names": found["duplicate_names"],
    }
    info.update({key: value for key, value in found.items() if key not in info})
    repeats = sum(times - 1 for repeated in found["duplicate_names"].values() for times in repeated.values())
    counts = {**{key: len(names[key]) for key in NAME_LISTS}, "typed_prompts": len(typed),
              "scored_sentences": scored, "duplicate_names": repeats}
    item_scores = {"test_m_mem_by_prompt": {p["id"]: float(t) for p, t in zip(typed, test)}}
    return TaskResult(metrics=metrics, counts=counts, samples=samples, info=info, item_scores=item_scores)
