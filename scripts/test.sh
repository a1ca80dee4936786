#!/usr/bin/env bash
# The test command: set up whatever is missing (idempotent), then run every test with
# the real models. Tests that need ../shared/data say so and skip when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo test --release --locked "$@"
