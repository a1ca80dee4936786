#!/usr/bin/env bash
# Everything a fresh Debian/Ubuntu/Raspberry Pi OS box needs to build and run sarcasmd:
# system packages, the converted models (into the cache, not the repo) and a release build.
# Idempotent: re-running skips what is already in place.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-system-deps.sh

if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  cat >&2 <<'MSG'
error: no Rust toolchain (cargo) found.
sarcasmd needs Rust >= 1.85; Debian's packaged rustc is too old. Install rustup
(https://rustup.rs, or `apt-get install rustup` on Debian 13+/Ubuntu 24.04+), then run
`rustup default stable` and this script again.
MSG
  exit 1
fi

bash scripts/fetch-models.sh
cargo build --release --locked
