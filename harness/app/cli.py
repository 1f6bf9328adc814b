"""The `membench` command line. User errors: one line on stderr, exit status 2."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from harness.app.parser import DEFAULT_BOARD, build_parser, reference_build_names, task_overrides
from harness.app.registry import check_own_package
from harness.core.errors import UserError


def cmd_evaluate(args: argparse.Namespace) -> int:
    from harness.app import report
    from harness.app.registry import select
    from harness.core.io import check_writable_cache, check_writable_folder
    from harness.core.model_types import ModelKind
    from harness.core.progress import stderr_is_terminal
    from harness.model.loading import ModelSpec, resolve_device
    from harness.reference.checkpoints import resolve_reference_model
    from harness.run import reproducible
    from harness.run.runner import EvaluateOptions, evaluate
    from harness.scoring import distributed

    device = args.device
    if args.random_weights is not None and args.device_map:
        raise UserError("--random-weights draws the twin on one device; it cannot be combined with --device-map")
    if distributed.env_world_size() > 1:  # started by accelerate launch / torchrun: data parallel
        if args.device_map:
            raise UserError("--device-map places one model over several devices; it cannot be combined "
                            "with a data-parallel launch (run one process)")
        on_cpu = resolve_device(device) == "cpu"
        distributed.init_from_env(cpu=on_cpu)
        if not on_cpu and device in ("auto", "cuda"):
            device = distributed.local_device()
    if distributed.is_main():  # rank 0 writes the files: find out now, not after the run, if it cannot
        check_writable_folder(args.output_path, f"--output-path {args.output_path}")
        check_writable_cache()
    if not args.reproducible:  # a pinned run set its threads already
        reproducible.set_threads(args.threads or reproducible.default_threads(distributed.env_local_world_size()))
    with distributed.main_first():  # a `pretrained:<name>` not cached yet: fetched now, with stage lines
        report.fetch_pretrained(args.model)
    spec = ModelSpec(model=args.model, revision=args.revision,
                     kind=ModelKind(args.model_kind) if args.model_kind else None, device=device,
                     dtype=args.dtype, trust_remote_code=args.trust_remote_code,
                     allow_pickle=args.allow_pickle, name=args.model_name, device_map=args.device_map,
                     gguf_file=args.gguf_file, random_weights_seed=args.random_weights, server=server_spec(args))
    options = EvaluateOptions(output_path=args.output_path, batch_size=args.batch_size,
                              max_batch_size=args.max_batch_size, limit=args.limit,
                              seed=args.seed, log_samples=args.log_samples, use_cache=not args.no_cache,
                              all_tasks=args.tasks.strip() == "all", resolve_model=resolve_reference_model,
                              **({} if stderr_is_terminal() else {"on_task_start": report.task_started,
                                                                  "on_task_end": report.task_ended}))
    path = evaluate(spec, select(args.tasks), task_overrides(args), options)
    rank0 = distributed.is_main()
    distributed.shutdown()
    if not rank0:  # only rank 0 wrote the file and reports it
        return 0
    print_results(path)
    return 0


def server_spec(args: argparse.Namespace):
    """`--engine local-completions` (or `--base-url` alone): where the server is and how long to wait for it
    (`harness.model.loading.ServerSpec`); None for the in-process engine, which takes none of the server's
    flags (the loading flags a server does not take: `harness.model.loading.load_served`)."""
    from harness.model.loading import ServerSpec

    engine = args.engine or ("local-completions" if args.base_url else "hf")
    if engine == "hf":
        given = [flag for flag, value in (("--base-url", args.base_url), ("--served-model", args.served_model),
                                          ("--num-concurrent", args.num_concurrent != 1)) if value]
        if given:
            raise UserError(f"{given[0]} is for --engine local-completions, not hf")
        return None
    if not args.base_url:
        raise UserError("--engine local-completions needs --base-url http://HOST:PORT/v1 (the server's address)")
    return ServerSpec(base_url=args.base_url, served_model=args.served_model,
                      api_key=os.environ.get("OPENAI_API_KEY") or None, timeout_s=args.timeout,
                      max_retries=args.max_retries, num_concurrent=args.num_concurrent,
                      # prompts a request: --batch-size (lm-eval's batch_size), 16 under auto
                      batch_size=args.batch_size if isinstance(args.batch_size, int) else 16)


def print_results(path: Path) -> None:
    """The end of `membench evaluate` on stdout: the results table (`report.results_table`), then the
    results file's path alone on the last line, for scripts (`... | tail -n 1`)."""
    from harness.app.report import results_table
    from harness.core.results import load_results

    print(results_table(load_results(path)))
    print()
    print(path, flush=True)


def cmd_export_lm_eval(args: argparse.Namespace) -> int:
    from harness.app.registry import discover
    from harness.core.io import check_writable_folder
    from harness.core.model_types import ModelKind
    from harness.interop.lm_eval_export import export_tasks, write_export
    from harness.model.loading import ModelSpec

    spec = ModelSpec(model=args.model, revision=args.revision,
                     kind=ModelKind(args.model_kind) if args.model_kind else None,
                     trust_remote_code=args.trust_remote_code, gguf_file=args.gguf_file, allow_pickle=args.allow_pickle)
    check_writable_folder(args.folder, f"export folder {args.folder}")
    tasks, facts = export_tasks(spec, discover(), args.tasks, task_overrides(args), args.limit, args.seed)
    write_export(args.folder, tasks, facts)
    for task in tasks:
        for note in task.notes:
            print(f"membench: warning: {task.name}: {note}", file=sys.stderr)
        print(f"{task.name}: {len(task.docs)} documents -> {args.folder / (task.name + '.yaml')}")
    print(f"run: lm_eval --model hf --model_args {facts['model']['model_args']},dtype=float32 "
          f"--include_path {args.folder} --tasks {','.join(t.name for t in tasks)} --output_path OUT")
    return 0


def cmd_import_lm_eval(args: argparse.Namespace) -> int:
    from harness.app.registry import discover
    from harness.core.io import check_writable_folder
    from harness.interop.lm_eval_import import import_results

    check_writable_folder(args.output_path, f"--output-path {args.output_path}")
    print(import_results(args.results_file, args.output_path, discover(), model=args.model, name=args.model_name,
                         allow_pickle=args.allow_pickle, trust_remote_code=args.trust_remote_code))
    return 0


def cmd_tasks(_: argparse.Namespace) -> int:
    from tabulate import tabulate

    from harness.app.registry import discover

    rows = [[name, task.VERSION, ", ".join(sorted(k.value for k in task.MODEL_KINDS)), task.DESCRIPTION]
            for name, task in discover().items()]
    print(tabulate(rows, headers=["task", "version", "model kinds", "description"]))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """Every file is checked: `ok` on stdout, or one error line on stderr; exit 2 when any failed.
    A task version newer than this membench's is a warning (the file is valid, this membench just
    cannot vouch for those numbers), and an error under --strict."""
    from harness.app.registry import newer_task_versions, submission_problem
    from harness.core.errors import warn
    from harness.core.results import load_results

    failed = 0
    for path in args.files:
        try:
            results = load_results(path)
            problem = submission_problem(results) if args.strict else None
            if problem:
                raise UserError(f"{path}: {problem}")
        except UserError as err:
            print(f"membench: error: {err}", file=sys.stderr)
            failed += 1
            continue
        if not args.strict:
            for line in newer_task_versions(results):
                warn(f"{path}: {line} (`membench validate --strict` refuses it)")
        print(f"{path}: ok ({results.model.name}, {len(results.tasks)} task(s))")
    return UserError.exit_code if failed else 0


def cmd_report(args: argparse.Namespace) -> int:
    """Each file's numbers computed again from its records by today's reporting stages: a line per task
    saying whether they equal the file's bit for bit; with --output-path, the results file so reported
    (and its sidecar) written there. A file that cannot be read, or whose sidecar is missing or another
    run's, is one error line; exit 2 when any failed."""
    from harness.app.verify import first_difference, re_reported, recompute
    from harness.core.io import atomic_write_bytes, check_writable_folder
    from harness.core.results import write_results

    if args.output_path:
        check_writable_folder(args.output_path, "--output-path")
    failed = 0
    for path in args.files:
        try:
            done = recompute(path, same_reporting=False)
            if args.output_path:
                target = args.output_path / path.name
                if target.resolve() == path.resolve():
                    raise UserError(f"{path}: --output-path would overwrite it; give another folder")
                if done.reports:  # the records as they are, first: the results file names them
                    atomic_write_bytes(args.output_path / done.results.records_file,
                                       (path.parent / done.results.records_file).read_bytes())
                write_results(re_reported(done), target)
        except UserError as err:
            print(f"membench: error: {err}", file=sys.stderr)
            failed += 1
            continue
        for entry in done.results.tasks:
            if entry.name in done.reports:
                found = first_difference(entry, done.reports[entry.name])
                print(f"{path}: {entry.name}: " + ("reported from its records, identical to the file" if found is None
                                                   else f"reported from its records: {found}"))
            elif entry.status == "ok":
                print(f"{path}: {entry.name}: unverified (no records)")
    return UserError.exit_code if failed else 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Every file's numbers recomputed from its records and compared (`harness.app.verify`), and with
    --model the records checked against the model: `ok` on stdout (naming the tasks that carry no
    records, unverified), or one error line on stderr; exit 2 when any failed."""
    from harness.app.verify import verify_file, verify_with_model
    from harness.reference.checkpoints import resolve_reference_model

    if args.model is None and args.sample is not None:
        raise UserError("--sample scores records again with the model: give --model too")
    model = resolve_reference_model(args.model) if args.model else None
    failed = 0
    for path in args.files:
        try:
            if model is None:
                done, checks = verify_file(path), []
            else:
                done, checks = verify_with_model(path, model, args.sample or 50, args.seed, args.device)
        except UserError as err:
            print(f"membench: error: {err}", file=sys.stderr)
            failed += 1
            continue
        unverified = f"; unverified (no records): {', '.join(done.unverified)}" if done.unverified else ""
        print(f"{path}: ok ({len(done.reports)} task(s) recomputed from their records{unverified})")
        if model is not None:
            print(f"  model identity {done.results.model.identity[:16]}: the file's")
        for check in checks:
            print(f"  {check.task}: " + (check.skipped or f"{check.scored} records scored again, within tolerance "
                                                          f"(largest difference {check.worst:.2f} of it)"))
    return UserError.exit_code if failed else 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from harness.core.io import check_writable_folder
    from leaderboard.build import is_current, write_board

    if args.check:
        if is_current(args.submissions, args.output):
            print(f"{args.output} is current")
            return 0
        print(f"{args.output} is stale: run `membench leaderboard` and commit it", file=sys.stderr)
        return 1
    if args.output.is_dir():  # checked first: the plots are written beside the board, before it
        raise UserError(f"--output {args.output} is a folder; give the board's file name, e.g. "
                        f"{args.output / DEFAULT_BOARD.name}")
    check_writable_folder(args.output.parent, f"--output {args.output}")
    site = None if args.no_site else (args.site or args.output.parent / "site")
    if site is not None:
        check_writable_folder(site.parent, f"--site {site}")
    write_board(args.submissions, args.output, site)
    print(args.output)
    if site is not None:
        print(site / "index.html")
    return 0


def cmd_reference(args: argparse.Namespace) -> int:
    if args.reference_command == "dp-control":
        return cmd_dp_control(args)
    from harness.app.job import build_reported, shipped_comparison
    from harness.core.io import check_writable_cache, check_writable_folder
    from harness.reference.build import checkpoint_folders
    from harness.reference.recipes import reference_recipes
    from harness.reference.shipped import ship

    recipes = reference_recipes(args.quick, args.seed)
    unknown = sorted(set(args.builds or []) - {config.name for config, _ in recipes})
    if unknown:
        raise UserError(f"unknown reference build {unknown[0]!r}; choose from {', '.join(reference_build_names())}")
    if args.output:
        check_writable_folder(args.output, "--output")
    else:
        check_writable_cache()
    if args.ship and (args.output or args.seed):
        raise UserError("--ship ships today's recipes as the cache holds them: leave out --output and --seed")
    current = {config.folder_name() for quick in (False, True) for config, _ in reference_recipes(quick)}
    built = []
    for config, build_fn in recipes:
        if args.builds is not None and config.name not in args.builds:
            continue
        folder = build_reported(config, build_fn, args.output / config.name if args.output else None, args.force)
        built.append((config, checkpoint_folders(folder)))
        print(folder)
        for line in shipped_comparison(config, folder):
            print(f"  {line}")
        if args.ship:
            print(f"  shipped as {ship(folder, current)}")
    if args.compare:
        from harness.app.job import replicate_controls

        target, report = replicate_controls(args.submissions, built)
        print(f"\nrebuilt controls (results in {target}) against the committed board ({args.submissions}), "
              "made from the shipped weights: a replication, not an identity\n")
        print(report.table)
        return 1 if report.failed else 0
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    import json

    from harness.core.model_types import ModelKind
    from harness.model.loading import ModelSpec
    from harness.model.prune import prune_checkpoint

    spec = ModelSpec(model=args.model, revision=args.revision,
                     kind=ModelKind(args.model_kind) if args.model_kind else None,
                     trust_remote_code=args.trust_remote_code, allow_pickle=args.allow_pickle)
    record = prune_checkpoint(spec, args.sparsity, args.output, args.scope)
    print(json.dumps(record, indent=1), file=sys.stderr)
    print(args.output)
    return 0


def cmd_dp_control(args: argparse.Namespace) -> int:
    """`membench reference dp-control`: the pair's results files, then their expectations checked on them."""
    from harness.app.dp_control import run_dp_controls
    from harness.reference.controls import DP_CONTROL_EXPECTATIONS, committed_report

    written = run_dp_controls(args.submissions, args.device)
    for path, _ in written:
        print(path)
    table, failed = committed_report([results for _, results in written], DP_CONTROL_EXPECTATIONS)
    print(f"\n{table}")
    for expectation in failed:
        print(f"membench: error: control failed: {expectation.task}: {expectation.describe()} "
              f"({expectation.why})", file=sys.stderr)
    return 1 if failed else 0


def cmd_run(args: argparse.Namespace) -> int:
    from harness.app.job import run_reference_job

    outcome = run_reference_job(args.submissions, args.output, args.batch_size, args.device, args.quick,
                                use_cache=not args.no_cache, max_batch_size=args.max_batch_size)
    for path in outcome.written:
        print(path)
    for path in outcome.kept:
        print(f"kept {path} (this run reproduced it within the tolerances)")
    for path in outcome.removed:
        print(f"removed {path} (an earlier run of the same checkpoint)")
    report = outcome.controls
    print("\nreference controls: headline before this run (the committed value in a fresh clone) and now\n")
    print(report.table)
    for task, model in report.outside_tolerance:
        print(f"membench: warning: {model} {task} moved beyond its tolerance "
              "(harness/reference/controls.py)", file=sys.stderr)
    table, real_failed = outcome.real_models
    print("\nreal-model controls: their committed submissions (`membench evaluate`; not scored by this job)\n")
    print(table)
    table, dp_failed = outcome.dp_controls
    print("\nDP controls: their committed submissions (`membench reference dp-control`; not run by this job)\n")
    print(table)
    table, outside = outcome.null_bands
    print("\nnull bands: every score's AUC on the null checkpoints (untrained, or before fine-tuning) within 0.5 +- "
          "its band (Bonferroni, 1% for a correct build)\n")
    print(table)
    failed = report.failed + real_failed + dp_failed
    for expectation in failed:
        print(f"membench: error: control failed: {expectation.task}: {expectation.describe()} "
              f"({expectation.why})", file=sys.stderr)
    for reading in outside:
        print(f"membench: error: null band failed: {reading.model} {reading.task} {reading.where}: AUC "
              f"{reading.auc:.4f}, {reading.null_sds:+.2f} null sds (band {reading.band_sds:.2f})", file=sys.stderr)
    return 1 if failed or outside else 0


COMMANDS = {"evaluate": cmd_evaluate, "export-lm-eval": cmd_export_lm_eval, "import-lm-eval": cmd_import_lm_eval,
            "tasks": cmd_tasks, "validate": cmd_validate, "report": cmd_report, "verify": cmd_verify,
            "leaderboard": cmd_leaderboard, "reference": cmd_reference, "prune": cmd_prune, "run": cmd_run}


def reporting_interrupts(command_line):
    """`main`, with Ctrl-C (anywhere: parsing, imports, the command, waiting for a pinned child)
    reported as one line on stderr and exit status 130 (`harness.core.interrupts`)."""
    import functools

    from harness.core import interrupts

    @functools.wraps(command_line)
    def run(argv: list[str] | None = None) -> int:
        try:
            return command_line(argv)
        except KeyboardInterrupt:
            return interrupts.report()

    return run


# always run pinned (harness/run/reproducible.py); `report` and `verify` so that a report's BLAS sums are
# those of `membench run`, which wrote the committed files
PINNED_COMMANDS = ("run", "reference", "report", "verify")


def command_of(words: list[str]) -> str | None:
    """The command of a command line: its first word that is not an option (the only options
    before the command are `-v` / `--verbose`, which take no value)."""
    return next((word for word in words if not word.startswith("-")), None)


def run_pinned_again(words: list[str]) -> int | None:
    """`reproducible.run_pinned` of this command line (`python -m harness WORDS`): its exit status
    when it ran in a pinned child process, None in a pinned process."""
    from harness.run import reproducible

    return reproducible.run_pinned([sys.executable, "-m", "harness", *words])


@reporting_interrupts
def main(argv: list[str] | None = None) -> int:
    if hasattr(signal, "SIGXFSZ") and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file-size limit (ulimit -f): a write fails with EFBIG
    try:
        words = sys.argv[1:] if argv is None else argv
        command = command_of(words) or ""
        if command in PINNED_COMMANDS or (command == "evaluate" and "--reproducible" in words):
            # before parsing: the parser of `evaluate` and `reference` imports every task module or the
            # reference builds (PyTorch, transformers: 3 to 25 s on 2 cores), which the pinned child does
            # again; the child parses the flags and reports errors
            status = run_pinned_again(words)
            if status is not None:
                return status
        from harness.run.heap import reuse_freed_memory

        reuse_freed_memory()  # freed tensors' memory stays for the next batch: the same numbers, faster
        import leaderboard
        import tasks

        for package in (tasks, leaderboard):  # before the task flags import the task modules
            check_own_package(package)
        args = build_parser(command).parse_args(argv)
        level = [logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)]
        logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
        if args.verbose == 0:
            logging.getLogger("transformers").setLevel(logging.ERROR)
            import transformers

            transformers.logging.set_verbosity_error()
            transformers.logging.disable_progress_bar()
        if getattr(args, "reproducible", False):  # PINNED_COMMANDS and a literal --reproducible went pinned above
            status = run_pinned_again(words)
            if status is not None:  # the command ran in a pinned child process
                return status
        if args.command != "evaluate":
            from harness.scoring.distributed import env_world_size

            if env_world_size() > 1:
                raise UserError(f"only `membench evaluate` runs data-parallel; run `membench {args.command}` "
                                "without accelerate launch / torchrun")
        return COMMANDS[args.command](args)
    except UserError as err:
        print(f"membench: error: {err}", file=sys.stderr)
        return err.exit_code
    except OSError as err:  # a file operation without a more helpful message: a full disk, a permission
        from harness.core.io import os_error_text

        print(f"membench: error: {os_error_text(err)}", file=sys.stderr)
        return UserError.exit_code
