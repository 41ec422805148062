# Sourced by the scripts: create or reuse $VENV (default .venv) and install the project with the given extras.
VENV=${MAGMADNN_VENV:-.venv}
ensure_venv() {
    local extras=$1
    if [ ! -x "$VENV/bin/python" ]; then
        "${PYTHON:-python3}" -m venv "$VENV"
    fi
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[${extras}]"
}
