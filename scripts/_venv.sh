# Sourced by the scripts: create or reuse $VENV (default .venv) and install the project with the given extras.
# The install is skipped when the stamp says this checkout's pyproject.toml is installed with those extras
# already, so a complete environment also works without network.
VENV=${MAGMADNN_VENV:-.venv}
ensure_venv() {
    local extras=$1 stamp key have e
    if [ ! -x "$VENV/bin/python" ]; then
        "${PYTHON:-python3}" -m venv "$VENV"
    fi
    stamp="$VENV/.magmadnn-install"
    key="$(sha256sum pyproject.toml | cut -d' ' -f1) $PWD"
    if [ -f "$stamp" ] && [ "$(head -n1 "$stamp")" = "$key" ]; then
        have=",$(sed -n 2p "$stamp"),"
        for e in ${extras//,/ }; do
            [[ $have == *",$e,"* ]] || { have=""; break; }
        done
        [ -n "$have" ] && return 0
        extras="$(sed -n 2p "$stamp"),$extras"
    fi
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[${extras}]"
    printf '%s\n%s\n' "$key" "$extras" > "$stamp"
}
