#!/usr/bin/env python3
"""Sample where a process's resident memory is, every --every-s, as CSV (issue 49).

  memsample.py --pid PID | --match 'sarcasmd run --config /path/soak-faults.toml' --out mem.csv

Columns: t (s since the first sample), rss_kb (VmRSS), anon_kb / file_kb (RssAnon /
RssFile), then the anonymous resident memory split by mapping kind, from /proc/PID/smaps:
  heap_kb    [heap]: glibc's main arena (brk);
  arenas_kb  glibc's other arenas: anonymous mappings aligned to 64 MiB (HEAP_MAX_SIZE),
             with arenas_n the number of such mappings;
  stacks_kb  anonymous mappings right after a guard page (---p): thread stacks;
  mmap_kb    every other anonymous mapping: allocations glibc mmaps whole (above its
             mmap threshold) and what native libraries map themselves;
and threads. Waits for a --match process to appear; ends when it is gone."""
import argparse
import os
import subprocess
import sys
import time

ARENA_ALIGN = 64 << 20


def find(match):
    r = subprocess.run(["pgrep", "-f", "-x", match], capture_output=True, text=True)
    pids = [int(p) for p in r.stdout.split()]
    return pids[0] if pids else None


def sample(pid):
    with open(f"/proc/{pid}/status") as f:
        st = dict(l.split(":", 1) for l in f if ":" in l)
    kb = lambda k: int(st[k].split()[0]) if k in st else 0  # noqa: E731
    row = {"rss_kb": kb("VmRSS"), "anon_kb": kb("RssAnon"), "file_kb": kb("RssFile"),
           "heap_kb": 0, "arenas_kb": 0, "arenas_n": 0, "stacks_kb": 0, "mmap_kb": 0,
           "threads": int(st["Threads"])}
    prev = None  # (end, perms) of the previous mapping
    cur = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                path = head[5] if len(head) > 5 else ""
                kind = None
                if path == "[heap]":
                    kind = "heap_kb"
                elif path == "" and head[1].startswith("rw"):
                    if lo % ARENA_ALIGN == 0:
                        kind = "arenas_kb"
                        row["arenas_n"] += 1
                    elif prev and prev[0] == lo and prev[1].startswith("---"):
                        kind = "stacks_kb"
                    else:
                        kind = "mmap_kb"
                prev = (hi, head[1])
                cur = kind
            elif head[0] == "Rss:" and cur:
                row[cur] += int(head[1])
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--pid", type=int)
    g.add_argument("--match", help="pgrep -f -x pattern (the whole command line)")
    ap.add_argument("--every-s", type=float, default=5.0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    pid = a.pid
    while pid is None:
        pid = find(a.match)
        if pid is None:
            time.sleep(0.5)
    cols = ["t", "rss_kb", "anon_kb", "file_kb", "heap_kb", "arenas_kb", "arenas_n", "stacks_kb",
            "mmap_kb", "threads"]
    t0 = time.monotonic()
    with open(a.out, "w") as out:
        out.write(",".join(cols) + "\n")
        while True:
            try:
                row = sample(pid)
            except (FileNotFoundError, ProcessLookupError, KeyError):
                break
            row["t"] = round(time.monotonic() - t0, 1)
            out.write(",".join(str(row[c]) for c in cols) + "\n")
            out.flush()
            time.sleep(a.every_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
