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
  not judged); no event over the config's budget.event_latency_ms (the daemon's
  budget_violations counter; always 0 without a budget). "No drops" only means something when the machine keeps up with --speed:
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

Full-outputs mode (--outputs; off by default, the plain soak above is unchanged)
  The same feed, with every secondary output on and used, as in a room:
  * config: <work>/soak-outputs.toml, written each run and checked with `sarcasmd validate`
    first: [http] enabled on 127.0.0.1:<free port> (no token; the clients send
    Host: 127.0.0.1:<port>), [captions] vtt/srt = <work>/live.vtt, live.srt,
    [output] partials = true, asr.interim_every_ms = --interim-ms (default 1000, so
    `partial` events reach SSE; 0 leaves it as configured), [mqtt] enabled against
    127.0.0.1:<free port>, device_id "soak". With --config, that file is read (tomllib)
    and these keys are set over it: its other [http]/[mqtt]/[captions] keys are kept,
    except http.token/token_file and the mqtt connection keys (host, port, device_id,
    client_id, username, password, password_file, tls), which are replaced or dropped.
  * broker: the script starts its own mosquitto on a free loopback port (<work>/
    mosquitto.conf: listener, allow_anonymous, persistence false; log mosquitto.log) and
    stops it at the end; `mosquitto_sub -v -q 1 -t '#'` counts every message per topic
    (the daemon publishes on sarcasmd/soak/{event,status,stats}); it is subscribed (a
    probe message came back) before the daemon starts.
  * SSE clients: 1-4 at a time on /events (the target is redrawn every 5-20 s), each
    staying a random 5-60 s of wall time; half leave normally, a quarter with a TCP
    reset (SO_LINGER 0), a quarter are slow readers (4 KiB receive buffer, 1 KiB read
    every 2-6 s; half of them reset too). Choices from a fixed seed. They count events
    per type, keep-alives, status states and utterance ids.
  * scraper: /metrics every --interval-s; /captions.vtt (body must start with WEBVTT)
    and /captions.srt every 30 s; /healthz and / once at start.
  * fd baselines: the plain fd verdict (no growth after warm-up) cannot hold while the
    soak's own client sockets come and go, so twice - once the warm-up audio is in and
    20 s of wall time before EOF - the clients and the scraper stop, the script waits
    (<= 15 s) until /metrics shows sarcasmd_sse_clients 0 and sarcasmd_http_connections
    <= 1 (the scrape itself), takes the smallest of three /proc fd counts, and lets the
    clients start again (they are connected again through EOF and shutdown).
  Reported besides the plain soak's figures: SSE connections started/connected/closed
  (by reason and kind), events received per type, utterance ids never seen by any SSE
  client; MQTT messages per kind, distinct event ids vs the utterance events written,
  duplicates, the status sequence and the daemon's own MQTT shutdown line; every
  /metrics series whose name has dropped, lagged, refused, mqtt, http_connections,
  sse_clients or reloads (plus sarcasmd_events_total) from the last scrape; caption file
  sizes and cue counts; daemon panics in the log. samples.csv gains client_sse_open
  (the soak's open SSE sockets), sse_clients and http_connections (latest scrape).
  Verdicts: RSS growth, no drops and exit status as above (unchanged); instead of
  "fd growth == 0": fds back to baseline after SSE clients leave (end baseline <=
  warm-up baseline, both quiet, the end one before EOF); every final event reached MQTT
  (every utterance id of events.jsonl received on .../event); HTTP served (/healthz and
  / 200, >= 1 SSE client connected, no SSE connect failure, non-200 or stream ended by
  the server before EOF, every /metrics scrape before EOF and every caption fetch
  good, live.vtt has its header). The SSE lag counter (sse_client_lagged) is reported,
  not judged: the slow readers are meant to fall behind. Needs --speed > 0,
  `mosquitto` and `mosquitto_sub` (Debian: mosquitto, mosquitto-clients).

  python3 scripts/soak.py --outputs --duration-s 3600 --speed 4    # the full hour, ~15 min
  python3 scripts/soak.py --outputs --duration-s 180 --speed 4 --warmup-s 30 --interval-s 2
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
PANIC_RE = re.compile(r"^thread '.*' .*panicked at ")


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


# ---------------------------------------------------------------- outputs mode ---------

OUT_SEED = SEED + 101           # the SSE clients' choices (kinds, lifetimes, counts)
SSE_CLIENTS = (1, 4)            # clients kept open at once (target redrawn now and then)
SSE_LIFE_S = (5.0, 60.0)        # wall seconds each client stays
SSE_SLOW_READ_S = (2.0, 6.0)    # a slow reader reads 1 KiB this often, with a 4 KiB SO_RCVBUF
CAPTION_FETCH_EVERY_S = 30.0    # wall seconds between /captions.vtt (and .srt) fetches
QUIET_TIMEOUT_S = 15.0          # wait this long for the daemon to count 0 SSE clients
END_QUIET_WALL_S = 20.0         # the end fd baseline is taken this long (wall) before EOF
METRIC_KEEP_RE = re.compile(r"dropped|lagged|refused|mqtt|http_connections|sse_clients|reloads")
MQTT_SUMMARY_RE = re.compile(r"mqtt: (\d+) events published")  # the daemon's shutdown line


def mqtt_log_line(line):
    """The daemon's MQTT shutdown summary ("mqtt: N events published (acknowledged), F
    failed ..., R reconnect attempts, D dropped ..."; older builds: "N events published,
    A acknowledged, D dropped") -> numbers found, and the line itself."""
    m = MQTT_SUMMARY_RE.search(line)
    out = {"published": int(m.group(1))}
    acked = re.search(r"(\d+) acknowledged", line)
    if acked:
        out["acked"] = int(acked.group(1))
    elif "published (acknowledged)" in line:
        out["acked"] = out["published"]
    for key, pat in (("failed", r"(\d+) failed"), ("reconnect_attempts", r"(\d+) reconnect attempts"),
                     ("dropped", r"(\d+) dropped")):
        mm = re.search(pat, line)
        if mm:
            out[key] = int(mm.group(1))
    out["line"] = line[line.index("mqtt:"):].rstrip()[:300]
    return out


def free_port():
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def wait_port(port, timeout_s, proc=None):
    import socket
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def toml_key(k):
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else toml_str(k)


def toml_str(s):
    # A JSON string is a TOML basic string once DEL is escaped too (ensure_ascii=False
    # keeps non-BMP characters whole: TOML has no surrogate escapes).
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return toml_str(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise ValueError(f"cannot write a {type(v).__name__} value back as TOML")


def toml_dump(d):
    """Minimal TOML writer for a parsed config (tables, scalars, arrays, inline tables)."""
    out = []

    def table(path, t):
        scalars = [(k, v) for k, v in t.items() if not isinstance(v, dict)]
        subs = [(k, v) for k, v in t.items() if isinstance(v, dict)]
        if path and (scalars or not subs):
            out.append("[" + ".".join(toml_key(p) for p in path) + "]")
        for k, v in scalars:
            out.append(f"{toml_key(k)} = {toml_value(v)}")
        if path and (scalars or not subs):
            out.append("")
        for k, v in subs:
            table(path + [k], v)

    table([], d)
    return "\n".join(out) + "\n"


def outputs_config(a, http_port, mqtt_port):
    """The config for --outputs: --config (if any) with the output sections set. Returns
    (text, notes): [http] on loopback without a token, [mqtt] against our broker,
    [captions] into the work dir, output.partials and asr.interim_every_ms."""
    notes = []
    base = {}
    if a.config:
        try:
            import tomllib  # Python 3.11+
        except ImportError:
            die("--outputs with --config needs Python 3.11 or later (tomllib)")
        with open(a.config, "rb") as f:
            base = tomllib.load(f)
    http = dict(base.get("http") or {})
    for k in ("token", "token_file"):
        if http.pop(k, None) is not None:
            notes.append(f"http.{k} of --config dropped (the soak's clients send no token)")
    http.update(enabled=True, bind=f"127.0.0.1:{http_port}", metrics=True)
    mqtt = {k: v for k, v in (base.get("mqtt") or {}).items()
            if k not in ("host", "port", "device_id", "client_id", "username", "password",
                         "password_file", "tls")}
    mqtt.update(enabled=True, host="127.0.0.1", port=mqtt_port, device_id="soak")
    captions = dict(base.get("captions") or {})
    captions.update(vtt=os.path.join(a.work, "live.vtt"), srt=os.path.join(a.work, "live.srt"))
    output = dict(base.get("output") or {})
    output["partials"] = True
    cfg = dict(base)
    cfg.update(output=output, captions=captions, http=http, mqtt=mqtt)
    if a.interim_ms > 0:
        asr = dict(base.get("asr") or {})
        asr["interim_every_ms"] = a.interim_ms
        cfg["asr"] = asr
    head = ("# Written by scripts/soak.py --outputs" +
            (f" from {a.config}" if a.config else "") + "; regenerated every run.\n")
    return head + toml_dump(cfg), notes, cfg


def http_get(port, path, timeout=5.0):
    """GET on the daemon's loopback listener (Host: 127.0.0.1:port, no proxy).
    Returns (status, content_type, body bytes)."""
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path, headers={"Connection": "close"})
        r = c.getresponse()
        return r.status, r.getheader("Content-Type", ""), r.read()
    finally:
        c.close()


def parse_metrics(text):
    """Prometheus / OpenMetrics text -> {"name{labels}": value}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, val = line.rpartition(" ")
        if not key:
            continue
        try:
            out[key.strip()] = float(val)
        except ValueError:
            continue
    return out


def metric(values, name):
    """Sum of every series of one metric name (any labels); None when absent."""
    hits = [v for k, v in values.items() if k == name or k.startswith(name + "{")]
    return sum(hits) if hits else None


def stop_process(proc, grace_s=5):
    """SIGTERM, then SIGKILL after `grace_s`; waits for the exit."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

class Broker:
    """mosquitto on a free loopback port, anonymous, no persistence."""

    def __init__(self, work):
        self.port = free_port()
        self.conf = os.path.join(work, "mosquitto.conf")
        self.log_path = os.path.join(work, "mosquitto.log")
        with open(self.conf, "w") as f:
            f.write(f"# scripts/soak.py --outputs\nlistener {self.port} 127.0.0.1\n"
                    "allow_anonymous true\npersistence false\nlog_dest stderr\n"
                    "log_type error\nlog_type warning\nlog_type notice\nlog_type information\n")
        self.logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(["mosquitto", "-c", self.conf], stdin=subprocess.DEVNULL,
                                     stdout=self.logf, stderr=subprocess.STDOUT)
        if not wait_port(self.port, 10.0, self.proc):
            self.stop()
            raise RuntimeError(f"mosquitto did not listen on 127.0.0.1:{self.port}; see {self.log_path}")

    def stop(self):
        stop_process(self.proc)
        self.logf.close()


class MqttSub(threading.Thread):
    """`mosquitto_sub -v -q 1 -t '#'` on our broker, counting messages per topic."""

    PROBE = "soak/probe"

    def __init__(self, port, work):
        super().__init__(name="mqtt-sub", daemon=True)
        self.port = port
        self.err_path = os.path.join(work, "mosquitto_sub.err")
        self.errf = open(self.err_path, "wb")
        self.proc = subprocess.Popen(
            ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(port), "-i", f"soak-sub-{os.getpid()}",
             "-q", "1", "-v", "-t", "#"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.errf)
        self.lock = threading.Lock()
        self.topics = {}
        self.event_ids = {}       # id -> copies received
        self.event_bad = 0
        self.status = []          # status payloads in order
        self.stats_types = {}     # type of each stats message -> count
        self.final_stats = None
        self.probes = 0
        self.lines = 0

    def run(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            topic, _, payload = line.partition(" ")
            with self.lock:
                self.lines += 1
                if topic == self.PROBE:
                    self.probes += 1
                    continue
                self.topics[topic] = self.topics.get(topic, 0) + 1
                leaf = topic.rsplit("/", 1)[-1]
                if leaf == "event":
                    try:
                        i = json.loads(payload)["id"]
                        self.event_ids[i] = self.event_ids.get(i, 0) + 1
                    except (ValueError, KeyError, TypeError):
                        self.event_bad += 1
                elif leaf == "status":
                    self.status.append(payload.strip())
                elif leaf == "stats":
                    try:
                        j = json.loads(payload)
                        t = str(j.get("type"))
                        if t == "final_stats":
                            self.final_stats = j
                    except (ValueError, AttributeError):
                        t = "unparsable"
                    self.stats_types[t] = self.stats_types.get(t, 0) + 1

    def wait_subscribed(self, timeout_s=10.0):
        """Publish probes until one comes back (the subscription is then in place)."""
        if not shutil.which("mosquitto_pub"):
            time.sleep(1.0)
            return None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            subprocess.run(["mosquitto_pub", "-h", "127.0.0.1", "-p", str(self.port), "-q", "1",
                            "-t", self.PROBE, "-m", "probe"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=10)
            t = time.monotonic() + 1.0
            while time.monotonic() < t:
                if self.probes:
                    return True
                time.sleep(0.05)
        return False

    def stop(self, wait_for_offline_s=5.0):
        """After the daemon has exited: wait for its `offline` status, then stop."""
        deadline = time.monotonic() + wait_for_offline_s
        while time.monotonic() < deadline:
            with self.lock:
                if self.status and self.status[-1] == "offline":
                    break
            time.sleep(0.1)
        time.sleep(0.5)
        stop_process(self.proc)
        self.join(timeout=5)
        self.errf.close()

    def report(self):
        with self.lock:
            kinds = {}
            for t, n in self.topics.items():
                if t.startswith("homeassistant/") or t.endswith("/config"):
                    k = "discovery"
                else:
                    k = t.rsplit("/", 1)[-1]
                kinds[k] = kinds.get(k, 0) + n
            return {
                "messages_total": sum(self.topics.values()),
                "by_kind": kinds,
                "topics": dict(self.topics),
                "event_messages": sum(self.event_ids.values()) + self.event_bad,
                "event_ids_distinct": len(self.event_ids),
                "event_duplicates": sum(n - 1 for n in self.event_ids.values()),
                "event_unparsable": self.event_bad,
                "status_sequence": self.status[:20],
                "stats_by_type": dict(self.stats_types),
                "final_stats_events": (self.final_stats or {}).get("events"),
                "subscriber_exit": self.proc.returncode,
                "subscriber_stderr": self.err_path,
            }


class SseParser:
    """Incremental HTTP/1.1 response + chunked transfer coding + text/event-stream."""

    def __init__(self):
        self.buf = b""
        self.status = None
        self.headers = None
        self.chunked = False
        self.chunk_left = None    # None: expecting a size line; -1: expecting the CRLF after data
        self.body = b""
        self.done = False         # terminating chunk seen
        self.cur = {"event": None, "data": [], "id": None}
        self.events = []          # dispatched (type, data, id), drained by the caller
        self.comments = 0

    def feed(self, b):
        self.buf += b
        if self.headers is None:
            i = self.buf.find(b"\r\n\r\n")
            if i < 0:
                return
            head = self.buf[:i].decode("latin-1").split("\r\n")
            self.buf = self.buf[i + 4:]
            try:
                self.status = int(head[0].split()[1])
            except (IndexError, ValueError):
                self.status = -1
            self.headers = {}
            for h in head[1:]:
                k, _, v = h.partition(":")
                self.headers[k.strip().lower()] = v.strip()
            self.chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        if not self.chunked:
            self.body += self.buf
            self.buf = b""
        else:
            while not self.done:
                if self.chunk_left is None:
                    i = self.buf.find(b"\r\n")
                    if i < 0:
                        break
                    size = int(self.buf[:i].split(b";")[0].strip() or b"0", 16)
                    self.buf = self.buf[i + 2:]
                    if size == 0:
                        self.done = True
                        break
                    self.chunk_left = size
                elif self.chunk_left == -1:
                    if len(self.buf) < 2:
                        break
                    self.buf = self.buf[2:]
                    self.chunk_left = None
                else:
                    if not self.buf:
                        break
                    take = self.buf[: self.chunk_left]
                    self.buf = self.buf[len(take):]
                    self.body += take
                    self.chunk_left -= len(take)
                    if self.chunk_left == 0:
                        self.chunk_left = -1
        self._lines()

    def _lines(self):
        while True:
            i = self.body.find(b"\n")
            if i < 0:
                return
            line = self.body[:i].rstrip(b"\r").decode("utf-8", errors="replace")
            self.body = self.body[i + 1:]
            if line == "":
                c = self.cur
                if c["data"] or c["event"]:
                    self.events.append((c["event"] or "message", "\n".join(c["data"]), c["id"]))
                self.cur = {"event": None, "data": [], "id": c["id"]}
            elif line.startswith(":"):
                self.comments += 1
            else:
                k, _, v = line.partition(":")
                v = v[1:] if v.startswith(" ") else v
                if k == "event":
                    self.cur["event"] = v
                elif k == "data":
                    self.cur["data"].append(v)
                elif k == "id":
                    self.cur["id"] = v


class SseClient(threading.Thread):
    """One /events connection: read for `life_s` of wall time, then leave (gracefully,
    or with a TCP reset when abrupt). A slow one has a 4 KiB receive buffer and reads
    1 KiB every few seconds. Reports to the fleet when it ends."""

    def __init__(self, fleet, n, kind, life_s, abrupt, rng_seed):
        super().__init__(name=f"sse-{n}", daemon=True)
        self.fleet, self.kind, self.life_s, self.abrupt = fleet, kind, life_s, abrupt
        self.rng = random.Random(rng_seed)
        self.stop_ev = threading.Event()
        self.connected = False

    def run(self):
        import socket
        import struct
        f = self.fleet
        res = {"kind": self.kind, "events": {}, "bytes": 0, "comments": 0, "ids": set(),
               "states": {}, "status": None, "reason": None, "wall_s": 0.0}
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        t0 = time.monotonic()
        try:
            if self.kind == "slow":
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.settimeout(5.0)
            try:
                s.connect(("127.0.0.1", f.port))
                s.sendall((f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{f.port}\r\n"
                           "Accept: text/event-stream\r\nCache-Control: no-cache\r\n\r\n").encode())
            except OSError as e:
                res["reason"] = f"connect_failed: {e.__class__.__name__}"
                return
            self.connected = True
            p = SseParser()
            s.settimeout(0.5)
            end = t0 + self.life_s
            next_read = 0.0
            while res["reason"] is None:
                now = time.monotonic()
                if self.stop_ev.is_set():
                    res["reason"] = "paused_or_stopped"
                    break
                if now >= end:
                    res["reason"] = "abrupt" if self.abrupt else "graceful"
                    break
                if self.kind == "slow":
                    if now < next_read:
                        time.sleep(min(0.2, next_read - now))
                        continue
                    next_read = now + self.rng.uniform(*SSE_SLOW_READ_S)
                try:
                    b = s.recv(1024 if self.kind == "slow" else 65536)
                except socket.timeout:
                    continue
                except OSError as e:
                    res["reason"] = f"error: {e.__class__.__name__}"
                    break
                if not b:
                    res["reason"] = "server_closed"
                    break
                res["bytes"] += len(b)
                p.feed(b)
                if res["status"] is None and p.status is not None:
                    res["status"] = p.status
                    if p.status != 200:
                        res["reason"] = f"http_{p.status}"
                for typ, data, _id in p.events:
                    res["events"][typ] = res["events"].get(typ, 0) + 1
                    if typ in ("utterance", "status"):
                        try:
                            j = json.loads(data)
                        except ValueError:
                            j = {}
                        if typ == "utterance" and "id" in j:
                            res["ids"].add(j["id"])
                        elif typ == "status":
                            st = str(j.get("state"))
                            res["states"][st] = res["states"].get(st, 0) + 1
                p.events.clear()
                if p.done:
                    res["reason"] = "server_closed"
            res["comments"] = p.comments
        finally:
            try:
                if self.connected and res["reason"] == "abrupt":
                    # SO_LINGER 0: close() sends a TCP reset, unread data and all.
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            except OSError:
                pass
            res["wall_s"] = time.monotonic() - t0
            f.finished(self, res)


class SseFleet(threading.Thread):
    """Keeps SSE_CLIENTS clients on /events, each leaving after a random life; seeded."""

    def __init__(self, port, feeder):
        super().__init__(name="sse-fleet", daemon=True)
        self.port, self.feeder = port, feeder
        self.rng = random.Random(OUT_SEED)
        self.lock = threading.Lock()
        self.live = set()
        self.paused = threading.Event()
        self.spawning = threading.Lock()
        self.stop_ev = threading.Event()
        self.n = 0
        self.st = {"started": 0, "connected": 0, "connect_failed": 0, "connect_failed_after_eof": 0,
                   "non_200": {}, "closed": {}, "by_kind": {}, "events": {}, "bytes": 0,
                   "keepalive_comments": 0, "status_states": {}, "wall_s_connected": 0.0,
                   "max_open": 0, "ended_by_server_or_error_before_eof": 0}
        self.ids = set()

    def open_count(self):
        with self.lock:
            return sum(1 for c in self.live if c.connected)

    def finished(self, c, res):
        with self.lock:
            self.live.discard(c)
            st = self.st
            r = res["reason"] or "unknown"
            if r.startswith("connect_failed"):
                if self.feeder.t_end is not None:
                    st["connect_failed_after_eof"] += 1
                else:
                    st["connect_failed"] += 1
                return
            if res["status"] == 200:
                st["connected"] += 1
            elif res["status"] is not None:
                st["non_200"][str(res["status"])] = st["non_200"].get(str(res["status"]), 0) + 1
            st["closed"][r] = st["closed"].get(r, 0) + 1
            if (r.startswith("error") or r == "server_closed") and self.feeder.t_end is None:
                st["ended_by_server_or_error_before_eof"] += 1
            st["by_kind"][res["kind"]] = st["by_kind"].get(res["kind"], 0) + 1
            for k, v in res["events"].items():
                st["events"][k] = st["events"].get(k, 0) + v
            for k, v in res["states"].items():
                st["status_states"][k] = st["status_states"].get(k, 0) + v
            st["bytes"] += res["bytes"]
            st["keepalive_comments"] += res["comments"]
            st["wall_s_connected"] += res["wall_s"]
            self.ids |= res["ids"]

    def run(self):
        rng = self.rng
        target = rng.randint(*SSE_CLIENTS)
        retarget = time.monotonic() + rng.uniform(5, 20)
        while not self.stop_ev.is_set():
            spawned = False
            with self.spawning:
                if not self.paused.is_set():
                    now = time.monotonic()
                    if now >= retarget:
                        target = rng.randint(*SSE_CLIENTS)
                        retarget = now + rng.uniform(5, 20)
                    with self.lock:
                        n_live = len(self.live)
                    if n_live < target:
                        kind = rng.choices(["normal", "abrupt", "slow"], weights=[2, 1, 1])[0]
                        abrupt = kind == "abrupt" or (kind == "slow" and rng.random() < 0.5)
                        c = SseClient(self, self.n, kind, rng.uniform(*SSE_LIFE_S), abrupt,
                                      rng.getrandbits(32))
                        self.n += 1
                        with self.lock:
                            self.live.add(c)
                            self.st["started"] += 1
                            self.st["max_open"] = max(self.st["max_open"], len(self.live))
                        c.start()
                        spawned = True
            self.stop_ev.wait(rng.uniform(0.2, 3.0) if spawned else 0.2)

    def _close_all(self, timeout_s=5.0):
        with self.lock:
            live = list(self.live)
        for c in live:
            c.stop_ev.set()
        for c in live:
            c.join(timeout_s)

    def pause(self):
        self.paused.set()
        with self.spawning:  # a spawn under way registers first
            pass
        self._close_all()

    def resume(self):
        self.paused.clear()

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=5)
        self._close_all()

    def report(self):
        with self.lock:
            r = dict(self.st)
            r["closed_total"] = sum(self.st["closed"].values())
            r["still_open"] = len(self.live)
            r["utterance_ids_distinct"] = len(self.ids)
            r["wall_s_connected"] = round(r["wall_s_connected"], 1)
            return r, set(self.ids)


class Scraper(threading.Thread):
    """GET /metrics every interval_s, /captions.vtt and /captions.srt every
    CAPTION_FETCH_EVERY_S; keeps the last scrape and counts failures."""

    def __init__(self, port, interval_s, feeder):
        super().__init__(name="scraper", daemon=True)
        self.port, self.interval_s, self.feeder = port, interval_s, feeder
        self.lock = threading.Lock()
        self.paused = threading.Event()
        self.busy = threading.Lock()   # held while a periodic request is under way
        self.stop_ev = threading.Event()
        self.last = None           # {"t_wall": monotonic, "audio_s":, "values": {...}}
        self.st = {"metrics_ok": 0, "metrics_failed": 0, "metrics_failed_after_eof": 0,
                   "metrics_errors": [],
                   "vtt_ok": 0, "vtt_bad": 0, "srt_ok": 0, "srt_bad": 0,
                   "caption_failed_after_eof": 0, "caption_errors": [],
                   "vtt_last_bytes": None, "vtt_last_cues": None}
        self.gauges = {"sse_clients": None, "http_connections": None}

    def _err(self, key, msg):
        if len(self.st[key]) < 5:
            self.st[key].append(msg)

    def scrape(self):
        """One /metrics scrape (also used by the quiet phases). Returns values or None."""
        try:
            status, _, body = http_get(self.port, "/metrics")
        except OSError as e:
            return None, f"{e.__class__.__name__}: {e}"
        if status != 200:
            return None, f"HTTP {status}"
        return parse_metrics(body.decode("utf-8", errors="replace")), None

    def _captions(self):
        for path, key in (("/captions.vtt", "vtt"), ("/captions.srt", "srt")):
            try:
                status, ctype, body = http_get(self.port, path, timeout=10.0)
            except OSError as e:
                with self.lock:
                    if self.feeder.t_end is not None:
                        self.st["caption_failed_after_eof"] += 1
                    else:
                        self.st[key + "_bad"] += 1
                        self._err("caption_errors", f"{path}: {e.__class__.__name__}: {e}")
                continue
            text = body.decode("utf-8", errors="replace")
            if key == "vtt":
                ok = status == 200 and text.lstrip("\ufeff").startswith("WEBVTT")
            else:  # SRT: empty so far, or a cue number first
                first = text.lstrip("\ufeff").split("\n", 1)[0].strip()
                ok = status == 200 and (first == "" or first.isdigit())
            with self.lock:
                self.st[key + ("_ok" if ok else "_bad")] += 1
                if not ok:
                    self._err("caption_errors", f"{path}: HTTP {status} {ctype!r} {text[:40]!r}")
                if key == "vtt" and status == 200:
                    self.st["vtt_last_bytes"] = len(body)
                    self.st["vtt_last_cues"] = text.count("-->")

    def run(self):
        t_next = time.monotonic()
        t_cap = time.monotonic() + 5.0
        while not self.stop_ev.is_set():
            with self.busy:
                if not self.paused.is_set():
                    now = time.monotonic()
                    if now >= t_next:
                        t_next = now + self.interval_s
                        self._metrics()
                    if now >= t_cap:
                        t_cap = now + CAPTION_FETCH_EVERY_S
                        self._captions()
            if self.paused.is_set():
                self.stop_ev.wait(0.1)
            else:
                self.stop_ev.wait(max(0.0, min(t_next, t_cap) - time.monotonic()))

    def _metrics(self):
        vals, err = self.scrape()
        with self.lock:
            if vals is not None:
                self.st["metrics_ok"] += 1
                self.last = {"t_wall": time.monotonic(), "audio_s": round(self.feeder.fed_s, 2),
                             "values": vals}
                self.gauges = {"sse_clients": metric(vals, "sarcasmd_sse_clients"),
                               "http_connections": metric(vals, "sarcasmd_http_connections")}
            elif self.feeder.t_end is not None:
                self.st["metrics_failed_after_eof"] += 1
            else:
                self.st["metrics_failed"] += 1
                self._err("metrics_errors", err)

    def pause(self):
        self.paused.set()
        with self.busy:  # a request under way ends first; later iterations see `paused`
            pass

    def resume(self):
        self.paused.clear()

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=15)


class Conductor(threading.Thread):
    """Takes the two fd baselines of the outputs mode with no client connected: once the
    warm-up audio is in, and END_QUIET_WALL_S before EOF. Each: stop the SSE clients and
    the scraper, wait until the daemon's /metrics says sarcasmd_sse_clients 0 and
    sarcasmd_http_connections <= 1 (the scrape itself), then the smallest of three /proc
    fd counts 0.3 s apart; then the clients start again."""

    def __init__(self, a, proc, feeder, fleet, scraper, clk):
        super().__init__(name="conductor", daemon=True)
        self.a, self.proc, self.feeder, self.fleet, self.scraper, self.clk = a, proc, feeder, fleet, scraper, clk
        self.stop_ev = threading.Event()
        self.phases = {}

    def _wait_audio(self, audio_s):
        while not self.stop_ev.is_set() and self.proc.poll() is None:
            if self.feeder.t_end is not None:
                return False
            if self.feeder.t_start is not None and self.feeder.fed_s >= audio_s:
                return True
            self.stop_ev.wait(0.1)
        return False

    def _quiet(self, label):
        t0 = time.monotonic()
        self.fleet.pause()
        self.scraper.pause()
        ph = {"audio_s": round(self.feeder.fed_s, 2), "quiet": False}
        try:
            sse = conns = None
            while time.monotonic() - t0 < QUIET_TIMEOUT_S and self.proc.poll() is None:
                vals, _ = self.scraper.scrape()
                if vals is not None:
                    sse = metric(vals, "sarcasmd_sse_clients")
                    conns = metric(vals, "sarcasmd_http_connections")
                    if sse == 0 and conns is not None and conns <= 1:
                        ph["quiet"] = True
                        break
                time.sleep(0.5)
            ph["sse_clients"], ph["http_connections"] = sse, conns
            fds = []
            for _ in range(3):
                time.sleep(0.3)
                smp = proc_sample(self.proc.pid, self.clk)
                if smp:
                    fds.append(smp["fds"])
            ph["fds_samples"] = fds
            ph["fds"] = min(fds) if fds else None
            ph["before_eof"] = self.feeder.t_end is None
            ph["audio_s_end"] = round(self.feeder.fed_s, 2)
            ph["wall_s"] = round(time.monotonic() - t0, 2)
        finally:
            self.phases[label] = ph
            self.scraper.resume()
            self.fleet.resume()
        log(f"fd baseline '{label}': {ph.get('fds')} fds at {ph['audio_s']:.0f} s audio "
            f"(quiet {ph['quiet']}, sse_clients {ph.get('sse_clients')}, "
            f"http_connections {ph.get('http_connections')}, {ph.get('wall_s')} s)")

    def run(self):
        a = self.a
        if self._wait_audio(a.warmup_s):
            self._quiet("warmup")
        end_at = a.duration_s - a.speed * END_QUIET_WALL_S
        if end_at <= a.warmup_s:
            log(f"run too short for a separate end fd baseline ({END_QUIET_WALL_S:.0f} s wall before EOF "
                f"falls inside the warm-up); taking it right away")
        if self._wait_audio(max(end_at, a.warmup_s)):
            self._quiet("end")

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=QUIET_TIMEOUT_S + 10)


def caption_files(work):
    out = {}
    for name in ("live.vtt", "live.srt", "live.vtt.1", "live.srt.1"):
        p = os.path.join(work, name)
        if os.path.exists(p):
            out[name] = os.path.getsize(p)
    vtt = os.path.join(work, "live.vtt")
    if os.path.exists(vtt):
        with open(vtt, errors="replace") as f:
            text = f.read()
        out["vtt_header_ok"] = text.lstrip("\ufeff").startswith("WEBVTT")
        out["vtt_cues"] = text.count("-->")
        out["vtt_utterance_notes"] = len(re.findall(r"^NOTE utterance ", text, re.M))
    srt = os.path.join(work, "live.srt")
    if os.path.exists(srt):
        with open(srt, errors="replace") as f:
            out["srt_cues"] = f.read().count("-->")
    return out


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


def summarise(a, rows, feeder, meta, stats, events, log_counts, rc, t_proc0, t_exit, load, outputs=None):
    total_audio = feeder.fed_s
    s = {"params": {
        "duration_s": a.duration_s, "speed": a.speed, "interval_s": a.interval_s,
        "warmup_s": a.warmup_s, "clips": a.clips, "config": a.config, "bin": a.bin,
        "work": a.work, "curve_step_s": a.curve_step_s, "outputs": a.outputs,
        "interim_ms": a.interim_ms if a.outputs else None},
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
    if outputs is None:
        v["fd_growth_zero"] = bool(s.get("fds")) and s["fds"]["max_after_warmup"] <= s["fds"]["at_warmup"]
    else:
        # The raw fd count includes the soak's own client connections, so the fd verdict
        # compares the two baselines taken with no client connected (see Conductor).
        v["fds_back_to_baseline"] = outputs["verdicts"]["fds_back_to_baseline"]
    v["no_drops"] = bool(stats) and s["drops"]["judged_total"] == 0
    # Events later than the config's budget.event_latency_ms (the daemon counts them; 0
    # without a budget): a run that kept up but flagged late did not pass.
    s["budget_violations"] = (stats or {}).get("budget_violations")
    v["within_budget"] = bool(stats) and s["budget_violations"] == 0
    v["daemon_exit_0"] = rc == 0
    if outputs is not None:
        v["mqtt_every_event"] = outputs["verdicts"]["mqtt_every_event"]
        v["http_served"] = outputs["verdicts"]["http_served"]
        s["outputs"] = outputs
    s["verdicts"] = v
    s["pass"] = all(v.values())
    return s


def print_outputs(o, s):
    p = print
    fmt = lambda x, spec="": "n/a" if x is None else format(x, spec)
    p(f"outputs        http 127.0.0.1:{o['http_port']}, mqtt 127.0.0.1:{o['mqtt_port']} (own mosquitto), "
      f"captions, output.partials, asr.interim_every_ms {o['interim_ms'] or 'as configured'}; config {o['config']}")
    p(f"HTTP start     /healthz {o['healthz']}, / {o['overlay']} (listener up after {fmt(o['listener_up_s'], '.1f')} s)")
    e = o["sse"]
    p(f"SSE            {e['started']} clients started, {e['connected']} connected (200), {e['closed_total']} closed "
      f"{json.dumps(e['closed'])}; by kind {json.dumps(e['by_kind'])}; max open {e['max_open']}; connect failures "
      f"{e['connect_failed']} (+{e['connect_failed_after_eof']} after EOF); non-200 {json.dumps(e['non_200'])}; "
      f"{e['wall_s_connected']} s connected in all")
    p(f"SSE events     {json.dumps(e['events'])}; {e['bytes']} bytes; keep-alives {e['keepalive_comments']}; "
      f"status states {json.dumps(e['status_states'])}; {e['utterance_ids_distinct']} distinct utterance ids "
      f"({o['sse_missing_ids']} of {o['events_utterance_ids']} written never reached any SSE client)")
    mq = o["mqtt"]
    dl = o.get("mqtt_daemon_log") or {}
    p(f"MQTT           {mq['messages_total']} messages received {json.dumps(mq['by_kind'])}; event ids "
      f"{mq['event_ids_distinct']} distinct ({mq['event_duplicates']} duplicates) vs {o['events_utterance_ids']} "
      f"utterance events; status {' > '.join(mq['status_sequence'])}; final_stats events "
      f"{fmt(mq['final_stats_events'])}; daemon log: published {dl.get('published', 'n/a')}, acked "
      f"{dl.get('acked', 'n/a')}, failed {dl.get('failed', 'n/a')}, dropped {dl.get('dropped', 'n/a')}")
    ml = o["metrics_last"]
    if ml:
        p(f"metrics        last scrape at {ml['audio_s']:.0f} s audio, {fmt(ml['s_before_exit'], '.1f')} s before "
          f"exit ({o['scrapes']['metrics_ok']} scrapes ok, {o['scrapes']['metrics_failed']} failed, "
          f"{o['scrapes']['metrics_failed_after_eof']} failed after EOF):")
        for k, val in ml["values"].items():
            p(f"                 {k} {val:g}")
    else:
        p("metrics        no successful /metrics scrape")
    c = o["captions"]
    sc = o["scrapes"]
    p(f"captions       live.vtt {c.get('live.vtt', 'missing')} B ({c.get('vtt_cues')} cues, "
      f"{c.get('vtt_utterance_notes')} utterance NOTEs, header ok {c.get('vtt_header_ok')}), live.srt "
      f"{c.get('live.srt', 'missing')} B ({c.get('srt_cues')} cues)"
      + (f", rotated {c.get('live.vtt.1')}/{c.get('live.srt.1')} B" if "live.vtt.1" in c or "live.srt.1" in c else "")
      + f"; fetched /captions.vtt ok {sc['vtt_ok']} bad {sc['vtt_bad']}, /captions.srt ok {sc['srt_ok']} "
      f"bad {sc['srt_bad']}")
    fb = o["fd_baselines"]
    for k in ("warmup", "end"):
        ph = fb.get(k)
        if ph:
            p(f"fd baseline    {k}: {ph.get('fds')} fds (samples {ph.get('fds_samples')}) at {ph['audio_s']:.0f} s "
              f"audio; quiet {ph['quiet']} (sse_clients {fmt(ph.get('sse_clients'), 'g')}, http_connections "
              f"{fmt(ph.get('http_connections'), 'g')}), before EOF {ph.get('before_eof')}, took {ph.get('wall_s')} s")
        else:
            p(f"fd baseline    {k}: not taken")


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
    p(f"log            {lg['lines']} lines, WARN {lg['WARN']}, ERROR {lg['ERROR']}, panics {lg.get('panics', 0)} "
      f"({lg['path']})")
    for line in lg["first_warn_error"] + lg.get("first_panic", []):
        p(f"                 {line}")
    o = s.get("outputs")
    if o:
        print_outputs(o, s)
    v = s["verdicts"]
    p(f"verdict        RSS growth < 5 % after warm-up: {pf(v['rss_growth_lt_5pct'])} "
      f"({fmt(m.get('growth_pct_max'), '+.2f')} %)")
    if "fd_growth_zero" in v:
        p(f"verdict        fd growth == 0 after warm-up:   {pf(v['fd_growth_zero'])}")
    else:
        fb = o["fd_baselines"]
        w, e = fb.get("warmup") or {}, fb.get("end") or {}
        p(f"verdict        fds back to baseline after SSE clients leave: {pf(v['fds_back_to_baseline'])} "
          f"(end {e.get('fds')} vs warm-up {w.get('fds')}, no client connected at either)")
    p(f"verdict        drops == 0:                      {pf(v['no_drops'])} "
      f"(at {fmt(t['speed_end_to_end'], '.2f')}x achieved, target {t['speed_target']:g}x)")
    if "within_budget" in v:
        p(f"verdict        events over budget == 0:         {pf(v['within_budget'])} "
          f"({s.get('budget_violations')} over budget.event_latency_ms)")
    p(f"verdict        daemon exit status 0:            {pf(v['daemon_exit_0'])} (got {s['exit_code']})")
    if o:
        mq = o["mqtt"]
        p(f"verdict        every final event reached MQTT:  {pf(v['mqtt_every_event'])} "
          f"({mq['event_ids_distinct']} distinct event ids received vs {o['events_utterance_ids']} utterance "
          f"events written; missing {mq['missing_ids']}, extra {mq['extra_ids']})")
        p(f"verdict        HTTP served (SSE, /metrics, captions, /healthz): {pf(v['http_served'])}"
          + (f" - {'; '.join(o['http_problems'])}" if o["http_problems"] else ""))
        p(f"SSE lag        {o['sse_lagged']} events lost by lagging SSE clients "
          f"(sarcasmd_dropped_events_total{{reason=\"sse_client_lagged\"}}, last scrape; reported, not judged)")
    p(f"overall        {'PASS' if s['pass'] else 'FAIL'}")


def outputs_report(a, out, fleet, scraper, conductor, utt_ids, mqtt_log, t_exit):
    """Everything --outputs adds to summary.json, with its three verdicts."""
    o = {"config": out["config"], "http_port": out["http_port"], "mqtt_port": out["mqtt_port"],
         "interim_ms": a.interim_ms, "config_notes": out["notes"], "healthz": out.get("healthz"),
         "overlay": out.get("overlay"), "listener_up_s": out.get("listener_up_s"),
         "events_utterance_ids": len(utt_ids)}
    if fleet:
        sse, sse_ids = fleet.report()
    else:
        sse, sse_ids = {"started": 0, "connected": 0, "closed": {}, "closed_total": 0, "by_kind": {},
                        "max_open": 0, "connect_failed": 0, "connect_failed_after_eof": 0, "non_200": {},
                        "wall_s_connected": 0, "events": {}, "bytes": 0, "keepalive_comments": 0,
                        "status_states": {}, "utterance_ids_distinct": 0,
                        "ended_by_server_or_error_before_eof": 0}, set()
    o["sse"] = sse
    o["sse_missing_ids"] = len(utt_ids - sse_ids)
    mq = out["sub"].report()
    mids = set(out["sub"].event_ids)
    mq["missing_ids"] = len(utt_ids - mids)
    mq["missing_ids_first"] = sorted(utt_ids - mids)[:10]
    mq["extra_ids"] = len(mids - utt_ids)
    o["mqtt"] = mq
    o["mqtt_daemon_log"] = mqtt_log
    last = scraper.last if scraper else None
    if last:
        vals = last["values"]
        keep = {k: v for k, v in vals.items() if METRIC_KEEP_RE.search(k.split("{", 1)[0])}
        for k, v in vals.items():
            if k.split("{", 1)[0] == "sarcasmd_events_total":
                keep[k] = v
        o["metrics_last"] = {"audio_s": last["audio_s"], "s_before_exit": round(t_exit - last["t_wall"], 2),
                             "values": dict(sorted(keep.items()))}
        lag = [v for k, v in vals.items() if "sse_client_lagged" in k]
        o["sse_lagged"] = int(sum(lag)) if lag else None
    else:
        o["metrics_last"] = None
        o["sse_lagged"] = None
    sc = dict(scraper.st) if scraper else {"metrics_ok": 0, "metrics_failed": 0, "metrics_failed_after_eof": 0,
                                           "metrics_errors": [], "vtt_ok": 0, "vtt_bad": 0, "srt_ok": 0,
                                           "srt_bad": 0, "caption_failed_after_eof": 0, "caption_errors": []}
    o["scrapes"] = sc
    o["captions"] = caption_files(a.work)
    o["fd_baselines"] = dict(conductor.phases) if conductor else {}

    w, e = o["fd_baselines"].get("warmup"), o["fd_baselines"].get("end")
    fds_ok = bool(w and e and w["quiet"] and e["quiet"] and e["before_eof"]
                  and w["fds"] is not None and e["fds"] is not None and e["fds"] <= w["fds"])
    problems = []
    if out.get("healthz") != 200:
        problems.append(f"/healthz {out.get('healthz')}")
    if out.get("overlay") != 200:
        problems.append(f"/ {out.get('overlay')}")
    if sse["connected"] == 0:
        problems.append("no SSE client connected")
    if sse["connect_failed"]:
        problems.append(f"{sse['connect_failed']} SSE connects failed before EOF")
    if sse["non_200"]:
        problems.append(f"SSE non-200 {sse['non_200']}")
    if sse["ended_by_server_or_error_before_eof"]:
        problems.append(f"{sse['ended_by_server_or_error_before_eof']} SSE streams ended by the server or an "
                        f"error before EOF")
    if sc["metrics_ok"] == 0 or sc["metrics_failed"]:
        problems.append(f"/metrics ok {sc['metrics_ok']} failed {sc['metrics_failed']} {sc['metrics_errors']}")
    if sc["vtt_ok"] == 0 or sc["vtt_bad"] or sc["srt_bad"]:
        problems.append(f"captions vtt ok {sc['vtt_ok']} bad {sc['vtt_bad']}, srt bad {sc['srt_bad']} "
                        f"{sc['caption_errors']}")
    if not o["captions"].get("vtt_header_ok"):
        problems.append("live.vtt missing or without a WEBVTT header")
    o["http_problems"] = problems
    o["verdicts"] = {
        "fds_back_to_baseline": fds_ok,
        "mqtt_every_event": mq["missing_ids"] == 0 and mq["event_ids_distinct"] >= len(utt_ids),
        "http_served": not problems,
    }
    return o


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
    ap.add_argument("--outputs", action="store_true",
                    help="full-outputs mode: HTTP (SSE clients coming and going, /metrics, captions), MQTT "
                         "(own mosquitto) and caption files on; see the module doc")
    ap.add_argument("--interim-ms", type=int, default=1000,
                    help="with --outputs: asr.interim_every_ms, so partial events flow to SSE (default 1000; "
                         "0 = leave it as --config has it, i.e. off by default)")
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
    if a.outputs:
        if a.speed <= 0:
            ap.error("--outputs needs a paced feed (--speed > 0): the fd baselines are timed on it")
        if a.interim_ms != 0 and not 300 <= a.interim_ms <= 10000:
            ap.error("--interim-ms must be 0 or 300..10000 (asr.interim_every_ms)")
        for tool in ("mosquitto", "mosquitto_sub"):
            if not shutil.which(tool):
                die(f"--outputs needs {tool}; install it with `sudo apt-get install mosquitto mosquitto-clients`")
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
    log(f"work dir {a.work}")
    out = None
    if a.outputs:
        out = start_outputs(a)   # broker, subscriber, config (validated); dies on failure
        cmd += ["--config", out["config"]]
    elif a.config:
        cmd += ["--config", a.config]
    with open(os.path.join(a.work, "command.txt"), "w") as f:
        f.write(" ".join(cmd) + "\n")
    log("running: " + " ".join(cmd))
    try:
        return run_soak(a, cmd, out, pcm_path, meta, ev_path, st_path, log_path, csv_path)
    finally:
        if out:
            out["sub"].stop(wait_for_offline_s=0)
            out["broker"].stop()


def start_outputs(a):
    """--outputs: mosquitto on a free loopback port, a subscriber on it, and the daemon's
    config with [http], [mqtt], [captions], output.partials (and asr.interim_every_ms)
    written to <work>/soak-outputs.toml and checked with `sarcasmd validate`."""
    for name in ("live.vtt", "live.srt", "live.vtt.1", "live.srt.1"):
        if os.path.exists(os.path.join(a.work, name)):
            os.remove(os.path.join(a.work, name))
    try:
        broker = Broker(a.work)
    except (RuntimeError, OSError) as e:
        die(f"cannot start mosquitto: {e}")
    log(f"mosquitto on 127.0.0.1:{broker.port} (log {broker.log_path})")
    sub = MqttSub(broker.port, a.work)
    sub.start()
    ok = sub.wait_subscribed()
    if ok is False:
        sub.stop(wait_for_offline_s=0)
        broker.stop()
        die(f"mosquitto_sub did not receive its probe message; see {sub.err_path}")
    http_port = free_port()
    while http_port == broker.port:
        http_port = free_port()
    try:
        text, notes, _cfg = outputs_config(a, http_port, broker.port)
    except (OSError, ValueError) as e:  # tomllib.TOMLDecodeError is a ValueError
        sub.stop(wait_for_offline_s=0)
        broker.stop()
        die(f"cannot build the outputs config from --config {a.config}: {e}")
    for n in notes:
        log(n)
    cfg_path = os.path.join(a.work, "soak-outputs.toml")
    with open(cfg_path, "w") as f:
        f.write(text)
    r = subprocess.run([a.bin, "validate", cfg_path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    msg = r.stdout.decode(errors="replace").strip()
    if r.returncode != 0:
        sub.stop(wait_for_offline_s=0)
        broker.stop()
        die(f"`sarcasmd validate {cfg_path}` failed (exit {r.returncode}): {msg}")
    log(f"config {cfg_path}: {msg.splitlines()[-1] if msg else 'ok'}")
    return {"broker": broker, "sub": sub, "config": cfg_path, "http_port": http_port,
            "mqtt_port": broker.port, "notes": notes}


def run_soak(a, cmd, out, pcm_path, meta, ev_path, st_path, log_path, csv_path):
    clk = os.sysconf("SC_CLK_TCK")
    load0 = [round(x, 2) for x in os.getloadavg()]
    logf = open(log_path, "wb")
    t_proc0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=logf, cwd=a.work)
    feeder = Feeder(proc, pcm_path, a.speed, log_path)
    feeder.start()

    fleet = scraper = conductor = None
    if out:
        # The listener is up before the models load; clients start once it answers.
        t_wait = time.monotonic()
        out["healthz"] = out["overlay"] = None
        out["listener_up_s"] = None
        while time.monotonic() - t_wait < 60 and proc.poll() is None:
            try:
                out["healthz"] = http_get(out["http_port"], "/healthz", timeout=2.0)[0]
                out["listener_up_s"] = round(time.monotonic() - t_proc0, 2)
                break
            except OSError:
                time.sleep(0.1)
        if out["healthz"] is None:
            log(f"the HTTP listener on 127.0.0.1:{out['http_port']} did not answer /healthz")
        else:
            try:
                out["overlay"] = http_get(out["http_port"], "/", timeout=5.0)[0]
            except OSError as e:
                out["overlay"] = f"{e.__class__.__name__}"
            fleet = SseFleet(out["http_port"], feeder)
            scraper = Scraper(out["http_port"], a.interval_s, feeder)
            conductor = Conductor(a, proc, feeder, fleet, scraper, clk)
            fleet.start()
            scraper.start()
            conductor.start()

    rows = []
    fields = ["t", "audio_s", "rss_kb", "hwm_kb", "fds", "threads", "cpu_s"]
    if out:
        # client_sse_open: the soak's own open /events sockets at sample time (they are
        # in the daemon's fd count too); sse_clients / http_connections: the daemon's
        # gauges from the latest /metrics scrape.
        fields += ["client_sse_open", "sse_clients", "http_connections"]
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
                if out:
                    row["client_sse_open"] = fleet.open_count() if fleet else 0
                    g = scraper.gauges if scraper else {}
                    row["sse_clients"] = g.get("sse_clients")
                    row["http_connections"] = g.get("http_connections")
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
    if out:
        for th in (conductor, fleet, scraper):
            if th:
                th.stop()
        out["sub"].stop()
        out["broker"].stop()
    load1 = [round(x, 2) for x in os.getloadavg()]
    if feeder.error:
        log(feeder.error)

    # events
    events = {"lines": 0, "utterance": 0, "other_types": {}, "bad_lines": 0}
    utt_ids = set()
    if os.path.exists(ev_path):
        with open(ev_path, errors="replace") as f:
            for line in f:
                if not line.strip():
                    continue
                events["lines"] += 1
                try:
                    j = json.loads(line)
                    typ = j.get("type")
                except (ValueError, AttributeError):
                    events["bad_lines"] += 1
                    continue
                if typ == "utterance":
                    events["utterance"] += 1
                    if "id" in j:
                        utt_ids.add(j["id"])
                else:
                    events["other_types"][str(typ)] = events["other_types"].get(str(typ), 0) + 1
    stats = None
    try:
        with open(st_path) as f:
            stats = json.load(f)
    except (OSError, ValueError) as e:
        log(f"no usable stats file {st_path}: {e}")

    log_counts = {"path": log_path, "lines": 0, "WARN": 0, "ERROR": 0, "first_warn_error": [],
                  "panics": 0, "first_panic": []}
    mqtt_log = None
    with open(log_path, errors="replace") as f:
        after_panic = 0
        for line in f:
            log_counts["lines"] += 1
            if after_panic:  # the panic message is on the line after "panicked at"
                log_counts["first_panic"].append(line.rstrip()[:300])
                after_panic = 0
            if PANIC_RE.match(line):
                log_counts["panics"] += 1
                if log_counts["panics"] == 1:
                    log_counts["first_panic"].append(line.rstrip()[:300])
                    after_panic = 1
            if MQTT_SUMMARY_RE.search(line):
                mqtt_log = mqtt_log_line(line)
            mm = LOG_LEVEL_RE.match(line)
            if mm:
                log_counts[mm.group(1)] += 1
                if len(log_counts["first_warn_error"]) < 5:
                    log_counts["first_warn_error"].append(line.rstrip()[:300])

    if not rows:
        log("no /proc samples were taken (the daemon exited at once?); see " + log_path)
    outputs = None
    if out:
        outputs = outputs_report(a, out, fleet, scraper, conductor, utt_ids, mqtt_log, t_exit)
    s = summarise(a, rows, feeder, meta, stats, events, log_counts, rc, t_proc0, t_exit, (load0, load1),
                  outputs)
    s["files"] = {"samples_csv": csv_path, "events": ev_path, "stats": st_path, "log": log_path}
    if out:
        s["files"].update(config=out["config"], mosquitto_log=out["broker"].log_path,
                          vtt=os.path.join(a.work, "live.vtt"), srt=os.path.join(a.work, "live.srt"))
    with open(os.path.join(a.work, "summary.json"), "w") as f:
        json.dump(s, f, indent=1)
    print_summary(s)
    print(f"files          {a.work}/{{samples.csv,summary.json,stats.json,events.jsonl,sarcasmd.log"
          + (",soak-outputs.toml,mosquitto.log,live.vtt,live.srt" if out else "") + "}")
    return 0 if s["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
