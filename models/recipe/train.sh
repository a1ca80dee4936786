#!/usr/bin/env bash
# Retrain the heads in models/heads/ from ../shared/data with the daemon's own features:
# audio and video (train.py), extras, text (text_head_v2.py), then fusion (cross_corpus.py).
# Usage: models/train/train.sh [--data DIR]   (default: ../shared/data beside the repo)
set -euo pipefail
source "$(dirname "$0")/env.sh" "$@"
# The video view reads the clips' video through ffmpeg (a test dependency of the daemon).
command -v ffprobe >/dev/null || bash scripts/install-system-deps.sh --test
"$venv/bin/python" models/train/train.py --data "$data" --bin target/release/sarcasmd \
  --work "$cache/train" --out models/heads --prosody-version "$prosody_version" --vision-version "$vision_version"
# Extras head (MUStARD++ emotions, sarcasm type, valence, arousal; models/heads/EXTRAS.md).
"$venv/bin/python" models/train/extras.py --bin target/release/sarcasmd --work "$cache/train" --out models/heads
# The text head (recipe chosen by MUStARD++ leave-one-show-out; models/heads/TEXT_V2.md).
"$venv/bin/python" models/train/text_head_v2.py --manifests "$cache/manifests" --bin target/release/sarcasmd \
  --out models/heads/TEXT_V2.md --second-voice --write models/heads
# The fusion head: which views it weighs and its calibration, from the cross-corpus
# protocol with the text head above (models/heads/CROSS_CORPUS.md).
"$venv/bin/python" models/train/cross_corpus.py --manifests "$cache/manifests" --bin target/release/sarcasmd \
  --work "$cache/cross-corpus" --heads models/heads --out models/heads/CROSS_CORPUS.md \
  --prosody-version "$prosody_version" --vision-version "$vision_version" --ship
