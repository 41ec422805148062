# Sourced by the scripts: create or reuse $VENV (default .venv) and install the project with the given extras.
# The install is skipped when the stamp says this checkout's pyproject.toml is installed with those extras
# already, so a complete environment also works without network.
VENV=${MAGMADNN_VENV:-.venv}
ensure_venv() {
    local extras=$1 stamp key have e site
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
    # pip compiles each installed module to bytecode one file at a time (about 40 s of CPU for the test extras);
    # compileall does the same on every core. Errors are ignored, as pip ignores them (a module written for a newer
    # Python than this one, shipped in a wheel, does not compile).
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-compile -e ".[${extras}]"
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$VENV/bin/python" -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
    printf '%s\n%s\n' "$key" "$extras" > "$stamp"
}
