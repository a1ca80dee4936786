#!/usr/bin/env bash
# MiniLM fine-tuned end to end on the text head v2 composition (issue 22, next step;
# exploratory, nothing served): models/studies/minilm_ft/MINILM_FT.md and .json.
# Usage: models/studies/minilm_ft/minilm_ft.sh [--data DIR] [--plan si:13,cmpt419:13,...] [--report-only]
# Finished runs are kept in $cache/explore/minilm-ft/ and skipped on a rerun.
set -euo pipefail
args=() flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --data) args+=("$1" "$2"); shift 2 ;;
    --plan) flags+=("$1" "$2"); shift 2 ;;
    *) flags+=("$1"); shift ;;
  esac
done
source "$(dirname "$0")/../../recipe/env.sh" "${args[@]}"
source models/studies/textlib/explore_env.sh
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 XLA_FLAGS=--xla_cpu_multi_thread_eigen=false
nice -n 15 "$xvenv/bin/python" -m models.studies.minilm_ft.minilm_ft --manifests "$cache/manifests" --minilm "$minilm" \
  --work "$cache/explore" --out models/studies/minilm_ft/MINILM_FT.md "${flags[@]}"
