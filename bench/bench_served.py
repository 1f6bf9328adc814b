"""Throughput of prompt scoring and greedy generation in-process (transformers) against a vLLM server,
on the same texts, the same model and the same CPU, measured in one run.

Model: the final (30-epoch) English reference GPT-2 (`reference:xsum-gpt2-e30`), float32 on both sides.
Work, the same for both engines:
  scoring     the first --texts reference texts (`reference_corpus(0)`, mink_membership's reference
              data) of at least --length words, cut to that length (`truncate_words`; shorter texts
              are skipped): each token's log p(x_t | x_<t) after the BOS, in windows of
              the model's context (512), through `causal_token_logprobs`: in-process with the model at
              --batch-size texts a batch; served with a `CompletionsClient` (`echo: true, logprobs: 1,
              max_tokens: 0`, --batch-size prompts a request). Tokens = the scored tokens.
  generation  the first --examples paywall examples of the reference corpus (`load_paywall_data`,
              paywall_memorization's reference data) with the task's budgets (`reference_budgets`), through
              `greedy_continuations`: in-process at --batch-size; served with the client as the model
              (temperature 0, the same prompt tokens, each asked for its room, its budget rounded up to 8,
              so one request holds up to --batch-size prompts of one room; cut to its budget). Tokens = the
              budgets (new tokens asked for).
Each side is warmed up once on a few inputs, then timed in --repeats rounds; the fastest round is
reported, as tokens/s, with the ratio vLLM / in-process of the same run (tokens/s over tokens/s, i.e.
in-process seconds over vLLM seconds). In-process runs at PyTorch's default threads (one per core),
then again at 1 thread, the compute threads vLLM's engine binds on 2 cores (below); both are reported.
The client sends one request at a time; the count of generation requests is reported. Agreement on the
same texts: the largest |log-prob difference| over all scored tokens, and the share of examples whose
greedy continuations (decoded, special tokens dropped) are identical.

The in-process part runs first and its model is dropped before the server starts (one torch process
computes at a time). The server is this machine's vLLM CPU build (`.venv-vllm`), started and stopped
by bench/vllm_server.py (its command and environment are there and in the record). vLLM binds its
compute threads itself (VLLM_CPU_OMP_THREADS_BIND=auto: on 2 cores one for the engine, one kept for
its scheduler and API server); the binding it logged is recorded. The client's waits are idle, but
the client shares the CPU with the server.

    python bench/bench_served.py [--texts 400] [--length 128] [--examples 128] [--batch-size 16]
                                 [--repeats 3] [--startup-timeout 300]

The weights are the shipped reference checkpoint (harness/reference/weights/); nothing is downloaded.
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import torch

from harness.model.loading import ModelSpec, load
from harness.model.served import CompletionsClient
from harness.reference.checkpoints import resolve_reference_model
from harness.reference.corpus import reference_corpus
from harness.scoring.causal import causal_token_logprobs
from harness.scoring.generation import greedy_continuations, prompt_cuts
from harness.scoring.text import truncate_words
from tasks.paywall_memorization.data import load_paywall_data, reference_budgets
from record import add_output_flag, emit
from vllm_server import INSTALL_HINT, SERVER_ENV, vllm_python, vllm_server

MODEL = "reference:xsum-gpt2-e30"
SERVER_CONTEXT = 512  # --max-model-len: the reference GPT-2's n_positions
# lscpu flags that decide which kernels PyTorch and vLLM's CPU build can use
KERNEL_FLAGS = ("avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile",
                "amx_bf16")


def cpu_flags() -> list[str]:
    """The `KERNEL_FLAGS` this CPU has (/proc/cpuinfo, as lscpu shows them)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            have = set(line.split(":", 1)[1].split())
            return [flag for flag in KERNEL_FLAGS if flag in have]
    return []


def best_of(repeats: int, function) -> tuple[float, list[float], object]:
    """(fastest seconds, every round's seconds, the last round's result) of `repeats` calls of `function`."""
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return min(times), times, result


# -- the vLLM server ---------------------------------------------------------------------------------

def thread_binding(log_path: Path) -> dict:
    """The OpenMP binding vLLM logged (its `OMPProcessManager`): the engine's core ids and the reserved cores."""
    text = log_path.read_text(errors="replace")
    cores = re.findall(r"local_rank=\d+, core ids=(\[[\d, ]*\])", text)
    reserved = re.search(r"reserved_cpus=(\[[\d, ]*\])", text)
    return {"engine_core_ids": [json.loads(c) for c in cores], "reserved_cpus": json.loads(reserved.group(1))
            if reserved else None}


def server_version(base_url: str) -> str | None:
    """vLLM's GET /version (at the server's root, not under /v1)."""
    try:
        with urllib.request.urlopen(base_url.removesuffix("/v1") + "/version", timeout=10) as answer:
            return json.loads(answer.read()).get("version")
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return None


# -- the two engines ---------------------------------------------------------------------------------

def in_process(lm, texts: list[str], prompts: list[str], budgets: list[int], batch_size: int, repeats: int) -> dict:
    """Scoring and generation with the model `lm` loaded here (transformers, float32, CPU)."""
    context = lm.context_length

    def score(subset):
        return causal_token_logprobs(lm.model, lm.tokenizer, subset, batch_size=batch_size, max_length=context,
                                     progress=False)[0]

    def generate(n):
        return greedy_continuations(lm.model, lm.tokenizer, prompts[:n], budgets[:n], batch_size=batch_size,
                                    max_length=context, progress=False)[0]

    score(texts[:batch_size]), generate(batch_size)  # warm-up
    score_s, score_rounds, scores = best_of(repeats, lambda: score(texts))
    generate_s, generate_rounds, outputs = best_of(repeats, lambda: generate(len(prompts)))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as many compute threads as vLLM's engine binds here (one core)
    try:
        one_score_s, one_score_rounds, _ = best_of(repeats, lambda: score(texts))
        one_generate_s, one_generate_rounds, _ = best_of(repeats, lambda: generate(len(prompts)))
    finally:
        torch.set_num_threads(threads)
    return {"context": context, "threads": threads, "dtype": str(next(lm.model.parameters()).dtype),
            "scores": [s.logprobs for s in scores], "outputs": outputs,
            "seconds": {"scoring": score_s, "generation": generate_s},
            "rounds": {"scoring": score_rounds, "generation": generate_rounds},
            "one_thread": {"seconds": {"scoring": one_score_s, "generation": one_generate_s},
                           "rounds": {"scoring": one_score_rounds, "generation": one_generate_rounds}}}


def served(client: CompletionsClient, tokenizer, context: int, texts: list[str], prompts: list[str],
           budgets: list[int], batch_size: int, repeats: int) -> dict:
    """Scoring and generation through the server, as membench runs them: `causal_token_logprobs` and
    `greedy_continuations` with the client as the model (prompt log-probs; generations of the same prompt
    tokens, asked for their rooms and cut to their budgets)."""

    def score(subset):
        return causal_token_logprobs(client, tokenizer, subset, max_length=context, progress=False)[0]

    def generate(n):
        return greedy_continuations(client, tokenizer, prompts[:n], budgets[:n], max_length=context, progress=False)[0]

    warm = time.perf_counter()
    score(texts[:batch_size]), generate(batch_size)  # warm-up (the first requests)
    warm_up_s = time.perf_counter() - warm
    score_s, score_rounds, scores = best_of(repeats, lambda: score(texts))
    generate_s, generate_rounds, outputs = best_of(repeats, lambda: generate(len(prompts)))
    return {"scores": [s.logprobs for s in scores], "outputs": outputs,
            "seconds": {"scoring": score_s, "generation": generate_s},
            "rounds": {"scoring": score_rounds, "generation": generate_rounds}, "warm_up_s": warm_up_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=400, help="the first N reference texts of at least --length words")
    parser.add_argument("--length", type=int, default=128, help="words each text is cut to")
    parser.add_argument("--examples", type=int, default=128, help="the first N reference paywall examples")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--startup-timeout", type=float, default=300.0)
    add_output_flag(parser)
    args = parser.parse_args()
    if vllm_python() is None:
        print(f"no vLLM venv: {INSTALL_HINT}", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    folder = resolve_reference_model(MODEL)
    texts = [cut for d in reference_corpus(0) if (cut := truncate_words(d.text, args.length))][: args.texts]

    lm = load(ModelSpec(folder, device="cpu", dtype="float32"))
    tokenizer = lm.tokenizer
    examples = load_paywall_data("reference", "en", 200, 0, None).examples[: args.examples]
    prompts = [e.prompt for e in examples]
    budgets = reference_budgets(tokenizer, examples)
    _, _, capped, rooms, _ = prompt_cuts(tokenizer, prompts, budgets, lm.context_length)
    new_tokens = sum(capped)  # the budgets, capped at half the context as greedy_continuations caps them
    # served greedy_continuations: one request per distinct room (the budget rounded up to 8), --batch-size prompts each
    generation_requests = sum(-(-rooms.count(r) // args.batch_size) for r in set(rooms))
    # in-process first; its model is dropped before the server starts
    here = in_process(lm, texts, prompts, budgets, args.batch_size, args.repeats)
    del lm
    gc.collect()

    with vllm_server(folder, max_model_len=SERVER_CONTEXT, start_timeout_s=args.startup_timeout) as server:
        client = CompletionsClient(server.base_url, timeout_s=120, max_retries=1, batch_size=args.batch_size)
        there = served(client, tokenizer, here["context"], texts, prompts, budgets, args.batch_size, args.repeats)
        identity = [m.as_dict() for m in client.served_models()]
        version = server_version(server.base_url)
        binding = thread_binding(server.log)
        ready_s = server.ready_s

    scored_tokens = sum(len(s) for s in here["scores"])
    if [len(s) for s in here["scores"]] != [len(s) for s in there["scores"]]:
        print("the engines scored different token counts", file=sys.stderr)
        return 1
    largest = max(float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
                  for a, b in zip(here["scores"], there["scores"]) if len(a))
    identical = sum(a == b for a, b in zip(here["outputs"], there["outputs"]))

    def side(result: dict) -> dict:
        s = result["seconds"]
        return {"seconds": {k: round(v, 3) for k, v in s.items()},
                "all_rounds_seconds": {k: [round(v, 3) for v in r] for k, r in result["rounds"].items()},
                "scoring_tokens_per_s": round(scored_tokens / s["scoring"], 1),
                "generation_tokens_per_s": round(new_tokens / s["generation"], 1)}

    report = {
        "model": Path(folder).name, "cpu_flags": cpu_flags(), "repeats": args.repeats, "batch_size": args.batch_size,
        "scoring": {"texts": len(texts), "length_words": args.length, "scored_tokens": scored_tokens,
                    "context": here["context"]},
        "generation": {"examples": len(examples), "new_tokens": new_tokens, "vllm_requests": generation_requests},
        "in_process": {**side(here), "threads": here["threads"], "dtype": here["dtype"]},
        "in_process_1_thread": side(here["one_thread"]),
        "vllm": {**side(there), "warm_up_s": round(there["warm_up_s"], 3), "startup_s": round(ready_s, 1),
                 "version": version, "served": identity, "thread_binding": binding,
                 "server_env": SERVER_ENV, "server_context": SERVER_CONTEXT},
        "vllm_over_in_process": {
            "scoring": round(here["seconds"]["scoring"] / there["seconds"]["scoring"], 3),
            "generation": round(here["seconds"]["generation"] / there["seconds"]["generation"], 3)},
        "vllm_over_in_process_1_thread": {
            "scoring": round(here["one_thread"]["seconds"]["scoring"] / there["seconds"]["scoring"], 3),
            "generation": round(here["one_thread"]["seconds"]["generation"] / there["seconds"]["generation"], 3)},
        "agreement": {"max_abs_logprob_difference": float(f"{largest:.2g}"),
                      "identical_continuations": identical, "continuations": len(examples),
                      "identical_share": round(identical / len(examples), 3)},
    }
    emit(report, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
