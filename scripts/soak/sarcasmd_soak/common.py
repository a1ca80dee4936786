"""Shared constants and small helpers: where the repository and the cache are, the
audio format fed to the daemon, and the soak's log lines."""
import os
import subprocess
import sys
import time

RATE = 16000
BYTES_PER_S = RATE * 2
CHUNK_MS = 20
SEED = 20261122
READY_MARK = "models loaded in"
PREFIX = "soak"  # the CLI in use sets it ("soak", "soak-faults")


def _repo():
    """The sarcasmd checkout: $SARCASMD_REPO (set by scripts/soak/run), else the git
    work tree around the current directory, else the current directory."""
    env = os.environ.get("SARCASMD_REPO")
    if env:
        return os.path.abspath(env)
    try:
        r = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    except OSError:
        pass
    return os.getcwd()


REPO = _repo()


def cache_root():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sarcasmd", "soak")


def die(msg, code=2):
    print(f"{PREFIX}: {msg}", file=sys.stderr)
    sys.exit(code)


def log(msg):
    print(f"[{PREFIX} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
