#!/usr/bin/env python3
"""Write a manifest (docs/manifest.md) of the labelled speech clips in
../shared/data/speech: the 129 House utterances and the 31 MUStARD++ samples, with their
gold transcripts (the reference for word error rates in `sarcasmd bench`) and labels.
Paths are absolute, so the manifest can live anywhere (never in the repo: the clips are
not ours to redistribute). Standard library only.

  python3 scripts/speech_manifest.py --out /tmp/speech.jsonl
  target/release/sarcasmd bench /tmp/speech.jsonl --json /tmp/speech-bench.json
"""
import argparse
import csv
import json
import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "shared", "data"))
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    speech = os.path.abspath(os.path.join(a.data, "speech"))
    if not os.path.isdir(speech):
        sys.exit(f"{speech}: not found (../shared/data is needed for this manifest)")
    rows = []
    house = os.path.join(speech, "house_mustardpp_ext")
    with open(os.path.join(house, "labels.csv"), newline="") as f:
        for r in csv.DictReader(f):
            rows.append({"id": "house:" + r["key"], "text": r["utterance"],
                         "audio": os.path.join(house, r["audio"]), "label": int(r["sarcasm"]),
                         "source": "house_mustardpp_ext"})
    pp = os.path.join(speech, "mustardpp_samples")
    with open(os.path.join(pp, "labels.csv"), newline="") as f:
        for r in csv.DictReader(f):
            rows.append({"id": "mpp-sample:" + r["key"], "text": r["utterance"],
                         "audio": os.path.join(pp, r["file"]), "label": int(r["sarcasm"]),
                         "source": "mustardpp_samples"})
    with open(a.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{len(rows)} clips -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
