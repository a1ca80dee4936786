#!/usr/bin/env python3
"""The arm64 package's binary against the x86 one, on the same inputs: the arm64 binary
runs under qemu-user as a Raspberry Pi 4's CPU (`qemu-aarch64 -cpu cortex-a72`, so an
instruction a Pi 4 lacks would die with SIGILL), through the real pipeline with the
real models (the model cache is shared: its files are architecture-independent).

Inputs: a short real clip (House M.D., ../shared/data/speech, when present), the first
8.5 s of samples/meeting.wav (two lines), and bad input (a missing file, a directory,
a text file named .wav, an empty file). Compared: the events' transcripts (word
differences), every score (largest absolute difference), event count, exit codes.
Emulated time says nothing about a board's speed (scripts/emulate-board.sh does that).
Slow: about a minute per clip. Standard library only; needs sox for the trim.

  python3 scripts/arm64_check.py --deb target/packages/debian/sarcasmd_0.1.0-1_arm64.deb
  python3 scripts/arm64_check.py --arm64-bin PATH --x86-bin target/release/sarcasmd
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QEMU = ["qemu-aarch64", "-cpu", "cortex-a72", "-L", "/usr/aarch64-linux-gnu", "-E", "LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib"]
HOUSE_CLIP = os.path.join(REPO, "..", "shared", "data", "speech", "house_mustardpp_ext", "audio_16k", "utterance", "4_S01E04_001.wav")
SCORE_TOLERANCE = 1e-3  # p_sarcastic and views: float summation order may differ (NEON vs AVX)


def run(cmd, timeout=1800):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    events = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    return {"exit": p.returncode, "events": [e for e in events if e.get("type") == "utterance"], "wall_s": round(time.time() - t0, 1),
            "stderr_tail": p.stderr.strip().splitlines()[-1:] if p.stderr.strip() else []}


def word_diff(a, b):
    """Word-level edit distance between two transcripts."""
    a, b = a.lower().split(), b.lower().split()
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(b) + 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
    return d[len(b)]


def scores(e):
    v = e.get("views") or {}
    return [e.get("p_sarcastic"), v.get("text"), v.get("audio"), v.get("video")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deb", help="the arm64 .deb (its usr/bin/sarcasmd is used)")
    ap.add_argument("--arm64-bin")
    ap.add_argument("--x86-bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "sarcasmd"))
    ap.add_argument("--json", help="write the comparison here")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="arm64-check-")
    arm = a.arm64_bin
    if a.deb:
        subprocess.run(["dpkg-deb", "-x", a.deb, os.path.join(work, "root")], check=True)
        arm = os.path.join(work, "root", "usr", "bin", "sarcasmd")
    if not arm:
        sys.exit("arm64_check: give --deb or --arm64-bin")
    inputs = []
    if os.path.exists(HOUSE_CLIP):
        inputs.append(("House clip 4_S01E04_001 (2.9 s)", HOUSE_CLIP))
    else:
        print("arm64_check: ../shared/data absent: the House clip is skipped", file=sys.stderr)
    meet = os.path.join(work, "meeting-8.5s.wav")
    subprocess.run(["sox", os.path.join(REPO, "samples", "meeting.wav"), meet, "trim", "0", "8.5"], check=True)
    inputs.append(("samples/meeting.wav, first 8.5 s", meet))
    bad_txt = os.path.join(work, "not-audio.wav")
    open(bad_txt, "w").write("this is not a WAV file\n")
    empty = os.path.join(work, "empty.wav")
    open(empty, "w").close()
    bad = [("missing file", os.path.join(work, "missing.wav")), ("a directory", work), ("text named .wav", bad_txt), ("empty file", empty)]

    rows, ok = [], True
    for name, path in inputs + bad:
        x = run([a.x86_bin, "replay", path])
        r = run(QEMU + [arm, "replay", path])
        row = {"input": name, "x86_exit": x["exit"], "arm64_exit": r["exit"], "x86_events": len(x["events"]), "arm64_events": len(r["events"]),
               "x86_wall_s": x["wall_s"], "arm64_qemu_wall_s": r["wall_s"], "arm64_stderr_tail": r["stderr_tail"]}
        if x["events"] and len(x["events"]) == len(r["events"]):
            row["word_differences"] = sum(word_diff(e["transcript"] or "", f["transcript"] or "") for e, f in zip(x["events"], r["events"]))
            diffs = [abs(p - q) for e, f in zip(x["events"], r["events"]) for p, q in zip(scores(e), scores(f)) if p is not None and q is not None]
            row["max_score_difference"] = max(diffs) if diffs else 0.0
            row["transcripts"] = [[e["transcript"], f["transcript"]] for e, f in zip(x["events"], r["events"])]
        same = (x["exit"] == r["exit"] and len(x["events"]) == len(r["events"])
                and row.get("word_differences", 0) == 0 and row.get("max_score_difference", 0.0) <= SCORE_TOLERANCE)
        row["same"] = same
        ok &= same
        rows.append(row)
        print(f"{name}: exit {x['exit']}/{r['exit']}, events {len(x['events'])}/{len(r['events'])}, word differences "
              f"{row.get('word_differences', '-')}, max score difference {row.get('max_score_difference', '-')}, "
              f"qemu {r['wall_s']} s: {'same' if same else 'DIFFERENT'}", flush=True)
    out = {"x86_bin": a.x86_bin, "arm64_bin": arm, "qemu": " ".join(QEMU), "score_tolerance": SCORE_TOLERANCE, "rows": rows, "all_same": ok}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    print("all same" if ok else "DIFFERENCES above")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
