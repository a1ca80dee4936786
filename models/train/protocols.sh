#!/usr/bin/env bash
# Text-view figures under the issue's protocols (MUStARD++ 5-fold with and without
# context, training compositions, MUStARD speaker-independent via `sarcasmd eval`).
# Writes models/heads/PROTOCOLS.md and .json. Usage: models/train/protocols.sh [--data DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
data="../shared/data"
[ "${1:-}" = "--data" ] && data="$2"
[ -d "$data" ] || { echo "error: $data not found (the corpora live in ../shared/data)" >&2; exit 2; }
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sarcasmd"
venv="$cache/venv-train"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r models/train/requirements.txt
cargo build --release --locked
python3 scripts/manifests.py --data "$data" --out "$cache/manifests"
"$venv/bin/python" models/train/protocols.py --manifests "$cache/manifests" --bin target/release/sarcasmd \
  --work "$cache/protocols" --heads models/heads --out models/heads/PROTOCOLS.md
