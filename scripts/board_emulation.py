#!/usr/bin/env python3
"""Each board profile on its emulated board (scripts/emulate-board.sh: this CPU cut, core by
core, to the board's published whisper.cpp speed: 4 cgroups of one board core's quota each,
every thread of the daemon placed in one of them), in real time:

  1. `sarcasmd bench` (streaming, live form, one run) over a short espeak-ng meeting with
     the profile's settings: end-of-speech -> flag latency per stage;
  2. a long espeak-ng meeting fed through `sarcasmd replay - --live --config PROFILE` at
     1x real time by the soak (scripts/soak/run): keeps up or not (drain time after the input ends,
     dropped audio), latency, shedding steps taken, peak RSS, CPU per audio second.

Boards run side by side when their cores add up to less than this machine's CPUs, one
after the other otherwise (a Pi 5's 4 cores and a Pi 4's do not fit on 2 host CPUs).
Writes DIR/board-emulation.json and DIR/board-emulation.md (the tables for
docs/boards.md), and per board DIR/BOARD/events-slim.jsonl (each live event's id, times,
latency and transcript: small enough to commit beside the tables). Needs root (cgroups),
espeak-ng, a release build and the models.

A board that cannot be emulated here is refused before anything runs (emulate-board.sh
exits 2: a per-core quota of one CPU or more, cores adding up to this machine's CPUs or
more, or a per-core quota below 5 ms per period). A run in which no core cgroup was ever
throttled (nr_throttled summed over NAME/core*/cpu.stat = 0) ran at this machine's speed:
it is marked INVALID in the table and the JSON ("valid": false), and the script exits 3.
The JSON keeps, per run, the per-core quota and each core's nr_periods / nr_throttled.

  python3 scripts/board_emulation.py --out /tmp/boards                     # 30 min each
  python3 scripts/board_emulation.py --out /tmp/boards --minutes 3 --bench-minutes 1   # smoke
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import tomllib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The audio ring's drop in a run summary: `dropped_samples` since the drop registry
# (src/common/drops.rs), `ring_samples` in summaries recorded before it.
RING_DROP_KEYS = ("dropped_samples", "ring_samples")
# The boards that can be emulated: those with a whisper.cpp figure in the board table
# (firmware-config/boards/boards.toml, which emulate-board.sh and the daemon read too).
with open(os.path.join(REPO, "firmware-config", "boards", "boards.toml"), "rb") as _f:
    BOARDS = [b["name"] for b in tomllib.load(_f)["board"] if "whisper_bench_encode_ms" in b]
HTTP_PORT = {b: i for i, b in enumerate(BOARDS)}  # + --port-base: the profiles' overlay/metrics, one port each


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def meeting(out, minutes, seed):
    if not os.path.isdir(out) or not any(f.endswith(".wav") for f in os.listdir(out)):
        subprocess.run([sys.executable, os.path.join(REPO, "scripts", "espeak_meeting.py"), "--out", out,
                        "--minutes", str(minutes), "--seed", str(seed)], check=True)
    return out


def profile(a, board, work):
    """The board's profile (as shipped, or from --profiles), with its HTTP port moved so
    boards can run side by side (and never on a port a developer's daemon uses)."""
    src = open(os.path.join(a.profiles, f"{board}.toml")).read()
    text, n = re.subn(r'bind = "127\.0\.0\.1:\d+"', f'bind = "127.0.0.1:{a.port_base + HTTP_PORT[board]}"', src)
    path = os.path.join(work, f"{board}.toml")
    with open(path, "w") as f:
        f.write(text)
    return path, n


def emulate(board, host_ms, *extra):
    return [os.path.join(REPO, "scripts", "emulate-board.sh"), board, "--host-encode-ms", str(host_ms), *extra, "--"]


def cpu_stat(name):
    """The board's cgroup: cpu.stat of each core (NAME/coreN, emulate-board.sh's per-core
    layout), and their sums; with the group's path, for removal."""
    cg = os.path.join("/sys/fs/cgroup/cpu", name)
    if not os.path.isdir(cg):
        return {}, None
    cores = []
    for d in sorted((d for d in os.listdir(cg) if re.fullmatch(r"core\d+", d)), key=lambda d: int(d[4:])):
        st = dict((k, int(v)) for k, v in (l.split() for l in open(os.path.join(cg, d, "cpu.stat")) if l.strip()))
        cores.append({"core": int(d[4:]), "nr_periods": st.get("nr_periods"), "nr_throttled": st.get("nr_throttled"),
                      "throttled_us": st.get("throttled_time", 0) // 1000})
    tot = {k: sum(c[k] or 0 for c in cores) for k in ("nr_periods", "nr_throttled", "throttled_us")}
    return dict(tot, cores=cores), cg


def remove_cgroup(cg):
    for d in os.listdir(cg):
        if re.fullmatch(r"core\d+", d):
            try:
                os.rmdir(os.path.join(cg, d))
            except OSError:
                pass
    try:
        os.rmdir(cg)
    except OSError:
        pass


def pctl(v, q):
    v = sorted(v)
    if not v:
        return None
    return v[min(len(v) - 1, int(round(q / 100 * (len(v) - 1))))]


def run_board(a, board, host_ms, bench_dir, meet_dir, res):
    w = os.path.join(a.out, board)
    os.makedirs(w, exist_ok=True)
    cfg, _ = profile(a, board, w)
    r = res[board] = {"profile": os.path.relpath(os.path.join(a.profiles, f"{board}.toml"), REPO), "http_port": a.port_base + HTTP_PORT[board]}
    # 1. bench
    bj = os.path.join(w, "bench.json")
    qj = os.path.join(w, "bench-quota.json")
    cmd = emulate(board, host_ms, "--json", qj) + [a.bin, "bench", bench_dir, "--config", cfg, "--runs", "1", "--no-baseline", "--json", bj]
    log(board, "bench:", " ".join(cmd))
    with open(os.path.join(w, "bench.log"), "w") as lf:
        p = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT)
    r["bench_exit"] = p.returncode
    if os.path.exists(bj):
        r["bench"] = json.load(open(bj))
    if os.path.exists(qj):
        r["bench_quota"] = json.load(open(qj))
    # 2. the long meeting, live, through the soak with the daemon inside the board's cgroup
    name = f"sarcasmd-emu-{board}-{os.getpid()}"  # one group per run: parallel runs must not share a quota
    wrapper = os.path.join(w, "sarcasmd-on-" + board)
    lq = os.path.join(w, "live-quota.json")  # written by the thread placer when the daemon has ended
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec " + " ".join(emulate(board, host_ms, "--name", name, "--exec", "--json", lq)) + f" {a.bin} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    sw = os.path.join(w, "soak")
    shutil.rmtree(sw, ignore_errors=True)
    cmd = [os.path.join(REPO, "scripts", "soak", "run"), "--duration-s", str(a.minutes * 60), "--speed", "1",
           "--clips", meet_dir, "--config", cfg, "--bin", wrapper, "--work", sw, "--warmup-s", str(min(300, a.minutes * 60 // 4)),
           "--interval-s", "10"]
    log(board, "live meeting:", " ".join(cmd))
    with open(os.path.join(w, "soak.log"), "w") as lf:
        p = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT)
    r["soak_exit"] = p.returncode
    if p.returncode != 0:
        log(board, f"live meeting failed (exit {p.returncode}):", open(os.path.join(w, "soak.log")).read()[-400:])
    for _ in range(50):  # the placer notices the daemon's end within 50 ms
        if os.path.exists(lq):
            break
        time.sleep(0.1)
    time.sleep(0.2)
    st, cg = cpu_stat(name)
    r["cpu_stat"] = st  # summed over the cores, and per core
    if os.path.exists(lq):
        try:
            r["live_quota"] = json.load(open(lq))  # the per-core quota and the threads' placement
        except ValueError:
            pass
    # No core ever throttled: the daemon ran at this machine's speed, not the board's.
    r["valid"] = st.get("nr_throttled", 0) > 0 and (r.get("bench_quota") or {}).get("valid", False)
    if cg:
        remove_cgroup(cg)
    try:  # the placer's own record (emulate-board.sh --exec leaves it; it is in live-quota.json)
        os.remove(os.path.join(os.environ.get("TMPDIR", "/tmp"), name + ".cores-state.json"))
    except OSError:
        pass
    for f in ("summary.json", "stats.json"):
        path = os.path.join(sw, f)
        if os.path.exists(path):
            r[f.split(".")[0]] = json.load(open(path))
    ev = os.path.join(sw, "events.jsonl")
    if os.path.exists(ev):
        evs = [json.loads(l) for l in open(ev) if l.strip()]
        evs = [e for e in evs if e.get("type") == "utterance"]
        tot = [e["latency_ms"]["total"] for e in evs]
        with open(os.path.join(w, "events-slim.jsonl"), "w") as f:
            for e in evs:
                f.write(json.dumps({k: e.get(k) for k in ("id", "start_s", "end_s", "latency_ms", "early_end", "revises",
                                                         "text_shed", "transcript")}) + "\n")
        r["events"] = {"n": len(evs), "latency_total_ms": {"p50": pctl(tot, 50), "p95": pctl(tot, 95), "max": max(tot) if tot else None},
                       "text_shed": sum(1 for e in evs if e.get("text_shed")),
                       "asr_models": sorted({e["models"].get("asr", "") for e in evs}),
                       "over_budget": None}
    log(board, "done")


def shed_taken(shed):
    """Ladder steps taken (the ladder is the profile's `shed.steps`; level 0 = none taken)."""
    if not shed:
        return "-"
    taken = [f"{k[:-6]} x{v}" for k, v in sorted(shed.items()) if k.endswith("_taken") and v]
    return ", ".join(taken) if taken else f"none of [{', '.join(shed.get('steps', []))}]"


def table(res, host_ms, a):
    L = [f"Host: whisper.cpp encoder bench (tiny.en f16, 30 s window) {host_ms} ms with {os.cpu_count()} cores; "
         f"espeak-ng meetings: bench {a.bench_minutes} min, live {a.minutes} min; {time.strftime('%Y-%m-%d')}.", "",
         "| board (profile) | per-core quota x cores | bench p50 / p95 end of speech -> flag (ms) | live: events | live p50 / p95 / max (ms) | "
         "budget (ms) | over budget | audio drops | other drops | shedding steps taken | text shed | drain after input (s) | "
         "CPU s per audio s | peak RSS (MB) | throttled periods per core (live; bench) | soak verdict | emulation |", "|" + "---|" * 17]
    for b, r in res.items():
        q = subprocess.run(emulate(b, host_ms, "--print")[:-1], capture_output=True, text=True).stderr.strip()
        quota = re.search(r"(\d+) cores of ([0-9.]+) CPUs", q)
        summ = (r.get("bench") or {}).get("summary") or []
        bp = f"{summ[0]['latency_p50_ms']:.0f} / {summ[0]['latency_p95_ms']:.0f} (WER {100 * (summ[0]['wer'] or 0):.1f} %)" if summ else "-"
        st = r.get("stats", {})
        sm = r.get("summary", {})
        ev = r.get("events", {})
        lat = ev.get("latency_total_ms", {})
        drops = st.get("dropped", {})
        shed = st.get("shed", {})
        cs = r.get("cpu_stat", {})
        bq = r.get("bench_quota") or {}
        verdict = "PASS" if sm.get("pass") else "FAIL: " + ", ".join(k for k, ok in (sm.get("verdicts") or {}).items() if not ok)
        fmt = lambda x: "-" if x is None else f"{x:.0f}"  # noqa: E731
        per_core = lambda s: " ".join(f"{c['nr_throttled']}/{c['nr_periods']}" for c in (s or {}).get("cores", [])) or "-"  # noqa: E731
        L.append(f"| {b} ({r['profile']}) | {quota.group(2) + ' CPUs x ' + quota.group(1) if quota else '?'} | {bp} | {ev.get('n', '-')} | "
                 f"{fmt(lat.get('p50'))} / {fmt(lat.get('p95'))} / {fmt(lat.get('max'))} | {r.get('budget_ms', '-')} | "
                 f"{st.get('budget_violations', '-')} | {drops.get('dropped_samples', drops.get('ring_samples', '-'))} | "
                 f"{sum(v for k, v in drops.items() if k not in RING_DROP_KEYS) if drops else '-'} | "
                 f"{shed_taken(shed)}; streaming steps shed {(st.get('streaming') or {}).get('steps_shed', '-')}, skipped busy {(st.get('streaming') or {}).get('steps_skipped_busy', '-')} | {ev.get('text_shed', '-')} | "
                 f"{sm.get('timing', {}).get('drain_after_eof_s', '-')} | {sm.get('timing', {}).get('cpu_s_per_audio_s', '-')} | "
                 f"{st.get('peak_rss_mb', 0):.0f} | {cs.get('nr_throttled', '-')} of {cs.get('nr_periods', '-')} "
                 f"({per_core(cs)}); {bq.get('nr_throttled', '-')} of {bq.get('nr_periods_sum', '-')} ({per_core(bq)}) | {verdict} | "
                 f"{'valid' if r.get('valid') else '**INVALID: no core ever throttled, ran at host speed**'} |")
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--boards", default=",".join(BOARDS))
    ap.add_argument("--minutes", type=int, default=30, help="live meeting length (default 30)")
    ap.add_argument("--bench-minutes", type=int, default=3)
    ap.add_argument("--profiles", default=os.path.join(REPO, "firmware-config"), help="dir with BOARD.toml (default firmware-config)")
    ap.add_argument("--port-base", type=int, default=18790, help="HTTP ports used: this and the next (default 18790)")
    ap.add_argument("--host-encode-ms", type=float, help="this machine's encoder bench (default: measured once)")
    ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "sarcasmd"))
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("board_emulation: needs root (cgroup CPU quotas)")
    missing = [t for t in ("espeak-ng", "ffmpeg", "sox") if shutil.which(t) is None]
    if missing:  # found out only after a 3-minute bench otherwise (the soak needs ffmpeg)
        sys.exit(f"board_emulation: {', '.join(missing)} not found: sudo bash scripts/install-system-deps.sh")
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"board_emulation: {a.bin} is not an executable (cargo build --release, or --bin)")
    # The soak's venv now, not after a 3-minute bench (and once, not by both boards at once).
    p = subprocess.run(["bash", os.path.join(REPO, "scripts", "soak", "setup.sh")])
    if p.returncode != 0:
        sys.exit("board_emulation: the soak's venv could not be set up (scripts/soak/setup.sh)")
    os.makedirs(a.out, exist_ok=True)
    boards = a.boards.split(",")
    host_ms = a.host_encode_ms
    if host_ms is None:
        p = subprocess.run([os.path.join(REPO, "scripts", "emulate-board.sh"), boards[0], "--print"], capture_output=True, text=True)
        m = re.search(r"([0-9.]+) ms here", p.stderr)
        if not m:
            sys.exit(f"board_emulation: host bench failed: {p.stderr}")
        host_ms = float(m.group(1))
    total = 0.0
    for b in boards:  # refused before anything runs: a quota this host cannot enforce
        p = subprocess.run(emulate(b, host_ms, "--print")[:-1], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"board_emulation: {p.stderr.strip()}")
        m = re.search(r"([0-9.]+) CPUs in all", p.stderr)
        total += float(m.group(1)) if m else float("inf")
    # Side by side only when all the boards' cores fit on this machine at once.
    side_by_side = total < (os.cpu_count() or 1)
    if len(boards) > 1 and not side_by_side:
        log(f"the boards' cores add up to {total:.3f} CPUs, not below this machine's {os.cpu_count()}: one board after the other")
    log(f"host encoder bench: {host_ms} ms")
    bench_dir = meeting(os.path.join(a.out, f"meeting-{a.bench_minutes}min"), a.bench_minutes, 2)
    meet_dir = meeting(os.path.join(a.out, f"meeting-{a.minutes}min"), a.minutes, 1)
    res = {}
    host_load = {"loadavg": open("/proc/loadavg").read().split()[:3],
                 "busiest": subprocess.run(["ps", "-eo", "pid,ni,pcpu,comm", "--sort=-pcpu"], capture_output=True,
                                           text=True).stdout.splitlines()[:6]}
    threads = [threading.Thread(target=run_board, args=(a, b, host_ms, bench_dir, meet_dir, res)) for b in boards]
    for i, t in enumerate(threads):
        t.start()
        if not side_by_side:
            t.join()
        time.sleep(20 if i < len(threads) - 1 else 0)  # the first soak builds the shared input cache
    for t in threads:
        t.join()
    for b in boards:
        txt = open(os.path.join(a.profiles, f"{b}.toml")).read()
        m = re.search(r"event_latency_ms\s*=\s*(\d+)", txt)
        res[b]["budget_ms"] = int(m.group(1)) if m else None
    out = {"host_encode_ms": host_ms, "host_cpus": os.cpu_count(), "host_load_at_start": host_load,
           "emulation": "per-core (emulate-board.sh: one cgroup per board core)", "boards_side_by_side": side_by_side,
           "minutes": a.minutes, "bench_minutes": a.bench_minutes,
           "date": time.strftime("%Y-%m-%d"), "commit": subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                                                                      capture_output=True, text=True).stdout.strip(),
           "boards": res}
    with open(os.path.join(a.out, "board-emulation.json"), "w") as f:
        json.dump(out, f, indent=1)
    md = table(res, host_ms, a)
    with open(os.path.join(a.out, "board-emulation.md"), "w") as f:
        f.write(md)
    print(md)
    invalid = [b for b in boards if not res[b].get("valid")]
    if invalid:
        log(f"INVALID emulation for {', '.join(invalid)}: no core cgroup was ever throttled, so it ran at this "
            "machine's speed; its figures say nothing about the board")
        sys.exit(3)


if __name__ == "__main__":
    main()
