#!/usr/bin/env bash
# Text head v2 (issue 22): training compositions, Whisper-style noise and C for the
# logistic-regression text head over the same USE-m3 embedding, measured under
# MUStARD++ leave-one-show-out, MUStARD speaker-independent and the speech clips' Whisper
# transcripts. Writes models/studies/text_v2/TEXT_V2.md and .json; caches under
# ~/.cache/sarcasmd/text-v2/. Usage: models/studies/text_v2/text_head_v2.sh [--data DIR] [--write DIR]
# (--write DIR: the chosen head as DIR/text_head.onnx + .json, e.g. /tmp/text-v2-heads).
set -euo pipefail
write=()
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --write) write=(--write "$2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
source "$(dirname "$0")/../../recipe/env.sh" "${args[@]}"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} \
  nice -n 10 "$venv/bin/python" -m models.studies.text_v2.text_head_v2 --manifests "$cache/manifests" \
  --bin target/release/sarcasmd --out models/studies/text_v2/TEXT_V2.md --second-voice "${write[@]}"
