#!/usr/bin/env python3
"""Read meetings line by line and record sarcasm labels (models/labels/GUIDELINE.md).

The text is read from ../shared (AMI, MRDA); what is recorded holds ids, labels, reasons
and the annotator, never the text. Commands:

  annotate.py list                          meetings, line counts, kinds
  annotate.py show MEETING [--start N] [--count K]
                                            the meeting's lines in order, numbered from 0
  annotate.py record MEETING --annotator A --labels FILE --out DIR
                                            FILE: one 'N<TAB>sarcastic|unsure<TAB>reason'
                                            per non-plain line (may be empty); appends the
                                            meeting's record to DIR/A.jsonl
  annotate.py mrda-show [--start N] [--count K]
                                            MRDA humour-tagged segments with their context
  annotate.py mrda-record --annotator A --labels FILE --out DIR
                                            FILE: 'N<TAB>sarcastic|unsure|plain<TAB>reason'
                                            for every item shown

A meeting record: {"meeting", "annotator", "n_lines", "ids_sha256", "labels": [{"id",
"line", "label", "reason"}]}: every line of the meeting not in "labels" is plain, and
ids_sha256 (over the ids in reading order, one per line) proves which lines were read.
"""

import argparse
import gzip
import hashlib
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("SARCASMD_SHARED", HERE.parent.parent.parent / "shared"))
AMI = SHARED / "data/meetings/ami/ami_utterances.jsonl.gz"
MRDA = SHARED / "data/meetings/icsi_mrda/mrda_utterances.jsonl.gz"

AMI_LABELS = ("sarcastic", "unsure")
MRDA_LABELS = ("sarcastic", "unsure", "plain")
# MRDA items show this many segments before the humorous one and after it.
MRDA_BEFORE, MRDA_AFTER = 12, 3


def need(path):
    if not path.exists():
        sys.exit(f"{path} is missing: this needs ../shared beside the repo (or SARCASMD_SHARED)")


def ami_meetings():
    """{meeting: [row, ...]} in reading order: the file's order, which is by start time
    (one row without times keeps its place)."""
    return rows_by_meeting(AMI)


def rows_by_meeting(path):
    """{meeting: [row, ...]} of a gzipped JSON-lines corpus, in the file's order."""
    need(path)
    out = {}
    with gzip.open(path, "rt") as f:
        for line in f:
            row = json.loads(line)
            out.setdefault(row["meeting"], []).append(row)
    return out


def ids_sha256(rows):
    h = hashlib.sha256()
    for r in rows:
        h.update(r["id"].encode() + b"\n")
    return h.hexdigest()


def clock(seconds):
    if seconds is None:
        return "--:--"
    m, s = divmod(int(seconds), 60)
    return f"{m:02d}:{s:02d}"


def speaker_tag(row):
    role = row.get("role")
    return f"{row['speaker']}({role})" if role else row["speaker"]


def show(rows, start, count):
    for i in range(start, min(len(rows), start + count)):
        r = rows[i]
        sounds = "".join(f" ({v})" for v in r.get("vocalsounds") or [])
        print(f"{i:5d} [{clock(r['start_s'])}] {speaker_tag(r)}: {r['text']}{sounds}")
    end = min(len(rows), start + count)
    print(f"-- lines {start}..{end - 1} of {len(rows)}" + ("" if end < len(rows) else " (end of meeting)"))


def read_tsv(path, labels, n_items):
    """[(n, label, reason)] from the annotator's file; exits naming the bad line."""
    out, seen = [], set()
    for k, raw in enumerate(Path(path).read_text().splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parts = raw.split("\t")
        if len(parts) < 3 or not parts[2].strip():
            sys.exit(f"{path}:{k}: want 'N<TAB>label<TAB>reason', got {raw!r}")
        try:
            n = int(parts[0])
        except ValueError:
            sys.exit(f"{path}:{k}: {parts[0]!r} is not a line number")
        label = parts[1].strip()
        if label not in labels:
            sys.exit(f"{path}:{k}: label {label!r} is not one of {', '.join(labels)}")
        if not 0 <= n < n_items:
            sys.exit(f"{path}:{k}: line {n} is outside 0..{n_items - 1}")
        if n in seen:
            sys.exit(f"{path}:{k}: line {n} is labelled twice")
        seen.add(n)
        out.append((n, label, "\t".join(parts[2:]).strip()))
    return sorted(out)


def append(out_dir, annotator, record, key):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{annotator}.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip() and json.loads(line).get(key) == record[key]:
                sys.exit(f"{path} already holds {key} {record[key]}: one record each")
    with open(path, "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")
    print(f"recorded {record[key]} for {annotator} in {path}")


def mrda_items():
    """The humour-tagged segments, in meeting order, each with its context."""
    by_meeting = rows_by_meeting(MRDA)
    items = []
    for meeting in sorted(by_meeting):
        rows = sorted(by_meeting[meeting], key=lambda r: (r["start_s"], r["end_s"], r["id"]))
        for i, r in enumerate(rows):
            if r["humor"]:
                items.append((rows, i))
    return items


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    p = sub.add_parser("show")
    p.add_argument("meeting")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--count", type=int, default=150)
    p = sub.add_parser("record")
    p.add_argument("meeting")
    p.add_argument("--annotator", required=True)
    p.add_argument("--labels", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("mrda-show")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--count", type=int, default=20)
    p = sub.add_parser("mrda-record")
    p.add_argument("--annotator", required=True)
    p.add_argument("--labels", required=True)
    p.add_argument("--out", required=True)
    a = ap.parse_args()

    if a.cmd == "list":
        for m, rows in sorted(ami_meetings().items()):
            print(f"{m}\t{len(rows)}\t{rows[0]['meeting_kind']}")
    elif a.cmd == "show":
        meetings = ami_meetings()
        if a.meeting not in meetings:
            sys.exit(f"no meeting {a.meeting!r} (see 'list')")
        show(meetings[a.meeting], a.start, a.count)
    elif a.cmd == "record":
        rows = ami_meetings().get(a.meeting)
        if rows is None:
            sys.exit(f"no meeting {a.meeting!r} (see 'list')")
        labels = read_tsv(a.labels, AMI_LABELS, len(rows))
        record = {
            "meeting": a.meeting,
            "annotator": a.annotator,
            "n_lines": len(rows),
            "ids_sha256": ids_sha256(rows),
            "labels": [{"id": rows[n]["id"], "line": n, "label": lab, "reason": why} for n, lab, why in labels],
        }
        append(a.out, a.annotator, record, "meeting")
    elif a.cmd == "mrda-show":
        items = mrda_items()
        for k in range(a.start, min(len(items), a.start + a.count)):
            rows, i = items[k]
            print(f"=== item {k} (meeting {rows[i]['meeting']}) ===")
            for j in range(max(0, i - MRDA_BEFORE), min(len(rows), i + MRDA_AFTER + 1)):
                r = rows[j]
                mark = ">>" if j == i else "  "
                print(f"{mark} [{clock(r['start_s'])}] {r['speaker']}: {r['text']}")
        print(f"-- items {a.start}..{min(len(items), a.start + a.count) - 1} of {len(items)}")
    elif a.cmd == "mrda-record":
        items = mrda_items()
        labels = read_tsv(a.labels, MRDA_LABELS, len(items))
        missing = sorted(set(range(len(items))) - {n for n, _, _ in labels})
        if missing:
            sys.exit(f"every item needs a label; missing {len(missing)}, first {missing[:10]}")
        out_dir = Path(a.out)
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"mrda_{a.annotator}.jsonl"
        if path.exists():
            sys.exit(f"{path} exists: one MRDA record per annotator")
        with open(path, "w") as f:
            for n, lab, why in labels:
                rows, i = items[n]
                f.write(json.dumps({"id": rows[i]["id"], "meeting": rows[i]["meeting"], "item": n,
                                    "label": lab, "reason": why, "annotator": a.annotator}, sort_keys=True) + "\n")
        print(f"recorded {len(labels)} MRDA items for {a.annotator} in {path}")


if __name__ == "__main__":
    main()
