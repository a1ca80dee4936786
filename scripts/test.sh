#!/usr/bin/env bash
# The test command: set up whatever is missing (idempotent), then run every test with
# the real models. Tests that need ../shared/data say so and skip when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-system-deps.sh --test
bash scripts/setup.sh
bash scripts/install-test-tools.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Unit tests (lib, bin) and integration tests; the crate has no doc-tests.
status=0
cargo test --release --locked --lib --bins --tests "$@" 2>&1 | tee "$log" || status=$?
passed=$(grep -Eo '^test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s+=$4} END {print s+0}')
failed=$(grep -Eo '; [0-9]+ failed' "$log" | awk '{s+=$2} END {print s+0}')
echo "sarcasmd: $passed passed, $failed failed"
exit $status
