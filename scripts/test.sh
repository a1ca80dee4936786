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
# --no-fail-fast: one failing test binary must not hide the others (cargo otherwise stops
# at the first, and every test in the binaries after it never runs).
status=0
cargo test --release --locked --no-fail-fast --lib --bins --tests "$@" 2>&1 | tee "$log" || status=$?
passed=$(grep -Eo '^test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s+=$4} END {print s+0}')
failed=$(grep -Eo '; [0-9]+ failed' "$log" | awk '{s+=$2} END {print s+0}')
# Each test binary cargo starts prints "Running ..."; one that died (signal, abort) prints
# no "test result" line after it: count each such binary as one failure.
started=$(grep -cE '^ +Running ' "$log" || true)
finished=$(grep -c '^test result: ' "$log" || true)
died=$((started > finished ? started - finished : 0))
echo "sarcasmd: $started test binaries started, $finished ran to the end, $died died without a result"
echo "sarcasmd: $passed passed, $((failed + died)) failed"
exit $status
