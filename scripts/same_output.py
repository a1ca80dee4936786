#!/usr/bin/env python3
"""Do two sarcasmd binaries produce the same output? For refactors that must not change
behaviour (issue 27): build the commit before and after, then

    python3 scripts/same_output.py OLD_BIN NEW_BIN [--manifests DIR] [--limit N]

Runs both binaries, one after the other, on the same inputs with the default config:
- `replay samples/meeting.wav` (a WAV file), the same audio as raw PCM on stdin
  (`replay - --rate 16000`), and, when ../shared/data is there, the first clip of the
  MUStARD++ clips with its video (`replay --video`);
- `sarcasmd eval --json` over the speech manifests (`speech.jsonl`, House M.D.;
  `speech_cmpt419.jsonl`, the MUStARD++ clips with video), from
  `scripts/manifests.py`'s output dir.

Events are compared line by line as bytes after removing the fields that hold wall-clock
time (`latency_ms`, `ready_ms`); eval reports item by item (transcript, every view's
score, utterance count) and row by row (every figure), after removing run times. Prints
one line per input and exits 1 if anything differs. Standard library only; needs sox.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "meeting.wav"
WALL_CLOCK_EVENT_FIELDS = ("latency_ms", "ready_ms")


def strip_event(line):
    e = json.loads(line)
    for k in WALL_CLOCK_EVENT_FIELDS:
        e.pop(k, None)
    return json.dumps(e, sort_keys=True)


def replay(binary, args, stdin=None):
    p = subprocess.run([binary, "replay", *args], input=stdin, capture_output=True, timeout=900)
    if p.returncode != 0:
        sys.exit(f"{binary} replay {' '.join(args)}: exit {p.returncode}\n{p.stderr.decode()[-2000:]}")
    return [strip_event(l) for l in p.stdout.decode().splitlines() if l.strip()]


def eval_items(binary, manifest, limit, tmp):
    out = Path(tmp) / "eval.json"
    args = [binary, "eval", str(manifest), "--json", str(out)]
    if limit:
        args += ["--limit", str(limit)]
    p = subprocess.run(args, capture_output=True, timeout=7200)
    if p.returncode != 0:
        sys.exit(f"{binary} eval {manifest}: exit {p.returncode}\n{p.stderr.decode()[-2000:]}")
    r = json.loads(out.read_text())
    items = {it["id"]: json.dumps({k: it.get(k) for k in ("text", "p", "utterances", "silent")}, sort_keys=True)
             for it in r["items"]}
    rows = [json.dumps(row, sort_keys=True) for row in r["rows"]]
    return items, rows


def compare(name, old, new, noun="events"):
    if old == new:
        print(f"same     {name}: {len(old)} {noun}")
        return True
    if isinstance(old, dict):
        diff = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        print(f"DIFFERS  {name}: {len(diff)} of {len(old)} items, e.g. {diff[0]}:\n  old {old.get(diff[0])}\n  new {new.get(diff[0])}")
    else:
        i = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        print(f"DIFFERS  {name}: {len(old)} vs {len(new)} events; first difference at event {i}:\n"
              f"  old {old[i] if i < len(old) else None}\n  new {new[i] if i < len(new) else None}")
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old_bin")
    ap.add_argument("new_bin")
    default_manifests = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sarcasmd" / "manifests"
    ap.add_argument("--manifests", type=Path, default=default_manifests)
    ap.add_argument("--limit", type=int, default=0, help="items per manifest (0: all)")
    a = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        raw = subprocess.run(["sox", str(SAMPLE), "-t", "raw", "-r", "16000", "-c", "1", "-b", "16",
                              "-e", "signed-integer", "-"], capture_output=True, check=True).stdout
        ok &= compare("replay samples/meeting.wav", replay(a.old_bin, [str(SAMPLE)]), replay(a.new_bin, [str(SAMPLE)]))
        ok &= compare("replay - --rate 16000 (the sample as PCM)",
                      replay(a.old_bin, ["-", "--rate", "16000"], raw), replay(a.new_bin, ["-", "--rate", "16000"], raw))
        cmpt = a.manifests / "speech_cmpt419.jsonl"
        if cmpt.exists():
            first = json.loads(cmpt.read_text().splitlines()[0])
            if first.get("video"):
                args = [first["audio"], "--video", first["video"]]
                ok &= compare(f"replay --video ({first['id']})", replay(a.old_bin, args), replay(a.new_bin, args))
        for m in ("speech.jsonl", "speech_cmpt419.jsonl"):
            path = a.manifests / m
            if not path.exists():
                print(f"SKIP     eval {m}: {path} not found (python3 scripts/manifests.py --out {a.manifests})")
                continue
            oi, orows = eval_items(a.old_bin, path, a.limit, tmp)
            ni, nrows = eval_items(a.new_bin, path, a.limit, tmp)
            ok &= compare(f"eval {m}: items", oi, ni, "items")
            ok &= compare(f"eval {m}: rows", orows, nrows, "rows")
    print("all same" if ok else "outputs differ")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
