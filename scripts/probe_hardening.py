#!/usr/bin/env python3
"""Re-run the hardening probes of issues 25 and 34 against a release binary, one per class.

Each probe does what the attacker or careless operator did (loopback only, in a temp
dir) and prints what happens now, with a pass/fail per class. It is a record of the
probes, not a test: the tests that guard each class live in tests/ (the table names
them). Classes 1-17 are issue 25's first round, 18-33 issue 34's second (its fourteen
defects, then the two "to decide" items). Needs python3 (standard library only), ffmpeg
and the models (`scripts/setup.sh`); no broker (classes 13 and 27 fake one).

    cargo build --release && python3 scripts/probe_hardening.py [--bin target/release/sarcasmd] [CLASS...]

Runs in about five minutes; prints a Markdown table; exits 1 if any class fails.
"""

import argparse
import os
import re
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import wave
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "meeting.wav"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(bin_, *args, timeout=120, **kw):
    return subprocess.run([str(bin_), *args], capture_output=True, text=True, timeout=timeout, **kw)


def http_get(port, path, headers=None, timeout=3.0):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(65536)
    except urllib.error.HTTPError as e:
        return e.code, b""


def rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Daemon:
    """`sarcasmd run` on a live stdin source that stays silent until stopped."""

    def __init__(self, bin_, tmp, extra_toml="", nofile=None, name="d"):
        self.port = free_port()
        self.cfg = Path(tmp) / f"{name}.toml"
        self.log = Path(tmp) / f"{name}.log"
        self.cfg.write_text(
            f'[source]\nkind = "stdin"\nlive = true\n[output]\nevents = "{tmp}/{name}.jsonl"\n'
            f'[http]\nenabled = true\nbind = "127.0.0.1:{self.port}"\n' + extra_toml
        )

        def limits():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            [str(bin_), "run", "--config", str(self.cfg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=open(self.log, "w"),
            preexec_fn=limits,
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if http_get(self.port, "/healthz", timeout=1)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"daemon did not listen: {self.log.read_text()[-2000:]}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        return self.log.read_text()


def probe_1(bin_, tmp):
    """300 idle connections with the file limit at 256, then real requests."""
    d = Daemon(bin_, tmp, "header_timeout_ms = 2000\n", nofile=256, name="p1")
    socks = []
    try:
        for _ in range(300):
            s = socket.socket()
            s.settimeout(2)
            try:
                s.connect(("127.0.0.1", d.port))
                socks.append(s)
            except OSError:
                s.close()
        t0 = time.time()
        try:
            during = http_get(d.port, "/healthz", timeout=5)[0]
        except OSError as e:
            during = f"closed ({type(e).__name__})"
        took = time.time() - t0
        # The squatters are cut after header_timeout_ms; real requests are served again.
        time.sleep(2.5)
        after, metrics = http_get(d.port, "/metrics", timeout=5)
        refused = [l for l in metrics.decode().splitlines() if l.startswith("sarcasmd_http_refused_total")]
    finally:
        for s in socks:
            s.close()
        log = d.stop()
    logged = log.count("http.max_connections")  # once per burst
    # Idle squatters give their slots to real requests (src/sinks/http/slots.rs).
    ok = took < 1 and during == 200 and after == 200
    return ok, (
        f"300 idle connections at RLIMIT_NOFILE 256 (max_connections 64, header_timeout_ms 2000): "
        f"a request while they squat -> {during} in {took:.2f} s; 2.5 s later /metrics -> {after}; "
        f"limit logged {logged}x; {'; '.join(refused)}"
    )


def probe_2(bin_, tmp):
    d = Daemon(bin_, tmp, name="p2")
    try:
        evil = http_get(d.port, "/metrics", {"Host": "evil.example"})[0]
        local = http_get(d.port, "/metrics", {"Host": "localhost"})[0]
    finally:
        d.stop()
    return evil == 403 and local == 200, f"Host: evil.example -> {evil}; Host: localhost -> {local}"


def probe_3(bin_, tmp):
    d = Daemon(bin_, tmp, '[captions]\nvtt = "/dev/zero"\n', name="p3")
    try:
        before = rss_mb(d.proc.pid)
        try:
            status, _ = http_get(d.port, "/captions.vtt", timeout=5)
        except OSError as e:
            status = f"error {e}"
        after = rss_mb(d.proc.pid)
    finally:
        d.stop()
    cfg = Path(tmp) / "p3b.toml"
    cfg.write_text('[captions]\nvtt = "/tmp/x.vtt"\nrotate_mb = 100000\n')
    v = run(bin_, "validate", str(cfg))
    ok = status != 200 and after - before < 50 and v.returncode != 0
    return ok, (
        f"captions.vtt = /dev/zero: GET /captions.vtt -> {status}, RSS {before:.0f} -> {after:.0f} MB; "
        f"rotate_mb = 100000: validate exit {v.returncode} ({last_line(v.stderr)})"
    )


def probe_4(bin_, tmp):
    tok = "0123456789abcdef0123"
    d = Daemon(bin_, tmp, f'token = "{tok}"\n', name="p4")
    try:
        lower = http_get(d.port, "/metrics", {"Authorization": f"bearer {tok}"})[0]
        none = http_get(d.port, "/metrics")[0]
    finally:
        d.stop()
    return lower == 200 and none == 401, f"'bearer <token>' -> {lower}; no token -> {none}"


def last_line(s):
    lines = [l for l in s.strip().splitlines() if l.strip()]
    return lines[-1][:160] if lines else ""


def probe_5(bin_, tmp):
    out = []
    ok = True
    cases = {
        "missing token_file": '[http]\nenabled = true\ntoken_file = "/nonexistent/token"\n',
        "events path is a directory": f'[output]\nevents = "{tmp}"\n',
        "events in a missing directory": '[output]\nevents = "/nonexistent/dir/e.jsonl"\n',
    }
    short = Path(tmp) / "short-token"
    short.write_text("abc\n")
    short.chmod(0o600)
    cases["token_file too short"] = f'[http]\nenabled = true\ntoken_file = "{short}"\n'
    for name, toml in cases.items():
        cfg = Path(tmp) / "p5.toml"
        cfg.write_text(toml)
        v = run(bin_, "validate", str(cfg))
        ok &= v.returncode != 0
        out.append(f"{name}: exit {v.returncode}")
    return ok, "; ".join(out)


def probe_6(bin_, tmp):
    out = []
    ok = True
    t0 = time.time()
    v = run(bin_, "validate", "/dev/zero", timeout=30)
    out.append(f"validate /dev/zero: exit {v.returncode} in {time.time() - t0:.2f} s ({last_line(v.stderr)})")
    ok &= v.returncode != 0 and time.time() - t0 < 5
    v = run(bin_, "validate", tmp)
    out.append(f"validate DIR: exit {v.returncode} ({last_line(v.stderr)})")
    ok &= v.returncode != 0 and "no such file" not in v.stderr.lower()
    fifo = Path(tmp) / "fifo"
    os.mkfifo(fifo)
    t0 = time.time()
    v = run(bin_, "validate", str(fifo), timeout=30)
    out.append(f"validate FIFO: exit {v.returncode} in {time.time() - t0:.2f} s")
    ok &= v.returncode != 0
    cfg = Path(tmp) / "p6.toml"
    cfg.write_text(f'[fusion]\nheads_dir = "{SAMPLE}"\n')
    v = run(bin_, "validate", str(cfg))
    out.append(f"heads_dir is a file: exit {v.returncode}")
    ok &= v.returncode != 0
    return ok, "; ".join(out)


def probe_7(bin_, tmp):
    tok = Path(tmp) / "token"
    tok.write_text("0123456789abcdef0123\n")
    tok.chmod(0o644)
    cfg = Path(tmp) / "p7.toml"
    cfg.write_text(f'[http]\nenabled = true\ntoken_file = "{tok}"\n')
    v = run(bin_, "validate", str(cfg))
    warned = "others" in (v.stderr + v.stdout).lower() or "readable" in (v.stderr + v.stdout).lower()
    return warned, f"token file mode 644: validate exit {v.returncode}, warning: {warned}"


def probe_8(bin_, tmp):
    v = run(bin_, "replay", str(SAMPLE), "--events", "/dev/full", timeout=300)
    return v.returncode == 1, f"replay --events /dev/full: exit {v.returncode} ({last_line(v.stderr)})"


def probe_9(bin_, tmp):
    out, ok = [], True
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    cases = {
        "a missing heads_dir": '[fusion]\nheads_dir = "/nonexistent/heads"\n',
        # Passes validation and the preflight; only binding finds the port taken.
        "an HTTP port in use": None,
    }
    for name, extra in cases.items():
        d = Daemon(bin_, tmp, name="p9")
        try:
            text = d.cfg.read_text()
            if extra is None:
                text = text.replace(f"127.0.0.1:{d.port}", f"127.0.0.1:{busy.getsockname()[1]}")
            else:
                text += extra
            d.cfg.write_text(text)
            d.proc.send_signal(signal.SIGHUP)
            time.sleep(6)
            alive = d.proc.poll() is None
            port = d.port
            status = http_get(port, "/healthz")[0] if alive else None
            _, metrics = http_get(port, "/metrics") if alive else (None, b"")
            counts = [l.split("{")[1] for l in metrics.decode().splitlines() if l.startswith("sarcasmd_reloads_total") and not l.endswith(" 0.0")]
        finally:
            d.stop()
        ok &= alive and status == 200
        out.append(f"reload to {name}: still running {alive}, /healthz on the old port {status}, reloads {', '.join(counts)}")
    busy.close()
    return ok, "; ".join(out)


def probe_10(bin_, tmp):
    # stdout is a pipe nobody reads: events fill it, then SIGTERM.
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * 4096)  # fill the pipe: the daemon's first event write blocks
    except BlockingIOError:
        pass
    os.set_blocking(w, True)  # the flag would be shared with the child's stdout
    p = subprocess.Popen(
        [str(bin_), "replay", "-", "--live"], stdin=subprocess.PIPE, stdout=w, stderr=subprocess.DEVNULL
    )
    os.close(w)
    with wave.open(str(SAMPLE)) as wv:
        pcm = wv.readframes(wv.getnframes())

    def feed():
        try:
            for _ in range(20):
                p.stdin.write(pcm)
                p.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    threading.Thread(target=feed, daemon=True).start()
    time.sleep(25)
    t0 = time.time()
    p.send_signal(signal.SIGTERM)
    try:
        code = p.wait(timeout=30)
        took = time.time() - t0
    except subprocess.TimeoutExpired:
        p.kill()
        code, took = "killed", 30.0
    os.close(r)
    # A reload that blocks opening its config (the file became a FIFO nobody writes).
    d = Daemon(bin_, tmp, name="p10")
    d.cfg.unlink()
    os.mkfifo(d.cfg)
    d.proc.send_signal(signal.SIGHUP)
    time.sleep(1)
    t1 = time.time()
    d.proc.send_signal(signal.SIGTERM)
    try:
        code2 = d.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        d.proc.kill()
        code2 = "killed"
    took2 = time.time() - t1
    return took < 6 and took2 < 6, (
        f"SIGTERM with stdout a full pipe nobody reads: exit {code} after {took:.2f} s; "
        f"SIGTERM while a reload reads a config that became a FIFO: exit {code2} after {took2:.2f} s"
    )


def probe_11(bin_, tmp):
    out, ok = [], True
    for name, path in [("missing", "/nonexistent.mp4"), ("directory", tmp), ("not a video", str(REPO / "Cargo.toml"))]:
        v = run(bin_, "replay", str(SAMPLE), "--video", path, "--events", os.devnull, timeout=300)
        out.append(f"--video {name}: exit {v.returncode}")
        ok &= v.returncode == 2
    return ok, "; ".join(out)


def probe_12(bin_, tmp):
    out, ok = [], True
    for name, prefix in [("'$SYS/x'", "$SYS/x"), ("70,000-byte prefix", "a" * 70000)]:
        cfg = Path(tmp) / "p12.toml"
        cfg.write_text(f'[mqtt]\nenabled = true\nhost = "127.0.0.1"\ntopic_prefix = "{prefix}"\n')
        v = run(bin_, "validate", str(cfg))
        out.append(f"topic_prefix {name}: validate exit {v.returncode}")
        ok &= v.returncode != 0
    return ok, "; ".join(out) + " (broker refusal by closing: tests/peers/mqtt_sink.rs)"


def probe_13(bin_, tmp):
    """A 'broker' that answers CONNACK and closes at once, for 8 s."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    port = srv.getsockname()[1]
    accepted = []
    stop = threading.Event()

    def serve():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            accepted.append(time.time())
            try:
                c.settimeout(1)
                c.recv(4096)
                c.sendall(bytes([0x20, 0x02, 0x00, 0x00]))
                time.sleep(0.05)
            except OSError:
                pass
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    d = Daemon(bin_, tmp, f'[mqtt]\nenabled = true\nhost = "127.0.0.1"\nport = {port}\n', name="p13")
    time.sleep(8)
    log = d.stop()
    stop.set()
    srv.close()
    warns = sum(1 for l in log.splitlines() if "WARN" in l and "mqtt" in l.lower())
    ok = len(accepted) <= 8 and warns <= 2
    return ok, f"connections in 8 s: {len(accepted)}; MQTT WARN lines: {warns}"


def probe_14(bin_, tmp):
    # 64-bit float in both headers a user meets: ffmpeg's WAVE_FORMAT_EXTENSIBLE and
    # sox's plain IEEE-float fmt chunk (hound refuses the latter with its own words).
    f64_ff, f64_sox = Path(tmp) / "f64-ffmpeg.wav", Path(tmp) / "f64-sox.wav"
    subprocess.run(
        ["ffmpeg", "-v", "error", "-y", "-i", str(SAMPLE), "-t", "2", "-c:a", "pcm_f64le", str(f64_ff)], check=True
    )
    subprocess.run(["sox", str(SAMPLE), "-e", "floating-point", "-b", "64", str(f64_sox), "trim", "0", "2"], check=True)
    codes, says = [], True
    for f in (f64_ff, f64_sox):
        v = run(bin_, "replay", str(f), "--events", os.devnull)
        codes.append(v.returncode)
        says = says and "unsupported" in v.stderr and "convert" in v.stderr.lower()
    ff = subprocess.Popen(
        ["ffmpeg", "-v", "error", "-i", str(SAMPLE), "-f", "wav", "-"], stdout=subprocess.PIPE
    )
    streamed = Path(tmp) / "streamed.wav"
    streamed.write_bytes(ff.stdout.read())
    ff.wait()
    size_field = struct.unpack("<I", streamed.read_bytes()[4:8])[0]
    v2 = run(bin_, "replay", str(streamed), timeout=300)
    n = len([l for l in v2.stdout.splitlines() if '"utterance"' in l])
    ok = codes == [2, 2] and says and v2.returncode == 0 and n == 5
    return ok, (
        f"64-bit float WAV (ffmpeg, sox headers): exit {codes}, says how to convert: {says}; "
        f"WAV streamed by ffmpeg (RIFF size 0x{size_field:08X}): exit {v2.returncode}, {n} events"
    )


def probe_15(bin_, tmp):
    v = run(bin_, "run", "--config", "/nonexistent/sarcasmd.toml")
    n = v.stderr.count("os error 2")
    return n <= 1, f"run --config missing: 'os error 2' printed {n}x ({last_line(v.stderr)})"


def probe_16(bin_, tmp):
    stats = Path(tmp) / "stats.json"
    p = subprocess.Popen(
        [str(bin_), "replay", str(SAMPLE), "--stats", str(stats), "--events", os.devnull],
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=30)
    text = stats.read_text() if stats.exists() else ""
    import json

    huge = False
    if text:
        def walk(x):
            nonlocal huge
            if isinstance(x, dict):
                for k, v in x.items():
                    if "per_audio" in k and isinstance(v, (int, float)) and v > 1000:
                        huge = True
                    walk(v)

        walk(json.loads(text))
    return not huge, f"SIGTERM during model load: exit {p.returncode}, stats written {bool(text)}, absurd ratio {huge}"


def probe_17(bin_, tmp):
    with wave.open(str(SAMPLE)) as wv:
        rate = wv.getframerate()
        frames = wv.readframes(int(rate * 3.2))
    p = subprocess.Popen(
        [str(bin_), "replay", "-", "--rate", str(rate)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    p.stdin.write(frames)
    p.stdin.flush()
    time.sleep(12)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=60)
    texts = [l for l in out.decode().splitlines() if '"utterance"' in l]
    import json

    words = " ".join(json.loads(l).get("transcript") or "" for l in texts)
    half = words.split()
    doubled = len(half) >= 10 and half[: len(half) // 2] == half[len(half) // 2 :]
    return not doubled, f"SIGTERM mid-utterance (3.2 s of the sample on stdin): {words!r}"


# ---------------------------------------------------------------- issue 34 ------------


def pcm_of_sample():
    with wave.open(str(SAMPLE)) as wv:
        return wv.getframerate(), wv.readframes(wv.getnframes())


def child_peak_mb(proc_result_rusage):
    return proc_result_rusage.ru_maxrss / 1024


def run_measured(bin_, *args, timeout=120):
    """Run the binary; (exit code, stderr, wall s, peak RSS MB of the child)."""
    t0 = time.time()
    p = subprocess.Popen([str(bin_), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = t0 + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            err = p.stderr.read().decode(errors="replace")
            code = os.waitstatus_to_exitcode(status)
            return code, err, time.time() - t0, ru.ru_maxrss / 1024
        if time.time() > deadline:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            return "killed", p.stderr.read().decode(errors="replace"), time.time() - t0, ru.ru_maxrss / 1024
        time.sleep(0.05)


def probe_18(bin_, tmp):
    """The events directory removed mid-run: recreated (A), and never again (B)."""
    rate, pcm = pcm_of_sample()
    out = []
    ok = True
    for recreate in (True, False):
        e = Path(tmp) / ("e" if recreate else "g")
        e.mkdir()
        ev = e / "ev.jsonl"
        cfg = Path(tmp) / "p18.toml"
        cfg.write_text(f'[source]\nkind = "stdin"\nsample_rate_hz = {rate}\n[output]\nevents = "{ev}"\n')
        log = Path(tmp) / "p18.log"
        p = subprocess.Popen([str(bin_), "run", "--config", str(cfg)], stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=open(log, "w"))
        p.stdin.write(pcm)
        p.stdin.flush()
        deadline = time.time() + 120
        while time.time() < deadline and not (ev.exists() and ev.read_text().count("\n") >= 1):
            time.sleep(0.2)
        before = ev.read_text().count('"utterance"') if ev.exists() else 0
        shutil.rmtree(e)
        p.stdin.write(pcm)
        p.stdin.flush()
        deadline = time.time() + 120
        while time.time() < deadline and "was removed" not in log.read_text():
            time.sleep(0.2)
        if recreate:
            e.mkdir()
            p.stdin.write(pcm)
        p.stdin.close()
        code = p.wait(timeout=300)
        text = log.read_text()
        m = re.search(r"(\d+) utterances, (\d+) events", text)
        total = int(m.group(2)) if m else None
        after = ev.read_text().count('"utterance"') if ev.exists() else 0
        logged = "was removed" in text
        if recreate:
            good = code == 0 and total is not None and before + after == total and logged
            out.append(f"recreated: exit {code}, {before} events before the removal + {after} in the new file "
                       f"of {total}, removal logged {logged}")
        else:
            good = code == 1 and "could not be written" in text and logged
            out.append(f"never recreated: exit {code}, loss reported {'could not be written' in text}")
        ok &= good
    return ok, "; ".join(out)


def probe_19(bin_, tmp):
    d = Daemon(bin_, tmp, name="p19")
    socks = []
    try:
        for _ in range(64):
            s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
            s.sendall(f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{d.port}\r\n\r\n".encode())
            socks.append(s)
        time.sleep(1.0)
        res = {}
        for path in ("/healthz", "/metrics", "/"):
            try:
                res[path] = http_get(d.port, path, timeout=5)[0]
            except OSError as e:
                res[path] = type(e).__name__
        _, metrics = http_get(d.port, "/metrics")
        refused = [l for l in metrics.decode().splitlines() if 'reason="sse_limit"' in l]
    finally:
        for s in socks:
            s.close()
        d.stop()
    ok = all(v == 200 for v in res.values())
    return ok, f"64 held GET /events: {res}; {'; '.join(refused)}"


def probe_20(bin_, tmp):
    wav = Path(tmp) / "in.wav"
    shutil.copy(SAMPLE, wav)
    before = wav.read_bytes()
    cfg = Path(tmp) / "p20.toml"
    out, ok = [], True
    for name, events in (("the input WAV", wav), ("the config file", cfg)):
        cfg.write_text(f'[source]\nkind = "wav"\npath = "{wav}"\n[output]\nevents = "{events}"\n')
        v = run(bin_, "validate", str(cfg))
        r = run(bin_, "run", "--config", str(cfg), timeout=300)
        ok &= v.returncode == 2 and r.returncode == 2
        out.append(f"events = {name}: validate exit {v.returncode}, run exit {r.returncode}")
    intact = wav.read_bytes() == before
    ok &= intact
    return ok, "; ".join(out) + f"; WAV intact {intact}"


def heads_copy(tmp):
    h = Path(tmp) / "heads"
    h.mkdir()
    for f in (REPO / "models" / "heads").iterdir():
        if f.suffix == ".onnx" or f.name.endswith("_head.json"):
            shutil.copy(f, h / f.name)
    return h


def set_meta(h, name, **kv):
    import json
    p = h / f"{name}.json"
    m = json.loads(p.read_text())
    m.update(kv)
    p.write_text(json.dumps(m, indent=2))


def validate_heads(bin_, tmp, h):
    cfg = Path(tmp) / "heads.toml"
    cfg.write_text(f'[fusion]\nheads_dir = "{h}"\n')
    return run(bin_, "validate", str(cfg))


def probe_21(bin_, tmp):
    h = heads_copy(tmp)
    set_meta(h, "text_head", input_dim=7)
    v = validate_heads(bin_, tmp, h)
    return v.returncode == 3, f"text_head.json input_dim 7: validate exit {v.returncode} ({last_line(v.stderr)})"


def probe_22(bin_, tmp):
    h = heads_copy(tmp)
    set_meta(h, "audio_head", input_dim=18446744073709551615)
    v = validate_heads(bin_, tmp, h)
    cfg = Path(tmp) / "heads.toml"
    r = run(bin_, "replay", str(SAMPLE), "--config", str(cfg), "--events", os.devnull)
    return v.returncode == 3 and r.returncode == 3, f"input_dim 2^64-1: validate exit {v.returncode}, replay exit {r.returncode}"


def probe_23(bin_, tmp):
    import json
    ev = Path(tmp) / "ev.jsonl"
    out_html = Path(tmp) / "m.html"
    out, ok = [], True
    for name, line in (("id 10000000", {"id": 10000000, "end_s": 2.0}), ("end_s 1e12", {"id": 0, "end_s": 1e12}),
                       ("end_s 1e308", {"id": 0, "end_s": 1e308})):
        u = {"type": "utterance", "start_s": 1.0, "transcript": "x", "p_sarcastic": 0.2, "sarcastic": False,
             "threshold": 0.5, "views": {"text": 0.2, "audio": 0.4, "video": None}, **line}
        ev.write_text(json.dumps(u) + "\n")
        code, err, took, mb = run_measured(bin_, "report", str(ev), "-o", str(out_html), timeout=60)
        ok &= took < 30 and mb < 500
        out.append(f"{name}: exit {code} in {took:.1f} s, peak RSS {mb:.0f} MB")
    return ok, "; ".join(out)


def probe_24(bin_, tmp):
    ev = Path(tmp) / "ev.jsonl"
    ev.write_text('{"type":"gap","source":"audio","start_s":1,"end_s":2,"reason":"x"}\n')
    o = str(Path(tmp) / "out")
    out, ok = [], True
    for args in (["report", "/dev/zero", "-o", o], ["report", str(ev), "--stats", "/dev/zero", "-o", o],
                 ["plot", "eval", "/dev/zero", "-o", o], ["plot", "bench", "/dev/zero", "-o", o]):
        code, err, took, mb = run_measured(bin_, *args, timeout=60)
        ok &= code != 0 and took < 5 and "is a device" in err
        what = " ".join(args[:-2]).replace(str(ev), "ev.jsonl")
        out.append(f"{what}: exit {code} in {took:.2f} s")
    return ok, "; ".join(out)


def corrupt_models(tmp):
    """A models dir whose tiny.en-q8_0 has bytes 48-4144 overwritten with 0xff."""
    src = Path(os.environ.get("SARCASMD_MODEL_DIR") or Path.home() / ".cache" / "sarcasmd" / "models")
    dst = Path(tmp) / "models"
    (dst / "whisper").mkdir(parents=True)
    for sub in ("vad", "text", "vision"):
        os.symlink(src / sub, dst / sub)
    b = bytearray((src / "whisper" / "ggml-tiny.en-q8_0.bin").read_bytes())
    b[48:4144] = b"\xff" * (4144 - 48)
    (dst / "whisper" / "ggml-tiny.en-q8_0.bin").write_bytes(bytes(b))
    return dst


def probe_25(bin_, tmp):
    m = corrupt_models(tmp)
    cfg = Path(tmp) / "p25.toml"
    cfg.write_text(f'[models]\ndir = "{m}"\nskip_checksums = true\n')
    v = run(bin_, "validate", str(cfg))
    r = run(bin_, "replay", str(SAMPLE), "--config", str(cfg), "--events", os.devnull)
    return v.returncode == 3 and r.returncode == 3, (
        f"skip_checksums + corrupt Whisper of the right size: validate exit {v.returncode}, replay exit "
        f"{r.returncode} ({last_line(r.stderr)})")


def probe_26(bin_, tmp):
    cfg = Path(tmp) / "p26.toml"
    cfg.write_text(f'[mqtt]\nenabled = true\nhost = "127.0.0.1"\nusername = "{"u" * 70000}"\n')
    v = run(bin_, "validate", str(cfg))
    return v.returncode == 2, f"70,000-byte mqtt.username: validate exit {v.returncode} ({last_line(v.stderr)[:100]})"


def probe_27(bin_, tmp):
    """A broker that sends CONNACK and then stops reading (keep_alive_s = 1)."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    port = srv.getsockname()[1]
    held, stop = [], threading.Event()

    def serve():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                c.settimeout(2)
                c.recv(4096)
                c.sendall(bytes([0x20, 0x02, 0x00, 0x00]))
            except OSError:
                pass
            held.append(c)  # never read again

    threading.Thread(target=serve, daemon=True).start()
    rate, pcm = pcm_of_sample()
    d = Daemon(bin_, tmp, f'[mqtt]\nenabled = true\nhost = "127.0.0.1"\nport = {port}\nkeep_alive_s = 1\n'
               f'reconnect_min_ms = 50\nreconnect_max_ms = 200\n', name="p27")
    try:
        # The live source reads 16 kHz: the sample at its own rate still makes speech.
        d.proc.stdin.write(pcm)
        d.proc.stdin.flush()
        time.sleep(25)
        _, metrics = http_get(d.port, "/metrics")
        lines = metrics.decode().splitlines()
        refused = [l for l in lines if 'reason="mqtt_refused"' in l]
        queued = [l for l in lines if l.startswith("sarcasmd_mqtt_queued")]
    finally:
        d.stop()
        stop.set()
        srv.close()
        for c in held:
            c.close()
    n = float(refused[0].split()[-1]) if refused else -1
    return n == 0, f"connections {len(held)}; {'; '.join(refused + queued)}"


def probe_28(bin_, tmp):
    import json
    fifo = Path(tmp) / "fifo.wav"
    os.mkfifo(fifo)
    man = Path(tmp) / "m.jsonl"
    man.write_text("\n".join(json.dumps(x) for x in (
        {"id": "fifo", "audio": str(fifo), "label": 1}, {"id": "zero", "audio": "/dev/zero", "label": 0},
        {"id": "t", "text": "Oh great.", "label": 1})))
    code, err, took, _ = run_measured(bin_, "eval", str(man), timeout=120)
    ok = code == 0 and "pipe (FIFO)" in err and "is a device" in err and "empty (0 bytes)" not in err
    return ok, f"eval with FIFO and /dev/zero items: exit {code} in {took:.1f} s, named by kind {ok}"


def probe_29(bin_, tmp):
    ev = Path(tmp) / "ev.jsonl"
    text = '{"type":"gap","source":"audio","start_s":1,"end_s":2,"reason":"x"}\n'
    ev.write_text(text)
    r = run(bin_, "report", str(ev), "-o", str(ev))
    intact = ev.read_text() == text
    return r.returncode != 0 and intact, f"report ev.jsonl -o ev.jsonl: exit {r.returncode}, events intact {intact}"


def pb_fields(b):
    """Protobuf message bytes -> [(field, wire type, raw value)] (value: int or bytes)."""
    out, i = [], 0

    def varint():
        nonlocal i
        v, shift = 0, 0
        while True:
            c = b[i]
            i += 1
            v |= (c & 0x7F) << shift
            shift += 7
            if c < 0x80:
                return v

    while i < len(b):
        key = varint()
        f, wt = key >> 3, key & 7
        if wt == 0:
            out.append((f, wt, varint()))
        elif wt == 2:
            n = varint()
            out.append((f, wt, b[i:i + n]))
            i += n
        elif wt == 5:
            out.append((f, wt, b[i:i + 4]))
            i += 4
        elif wt == 1:
            out.append((f, wt, b[i:i + 8]))
            i += 8
        else:
            raise ValueError(f"wire type {wt}")
    return out


def pb_encode(fields):
    def varint(v):
        o = bytearray()
        while True:
            c = v & 0x7F
            v >>= 7
            o.append(c | (0x80 if v else 0))
            if not v:
                return bytes(o)

    out = bytearray()
    for f, wt, v in fields:
        out += varint(f << 3 | wt)
        if wt == 0:
            out += varint(v)
        elif wt == 2:
            out += varint(len(v)) + v
        else:
            out += v
    return bytes(out)


def absurd_head(h):
    """fusion_head.onnx with its first initializer declared as 6e9 elements, and the JSON's
    checksum updated: ModelProto.graph (7) -> GraphProto.initializer (5) -> TensorProto.dims (1)."""
    import hashlib
    p = h / "fusion_head.onnx"
    model = pb_fields(p.read_bytes())
    for k, (f, wt, v) in enumerate(model):
        if f == 7:
            graph = pb_fields(v)
            for j, (gf, gwt, gv) in enumerate(graph):
                if gf == 5:
                    t = [x for x in pb_fields(gv) if x[0] != 1]
                    graph[j] = (gf, gwt, pb_encode([(1, 0, 6_000_000_000)] + t))
                    break
            model[k] = (f, wt, pb_encode(graph))
    data = pb_encode(model)
    p.write_bytes(data)
    set_meta(h, "fusion_head", onnx_sha256=hashlib.sha256(data).hexdigest())


def probe_30(bin_, tmp):
    h = heads_copy(tmp)
    absurd_head(h)
    v = validate_heads(bin_, tmp, h)
    man = Path(tmp) / "m.jsonl"
    man.write_text('{"id":"t","text":"Oh great.","label":1}\n')
    code, err, took, mb = run_measured(bin_, "eval", str(man), "--heads", str(h), timeout=300)
    ok = v.returncode == 3 and "not the one pinned" in v.stderr and code == 3 and took < 60 and "elements" in err
    return ok, (f"a 6e9-element tensor, checksum updated beside it: validate exit {v.returncode} (not pinned: "
                f"{'not the one pinned' in v.stderr}); eval --heads exit {code} in {took:.1f} s, peak {mb:.0f} MB")


def probe_31(bin_, tmp):
    import json
    st = Path(tmp) / "s.json"
    p = subprocess.run([str(bin_), "replay", "-", "--stats", str(st)], input=b"\x01\x02\x03",
                       capture_output=True, timeout=120)
    s = json.loads(st.read_text()) if st.exists() else {}
    return p.returncode == 0 and s.get("rtf_cpu") is None, f"3 bytes of PCM: exit {p.returncode}, rtf_cpu {s.get('rtf_cpu')}"


def probe_32(bin_, tmp):
    d = Daemon(bin_, tmp, name="p32")
    res = {}
    try:
        for name, head in (("no Host", ""), ("two Host", "Host: 127.0.0.1\r\nHost: evil.example\r\n")):
            s = socket.create_connection(("127.0.0.1", d.port), timeout=5)
            s.sendall(f"GET /metrics HTTP/1.1\r\n{head}Connection: close\r\n\r\n".encode())
            data = b""
            while True:
                b = s.recv(4096)
                if not b:
                    break
                data += b
            s.close()
            res[name] = data.split(b" ")[1].decode() if data else "closed"
    finally:
        d.stop()
    return all(v == "400" for v in res.values()), f"GET /metrics: {res}"


def probe_33(bin_, tmp):
    m = corrupt_models(tmp)
    cfg = Path(tmp) / "p33.toml"
    cfg.write_text(f'[models]\ndir = "{m}"\n')
    v = run(bin_, "validate", str(cfg))
    return v.returncode == 3 and "SHA-256" in v.stderr, f"corrupt model, checksums on: validate exit {v.returncode}"


TESTS = {
    1: "tests/pure/http_listener.rs at_the_limit_idle_connections_give_way_serving_ones_do_not_and_idle_ones_time_out, src/sinks/http/slots.rs",
    2: "tests/pure/http_listener.rs a_foreign_host_is_refused_unless_allowed_or_a_token_is_set",
    3: "tests/pure/http_listener.rs caption_files_are_streamed_bounded_and_must_be_regular_files",
    4: "src/sinks/http/mod.rs the_bearer_scheme_is_case_insensitive",
    5: "tests/models/validate.rs validate_refuses_what_the_start_would_refuse",
    6: "tests/models/validate.rs paths_that_are_not_regular_files_are_refused_by_kind_at_once",
    7: "src/common/secret_file.rs only_owner_readable_modes_pass_quietly",
    8: "tests/models/faults.rs a_full_disk_is_logged_once_the_daemon_keeps_going_and_the_lost_events_exit_1",
    9: "tests/models/service.rs notify_watchdog_reload_and_sigterm_as_systemd_sees_them",
    10: "tests/models/daemon.rs sigterm_ends_the_process_in_bounded_time_when_nobody_reads_stdout",
    11: "tests/models/bad_input.rs a_video_named_on_the_command_line_that_cannot_be_read_is_bad_input",
    12: "tests/peers/mqtt_sink.rs events_the_broker_refuses_by_closing_are_not_published",
    13: "tests/peers/mqtt_sink.rs a_broker_that_drops_every_connection_is_backed_off",
    14: "tests/models/e2e_speech.rs a_wav_that_ffmpeg_streamed_to_a_pipe_is_read_whole, tests/models/bad_input.rs unsupported_sample_format",
    15: "tests/models/bad_input.rs the_os_error_is_printed_once",
    16: "tests/models/daemon.rs stats_of_a_run_stopped_before_any_audio_have_no_per_audio_second_ratio",
    17: "tests/models/cut_off_speech.rs an_utterance_flushed_mid_sentence_is_transcribed_once, streaming_final_decode_of_cut_off_speech_is_said_once",
    18: "tests/models/faults.rs a_removed_events_directory_is_reopened_by_path_and_no_event_is_lost, a_removed_events_directory_that_never_comes_back_is_an_error_that_counts_the_loss",
    19: "tests/pure/http_listener.rs held_sse_clients_never_lock_out_health_checks_and_scrapes",
    20: "tests/models/validate.rs an_output_may_not_be_an_input_or_the_config",
    21: "tests/models/head_checks.rs a_head_whose_metadata_disagrees_with_its_graph_is_refused_by_validate",
    22: "tests/models/head_checks.rs an_absurd_input_dim_is_refused_not_panicked_on",
    23: "tests/pure/report_bounds.rs one_hostile_event_line_costs_bounded_memory_and_time",
    24: "tests/pure/report_bounds.rs devices_and_fifos_are_refused_by_kind_at_once",
    25: "tests/models/validate.rs a_corrupt_whisper_file_of_the_right_size_is_refused_without_checksums",
    26: "src/sinks/mqtt/tests.rs credentials_longer_than_an_mqtt_string_are_refused",
    27: "tests/peers/mqtt_sink.rs a_broker_that_stops_reading_refuses_nothing",
    28: "tests/models/eval.rs an_item_whose_audio_is_not_a_regular_file_is_skipped_by_kind_at_once",
    29: "tests/pure/report_bounds.rs no_command_writes_over_what_it_reads",
    30: "tests/models/head_checks.rs a_swapped_head_is_not_served_and_an_absurd_graph_is_refused_before_tract",
    31: "tests/models/daemon.rs stats_of_a_few_bytes_of_audio_have_no_per_audio_second_ratio",
    32: "tests/pure/http_listener.rs a_request_needs_exactly_one_host_header",
    33: "tests/models/validate.rs a_corrupt_whisper_file_of_the_right_size_is_refused_without_checksums",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "sarcasmd"))
    ap.add_argument("classes", nargs="*", type=int)
    a = ap.parse_args()
    bin_ = Path(a.bin)
    probes = {int(n.split("_")[1]): f for n, f in globals().items() if n.startswith("probe_")}
    print("| class | result now | pass | guarded by |\n|---|---|---|---|")
    failed = 0
    for n in a.classes or sorted(probes):
        with tempfile.TemporaryDirectory() as tmp:
            try:
                ok, what = probes[n](bin_, tmp)
            except Exception as e:  # a probe that cannot run is a failure, said as such
                ok, what = False, f"probe error: {e!r}"
        failed += not ok
        print(f"| {n} | {what.replace('|', '/')} | {'yes' if ok else 'NO'} | {TESTS[n]} |", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
