#!/usr/bin/env bash
# Meeting-only text heads, word n-grams and the lines before (issue 38, exploratory): nested
# meeting-series-out figures beside the shipped v3. Writes models/studies/meeting_only/MEETING_ONLY.md and .json.
# Reads the text-v3 embedding cache (models/recipe/text_head_meetings.sh fills it; on a cold
# cache `sarcasmd embed` fills it here, about 3 minutes). About 26 minutes on one core, 8 GB of memory.
# Usage: models/studies/meeting_only/run.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sarcasmd"
[ -x "$cache/venv-train/bin/python" ] || { echo "run models/recipe/text_head_meetings.sh once first (it makes the training venv)" >&2; exit 2; }
[ -x target/release/sarcasmd ] || cargo build --release --locked
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} \
  nice -n 10 "$cache/venv-train/bin/python" -m models.studies.meeting_only.meeting_only \
  --bin target/release/sarcasmd --out models/studies/meeting_only/MEETING_ONLY.md "$@"
