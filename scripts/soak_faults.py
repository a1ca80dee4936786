#!/usr/bin/env python3
"""Fault soak (issue 34): the daemon as a service (`sarcasmd run --config`, live stdin)
with every output on, while the things a room breaks are broken on a schedule, and
every event accounted for at the end.

What runs
  * `sarcasmd run --config <work>/soak-faults.toml`: [source] stdin (live, 16 kHz),
    [output] events = <work>/events/ev.jsonl with partials, [captions] vtt/srt, [http]
    on a free loopback port (default limits: 64 connections, 32 streams), [mqtt] against
    a mosquitto the script starts (keep_alive_s 5, so a stalled broker is noticed).
  * speech: the clips of ../shared/data/speech (or samples/meeting.wav) joined with
    pauses, as scripts/soak.py builds them (cached), fed at --speed x real time
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
  found in the file is received by a persistent-session subscriber or counted as an MQTT
  drop (offline queue full, refused, too large, unsent at stop).

Verdicts: 0 unaccounted in the events file and on MQTT; RSS after warm-up grows < 5 %;
fds at the two quiet points (no client connected) equal; /healthz and /metrics always
answered outside the instants a reload restarts the listener (those are reported
apart); no panic; exit status 0.

  python3 scripts/soak_faults.py --duration-s 3600 --result docs/results/soak-faults.json
  python3 scripts/soak_faults.py --duration-s 300 --schedule-scale 0.3 --interval-s 2 --warmup-s 60   # smoke

Needs ffmpeg, mosquitto, mosquitto-clients; standard library only.
"""
import argparse
import datetime
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import soak  # noqa: E402  (input building, /proc sampling, HTTP helpers, SSE parser)

SEED = 20261126
SSE_CLIENTS = 100
STREAM_RE = re.compile(r"stream (\d+) ended: (\d+) utterances, (\d+) events, dropped: (.*)$", re.M)
RELOAD_RE = re.compile(r"reload: .* is valid; restarting|reload rejected|reload failed")
MQTT_STOP_RE = re.compile(r"mqtt: (\d+) events published .*?(\d+) unsent at stop", re.M)


def log(msg):
    print(f"[soak-faults {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Broker:
    """mosquitto on a fixed loopback port, persistent (a restart keeps queued messages
    for the subscriber's session), restartable and stallable."""

    def __init__(self, work, port):
        self.port, self.work = port, work
        self.conf = os.path.join(work, "mosquitto.conf")
        with open(self.conf, "w") as f:
            f.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
                    f"persistence_location {work}/\nautosave_interval 5\nlog_dest stderr\n"
                    "log_type error\nlog_type warning\nlog_type notice\n")
        self.logf = open(os.path.join(work, "mosquitto.log"), "ab")
        self.proc = None
        self.restarts = 0
        self.stalls = 0
        self.start()

    def start(self):
        self.proc = subprocess.Popen(["mosquitto", "-c", self.conf], stdin=subprocess.DEVNULL,
                                     stdout=self.logf, stderr=subprocess.STDOUT)
        if not soak.wait_port(self.port, 10.0, self.proc):
            raise RuntimeError("mosquitto did not listen")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            soak.stop_process(self.proc)

    def restart(self, down_s, stop_ev):
        self.stop()
        stop_ev.wait(down_s)
        self.start()
        self.restarts += 1

    def stall(self, for_s, stop_ev):
        os.kill(self.proc.pid, signal.SIGSTOP)
        try:
            stop_ev.wait(for_s)
        finally:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.stalls += 1


class Sub(threading.Thread):
    """mosquitto_sub with a persistent session (-c, QoS 1): every event payload received."""

    def __init__(self, port, work):
        super().__init__(name="sub", daemon=True)
        self.port = port
        self.err = open(os.path.join(work, "mosquitto_sub.err"), "ab")
        self.lock = threading.Lock()
        self.events = set()
        self.messages = 0
        self.proc = None
        self.stop_ev = threading.Event()

    def run(self):
        # mosquitto_sub exits when the broker goes away; it is started again (same id).
        while not self.stop_ev.is_set():
            self.proc = subprocess.Popen(
                ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(self.port), "-i", "soak-faults-sub",
                 "-c", "-q", "1", "-v", "-t", "sarcasmd/soakf/event"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.err)
            for raw in self.proc.stdout:
                topic, _, payload = raw.decode("utf-8", errors="replace").rstrip("\n").partition(" ")
                with self.lock:
                    self.messages += 1
                    self.events.add(payload)
            self.proc.wait()
            self.stop_ev.wait(0.5)

    def stop(self):
        self.stop_ev.set()
        if self.proc:
            soak.stop_process(self.proc)
        self.join(timeout=5)


class Tailer(threading.Thread):
    """Follows the events file by path like `tail -F`: holds an fd, reads what is appended,
    and when the path names another file or none, reads the old one to its end before
    opening the new one. Keeps every distinct line in order of first sight."""

    def __init__(self, path):
        super().__init__(name="tailer", daemon=True)
        self.path = path
        self.lines = []
        self.seen = set()
        self.duplicates = 0
        self.files = 0
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()

    def _take(self, f, buf):
        buf += f.read()
        *whole, rest = buf.split(b"\n")
        with self.lock:
            for line in whole:
                if not line.strip():
                    continue
                h = hashlib.sha1(line).digest()
                if h in self.seen:
                    self.duplicates += 1
                    continue
                self.seen.add(h)
                self.lines.append(line.decode("utf-8", errors="replace"))
        return rest

    def run(self):
        f, ino, buf = None, None, b""
        while True:
            stopping = self.stop_ev.is_set()
            if f is None:
                try:
                    f = open(self.path, "rb")
                    ino = os.fstat(f.fileno()).st_ino
                    self.files += 1
                    buf = b""
                except FileNotFoundError:
                    f = None
            if f is not None:
                buf = self._take(f, buf)
                try:
                    moved = os.stat(self.path).st_ino != ino
                except FileNotFoundError:
                    moved = True
                if moved:
                    buf = self._take(f, buf)  # what reached the old file before it went
                    f.close()
                    f = None
                    continue
            if stopping:
                return
            time.sleep(0.1)

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=10)


class SseChurn:
    """SSE_CLIENTS threads, each cycling: connect, read 5-60 s, leave, come back."""

    def __init__(self, port):
        self.port = port
        self.stop_ev = threading.Event()
        self.paused = threading.Event()
        self.lock = threading.Lock()
        self.open = 0
        self.st = {"sessions": 0, "served": 0, "refused_503": 0, "other_status": {}, "connect_errors": 0,
                   "ended_by_server": 0, "events": {}, "slow": 0, "abrupt": 0}
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True, name=f"sse-{i}")
                        for i in range(SSE_CLIENTS)]

    def start(self):
        for t in self.threads:
            t.start()

    def _count(self, k, n=1):
        with self.lock:
            self.st[k] += n

    def _client(self, i):
        import struct
        rng = random.Random(SEED + i)
        while not self.stop_ev.is_set():
            if self.paused.is_set():
                self.stop_ev.wait(0.2)
                continue
            kind = rng.choices(["normal", "slow", "abrupt"], weights=[2, 1, 1])[0]
            life = rng.uniform(5, 60)
            self._count("sessions")
            s = socket.socket()
            try:
                if kind == "slow":
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.settimeout(5)
                s.connect(("127.0.0.1", self.port))
                s.sendall(f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
                          "Accept: text/event-stream\r\n\r\n".encode())
            except OSError:
                self._count("connect_errors")
                s.close()
                self.stop_ev.wait(rng.uniform(0.5, 5))
                continue
            p = soak.SseParser()
            t_end = time.monotonic() + life
            s.settimeout(0.5)
            counted = False
            try:
                while time.monotonic() < t_end and not self.stop_ev.is_set() and not self.paused.is_set():
                    if kind == "slow":
                        time.sleep(rng.uniform(1, 4))
                    try:
                        b = s.recv(1024 if kind == "slow" else 65536)
                    except socket.timeout:
                        continue
                    except OSError:
                        self._count("ended_by_server")
                        break
                    if not b:
                        self._count("ended_by_server")
                        break
                    p.feed(b)
                    if p.status is not None and not counted:
                        counted = True
                        if p.status == 200:
                            self._count("served")
                            with self.lock:
                                self.open += 1
                        elif p.status == 503:
                            self._count("refused_503")
                            break
                        else:
                            with self.lock:
                                k = str(p.status)
                                self.st["other_status"][k] = self.st["other_status"].get(k, 0) + 1
                            break
                    with self.lock:
                        for typ, _data, _id in p.events:
                            self.st["events"][typ] = self.st["events"].get(typ, 0) + 1
                    p.events.clear()
            finally:
                if counted and p.status == 200:
                    with self.lock:
                        self.open -= 1
                if kind == "abrupt":
                    self._count("abrupt")
                    try:
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    except OSError:
                        pass
                elif kind == "slow":
                    self._count("slow")
                s.close()
            self.stop_ev.wait(rng.uniform(1, 5) if p.status == 503 else rng.uniform(0.5, 5))

    def pause(self):
        self.paused.set()
        t0 = time.monotonic()
        while self.open > 0 and time.monotonic() - t0 < 70:
            time.sleep(0.2)

    def resume(self):
        self.paused.clear()

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(timeout=70)


class Prober(threading.Thread):
    """/healthz and /metrics every interval, the caption files every 30 s. A failure
    within 20 s after a SIGHUP is counted apart: a reload restarts the listener."""

    def __init__(self, port, interval_s, faults):
        super().__init__(name="prober", daemon=True)
        self.port, self.interval_s, self.faults = port, interval_s, faults
        self.stop_ev = threading.Event()
        self.paused = threading.Event()
        self.st = {"healthz_ok": 0, "metrics_ok": 0, "captions_ok": 0, "failed_at_reload": 0,
                   "failed": 0, "failures": []}
        self.last = None

    def _get(self, path, key):
        try:
            status, _, body = soak.http_get(self.port, path, timeout=10)
        except OSError as e:
            status, body = f"{type(e).__name__}", b""
        if status == 200:
            self.st[key] += 1
            return body
        if time.monotonic() - self.faults.last_hup < 20:
            self.st["failed_at_reload"] += 1
        else:
            self.st["failed"] += 1
            if len(self.st["failures"]) < 10:
                self.st["failures"].append(f"{time.strftime('%H:%M:%S')} {path}: {status}")
        return None

    def run(self):
        next_cap = time.monotonic() + 30
        while not self.stop_ev.is_set():
            if not self.paused.is_set():
                self._get("/healthz", "healthz_ok")
                body = self._get("/metrics", "metrics_ok")
                if body is not None:
                    self.last = soak.parse_metrics(body.decode("utf-8", errors="replace"))
                if time.monotonic() >= next_cap:
                    next_cap += 30
                    for path in ("/captions.vtt", "/captions.srt"):
                        self._get(path, "captions_ok")
            self.stop_ev.wait(self.interval_s)

    def scrape(self):
        try:
            status, _, body = soak.http_get(self.port, "/metrics", timeout=10)
        except OSError:
            return None
        return soak.parse_metrics(body.decode("utf-8", errors="replace")) if status == 200 else None

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=30)


class Faults(threading.Thread):
    """The schedule of faults, from the start of feeding."""

    def __init__(self, a, proc, events_dir, broker, t0):
        super().__init__(name="faults", daemon=True)
        self.a, self.proc, self.events_dir, self.broker, self.t0 = a, proc, events_dir, broker, t0
        self.stop_ev = threading.Event()
        self.last_hup = 0.0
        self.st = {"sighup": 0, "events_dir_removed": 0, "broker_restarts": 0, "broker_stalls": 0}
        self.log = []

    def _note(self, what):
        self.log.append(f"{time.monotonic() - self.t0:7.1f} s {what}")

    def run(self):
        a = self.a
        plan = []  # (at_s, kind)
        t = a.hup_every_s
        while t < a.duration_s / a.speed:
            plan.append((t, "hup"))
            t += a.hup_every_s
        k = a.schedule_scale
        for start, every, kind in ((120, 300, "rm"), (240, 600, "restart"), (540, 600, "stall")):
            t, every = start * k, every * k
            while t < a.duration_s / a.speed - 60:
                plan.append((t, kind))
                t += every
        plan.sort()
        for at, kind in plan:
            while not self.stop_ev.is_set() and time.monotonic() - self.t0 < at:
                self.stop_ev.wait(0.2)
            if self.stop_ev.is_set() or self.proc.poll() is not None:
                return
            if kind == "hup":
                self.last_hup = time.monotonic()
                os.kill(self.proc.pid, signal.SIGHUP)
                self.st["sighup"] += 1
            elif kind == "rm":
                self._note("events directory removed")
                shutil.rmtree(self.events_dir, ignore_errors=True)
                self.st["events_dir_removed"] += 1
                threading.Timer(15, lambda: (os.makedirs(self.events_dir, exist_ok=True),
                                             self._note("events directory back"))).start()
            elif kind == "restart":
                self._note("broker restart")
                threading.Thread(target=self.broker.restart, args=(10, self.stop_ev), daemon=True).start()
                self.st["broker_restarts"] += 1
            elif kind == "stall":
                self._note("broker stall")
                threading.Thread(target=self.broker.stall, args=(25, self.stop_ev), daemon=True).start()
                self.st["broker_stalls"] += 1

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=30)


def feed(proc, pcm_path, speed, state, log_path):
    """Writes the PCM to stdin at `speed` x real time once the models are loaded; keeps
    stdin open afterwards."""
    while proc.poll() is None:
        with open(log_path, errors="replace") as f:
            if soak.READY_MARK in f.read():
                break
        time.sleep(0.1)
    chunk = soak.BYTES_PER_S * soak.CHUNK_MS // 1000
    with open(pcm_path, "rb") as f:
        state["t_start"] = time.monotonic()
        while True:
            b = f.read(chunk)
            if not b:
                break
            due = state["t_start"] + state["fed"] / soak.BYTES_PER_S / speed
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            try:
                proc.stdin.write(b)
                proc.stdin.flush()
            except OSError as e:
                state["error"] = str(e)
                return
            state["fed"] += len(b)
    state["t_end"] = time.monotonic()


def account(lines, streams):
    """Events file lines (distinct, in order) against the per-stream summaries."""
    evs = []
    for l in lines:
        try:
            j = json.loads(l)
        except ValueError:
            continue
        if j.get("type") == "utterance":
            evs.append(j)
    segments, cur, prev = [], [], None
    for e in evs:
        if prev is not None and e["id"] <= prev:
            segments.append(cur)
            cur = []
        cur.append(e)
        prev = e["id"]
    if cur:
        segments.append(cur)
    with_events = [s for s in streams if s["events"] > 0]
    produced = sum(s["utterances"] for s in streams)
    dropped = sum(s["dropped"].get("utterance_queue_full", 0) + s["dropped"].get("events_file_backlog_full", 0)
                  for s in streams)
    found = sum(len({e["id"] for e in seg}) for seg in segments)
    mismatched = []
    for k, (seg, st) in enumerate(zip(segments, with_events)):
        ids = [e["id"] for e in seg]
        expect = st["events"] - st["dropped"].get("events_file_backlog_full", 0)
        if len(ids) != expect or (ids and ids[-1] >= st["utterances"]):
            mismatched.append({"segment": k, "stream": st["n"], "found": len(ids), "expected": expect,
                               "utterances": st["utterances"]})
    return {
        "streams": len(streams), "streams_with_events": len(with_events), "segments_in_file": len(segments),
        "utterances_produced": produced, "events_in_file": found, "dropped_counted": dropped,
        "unaccounted": produced - found - dropped, "segments_not_matching": mismatched[:10],
    }, evs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration-s", type=float, default=3600.0, help="audio to feed (default 3600)")
    ap.add_argument("--speed", type=float, default=1.0, help="x real time (default 1)")
    ap.add_argument("--hup-every-s", type=float, default=30.0)
    ap.add_argument("--interval-s", type=float, default=5.0)
    ap.add_argument("--schedule-scale", type=float, default=1.0,
                    help="multiply the fault schedule's times (0.25 for a short smoke run)")
    ap.add_argument("--warmup-s", type=float, default=300.0, help="wall seconds before the RSS baseline")
    ap.add_argument("--clips", default=os.path.join(soak.REPO, "..", "shared", "data", "speech"))
    ap.add_argument("--bin", default=os.path.join(soak.REPO, "target", "release", "sarcasmd"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--result", default=None, help="also write the small result JSON here")
    a = ap.parse_args()
    for tool in ("ffmpeg", "mosquitto", "mosquitto_sub"):
        if not shutil.which(tool):
            soak.die(f"needs {tool}")
    a.bin = os.path.abspath(a.bin)
    clips, note = soak.find_clips(os.path.abspath(a.clips))
    if note:
        log(note)
    pcm_path, meta = soak.build_input(clips, a.duration_s)
    a.work = os.path.abspath(a.work or os.path.join(
        soak.cache_root(), "faults-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S")))
    os.makedirs(a.work, exist_ok=True)
    events_dir = os.path.join(a.work, "events")
    os.makedirs(events_dir, exist_ok=True)
    ev_path = os.path.join(events_dir, "ev.jsonl")
    for p in (ev_path,):
        if os.path.exists(p):
            os.remove(p)
    http_port, mqtt_port = soak.free_port(), soak.free_port()
    broker = Broker(a.work, mqtt_port)
    sub = Sub(mqtt_port, a.work)
    sub.start()
    cfg = os.path.join(a.work, "soak-faults.toml")
    with open(cfg, "w") as f:
        f.write(f"""# scripts/soak_faults.py; regenerated every run
[source]
kind = "stdin"
sample_rate_hz = 16000
live = true
[output]
events = "{ev_path}"
partials = true
[asr]
interim_every_ms = 1000
[captions]
vtt = "{a.work}/live.vtt"
srt = "{a.work}/live.srt"
[http]
enabled = true
bind = "127.0.0.1:{http_port}"
[mqtt]
enabled = true
host = "127.0.0.1"
port = {mqtt_port}
device_id = "soakf"
keep_alive_s = 5
reconnect_min_ms = 200
reconnect_max_ms = 5000
stats_interval_s = 30
""")
    r = subprocess.run([a.bin, "validate", cfg], capture_output=True, text=True)
    if r.returncode != 0:
        soak.die(f"validate {cfg}: {r.stderr}")
    log_path = os.path.join(a.work, "sarcasmd.log")
    logf = open(log_path, "wb")
    proc = subprocess.Popen([a.bin, "run", "--config", cfg], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=logf, cwd=a.work, env={**os.environ, "RUST_LOG": "info"})
    tailer = Tailer(ev_path)
    tailer.start()
    state = {"fed": 0, "t_start": None, "t_end": None, "error": None}
    feeder = threading.Thread(target=feed, args=(proc, pcm_path, a.speed, state, log_path), daemon=True)
    feeder.start()
    while state["t_start"] is None and proc.poll() is None:
        time.sleep(0.2)
    t0 = state["t_start"]
    log(f"feeding {a.duration_s:.0f} s of audio at {a.speed}x; work dir {a.work}")
    faults = Faults(a, proc, events_dir, broker, t0)
    prober = Prober(http_port, a.interval_s, faults)
    churn = SseChurn(http_port)
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
            if vals and soak.metric(vals, "sarcasmd_sse_clients") == 0 and \
                    (soak.metric(vals, "sarcasmd_http_connections") or 0) <= 1:
                break
            time.sleep(0.5)
        fds = [soak.proc_sample(proc.pid, clk) for _ in range(3)]
        quiet[label] = min(x["fds"] for x in fds if x)
        prober.paused.clear()
        churn.resume()

    next_log = time.monotonic() + 60
    warm_done = False
    while proc.poll() is None:
        smp = soak.proc_sample(proc.pid, clk)
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
            log(f"{state['fed'] / soak.BYTES_PER_S:6.0f} s fed, RSS {smp['rss_kb'] / 1024:.0f} MB, fds {smp['fds']}, "
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
        queued = soak.metric(vals, "sarcasmd_mqtt_queued") if vals else None
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

    text = open(log_path, errors="replace").read()
    streams = []
    for m in STREAM_RE.finditer(text):
        dropped = {}
        if m.group(4).strip() != "none":
            for part in m.group(4).split(", "):
                k, _, v = part.rpartition(" ")
                dropped[k] = int(v)
        streams.append({"n": int(m.group(1)), "utterances": int(m.group(2)), "events": int(m.group(3)),
                        "dropped": dropped})
    file_acc, evs = account(tailer.lines, streams)
    unsent = sum(int(m.group(2)) for m in MQTT_STOP_RE.finditer(text))
    mqtt_dropped = sum(s["dropped"].get(k, 0) for s in streams
                       for k in ("mqtt_offline_queue_full", "mqtt_refused", "mqtt_too_large", "mqtt_unsent_at_stop"))
    payloads = {json.dumps(e, separators=(",", ":")) for e in evs}
    with sub.lock:
        received = {p for p in sub.events}
    # Payloads are the same serialisation as the file lines; compare by content.
    file_lines = {l for l in tailer.lines if '"type":"utterance"' in l}
    on_mqtt = len(file_lines & received)
    mqtt_acc = {"events_in_file": len(file_lines), "received_by_subscriber": on_mqtt,
                "messages_received": sub.messages, "dropped_counted": mqtt_dropped + unsent,
                "unsent_at_stop_logged": unsent,
                "unaccounted": len(file_lines) - on_mqtt - (mqtt_dropped + unsent)}
    del payloads
    drops_total = {}
    for s in streams:
        for k, v in s["dropped"].items():
            drops_total[k] = drops_total.get(k, 0) + v
    # RSS moves with each reload (models loaded again): compare the median of a window
    # right after warm-up with the median of the last one, and fit a slope.
    warm = [r for r in rows if r["t"] >= a.warmup_s] or rows
    span = warm[-1]["t"] - warm[0]["t"]
    win = min(600.0, max(span / 4, a.interval_s))

    def median_rss(rs):
        v = sorted(r["rss_kb"] for r in rs)
        return v[len(v) // 2] / 1024

    rss0 = median_rss([r for r in warm if r["t"] <= warm[0]["t"] + win])
    rss_end = median_rss([r for r in warm if r["t"] >= warm[-1]["t"] - win])
    rss_max = max(r["rss_kb"] for r in warm) / 1024
    slope = soak.lsq_slope([r["t"] / 3600 for r in warm], [r["rss_kb"] / 1024 for r in warm])
    last_metrics = prober.last or {}
    refused = {k.split('reason="')[1].rstrip('"}'): v for k, v in last_metrics.items()
               if k.startswith("sarcasmd_http_refused_total")}
    throttled = None
    try:
        with open("/sys/fs/cgroup/cpu.stat") as f:
            throttled = {k: int(v) for k, v in (l.split() for l in f) if k.startswith("nr_throttled") or
                         k.startswith("throttled_usec")}
    except OSError:
        pass
    reloads = {"applied": text.count("is valid; restarting the stream"), "rejected": text.count("reload rejected"),
               "failed": text.count("reload failed")}
    panics = len(re.findall(r"panicked at", text))
    result = {
        "date": datetime.date.today().isoformat(),
        "commit": subprocess.run(["git", "-C", soak.REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip(),
        "audio_s": round(state["fed"] / soak.BYTES_PER_S, 1),
        "wall_s": round(time.monotonic() - t0, 1),
        "speed": a.speed,
        "exit_status": rc,
        "faults": faults.st, "reloads": reloads,
        "events_file": file_acc | {"tailer_files": tailer.files, "lines_read_twice": tailer.duplicates},
        "mqtt": mqtt_acc,
        "drops_by_reason": drops_total,
        "sse": churn.st, "http_probes": prober.st, "http_refused_last_stream": refused,
        "rss_mb": {"window_s": round(win), "median_after_warmup": round(rss0, 1), "median_end": round(rss_end, 1),
                   "max": round(rss_max, 1), "start": round(rows[0]["rss_kb"] / 1024, 1),
                   "growth_pct": round(100 * (rss_end - rss0) / rss0, 2),
                   "slope_mb_per_h": round(slope, 2) if slope is not None else None},
        "fds": {"start": rows[0]["fds"], "quiet_warmup": quiet.get("warmup"), "quiet_end": quiet.get("end"),
                "end": rows[-1]["fds"], "min": min(r["fds"] for r in rows), "max": max(r["fds"] for r in rows)},
        "threads_max": max(r["threads"] for r in rows),
        "cpu_s": rows[-1]["cpu_s"],
        "cgroup_cpu_throttling": throttled,
        "panics": panics,
        "warn_error_lines": len(re.findall(r"^\[\S+\s+(?:WARN|ERROR)", text, re.M)),
        "fault_log": faults.log[:40],
        "work": a.work,
    }
    result["verdicts"] = {
        "events_file_all_accounted": file_acc["unaccounted"] == 0 and not file_acc["segments_not_matching"],
        "mqtt_all_accounted": mqtt_acc["unaccounted"] <= 0,
        "rss_flat": result["rss_mb"]["growth_pct"] < 5,
        "fds_flat": quiet.get("warmup") is not None and quiet.get("end") == quiet.get("warmup"),
        "http_always_answered": prober.st["failed"] == 0,
        "no_panic": panics == 0,
        "exit_0": rc == 0,
    }
    result["pass"] = all(result["verdicts"].values())
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
