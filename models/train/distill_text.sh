#!/usr/bin/env bash
# Distillation into the shipped text recipe (exploratory): writes
# models/heads/DISTILL_TEXT.md and .json; nothing it produces is served.
# Usage: models/train/distill_text.sh [--data DIR]
set -euo pipefail
source "$(dirname "$0")/env.sh" "$@"
source models/train/explore_env.sh
"$xvenv/bin/python" models/train/distill_text.py --manifests "$cache/manifests" --bin target/release/sarcasmd \
  --work "$cache/explore" --minilm "$minilm" --out models/heads/DISTILL_TEXT.md
