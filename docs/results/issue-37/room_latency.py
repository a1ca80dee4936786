#!/usr/bin/env python3
"""Does learning from corrections stall the pipeline? (issue 37: "no room-head refit stalls
the pipeline: end-of-speech -> flag p95 unchanged while corrections arrive every few
seconds").

The daemon replays a synthetic espeak-ng meeting in real time (`sarcasmd replay --realtime`,
the daemon's own code path: ring buffer, VAD, streaming Whisper, views, fusion, room head,
sinks) with `[room]` on and an HTTP listener with a token. In the `corrections` runs a
client corrects the newest event every INTERVAL seconds (`POST /events/{id}/feedback`,
alternating labels, as a room would click); in the `none` runs nobody clicks. Runs
alternate (none, corrections, none, ...) so both see the same machine load. Figures:
`latency_ms.total` (end of speech -> event) p50/p95 per run, medians over runs, and the
ratio corrections/none. Standard library only.

  python3 docs/results/issue-37/room_latency.py --bin target/release/sarcasmd \
      --minutes 3 --runs 2 --out docs/results/issue-37/room_latency.json
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import wave

TOKEN = "room-latency-token-0123456789"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def join_turns(folder, out, gap_s=1.0):
    turns = sorted(f for f in os.listdir(folder) if f.endswith(".wav"))
    with wave.open(os.path.join(folder, turns[0])) as r:
        rate = r.getframerate()  # espeak-ng's own (22050 Hz); the daemon resamples
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        for t in turns:
            with wave.open(os.path.join(folder, t)) as r:
                assert (r.getframerate(), r.getnchannels(), r.getsampwidth()) == (rate, 1, 2)
                w.writeframes(r.readframes(r.getnframes()))
            w.writeframes(b"\0\0" * int(rate * gap_s))
    return len(turns)


def finals(path):
    out = []
    try:
        with open(path) as fh:
            for line in fh:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue  # a line being written
                if e.get("type") == "utterance":
                    out.append(e)
    except FileNotFoundError:
        pass
    return out


def corrector(port, events, stop, interval_s, log):
    label = ["not_sarcastic", "sarcastic"]
    done = set()
    k = 0
    while not stop.is_set():
        stop.wait(interval_s)
        evs = [e for e in finals(events) if e["id"] not in done and e.get("transcript")]
        if not evs:
            continue
        e = evs[-1]
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/events/{e['id']}/feedback",
            data=json.dumps({"label": label[k % 2]}).encode(),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            method="POST")
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                code = r.status
        except urllib.error.HTTPError as err:
            code = err.code
        except OSError:
            continue  # the listener went away at the end of the run
        log.append({"id": e["id"], "code": code, "ms": round((time.monotonic() - t0) * 1e3, 1)})
        done.add(e["id"])
        k += 1


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def one_run(bin_, wav, mode, interval_s, work):
    port = free_port()
    d = tempfile.mkdtemp(dir=work)
    cfg = os.path.join(d, "cfg.toml")
    with open(cfg, "w") as fh:
        fh.write(f'[http]\nenabled = true\nbind = "127.0.0.1:{port}"\ntoken = "{TOKEN}"\n\n'
                 f'[room]\nenabled = true\nstore = "{d}/corrections.jsonl"\n')
    events = os.path.join(d, "events.jsonl")
    p = subprocess.Popen([bin_, "replay", wav, "--realtime", "--config", cfg, "--events", events],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "stderr"), "w"))
    stop, log = threading.Event(), []
    th = None
    if mode == "corrections":
        th = threading.Thread(target=corrector, args=(port, events, stop, interval_s, log))
        th.start()
    rc = p.wait()
    stop.set()
    if th:
        th.join()
    if rc != 0:
        sys.exit(f"replay exited {rc}: see {d}/stderr")
    evs = finals(events)
    tot = [e["latency_ms"]["total"] for e in evs]
    muted = sum(1 for e in evs if (e.get("room") or {}).get("muted_by") is not None)
    return {"mode": mode, "events": len(evs), "p50_ms": pct(tot, 0.5), "p95_ms": pct(tot, 0.95),
            "max_ms": max(tot), "corrections_sent": len(log),
            "corrections_accepted": sum(1 for c in log if c["code"] in (200, 201)),
            "correction_answer_ms_median": statistics.median([c["ms"] for c in log]) if log else None,
            "muted_events": muted}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/sarcasmd")
    ap.add_argument("--minutes", type=float, default=3)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--interval-s", type=float, default=3.0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="room-latency-")
    turns = os.path.join(work, "turns")
    subprocess.run([sys.executable, "scripts/espeak_meeting.py", "--out", turns, "--minutes", str(a.minutes)],
                   check=True, stdout=subprocess.DEVNULL)
    wav = os.path.join(work, "meeting.wav")
    n = join_turns(turns, wav)
    runs = []
    for r in range(a.runs):
        for mode in ("none", "corrections"):
            res = one_run(a.bin, wav, mode, a.interval_s, work)
            res["run"] = r
            print(json.dumps(res), flush=True)
            runs.append(res)
    summary = {}
    for mode in ("none", "corrections"):
        rs = [x for x in runs if x["mode"] == mode]
        summary[mode] = {"p50_ms_median": statistics.median(x["p50_ms"] for x in rs),
                         "p95_ms_median": statistics.median(x["p95_ms"] for x in rs)}
    summary["p95_ratio_corrections_over_none"] = round(
        summary["corrections"]["p95_ms_median"] / summary["none"]["p95_ms_median"], 3)
    out = {"what": "latency_ms.total of `sarcasmd replay --realtime` with [room] on, with and without "
                   f"corrections every {a.interval_s} s", "meeting_minutes": a.minutes, "turns": n,
           "cpu": open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": "),
           "runs": runs, "summary": summary}
    with open(a.out, "w") as fh:
        json.dump(out, fh, indent=1)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
