#!/usr/bin/env bash
# Run the data-apis array-api-tests suite (a checkout of github.com/data-apis/array-api-tests with its `array-api`
# submodule, and its requirements: hypothesis, ndindex, pytest-json-report) against pymagma.array_api on the
# simulator. Usage: scripts/array_api_conformance.sh SUITE_DIR [pytest arguments, e.g. --max-examples 10]
# ARRAY_API_TESTS_SKIP_DTYPES (a comma-separated list of dtype names) skips dtypes, e.g. complex64,complex128.
set -euo pipefail
suite=${1:?usage: $0 SUITE_DIR [pytest arguments]}
shift
python=${PYTHON:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}
cd "$suite"
export ARRAY_API_TESTS_MODULE=pymagma.array_api ARRAY_API_TESTS_VERSION=2024.12 PYMAGMA_SIMULATOR=1
# Compile the kernel programs the namespace launches before the suite starts: on a cold kernel cache each takes a
# few seconds, and the first test to launch one would run past Hypothesis's 800 ms deadline (a FlakyFailure).
"$python" -c 'from pymagma.simulator import kernels
for program in ("elementwise", "reductions", "array_api", "array_api_reduce", "array_api_complex"):
    kernels.build(program)'
exec "$python" -m pytest array_api_tests -p no:cacheprovider "$@"
