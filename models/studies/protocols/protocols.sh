#!/usr/bin/env bash
# Text-view figures under the issue's protocols (MUStARD++ 5-fold with and without
# context, training compositions, MUStARD speaker-independent via `sarcasmd eval`).
# Writes models/heads/PROTOCOLS.md and .json. Usage: models/train/protocols.sh [--data DIR]
set -euo pipefail
source "$(dirname "$0")/env.sh" "$@"
"$venv/bin/python" models/train/protocols.py --manifests "$cache/manifests" --bin target/release/sarcasmd \
  --work "$cache/protocols" --heads models/heads --out models/heads/PROTOCOLS.md
