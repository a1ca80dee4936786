#!/usr/bin/env bash
# Quick start: set up (packages, models, build), then run the real pipeline on the
# bundled speech sample and print one JSON event per utterance.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "--- sarcasmd replay samples/meeting.wav (events on stdout, logs on stderr) ---" >&2
exec target/release/sarcasmd replay samples/meeting.wav "$@"
