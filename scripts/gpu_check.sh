#!/usr/bin/env bash
# Everything that needs a GPU, in three tiers, the fastest first (scripts/_gpu_tiers.py runs them):
#   tier 1 (<= 3 minutes on one H100/H200; its checks' time limits add up to at most 180 s): the core. The native
#          libraries load (MAGMA from PyTorch's wheel, cuDNN, cuBLAS, NVRTC, cuFFT once bound); gemm small and
#          large in float32 and bf16 and a batched gemm against torch; linalg.solve and cholesky against NumPy;
#          convolution forward/backward and pooling against torch.nn.functional; every NVRTC program compiled for
#          the device; a few-step fit of the MLP and LeNet-5 eager == CUDA-graph replay bit for bit and == the
#          simulator within the parity tolerance; a mixed_bfloat16 fit; the array API kernels; the gpu tests
#          marked tier1 (scripts/_gpu_checks.py, docs/testing.md);
#   tier 2: the other gpu-marked tests (three pytest groups) and LeNet-5 trained 3 epochs on MNIST (>= 97 %);
#   tier 3: the benchmarks against PyTorch on the same GPU: training (bench.py --gpu), hybrid LAPACK drivers,
#          eager vs graph replay, the host's cost per step (eager, replayed, fit's replay loop, native calls:
#          bench.py --overhead --on-gpu), mixed precision, and real-size bf16 models at batch 128 (bench_models.py).
# Each check runs under its own time limit and writes its line to $OUT/checks.jsonl the moment it finishes;
# $OUT/summary.json lists the checks that never ran. No network and no installs: it uses the machine's python3
# (or $PYTHON) as it is. Record the run with scripts/gpu_record.py $OUT (docs/gpu-runs.md).
#
#   scripts/gpu_check.sh [--tier 1|2|3|1,2] [--budget S] [--data DIR]  # default: tiers 1, 2, 3 in order
#   scripts/gpu_check.sh --tier 1 --dry-run   # on a CPU: every tier's own logic, the simulator standing in (CI)
#   scripts/gpu_check.sh --list               # the planned checks and their time limits
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-gpu-out}
args=()
while [ $# -gt 0 ]; do
    case $1 in
        --dry-run|--list) args+=("$1") ;;
        --tier|--data|--budget)
            [ $# -ge 2 ] || { echo "gpu_check.sh: $1 needs a value" >&2; exit 2; }
            args+=("$1" "$2"); shift ;;
        *) echo "gpu_check.sh: unknown argument $1 (expected --tier N, --dry-run, --budget S, --data DIR or --list)" >&2
           exit 2 ;;
    esac
    shift
done
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci}
exec "$PY" scripts/_gpu_tiers.py --out "$OUT" "${args[@]}"
