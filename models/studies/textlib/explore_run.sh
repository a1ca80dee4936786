#!/usr/bin/env bash
# Runs one exploratory script (models/train/NAME.py) with the exploratory venv and
# MiniLM, writing models/heads/REPORT_NAME.md and .json; nothing it produces is served.
# Usage: models/train/explore_run.sh NAME REPORT_NAME [--data DIR] [--skip-finetune]
set -euo pipefail
script="$1" report="$2"
shift 2
flags=() args=()
for a in "$@"; do [ "$a" = "--skip-finetune" ] && flags+=("$a") || args+=("$a"); done
source "$(dirname "$0")/env.sh" "${args[@]}"
source models/train/explore_env.sh
"$xvenv/bin/python" "models/train/$script.py" --manifests "$cache/manifests" --bin target/release/sarcasmd \
  --work "$cache/explore" --minilm "$minilm" --out "models/heads/$report.md" "${flags[@]}"
