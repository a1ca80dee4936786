#!/usr/bin/env bash
# Runs one exploratory script (models/studies/NAME/NAME.py, run as python -m models.studies.NAME.NAME) with the exploratory venv and
# MiniLM, writing models/studies/NAME/REPORT_NAME.md and .json; nothing it produces is served.
# Usage: models/studies/textlib/explore_run.sh NAME REPORT_NAME [--data DIR] [--skip-finetune]
set -euo pipefail
script="$1" report="$2"
shift 2
flags=() args=()
for a in "$@"; do [ "$a" = "--skip-finetune" ] && flags+=("$a") || args+=("$a"); done
source "$(dirname "$0")/../../recipe/env.sh" "${args[@]}"
source models/studies/textlib/explore_env.sh
"$xvenv/bin/python" -m "models.studies.$script.$script" --manifests "$cache/manifests" --bin target/release/sarcasmd \
  --work "$cache/explore" --minilm "$minilm" --out "models/studies/$script/$report.md" "${flags[@]}"
