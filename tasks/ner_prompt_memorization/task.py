"""Task `ner_prompt_memorization`: memorized names in NER models, elicited with prompts.

Xia et al. 2024, "Exploring prompts to elicit memorization in masked language model-based named
entity recognition": a name's confidence is compared between names in and out of the model's
training data; M-MEM is the share of (in-train, out-train) pairs where the in-train name is more
confident. Confidence = the mean over the name's subword tokens of the max of P over the labels of
the entity type X (PER by default, or LOC, ORG, MISC): max(P(B-X), P(I-X)) for a BIO model, as in
the paper; every label of X for IO, IOBES and BILOU models (`entities.entity_label_set`). Prompts
are chosen on dev and reported on test. Definitions: README.md beside this file.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field, PositiveInt
from scipy.stats import kendalltau, rankdata

from harness.core.model_types import LoadedModel, ModelKind
from harness.core.results import Headline, Metric
from harness.core.task import PaperPreset, RunContext, Task, TaskConfig, TaskResult, register
from harness.metrics import memorization as m
from harness.reference.ner_data import SHARED_NAMES
from tasks.ner_prompt_memorization import strategies as st
from tasks.ner_prompt_memorization.data import NerData, load_ner_data
from tasks.ner_prompt_memorization.entities import EntityLabels, entity_label_set


class NerConfig(PaperPreset, TaskConfig):
    names: str = Field("reference", description="name pairs: 'reference' (the reference NER model's; no "
                       "out-train word in training), 'reference:shared' (its in-train names against names "
                       "recombined from their words) or a JSON file {dev, test: {in_train, out_train}} (the "
                       "paper's layout)")
    prompts: str = Field("builtin", description="prompts: 'builtin' (440 written for membench) or a JSON file "
                         "in the paper's layout (declarative_prompt, ..., empty_prompt, one_prompt, mix_prompt)")
    length_bins: tuple[PositiveInt, ...] = Field((5, 10, 15), description="upper edges of the prompt-length "
                                                 "bins (tokens besides the name) of the length analysis")
    entity_type: Literal["PER", "LOC", "ORG", "MISC"] = Field(
        "PER", description="entity type of the names: PER, LOC, ORG or MISC; confidence = the max of P over "
        "the type's labels (BIO: max P(B-X), P(I-X); IO, IOBES, BILOU: all of X's labels)")
    # The paper draws in-train and out-train names from one source of names, so their words overlap
    # (the card's "Departures from the paper")
    PAPER = {"names": SHARED_NAMES}


def entity_labels(model: LoadedModel, entity_type: str) -> EntityLabels:
    """Every label of the entity type in the model's id2label (B-PER and I-PER for a CoNLL BIO model;
    PER; S-PER, B-PER, I-PER, E-PER; ...): `entities.entity_label_set`."""
    id2label = getattr(model.model.config, "id2label", None) or {}
    return entity_label_set(id2label, entity_type, model.name)


@register
class NerPromptMemorization(Task):
    NAME = "ner_prompt_memorization"
    VERSION = 5  # 5: the paper's five Mix-PT prompts; --names reference:shared; --preset paper
    DESCRIPTION = ("Memorized names (person by default) in NER models: M-MEM of in- vs out-train names under "
                   "prompt strategies (baselines, OPT, PTE, EPT) and prompt analyses")
    MODEL_KINDS = frozenset({ModelKind.TOKEN_CLASSIFIER})
    HEADLINE = Headline(metric="m_mem", tags={"strategy": "opt_best"}, label="best-prompt test M-MEM",
                        better="lower")
    SUMMARY = (HEADLINE,
               Headline(metric="m_mem", tags={"strategy": "opt_worst"}, label="worst-prompt test M-MEM",
                        better="lower"),
               Headline(metric="m_mem", tags={"strategy": "no_prompt"}, label="no-prompt M-MEM", better="lower"),
               Headline(metric="m_mem", tags={"strategy": "ept_weighted"}, label="weighted-ensemble M-MEM",
                        better="lower"))
    Config = NerConfig

    def load_data(self, config: NerConfig, context: RunContext) -> NerData:
        return load_ner_data(config.names, config.prompts, context.limit, config.entity_type)

    def check_model(self, model: LoadedModel, config: NerConfig) -> None:
        entity_labels(model, config.entity_type)

    def run(self, model: LoadedModel, data: NerData, config: NerConfig, context: RunContext) -> TaskResult:
        labels = entity_labels(model, config.entity_type)
        table = st.ConfidenceTable(model.model, model.tokenizer, labels.ids, context.batch_size, context.progress)
        names = {f"{split}_{side.split('_')[0]}": list(data.names.names[split][side])
                 for split in ("dev", "test") for side in ("in_train", "out_train")}
        dev_in, dev_out, test_in, test_out = names["dev_in"], names["dev_out"], names["test_in"], names["test_out"]
        typed = data.prompts.typed
        texts = [p.text for p in typed]
        table.get(texts, data.names.all_names())  # every (typed prompt, name) in one batched pass
        dev, test = table.m_mem(texts, dev_in, dev_out), table.m_mem(texts, test_in, test_out)
        test_rank = rankdata(-test, method="min").astype(int)
        pairs = len(test_in) * len(test_out)
        metrics: list[Metric] = []

        def add(name: str, value: float | None, n: int, **tags: str) -> None:
            value = None if value is None or not np.isfinite(value) else float(value)
            metrics.append(Metric(name=name, value=value, n=n, tags=tags))

        def test_m_mem(text: str) -> float:
            return float(table.m_mem([text], test_in, test_out)[0])

        # Baselines: the name alone, One-PT, Mix-PT.
        add("m_mem", test_m_mem(data.prompts.no_prompt.text), pairs, strategy="no_prompt")
        add("m_mem", test_m_mem(data.prompts.one_prompt.text), pairs, strategy="one_prompt")
        add("m_mem", self._mix_m_mem(table, data, test_in, test_out, context.seed), pairs, strategy="mix_prompt")
        # OPT: the best and worst prompts on dev (the first in file order among ties), reported on test;
        # the prompts tied with them on dev and the range of their test M-MEM.
        best, worst = int(np.argmax(dev)), int(np.argmin(dev))
        opt_info = {}
        for strategy, k in (("opt_best", best), ("opt_worst", worst)):
            tied = st.tied_with(dev, k)
            add("m_mem", test[k], pairs, strategy=strategy)
            add("test_rank", test_rank[k], len(typed), strategy=strategy)
            add("tied_prompts", len(tied), len(typed), strategy=strategy)
            add("tied_m_mem_min", test[tied].min(), pairs, strategy=strategy)
            add("tied_m_mem_max", test[tied].max(), pairs, strategy=strategy)
            opt_info[strategy.removeprefix("opt_")] = {
                "prompt_id": typed[k].prompt_id, "text": typed[k].text, "dev_m_mem": float(dev[k]),
                "tied_prompt_ids": [typed[j].prompt_id for j in tied],
                "tied_test_m_mem": [float(test[tied].min()), float(test[tied].max())]}
        # PTE: token elimination from the best and the worst prompt.
        trajectories = {}
        for strategy, k, keep_best in (("pte_best", best, True), ("pte_worst", worst, False)):
            steps = st.eliminate_tokens(table, typed[k], keep_best, dev_in, dev_out)
            chosen = st.chosen_step(steps, keep_best)
            add("m_mem", test_m_mem(chosen.text), pairs, strategy=strategy)
            step_tests = table.m_mem([s.text for s in steps], test_in, test_out)
            trajectories[strategy] = {"chosen": chosen.text, "steps": [
                {"prompt": s.text, "removed": s.removed, "importance": s.importance, "dev_m_mem": s.dev_m_mem,
                 "test_m_mem": float(t)} for s, t in zip(steps, step_tests)]}
        # EPT: ensembles over all typed prompts (weights: dev M-MEM), on test.
        conf_in, conf_out = table.get(texts, test_in), table.get(texts, test_out)
        weights = dev if dev.sum() > 0 else np.ones_like(dev)
        ensembles_in, ensembles_out = st.ensemble_confidences(conf_in, weights), st.ensemble_confidences(conf_out, weights)
        preferences = m.pair_preferences(conf_in, conf_out)
        add("m_mem", m.majority_vote_share(preferences), pairs, strategy="ept_majority")
        for strategy in ensembles_in:
            add("m_mem", m.preference_share(ensembles_in[strategy], ensembles_out[strategy])[0], pairs, strategy=strategy)
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
        zipped = st.zipped_successes(conf_in, conf_out)
        q, q_p = m.cochrans_q(zipped)
        add("cochran_q", q, len(zipped), by="prompt")
        add("cochran_p", q_p, len(zipped), by="prompt")
        groupings = {"prompt_type": [p.type for p in typed], "name_position": [p.name_position for p in typed],
                     "prompt_length": [st.length_bin(p.n_tokens, config.length_bins) for p in typed]}
        for tag, groups in groupings.items():
            groups = np.array(groups)
            for group in dict.fromkeys(sorted(groups, key=_group_order)):
                add("m_mem", test[groups == group].mean(), int((groups == group).sum()), by=tag, group=group)
        samples = [{**p.as_dict(), "dev_m_mem": float(d), "test_m_mem": float(t), "test_rank": int(r)}
                   for p, d, t, r in zip(typed, dev, test, test_rank)]
        probabilities = ", ".join(f"P({name})" for name in labels.names)
        info: dict[str, Any] = {
            "names_source": data.names.source, "prompts_source": data.prompts.source,
            "opt": opt_info,
            "pte": trajectories,
            "confidence": f"mean over the name's subword tokens of max({probabilities}), softmax in float64; "
                          f"ties count 1/2",
            "labels": labels.names,
            "label_scheme": labels.scheme,
            "cochran_blocks": f"{len(zipped)} zipped (in-train, out-train) test pairs",
            "duplicate_names": data.names.duplicates,
        }
        counts = {**{key: len(value) for key, value in names.items()}, "typed_prompts": len(typed),
                  "scored_sentences": table.n_scored, "duplicate_names": data.names.n_repeats()}
        item_scores = {"test_m_mem_by_prompt": {p.prompt_id: float(t) for p, t in zip(typed, test)}}
        return TaskResult(metrics=metrics, counts=counts, samples=samples, info=info, item_scores=item_scores)

    @staticmethod
    def _mix_m_mem(table: st.ConfidenceTable, data: NerData, test_in: list[str], test_out: list[str],
                   seed: int) -> float:
        """Mix-PT: each name scored in the mix prompt drawn for it (`strategies.mix_assignment`)."""
        mix = data.prompts.mix
        assignment = st.mix_assignment(data.names.all_names(), len(mix), seed)
        for k, prompt in enumerate(mix):
            table.get([prompt.text], [n for n in test_in + test_out if assignment[n] == k])

        def confidences(names: list[str]) -> np.ndarray:
            return np.array([table.get([mix[assignment[n]].text], [n])[0, 0] for n in names])

        return float(m.preference_share(confidences(test_in), confidences(test_out))[0])


def _group_order(value: str) -> tuple:
    """Natural order of analysis groups: positions start, middle, end; length bins by their lower edge."""
    positions = {"start": 0, "middle": 1, "end": 2}
    if value in positions:
        return (0, positions[value], "")
    head = value.split("-")[0].rstrip("+")
    return (1, int(head), "") if head.isdigit() else (2, 0, value)
