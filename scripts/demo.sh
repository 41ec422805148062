#!/usr/bin/env bash
# The main-job command: train a CNN and report progress, per-epoch loss/accuracy, test accuracy, throughput and a
# training-curve PNG (runs/demo-curve.png, when matplotlib is installed). Needs no network.
#   scripts/demo.sh              the embedded handwritten digits (MNIST instead when the data cache holds it)
#   scripts/demo.sh DIR          MNIST from DIR (IDX files; a folder with only the t10k test set is split 8,000/2,000)
#   scripts/demo.sh [DIR] OPTS   extra options for `magmadnn train`, e.g. --epochs 5 --device host
# The device is auto (the GPU when pymagma finds one or PYMAGMA_SIMULATOR=1, else the host); --device gpu, gpu:N or
# host choose it, e.g. `PYMAGMA_SIMULATOR=1 scripts/demo.sh --device gpu --max-steps 20` on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
ensure_venv "native,examples,io,jit"
data_args=()
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    data_args=(--data "$1")
    shift
fi
exec "$VENV/bin/python" -m magmadnn train --model cnn --dataset auto "${data_args[@]}" --device auto \
    --plot runs/demo-curve.png "$@"
