"""Fault soak (issue 34): the daemon as a service (`sarcasmd run --config`, live stdin)
with every output on, while the things a room breaks are broken on a schedule, and
every event accounted for at the end.

What runs
  * `sarcasmd run --config <work>/soak-faults.toml`: [source] stdin (live, 16 kHz),
    [output] events = <work>/events/ev.jsonl with partials, [captions] vtt/srt, [http]
    on a free loopback port (default limits: 64 connections, 32 streams), [mqtt] against
    a mosquitto the soak starts (keep_alive_s 5, so a stalled broker is noticed).
  * speech: the clips of ../shared/data/speech (or samples/meeting.wav) joined with
    pauses, as the soak builds them (cached), fed at --speed x real time
    (default 1: an hour of audio takes an hour). stdin stays open after the last byte
    (a live capture that ends is an exit 1 by design); the daemon is stopped by SIGTERM
    once the pipeline has drained.
  * faults, on a fixed schedule from the start of feeding:
      - SIGHUP every --hup-every-s (30): a reload (rejected while the events directory
        is missing: validate refuses it; otherwise the stream restarts);
      - the events directory removed (rm -rf) every 300 s from 120 s, recreated 15 s
        later;
      - the broker restarted (SIGTERM, 10 s down, started again on the same port, with
        persistence) every 600 s from 240 s;
      - the broker stalled (SIGSTOP 25 s, then SIGCONT) every 600 s from 540 s;
      - 100 SSE clients cycling: each connects to /events, reads for 5-60 s (a quarter
        slowly, a quarter leaving with a TCP reset), leaves, and comes back after 0.5-5 s;
        one refused with 503 (http.max_sse_clients) retries after 1-5 s;
      - /healthz and /metrics every --interval-s, the caption files every 30 s.
  * /proc of the daemon every --interval-s: RSS, fds, threads, CPU.

Accounting (the verdict "0 events unaccounted for")
  The daemon logs one line per stream ("stream N ended: U utterances, E events,
  dropped: ..."): a reload ends a stream, and each stream numbers its utterances from 0.
  Every utterance id of a stream is either an event in the events file or counted as
  dropped (utterance_queue_full; events_file_backlog_full and lines lost at the end are
  counted too). The file is followed by path like `tail -F` (an fd held across its
  removal, so lines written before the removal are read; a line written again after a
  removal is read twice and counted once), and cut into streams where ids start again.
  Unaccounted = utterances - events found in the file - drops counted. MQTT: every event
  found in the file is received by a persistent-session subscriber (paho-mqtt) or counted as an MQTT
  drop (offline queue full, refused, too large, unsent at stop).

Verdicts: 0 unaccounted in the events file and on MQTT; RSS after warm-up grows < 5 %;
fds at the two quiet points (no client connected) equal; /healthz and /metrics always
answered outside the instants a reload restarts the listener (those are reported
apart); no panic; exit status 0.

  scripts/soak/run-faults --duration-s 3600 --result docs/results/soak-faults.json
  scripts/soak/run-faults --duration-s 300 --schedule-scale 0.3 --interval-s 2 --warmup-s 60   # smoke

Needs ffmpeg and mosquitto; the Python packages (httpx, httpx-sse, paho-mqtt, tomli-w)
are in the venv scripts/soak/setup.sh makes.
"""

import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

from . import common
from .accounting import Tailer
from .common import BYTES_PER_S, REPO, cache_root, die, log
from .config import faults_config
from .daemon import free_port, proc_sample
from .faults import Faults
from .feed import build_input, feed_keep_open, find_clips
from .mqtt import Broker, SessionSub
from .scrape import Prober, metric
from .sse import SseChurn
from .verdict import faults_result

SEED = 20261126


def main():
    common.PREFIX = "soak-faults"
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration-s", type=float, default=3600.0, help="audio to feed (default 3600)")
    ap.add_argument("--speed", type=float, default=1.0, help="x real time (default 1)")
    ap.add_argument("--hup-every-s", type=float, default=30.0)
    ap.add_argument("--interval-s", type=float, default=5.0)
    ap.add_argument("--schedule-scale", type=float, default=1.0,
                    help="multiply the fault schedule's times (0.25 for a short smoke run)")
    ap.add_argument("--warmup-s", type=float, default=300.0, help="wall seconds before the RSS baseline")
    ap.add_argument("--clips", default=os.path.join(REPO, "..", "shared", "data", "speech"))
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "sarcasmd"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--result", default=None, help="also write the small result JSON here")
    a = ap.parse_args()
    for tool in ("ffmpeg", "mosquitto"):
        if not shutil.which(tool):
            die(f"needs {tool}")
    a.bin = os.path.abspath(a.bin)
    clips, note = find_clips(os.path.abspath(a.clips))
    if note:
        log(note)
    pcm_path, meta = build_input(clips, a.duration_s)
    a.work = os.path.abspath(a.work or os.path.join(
        cache_root(), "faults-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S")))
    os.makedirs(a.work, exist_ok=True)
    events_dir = os.path.join(a.work, "events")
    os.makedirs(events_dir, exist_ok=True)
    ev_path = os.path.join(events_dir, "ev.jsonl")
    for p in (ev_path,):
        if os.path.exists(p):
            os.remove(p)
    http_port, mqtt_port = free_port(), free_port()
    broker = Broker(a.work, mqtt_port, persistent=True)
    sub = SessionSub(mqtt_port, a.work)
    sub.start()
    cfg = os.path.join(a.work, "soak-faults.toml")
    with open(cfg, "w") as f:
        f.write(faults_config(a.work, ev_path, http_port, mqtt_port))
    r = subprocess.run([a.bin, "validate", cfg], capture_output=True, text=True)
    if r.returncode != 0:
        die(f"validate {cfg}: {r.stderr}")
    log_path = os.path.join(a.work, "sarcasmd.log")
    logf = open(log_path, "wb")
    proc = subprocess.Popen([a.bin, "run", "--config", cfg], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=logf, cwd=a.work, env={**os.environ, "RUST_LOG": "info"})
    tailer = Tailer(ev_path)
    tailer.start()
    state = {"fed": 0, "t_start": None, "t_end": None, "error": None}
    feeder = threading.Thread(target=feed_keep_open, args=(proc, pcm_path, a.speed, state, log_path), daemon=True)
    feeder.start()
    while state["t_start"] is None and proc.poll() is None:
        time.sleep(0.2)
    t0 = state["t_start"]
    log(f"feeding {a.duration_s:.0f} s of audio at {a.speed}x; work dir {a.work}")
    faults = Faults(a, proc, events_dir, broker, t0)
    prober = Prober(http_port, a.interval_s, faults)
    churn = SseChurn(http_port, SEED)
    faults.start()
    prober.start()
    churn.start()
    clk = os.sysconf("SC_CLK_TCK")
    rows, quiet = [], {}

    def quiet_fds(label):
        churn.pause()
        prober.paused.set()
        t = time.monotonic()
        vals = None
        while time.monotonic() - t < 20:
            vals = prober.scrape()
            if vals and metric(vals, "sarcasmd_sse_clients") == 0 and \
                    (metric(vals, "sarcasmd_http_connections") or 0) <= 1:
                break
            time.sleep(0.5)
        fds = [proc_sample(proc.pid, clk) for _ in range(3)]
        quiet[label] = min(x["fds"] for x in fds if x)
        prober.paused.clear()
        churn.resume()

    next_log = time.monotonic() + 60
    warm_done = False
    while proc.poll() is None:
        smp = proc_sample(proc.pid, clk)
        if smp:
            smp["t"] = round(time.monotonic() - t0, 1)
            smp["sse_open"] = churn.open
            rows.append(smp)
        if not warm_done and time.monotonic() - t0 >= a.warmup_s:
            warm_done = True
            quiet_fds("warmup")
        if state["t_end"] is not None:
            break
        if time.monotonic() >= next_log:
            next_log += 60
            log(f"{state['fed'] / BYTES_PER_S:6.0f} s fed, RSS {smp['rss_kb'] / 1024:.0f} MB, fds {smp['fds']}, "
                f"SSE open {churn.open}, faults {faults.st}")
        time.sleep(a.interval_s)
    # The end: faults off, the broker up, the pipeline drained, MQTT delivered.
    faults.stop()
    time.sleep(40)  # a stall or restart under way ends; the directory is back
    os.makedirs(events_dir, exist_ok=True)
    last, t = None, time.monotonic()
    while time.monotonic() - t < 120:
        time.sleep(5)
        n = len(tailer.lines)
        vals = prober.scrape()
        queued = metric(vals, "sarcasmd_mqtt_queued") if vals else None
        if n == last and queued == 0:
            break
        last = n
    quiet_fds("end")
    churn.stop()
    prober.stop()
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = "killed"
    logf.close()
    time.sleep(3)
    tailer.stop()
    sub.stop()
    broker.stop()

    result = faults_result(a, log_path, tailer, sub, state, t0, rc, rows, quiet, faults, churn, prober)
    with open(os.path.join(a.work, "summary.json"), "w") as f:
        json.dump(result, f, indent=1)
    if a.result:
        os.makedirs(os.path.dirname(os.path.abspath(a.result)), exist_ok=True)
        with open(a.result, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
    print(json.dumps(result, indent=1))
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
