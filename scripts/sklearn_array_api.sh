#!/usr/bin/env bash
# scikit-learn's own array-API tests against pymagma.array_api on the simulator: every test module of the installed
# scikit-learn that parametrizes over its array namespaces, with pymagma's namespace (float64, float32) in their
# place (scripts/sklearn_array_api_plugin.py). Usage: scripts/sklearn_array_api.sh [pytest arguments, e.g. -n 2]
# Results and the known gaps: docs/array-api.md, "scikit-learn".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
sklearn=$("$python" -c 'import os, sklearn; print(os.path.dirname(sklearn.__file__))')
mapfile -t files < <(grep -rl --include='test_*.py' -e yield_namespace_device_dtype_combinations -e yield_namespaces \
                     "$sklearn" | sort)
cd "$(mktemp -d)"  # outside the repository: its conftest and pytest settings stay out of scikit-learn's tests
export PYTHONPATH="$root/scripts:$root${PYTHONPATH:+:$PYTHONPATH}" SCIPY_ARRAY_API=1 PYMAGMA_SIMULATOR=1
exec "$python" -m pytest -p sklearn_array_api_plugin -p no:cacheprovider -q -W ignore -k pymagma "${files[@]}" "$@"
