"""Markdown tables of the board: an overview (headline metric per task) and one table per task."""

from __future__ import annotations

import html
import itertools
import re

from scipy.stats import kendalltau
from tabulate import tabulate

from harness.results import Headline, Metric
from leaderboard.collect import BoardEntry

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()|~])")


def escape(text: str) -> str:
    """Text from a results file, inert in a markdown table: HTML entities for & < >, a backslash
    before every markdown special character, whitespace (newlines too) collapsed to one space."""
    flat = html.escape(" ".join(str(text).split()), quote=False)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", flat)


def fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def fmt_metric(metric: Metric) -> str:
    """A metric's value, as `mean ± std` when it carries its spread over seeds (`std`)."""
    if metric.std is None or metric.value is None:
        return fmt(metric.value)
    return f"{fmt(metric.value)} ± {fmt(metric.std)}"


def model_label(name: str, identity: str) -> str:
    """A model's name with the first 8 characters of its identity, escaped."""
    return f"{escape(name)} ({escape(identity[:8])})"


LIMIT_MARK = "†"


def limit_mark(limits) -> str:
    """` † limit N` after the label of a model whose shown run(s) were made with `--limit N` (several
    limits joined by commas); empty for full runs."""
    shown = sorted({limit for limit in limits if limit is not None})
    return f" {LIMIT_MARK} limit {', '.join(map(str, shown))}" if shown else ""


def entry_label(item: BoardEntry) -> str:
    """`model_label` of a board entry, marked when it comes from a run with `--limit`."""
    return model_label(item.model_name, item.model_identity) + limit_mark([item.limit])


def limit_legend(items: list[BoardEntry], overview: bool = False) -> str | None:
    """The line that explains the mark, when one of `items` comes from a run with `--limit`; else None.
    `overview`: also explain the mark after a value (`overview_table`)."""
    if not any(item.limit is not None for item in items):
        return None
    cells = (f" A {LIMIT_MARK} after a value: that task's run had `--limit`, where the model's other runs did not."
             if overview else "")
    return (f"{LIMIT_MARK} limit N: run with `--limit N` (each task's data cut to about N samples; the task "
            "cards say how): not comparable with full runs, and `membench validate --strict` refuses it "
            f"for submission.{cells}")


def headline_value(item: BoardEntry, head: Headline | None = None) -> str:
    """The value of `head` (default: the entry's headline) in an entry's metrics, formatted."""
    entry = item.entry
    if entry.status == "skipped":
        return "skipped"
    metric = entry.headline_metric(head)
    return "n/a" if metric is None else fmt_metric(metric)


def overview_table(board: list[BoardEntry]) -> str:
    """One row per model, one column per task (its headline metric and the better direction)."""
    tasks = sorted({b.entry.name for b in board})
    headers = {}
    for task in tasks:
        heads = [b.entry.headline for b in board if b.entry.name == task and b.entry.headline]
        headers[task] = f"{task}: {escape(heads[0].label)} {heads[0].direction()}" if heads else task
    models = sorted({(b.model_name, b.model_identity, b.model_kind, b.sparsity) for b in board},
                    key=lambda m: m[:3])
    # A model's label is marked when any of its shown runs had `--limit`; where it also has full
    # runs, the values from limited runs carry the mark as well.
    limits = {(name, identity): [b.limit for b in board if (b.model_name, b.model_identity) == (name, identity)]
              for name, identity, *_ in models}
    mixed = {key for key, found in limits.items() if None in found and any(x is not None for x in found)}
    cells = {(b.model_identity, b.model_name, b.entry.name):
             headline_value(b) + (f" {LIMIT_MARK}" if b.limit is not None and (b.model_name, b.model_identity) in mixed
                                  else "") for b in board}
    pruned = any(sparsity is not None for *_, sparsity in models)  # the column appears with the first pruned model
    rows = [[model_label(name, identity) + limit_mark(limits[name, identity]), escape(kind)]
            + ([fmt(sparsity) if sparsity is not None else ""] if pruned else [])
            + [cells.get((identity, name, t), "") for t in tasks] for name, identity, kind, sparsity in models]
    headers_row = ["model", "kind"] + (["sparsity"] if pruned else []) + [headers[t] for t in tasks]
    return tabulate(rows, headers=headers_row, tablefmt="github", disable_numparse=True)


def summary_table(task: str, board: list[BoardEntry]) -> str | None:
    """A row per model, a column per metric the task's newest entries name in `summary`; None
    when they name none."""
    items = [b for b in board if b.entry.name == task and b.entry.status == "ok"]
    heads = next((b.entry.summary for b in sorted(items, key=lambda b: -b.entry.version) if b.entry.summary), [])
    if not heads:
        return None
    rows = [[entry_label(b)] + [headline_value(b, head) for head in heads]
            for b in sorted(items, key=lambda b: b.model_name)]
    headers = ["model"] + [f"{escape(head.label)} {head.direction()}" for head in heads]
    return tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)


def task_table(task: str, board: list[BoardEntry]) -> str:
    """Every metric of one task: a row per (model, tags), a column per metric name."""
    items = [b for b in board if b.entry.name == task and b.entry.status == "ok"]
    metric_names = list(dict.fromkeys(m.name for b in items for m in b.entry.metrics))
    tag_keys = list(dict.fromkeys(k for b in items for m in b.entry.metrics for k in m.tags))
    rows = []
    for item in items:
        grouped: dict[tuple, dict] = {}
        for metric in item.entry.metrics:
            key = tuple(metric.tags.get(k, "") for k in tag_keys)
            grouped.setdefault(key, {})[metric.name] = metric
        for key, by_name in grouped.items():
            row = [entry_label(item), item.entry.version, item.runs] + [escape(v) for v in key]
            for name in metric_names:
                metric = by_name.get(name)
                cell = "" if metric is None else fmt_metric(metric)
                if metric is not None and metric.ci_low is not None:
                    cell += f" [{fmt(metric.ci_low)}, {fmt(metric.ci_high)}]"
                row.append(cell)
            rows.append(row)
    headers = ["model", "version", "runs"] + [escape(k) for k in tag_keys + metric_names]
    table = tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True) if rows else "_no results yet_"
    skipped = [b for b in board if b.entry.name == task and b.entry.status == "skipped"]
    notes = "".join(f"\n- skipped {entry_label(b)}: {escape(b.entry.skip_reason or '')}" for b in skipped)
    return table + ("\n" + notes if notes else "")


def agreement_table(task: str, board: list[BoardEntry]) -> str | None:
    """For each per-item series of a task (`item_scores`, e.g. the test M-MEM of every prompt),
    Kendall's tau-b (SciPy) between every two models over the items both have: do the models rank
    the items alike? None when fewer than two models report a series."""
    items = [b for b in board if b.entry.name == task and b.entry.status == "ok" and b.entry.item_scores]
    rows = []
    for series in sorted({s for b in items for s in b.entry.item_scores}):
        having = [b for b in items if series in b.entry.item_scores]
        for first, second in itertools.combinations(having, 2):
            a, b = first.entry.item_scores[series], second.entry.item_scores[series]
            shared = sorted(set(a) & set(b))
            if len(shared) < 2:
                continue
            tau = kendalltau([a[k] for k in shared], [b[k] for k in shared])
            rows.append([escape(series), entry_label(first), entry_label(second), str(len(shared)),
                         fmt(tau.statistic), fmt(tau.pvalue)])
    if not rows:
        return None
    return tabulate(rows, headers=["series", "model A", "model B", "items", "Kendall tau", "p"],
                    tablefmt="github", disable_numparse=True)
