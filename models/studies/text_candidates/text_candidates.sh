#!/usr/bin/env bash
# Text view: all-MiniLM-L6-v2 beside USE-m3 under text_head_v2's protocols (issue 22;
# exploratory): models/studies/text_candidates/TEXT_CANDIDATES.md and .json. Caches MiniLM embeddings under
# ~/.cache/sarcasmd/text-candidates/. Usage: models/studies/text_candidates/text_candidates.sh [--data DIR]
set -euo pipefail
source "$(dirname "$0")/../../recipe/env.sh" "$@"
source models/studies/textlib/explore_env.sh
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 XLA_FLAGS=--xla_cpu_multi_thread_eigen=false
nice -n 10 "$xvenv/bin/python" -m models.studies.text_candidates.text_candidates --manifests "$cache/manifests" \
  --bin target/release/sarcasmd --minilm "$minilm" --out models/studies/text_candidates/TEXT_CANDIDATES.md
