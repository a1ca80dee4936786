#!/usr/bin/env bash
# Text-view figures under the issue's protocols (MUStARD++ 5-fold with and without
# context, training compositions, MUStARD speaker-independent via `sarcasmd eval`).
# Writes models/studies/protocols/PROTOCOLS.md and .json. Usage: models/studies/protocols/protocols.sh [--data DIR]
set -euo pipefail
source "$(dirname "$0")/../../recipe/env.sh" "$@"
"$venv/bin/python" -m models.studies.protocols.protocols --manifests "$cache/manifests" --bin target/release/sarcasmd \
  --work "$cache/protocols" --heads models/heads --out models/studies/protocols/PROTOCOLS.md
