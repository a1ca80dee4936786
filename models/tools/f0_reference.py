#!/usr/bin/env python3
"""Compare sarcasmd's prosody F0 track with Praat's (via praat-parselmouth).

For every WAV file: Praat "To Pitch" (autocorrelation method, Praat defaults except
floor/ceiling/time step, which match our extractor: 60-500 Hz, 10 ms) versus
`SARCASMD prosody FILE.wav`, which prints one JSON object per frame
(`{"t_s": ..., "f0_hz": number|null, ...}`).

Alignment: each of our frames is compared with Praat's track at the same time (nearest Praat
frame decides voicing; F0 is linearly interpolated between the two Praat frames around it when
both are voiced). Frames outside Praat's analysed range are skipped.

Reported per set: voicing agreement (%), the voiced/unvoiced confusion, and on frames both call
voiced: median and mean absolute error in Hz and in cents, and the gross error rate
(|ours/praat - 1| > 20 %).

Files not at 16 kHz are resampled with sox into a temporary directory first (both trackers then
see the same 16 kHz audio). Nothing is written next to the inputs.

Usage (dev binary or the real one):
  python models/tools/f0_reference.py --sarcasmd target/release/sarcasmd \
      --espeak --set house='/path/audio_16k/utterance/*.wav' --set mpp='/path/*.wav'

Requirements: models/tools/requirements.txt (praat-parselmouth, numpy), plus sox and, for
--espeak, espeak-ng on PATH. Use a virtualenv outside the repository.
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import wave

import numpy as np
import parselmouth

F0_MIN_HZ = 60.0
F0_MAX_HZ = 500.0
STEP_S = 0.010
TARGET_SR = 16000
GROSS_ERROR = 0.20

# Built-in synthetic set: (voice, pitch 0-99, text). espeak-ng output is resampled to 16 kHz.
ESPEAK_SET = [
    ("en-us", 30, "Oh great, another meeting that could have been an email."),
    ("en-us+f3", 70, "I absolutely love waiting in line for three hours."),
    ("en-gb", 50, "The weather today is sunny with a light breeze from the west."),
    ("en-us+m3", 20, "Could you please pass me the salt and the pepper?"),
    ("en-gb+f2", 60, "Well, that went exactly as planned, didn't it?"),
    ("en-us+f4", 80, "My favourite part of the day is definitely the commute."),
    ("en-gb-x-rp", 40, "The train to Boston leaves at half past seven in the morning."),
    ("en-us+m7", 30, "Sure, because nothing says fun like doing taxes on a Sunday."),
    ("en-029+f1", 65, "We measured the temperature every ten minutes for a week."),
    ("en-us-nyc", 50, "Wow, you are a genius, nobody has ever thought of that before."),
    ("de", 30, "Na toll, schon wieder ein Montag."),
    ("de+f3", 70, "Der Zug nach Berlin hat heute leider zwanzig Minuten Verspaetung."),
    ("de+m3", 45, "Ich liebe es, wenn der Drucker genau dann kaputt geht."),
    ("de+f2", 60, "Das Wetter ist heute schoen und die Sonne scheint."),
    ("de+m7", 25, "Ganz grossartig, das hast du wirklich super gemacht."),
]


def wav_rate(path: str) -> int:
    with wave.open(path, "rb") as w:
        return w.getframerate()


def to_16k(path: str, tmpdir: str) -> str:
    """Returns a 16 kHz mono 16-bit version of `path` (the file itself if it already is)."""
    try:
        with wave.open(path, "rb") as w:
            ok = w.getframerate() == TARGET_SR and w.getnchannels() == 1
    except wave.Error:
        ok = False
    if ok:
        return path
    out = os.path.join(tmpdir, f"{len(os.listdir(tmpdir)):05d}_{os.path.basename(path)}")
    subprocess.run(["sox", path, "-r", str(TARGET_SR), "-c", "1", "-b", "16", out], check=True)
    return out


def make_espeak_set(tmpdir: str) -> list[str]:
    files = []
    for i, (voice, pitch, text) in enumerate(ESPEAK_SET):
        raw = os.path.join(tmpdir, f"espeak_raw_{i:02d}.wav")
        out = os.path.join(tmpdir, f"espeak_{i:02d}_{voice.replace('+', '_')}_p{pitch}.wav")
        subprocess.run(["espeak-ng", "-v", voice, "-p", str(pitch), "-w", raw, text], check=True)
        subprocess.run(["sox", raw, "-r", str(TARGET_SR), "-b", "16", out], check=True)
        os.remove(raw)
        files.append(out)
    return files


def praat_track(path: str) -> tuple[np.ndarray, np.ndarray]:
    snd = parselmouth.Sound(path)
    pitch = snd.to_pitch(time_step=STEP_S, pitch_floor=F0_MIN_HZ, pitch_ceiling=F0_MAX_HZ)
    return np.asarray(pitch.xs()), np.asarray(pitch.selected_array["frequency"], dtype=float)


def our_track(exe: str, path: str) -> tuple[np.ndarray, np.ndarray]:
    res = subprocess.run([exe, "prosody", path], check=True, capture_output=True, text=True)
    ts, f0 = [], []
    for line in res.stdout.splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        ts.append(float(obj["t_s"]))
        v = obj.get("f0_hz")
        f0.append(float(v) if v is not None else 0.0)
    return np.asarray(ts), np.asarray(f0)


def praat_at(px: np.ndarray, pf: np.ndarray, t: float) -> float | None:
    """Praat F0 at time t (0 = unvoiced), None if t is outside Praat's analysed range."""
    if len(px) == 0:
        return None
    step = px[1] - px[0] if len(px) > 1 else STEP_S
    if t < px[0] - step / 2 or t > px[-1] + step / 2:
        return None
    i = int(np.argmin(np.abs(px - t)))
    if pf[i] <= 0:
        return 0.0
    j = i + 1 if t > px[i] else i - 1
    if 0 <= j < len(px) and pf[j] > 0:
        w = (t - px[i]) / (px[j] - px[i])
        return float(pf[i] + w * (pf[j] - pf[i]))
    return float(pf[i])


def compare(exe: str, path: str) -> dict:
    px, pf = praat_track(path)
    ot, of = our_track(exe, path)
    pairs = []
    for t, f in zip(ot, of):
        p = praat_at(px, pf, t)
        if p is not None:
            pairs.append((f, p))
    return {"file": path, "pairs": pairs}


def summarise(results: list[dict]) -> dict:
    pairs = [p for r in results for p in r["pairs"]]
    if not pairs:
        return {"frames": 0}
    a = np.asarray(pairs)
    ours_v, praat_v = a[:, 0] > 0, a[:, 1] > 0
    both = ours_v & praat_v
    o, p = a[both, 0], a[both, 1]
    err_hz = np.abs(o - p)
    err_c = np.abs(1200.0 * np.log2(o / p)) if both.any() else np.array([])
    nan = float("nan")
    return {
        "files": len(results),
        "frames": int(len(a)),
        "voicing_agreement_pct": 100.0 * float(np.mean(ours_v == praat_v)),
        "both_voiced": int(both.sum()),
        "ours_only_voiced": int((ours_v & ~praat_v).sum()),
        "praat_only_voiced": int((~ours_v & praat_v).sum()),
        "both_unvoiced": int((~ours_v & ~praat_v).sum()),
        "median_abs_err_hz": float(np.median(err_hz)) if both.any() else nan,
        "mean_abs_err_hz": float(np.mean(err_hz)) if both.any() else nan,
        "median_abs_err_cents": float(np.median(err_c)) if both.any() else nan,
        "mean_abs_err_cents": float(np.mean(err_c)) if both.any() else nan,
        "gross_error_pct": 100.0 * float(np.mean(np.abs(o / p - 1.0) > GROSS_ERROR))
        if both.any()
        else nan,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sarcasmd", default="sarcasmd", help="binary with a `prosody FILE.wav` subcommand")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=GLOB",
                    help="named set of WAV files (glob or directory); repeatable")
    ap.add_argument("--espeak", action="store_true", help="add the built-in espeak-ng set (15 sentences)")
    ap.add_argument("--per-file", action="store_true", help="also print one line per file")
    ap.add_argument("--json", metavar="PATH", help="write the summaries as JSON here")
    args = ap.parse_args()

    exe = shutil.which(args.sarcasmd) or args.sarcasmd
    if not os.path.exists(exe):
        print(f"error: --sarcasmd {args.sarcasmd!r} not found; build it or pass the path", file=sys.stderr)
        return 2
    summaries = {}
    with tempfile.TemporaryDirectory(prefix="f0ref_") as tmp:
        sets: list[tuple[str, list[str]]] = []
        if args.espeak:
            sets.append(("espeak", make_espeak_set(tmp)))
        for spec in args.set:
            name, _, pattern = spec.partition("=")
            if not pattern:
                print(f"error: --set {spec!r} must be NAME=GLOB", file=sys.stderr)
                return 2
            if os.path.isdir(pattern):
                pattern = os.path.join(pattern, "*.wav")
            files = sorted(glob.glob(pattern))
            if not files:
                print(f"error: --set {name}: no files match {pattern!r}", file=sys.stderr)
                return 2
            sets.append((name, files))
        if not sets:
            print("error: nothing to do; pass --espeak and/or --set NAME=GLOB", file=sys.stderr)
            return 2

        for name, files in sets:
            results = []
            for f in files:
                r = compare(exe, to_16k(f, tmp))
                r["file"] = f
                results.append(r)
                if args.per_file:
                    s = summarise([r])
                    print(f"  {name} {os.path.basename(f)}: frames={s.get('frames')} "
                          f"vuv={s.get('voicing_agreement_pct', nan_):.1f}% "
                          f"med={s.get('median_abs_err_cents', nan_):.1f}c "
                          f"gross={s.get('gross_error_pct', nan_):.1f}%")
            summaries[name] = summarise(results)

    cols = ["files", "frames", "voicing_agreement_pct", "both_voiced", "ours_only_voiced",
            "praat_only_voiced", "median_abs_err_hz", "mean_abs_err_hz", "median_abs_err_cents",
            "mean_abs_err_cents", "gross_error_pct"]
    print("| set | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for name, s in summaries.items():
        cells = []
        for c in cols:
            v = s.get(c, float("nan"))
            cells.append(f"{v:.2f}" if isinstance(v, float) else str(v))
        print(f"| {name} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(summaries, fh, indent=2)
    return 0


nan_ = float("nan")

if __name__ == "__main__":
    sys.exit(main())
