#!/usr/bin/env bash
# Text head v3 (issue 38): the text view trained on our AMI meeting labels beside the
# sitcom corpora, chosen on meeting series held out, with operating points for rare
# sarcasm. Writes models/studies/meeting_text/MEETING_TEXT.md and .json; with --write DIR
# also DIR/text_head.onnx + .json (--write models/heads: the shipped head, pinned).
# Caches under ~/.cache/sarcasmd/text-v3/ (and text-v2/, cross-corpus/ for the sitcom
# material). About 21 minutes with warm caches.
# Usage: models/recipe/text_head_meetings.sh [--data DIR] [--write DIR]
set -euo pipefail
write=()
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --write) write=(--write "$2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
source "$(dirname "$0")/env.sh" "${args[@]}"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} \
  nice -n 10 "$venv/bin/python" -m models.recipe.text_head_meetings --manifests "$cache/manifests" \
  --bin target/release/sarcasmd --out models/studies/meeting_text/MEETING_TEXT.md "${write[@]}"
