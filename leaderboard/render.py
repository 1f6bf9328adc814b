"""The board's tables: an overview (headline metric per task), one summary table per task (its key
metrics), every metric of a task, and the agreement between models.

Each table is built once as plain rows (`Table`) and then written as markdown (`markdown_table`,
LEADERBOARD.md) or as HTML (`leaderboard.site`). Text from a results file passes through the
`text` function the caller gives: `escape` for markdown; the site leaves it as it is and lets its
templates escape every cell."""

from __future__ import annotations

import html
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from scipy.stats import kendalltau
from tabulate import tabulate

from harness.core.results import Headline, Metric, TaskEntry
from leaderboard.collect import BoardEntry

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()|~])")

Text = Callable[[str], str]


def escape(text: str) -> str:
    """Text from a results file, inert in a markdown table: HTML entities for & < >, a backslash
    before every markdown special character, whitespace (newlines too) collapsed to one space."""
    flat = html.escape(" ".join(str(text).split()), quote=False)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", flat)


def plain(text: str) -> str:
    """Text from a results file as it is, whitespace collapsed (for the site, whose templates escape)."""
    return " ".join(str(text).split())


@dataclass
class Table:
    """A table as plain cells. `numeric[i]`: column i holds numbers (the site sorts it as numbers)."""

    headers: list[str]
    rows: list[list[str]]
    numeric: list[bool] = field(default_factory=list)


def markdown_table(table: Table) -> str:
    return tabulate(table.rows, headers=table.headers, tablefmt="github", disable_numparse=True)


def fmt(value: float | None, whole: bool = False) -> str:
    """A number with 3 decimals; without decimals when `whole` (a count, `count_metrics`) and it is one."""
    if value is None:
        return "n/a"
    return f"{value:.0f}" if whole and value.is_integer() else f"{value:.3f}"


def fmt_metric(metric: Metric, interval: bool = False, whole: bool = False) -> str:
    """A metric's value (without decimals when `whole`: a count, `count_metrics`), as `mean ± std`
    when it carries its spread over seeds (`std`), followed by its interval `[low, high]` when
    `interval` and it has one; `≥ value` when the value reached the most its measurement could show
    (`Metric.ceiling`: an audit whose every guess was right)."""
    cell = fmt(metric.value, whole)
    if metric.at_ceiling:
        cell = f"≥ {cell}"
    if metric.std is not None and metric.value is not None:
        cell += f" ± {fmt(metric.std)}"
    if interval and metric.ci_low is not None:
        cell += f" [{fmt(metric.ci_low)}, {fmt(metric.ci_high)}]"
    return cell


def model_label(name: str, identity: str, text: Text = escape) -> str:
    """A model's name with the first 8 characters of its identity."""
    return f"{text(name)} ({text(identity[:8])})"


LIMIT_MARK = "†"


def limit_mark(limits) -> str:
    """` † limit N` after the label of a model whose shown run(s) were made with `--limit N` (several
    limits joined by commas); empty for full runs."""
    shown = sorted({limit for limit in limits if limit is not None})
    return f" {LIMIT_MARK} limit {', '.join(map(str, shown))}" if shown else ""


CHANGED_MARK = "‡"


def changed_mark(item: BoardEntry) -> str:
    """` ‡` after a real model's run whose settings differ from the task's defaults (`BoardEntry.changed_settings`)."""
    return f" {CHANGED_MARK}" if item.changed_settings else ""


NULL_MARK = "○"
NULL_LEGEND = (f"{NULL_MARK} a null control: membership of the reference split, which only membench's reference "
               "checkpoints were trained on; a real model cannot tell its halves apart, so these sit at chance by "
               "construction (AUC 0.5, members = non-members). Its memorization with known truth is the "
               "finetune column: a copy trained on known members.")


def null_mark(item: BoardEntry) -> str:
    """` ○` after a real model's run that is a null control (`BoardEntry.null_control`)."""
    return f" {NULL_MARK}" if item.null_control else ""


UNVERIFIED_MARK = "◇"
UNVERIFIED_LEGEND = (f"{UNVERIFIED_MARK} unverified: the results file carries no records of this run (made before "
                     "membench wrote them), so its numbers cannot be recomputed (`membench verify`); taken on trust.")


def unverified_mark(item: BoardEntry) -> str:
    """` ◇` after a finished run whose numbers cannot be recomputed: its results file has no records of it
    (`TaskEntry.verifiable`)."""
    return f" {UNVERIFIED_MARK}" if item.entry.status == "ok" and not item.entry.verifiable else ""


SERVED_MARK = "⊘"
SERVED_LEGEND = (f"{SERVED_MARK} served, not hashed: scored through a completions server (`--base-url`), whose weights "
                 "membench cannot hash; the row names what the server said it served and the tokenizer it was "
                 "checked against, not the weights it computed with.")


def served_mark(item: BoardEntry) -> str:
    """` ⊘` after a run scored through a completions server (`BoardEntry.served`): its weights are not hashed."""
    return f" {SERVED_MARK}" if item.served else ""


WARNING_MARK = "⚠"


def warning_mark(item: BoardEntry) -> str:
    """` ⚠` after a finished run that carries a warning (`TaskEntry.warnings`: e.g. members and non-members
    told apart without the model, or dataset inference's IID guard rejecting); the lines themselves are
    listed below the task's table (`warning_notes`)."""
    return f" {WARNING_MARK}" if item.entry.status == "ok" and item.entry.warnings else ""


def entry_label(item: BoardEntry, text: Text = escape) -> str:
    """`model_label` of a board entry, marked when it comes from a run with `--limit`, when a real
    model's run changed settings from the task's defaults, is a null control, or warns."""
    return (model_label(item.model_name, item.model_identity, text) + limit_mark([item.limit]) + changed_mark(item)
            + null_mark(item) + warning_mark(item))


def changed_notes(items: list[BoardEntry], text: Text = escape, task: bool = True) -> list[str]:
    """`<model>, <task>: <setting>, ...` for each of `items` marked ‡ (`task`: name the task too)."""
    return [f"{model_label(b.model_name, b.model_identity, text)}{', ' + text(b.entry.name) if task else ''}: "
            f"{text(', '.join(b.changed_settings))}" for b in items if b.changed_settings]


CHANGED_LEGEND = (f"{CHANGED_MARK} settings changed from the task's defaults (cut to fit, or chosen): not "
                  "comparable with runs at the defaults; the task cards give the defaults.")


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


def count_metrics(board: list[BoardEntry]) -> frozenset[tuple[str, str]]:
    """(task, metric name) of the board's counts (epochs, ranks, targets): metrics whose value is a
    whole number, without an interval or a spread over seeds, in every run on the board that has
    one, and beyond 0 and 1 in some (whole values within [0, 1] could as well be a rate or a p-value
    at its bound). They print without decimals; a metric that is whole only in some runs (an AUC of
    1) keeps its decimals everywhere, so that a column reads alike."""
    whole: dict[tuple[str, str], bool] = {}
    beyond_one: set[tuple[str, str]] = set()
    for item in board:
        for metric in item.entry.metrics:
            if metric.value is not None:
                key = (item.entry.name, metric.name)
                whole[key] = whole.get(key, True) and (metric.value.is_integer() and metric.std is None
                                                       and metric.ci_low is None and metric.ci_high is None)
                if abs(metric.value) > 1:
                    beyond_one.add(key)
    return frozenset(key for key, is_whole in whole.items() if is_whole and key in beyond_one)


def headline_value(item: BoardEntry, head: Headline | None = None, interval: bool = False,
                   counts: frozenset[tuple[str, str]] = frozenset()) -> str:
    """The value of `head` (default: the entry's headline) in an entry's metrics, formatted; without
    decimals when it is one of `counts` (`count_metrics`) or its headline says it is a count."""
    entry = item.entry
    if entry.status == "skipped":
        return "skipped"
    shown = head or entry.headline
    reached = epoch_reached(item, shown)
    metric = entry.headline_metric(reached or shown)
    if metric is None:
        return shown.absent if shows_absent(entry, shown) else "n/a"
    whole = (entry.name, metric.name) in counts or (shown is not None and shown.count)
    value = fmt_metric(metric, interval, whole)
    return value if reached is None else f"{value} {short_mark(reached)}"


def number(value: str | None) -> float | None:
    """A tag value as a finite number; None when it is not one."""
    try:
        parsed = float(value)
    except (TypeError, ValueError):
        return None
    return parsed if math.isfinite(parsed) else None


def shows_absent(entry: TaskEntry, head: Headline | None) -> bool:
    """True when `entry`'s missing value of `head` reads as `head.absent` (∞ for a claim no DP run made): `head`
    has one and `entry` has no metric of its name at any tags; where it has one elsewhere, the gap is n/a."""
    return head is not None and bool(head.absent) and not any(m.name == head.metric for m in entry.metrics)


def points_along(metrics: list[Metric], head: Headline, axis_tag: str | None) -> list[tuple[float, Metric]]:
    """(axis tag value, metric) of each of `metrics` that `head` names, whatever the axis tag,
    sorted by the tag value; metrics without a value, or without a numeric axis tag, are left out.
    Without an axis tag every point is at 0."""
    fixed = {k: v for k, v in head.tags.items() if k != axis_tag}
    points = []
    for metric in metrics:
        if metric.name != head.metric or metric.value is None:
            continue
        if all(metric.tags.get(k) == v for k, v in fixed.items()):
            x = number(metric.tags.get(axis_tag)) if axis_tag else 0.0
            if x is not None:
                points.append((x, metric))
    return sorted(points, key=lambda point: (point[0], point[1].value))


EPOCH_TAG = "epoch"  # the tag of a metric measured after so many epochs of fine-tuning (privacy, finetune)


def epoch_reached(item: BoardEntry, head: Headline | None) -> Headline | None:
    """For a run that stopped short of `head`'s epoch (a real model fine-tuned for 1 epoch under a column
    "8 epochs"): `head` at the last epoch the run evaluated, the metric's other tags as `head` names them;
    None when `head` names no epoch, the run has it, or has no metric of it after epoch 1 or later (epoch 0
    is the model before fine-tuning, not a shorter fine-tuning). The board shows that value marked
    (`short_mark`) instead of n/a: what the run measured, never mistaken for the column's."""
    if head is None or EPOCH_TAG not in head.tags or item.entry.headline_metric(head) is not None:
        return None
    wanted = number(head.tags[EPOCH_TAG])
    shorter = [metric for epoch, metric in points_along(item.entry.metrics, head, EPOCH_TAG)
               if wanted is not None and 1 <= epoch < wanted]  # sorted by epoch: the last reached is last
    if not shorter:
        return None
    return head.model_copy(update={"tags": {**head.tags, EPOCH_TAG: shorter[-1].tags[EPOCH_TAG]}})


def short_mark(reached: Headline) -> str:
    """`(epoch N)` after a value of a run that stopped at epoch N, short of its column's (`epoch_reached`)."""
    return f"(epoch {reached.tags[EPOCH_TAG]})"


SHORT_LEGEND = ("(epoch N) after a value: the run stopped after N epochs, short of the column's; the value is what "
                "it measured after its last epoch, not comparable with runs that reached the column's epochs.")


def short_runs(items: list[BoardEntry], heads: list[Headline | None]) -> bool:
    """True when a value of `items` under one of `heads` is shown at a shorter epoch (`epoch_reached`)."""
    return any(b.entry.status == "ok" and epoch_reached(b, head or b.entry.headline) is not None
               for b in items for head in heads)


NEVER = datetime.min.replace(tzinfo=timezone.utc)  # the creation time of an entry that records none


def head_key(head: Headline) -> tuple:
    """What a key metric measures (its metric and tags; not its label or display settings)."""
    return head.metric, tuple(sorted(head.tags.items()))


def task_heads(task: str, board: list[BoardEntry]) -> list[Headline]:
    """A task's key metrics: the `summary` of its newest version's newest run, then each key metric that
    another run of that version names beyond it (newest first; a summary can depend on a run's settings:
    privacy_extraction's audited and claimed ε are key metrics of the runs that audit or claim); else its
    headline. The newest run names them as the task does today: a label renamed without a new version
    (the board's words, not what was computed) reaches the board with the next run, whatever older files say."""
    items = sorted((b for b in board if b.entry.name == task),
                   key=lambda b: (b.entry.version, b.created_at or NEVER), reverse=True)
    with_summary = [b for b in items if b.entry.summary]
    if with_summary:
        heads = list(with_summary[0].entry.summary)
        named = {head_key(h) for h in heads}
        for item in (b for b in with_summary[1:] if b.entry.version == with_summary[0].entry.version):
            beyond = [h for h in item.entry.summary if head_key(h) not in named]
            heads += beyond
            named |= {head_key(h) for h in beyond}
        return heads
    return next(([b.entry.headline] for b in items if b.entry.headline), [])


def short_names(tasks: list[str]) -> dict[str, str]:
    """A short column name per task: the first word of its name (`mink` for `mink_membership`)
    where no other task shares it, else the whole name."""
    first = {task: task.split("_")[0] for task in tasks}
    return {task: word if list(first.values()).count(word) == 1 else task for task, word in first.items()}


def board_models(board: list[BoardEntry]) -> list[tuple[str, str, str, float | None]]:
    """(name, identity, kind, sparsity) of every model on the board, sorted by name."""
    return sorted({(b.model_name, b.model_identity, b.model_kind, b.sparsity) for b in board}, key=lambda m: m[:3])


GROUPS = (("real", "Real models"), ("control", "Reference controls"))
CONTROLS_NOTE = ("The benchmark's self-test, not contestants: checkpoints membench trains itself with known "
                 "membership and bias, and untrained twins; `membench run` checks that each lies in its expected "
                 "direction (more training, more memorization; untrained at chance).")


def by_group(board: list[BoardEntry]) -> dict[str, list[BoardEntry]]:
    """The board's entries by group (`GROUPS`): the real models', then the reference controls'."""
    return {"real": [b for b in board if not b.control], "control": [b for b in board if b.control]}


def overview(board: list[BoardEntry], text: Text = escape, interval: bool = False,
             group: list[BoardEntry] | None = None) -> Table:
    """One row per model, one column per task (its headline metric, under the task's short name and
    its better direction). `group`: only these entries' models get rows (`by_group`); the columns are
    the whole board's, so that every group's table has the same."""
    tasks = sorted({b.entry.name for b in board})
    short = short_names(tasks)
    headers = {}
    for task in tasks:
        heads = [b.entry.headline for b in board if b.entry.name == task and b.entry.headline]
        headers[task] = f"{short[task]} {heads[0].direction()}" if heads else short[task]
    pruned = any(b.sparsity is not None for b in board)  # the column appears with the first pruned model
    shown = board if group is None else group
    models = board_models(shown)
    # A model's label is marked when any of its shown runs had `--limit`; where it also has full
    # runs, the values from limited runs carry the mark as well.
    limits = {(name, identity): [b.limit for b in shown if (b.model_name, b.model_identity) == (name, identity)]
              for name, identity, *_ in models}
    mixed = {key for key, found in limits.items() if None in found and any(x is not None for x in found)}
    counts = count_metrics(board)
    cells = {(b.model_identity, b.model_name, b.entry.name):
             headline_value(b, interval=interval, counts=counts)
             + (f" {LIMIT_MARK}" if b.limit is not None and (b.model_name, b.model_identity) in mixed else "")
             + changed_mark(b) + null_mark(b) + unverified_mark(b) + served_mark(b) for b in shown}
    rows = [[model_label(name, identity, text) + limit_mark(limits[name, identity]), text(kind)]
            + ([fmt(sparsity) if sparsity is not None else ""] if pruned else [])
            + [cells.get((identity, name, t), "") for t in tasks] for name, identity, kind, sparsity in models]
    header_row = ["model", "kind"] + (["sparsity"] if pruned else []) + [text(headers[t]) for t in tasks]
    numeric = [False, False] + ([True] if pruned else []) + [True] * len(tasks)
    return Table(header_row, rows, numeric)


def overview_legend(board: list[BoardEntry], text: Text = escape) -> list[str]:
    """One line per overview column: the task's short name, its name and its headline in words."""
    tasks = sorted({b.entry.name for b in board})
    short = short_names(tasks)
    lines = []
    for task in tasks:
        head = next((b.entry.headline for b in board if b.entry.name == task and b.entry.headline), None)
        what = f"{text(head.label)}, {better_in_words(head)}" if head else "no headline metric"
        lines.append(f"{text(short[task])}: {text(task)}, {what}")
    return lines


def better_in_words(head: Headline) -> str:
    return f"{head.better} is better" if head.ideal is None else f"closest to {head.ideal:g} is best"


def overview_table(board: list[BoardEntry], group: list[BoardEntry] | None = None) -> str:
    return markdown_table(overview(board, group=group))


def summary(task: str, board: list[BoardEntry], text: Text = escape, group: list[BoardEntry] | None = None
            ) -> Table | None:
    """A row per model that ran `task` (of `group`'s entries, default: all), a column per key metric
    (`task_heads`, from the whole board), with its interval; skipped runs are left out (`skipped_notes`).
    None when no run finished."""
    items = sorted((b for b in (board if group is None else group) if b.entry.name == task and b.entry.status == "ok"),
                   key=lambda b: (b.model_name, b.model_identity))
    heads = task_heads(task, board)
    if not items:
        return None
    counts = count_metrics(board)
    rows = [[entry_label(b, text) + unverified_mark(b) + served_mark(b)]
            + [headline_value(b, head, interval=True, counts=counts) for head in heads]
            for b in items]
    headers = ["model"] + [f"{text(head.label)} {head.direction()}" for head in heads]
    return Table(headers, rows, [False] + [True] * len(heads))


def summary_table(task: str, board: list[BoardEntry], group: list[BoardEntry] | None = None) -> str | None:
    table = summary(task, board, group=group)
    return None if table is None else markdown_table(table)


def all_metrics(task: str, board: list[BoardEntry], text: Text = escape) -> Table:
    """Every metric of one task: a row per (model, tags), a column per metric name."""
    items = [b for b in board if b.entry.name == task and b.entry.status == "ok"]
    metric_names = list(dict.fromkeys(m.name for b in items for m in b.entry.metrics))
    tag_keys = list(dict.fromkeys(k for b in items for m in b.entry.metrics for k in m.tags))
    counts = count_metrics(board)
    rows = []
    for item in items:
        grouped: dict[tuple, dict] = {}
        for metric in item.entry.metrics:
            key = tuple(metric.tags.get(k, "") for k in tag_keys)
            grouped.setdefault(key, {})[metric.name] = metric
        for key, by_name in grouped.items():
            row = [entry_label(item, text), str(item.entry.version), str(item.runs)] + [text(v) for v in key]
            row += ["" if by_name.get(name) is None else fmt_metric(by_name[name], True, (task, name) in counts)
                    for name in metric_names]
            rows.append(row)
    headers = ["model", "version", "runs"] + [text(k) for k in tag_keys + metric_names]
    numeric = [False, True, True] + [False] * len(tag_keys) + [True] * len(metric_names)
    return Table(headers, rows, numeric)


def skipped_notes(task: str, board: list[BoardEntry], text: Text = escape) -> list[str]:
    """`skipped <model>: <reason>` for each skipped run of `task`."""
    return [f"skipped {entry_label(b, text)}: {text(b.entry.skip_reason or '')}"
            for b in board if b.entry.name == task and b.entry.status == "skipped"]


def warning_notes(task: str, board: list[BoardEntry], text: Text = escape) -> list[str]:
    """`warning <model>: <line>` for each warning a finished run of `task` carries (`TaskEntry.warnings`,
    e.g. mink_membership's: members and non-members told apart without the model)."""
    return [f"warning {entry_label(b, text)}: {text(line)}"
            for b in board if b.entry.name == task and b.entry.status == "ok" for line in b.entry.warnings]


def task_table(task: str, board: list[BoardEntry]) -> str:
    """Every metric of one task as markdown, with a line per skipped run below."""
    table = all_metrics(task, board)
    body = markdown_table(table) if table.rows else "_no results yet_"
    notes = "".join(f"\n- {note}" for note in skipped_notes(task, board))
    return body + ("\n" + notes if notes else "")


def agreement(task: str, board: list[BoardEntry], text: Text = escape) -> Table | None:
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
            rows.append([text(series), entry_label(first, text), entry_label(second, text), str(len(shared)),
                         fmt(tau.statistic), fmt(tau.pvalue)])
    if not rows:
        return None
    return Table(["series", "model A", "model B", "items", "Kendall tau", "p"], rows,
                 [False, False, False, True, True, True])


def agreement_table(task: str, board: list[BoardEntry]) -> str | None:
    table = agreement(task, board)
    return None if table is None else markdown_table(table)
