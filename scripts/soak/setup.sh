#!/usr/bin/env bash
# Installs the soak package (scripts/soak: pyproject.toml, sarcasmd_soak/) with its pinned
# dependencies (requirements.txt) into a venv outside the repo:
#   ${SARCASMD_SOAK_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/sarcasmd/venv-soak}
# Idempotent: the dependencies are installed again only when requirements.txt changes,
# the package only when its sources do (stamps in the venv). scripts/soak/run and
# run-faults call it first, so running it by hand is optional.
#
#   bash scripts/soak/setup.sh                 # install or update, say what it does
#   bash scripts/soak/setup.sh --quiet --exec sarcasmd-soak ARGS...   # (what run does)
#
# Environment: SARCASMD_PYTHON (python for the venv, default python3, >= 3.9),
# SARCASMD_SOAK_VENV; PIP_INDEX_URL etc. are honoured by pip.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sarcasmd"
venv="${SARCASMD_SOAK_VENV:-$cache/venv-soak}"
python="${SARCASMD_PYTHON:-python3}"
req="$here/requirements.txt"

quiet=0
run=()
while [ $# -gt 0 ]; do
    case "$1" in
        --quiet) quiet=1; shift ;;
        --exec) [ $# -ge 2 ] || { echo "soak setup: --exec needs a program" >&2; exit 2; }
                shift; run=("$@"); break ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "soak setup: unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
done

say() { [ "$quiet" = 1 ] || echo "soak setup: $*" >&2; }
fail() { echo "soak setup: error: $*" >&2; exit 1; }

mkdir -p "$cache/logs" "$(dirname "$venv")"
log="$cache/logs/venv-soak.log"
{
    # One installer at a time (two worktrees may share the venv).
    flock 9

    if [ ! -x "$venv/bin/python" ]; then
        "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' 2>/dev/null ||
            fail "'$python' is missing or older than Python 3.9; set SARCASMD_PYTHON to a newer python3."
        echo "soak setup: creating the venv $venv" >&2
        if ! "$python" -m venv "$venv" >"$log" 2>&1; then
            rm -rf "$venv"
            fail "could not create a venv in $venv with $python (log: $log). On Debian/Ubuntu: apt-get install python3-venv."
        fi
    fi

    pip=("$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q)
    want="$(sha256sum "$req" | cut -d' ' -f1)"
    stamp="$venv/.sarcasmd-soak-requirements.sha256"
    if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
        echo "soak setup: installing the pinned packages of scripts/soak/requirements.txt into $venv" >&2
        if ! "${pip[@]}" -r "$req" >"$log" 2>&1; then
            tail -n 3 "$log" >&2 || true
            fail "pip could not install scripts/soak/requirements.txt into $venv (log: $log). Check that PyPI (or PIP_INDEX_URL) is reachable; if the venv is broken, delete $venv and re-run."
        fi
        echo "$want" >"$stamp"
    fi

    # The package itself (not editable: the venv may serve several checkouts), again
    # whenever its sources differ from what was installed last.
    want="$(cd "$here" && cat pyproject.toml sarcasmd_soak/*.py | sha256sum | cut -d' ' -f1)"
    stamp="$venv/.sarcasmd-soak-package.sha256"
    if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
        say "installing the soak package from $here"
        if ! "${pip[@]}" --no-deps --no-build-isolation --force-reinstall "$here" >"$log" 2>&1; then
            tail -n 3 "$log" >&2 || true
            fail "pip could not install the soak package from $here into $venv (log: $log)"
        fi
        echo "$want" >"$stamp"
    else
        say "up to date: $venv"
    fi
} 9>"$venv.lock"

if [ ${#run[@]} -gt 0 ]; then
    export SARCASMD_REPO="${SARCASMD_REPO:-$(cd "$here/../.." && pwd)}"
    prog="${run[0]}"
    exec "$venv/bin/$prog" "${run[@]:1}"
fi
