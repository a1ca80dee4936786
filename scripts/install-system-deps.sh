#!/usr/bin/env bash
# Installs the Debian/Ubuntu/Raspberry Pi OS packages that building, fetching models and
# testing need. `--test` adds the real peers the integration tests talk to (an MQTT broker,
# a headless browser, ffmpeg as an independent caption parser, openssl for TLS test
# certificates); a board that only runs the daemon does not need them.
# Idempotent: packages already present are skipped by apt.
set -euo pipefail
pkgs=(
  cmake libclang-dev clang libasound2-dev pkg-config   # whisper.cpp (cmake + bindgen), cpal (ALSA)
  python3 python3-venv python3-pip                     # model fetch/convert and training scripts
  espeak-ng sox                                        # real synthetic speech for tests and samples
)
if [ "${1:-}" = "--test" ]; then
  pkgs+=(
    mosquitto mosquitto-clients                        # MQTT broker + subscriber (started by the tests on loopback)
    chromium chromium-driver                           # headless browser test of the caption overlay
    ffmpeg                                             # parses our WebVTT/SRT independently
    openssl                                            # certificates for the MQTT TLS test
  )
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "system packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
