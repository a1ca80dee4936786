#!/usr/bin/env bash
# Room head by simulation (issue 37, item 4): per-room corrections from a handful of user
# clicks on top of a series-out text head, on AMI meeting series (and MUStARD++ shows) as
# rooms. Writes models/studies/room_feedback/ROOM_FEEDBACK.md and .json. Caches under
# ~/.cache/sarcasmd/room-feedback/; reads the text-v3 embedding cache and the manifests.
# About 2 minutes with warm caches (+1.5 min for the 25 base-head fits on a first run).
# Unlike the other wrappers it does not source models/recipe/env.sh (which runs cargo build
# and rewrites the manifests): run that, or models/recipe/text_head_meetings.sh, once first.
# Usage: models/studies/room_feedback/run.sh [--no-sitcom]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sarcasmd"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} \
  nice -n 10 "$cache/venv-train/bin/python" -m models.studies.room_feedback.room_feedback \
  --manifests "$cache/manifests" --bin target/release/sarcasmd \
  --out models/studies/room_feedback/ROOM_FEEDBACK.md "$@"
