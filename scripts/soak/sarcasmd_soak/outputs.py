"""The --outputs mode's set-up and timing: the broker, the subscriber and the validated
config before the daemon starts, and the conductor that takes the two fd baselines with
no client connected."""
import os
import subprocess
import threading
import time

from .common import die, log
from .config import outputs_config
from .daemon import free_port, proc_sample
from .mqtt import Broker, MqttSub
from .scrape import metric

QUIET_TIMEOUT_S = 15.0          # wait this long for the daemon to count 0 SSE clients
END_QUIET_WALL_S = 20.0         # the end fd baseline is taken this long (wall) before EOF


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
    try:
        sub.start()
    except OSError as e:
        broker.stop()
        die(f"the MQTT subscriber cannot connect to 127.0.0.1:{broker.port}: {e}")
    ok = sub.wait_subscribed()
    if not ok:
        sub.stop(wait_for_offline_s=0)
        broker.stop()
        die(f"the MQTT subscriber did not receive its probe message; see {sub.err_path}")
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


