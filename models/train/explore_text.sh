#!/usr/bin/env bash
# Exploratory text-view experiments (stronger encoders, pooling, SIGN pairs, fine-tuning)
# under the issue's protocols; writes models/heads/EXPLORE_TEXT.md and .json. Nothing it
# produces is served. About 35 minutes on one core (--skip-finetune: about 10).
# Usage: models/train/explore_text.sh [--data DIR] [--skip-finetune]
set -euo pipefail
skip=""
args=()
for a in "$@"; do [ "$a" = "--skip-finetune" ] && skip="--skip-finetune" || args+=("$a"); done
source "$(dirname "$0")/env.sh" "${args[@]}"
source models/train/explore_env.sh
"$xvenv/bin/python" models/train/explore_text.py --manifests "$cache/manifests" --bin target/release/sarcasmd \
  --work "$cache/explore" --minilm "$minilm" --out models/heads/EXPLORE_TEXT.md $skip
