#!/usr/bin/env python3
"""Our meeting labels, read and checked: every annotator's records (`ami/*.jsonl`), the
adjudication of disagreements (`ami/adjudicated.jsonl`), agreement between annotators,
and the gold label of every line of every annotated meeting.

  labels.py agreement [--md FILE]     Cohen's kappa and the disagreements (double-read meetings)
  labels.py disagreements --out FILE  the lines two annotators labelled differently (for adjudication)
  labels.py summary                   meetings, lines and gold labels by meeting series

As a library (`from models.labels import labels`, e.g. models/recipe/lib/meetings.py): `gold_lines()` gives every line of every
annotated meeting with its gold label, read from ../shared (the text never lives here).

Gold label of a line: one annotator: theirs. Two: theirs when they agree; otherwise the
adjudicator's (a third annotator who read both labels and reasons in the meeting's
context); a disagreement nobody adjudicated yet is `unsure`. Lines are `plain` unless a
record lists them. Kappa is computed on `sarcastic` against the rest (`unsure` + `plain`),
and also on the three labels.
"""

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

try:  # imported as the package module models.labels.labels (from the repo root)
    from . import annotate
except ImportError:  # run as a script: models/labels/labels.py (its folder is on the path)
    import annotate  # the reader of ../shared, same folder

HERE = Path(__file__).resolve().parent

AMI_DIR = HERE / "ami"
ADJUDICATED = AMI_DIR / "adjudicated.jsonl"
LABELS = ("plain", "unsure", "sarcastic")


def series_of(meeting):
    """The AMI meeting series: a scenario team's four meetings (ES2002a-d) or a natural
    meeting group (EN2001a-e); IN and IB meetings are their own series."""
    return meeting[:6] if meeting[:2] in ("ES", "IS", "TS", "EN") else meeting


def read_records(ami_dir=AMI_DIR):
    """[(annotator, record)] from every ami/<annotator>.jsonl (not the adjudication)."""
    out = []
    for path in sorted(Path(ami_dir).glob("*.jsonl")):
        if path.name == ADJUDICATED.name:
            continue
        for line in path.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                out.append((rec["annotator"], rec))
    return out


def read_adjudicated(path=ADJUDICATED):
    if not Path(path).exists():
        return {}
    return {r["id"]: r for r in (json.loads(x) for x in Path(path).read_text().splitlines() if x.strip())}


def per_line(records, meetings):
    """{meeting: {annotator: [label per line]}}, each record checked against the lines
    it claims to have read."""
    out = defaultdict(dict)
    for ann, rec in records:
        rows = meetings.get(rec["meeting"])
        if rows is None:
            sys.exit(f"{ann}: meeting {rec['meeting']} is not in {annotate.AMI}")
        if len(rows) != rec["n_lines"] or annotate.ids_sha256(rows) != rec["ids_sha256"]:
            sys.exit(f"{ann}: {rec['meeting']} was read from other lines than {annotate.AMI} holds now")
        labs = ["plain"] * len(rows)
        for lab in rec["labels"]:
            if rows[lab["line"]]["id"] != lab["id"]:
                sys.exit(f"{ann}: {rec['meeting']} line {lab['line']} is {rows[lab['line']]['id']}, not {lab['id']}")
            labs[lab["line"]] = lab["label"]
        if ann in out[rec["meeting"]]:
            sys.exit(f"{ann} recorded {rec['meeting']} twice")
        out[rec["meeting"]][ann] = labs
    return out


def kappa(a, b):
    """Cohen's kappa of two equal-length label lists."""
    n = len(a)
    po = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    return 1.0 if pe == 1 else (po - pe) / (1 - pe)


def binary(labs):
    return ["sarcastic" if x == "sarcastic" else "rest" for x in labs]


def gold_lines(ami_dir=AMI_DIR):
    """Every line of every annotated meeting, in reading order, as dicts: the row from
    ../shared plus `label` (gold), `series`, `line` (position) and `annotators`."""
    meetings = annotate.ami_meetings()
    per = per_line(read_records(ami_dir), meetings)
    adj = read_adjudicated(Path(ami_dir) / ADJUDICATED.name)
    out = []
    for m in sorted(per):
        anns = per[m]
        rows = meetings[m]
        for i, row in enumerate(rows):
            labs = {a: anns[a][i] for a in anns}
            vals = set(labs.values())
            if len(vals) == 1:
                gold = vals.pop()
            elif row["id"] in adj:
                gold = adj[row["id"]]["label"]
            else:
                gold = "unsure"
            out.append(dict(row, label=gold, series=series_of(m), line=i, annotators=labs))
    return out


def agreement(ami_dir=AMI_DIR):
    meetings = annotate.ami_meetings()
    per = per_line(read_records(ami_dir), meetings)
    pairs = []  # (meeting, annotator a, annotator b, labels a, labels b)
    for m, anns in sorted(per.items()):
        names = sorted(anns)
        if len(names) >= 2:
            pairs.append((m, names[0], names[1], anns[names[0]], anns[names[1]]))
    if not pairs:
        return None
    A = [x for p in pairs for x in p[3]]
    B = [x for p in pairs for x in p[4]]
    sa = sum(x == "sarcastic" for x in A)
    sb = sum(x == "sarcastic" for x in B)
    both = sum(x == y == "sarcastic" for x, y in zip(A, B))
    res = {
        "meetings": len(pairs),
        "lines": len(A),
        "kappa_sarcastic_vs_rest": kappa(binary(A), binary(B)),
        "kappa_three_labels": kappa(A, B),
        "kappa_any_vs_plain": kappa([x != "plain" for x in A], [x != "plain" for x in B]),
        "sarcastic_first": sa,
        "sarcastic_second": sb,
        "sarcastic_both": both,
        # Positive specific agreement: 2|A∩B| / (|A| + |B|), the chance of the other
        # annotator agreeing on a line one called sarcastic.
        "positive_agreement": 2 * both / (sa + sb) if sa + sb else float("nan"),
        "confusion": Counter(f"{x}/{y}" for x, y in zip(A, B) if x != "plain" or y != "plain"),
        "per_meeting": [],
        "disagreements": [],
    }
    for m, a, b, la, lb in pairs:
        res["per_meeting"].append({"meeting": m, "annotators": [a, b], "lines": len(la),
                                   "sarcastic": [la.count("sarcastic"), lb.count("sarcastic")],
                                   "unsure": [la.count("unsure"), lb.count("unsure")],
                                   "kappa": kappa(binary(la), binary(lb))})
        for i, (x, y) in enumerate(zip(la, lb)):
            if x != y:
                res["disagreements"].append({"meeting": m, "line": i, "id": meetings[m][i]["id"], a: x, b: y,
                                             "annotators": [a, b], "labels": [x, y]})
    return res


def reasons(ami_dir=AMI_DIR):
    """{(annotator, id): reason}."""
    out = {}
    for ann, rec in read_records(ami_dir):
        for lab in rec["labels"]:
            out[(ann, lab["id"])] = lab["reason"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ami-dir", default=str(AMI_DIR))
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("agreement")
    p.add_argument("--json")
    p = sub.add_parser("disagreements")
    p.add_argument("--out", required=True)
    sub.add_parser("summary")
    a = ap.parse_args()
    if a.cmd == "agreement":
        r = agreement(a.ami_dir)
        if r is None:
            sys.exit("no meeting was read by two annotators yet")
        print(f"{r['meetings']} meetings, {r['lines']} lines read twice")
        print(f"kappa sarcastic vs rest {r['kappa_sarcastic_vs_rest']:.3f}; three labels {r['kappa_three_labels']:.3f}; "
              f"sarcastic or unsure vs plain {r['kappa_any_vs_plain']:.3f}")
        print(f"sarcastic: {r['sarcastic_first']} / {r['sarcastic_second']}, both {r['sarcastic_both']}; "
              f"positive agreement {r['positive_agreement']:.3f}")
        print("confusion (first/second, plain/plain left out):", dict(r["confusion"]))
        for pm in r["per_meeting"]:
            print(f"  {pm['meeting']} {pm['annotators']} lines {pm['lines']} sarcastic {pm['sarcastic']} unsure {pm['unsure']} kappa {pm['kappa']:.2f}")
        if a.json:
            r["confusion"] = dict(r["confusion"])
            Path(a.json).write_text(json.dumps(r, indent=1) + "\n")
    elif a.cmd == "disagreements":
        r = agreement(a.ami_dir)
        why = reasons(a.ami_dir)
        with open(a.out, "w") as f:
            for d in (r or {"disagreements": []})["disagreements"]:
                x, y = d["annotators"]
                f.write(json.dumps({"meeting": d["meeting"], "line": d["line"], "id": d["id"],
                                    "labels": d["labels"],
                                    "reasons": [why.get((x, d["id"]), ""), why.get((y, d["id"]), "")]}) + "\n")
        print(f"wrote {len((r or {'disagreements': []})['disagreements'])} disagreements to {a.out}")
    elif a.cmd == "summary":
        lines = gold_lines(a.ami_dir)
        by = defaultdict(Counter)
        for r in lines:
            by[r["series"]][r["label"]] += 1
        tot = Counter()
        for s in sorted(by):
            tot.update(by[s])
            print(f"{s}\t" + "\t".join(f"{k} {by[s][k]}" for k in LABELS))
        print("all\t" + "\t".join(f"{k} {tot[k]}" for k in LABELS), f"meetings {len({r['meeting'] for r in lines})}")


if __name__ == "__main__":
    main()
