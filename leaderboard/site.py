"""`membench leaderboard`'s web board: a self-contained static site, a pure function of submissions/.

    site/index.html            a row per model, a column per task's headline (sortable, filterable)
    site/tasks/<task>.html     the task's card, plot (and those of its key metrics flagged `plot`),
                               key metrics, every metric, agreement
    site/models/<slug>.html    the model's identity, source, settings and every task's metrics
    site/board.json            what the pages show, for machines (models, their runs)
    site/plotly.min.js         plotly.js as the installed plotly package bundles it (no CDN)

HTML comes from Jinja2 templates with autoescaping on, so text from a results file reaches a page
escaped; the plots' data is embedded as JSON with Jinja2's `tojson` (which escapes `<`, `>`, `&`
and `'`) and drawn by plotly.js, whose labels get HTML-escaped text (`leaderboard.site_plots`).
The pages work from `file://` as well as from a web server: nothing is fetched at run time."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import jinja2
from markdown_it import MarkdownIt

from harness.core.errors import UserError
from harness.core.results import ResultsFile
from leaderboard.collect import BoardEntry, newest_entries, read_submissions
from leaderboard.render import (
    CHANGED_LEGEND,
    CHANGED_MARK,
    CONTROLS_NOTE,
    GROUPS,
    LIMIT_MARK,
    NULL_LEGEND,
    SERVED_LEGEND,
    SHORT_LEGEND,
    UNVERIFIED_LEGEND,
    agreement,
    all_metrics,
    better_in_words,
    board_models,
    by_group,
    changed_notes,
    count_metrics,
    fmt,
    fmt_metric,
    headline_value,
    model_label,
    overview,
    plain,
    short_names,
    short_runs,
    skipped_notes,
    summary,
    task_heads,
    warning_notes,
)
from leaderboard.site_plots import extra_figures, plotly_js, task_figure

MARKER = ".membench-site"  # a folder `membench leaderboard` may replace holds this file
CARDS = Path(__file__).resolve().parent.parent / "tasks"

_templates = jinja2.Environment(loader=jinja2.PackageLoader("leaderboard", "templates"),
                                autoescape=True, undefined=jinja2.StrictUndefined,
                                trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


@dataclass(frozen=True)
class SiteModel:
    """A model of the board: its label, its page, its board entries and the files they come from."""

    name: str
    identity: str
    kind: str
    sparsity: float | None
    slug: str
    entries: list[BoardEntry]
    files: list[tuple[str, ResultsFile]]

    @property
    def label(self) -> str:
        return model_label(self.name, self.identity, plain)

    @property
    def limits(self) -> list[int]:
        return sorted({b.limit for b in self.entries if b.limit is not None})

    @property
    def control(self) -> bool:
        """A reference control (`leaderboard.collect.is_control`), not a real model."""
        return any(b.control for b in self.entries)


def slug(name: str, identity: str) -> str:
    """A file name for a model's page: its name in safe characters and the first 12 of its identity."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:60] or "model"
    return f"{safe}-{identity[:12]}"


def site_models(board: list[BoardEntry], files: dict[str, ResultsFile]) -> list[SiteModel]:
    """The board's models, the real models' first and then the reference controls' (each group in
    board order), each with a unique page name."""
    models, used = [], set()
    for name, identity, kind, sparsity in [m for key, _ in GROUPS for m in board_models(by_group(board)[key])]:
        entries = [b for b in board if (b.model_name, b.model_identity) == (name, identity)]
        page, n = slug(name, identity), 2
        while page in used:  # same name and identity prefix, other key: number the later ones
            page, n = f"{slug(name, identity)}-{n}", n + 1
        used.add(page)
        names = sorted({b.file for b in entries})
        models.append(SiteModel(name, identity, kind, sparsity, page, entries, [(f, files[f]) for f in names]))
    return models


def card_html(task: str) -> str | None:
    """The task's card (tasks/<task>/README.md) as HTML, raw HTML in it escaped; None when it has none."""
    path = CARDS / task / "README.md"
    if not re.fullmatch(r"[a-z][a-z0-9_]*", task) or not path.is_file():
        return None
    return MarkdownIt("commonmark", {"html": False}).enable("table").render(path.read_text(encoding="utf-8"))


def row_filters(model: SiteModel) -> dict[str, str]:
    """The data-* attributes the index's filters read."""
    return {"kind": model.kind, "tasks": " ".join(sorted({b.entry.name for b in model.entries})),
            "sparsity": "dense" if model.sparsity is None else "pruned",
            "run": "limit" if model.limits else "full", "name": model.name.lower(),
            "group": "control" if model.control else "real"}


def _json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def render_site(submissions: Path) -> dict[str, bytes]:
    """Every file of the site (relative path -> bytes); a pure function of the submissions."""
    files = read_submissions(submissions)
    by_name = {path.name: results for path, results in files}
    board = newest_entries(files)
    tasks = sorted({b.entry.name for b in board})
    models = site_models(board, by_name)
    page_of = {(m.name, m.identity): f"models/{m.slug}.html" for m in models}
    short = short_names(tasks)
    heads = {t: next((b.entry.headline for b in board if b.entry.name == t and b.entry.headline), None)
             for t in tasks}
    common = {"tasks": tasks, "short": short, "n_files": len(files), "folder": submissions.name,
              "limit_mark": LIMIT_MARK, "changed_mark": CHANGED_MARK, "changed_legend": CHANGED_LEGEND}
    groups = by_group(board)
    counts = count_metrics(board)  # metrics printed without decimals on the model pages
    site: dict[str, bytes] = {}

    def page(path: str, template: str, **values) -> None:
        root = "../" * path.count("/")
        html = _templates.get_template(template).render(root=root, **common, **values)
        site[path] = html.encode("utf-8")

    table = overview(board, plain, interval=True)
    first_task_column = len(table.headers) - len(tasks)
    model_groups = [group_rows(key, title, overview(board, plain, interval=True, group=groups[key]).rows,
                               [m for m in models if m.control == (key == "control")], "model")
                    for key, title in GROUPS]
    page("index.html", "index.html", title="membench leaderboard", table=table, groups=model_groups,
         first_task_column=first_task_column, heads=heads, better=better_in_words,
         kinds=sorted({m.kind for m in models}), pruned=any(m.sparsity is not None for m in models),
         limited=any(m.limits for m in models), changed=changed_notes(groups["real"], plain),
         null_legend=NULL_LEGEND if any(b.null_control for b in groups["real"]) else None,
         short_legend=SHORT_LEGEND if short_runs(board, [None]) else None,
         unverified_legend=UNVERIFIED_LEGEND if any(b.entry.status == "ok" and not b.entry.verifiable
                                                    for b in board) else None,
         served_legend=SERVED_LEGEND if any(b.served for b in board) else None)
    for task in tasks:
        key_metrics = task_heads(task, board)
        figure, plot_note = task_figure(task, board)
        page(f"tasks/{task}.html", "task.html", title=task, task=task, card=card_html(task),
             head=heads[task], better=better_in_words, heads=key_metrics,
             summary=task_summary(task, board, groups, page_of), full=all_metrics(task, board, plain),
             agreement=agreement(task, board, plain),
             skipped=skipped_notes(task, board, plain) + warning_notes(task, board, plain),
             figure=figure, plot_note=plot_note, extras=extra_figures(task, board),
             changed=changed_notes([b for b in groups["real"] if b.entry.name == task], plain, task=False),
             null_legend=NULL_LEGEND if any(b.null_control for b in groups["real"] if b.entry.name == task) else None,
             short_legend=SHORT_LEGEND if short_runs([b for b in board if b.entry.name == task], key_metrics) else None)
    for model in models:
        page(f"models/{model.slug}.html", "model.html", title=model.label, model=model, json=_json,
             fmt=fmt, fmt_metric=fmt_metric, headline_value=headline_value, counts=counts, better=better_in_words,
             controls_note=CONTROLS_NOTE)
    site["board.json"] = (_json(board_json(models)) + "\n").encode("utf-8")
    site["board.css"] = (Path(__file__).parent / "templates" / "board.css").read_bytes()
    site["board.js"] = (Path(__file__).parent / "templates" / "board.js").read_bytes()
    site["plotly.min.js"] = plotly_js()
    site[MARKER] = b"written by `membench leaderboard`; the whole folder is replaced on each run\n"
    return site


def group_rows(key: str, title: str, rows: list[list[str]], models: list, noun: str) -> dict:
    """One group of a grouped table (`macros.table`): its key (`real`, `control`), heading, note,
    rows, and per row its page and (for the index, where `models` are `SiteModel`s) the filters'
    data; `noun` names what a row is, for the heading's count."""
    pages = [m if isinstance(m, str) else f"models/{m.slug}.html" for m in models]
    filters = [row_filters(m) for m in models if isinstance(m, SiteModel)]
    return {"key": key, "title": title, "note": CONTROLS_NOTE if key == "control" else "", "rows": rows,
            "links": pages, "filters": filters or None, "noun": noun}


def task_summary(task: str, board: list[BoardEntry], groups: dict[str, list[BoardEntry]],
                 page_of: dict[tuple[str, str], str]) -> dict | None:
    """A task's summary table in groups (the real models', the reference controls'): its columns and
    each group with rows; None when no run of the task finished."""
    whole = summary(task, board, plain)
    if whole is None:
        return None
    parts = []
    for key, title in GROUPS:
        table = summary(task, board, plain, group=groups[key])
        items = sorted((b for b in groups[key] if b.entry.name == task and b.entry.status == "ok"),
                       key=lambda b: (b.model_name, b.model_identity))
        parts.append(group_rows(key, title, table.rows if table else [],
                                [page_of[(b.model_name, b.model_identity)] for b in items], "model"))
    return {"table": whole, "groups": parts}


def board_json(models: list[SiteModel]) -> dict:
    """What the pages show, as data: per model its results files' model/run/environment and the
    shown run of each task (the newest), whole."""
    return {"models": [{"name": m.name, "identity": m.identity, "kind": m.kind, "sparsity": m.sparsity,
                        "control": m.control, "page": f"models/{m.slug}.html",
                        "files": {name: results.model_dump(mode="json", exclude={"tasks"}) for name, results in m.files},
                        "tasks": {b.entry.name: dict(b.entry.model_dump(mode="json"), runs=b.runs, file=b.file)
                                  for b in m.entries}} for m in models]}


def write_site(submissions: Path, folder: Path) -> None:
    """Render the site and put it at `folder` whole: written into a new folder beside it, then
    swapped in, so a failure leaves the old site as it was. A folder that exists and was not
    written by membench (no `.membench-site` in it) is refused, never replaced."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"--site {folder} is a file; give a folder")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / MARKER).is_file():
        raise UserError(f"--site {folder} holds files membench did not write; give an empty or new folder")
    site = render_site(submissions)
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; a site is read by a web server
    try:
        for relative, data in site.items():
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        old = folder.with_name(f".{folder.name}-old") if folder.exists() else None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
            folder.rename(old)
        staging.rename(folder)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
