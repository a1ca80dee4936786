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
  instead of dropping).

  scripts/soak/run --duration-s 3600 --speed 4          # the full hour, ~15 min
  scripts/soak/run --duration-s 180 --speed 4 --warmup-s 30 --interval-s 2   # smoke

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
    stops it at the end; a paho-mqtt subscriber on '#' (QoS 1) counts every message per topic
    (the daemon publishes on sarcasmd/soak/{event,status,stats}); it is subscribed (a
    probe message came back) before the daemon starts.
  * SSE clients (httpx + httpx-sse): 1-4 at a time on /events (the target is redrawn
    every 5-20 s), each staying a random 5-60 s of wall time; half leave normally, a
    quarter with a TCP reset (SO_LINGER 0), a quarter are slow readers (4 KiB receive
    buffer, one event taken every 2-6 s; half of them reset too). Choices from a fixed seed. They count events
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
  not judged: the slow readers are meant to fall behind. Needs --speed > 0 and
  `mosquitto` (Debian: mosquitto).

  scripts/soak/run --outputs --duration-s 3600 --speed 4    # the full hour, ~15 min
  scripts/soak/run --outputs --duration-s 180 --speed 4 --warmup-s 30 --interval-s 2

scripts/soak/run installs the package and its pinned dependencies (httpx, httpx-sse,
paho-mqtt, tomli-w) into ~/.cache/sarcasmd/venv-soak with scripts/soak/setup.sh first.
"""
import argparse
import csv
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

from . import common
from .common import BYTES_PER_S, RATE, REPO, cache_root, die, log
from .daemon import proc_sample, read_events, scan_log
from .feed import Feeder, build_input, find_clips
from .outputs import Conductor, start_outputs
from .scrape import HttpError, Scraper, http_get
from .sse import SseFleet
from .verdict import mb, outputs_report, print_summary, summarise


def main():
    common.PREFIX = "soak"
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
        if not shutil.which("mosquitto"):
            die("--outputs needs mosquitto; install it with `sudo apt-get install mosquitto`")
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
            except HttpError:
                time.sleep(0.1)
        if out["healthz"] is None:
            log(f"the HTTP listener on 127.0.0.1:{out['http_port']} did not answer /healthz")
        else:
            try:
                out["overlay"] = http_get(out["http_port"], "/", timeout=5.0)[0]
            except HttpError as e:
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

    events, utt_ids = read_events(ev_path)
    stats = None
    try:
        with open(st_path) as f:
            stats = json.load(f)
    except (OSError, ValueError) as e:
        log(f"no usable stats file {st_path}: {e}")

    log_counts, mqtt_log = scan_log(log_path)
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
