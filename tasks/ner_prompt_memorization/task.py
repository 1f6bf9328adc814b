"""Task `ner_prompt_memorization`: memorized names in NER models, elicited with prompts.

Xia et al. 2024, "Exploring prompts to elicit memorization in masked language model-based named
entity recognition": a name's confidence is compared between names in and out of the model's
training data; M-MEM is the share of (in-train, out-train) pairs where the in-train name is more
confident. Confidence = the mean over the name's subword tokens of the max of P over the labels of
the entity type X (PER by default, or LOC, ORG, MISC): max(P(B-X), P(I-X)) for a BIO model, as in
the paper; every label of X for IO, IOBES and BILOU models (`entities.entity_label_set`). Prompts
are chosen on dev and reported on test. `score` runs the model (the confidences, with the PTE
trajectories that need it at every step); `report.py` computes every number from them. Definitions:
README.md beside this file.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, PositiveInt

from harness.core.model_types import LoadedModel, ModelKind
from harness.core.records import Records
from harness.core.results import Headline
from harness.core.task import PaperPreset, RunContext, Task, TaskConfig, TaskResult, register
from harness.reference.ner_data import SHARED_NAMES
from tasks.ner_prompt_memorization import strategies as st
from tasks.ner_prompt_memorization.data import NerData, load_ner_data
from tasks.ner_prompt_memorization.entities import EntityLabels, entity_label_set
from tasks.ner_prompt_memorization.report import chosen_index, report


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
    # The paper samples in-train and out-train names from one source (Wikidata), so their words can overlap
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
    # --length-bins groups the prompts of the length analysis only
    REPORT_ONLY = frozenset({"length_bins"})
    Config = NerConfig
    NOT_SERVED = "it reads a token classifier's label confidences, which a completions server does not return"

    def load_data(self, config: NerConfig, context: RunContext) -> NerData:
        return load_ner_data(config.names, config.prompts, context.limit, config.entity_type)

    def check_model(self, model: LoadedModel, config: NerConfig) -> None:
        entity_labels(model, config.entity_type)

    def score(self, model: LoadedModel, data: NerData, config: NerConfig, context: RunContext) -> Records:
        """The confidence of every (prompt, name) the strategies read (records: `tasks.ner_prompt_memorization.report`),
        scored in the calls and the order of version 5's one-stage run, so its batches and numbers stay. PTE
        needs the model at every step: its trajectories are found here and recorded with their confidences."""
        labels = entity_labels(model, config.entity_type)
        table = st.ConfidenceTable(model.model, model.tokenizer, labels.ids, context.batch_size, context.progress)
        names = {f"{split}_{side.split('_')[0]}": list(data.names.names[split][side])
                 for split in ("dev", "test") for side in ("in_train", "out_train")}
        dev_in, dev_out, test_in, test_out = names["dev_in"], names["dev_out"], names["test_in"], names["test_out"]
        every, test_names = data.names.all_names(), test_in + test_out
        typed = data.prompts.typed
        texts = [p.text for p in typed]
        table.get(texts, every)  # every (typed prompt, name) in one batched pass
        dev = table.m_mem(texts, dev_in, dev_out)

        def confidences(text: str, wanted: list[str]) -> dict[str, float]:
            return dict(zip(wanted, table.get([text], wanted)[0].tolist()))

        # Baselines: the name alone, One-PT (in-train names scored first, as `m_mem` scores them), Mix-PT.
        baselines = []
        for key, prompt in (("no_prompt", data.prompts.no_prompt), ("one_prompt", data.prompts.one_prompt)):
            table.get([prompt.text], test_in), table.get([prompt.text], test_out)
            baselines.append({"id": key, "text": prompt.text, "confidences": confidences(prompt.text, test_names)})
        mix = data.prompts.mix
        assignment = st.mix_assignment(every, len(mix), context.seed)
        for k, prompt in enumerate(mix):
            table.get([prompt.text], [n for n in test_names if assignment[n] == k])
        draws = [{"id": n, "prompt": assignment[n], "confidence": float(table.get([mix[assignment[n]].text], [n])[0, 0])}
                 for n in test_names]
        # PTE: token elimination from the best and the worst prompt on dev (the first in file order among ties).
        trajectories = {}
        for strategy, k, keep_best in (("pte_best", int(np.argmax(dev)), True), ("pte_worst", int(np.argmin(dev)), False)):
            steps = st.eliminate_tokens(table, typed[k], keep_best, dev_in, dev_out)
            chosen = steps[chosen_index([s.dev_m_mem for s in steps], keep_best)].text
            table.m_mem([chosen], test_in, test_out)  # the chosen prompt first, then its trajectory
            table.m_mem([s.text for s in steps], test_in, test_out)
            trajectories[strategy] = [{"id": s.text, "removed": s.removed, "confidences": confidences(s.text, every)}
                                      for s in steps]
        return {
            "names": names,
            "prompts": [{"id": p.prompt_id, "text": p.text, "type": p.type, "name_position": p.name_position,
                         "n_tokens": p.n_tokens, "confidences": confidences(p.text, every)} for p in typed],
            "baselines": baselines,
            "mix_prompts": [p.text for p in mix], "mix_draws": draws,
            **trajectories,
            "scored_sentences": table.n_scored,
            "facts": {"names_source": data.names.source, "prompts_source": data.prompts.source,
                      "labels": labels.names, "label_scheme": labels.scheme,
                      "duplicate_names": data.names.duplicates},
        }

    def report(self, records: Records, config: NerConfig, seed: int) -> TaskResult:
        return report(records, config.length_bins)
