#!/usr/bin/env bash
# The Python packages membench needs that the GPU machines' image lacks, as wheels to carry there
# (cp312, manylinux x86-64; the image has torch 2.11+cu130, transformers 5.x, accelerate, numpy,
# scipy, scikit-learn, statsmodels, pandas, pyarrow, safetensors, tokenizers, jinja2, tabulate, tqdm,
# nvidia-ml-py). Pinned to the versions membench is tested with here; downloaded with --no-deps, so
# exactly these and nothing else. typing-extensions rides along because pydantic 2.14 needs >= 4.16
# and the image's version is not known (a newer one is backward compatible).
#
#   bash bench/gpu_wheels.sh [DEST]          # default DEST: bench/.gpu_wheels (git-ignored)
#
# Then on the GPU machine (carry DEST and the folder `bench/gpu_check.py --prepare` wrote):
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site bench/.gpu_wheels/*.whl \
#     && HF_HUB_OFFLINE=1 PYTHONPATH=/tmp/site:$PWD python3 bench/gpu_check.py --model-dir bench/.gpu_model \
#          --output "$OUT/gpu_check.json"
set -euo pipefail

DEST="${1:-bench/.gpu_wheels}"
PYTHON="${PYTHON:-.venv/bin/python}"
WHEELS=(
    datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
    pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
    typing-extensions==4.16.0
    jsonlines==4.0.0 evaluate==0.4.6 gguf==0.19.0 rapidfuzz==3.14.6 pysbd==0.3.4 faker==40.63.0
    opacus==1.6.0 opt-einsum==3.4.0
)

mkdir -p "$DEST"
"$PYTHON" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    --dest "$DEST" "${WHEELS[@]}"
count=$(ls "$DEST"/*.whl | wc -l)
if [ "$count" -ne "${#WHEELS[@]}" ]; then
    echo "gpu_wheels: $DEST holds $count wheels, expected ${#WHEELS[@]} (remove the others: two versions stop the install)" >&2
    exit 1
fi
echo "$DEST: $count wheels, $(du -cb "$DEST"/*.whl | tail -1 | cut -f1) bytes"
