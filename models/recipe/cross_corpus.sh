#!/usr/bin/env bash
# The cross-corpus protocol (House <-> MUStARD++ clips, and speaker-independent folds in
# the MUStARD++ clips), audio in, through `sarcasmd eval`; decides which views the
# shipped fusion head weighs. Writes models/studies/cross_corpus/CROSS_CORPUS.md and
# .json; with --ship also the shipped models/heads/fusion_head.{onnx,json} (pinned).
# Usage: models/recipe/cross_corpus.sh [--data DIR] [--ship]
set -euo pipefail
args=() extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --ship) extra+=("$1"); shift ;;
        *) args+=("$1"); shift ;;
    esac
done
source "$(dirname "$0")/env.sh" "${args[@]}"
# The video view reads the clips' video through ffmpeg (a test dependency of the daemon).
command -v ffprobe >/dev/null || bash scripts/install-system-deps.sh --test
"$venv/bin/python" -m models.recipe.cross_corpus --manifests "$cache/manifests" --bin target/release/sarcasmd \
  --work "$cache/cross-corpus" --heads models/heads --out models/studies/cross_corpus/CROSS_CORPUS.md \
  --prosody-version "$prosody_version" --vision-version "$vision_version" "${extra[@]}"
