#!/usr/bin/env python3
"""The board's cores for scripts/emulate-board.sh (cgroup v1): every thread of the
emulated command is kept in one of the core cgroups CG/core0..coreN-1, each with the
CPU quota of one board core.

  cores.py watch  --cg CG --cores N --quota-us Q --pid PID --state FILE [--json FILE --meta JSON]
  cores.py report --cg CG --cores N --state FILE --meta JSON --json FILE [--exit STATUS]

watch: polls the core cgroups' `tasks` files every 50 ms. A new thread starts in the
cgroup of the thread that created it (so it is throttled from its first instruction);
the first time it is seen it is moved to the core with the fewest threads (ties: the
lowest core). Placement by thread count alone would leave two busy threads sharing a
core while another board core idles, which a board's scheduler does not do (a waking
thread goes to an idle core), so once a second it rebalances like the kernel's load
balancer: when the busiest core used >= 80 % of its quota in the last second with two or
more threads running, the thread whose move evens out the busiest and the idlest core
best goes to the idlest core (at most one move a second, a moved thread stays >= 2 s). A
single busy thread is never moved: its speed is one board core's, which is the point.
Ends when PID and every thread in the cores are gone (or on SIGTERM); writes the
placement record to --state, and with --json the report below (exit status null).

report: reads each core's cpu.stat (nr_periods, nr_throttled, throttled_time) and the
placement record, writes --json, prints a summary to stderr; exits 0 when at least one
core was throttled (the run was slowed to the board), 3 when none was (it ran at this
machine's speed: INVALID).
"""
import argparse
import json
import os
import signal
import sys
import time


def read_tids(path):
    try:
        with open(path) as f:
            return [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return []


def cpu_ns(tid):
    """CPU time of a thread in ns (schedstat: time on CPU), None once it has gone."""
    try:
        with open(f"/proc/{tid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        try:
            with open(f"/proc/{tid}/stat") as f:
                s = f.read()
            rest = s[s.rindex(")") + 2:].split()
            return (int(rest[11]) + int(rest[12])) * (10 ** 9 // os.sysconf("SC_CLK_TCK"))
        except (OSError, ValueError, IndexError):
            return None


def comm(tid):
    try:
        with open(f"/proc/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def move(cg, core, tid):
    try:
        with open(os.path.join(cg, f"core{core}", "tasks"), "w") as f:
            f.write(str(tid))
        return True
    except OSError:  # ESRCH: the thread ended meanwhile
        return False


def watch(a):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a ^C reaches the command; we end after it
    n, cg = a.cores, a.cg
    quota_s = a.quota_us / 1e6 / (a.period_us / 1e6)  # CPU-s per s of one core
    core_of = {}      # tid -> core
    th = {}           # tid -> record
    last_cpu = {}     # tid -> ns at the last balance
    moved_at = {}     # tid -> time of its last balancing move
    core_cpu = [0.0] * n  # CPU-s per core (threads' time while placed there, per second)
    placements = moves = 0
    t_bal = time.monotonic()
    seen_any = False
    while True:
        present = [set(read_tids(os.path.join(cg, f"core{i}", "tasks"))) for i in range(n)]
        loose = read_tids(os.path.join(cg, "tasks"))  # in the parent: none expected
        for i in range(n):
            for tid in list(present[i]):
                if tid in core_of:
                    core_of[tid] = i  # (moved by someone else: follow it)
                    continue
                target = min(range(n), key=lambda j: (len(present[j]), j))
                if target != i and move(cg, target, tid):
                    present[i].discard(tid)
                    present[target].add(tid)
                else:
                    target = i
                core_of[tid] = target
                th[tid] = {"comm": comm(tid), "core_first": target, "cpu_s": 0.0}
                last_cpu[tid] = cpu_ns(tid) or 0
                placements += 1
        for tid in loose:
            target = min(range(n), key=lambda j: (len(present[j]), j))
            if move(cg, target, tid):
                present[target].add(tid)
                core_of[tid] = target
                th.setdefault(tid, {"comm": comm(tid), "core_first": target, "cpu_s": 0.0})
                last_cpu.setdefault(tid, cpu_ns(tid) or 0)
                placements += 1
        alive = set().union(*present)
        seen_any = seen_any or bool(alive)
        for tid in [t for t in core_of if t not in alive]:
            del core_of[tid]
            last_cpu.pop(tid, None)
        now = time.monotonic()
        if now - t_bal >= a.balance_s:
            win = now - t_bal
            t_bal = now
            d = {}
            for tid, c in core_of.items():
                ns = cpu_ns(tid)
                if ns is None:
                    continue
                d[tid] = max(0, ns - last_cpu.get(tid, ns)) / 1e9
                if d[tid]:
                    th[tid]["comm"] = comm(tid)  # threads name themselves after they start
                last_cpu[tid] = ns
                th[tid]["cpu_s"] += d[tid]
                core_cpu[c] += d[tid]
            load = [sum(d.get(t, 0) for t in present[i]) / win for i in range(n)]
            b = max(range(n), key=lambda j: load[j])
            i = min(range(n), key=lambda j: load[j])
            busy = [t for t in present[b] if d.get(t, 0) / win >= 0.02]
            if b != i and load[b] >= 0.8 * quota_s and len(busy) >= 2:
                cands = [t for t in busy if now - moved_at.get(t, -1e9) >= 2.0]
                if cands:
                    best = min(cands, key=lambda t: max(load[b] - d[t] / win, load[i] + d[t] / win))
                    after = max(load[b] - d[best] / win, load[i] + d[best] / win)
                    if after < load[b] - 0.02 and move(cg, i, best):
                        core_of[best] = i
                        moved_at[best] = now
                        moves += 1
                        th[best]["moves"] = th[best].get("moves", 0) + 1
        if stop or (seen_any and not alive and not os.path.exists(f"/proc/{a.pid}")):
            break
        if not seen_any and not os.path.exists(f"/proc/{a.pid}"):
            break
        time.sleep(a.interval_s)
    busy_threads = sorted(({"tid": t, **r, "cpu_s": round(r["cpu_s"], 3)} for t, r in th.items() if r["cpu_s"] >= 0.5),
                          key=lambda r: -r["cpu_s"])
    state = {"placement": "new thread -> core with the fewest threads; rebalanced once a second (see cores.py)",
             "threads_placed": placements, "balancing_moves": moves,
             "core_cpu_s": [round(x, 3) for x in core_cpu], "threads_over_0.5_cpu_s": busy_threads}
    with open(a.state, "w") as f:
        json.dump(state, f)
    if a.json:
        report(a)


def cpu_stat(path):
    try:
        with open(os.path.join(path, "cpu.stat")) as f:
            return {k: int(v) for k, v in (ln.split() for ln in f if ln.strip())}
    except (OSError, ValueError):
        return {}


def report(a):
    meta = json.loads(a.meta)
    try:
        with open(a.state) as f:
            state = json.load(f)
    except (OSError, ValueError):
        state = {}
    cores = []
    for i in range(a.cores):
        st = cpu_stat(os.path.join(a.cg, f"core{i}"))
        cores.append({"core": i, "quota_us": meta.get("quota_us_per_core"), "nr_periods": st.get("nr_periods"),
                      "nr_throttled": st.get("nr_throttled"),
                      "throttled_us": st["throttled_time"] // 1000 if "throttled_time" in st else st.get("throttled_usec"),
                      "cpu_s": (state.get("core_cpu_s") or [None] * a.cores)[i]})
    tot = lambda k: sum(c[k] or 0 for c in cores)  # noqa: E731
    valid = tot("nr_throttled") > 0
    out = dict(meta, cores=cores, nr_periods_sum=tot("nr_periods"), nr_throttled=tot("nr_throttled"),
               throttled_us=tot("throttled_us"), threads=state, valid=valid,
               exit=None if a.exit is None else int(a.exit))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    per = ", ".join(f"core{c['core']} {c['nr_throttled']}/{c['nr_periods']}" for c in cores)
    print(f"emulate-board: throttled periods per core (throttled/periods): {per}; "
          f"{state.get('threads_placed', '?')} threads placed, {state.get('balancing_moves', '?')} balancing moves", file=sys.stderr)
    if not valid:
        print(f"emulate-board: INVALID: no core of the {meta.get('board')} ({meta.get('quota_cpus_per_core')} CPUs each) was ever "
              "throttled: the command ran at this machine's speed, not the board's. Its figures say nothing about the board.",
              file=sys.stderr)
    return 0 if valid else 3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["watch", "report"])
    ap.add_argument("--cg", required=True)
    ap.add_argument("--cores", type=int, required=True)
    ap.add_argument("--quota-us", type=int, default=0)
    ap.add_argument("--period-us", type=int, default=100000)
    ap.add_argument("--pid", type=int, default=0)
    ap.add_argument("--state", required=True)
    ap.add_argument("--json")
    ap.add_argument("--meta", default="{}")
    ap.add_argument("--exit")
    ap.add_argument("--interval-s", type=float, default=0.05)
    ap.add_argument("--balance-s", type=float, default=1.0)
    a = ap.parse_args()
    if a.mode == "watch":
        watch(a)
        return 0
    return report(a)


if __name__ == "__main__":
    sys.exit(main())
