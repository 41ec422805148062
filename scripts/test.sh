#!/usr/bin/env bash
# The test command: create or reuse the virtual environment, install the project with everything the
# tests need (including the real native libraries that run on a CPU), lint, and run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
ensure_venv "test,native,examples,io,bench,jit,mpi,onnx"
export PATH="$(cd "$VENV/bin" && pwd):$PATH"  # the venv's tools, mpiexec of the mpi extra included
"$VENV/bin/ruff" check pymagma magmadnn tests examples scripts
# Bytecode is written for this run even where the environment says not to (PYTHONDONTWRITEBYTECODE): otherwise
# every process of the run -- each worker's collection, every test's subprocess (the GPU check's dry run alone starts
# a dozen) -- compiles the project again and pytest rewrites the tests again.  The __pycache__ folders it leaves are
# git-ignored.  Measured (CPU): import magmadnn 0.90 -> 0.61 s, a whole collection 19.1 -> 13.6 s once warm.
unset PYTHONDONTWRITEBYTECODE
export MAGMADNN_REQUIRE="${MAGMADNN_REQUIRE:-native,mpi}"  # tests/conftest.py: a skipped native/mpi test fails
# pytest-xdist: one worker per core, each test file on one worker (module fixtures, and the tests that count what
# their module's earlier tests called); "$@" comes last: `scripts/test.sh -n 0` runs serially
workers=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
[ "$workers" -gt 1 ] || workers=0
# one BLAS/OpenMP thread per worker when the workers take every core (a caller's setting wins)
[ "$workers" -eq 0 ] || export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
exec "$VENV/bin/python" -m pytest -n "$workers" --dist loadfile "$@"
