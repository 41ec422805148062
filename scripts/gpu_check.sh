#!/usr/bin/env bash
# Everything that needs a GPU, in one command (<= 8 minutes on one H200): the `gpu`-marked tests, then the GPU
# benchmarks against PyTorch.  No network and no installs: it uses the machine's python3 as it is.
# Logs and JSON go to $OUT (default ./gpu-out); record the outcome in docs/gpu-runs.md.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-dev}
{
    echo "date: $(date -u +%FT%TZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
    "$PY" -m pymagma 2>&1
} | tee "$OUT/environment.txt"
timeout 330 "$PY" -m pytest -m gpu -q -rfEs -p no:cacheprovider --junitxml="$OUT/gpu-tests.xml" 2>&1 \
    | tee "$OUT/gpu-tests.log"
tests_rc=${PIPESTATUS[0]}
timeout 120 "$PY" scripts/bench.py --recipe "" --gpu --json "$OUT/bench-gpu.json" 2>&1 | tee "$OUT/bench-gpu.log"
bench_rc=${PIPESTATUS[0]}
echo "gpu tests exit $tests_rc, benchmarks exit $bench_rc"
exit $(( tests_rc != 0 ? tests_rc : bench_rc ))
