#!/usr/bin/env bash
# Python tools the tests use as independent, reference implementations (not our code):
# prometheus_client's OpenMetrics parser checks /metrics. Pinned; installed into a venv
# in the cache (~/.cache/sarcasmd/venv-test), never into the repo. Idempotent.
set -euo pipefail
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sarcasmd"
venv="$cache/venv-test"
want="prometheus-client==0.21.1"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -m pip show prometheus-client 2>/dev/null | grep -q '^Version: 0.21.1$'; then
  echo "test tools: present ($venv)"
  exit 0
fi
mkdir -p "$cache"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "$want"
echo "test tools: installed $want into $venv"
