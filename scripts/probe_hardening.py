#!/usr/bin/env python3
"""Re-run the hardening probes of issue 25 against a release binary, one per class.

Each probe does what the attacker or careless operator did (loopback only, in a temp
dir) and prints what happens now, with a pass/fail per class. It is a record of the
probes, not a test: the tests that guard each class live in tests/ (the table names
them). Needs python3 (standard library only) and ffmpeg; no broker (class 13 fakes one).

    cargo build --release && python3 scripts/probe_hardening.py [--bin target/release/sarcasmd]

Runs in about two minutes; prints a Markdown table; exits 1 if any class fails.
"""

import argparse
import os
import resource
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
            status, body = http_get(d.port, "/captions.vtt", timeout=5)
        except OSError as e:
            status, body = f"error {e}", b""
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
            log = d.stop()
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
    return ok, "; ".join(out) + " (broker refusal by closing: tests/mqtt_sink.rs)"


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


TESTS = {
    1: "tests/http_listener.rs at_the_limit_idle_connections_give_way_serving_ones_do_not_and_idle_ones_time_out, src/sinks/http/slots.rs",
    2: "tests/http_listener.rs a_foreign_host_is_refused_unless_allowed_or_a_token_is_set",
    3: "tests/http_listener.rs caption_files_are_streamed_bounded_and_must_be_regular_files",
    4: "src/sinks/http/mod.rs the_bearer_scheme_is_case_insensitive",
    5: "tests/validate.rs validate_refuses_what_the_start_would_refuse",
    6: "tests/validate.rs paths_that_are_not_regular_files_are_refused_by_kind_at_once",
    7: "src/secret_file.rs only_owner_readable_modes_pass_quietly",
    8: "tests/faults.rs a_full_disk_is_logged_once_the_daemon_keeps_going_and_the_lost_events_exit_1",
    9: "tests/service.rs notify_watchdog_reload_and_sigterm_as_systemd_sees_them",
    10: "tests/daemon.rs sigterm_ends_the_process_in_bounded_time_when_nobody_reads_stdout",
    11: "tests/bad_input.rs a_video_named_on_the_command_line_that_cannot_be_read_is_bad_input",
    12: "tests/mqtt_sink.rs events_the_broker_refuses_by_closing_are_not_published",
    13: "tests/mqtt_sink.rs a_broker_that_drops_every_connection_is_backed_off",
    14: "tests/e2e_speech.rs a_wav_that_ffmpeg_streamed_to_a_pipe_is_read_whole, tests/bad_input.rs unsupported_sample_format",
    15: "tests/bad_input.rs the_os_error_is_printed_once",
    16: "tests/daemon.rs stats_of_a_run_stopped_before_any_audio_have_no_per_audio_second_ratio",
    17: "tests/cut_off_speech.rs an_utterance_flushed_mid_sentence_is_transcribed_once, streaming_final_decode_of_cut_off_speech_is_said_once",
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
