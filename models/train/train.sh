#!/usr/bin/env bash
# Retrain the heads in models/heads/ from ../shared/data with the daemon's own features.
# Usage: models/train/train.sh [--data DIR]   (default: ../shared/data beside the repo)
set -euo pipefail
source "$(dirname "$0")/env.sh" "$@"
"$venv/bin/python" models/train/train.py --data "$data" --bin target/release/sarcasmd \
  --work "$cache/train" --out models/heads --prosody-version "$prosody_version" --vision-version "$vision_version"
# Extras head (MUStARD++ emotions, sarcasm type, valence, arousal; models/heads/EXTRAS.md).
"$venv/bin/python" models/train/extras.py --bin target/release/sarcasmd --work "$cache/train" --out models/heads
