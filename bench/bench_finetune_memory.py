"""The memory fine-tuning adds on CPU, measured against `harness/training/memory.py`'s estimate.

Two measurements, each method (full, LoRA) in a fresh process of its own, so that its resident size
starts from the loaded model alone:

  task   `membench evaluate --model MODEL --tasks privacy_extraction --epochs 1 --finetune-seeds 1
         --limit N --no-cache` (and `--finetune-method lora`) as the CLI runs it, with the task's
         `run` wrapped to read the resident size at its start (VmRSS). Reported: the estimate the task
         recorded (`info.finetuning_memory`, by part), the task's `peak_rss_bytes` and that peak less
         the size at its start (what the task added: fine-tuning, its evaluations, the allocator),
         the task's time, the adapter's size T and the headline's subset score before and after.
  loop   a plain training loop, no Trainer: a fresh copy (full) or a seeded adapter on a weight-sharing
         copy (LoRA, the task's `with_adapter`), AdamW at 1e-4, --steps steps on batches of --batch
         rows of --tokens random tokens (every token a label). Reported: the peak resident size the
         steps added over the size before them, the estimate at S = --tokens, and the values the
         forward pass keeps for the backward pass (autograd's saved tensors, each storage once,
         parameters and anything of the vocabulary's width left out) per token, layer and hidden
         unit: the estimate's C = 17 (Korthikanti et al. 2022, §4 eq. 1); again with the norm
         layers' weights frozen (a trained norm weight keeps its input for its gradient).

Run alone: the resident sizes are the process's, but a busy machine slows the task times.

    python bench/bench_finetune_memory.py [--model pretrained:smollm2-135m-instruct] [--limit 10]
                                          [--steps 3] [--batch 8] [--tokens 74] [--threads 2]
                                          [--output bench/results/bench_finetune_memory.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # record.py, when run as a child by its path

from record import add_output_flag, emit  # noqa: E402

METHODS = ("full", "lora")
GB = 1e9


def resident_bytes() -> int:
    """The process's resident size now (`heap.rss_bytes`: VmRSS of /proc/self/status), in bytes."""
    from harness.run import heap

    found = heap.rss_bytes()
    if found is None:
        raise RuntimeError("/proc/self/status has no VmRSS: this bench needs Linux")
    return found


def headline_scores(entry: dict) -> dict[str, float]:
    """The headline metric's value at each epoch the run computed (its tags but the epoch matched)."""
    headline = entry["headline"]
    wanted = {k: v for k, v in headline["tags"].items() if k != "epoch"}
    return {m["tags"]["epoch"]: m["value"] for m in entry["metrics"]
            if m["name"] == headline["metric"] and all(m["tags"].get(k) == v for k, v in wanted.items())}


def task_child(method: str, args) -> dict:
    """One privacy_extraction run through the CLI, its task's starting resident size read by a wrapper of its
    scoring stage (the model passes and the fine-tuning)."""
    from harness.app.cli import main
    from tasks.privacy_extraction.task import PrivacyExtraction

    start: dict[str, int] = {}
    original = PrivacyExtraction.score

    def score(self, *a, **k):
        start["rss"] = resident_bytes()
        return original(self, *a, **k)

    PrivacyExtraction.score = score
    with tempfile.TemporaryDirectory(prefix="membench-bench-finetune-") as scratch:
        status = main(["evaluate", "--model", args.model, "--tasks", "privacy_extraction", "--epochs", "1",
                       "--finetune-seeds", "1", "--limit", str(args.limit), "--finetune-method", method,
                       "--no-cache", "--threads", str(args.threads), "--output-path", scratch])
        if status:
            raise SystemExit(f"membench evaluate exited with {status}")
        [path] = [p for p in Path(scratch).rglob("*.json") if "samples" not in p.name]
        entry = json.loads(path.read_text())["tasks"][0]
    estimate = entry["info"]["finetuning_memory"]["estimate_bytes"]
    return {"estimate_bytes": estimate, "task_start_rss_bytes": start["rss"], "peak_rss_bytes": entry["peak_rss_bytes"],
            "added_bytes": entry["peak_rss_bytes"] - start["rss"], "task_seconds": entry["wall_time_s"],
            "trainable_parameters": estimate["trainable_parameters"], "headline_by_epoch": headline_scores(entry)}


def saved_activation_values(model, batch) -> int:
    """Float values autograd keeps from one forward pass for the backward pass: each saved storage
    once, leaving out the parameters (kept anyway) and tensors of the vocabulary's width (the logits)."""
    import torch

    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    vocabulary = model.config.get_text_config().vocab_size
    kept: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if (tensor.is_floating_point() and storage.data_ptr() not in parameters
                and (tensor.dim() == 0 or tensor.shape[-1] != vocabulary)):
            kept[storage.data_ptr()] = storage.nbytes() // tensor.element_size()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = model(**batch).loss
    loss.backward()
    model.zero_grad(set_to_none=True)
    return sum(kept.values())


def loop_child(method: str, args) -> dict:
    """A plain training loop of `args.steps` AdamW steps; the peak resident size it adds."""
    import gc

    import torch

    from harness.model.loading import ModelSpec, load
    from harness.run import heap
    from harness.training.finetune import LoraSettings, shared_weights_copy, trainable_parameters, with_adapter
    from harness.training.memory import estimate, model_shape

    torch.set_num_threads(args.threads)
    lm = load(ModelSpec(args.model))
    config = lm.model.config.get_text_config()
    generator = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, config.vocab_size, (args.batch, args.tokens), generator=generator)
               for _ in range(args.steps)]
    shape = model_shape(lm.model, False, 0, args.tokens - 1)  # a row: 1 + source + target tokens
    expected = estimate(shape, method, args.batch, on_cuda=False)
    gc.collect()
    before = resident_bytes()
    heap.reset_peak_rss()
    if method == "full":
        model = copy.deepcopy(lm.model)
    else:
        model = with_adapter(shared_weights_copy(lm.model), LoraSettings(8, 8, 0.0, ("all-linear",)), 0)
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4, weight_decay=0.0)
    started = time.perf_counter()
    for ids in batches:
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    seconds = time.perf_counter() - started
    added = heap.peak_rss_bytes() - before
    batch = {"input_ids": batches[0], "labels": batches[0]}
    units = args.batch * args.tokens * config.num_hidden_layers * config.hidden_size
    values = saved_activation_values(model, batch)
    trained = trainable_parameters(model)
    for module in model.modules():  # a trained norm weight keeps its input for its gradient; frozen, it need not
        if type(module).__name__.endswith("Norm"):
            module.requires_grad_(False)
    frozen_norms = saved_activation_values(model, batch)
    return {"estimate_bytes": expected.record(), "added_bytes": added, "before_rss_bytes": before,
            "trainable_parameters": trained, "seconds": round(seconds, 1), "saved_values": values,
            "saved_values_per_token_layer_hidden": round(values / units, 2),
            "saved_values_per_token_layer_hidden_norms_frozen": round(frozen_norms / units, 2)}


def in_child(kind: str, method: str, args) -> dict:
    """`kind`'s measurement of `method` in a fresh Python process (its resident size its own)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", kind, method, "--model", args.model,
               "--limit", str(args.limit), "--steps", str(args.steps), "--batch", str(args.batch),
               "--tokens", str(args.tokens), "--threads", str(args.threads)]
    done = subprocess.run(command, stdout=subprocess.PIPE, check=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="pretrained:smollm2-135m-instruct")
    parser.add_argument("--limit", type=int, default=10, help="privacy_extraction's --limit (default 10)")
    parser.add_argument("--steps", type=int, default=3, help="the plain loop's training steps (default 3)")
    parser.add_argument("--batch", type=int, default=8, help="the plain loop's rows a batch (default 8)")
    parser.add_argument("--tokens", type=int, default=74, help="the plain loop's tokens a row (default 74)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", default="task,loop", help="comma-separated: task, loop")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "METHOD"), help=argparse.SUPPRESS)
    add_output_flag(parser)
    args = parser.parse_args()
    if args.child:
        kind, method = args.child
        print(json.dumps((task_child if kind == "task" else loop_child)(method, args)))
        return
    kinds = [kind for kind in args.only.split(",") if kind]
    report: dict = {"model": args.model, "limit": args.limit, "steps": args.steps, "batch": args.batch,
                    "tokens": args.tokens, "threads": args.threads}
    for kind in kinds:
        report[kind] = {}
        for method in METHODS:
            report[kind][method] = found = in_child(kind, method, args)
            print(f"{kind} {method}: added {found['added_bytes'] / GB:.2f} GB, estimate "
                  f"{found['estimate_bytes']['needed'] / GB:.2f} GB", file=sys.stderr, flush=True)
    emit(report, args.output)


if __name__ == "__main__":
    main()
