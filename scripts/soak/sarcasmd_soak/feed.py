"""The speech fed to the daemon: every *.wav under --clips converted once with ffmpeg,
joined with low-level noise pauses into one cached 16 kHz mono s16le stream, and the
writers that pace it into the daemon's stdin at --speed x real time."""
import array
import glob
import hashlib
import json
import os
import random
import subprocess
import sys
import threading
import time

from .common import BYTES_PER_S, CHUNK_MS, RATE, READY_MARK, REPO, SEED, cache_root, die, log

PAUSE_S = (1.0, 2.5)
NOISE_SIGMA = 25.0  # LSB; gaussian, clipped to +-50 (about 2 sigma) -> "+-50 LSB" noise
NOISE_CLIP = 50
INPUT_VERSION = 1  # bump when the way the input is built changes (invalidates the cache)

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



def feed_keep_open(proc, pcm_path, speed, state, log_path):
    """Writes the PCM to stdin at `speed` x real time once the models are loaded; keeps
    stdin open afterwards."""
    while proc.poll() is None:
        with open(log_path, errors="replace") as f:
            if READY_MARK in f.read():
                break
        time.sleep(0.1)
    chunk = BYTES_PER_S * CHUNK_MS // 1000
    with open(pcm_path, "rb") as f:
        state["t_start"] = time.monotonic()
        while True:
            b = f.read(chunk)
            if not b:
                break
            due = state["t_start"] + state["fed"] / BYTES_PER_S / speed
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
