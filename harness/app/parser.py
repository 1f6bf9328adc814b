"""The `membench` command line's flags: the parser of every command, the flag types, and a flag
for every setting of every registered task."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.app.registry import discover
from harness.core.task import DEFAULT_MAX_BATCH_SIZE, split_commas
from harness.model.served import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S

DESCRIPTION = "The `membench` command line. User errors: one line on stderr, exit status 2."
DEFAULT_SUBMISSIONS = Path("submissions")
DEFAULT_BOARD = Path("LEADERBOARD.md")


def add_task_config_flags(parser: argparse.ArgumentParser) -> list[str]:
    """A `--field-name` flag for every field of every registered task's Config; returns the fields."""
    from harness.core.task import is_sequence

    defaults: dict[str, dict[str, Any]] = {}  # field -> task -> its default there
    fields = {}
    for name, task in discover().items():
        for field_name, field in task.Config.model_fields.items():
            defaults.setdefault(field_name, {})[name] = field.default
            fields.setdefault(field_name, field)
    group = parser.add_argument_group("task settings (each applies to the selected tasks that have it)")
    for field_name, field in fields.items():
        group.add_argument(
            "--" + field_name.replace("_", "-"), dest=f"task__{field_name}", default=None, metavar=field_name.upper(),
            type=split_commas if is_sequence(field.annotation) else str,
            help=f"{field.description or ''} ({defaults_help(defaults[field_name])})",
        )
    return list(fields)


def defaults_help(defaults: dict[str, Any]) -> str:
    """A setting's default and the tasks that have it (task -> default), each task's where they differ:
    "default 99; tasks: a, b" or "default 99 in a, 49 in b"."""
    if len({repr(value) for value in defaults.values()}) == 1:
        return f"default {next(iter(defaults.values()))!r}; tasks: {', '.join(defaults)}"
    return "default " + ", ".join(f"{value!r} in {task}" for task, value in defaults.items())


def task_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {key.removeprefix("task__"): value for key, value in vars(args).items()
            if key.startswith("task__") and value is not None}


def int_at_least(low: int, expected: str):
    """An argparse type: an integer >= `low`, else the error `expected <expected>, got ...`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
        return value

    return parse


positive_int = int_at_least(1, "a positive integer")
non_negative_int = int_at_least(0, "an integer >= 0")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def batch_size_value(text: str) -> int | str:
    """`--batch-size`: a positive integer, or `auto` (lm-evaluation-harness's word: the largest batch
    that fits, found by trying)."""
    return "auto" if text.strip().lower() == "auto" else positive_int(text)


# What --seed seeds, and the tasks' own seeds it does not (tests/cli/test_cli.py checks that every task
# setting named *seed is named here). Both are in the results file: --seed as each task's `seed`, the
# others in its `config`.
SEED_HELP = ("seed of the run's resampling and random draws (default 0; each task's `seed` in the results file): "
             "bootstrap intervals, permutation p-values and dataset inference's relabelings (mink_membership, "
             "finetune_memorization, weat), the neighbourhood attack's draws (mink_membership), the Mix-PT prompt "
             "assignment (ner_prompt_memorization), probe splits, control labels and initializations "
             "(probe_memorization). It does not reach what a task's own seed fixes, recorded in its `config`: "
             "the training order (--finetune-seed: finetune_memorization, privacy_extraction), the synthetic secrets "
             "(--data-seed: privacy_extraction) and the reference corpus's member split (--reference-seed)")


def seed_int(text: str) -> int:
    """A seed: an integer from 0 to `harness.core.task.MAX_SEED` (numpy's generators refuse negative seeds,
    and its global seed, which the reference training sets, anything from 2**32 on)."""
    from harness.core.task import MAX_SEED

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a seed from 0 to {MAX_SEED}, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected a seed from 0 to {MAX_SEED}, got {value}")
    return value


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), like every other user error."""

    def error(self, message: str):
        self.exit(2, f"membench: error: {message} (see `{self.prog} --help`)\n")


def device_name(text: str) -> str:
    """`membench run --device`: the name checked as the flags are read, before a pinned child process
    starts; whether this machine has that device is checked before any work (`check_job_settings`)."""
    from harness.model.loading import is_device_name

    if not is_device_name(text):
        raise argparse.ArgumentTypeError(f"unknown device {text!r}; choose cpu, cuda, cuda:N or auto")
    return text


def reference_build_names() -> list[str]:
    from harness.reference.recipes import reference_recipes

    return [config.name for config, _ in reference_recipes()]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command. Some flags import heavy modules: the task settings of `evaluate` and
    `export-lm-eval` (every task module, and with them PyTorch and transformers: 5 to 7 s on 2 cores) and
    the build names in `reference build --help`. `command`: the command the command line names
    (`cli.command_of`, "" for none); only that command then gets them, so `membench --help`, `run`,
    `validate` and `leaderboard` read their flags in a fraction of a second. None (docs, tests): every
    command's flags in full."""
    def full(name: str) -> bool:
        return command is None or command == name

    parser = OneLineErrorParser(prog="membench", description=DESCRIPTION)
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    add_evaluate(commands, full("evaluate"))
    add_export_lm_eval(commands, full("export-lm-eval"))
    add_import_lm_eval(commands)
    add_tasks(commands)
    add_validate(commands)
    add_report(commands)
    add_verify(commands)
    add_leaderboard(commands)
    add_reference(commands, full("reference"))
    add_prune(commands)
    add_run(commands)
    return parser


def add_evaluate(commands, task_flags: bool = True) -> None:
    """The flags of `membench evaluate` (without the task settings' unless `task_flags`)."""
    from harness.core.model_types import ModelKind

    ev = commands.add_parser("evaluate", help="evaluate one checkpoint on tasks, write a results file")
    ev.add_argument("--model", required=True,
                    help="local checkpoint folder, Hugging Face Hub id, GGUF file (.gguf), or an offline real model: "
                         "pretrained:smollm2-135m-instruct, pretrained:gemma-3-270m, pretrained:all-minilm-l6-v2")
    ev.add_argument("--gguf-file", help="the .gguf file to load from the model folder or hub repo (dequantized into "
                                        "--dtype); not needed for a .gguf path or a folder holding only one")
    ev.add_argument("--random-weights", type=seed_int, metavar="SEED",
                    help="score the model's untrained twin: its config and tokenizer with weights drawn by the "
                         "architecture's own initialization under SEED (a control: LMS near 50), not its weights")
    ev.add_argument("--revision", help="hub revision (branch, tag or commit)")
    ev.add_argument("--engine", choices=["hf", "local-completions"],
                    help="how the model's passes run: hf (transformers in this process; the default) or "
                         "local-completions (an OpenAI-compatible completions server such as vLLM, at --base-url; "
                         "the default when --base-url is given): docs/scaling.md")
    ev.add_argument("--base-url", help="local-completions: the server's URL, http://HOST:PORT/v1 (lm-eval's "
                                       ".../v1/completions form too); --model then names the checkpoint it serves, "
                                       "whose tokenizer and config are read here (its weights are not); an API key "
                                       "is taken from OPENAI_API_KEY")
    ev.add_argument("--served-model", help="local-completions: the model name the server serves (GET /v1/models; "
                                           "default: its only model)")
    ev.add_argument("--timeout", type=positive_float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                    help=f"local-completions: each request's limit, connecting and reading included (default "
                         f"{DEFAULT_TIMEOUT_S:g})")
    ev.add_argument("--max-retries", type=non_negative_int, default=DEFAULT_MAX_RETRIES,
                    help=f"local-completions: retries of a request after a connection error, a timeout, HTTP 429 or "
                         f"5xx, with exponential backoff (default {DEFAULT_MAX_RETRIES})")
    ev.add_argument("--num-concurrent", type=positive_int, default=1,
                    help="local-completions: requests in flight at once (default 1; a GPU server batches them), "
                         "each of --batch-size prompts")
    ev.add_argument("--model-kind", choices=[k.value for k in ModelKind], help="override the detected kind")
    ev.add_argument("--model-name", help="display name in the results (default: hub id, folder name, or the GGUF "
                                         "file's name without .gguf)")
    ev.add_argument("--tasks", required=True, help="comma-separated task names, or `all`")
    ev.add_argument("--batch-size", type=batch_size_value, default=16,
                    help="sequences per batch (default 16), or auto: on a GPU the largest batch that fits, found by "
                         "trying from --max-batch-size down (halved where one runs out of memory; each task records "
                         "what ran), on a CPU 16; the numbers do not depend on it")
    ev.add_argument("--max-batch-size", type=positive_int, default=DEFAULT_MAX_BATCH_SIZE,
                    help=f"where --batch-size auto starts on a GPU (default {DEFAULT_MAX_BATCH_SIZE})")
    ev.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (under a data-parallel launcher, "
                                                     "auto and cuda mean each process's own GPU)")
    ev.add_argument("--device-map", help="spread a model too large for one device over the GPUs (and CPU): "
                                         "from_pretrained(device_map=...), e.g. auto; not with a data-parallel launch")
    ev.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    ev.add_argument("--limit", type=positive_int,
                    help="a quick test run: cut each task's data to about this many samples (its card says how, "
                         "and what work stays whole); the board marks such results and `validate --strict` "
                         "refuses them for submission")
    ev.add_argument("--seed", type=seed_int, default=0, help=SEED_HELP)
    ev.add_argument("--log-samples", action="store_true", help="also write per-sample JSONL files")
    ev.add_argument("--output-path", type=Path, default=DEFAULT_SUBMISSIONS, help="folder for the results file")
    ev.add_argument("--trust-remote-code", action="store_true", help="allow the checkpoint's own Python code")
    ev.add_argument("--allow-pickle", action="store_true", help="allow pickle weights (*.bin, *.pt)")
    ev.add_argument("--no-cache", action="store_true", help="recompute tasks even when cached")
    ev.add_argument("--threads", type=positive_int,
                    help="CPU threads for PyTorch and the BLAS libraries (default: the cores this process may use, "
                         "by CPU affinity and cgroup quota, shared among the processes of a data-parallel run)")
    ev.add_argument("--reproducible", action="store_true",
                    help="pin the CPU kernels and threads as `membench run` does (harness/run/reproducible.py), so "
                         "the numbers come out the same to the last bit on this machine under any CPU capability "
                         "(not yet across Intel and AMD CPUs: docs/reproducibility.md)")
    if task_flags:
        add_task_config_flags(ev)


def add_export_lm_eval(commands, task_flags: bool = True) -> None:
    """The flags of `membench export-lm-eval` (without the task settings' unless `task_flags`)."""
    from harness.core.model_types import ModelKind

    ex = commands.add_parser("export-lm-eval", help="write lm-evaluation-harness tasks (YAML + data + utils.py) "
                             "for the tasks lm-eval can express, to run with `lm_eval --include_path DIR`")
    ex.add_argument("folder", type=Path, metavar="DIR", help="folder for the task files (created)")
    ex.add_argument("--model", required=True, help="the causal LM the tasks are for (local folder, hub id, .gguf file "
                    "or pretrained:<name>): only its tokenizer is loaded, for token counts and generation budgets")
    ex.add_argument("--revision", help="hub revision (branch, tag or commit)")
    ex.add_argument("--gguf-file", help="the .gguf file of the model folder or hub repo whose tokenizer to use")
    ex.add_argument("--model-kind", choices=[k.value for k in ModelKind], help="override the detected kind")
    ex.add_argument("--tasks", help="comma-separated membench task names (default: every exportable task)")
    ex.add_argument("--limit", type=positive_int, help="export at most this many samples per task, as "
                    "`membench evaluate --limit` takes them")
    ex.add_argument("--seed", type=seed_int, default=0)
    ex.add_argument("--trust-remote-code", action="store_true", help="allow the tokenizer's own Python code")
    ex.add_argument("--allow-pickle", action="store_true", help="accept a checkpoint whose weights are pickle files "
                    "(*.bin, *.pt): the export never loads them, lm-eval will")
    if task_flags:
        add_task_config_flags(ex)


def add_import_lm_eval(commands) -> None:
    """The flags of `membench import-lm-eval`."""
    im = commands.add_parser("import-lm-eval", help="turn an lm-eval results file of exported tasks into a membench "
                             "results file")
    im.add_argument("results_file", type=Path, metavar="RESULTS_JSON", help="lm-eval's results_<time>.json")
    im.add_argument("--model", help="the evaluated checkpoint (folder, hub id or .gguf file), when not where "
                    "lm-eval's model_args say")
    im.add_argument("--model-name", help="display name in the results (default: hub id or folder name)")
    im.add_argument("--output-path", type=Path, default=DEFAULT_SUBMISSIONS, help="folder for the results file")
    im.add_argument("--trust-remote-code", action="store_true", help="allow the tokenizer's own Python code")
    im.add_argument("--allow-pickle", action="store_true", help="allow pickle weights (*.bin, *.pt) to be hashed")


def add_tasks(commands) -> None:
    """The flags of `membench tasks`."""
    commands.add_parser("tasks", help="list the registered tasks")


def add_validate(commands) -> None:
    """The flags of `membench validate`."""
    va = commands.add_parser("validate", help="check results files against the schema (every file; one line "
                                              "each, exit 2 when any fails)")
    va.add_argument("files", nargs="+", type=Path)
    va.add_argument("--strict", action="store_true",
                    help="also refuse what may not be submitted: results of runs with --limit, and task "
                         "versions newer than this membench's (CI checks the submissions this way)")


def add_report(commands) -> None:
    """The flags of `membench report`."""
    re_ = commands.add_parser("report", help="compute results files' numbers again from their records (the "
                                             "sidecar), with this membench's reporting, without a model")
    re_.add_argument("files", nargs="+", type=Path)
    re_.add_argument("--output-path", type=Path, help="write each file so reported (and its sidecar) into this folder")


def add_verify(commands) -> None:
    """The flags of `membench verify`."""
    ve = commands.add_parser("verify", help="check that results files' numbers follow from their records (every "
                                            "file; one line each, exit 2 when any fails)")
    ve.add_argument("files", nargs="+", type=Path)
    ve.add_argument("--model", help="the weights the files were scored with (path, hub id or reference:<checkpoint>): "
                                    "its identity must be the files', and --sample records of each task are scored "
                                    "again with it")
    ve.add_argument("--sample", type=positive_int, help="records of each task scored again with --model (default 50)")
    ve.add_argument("--seed", type=seed_int, default=0, help="seed of the records drawn for --sample")
    ve.add_argument("--device", default="auto", help="device for --model (auto: an accelerator when there is one)")


def add_leaderboard(commands) -> None:
    """The flags of `membench leaderboard`."""
    lb = commands.add_parser("leaderboard", help="render LEADERBOARD.md, its plots and the web board from the submissions")
    lb.add_argument("--submissions", type=Path, default=DEFAULT_SUBMISSIONS)
    lb.add_argument("--output", type=Path, default=DEFAULT_BOARD)
    lb.add_argument("--site", type=Path, default=None,
                    help="folder of the static web board (default: site/ beside --output); replaced whole")
    lb.add_argument("--no-site", action="store_true", help="write the markdown and plots only")
    lb.add_argument("--check", action="store_true",
                    help="exit 1 when the markdown on disk is not current (the site is not committed, not checked)")


def add_reference(commands, build_names: bool = True) -> None:
    """The flags of `membench reference build` (its help without the build names unless `build_names`)."""
    ref = commands.add_parser("reference", help="reference checkpoints")
    ref_commands = ref.add_subparsers(dest="reference_command", required=True, parser_class=OneLineErrorParser)
    rb = ref_commands.add_parser("build", help="train the reference checkpoints again (CPU, about 12 minutes): "
                                               "causal LMs (English members, English non-member baseline, "
                                               "Japanese members), the NER token classifier, the T5 model and "
                                               "its pruned variant, and the masked LM; says which come out "
                                               "identical to the shipped weights `membench run` evaluates")
    rb.add_argument("--output", type=Path, help="parent folder of the builds (default: the membench cache)")
    rb.add_argument("--seed", type=seed_int, default=0,
                    help="seed of the causal LMs' member split and training (tasks read it as "
                         "--reference-seed); the NER, T5 and masked-LM models always use seed 0")
    rb.add_argument("--quick", action="store_true", help="the small, fast build used by the tests")
    rb.add_argument("--force", action="store_true", help="rebuild even when already built")
    rb.add_argument("--builds", type=split_commas,
                    help="comma-separated build names (default: all)"
                         + (": " + ", ".join(reference_build_names()) if build_names else ""))
    rb.add_argument("--compare", action="store_true",
                    help="then evaluate the rebuilt checkpoints on their controls (into the cache) and compare "
                         "them with the committed board (--submissions), which the shipped weights made")
    rb.add_argument("--submissions", type=Path, default=DEFAULT_SUBMISSIONS,
                    help="the board --compare compares with (default: submissions)")
    rb.add_argument("--ship", action="store_true",
                    help="replace the shipped weights (harness/reference/weights) by these builds: for a "
                         "maintainer who changed a recipe; the board must then be made again (`membench run`)")
    dp = ref_commands.add_parser("dp-control", help="privacy_extraction's DP control pair on the shipped reference "
                                                    "GPT-2 (xsum-gpt2-e30, 1,000 audit canaries, without DP and with "
                                                    "DP at epsilon 8; about 2 minutes on 2 cores) into --submissions: "
                                                    "committed files whose expectations `membench run` checks")
    dp.add_argument("--submissions", type=Path, default=DEFAULT_SUBMISSIONS,
                    help="where the two results files go (default: submissions)")
    dp.add_argument("--device", default="auto", type=device_name, help="auto (default), cpu or cuda")


def add_prune(commands) -> None:
    """The flags of `membench prune`."""
    from harness.core.model_types import ModelKind

    pr = commands.add_parser("prune", help="save a sparse variant of a checkpoint: global L1 unstructured pruning "
                                           "of all its parameters (or of its linear weights)")
    pr.add_argument("--model", required=True, help="local checkpoint folder or Hugging Face Hub id")
    pr.add_argument("--revision", help="hub revision (branch, tag or commit)")
    pr.add_argument("--model-kind", choices=[k.value for k in ModelKind], help="override the detected kind")
    pr.add_argument("--sparsity", type=float, required=True, help="share of the pruned weights set to zero, in (0, 1)")
    pr.add_argument("--scope", choices=["all", "linear"], default="all",
                    help="all: every parameter, ranked together (Yoon & Lee; default); linear: the linear weights only, "
                         "embeddings, norms and biases left dense")
    pr.add_argument("--output", type=Path, required=True, help="new folder for the pruned checkpoint")
    pr.add_argument("--trust-remote-code", action="store_true")
    pr.add_argument("--allow-pickle", action="store_true")


# `membench run`'s batch size: 64 short sequences of the small reference models ran its evaluations 1.7x
# faster than 16 on 2 cores (NER 140 -> 72 s, privacy 123 -> 73 s, AMD EPYC, 2026-11-25)
JOB_BATCH_SIZE = 64


def add_run(commands) -> None:
    """The flags of `membench run`."""
    run = commands.add_parser("run", help="evaluate on each shipped reference checkpoint the tasks it is a "
                                          "control for, write submissions and the leaderboard")
    run.add_argument("--submissions", type=Path, default=DEFAULT_SUBMISSIONS)
    run.add_argument("--output", type=Path, default=DEFAULT_BOARD)
    run.add_argument("--batch-size", type=batch_size_value, default=JOB_BATCH_SIZE,
                     help=f"sequences per batch (default {JOB_BATCH_SIZE}: the reference models are small, so on a CPU "
                          "larger batches run faster; the numbers do not depend on it), or auto (as for evaluate; "
                          f"{JOB_BATCH_SIZE} on a CPU)")
    run.add_argument("--max-batch-size", type=positive_int, default=DEFAULT_MAX_BATCH_SIZE,
                     help=f"where --batch-size auto starts on a GPU (default {DEFAULT_MAX_BATCH_SIZE})")
    run.add_argument("--device", default="auto", type=device_name, help="cpu, cuda, cuda:N or auto")
    run.add_argument("--quick", action="store_true", help="use the small test build (for smoke tests)")
    run.add_argument("--no-cache", action="store_true", help="recompute tasks even when cached")
