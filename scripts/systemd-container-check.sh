#!/usr/bin/env bash
# Start systemd/sarcasmd.service under a real systemd (PID 1 of a systemd-nspawn
# container) and check what scripts/check-systemd.sh cannot: readiness, reload, restart
# after the capture dies, the watchdog, and a clean stop. Needs root, debootstrap and
# systemd-container (apt-get install debootstrap systemd-container), the Debian mirror
# (for the container's root, built once and cached), the models (scripts/setup.sh) and a
# release build. No sound card is needed: the capture device is ALSA's `null`.
#
# Usage: sudo scripts/systemd-container-check.sh [--skip-watchdog]
# Exit 0 when every check passes, 1 when one fails, 2 on setup errors.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"

skip_watchdog=0
[ "${1:-}" = "--skip-watchdog" ] && skip_watchdog=1
[ "$(id -u)" = 0 ] || { echo "needs root (debootstrap, systemd-nspawn)" >&2; exit 2; }
for t in debootstrap systemd-nspawn nsenter; do
    command -v "$t" >/dev/null || { echo "$t missing: apt-get install debootstrap systemd-container" >&2; exit 2; }
done
bin="$repo/target/release/sarcasmd"
[ -x "$bin" ] || { echo "no $bin: cargo build --release first" >&2; exit 2; }
models="$("$bin" models dir 2>/dev/null || true)"
[ -d "$models" ] || { echo "no model cache ($models): run scripts/setup.sh" >&2; exit 2; }

cache="${XDG_CACHE_HOME:-$HOME/.cache}/sarcasmd"
base="$cache/nspawn-bookworm"
if [ ! -x "$base/usr/lib/systemd/systemd" ]; then
    echo "== building the container's root (once): debootstrap bookworm" >&2
    rm -rf "$base.tmp"
    debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,libasound2,alsa-utils,procps \
        bookworm "$base.tmp" http://deb.debian.org/debian >&2
    mv "$base.tmp" "$base"
fi

# A fresh copy per run, so no state (DynamicUser directories, journal) carries over.
root="$(mktemp -d /var/tmp/sarcasmd-nspawn.XXXXXX)"
leader=""
nspawn_pid=""
cleanup() {
    # SIGTERM to systemd-nspawn powers the container off (SIGRTMIN+3 to its init).
    if [ -n "$nspawn_pid" ]; then
        kill "$nspawn_pid" 2>/dev/null || true
        for _ in $(seq 1 40); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.25; done
        kill -9 "$nspawn_pid" 2>/dev/null || true
    fi
    rm -rf "$root" "$root.nspawn.log"
}
trap cleanup EXIT
cp -a "$base/." "$root/"
install -m 0755 "$bin" "$root/usr/bin/sarcasmd"
mkdir -p "$root/var/cache/sarcasmd" "$root/usr/share/sarcasmd" "$root/etc/sarcasmd"
cp -a "$models" "$root/var/cache/sarcasmd/models"
cp -a models/heads "$root/usr/share/sarcasmd/heads"
install -m 0644 firmware-config/x86-dev.toml "$root/etc/sarcasmd/sarcasmd.toml"
install -D -m 0644 systemd/sarcasmd.service "$root/etc/systemd/system/sarcasmd.service"
mkdir -p "$root/etc/systemd/system/sarcasmd.service.d"
printf '[Service]\nEnvironment=SARCASMD_CAPTURE_DEVICE=null\nEnvironment=SARCASMD_HEADS_DIR=/usr/share/sarcasmd/heads\n' \
    >"$root/etc/systemd/system/sarcasmd.service.d/10-check.conf"
echo sarcasmd-check >"$root/etc/hostname"

log="$root.nspawn.log"
systemd-nspawn -D "$root" -b --register=no --keep-unit --private-network --console=passive >"$log" 2>&1 &
nspawn_pid=$!
for _ in $(seq 1 60); do
    leader="$(pgrep -P "$nspawn_pid" | head -n 1 || true)"
    [ -n "$leader" ] && break
    sleep 0.5
done
[ -n "$leader" ] || { cat "$log" >&2; echo "container did not boot" >&2; exit 2; }
ctr() { nsenter -t "$leader" -a "$@"; }
for _ in $(seq 1 60); do
    state="$(ctr systemctl is-system-running 2>/dev/null || true)"
    case "$state" in running|degraded) break ;; esac
    sleep 1
done
prop() { ctr systemctl show sarcasmd -p "$1" --value; }
wait_for() { # wait_for SECONDS PROPERTY VALUE
    for _ in $(seq 1 $(($1 * 4))); do [ "$(prop "$2")" = "$3" ] && return 0; sleep 0.25; done
    return 1
}
fails=0
check() { # check NAME COMMAND...
    if "${@:2}"; then echo "ok    $1"; else echo "FAIL  $1"; fails=$((fails + 1)); fi
}

ctr systemctl start sarcasmd || true
check "start: active (running) after READY=1" wait_for 120 SubState running
check "status text from the daemon" bash -c "[[ \"\$(nsenter -t $leader -a systemctl show sarcasmd -p StatusText --value)\" == running:* ]]"
check "main process is sarcasmd" bash -c "[ \"\$(nsenter -t $leader -a ps -o comm= -p \$(nsenter -t $leader -a systemctl show sarcasmd -p MainPID --value))\" = sarcasmd ]"
check "runs as a dynamic user" bash -c "[ \"\$(nsenter -t $leader -a ps -o uid= -p \$(nsenter -t $leader -a systemctl show sarcasmd -p MainPID --value) | tr -d ' ')\" -ge 61184 ]"
check "metrics on loopback" bash -c "nsenter -t $leader -n curl -sf http://127.0.0.1:8790/metrics | grep -q sarcasmd_build_info"

ctr systemctl reload sarcasmd
check "reload re-validates and restarts the stream" bash -c "sleep 3; nsenter -t $leader -a journalctl -u sarcasmd --no-pager | grep -q 'reload: .* is valid'"

restarts="$(prop NRestarts)"
ctr pkill -x arecord || true
check "capture lost: exit 1 and a restart" wait_for 30 NRestarts $((restarts + 1))
check "running again after the restart" wait_for 120 SubState running

if [ "$skip_watchdog" = 0 ]; then
    restarts="$(prop NRestarts)"
    ctr kill -STOP "$(prop MainPID)"
    check "watchdog: a stopped process is killed and restarted" wait_for 60 NRestarts $((restarts + 1))
    check "running again after the watchdog" wait_for 120 SubState running
fi

t0=$(date +%s%N)
ctr systemctl stop sarcasmd
stop_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
check "stop within 2 s (${stop_ms} ms)" test "$stop_ms" -lt 2000
check "stop: exit status 0" test "$(prop ExecMainStatus)" = 0

echo "== journal (sarcasmd, systemd lines)"
ctr journalctl -u sarcasmd --no-pager -o short-monotonic | grep -v 'sarcasmd::pipeline' | tail -n 30
[ "$fails" = 0 ] && { echo "systemd container check: all passed"; exit 0; }
echo "systemd container check: $fails failed"
exit 1
