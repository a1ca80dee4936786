#!/usr/bin/env python3
"""Soak test: replay a long stretch of speech through the full `sarcasmd` pipeline,
faster than real time, and watch the process for leaks and drops.

What it measures
  * resident memory (VmRSS, VmHWM), open file descriptors, threads and CPU seconds of the
    daemon, sampled from /proc/PID every --interval-s seconds against the audio fed so far
    (CSV: samples.csv in the work directory);
  * RSS growth after warm-up (the first --warmup-s seconds of audio): max and end vs the
    value at warm-up, and a least-squares slope in MB per audio hour; the RSS curve at
    every 5 minutes of audio;
  * fd and thread counts; events written; every drop / budget-violation counter of the
    daemon's --stats JSON; WARN/ERROR lines in its log.

Verdicts (exit 0 only if all pass, 1 otherwise, 2 on usage errors):
  RSS grows < 5 % after warm-up; no fd growth after warm-up; no drops (ring samples,
  utterances, events-file lines; best-effort interim `partials_*` skips are reported but
  not judged). "No drops" only means something when the machine keeps up with --speed:
  the achieved speed, the drain time after end of input and the load average are printed.

How it works
  The input is built from all *.wav under --clips (default ../shared/data/speech from the
  repo root; falls back to samples/meeting.wav), converted once to 16 kHz mono s16le with
  ffmpeg, cycled in a fixed order (sorted, then a fixed-seed shuffle per further cycle)
  and joined with 1.0-2.5 s pauses of low-level gaussian noise until --duration-s is
  reached. The raw PCM is cached in ~/.cache/sarcasmd/soak/ keyed by the parameters.
  It is fed to `sarcasmd replay - --live` on stdin in 20 ms chunks, paced on a monotonic
  clock at --speed x real time (feeding starts once the models are loaded). --speed 0
  feeds as fast as the pipe accepts and then runs without --live (the daemon blocks
  instead of dropping). Standard library only.

  python3 scripts/soak.py --duration-s 3600 --speed 4          # the full hour, ~15 min
  python3 scripts/soak.py --duration-s 180 --speed 4 --warmup-s 30 --interval-s 2   # smoke
"""
import argparse
import array
import csv
import datetime
import glob
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time

RATE = 16000
BYTES_PER_S = RATE * 2
CHUNK_MS = 20
SEED = 20261122
PAUSE_S = (1.0, 2.5)
NOISE_SIGMA = 25.0  # LSB; gaussian, clipped to +-50 (about 2 sigma) -> "+-50 LSB" noise
NOISE_CLIP = 50
INPUT_VERSION = 1  # bump when the way the input is built changes (invalidates the cache)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
READY_MARK = "models loaded in"
LOG_LEVEL_RE = re.compile(r"^\[\S+\s+(WARN|ERROR)\b")


def cache_root():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sarcasmd", "soak")


def die(msg, code=2):
    print(f"soak: {msg}", file=sys.stderr)
    sys.exit(code)


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- input ----------------

def find_clips(clips_dir):
    if clips_dir and os.path.isdir(clips_dir):
        clips = sorted(glob.glob(os.path.join(clips_dir, "**", "*.wav"), recursive=True))
        if clips:
            return clips, None
        note = f"no *.wav under {clips_dir}"
    else:
        note = f"clip directory {clips_dir} missing"
    fallback = os.path.join(REPO, "samples", "meeting.wav")
    if not os.path.isfile(fallback):
        die(f"{note}, and the fallback {fallback} is missing too")
    return [fallback], f"{note}: falling back to samples/meeting.wav (one clip, repeated)"


def to_pcm(path):
    """One clip -> 16 kHz mono s16le bytes (ffmpeg), cached per clip (path, size, mtime)."""
    st = os.stat(path)
    ck = hashlib.sha256(f"{os.path.abspath(path)}|{st.st_size}|{st.st_mtime_ns}|{RATE}".encode()).hexdigest()[:20]
    cdir = os.path.join(cache_root(), "clips")
    cpath = os.path.join(cdir, ck + ".s16le")
    if os.path.isfile(cpath):
        with open(cpath, "rb") as f:
            return f.read()
    r = subprocess.run(
        ["ffmpeg", "-nostdin", "-loglevel", "error", "-i", path,
         "-ac", "1", "-ar", str(RATE), "-f", "s16le", "-acodec", "pcm_s16le", "-"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError(f"ffmpeg failed on {path}: {r.stderr.decode(errors='replace').strip()}")
    data = r.stdout
    data = data[: len(data) // 2 * 2]
    os.makedirs(cdir, exist_ok=True)
    tmp = f"{cpath}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, cpath)
    return data


def noise_bank(rng, seconds=10):
    n = RATE * seconds
    a = array.array("h", (max(-NOISE_CLIP, min(NOISE_CLIP, int(round(rng.gauss(0.0, NOISE_SIGMA)))))
                          for _ in range(n)))
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


def build_input(clips, duration_s):
    """Build (or reuse) the cached raw PCM stream. Returns (path, meta)."""
    ident = {
        "v": INPUT_VERSION, "duration_s": duration_s, "rate": RATE, "seed": SEED,
        "pause_s": PAUSE_S, "noise_sigma": NOISE_SIGMA, "noise_clip": NOISE_CLIP,
        "clips": [(os.path.abspath(c), os.path.getsize(c), os.stat(c).st_mtime_ns) for c in clips],
    }
    key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]
    root = cache_root()
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, f"input-{int(duration_s)}s-{key}.s16le")
    meta_path = path + ".json"
    target = int(round(duration_s * RATE)) * 2
    if os.path.isfile(path) and os.path.isfile(meta_path) and os.path.getsize(path) == target:
        with open(meta_path) as f:
            meta = json.load(f)
        meta["cached"] = True
        return path, meta

    log(f"converting {len(clips)} clips with ffmpeg (each once; cached under {cache_root()}/clips) ...")
    pcm = []
    for c in clips:
        d = to_pcm(c)
        if d:
            pcm.append((c, d))
    if not pcm:
        die("no audio in any clip")
    speech_total = sum(len(d) for _, d in pcm) / BYTES_PER_S
    log(f"{len(pcm)} clips, {speech_total:.1f} s of audio; joining to {duration_s:.0f} s")

    rng = random.Random(SEED)
    bank = noise_bank(random.Random(SEED + 1))
    order = list(range(len(pcm)))
    tmp = path + f".tmp{os.getpid()}"
    written = 0
    placed = 0
    cycles = 0
    speech_b = 0
    pause_b = 0

    def noise(nbytes):
        out = bytearray()
        while len(out) < nbytes:
            off = rng.randrange(0, len(bank) // 2) * 2
            out += bank[off: off + (nbytes - len(out))]
        return bytes(out)

    with open(tmp, "wb") as f:
        def put(b):
            nonlocal written
            b = b[: target - written]
            f.write(b)
            written += len(b)
            return len(b)

        while written < target:
            if cycles > 0:
                rng.shuffle(order)  # cycle 0 in sorted order, then a fixed-seed shuffle
            for i in order:
                if written >= target:
                    break
                p = int(round(rng.uniform(*PAUSE_S) * RATE)) * 2
                pause_b += put(noise(p))
                if written >= target:
                    break
                speech_b += put(pcm[i][1])
                placed += 1
            cycles += 1
    os.replace(tmp, path)
    meta = {
        "clips": len(pcm), "clip_audio_s": round(speech_total, 2),
        "clips_placed": placed, "cycles": cycles,
        "speech_s": round(speech_b / BYTES_PER_S, 2), "pause_s": round(pause_b / BYTES_PER_S, 2),
        "duration_s": written / BYTES_PER_S, "key": key, "path": path,
    }
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1)
    meta["cached"] = False
    return path, meta


# ---------------------------------------------------------------- /proc ----------------

def proc_sample(pid, clk):
    """VmRSS/VmHWM (kB), threads, fds, CPU s of pid; None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/status") as f:
            st = {}
            for line in f:
                k, _, v = line.partition(":")
                st[k] = v.strip()
        if "VmRSS" not in st:  # zombie: exited, not yet reaped
            return None
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        fields = s[s.rindex(")") + 2:].split()  # fields from 3 (state) on
        utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return {
            "rss_kb": int(st["VmRSS"].split()[0]),
            "hwm_kb": int(st["VmHWM"].split()[0]),
            "threads": int(st["Threads"]),
            "fds": fds,
            "cpu_s": (utime + stime) / clk,
        }
    except (FileNotFoundError, ProcessLookupError, ValueError, KeyError, IndexError):
        return None


# ---------------------------------------------------------------- feeding --------------

class Feeder(threading.Thread):
    """Writes the PCM file to the daemon's stdin, paced at `speed` x real time."""

    def __init__(self, proc, path, speed, log_path, ready_timeout_s=180.0):
        super().__init__(name="feeder", daemon=True)
        self.proc, self.path, self.speed = proc, path, speed
        self.log_path, self.ready_timeout_s = log_path, ready_timeout_s
        self.fed_bytes = 0
        self.t_start = None     # monotonic, first byte
        self.t_end = None       # monotonic, stdin closed
        self.max_late_s = 0.0   # how far the writer fell behind its schedule (wall s)
        self.error = None

    @property
    def fed_s(self):
        return self.fed_bytes / BYTES_PER_S

    def wait_ready(self):
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with open(self.log_path, errors="replace") as f:
                    if READY_MARK in f.read():
                        return True
            except FileNotFoundError:
                pass
            time.sleep(0.05)
        log(f"no '{READY_MARK}' in the log after {self.ready_timeout_s:.0f} s; feeding anyway")
        return True

    def run(self):
        try:
            if not self.wait_ready():
                self.error = "daemon exited before its models were loaded"
                return
            out = self.proc.stdin
            chunk = BYTES_PER_S * CHUNK_MS // 1000 if self.speed > 0 else BYTES_PER_S
            with open(self.path, "rb") as f:
                self.t_start = time.monotonic()
                while True:
                    b = f.read(chunk)
                    if not b:
                        break
                    if self.speed > 0:
                        # Absolute schedule: chunk k is due at t_start + audio_before_k / speed,
                        # so sleep error never accumulates; a late writer catches up.
                        due = self.t_start + (self.fed_bytes / BYTES_PER_S) / self.speed
                        now = time.monotonic()
                        if due > now:
                            time.sleep(due - now)
                        else:
                            self.max_late_s = max(self.max_late_s, now - due)
                    out.write(b)
                    out.flush()
                    self.fed_bytes += len(b)
        except (BrokenPipeError, OSError) as e:
            self.error = f"write to daemon failed after {self.fed_s:.1f} s of audio: {e}"
        finally:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            self.t_end = time.monotonic()


# ---------------------------------------------------------------- analysis -------------

def lsq_slope(xs, ys):
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def first_at_or_after(rows, audio_s):
    for r in rows:
        if r["audio_s"] >= audio_s - 1e-9:
            return r
    return None


def mb(kb):
    return kb / 1024.0


def summarise(a, rows, feeder, meta, stats, events, log_counts, rc, t_proc0, t_exit, load):
    total_audio = feeder.fed_s
    s = {"params": {
        "duration_s": a.duration_s, "speed": a.speed, "interval_s": a.interval_s,
        "warmup_s": a.warmup_s, "clips": a.clips, "config": a.config, "bin": a.bin,
        "work": a.work, "curve_step_s": a.curve_step_s},
        "input": meta, "exit_code": rc}
    feed_wall = (feeder.t_end - feeder.t_start) if feeder.t_start and feeder.t_end else None
    e2e_wall = (t_exit - feeder.t_start) if feeder.t_start else None
    drain = (t_exit - feeder.t_end) if feeder.t_end else None
    last_cpu = rows[-1]["cpu_s"] if rows else None
    s["timing"] = {
        "audio_s": round(total_audio, 3),
        "wall_s_total": round(t_exit - t_proc0, 3),
        "wall_s_feeding": round(feed_wall, 3) if feed_wall else None,
        "wall_s_first_byte_to_exit": round(e2e_wall, 3) if e2e_wall else None,
        "drain_after_eof_s": round(drain, 3) if drain is not None else None,
        "speed_target": a.speed,
        "speed_feed": round(total_audio / feed_wall, 3) if feed_wall else None,
        "speed_end_to_end": round(total_audio / e2e_wall, 3) if e2e_wall else None,
        "writer_max_late_s": round(feeder.max_late_s, 3),
        "cpu_s": round(last_cpu, 2) if last_cpu is not None else None,
        "cpu_s_per_audio_s": round(last_cpu / total_audio, 4) if last_cpu and total_audio else None,
        "loadavg_start": load[0], "loadavg_end": load[1], "cpus": os.cpu_count(),
    }
    if stats:
        s["timing"]["daemon_stats"] = {k: stats.get(k) for k in
                                       ("audio_s", "wall_s", "cpu_s", "rtf_cpu", "rtf_wall",
                                        "peak_rss_mb", "model_load_ms")}

    # Samples taken while the models were still loading (before the first byte was fed)
    # are kept in the CSV but left out of the analysis.
    all_rows = rows
    if feeder.t_start is not None:
        t_fed = feeder.t_start - t_proc0
        rows = [r for r in rows if r["t"] >= t_fed] or rows
    s["samples"] = {"total": len(all_rows), "while_feeding_or_after": len(rows)}

    # "At end" means the last sample taken before stdin was closed: after EOF the daemon
    # drains its queues and then tears its threads down (RSS, fds, threads fall), which
    # says nothing about leaks. Drain samples still count for the maxima.
    t_eof = (feeder.t_end - t_proc0) if feeder.t_end is not None else float("inf")
    live_rows = [r for r in rows if r["t"] <= t_eof] or rows
    end_row = live_rows[-1] if live_rows else None
    drain_rows = [r for r in rows if r["t"] > t_eof]
    s["samples"]["drain_after_eof"] = len(drain_rows)

    # memory
    warm = first_at_or_after(rows, a.warmup_s)
    after = [r for r in rows if warm and r["t"] >= warm["t"]]
    after_live = [r for r in after if r["t"] <= t_eof] or after
    mem = {}
    if warm and after:
        w = warm["rss_kb"]
        mx = max(r["rss_kb"] for r in after)
        end = end_row["rss_kb"]
        slope = lsq_slope([r["audio_s"] / 3600.0 for r in after_live], [mb(r["rss_kb"]) for r in after_live])
        mem = {
            "warmup_sample_audio_s": round(warm["audio_s"], 2),
            "rss_mb_at_warmup": round(mb(w), 1),
            "rss_mb_end": round(mb(end), 1),
            "end_sample_audio_s": round(end_row["audio_s"], 2),
            "rss_mb_max_after_warmup": round(mb(mx), 1),
            "rss_mb_min_after_warmup": round(mb(min(r["rss_kb"] for r in after_live)), 1),
            "rss_mb_last_sample_before_exit": round(mb(rows[-1]["rss_kb"]), 1),
            "growth_pct_max": round(100.0 * (mx - w) / w, 2),
            "growth_pct_end": round(100.0 * (end - w) / w, 2),
            "slope_mb_per_audio_hour": round(slope, 2) if slope is not None else None,
            "slope_points": len(after_live),
            "hwm_mb_end": round(mb(rows[-1]["hwm_kb"]), 1),
        }
    # curve: first sample at or after every step of audio, plus the sample at EOF
    step = a.curve_step_s
    marks = [i * step for i in range(int(total_audio // step + 1e-9) + 1)]
    curve = []
    for m in marks:
        r = first_at_or_after(live_rows, m)
        if r:
            curve.append([round(m / 60.0, 2), round(mb(r["rss_kb"]), 1), round(r["audio_s"], 1)])
    if end_row and (not curve or curve[-1][2] < end_row["audio_s"]):
        curve.append([round(end_row["audio_s"] / 60.0, 2), round(mb(end_row["rss_kb"]), 1),
                      round(end_row["audio_s"], 1)])
    mem["curve_min_mb"] = curve  # [mark (audio min), RSS MB, audio s of the sample used]
    s["memory"] = mem

    if warm and after:
        s["fds"] = {"start": rows[0]["fds"], "at_warmup": warm["fds"],
                    "min_after_warmup": min(r["fds"] for r in after_live),
                    "max_after_warmup": max(r["fds"] for r in after),  # drain included
                    "max_overall": max(r["fds"] for r in rows), "end": end_row["fds"]}
        s["threads"] = {"min": min(r["threads"] for r in live_rows), "max": max(r["threads"] for r in rows),
                        "min_after_warmup": min(r["threads"] for r in after_live),
                        "max_after_warmup": max(r["threads"] for r in after)}

    # events and drops
    s["events"] = events
    drops = {}
    judged = {}
    other = {}
    if stats:
        for k, v in (stats.get("dropped") or {}).items():
            drops[k] = v
            if not k.startswith("partials_"):
                judged[k] = v
        for k, v in stats.items():
            if k == "dropped" or not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            if re.search(r"drop|violat|lag|skip|overrun|lost|error|stale|busy|full", k):
                other[k] = v
        for k in ("utterances", "events", "too_short", "empty_transcripts", "partials"):
            if k in stats:
                other.setdefault(k, stats[k])
    s["drops"] = {"dropped": drops, "judged": judged, "judged_total": sum(judged.values()),
                  "other_counters": other}
    s["log"] = log_counts

    # verdicts
    v = {}
    if mem.get("growth_pct_max") is not None:
        v["rss_growth_lt_5pct"] = mem["growth_pct_max"] < 5.0
    else:
        v["rss_growth_lt_5pct"] = False
    v["fd_growth_zero"] = bool(s.get("fds")) and s["fds"]["max_after_warmup"] <= s["fds"]["at_warmup"]
    v["no_drops"] = bool(stats) and s["drops"]["judged_total"] == 0
    v["daemon_exit_0"] = rc == 0
    s["verdicts"] = v
    s["pass"] = all(v.values())
    return s


def print_summary(s):
    t, m = s["timing"], s["memory"]
    p = print
    pf = lambda b: "PASS" if b else "FAIL"
    fmt = lambda x, spec="": "n/a" if x is None else format(x, spec)
    inp = s["input"]
    p("")
    p("=== sarcasmd soak summary ===")
    p(f"input          {inp.get('clips')} clips ({inp.get('clip_audio_s')} s), {inp.get('clips_placed')} placed in "
      f"{inp.get('cycles')} cycle(s): {inp.get('speech_s')} s speech + {inp.get('pause_s')} s noise pauses"
      f"{' [cached]' if inp.get('cached') else ''}")
    p(f"audio fed      {t['audio_s']:.1f} s   wall {fmt(t['wall_s_first_byte_to_exit'], '.1f')} s "
      f"(feeding {fmt(t['wall_s_feeding'], '.1f')} s, drain after EOF {fmt(t['drain_after_eof_s'], '.2f')} s, "
      f"process total {t['wall_s_total']:.1f} s)")
    p(f"speed          target {t['speed_target']:g}x, fed {fmt(t['speed_feed'], '.2f')}x, end-to-end "
      f"{fmt(t['speed_end_to_end'], '.2f')}x (writer max {t['writer_max_late_s']:.3f} s behind schedule)")
    p(f"cpu            {fmt(t['cpu_s'], '.1f')} CPU-s = {fmt(t['cpu_s_per_audio_s'], '.3f')} CPU-s per audio-s; "
      f"loadavg start {t['loadavg_start']} end {t['loadavg_end']} on {t['cpus']} CPUs")
    ds = t.get("daemon_stats")
    if ds:
        p(f"daemon stats   audio {fmt(ds['audio_s'], '.1f')} s, wall {fmt(ds['wall_s'], '.1f')} s, rtf_cpu "
          f"{fmt(ds['rtf_cpu'], '.3f')}, peak RSS {fmt(ds['peak_rss_mb'], '.1f')} MB, model load "
          f"{fmt(ds['model_load_ms'], '.0f')} ms")
    if "rss_mb_at_warmup" in m:
        p(f"RSS            at warm-up ({m['warmup_sample_audio_s']:.0f} s audio) {m['rss_mb_at_warmup']:.1f} MB, "
          f"end (at EOF) {m['rss_mb_end']:.1f} MB, max after warm-up {m['rss_mb_max_after_warmup']:.1f} MB, "
          f"HWM {m['hwm_mb_end']:.1f} MB")
        p(f"RSS growth     max {m['growth_pct_max']:+.2f} %, end {m['growth_pct_end']:+.2f} %, slope "
          f"{fmt(m['slope_mb_per_audio_hour'], '+.2f')} MB per audio hour ({m['slope_points']} points)")
    p("RSS curve      [audio min:MB] " + " ".join(f"{c[0]:g}:{c[1]:.1f}" for c in m.get("curve_min_mb", [])))
    if s.get("fds"):
        f = s["fds"]
        p(f"fds            start {f['start']}, at warm-up {f['at_warmup']}, min {f['min_after_warmup']}, "
          f"max {f['max_after_warmup']} (after warm-up), end (at EOF) {f['end']}")
        th = s["threads"]
        p(f"threads        min {th['min']}, max {th['max']} (before EOF; after warm-up {th['min_after_warmup']}..{th['max_after_warmup']})")
    e = s["events"]
    p(f"events         {e['utterance']} utterance events ({e['lines']} lines, other types {e['other_types']}, "
      f"unparsable {e['bad_lines']})")
    d = s["drops"]
    p(f"drops          {json.dumps(d['dropped'])}; judged total {d['judged_total']}")
    p(f"other counters {json.dumps(d['other_counters'])}")
    lg = s["log"]
    p(f"log            {lg['lines']} lines, WARN {lg['WARN']}, ERROR {lg['ERROR']} ({lg['path']})")
    for line in lg["first_warn_error"]:
        p(f"                 {line}")
    v = s["verdicts"]
    p(f"verdict        RSS growth < 5 % after warm-up: {pf(v['rss_growth_lt_5pct'])} "
      f"({fmt(m.get('growth_pct_max'), '+.2f')} %)")
    p(f"verdict        fd growth == 0 after warm-up:   {pf(v['fd_growth_zero'])}")
    p(f"verdict        drops == 0:                      {pf(v['no_drops'])} "
      f"(at {fmt(t['speed_end_to_end'], '.2f')}x achieved, target {t['speed_target']:g}x)")
    p(f"verdict        daemon exit status 0:            {pf(v['daemon_exit_0'])} (got {s['exit_code']})")
    p(f"overall        {'PASS' if s['pass'] else 'FAIL'}")


# ---------------------------------------------------------------- main -----------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration-s", type=float, default=3600.0, help="audio to feed (default 3600)")
    ap.add_argument("--speed", type=float, default=4.0,
                    help="x real time (default 4); 0 = as fast as the pipe accepts, without --live")
    ap.add_argument("--interval-s", type=float, default=5.0, help="/proc sampling interval (default 5)")
    ap.add_argument("--warmup-s", type=float, default=300.0, help="warm-up, in seconds of AUDIO (default 300)")
    ap.add_argument("--clips", default=os.path.join(REPO, "..", "shared", "data", "speech"),
                    help="directory searched recursively for *.wav (default ../shared/data/speech)")
    ap.add_argument("--config", default=None, help="passed to `sarcasmd replay --config`")
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "sarcasmd"))
    ap.add_argument("--work", default=None,
                    help="run directory (default ~/.cache/sarcasmd/soak/run-<timestamp>)")
    ap.add_argument("--curve-step-s", type=float, default=None,
                    help="RSS curve step in audio seconds (default 300; shorter runs: ~1/6 of the duration)")
    a = ap.parse_args()

    if a.duration_s <= 0:
        ap.error("--duration-s must be > 0")
    if a.speed < 0:
        ap.error("--speed must be >= 0")
    if a.interval_s <= 0:
        ap.error("--interval-s must be > 0")
    if not 0 <= a.warmup_s < a.duration_s:
        ap.error("--warmup-s must be >= 0 and below --duration-s")
    if a.curve_step_s is None:
        a.curve_step_s = 300.0 if a.duration_s >= 1800 else max(10.0, round(a.duration_s / 6 / 10) * 10)
    if a.curve_step_s <= 0:
        ap.error("--curve-step-s must be > 0")
    if not shutil.which("ffmpeg"):
        die("ffmpeg not found; install it with `sudo apt-get install ffmpeg` (Debian/Ubuntu package `ffmpeg`)")
    a.bin = os.path.abspath(a.bin)
    if not (os.path.isfile(a.bin) and os.access(a.bin, os.X_OK)):
        die(f"{a.bin} missing or not executable; build it with `cargo build --release`")
    if a.config and not os.path.isfile(a.config):
        die(f"--config {a.config}: no such file")
    if a.config:
        a.config = os.path.abspath(a.config)
    if not os.path.isdir("/proc/self/fd"):
        die("needs Linux /proc")

    a.clips = os.path.normpath(os.path.abspath(a.clips))
    clips, note = find_clips(a.clips)
    if note:
        log(note)
    pcm_path, meta = build_input(clips, a.duration_s)
    log(f"input: {pcm_path} ({os.path.getsize(pcm_path) / BYTES_PER_S:.1f} s"
        f"{', cached' if meta.get('cached') else ''})")

    if a.work is None:
        a.work = os.path.join(cache_root(), "run-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    a.work = os.path.abspath(a.work)
    os.makedirs(a.work, exist_ok=True)
    ev_path = os.path.join(a.work, "events.jsonl")
    st_path = os.path.join(a.work, "stats.json")
    log_path = os.path.join(a.work, "sarcasmd.log")
    csv_path = os.path.join(a.work, "samples.csv")
    for p_ in (ev_path, st_path):  # events are appended to an existing file
        if os.path.exists(p_):
            os.remove(p_)

    cmd = [a.bin, "replay", "-", "--rate", str(RATE), "--events", ev_path, "--stats", st_path]
    if a.speed > 0:
        cmd.insert(3, "--live")
    if a.config:
        cmd += ["--config", a.config]
    with open(os.path.join(a.work, "command.txt"), "w") as f:
        f.write(" ".join(cmd) + "\n")
    log(f"work dir {a.work}")
    log("running: " + " ".join(cmd))

    clk = os.sysconf("SC_CLK_TCK")
    load0 = [round(x, 2) for x in os.getloadavg()]
    logf = open(log_path, "wb")
    t_proc0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=logf, cwd=a.work)
    feeder = Feeder(proc, pcm_path, a.speed, log_path)
    feeder.start()

    rows = []
    fields = ["t", "audio_s", "rss_kb", "hwm_kb", "fds", "threads", "cpu_s"]
    with open(csv_path, "w", newline="") as cf:
        w = csv.DictWriter(cf, fieldnames=fields)
        w.writeheader()
        k = 0
        next_progress = time.monotonic() + 60
        try:
            while True:
                smp = proc_sample(proc.pid, clk)
                if smp is None or proc.poll() is not None:
                    break
                now = time.monotonic()
                row = {"t": round(now - t_proc0, 3), "audio_s": round(feeder.fed_s, 3), **smp}
                row["cpu_s"] = round(row["cpu_s"], 2)
                rows.append(row)
                w.writerow(row)
                cf.flush()
                if now >= next_progress:
                    log(f"{feeder.fed_s:7.0f} s audio fed, RSS {mb(smp['rss_kb']):.1f} MB, fds {smp['fds']}, "
                        f"threads {smp['threads']}, CPU {smp['cpu_s']:.0f} s")
                    next_progress += 60
                k += 1
                due = t_proc0 + k * a.interval_s
                while True:  # sleep to the next slot, but notice an exit quickly
                    if proc.poll() is not None:
                        break
                    rest = due - time.monotonic()
                    if rest <= 0:
                        break
                    time.sleep(min(rest, 0.1))
                if proc.poll() is not None:
                    break
        except KeyboardInterrupt:
            log("interrupted: stopping the daemon")
            proc.terminate()
    rc = proc.wait()
    t_exit = time.monotonic()
    feeder.join(timeout=5)
    logf.close()
    load1 = [round(x, 2) for x in os.getloadavg()]
    if feeder.error:
        log(feeder.error)

    # events
    events = {"lines": 0, "utterance": 0, "other_types": {}, "bad_lines": 0}
    if os.path.exists(ev_path):
        with open(ev_path, errors="replace") as f:
            for line in f:
                if not line.strip():
                    continue
                events["lines"] += 1
                try:
                    typ = json.loads(line).get("type")
                except (ValueError, AttributeError):
                    events["bad_lines"] += 1
                    continue
                if typ == "utterance":
                    events["utterance"] += 1
                else:
                    events["other_types"][str(typ)] = events["other_types"].get(str(typ), 0) + 1
    stats = None
    try:
        with open(st_path) as f:
            stats = json.load(f)
    except (OSError, ValueError) as e:
        log(f"no usable stats file {st_path}: {e}")

    log_counts = {"path": log_path, "lines": 0, "WARN": 0, "ERROR": 0, "first_warn_error": []}
    with open(log_path, errors="replace") as f:
        for line in f:
            log_counts["lines"] += 1
            mm = LOG_LEVEL_RE.match(line)
            if mm:
                log_counts[mm.group(1)] += 1
                if len(log_counts["first_warn_error"]) < 5:
                    log_counts["first_warn_error"].append(line.rstrip()[:300])

    if not rows:
        log("no /proc samples were taken (the daemon exited at once?); see " + log_path)
    s = summarise(a, rows, feeder, meta, stats, events, log_counts, rc, t_proc0, t_exit, (load0, load1))
    s["files"] = {"samples_csv": csv_path, "events": ev_path, "stats": st_path, "log": log_path}
    with open(os.path.join(a.work, "summary.json"), "w") as f:
        json.dump(s, f, indent=1)
    print_summary(s)
    print(f"files          {a.work}/{{samples.csv,summary.json,stats.json,events.jsonl,sarcasmd.log}}")
    return 0 if s["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
