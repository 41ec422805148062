#!/usr/bin/env bash
# The test command: create or reuse the virtual environment, install the project with everything the
# tests need (including the real native libraries that run on a CPU), lint, and run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
ensure_venv "test,native,examples,io,bench,jit,mpi,onnx"
export PATH="$(cd "$VENV/bin" && pwd):$PATH"  # the venv's tools, mpiexec of the mpi extra included
"$VENV/bin/ruff" check pymagma magmadnn tests examples scripts
export MAGMADNN_REQUIRE="${MAGMADNN_REQUIRE:-native,mpi}"  # tests/conftest.py: a skipped native/mpi test fails
exec "$VENV/bin/python" -m pytest "$@"
