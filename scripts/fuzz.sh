#!/usr/bin/env bash
# Fuzz the parsers that read untrusted input: WAV files (and the resampler behind them),
# config files, dataset manifests and the room's corrections file (fuzz/README.md).
#
# Usage: scripts/fuzz.sh [--seconds N] [TARGET...]
#   TARGET: wav, resample, config, manifest, store (default: all); N seconds each (default 60).
#
# The committed seeds (fuzz/seeds/) are read, never written: the growing corpus, crash
# inputs and logs go to ~/.cache/sarcasmd/fuzz/. Exit 1 when a target crashes; the
# input is printed, and belongs in fuzz/regressions/<target>/ once the bug is fixed.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
seconds=60
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done
[ ${#targets[@]} -gt 0 ] || targets=(wav resample config manifest store)

if ! cargo fuzz --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION"; then
    echo "fuzz: installing cargo-fuzz $CARGO_FUZZ_VERSION" >&2
    cargo install --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION"
fi
# cargo-fuzz passes -Z flags (sanitizer, coverage instrumentation); this machine has only
# the stable toolchain, and RUSTC_BOOTSTRAP lets it accept them.
export RUSTC_BOOTSTRAP=1
work="${XDG_CACHE_HOME:-$HOME/.cache}/sarcasmd/fuzz"
fuzz_args=(-O -a --target-dir target/fuzz)
mkdir -p "$work"
if ! cargo fuzz build "${fuzz_args[@]}" >"$work/build.log" 2>&1; then
    tail -30 "$work/build.log" >&2
    echo "fuzz: building the targets failed (log: $work/build.log)" >&2
    exit 1
fi
status=0
printf '%-9s %8s %12s %10s %8s %8s %s\n' target seconds executions exec/s cov corpus result
for t in "${targets[@]}"; do
    mkdir -p "$work/corpus/$t" "$work/artifacts/$t"
    log="$work/$t.log"
    result=ok
    # -timeout: one input taking 10 s is a hang worth reporting; -rss_limit_mb: the
    # daemon must not need gigabytes for any input.
    if ! cargo fuzz run "${fuzz_args[@]}" "$t" "$work/corpus/$t" "fuzz/seeds/$t" "fuzz/regressions/$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$work/artifacts/$t/" -print_final_stats=1 >"$log" 2>&1; then
        result="CRASH: $(grep -o "Test unit written to .*" "$log" | tail -1 | cut -d' ' -f5-)"
        status=1
    fi
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2 || echo "?")
    corp=$(find "$work/corpus/$t" -type f | wc -l)
    printf '%-9s %8s %12s %10s %8s %8s %s\n' "$t" "$seconds" "$execs" "$rate" "$cov" "$corp" "$result"
    [ "$result" = ok ] || { grep -B2 -A25 -m1 "panicked\|ERROR: AddressSanitizer\|ERROR: libFuzzer" "$log" >&2 || tail -40 "$log" >&2; }
done
echo "fuzz: logs, corpus and crash inputs in $work"
exit $status
