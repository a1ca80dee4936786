#!/usr/bin/env bash
# The speech-clip protocol through `sarcasmd eval`, out of fold: per fold, audio/video/
# fusion heads trained on the other folds' clips; writes models/studies/speech_eval/SPEECH_EVAL.md and
# .json. About 5 minutes here.
# Usage: models/studies/speech_eval/speech_eval.sh [--data DIR] [--train-segmentation served --out FILE]
#   --train-segmentation served   train the fold heads on features segmented as served
#                                 (the daemon's defaults) instead of features.toml's
set -euo pipefail
args=() extra=() out=models/studies/speech_eval/SPEECH_EVAL.md
while [ $# -gt 0 ]; do
    case "$1" in
        --train-segmentation) extra+=("$1" "$2"); shift 2 ;;
        --out) out="$2"; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
source "$(dirname "$0")/../../recipe/env.sh" "${args[@]}"
"$venv/bin/python" -m models.studies.speech_eval.speech_eval --manifests "$cache/manifests" --bin target/release/sarcasmd \
  --work "$cache/speech-eval${extra:+-${extra[1]}}" --heads models/heads --out "$out" \
  --prosody-version "$prosody_version" --vision-version "$vision_version" "${extra[@]}"
