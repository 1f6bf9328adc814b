#!/usr/bin/env bash
# The GPU check as two device calls (docs/gpu.md; how the records of 2026-11-27 were measured), run on
# the GPU machine from the repository root with bench/.gpu_model, bench/.gpu_model7b and bench/.gpu_wheels
# carried (prepared here: `gpu_check.py --prepare bench/.gpu_model`, `--prepare bench/.gpu_model7b --shape
# qwen2.5-7b --tasks weat` (its config and tokenizer; the data comes from bench/.gpu_model/cache) and
# `bash bench/gpu_wheels.sh`). Each call stays within SECONDS (SIGINT then: the task running is reported
# `interrupted` and the record keeps the others); the record and the log land in $OUT.
#
#   bash bench/gpu_calls.sh 1.7b [SECONDS]    # SmolLM2-1.7B's shape, every task at its defaults (default 350)
#   bash bench/gpu_calls.sh 7b [SECONDS] [LIMIT]   # Qwen2.5-7B's shape, --limit LIMIT (32), LoRA fine-tuning
set -u
SHAPE="${1:?1.7b or 7b}"
SECONDS_LIMIT="${2:-350}"
[ -d /tmp/site/datasets ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --target /tmp/site bench/.gpu_wheels/*.whl || exit 9
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD TOKENIZERS_PARALLELISM=false
export MEMBENCH_CACHE=$PWD/bench/.gpu_model/cache
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
case "$SHAPE" in
    1.7b) LABEL=smollm2-1.7b; ARGS=(--model-dir bench/.gpu_model) ;;
    7b) LABEL=qwen2.5-7b; ARGS=(--model-dir bench/.gpu_model7b --limit "${3:-32}"
                               --task-args "finetune_memorization=--finetune-method lora"
                               --task-args "privacy_extraction=--finetune-method lora") ;;
    *) echo "gpu_calls: 1.7b or 7b, not $SHAPE" >&2; exit 2 ;;
esac
timeout -s INT "$SECONDS_LIMIT" python3 bench/gpu_check.py "${ARGS[@]}" --budget-s $((SECONDS_LIMIT - 60)) \
    --output "$OUT/gpu_check--$LABEL.json" > "$OUT/log-$LABEL.txt" 2>&1
echo "exit $?"
grep -E 'gpu_check|rror|Traceback|^task |^---|^[a-z_]+ +(ok|error|skipped|interrupted|not run)|^total|Killed' \
    "$OUT/log-$LABEL.txt" | cut -c1-400 | tail -60
