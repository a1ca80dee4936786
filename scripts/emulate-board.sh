#!/usr/bin/env bash
# Run a command on an emulated slow board: this machine's CPU cut down, core by core, to a
# Raspberry Pi's whisper.cpp speed by cgroup CPU quotas.
#
#   scripts/emulate-board.sh BOARD [--host-encode-ms MS] [--name CGROUP] [--exec] [--print] [--json FILE] -- COMMAND [ARGS...]
#   BOARD: a board of firmware-config/boards/boards.toml with a whisper.cpp figure (rpi4, rpi5)
#   --exec  replace this shell by COMMAND (same PID, for a caller that watches /proc/PID);
#           the cgroup --name (default sarcasmd-emu-BOARD-PID) and its core0..core3 are
#           then left for the caller to read (each coreN/cpu.stat) and remove (rmdir the
#           cores, then the group, once empty); the caller must then judge the run as
#           below (throttled at least once, summed over the cores). With --json the
#           thread placer writes the report when COMMAND has ended.
#   --json FILE  write what was set and what the quotas did (per-core quota, the cores,
#           nr_periods / nr_throttled / throttled time per core, the threads' placement,
#           valid or not) to FILE after the run.
#
# Per-core emulation (cgroup v1, as root). The board's 4 cores are 4 cgroups NAME/core0..3,
# each with the quota of one board core:
#   per-core quota = host cores x host_ms / (board_ms x board cores)  CPUs per 100 ms period
# and every thread of COMMAND (its child processes too) is kept in one of them by
# scripts/board-emulation/cores.py: a new thread starts in its creator's core (so it is
# throttled from the start) and is moved, within 50 ms, to the core with the fewest
# threads; once a second two busy threads sharing a core while another idles are split,
# as a board's scheduler would. So a single-threaded stage runs at one board core's speed
# (before, with one quota for the whole command, a one-thread decode got a whole host
# core whenever the quota was 1 CPU or more, and was never slowed: a Pi 5 on a 2-core
# Zen 4 ran at host speed).
#
# Refuses (exit 2) what cannot be emulated: a per-core quota of one CPU or more (a board
# core as fast as ours or faster), cores that add up to the host's CPUs or more, and a
# per-core quota below 5 ms per period (the scheduler's 5 ms slices). A run in which no
# core was ever throttled ran at the host's speed: it is reported as INVALID and exits 3
# (unless COMMAND failed, whose status is kept).
#
# The factor. whisper.cpp's own bench (one encoder pass over a 30 s window, tiny.en f16,
# all of the board's cores) is the published figure per board: `whisper_bench_encode_ms`
# and its source in firmware-config/boards/boards.toml, with the board's core count.
# The same pass is measured here with all host cores (scripts/board-emulation/
# encode_bench.c, built against the whisper.cpp sarcasmd links; fastest of 5); both sides
# are taken to scale perfectly over their cores, so one core's share is the figure times
# the core count. (Periods of 100 ms, not shorter: the scheduler hands quota out in 5 ms
# slices, and with a 10 ms period a 0.15-CPU quota delivered only about a third of its CPU
# time to Whisper's bursts.) Not emulated: memory bandwidth and caches, thermal
# throttling, the boards' RAM, and the exact moment a board's scheduler would move a
# thread (here: placement at 50 ms, balance once a second).
#
# --print: only print the quotas (and refuse as above).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

board="${1:-}"; shift || true
host_ms="" print_only=0 exec_=0 name="" json=""
while [ $# -gt 0 ]; do
    case "$1" in
        --host-encode-ms) host_ms="${2:-}"; shift 2 ;;
        --print) print_only=1; shift ;;
        --exec) exec_=1; shift ;;
        --name) name="${2:-}"; shift 2 ;;
        --json) json="${2:-}"; shift 2 ;;
        --) shift; break ;;
        *) echo "emulate-board: unknown option $1 (usage: see the top of $0)" >&2; exit 2 ;;
    esac
done
# The board's published encoder time and core count, from the board table.
table="$repo/firmware-config/boards/boards.toml"
read -r board_ms board_cores emulated < <(python3 - "$table" "$board" <<'PY'
import sys, tomllib
boards = tomllib.load(open(sys.argv[1], "rb"))["board"]
can = [b["name"] for b in boards if "whisper_bench_encode_ms" in b]
b = next((b for b in boards if b["name"] == sys.argv[2] and b["name"] in can), None)
print(b["whisper_bench_encode_ms"] if b else 0, b["cores"] if b else 0, "|".join(can))
PY
)
if [ "$board_ms" = 0 ]; then
    echo "emulate-board: BOARD must be one of ${emulated//|/, } (the boards with a whisper.cpp figure in $table; got '$board')" >&2
    exit 2
fi
[ "$print_only" = 1 ] || [ $# -gt 0 ] || { echo "emulate-board: no command after --" >&2; exit 2; }

cores="$(nproc)"
if [ -z "$host_ms" ]; then
    # The encoder bench against the whisper.cpp of the release build in use.
    tdir="${CARGO_TARGET_DIR:-$repo/target}"
    out="$(ls -td "$tdir"/release/build/whisper-rs-sys-*/out 2>/dev/null | head -n 1)"
    [ -n "$out" ] && [ -f "$out/lib/libwhisper.a" ] \
        || { echo "emulate-board: no whisper.cpp build under $tdir/release/build (cargo build --release first)" >&2; exit 2; }
    model="${XDG_CACHE_HOME:-$HOME/.cache}/sarcasmd/models/whisper/ggml-tiny.en.bin"
    [ -f "$model" ] || { echo "emulate-board: $model missing (bash scripts/setup.sh fetches it)" >&2; exit 2; }
    bench="$tdir/board-emulation/encode_bench"
    mkdir -p "$(dirname "$bench")"
    if [ ! -x "$bench" ] || [ "$repo/scripts/board-emulation/encode_bench.c" -nt "$bench" ] || [ "$out/lib/libwhisper.a" -nt "$bench" ]; then
        gcc -O2 "$repo/scripts/board-emulation/encode_bench.c" -I"$out/include" -I"$out/whisper.cpp/ggml/include" \
            -L"$out/lib" -lwhisper -lggml -lggml-cpu -lggml-base -lstdc++ -lm -lpthread -fopenmp -o "$bench"
    fi
    # The fastest of 5 passes, at a raised priority when allowed: this machine's capability,
    # not whatever else it happens to be running (a shared build box).
    prio=()
    [ "$(id -u)" = 0 ] && prio=(nice -n -10)
    host_ms="$("${prio[@]}" "$bench" "$model" "$cores" 5 | awk '{print $2}' | sort -n | head -n 1)"
fi
# Per-core: a board core's share of this machine, each of the board's cores a cgroup of
# its own, every thread of the command kept in one of them (scripts/board-emulation/cores.py).
read -r core_us core_cpus total_cpus factor < <(awk -v c="$cores" -v h="$host_ms" -v b="$board_ms" -v n="$board_cores" \
    'BEGIN { q = c * h / (b * n); printf "%d %.4f %.3f %.2f\n", q * 100000, q, q * n, b * n / (h * c) }')
echo "emulate-board: $board: whisper.cpp bench tiny.en ${board_ms} ms on the board's $board_cores cores, ${host_ms} ms here with $cores cores:" \
     "a board core = ${factor}x slower than a core here -> $board_cores cores of ${core_cpus} CPUs (${core_us} us per 100000 us each), ${total_cpus} CPUs in all" >&2
# A core at or above one CPU limits no thread (a board core faster than ours cannot be
# emulated), and cores adding up to this machine's CPUs or more cannot all be given
# their quota at once (seen: 3.3 CPUs asked of a 2-core host).
if awk -v q="$core_cpus" 'BEGIN { exit !(q >= 1) }'; then
    echo "emulate-board: REFUSED: a $board core needs ${core_cpus} CPUs, not below one CPU of this machine: its cores are" \
         "as slow as a $board's or slower (encoder bench ${host_ms} ms with $cores cores), so nothing would be slowed." \
         "Run on a faster host, or on the board itself (sarcasmd bench DIR --config PROFILE)." >&2
    exit 2
fi
if awk -v q="$total_cpus" -v c="$cores" 'BEGIN { exit !(q >= c) }'; then
    echo "emulate-board: REFUSED: $board needs $board_cores cores of ${core_cpus} CPUs = ${total_cpus} CPUs, not below this" \
         "machine's $cores CPUs: the board's cores could not all run at once (encoder bench ${host_ms} ms)." \
         "Run on a faster host, or on the board itself." >&2
    exit 2
fi
[ "$core_us" -ge 5000 ] || { echo "emulate-board: REFUSED: a $board core would get ${core_us} us per 100 ms period, below 5 ms (the scheduler hands out CPU time in 5 ms slices, so a smaller quota is not delivered as set)" >&2; exit 2; }
[ "$print_only" = 0 ] || exit 0

# cgroup v1 only: a thread can be written into a cgroup's `tasks` on its own. (v2 would need
# a threaded subtree, cgroup.type = threaded; not done.)
if ! { [ -d /sys/fs/cgroup/cpu ] && [ -w /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/tasks ]; }; then
    echo "emulate-board: no writable cgroup v1 cpu controller (/sys/fs/cgroup/cpu; run as root). Per-core emulation" \
         "places threads one by one, which cgroup v2 allows only in a threaded subtree: not implemented" >&2
    exit 2
fi
name="${name:-sarcasmd-emu-$board-$$}"
parent=/sys/fs/cgroup/cpu
cg="$parent/$name"
mkdir -p "$cg"
# Ahead of other work on a shared machine, so the per-core quotas are what limit it.
echo 8192 > "$cg/cpu.shares"
for ((i = 0; i < board_cores; i++)); do
    mkdir -p "$cg/core$i"
    echo 100000 > "$cg/core$i/cpu.cfs_period_us"
    echo "$core_us" > "$cg/core$i/cpu.cfs_quota_us"
done
meta="$(printf '{"board": "%s", "board_encode_ms": %s, "host_encode_ms": %s, "host_cpus": %s, "mode": "per-core", "board_cores": %s, "quota_cpus_per_core": %s, "quota_us_per_core": %s, "quota_cpus_total": %s, "period_us": 100000, "cgroup": "%s", "host_loadavg_at_start": "%s"}' \
    "$board" "$board_ms" "$host_ms" "$cores" "$board_cores" "$core_cpus" "$core_us" "$total_cpus" "$cg" "$(cut -d' ' -f1-3 /proc/loadavg)")"
cores_py=(python3 "$repo/scripts/board-emulation/cores.py")
state="${TMPDIR:-/tmp}/$name.cores-state.json"
watch=("${cores_py[@]}" watch --cg "$cg" --cores "$board_cores" --quota-us "$core_us" --pid $$ --state "$state" --meta "$meta")
prio=()
[ "$(id -u)" = 0 ] && prio=(nice -n -5)   # the placer on time; its own CPU is not the board's
if [ "$exec_" = 1 ]; then
    # The placer outlives this shell's exec (detached: not a child of COMMAND); it writes
    # --json when COMMAND has ended and leaves the cgroups to the caller.
    ( "${prio[@]}" "${watch[@]}" ${json:+--json "$json"} </dev/null >/dev/null 2>&1 & )
    echo $$ > "$cg/core0/cgroup.procs"
    exec "$@"
fi
"${prio[@]}" "${watch[@]}" </dev/null >/dev/null &
watcher=$!
cleanup() {
    kill "$watcher" 2>/dev/null || true
    echo $$ > "$parent/cgroup.procs" 2>/dev/null || true
    for ((i = 0; i < board_cores; i++)); do rmdir "$cg/core$i" 2>/dev/null || true; done
    rmdir "$cg" 2>/dev/null || true
    rm -f "$state"
}
trap cleanup EXIT
echo $$ > "$cg/core0/cgroup.procs"   # children and threads start in core0; the placer spreads them
status=0
"$@" || status=$?
echo $$ > "$parent/cgroup.procs"
kill -TERM "$watcher" 2>/dev/null || true
wait "$watcher" 2>/dev/null || true
valid=0
"${cores_py[@]}" report --cg "$cg" --cores "$board_cores" --state "$state" --meta "$meta" --exit "$status" \
    ${json:+--json "$json"} || valid=$?
[ "$status" != 0 ] || [ "$valid" = 0 ] || exit 3
exit $status
