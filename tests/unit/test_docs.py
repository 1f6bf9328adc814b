"""Docs that cannot rot silently (issue 43): every relative link in README.md, docs/, the task cards
and LEADERBOARD.md resolves (to a file, and to a heading where it names an anchor), every
`membench <command> --flag` they show exists in the parser, and README's task table names every
registered task at its version."""

from __future__ import annotations

import argparse
import re
from functools import cache
from pathlib import Path

from harness.app.parser import build_parser
from harness.app.registry import discover

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "LEADERBOARD.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "tasks").glob("*/README.md"))]
FENCE = re.compile(r"^(```|~~~)(\w*)[^\n]*\n(.*?)^\1[ \t]*$", re.M | re.S)
INLINE = re.compile(r"`([^`]+)`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^()\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
# `membench` (or `-m harness`, as under accelerate launch and torchrun) as a program, not a word of a name
PROGRAM = re.compile(r"(?:^|(?<=[\s/]))(?:membench|-m\s+harness)(?=\s|$)")
COMMAND_END = re.compile(r"\s(?:\||&&|;|#|>)(?=\s|$)")


def prose(text: str) -> str:
    """The text without its fenced code blocks (where a link or a heading is not one)."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: the rendered text lowercased, punctuation (but `-`
    and `_`) dropped, spaces turned to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


@cache
def anchors(path: Path) -> set[str]:
    """Every heading anchor of a markdown file (repeated headings get -1, -2, ... as on GitHub)."""
    found: set[str] = set()
    for heading in HEADING.findall(prose(path.read_text(encoding="utf-8"))):
        base, n = slug(heading), 0
        while (name := base if n == 0 else f"{base}-{n}") in found:
            n += 1
        found.add(name)
    return found


def broken_links(path: Path) -> list[str]:
    """`<file>: <target>` for each relative link of a markdown file that names no existing file,
    or a heading its file lacks."""
    broken = []
    for target in LINK.findall(INLINE.sub("", prose(path.read_text(encoding="utf-8")))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not checked here
            continue
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        if not resolved.exists():
            broken.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    return broken


@cache
def command_flags() -> dict[str, set[str]]:
    """{command: its flags} of every `membench` command (`reference build` as one command; the
    task settings are flags of `evaluate` and `export-lm-eval`), and `""`: the global ones."""
    def options(parser: argparse.ArgumentParser) -> set[str]:
        return {flag for action in parser._actions for flag in action.option_strings}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        for action in subcommands:
            for name, sub in action.choices.items():
                walk(sub, f"{prefix} {name}".strip())
        if not subcommands or prefix:
            flags[prefix] = options(parser)

    parser = build_parser()
    flags: dict[str, set[str]] = {}
    walk(parser, "")
    flags[""] = options(parser)
    return flags


def shown_commands(text: str) -> list[str]:
    """Every `membench ...` command line in a markdown text: the logical lines (`\\` continued) of
    its code blocks but Python's, and its inline code spans, each from the program name to the end
    of its command (a pipe, `&&`, `;`, a comment)."""
    pieces = []
    for match in FENCE.finditer(text):
        if match.group(2) not in ("python", "json", "yaml"):
            pieces += match.group(3).replace("\\\n", " ").splitlines()
    pieces += [" ".join(span.split()) for span in INLINE.findall(prose(text))]
    commands = []
    for piece in pieces:
        for start in PROGRAM.finditer(piece):
            before = piece[:start.start()].split()[-1:]
            if before and before[0].startswith("--"):  # a flag's value (`lm_eval --tasks membench`)
                continue
            rest = piece[start.end():]
            commands.append(COMMAND_END.split(rest, 1)[0].strip())
    return commands


def unknown_flags(path: Path) -> list[str]:
    """`<file>: membench <command> <flag>` for each flag a shown command gives that its parser lacks
    (and each command that does not exist)."""
    flags, unknown = command_flags(), []
    for command in shown_commands(path.read_text(encoding="utf-8")):
        words = [w.strip("[]()\"'") for w in command.split()]
        while words and words[0].startswith("-"):  # global options before the command: `membench -v evaluate`
            if words[0].split("=")[0] not in flags[""]:
                unknown.append(f"{path.relative_to(ROOT)}: membench {words[0]}")
            words.pop(0)
        if not words or not re.fullmatch(r"[a-z][a-z-]*", words[0]):
            continue  # the program named, no command shown (`membench`, `membench ...`)
        name = words[0] if words[0] != "reference" or len(words) < 2 else f"reference {words[1]}"
        if name not in flags:
            unknown.append(f"{path.relative_to(ROOT)}: membench {name} (no such command)")
            continue
        for word in words[1:]:
            flag = word.split("=")[0]
            if flag.startswith("--") and flag not in flags[name]:
                unknown.append(f"{path.relative_to(ROOT)}: membench {name} {flag}")
    return unknown


# Flags of other programs that the docs name alone in inline code (accelerate's, lm-eval's, the
# official StereoSet code's, a bench script's); every other inline `--flag` must be membench's.
OTHER_PROGRAMS_FLAGS = {"--multi_gpu", "--model_args", "--unconditional_start_token", "--make-tiny-bert",
                        # bench/gpu_check.py's (docs/gpu.md)
                        "--evaluate-args", "--task-args", "--shape", "--prepare", "--markdown"}


def unknown_inline_flags(path: Path) -> list[str]:
    """`<file>: <flag>` for each flag in an inline code span that starts with one (`--lengths 32,64`,
    no program named) that no membench command has (`--blind-*`: a flag of that prefix)."""
    known = set().union(*command_flags().values()) | OTHER_PROGRAMS_FLAGS
    unknown = []
    for span in INLINE.findall(prose(path.read_text(encoding="utf-8"))):
        if not span.startswith("--"):
            continue
        for word in span.split():
            flag = word.split("=")[0].strip("[]()")
            if not flag.startswith("--"):
                continue
            if flag.endswith("*") and any(k.startswith(flag[:-1]) for k in known) or flag in known:
                continue
            unknown.append(f"{path.relative_to(ROOT)}: {flag}")
    return unknown


def test_every_relative_link_in_the_docs_resolves():
    assert (ROOT / "docs").is_dir() and len(DOCS) > 10
    broken = [line for path in DOCS for line in broken_links(path)]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_every_membench_flag_the_docs_show_exists():
    shown = [c for path in DOCS for c in shown_commands(path.read_text(encoding="utf-8"))]
    assert sum(c.startswith("evaluate") for c in shown) > 10  # the docs do show commands
    unknown = [line for path in DOCS for line in unknown_flags(path) + unknown_inline_flags(path)]
    assert not unknown, "flags or commands the parser lacks:\n" + "\n".join(unknown)


def test_the_checks_find_a_broken_link_a_missing_anchor_and_an_unknown_flag(tmp_path, monkeypatch):
    """The checks themselves, on a page with one of each fault (beside correct ones)."""
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "ok.md").write_text("# Top\n\n## Two words, `code`\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[fine](ok.md) [fine](ok.md#two-words-code) [web](https://example.org/x) [gone](nope.md)\n"
        "[bad anchor](ok.md#three) `membench evaluate --model M --limit 5 | tail -n 1` `--lengths 32,64`\n"
        "`--lenghts 32` `--blind-*` `pip install --no-deps x`\n\n"
        "```bash\n.venv/bin/membench evaluate --model M \\\n    --tasks all --no-such-flag\n"
        "membench reference build --quick && membench frobnicate\n```\n", encoding="utf-8")
    assert broken_links(page) == ["page.md: nope.md (no such file)", "page.md: ok.md#three (no such heading)"]
    assert unknown_flags(page) == ["page.md: membench evaluate --no-such-flag",
                                   "page.md: membench frobnicate (no such command)"]
    assert unknown_inline_flags(page) == ["page.md: --lenghts"]


def test_the_readme_task_table_names_every_registered_task_at_its_version():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| \[`(\w+)`\]\(tasks/\1/README\.md\) \| (\d+) \|", readme, re.M)
    assert {name: int(version) for name, version in rows} == {name: task.VERSION for name, task in discover().items()}


def test_every_task_card_names_its_task_at_its_version():
    for name, task in discover().items():
        first = (ROOT / "tasks" / name / "README.md").read_text(encoding="utf-8").splitlines()[0]
        assert first == f"# Task card: `{name}` (version {task.VERSION})", first
