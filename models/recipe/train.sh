#!/usr/bin/env bash
# Rebuild every head in models/heads/ from ../shared/data with the daemon's own features,
# in dependency order: audio and video (train.py), extras (extras.py, then pinned), text
# (text_head_meetings.py), then fusion (cross_corpus.py --ship, which reads the text head
# written just before). models/recipe/README.md: each step alone, inputs, run times.
# Usage: models/recipe/train.sh [--data DIR]   (default: ../shared/data beside the repo)
set -euo pipefail
source "$(dirname "$0")/env.sh" "$@"
# The video view reads the clips' video through ffmpeg (a test dependency of the daemon).
command -v ffprobe >/dev/null || bash scripts/install-system-deps.sh --test
# The audio, video and extras heads' `version`: the date their recipe last changed what it
# writes, so a rebuild that changes nothing writes the committed files again. Bump it when a
# change of recipe or data changes them (the text and fusion scripts fix theirs likewise).
heads_version=2026-11-22
# Audio and video heads (and the v1 reference figures, models/studies/heads_v1/HEADS_V1.md).
"$venv/bin/python" -m models.recipe.train --data "$data" --bin target/release/sarcasmd \
  --work "$cache/train" --out models/heads --report models/studies/heads_v1/HEADS_V1.md \
  --prosody-version "$prosody_version" --vision-version "$vision_version" --version "$heads_version"
# Extras head (MUStARD++ emotions, sarcasm type, valence, arousal; models/studies/extras/EXTRAS.md),
# pinned in heads.lock.json (extras.py writes its own graph, not through write_head).
"$venv/bin/python" -m models.recipe.extras --bin target/release/sarcasmd --work "$cache/train" --out models/heads \
  --report models/studies/extras/EXTRAS.md --version "$heads_version"
python3 -m models.recipe.pin_heads models/heads extras_head
# The text head v3: AMI meeting lines beside v2's sitcom part (models/studies/meeting_text/MEETING_TEXT.md).
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} \
  "$venv/bin/python" -m models.recipe.text_head_meetings --manifests "$cache/manifests" --bin target/release/sarcasmd \
  --out models/studies/meeting_text/MEETING_TEXT.md --write models/heads
# The fusion head: which views it weighs and its calibration, from the cross-corpus
# protocol with the text head above (models/studies/cross_corpus/CROSS_CORPUS.md).
"$venv/bin/python" -m models.recipe.cross_corpus --manifests "$cache/manifests" --bin target/release/sarcasmd \
  --work "$cache/cross-corpus" --heads models/heads --out models/studies/cross_corpus/CROSS_CORPUS.md \
  --prosody-version "$prosody_version" --vision-version "$vision_version" --ship
