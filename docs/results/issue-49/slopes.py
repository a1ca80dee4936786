#!/usr/bin/env python3
"""Slopes (MB per wall hour, least squares) and start/end medians of memsample.py CSVs
after a warm-up (issue 49).

  slopes.py --warmup-s 300 mem.csv [more.csv ...]   # one JSON line per file"""
import argparse
import csv
import json
import statistics
import sys

COLS = ("rss_kb", "anon_kb", "file_kb", "heap_kb", "arenas_kb", "stacks_kb", "mmap_kb")


def lsq(xs, ys):
    n = len(xs)
    if n < 3:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else None


def summarise(path, warmup_s, window_s):
    with open(path) as f:
        rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    warm = [r for r in rows if r["t"] >= warmup_s]
    if len(warm) < 3:
        return {"csv": path, "error": "too few samples after warm-up"}
    t0, t1 = warm[0]["t"], warm[-1]["t"]
    out = {"csv": path, "samples": len(warm), "from_s": t0, "to_s": t1}
    for c in COLS:
        if c not in warm[0]:
            continue
        s = lsq([r["t"] / 3600 for r in warm], [r[c] / 1024 for r in warm])
        first = statistics.median(r[c] for r in warm if r["t"] <= t0 + window_s) / 1024
        last = statistics.median(r[c] for r in warm if r["t"] >= t1 - window_s) / 1024
        out[c.replace("_kb", "")] = {"slope_mb_per_h": round(s, 2) if s is not None else None,
                                     "first_mb": round(first, 1), "last_mb": round(last, 1)}
    if "arenas_n" in warm[0]:
        out["arenas_n_max"] = int(max(r["arenas_n"] for r in rows))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warmup-s", type=float, default=300.0)
    ap.add_argument("--window-s", type=float, default=120.0, help="the start/end median windows")
    ap.add_argument("csv", nargs="+")
    a = ap.parse_args()
    for p in a.csv:
        print(json.dumps(summarise(p, a.warmup_s, a.window_s)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
