"""Member / non-member texts for membership inference: JSONL file, hub dataset, or the reference corpus."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.data import HubDataset, membership_label
from harness.errors import UserError
from harness.io import read_jsonl_objects
from harness.models import looks_like_path
from harness.task import LimitTooSmall
from harness.reference.corpus import corpus_of_data, reference_corpus

TEXT_COLUMNS = ("text", "input")


@dataclass(frozen=True)
class LabeledText:
    text_id: str
    text: str
    label: int  # 1 = member (seen in training), 0 = non-member


@dataclass(frozen=True)
class MembershipData:
    texts: list[LabeledText]
    source: str


def read_jsonl(path: Path) -> list[LabeledText]:
    """Rows `{"text": str, "label": 0|1}` (optional "id"); blank lines are skipped."""
    rows = []
    for number, row in read_jsonl_objects(path):
        where = f"{path}:{number}"
        text = next((row[c] for c in TEXT_COLUMNS if c in row), None)
        if not isinstance(text, str):
            raise UserError(f"{where}: missing string field 'text'")
        if "label" not in row:
            raise UserError(f"{where}: missing field 'label'")
        rows.append(LabeledText(str(row.get("id", number)), text, membership_label(row["label"], where)))
    return rows


def read_hub(repo_id: str, split: str, text_column: str | None, label_column: str) -> list[LabeledText]:
    dataset = HubDataset(repo_id, split=split).load()
    columns = dataset.column_names
    text_column = text_column or next((c for c in TEXT_COLUMNS if c in columns), None)
    if text_column not in columns or label_column not in columns:
        raise UserError(f"{repo_id}: needs text and label columns, has {', '.join(columns)}")
    return [LabeledText(str(i), row[text_column], membership_label(row[label_column], f"{repo_id} row {i}"))
            for i, row in enumerate(dataset)]


def load_membership_data(data: str, split: str, text_column: str | None, label_column: str,
                         reference_seed: int, limit: int | None) -> MembershipData:
    """The labelled texts, checked: non-empty and both classes present. `limit` keeps the first
    ceil(limit/2) members and floor(limit/2) non-members, in file order."""
    corpus = corpus_of_data(data)
    if corpus is not None:
        texts = [LabeledText(d.doc_id, d.text, int(d.member)) for d in reference_corpus(reference_seed, corpus.name)]
        source = f"reference corpus {corpus.name} ({corpus.description}), split seed {reference_seed}"
    elif Path(data).expanduser().exists() and not Path(data).expanduser().is_dir():  # read_utf8 checks it
        texts, source = read_jsonl(Path(data).expanduser()), f"JSONL file {data}"
    elif looks_like_path(data) or data.endswith((".jsonl", ".json")):
        raise UserError(f"data file not found: {data}")
    else:
        texts, source = read_hub(data, split, text_column, label_column), f"hub dataset {data} ({split})"
    if limit is not None:
        if limit < 2:
            raise LimitTooSmall(f"--limit {limit} keeps fewer than one member and one non-member; "
                                "membership inference needs both (use --limit 2 or more)")
        members = [t for t in texts if t.label == 1][: (limit + 1) // 2]
        others = [t for t in texts if t.label == 0][: limit // 2]
        kept = {id(t) for t in members + others}
        texts = [t for t in texts if id(t) in kept]
    if not texts:
        raise UserError(f"{source}: no texts")
    if len({t.label for t in texts}) < 2:
        only = "members (label 1)" if texts[0].label == 1 else "non-members (label 0)"
        raise UserError(f"{source}: only {only}; membership inference needs both classes")
    return MembershipData(texts, source)
