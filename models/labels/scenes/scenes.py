"""Contrastive meeting scenes: parse writers' batches, deal blind reading batches, build the set.

    python3 models/labels/scenes/scenes.py check FILE [FILE ...]     # a writer checks a batch
    python3 models/labels/scenes/scenes.py deal --raw DIR --out DIR --writers en01 de01 ... --prefix w1
    python3 models/labels/scenes/scenes.py build --raw DIR --reads DIR --out FILE.jsonl.gz

The format is described in GUIDELINE.md (Part 1, "Format"). Everything here is plain Python
(standard library only), so writers and readers need nothing installed.
"""
import argparse
import gzip
import hashlib
import json
import os
import random
import re
import sys
import unicodedata

HEADER = re.compile(r"^=== PAIR (?P<id>[A-Za-z0-9_.-]+-\d{4}) \| form: (?P<form>[^|]+?) \| setting: "
                    r"(?P<setting>[^|]+?) \| hard: (?P<hard>yes|no) \| crossed: (?P<crossed>yes|no)\s*$")
TURN = re.compile(r"^(?P<target>>> )?(?P<spk>[A-E]): (?P<text>\S.*)$")
FORMS = {"ironic praise", "mock enthusiasm", "ironic agreement", "mocking rhetorical question",
         "mock surprise", "ironic thanks", "ironic understatement", "overstatement for effect",
         "like-prefixed", "ironic self-praise"}
MIN_TURNS, MAX_TURNS = 4, 10
MAX_TARGET_WORDS, MAX_TURN_WORDS = 20, 30
STAGE = re.compile(r"[\(\*\[].*?(laugh|sarcas|iron|sigh|eye|smil|grin|lach|seufz)", re.I)


class ParseError(Exception):
    pass


def words(text):
    return len(text.split())


def parse_scene(lines, where):
    turns = []
    for n, line in lines:
        m = TURN.match(line)
        if not m:
            raise ParseError(f"{where}: line {n}: not a turn ('A: words' or '>> A: words'): {line!r}")
        if m["target"] and n != lines[-1][0]:
            raise ParseError(f"{where}: line {n}: the target line (>>) must be the last of its scene")
        turns.append({"speaker": m["spk"], "text": m["text"].strip()})
    if not lines or not TURN.match(lines[-1][1])["target"]:
        raise ParseError(f"{where}: the scene must end with the target line ('>> A: ...')")
    if not MIN_TURNS <= len(turns) <= MAX_TURNS:
        raise ParseError(f"{where}: {len(turns)} turns; a scene has {MIN_TURNS}-{MAX_TURNS} with the target")
    if len({t["speaker"] for t in turns}) < 2:
        raise ParseError(f"{where}: only one speaker; at least two must speak")
    target = turns[-1]["text"]
    if words(target) > MAX_TARGET_WORDS:
        raise ParseError(f"{where}: target has {words(target)} words (at most {MAX_TARGET_WORDS})")
    for t in turns:
        if words(t["text"]) > MAX_TURN_WORDS:
            raise ParseError(f"{where}: a turn has {words(t['text'])} words (at most {MAX_TURN_WORDS})")
        if STAGE.search(t["text"]) or any(ch in t["text"] for ch in "*[]"):
            raise ParseError(f"{where}: stage direction or markup in {t['text']!r}: only spoken words")
    return turns


def parse_file(path):
    """Pairs of one batch file, in order. Raises ParseError naming the line on any defect."""
    text = open(path, encoding="utf-8").read()
    pairs, cur, part, buf = [], None, None, []

    def close_part():
        nonlocal buf
        if cur is not None and part is not None:
            cur[part] = parse_scene(buf, f"{os.path.basename(path)}: {cur['id']} {part}")
        buf = []

    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.startswith("=== PAIR"):
            close_part()
            m = HEADER.match(line)
            if not m:
                raise ParseError(f"{os.path.basename(path)}: line {n}: bad header {line!r}")
            form = m["form"].strip().lower()
            if form not in FORMS:
                raise ParseError(f"{os.path.basename(path)}: line {n}: unknown form {form!r}; one of {sorted(FORMS)}")
            cur = {"id": m["id"], "form": form, "setting": m["setting"].strip(),
                   "hard": m["hard"] == "yes", "crossed": m["crossed"] == "yes"}
            pairs.append(cur)
            part = None
        elif line in ("--- S", "--- N"):
            if cur is None:
                raise ParseError(f"{os.path.basename(path)}: line {n}: scene before any '=== PAIR' header")
            close_part()
            part = line[-1]
            if (part == "S") == ("S" in cur) or (part == "N" and "S" not in cur):
                raise ParseError(f"{os.path.basename(path)}: line {n}: each pair is '--- S' then '--- N'")
        else:
            if part is None:
                raise ParseError(f"{os.path.basename(path)}: line {n}: text outside a scene: {line!r}")
            buf.append((n, line))
    close_part()
    for p in pairs:
        if "S" not in p or "N" not in p:
            raise ParseError(f"{os.path.basename(path)}: {p['id']}: needs both '--- S' and '--- N'")
        a, b = norm(p["S"][-1]["text"]).split(), norm(p["N"][-1]["text"]).split()
        if len(set(a) ^ set(b)) > 6:
            raise ParseError(f"{os.path.basename(path)}: {p['id']}: the two target lines differ too much "
                             "(same words, or a word or two changed)")
    ids = [p["id"] for p in pairs]
    if len(ids) != len(set(ids)):
        raise ParseError(f"{os.path.basename(path)}: a pair id is used twice")
    return pairs


def norm(text):
    t = unicodedata.normalize("NFKC", text).lower()
    return re.sub(r"[^\w\s]", "", t).strip()


def cmd_check(a):
    total = 0
    for path in a.files:
        try:
            pairs = parse_file(path)
        except ParseError as e:
            print(f"ERROR {e}")
            return 1
        hard = sum(p["hard"] for p in pairs)
        crossed = sum(p["crossed"] for p in pairs)
        forms = {}
        for p in pairs:
            forms[p["form"]] = forms.get(p["form"], 0) + 1
        targets = [norm(p["S"][-1]["text"]) for p in pairs]
        rep = len(targets) - len(set(targets))
        print(f"{path}: {len(pairs)} pairs ok; hard {hard}, crossed {crossed}, repeated targets {rep}; "
              f"forms {json.dumps(forms, sort_keys=True)}")
        total += len(pairs)
    print(f"total {total} pairs")
    return 0


def load_raw(raw_dir):
    """Every pair of every writer: {writer: [pair, ...]} from raw_dir/<writer>/*.txt."""
    out = {}
    for w in sorted(os.listdir(raw_dir)):
        d = os.path.join(raw_dir, w)
        if not os.path.isdir(d):
            continue
        pairs = []
        for f in sorted(os.listdir(d)):
            if f.endswith(".txt"):
                for p in parse_file(os.path.join(d, f)):
                    p["writer"], p["file"] = w, f
                    pairs.append(p)
        out[w] = pairs
    return out


def scene_id(pair_id, part):
    """A reader-facing id that does not reveal the writer, the pair or the half."""
    return hashlib.sha256(f"{pair_id}/{part}".encode()).hexdigest()[:10]


def render(scene):
    return "\n".join(("" if i < len(scene) - 1 else ">> ") + f"{t['speaker']}: {t['text']}"
                     for i, t in enumerate(scene))


def cmd_deal(a):
    """Blind reading batches for the given writers: single scenes shuffled, the two halves of
    a pair in different batches, one language per batch. Writes the batches and adds their
    scenes to the key (scene id -> pair and half), which readers never see."""
    raw = {w: ps for w, ps in load_raw(a.raw).items() if w in set(a.writers)}
    missing = set(a.writers) - set(raw)
    if missing:
        print(f"ERROR no raw files for {sorted(missing)}")
        return 1
    rng = random.Random(f"{a.seed}/{a.prefix}")
    os.makedirs(a.out, exist_ok=True)
    key_path = a.key
    key = json.load(open(key_path)) if os.path.exists(key_path) else {}
    for lang in ("en", "de"):
        pairs = [p for w, ps in sorted(raw.items()) if w.startswith(lang) for p in ps]
        if not pairs:
            continue
        rng.shuffle(pairs)
        n_batches = max(2, -(-2 * len(pairs) // a.per_batch))
        batches = [[] for _ in range(n_batches)]
        for i, p in enumerate(pairs):
            b1 = i % n_batches
            b2 = (b1 + 1 + rng.randrange(n_batches - 1)) % n_batches  # never the same batch
            for part, b in (("S", b1), ("N", b2)):
                sid = scene_id(p["id"], part)
                if sid in key:
                    print(f"ERROR scene {p['id']}/{part} was dealt before")
                    return 1
                key[sid] = {"pair": p["id"], "part": part, "batch": f"{a.prefix}-{lang}-{b:02d}"}
                batches[b].append((sid, p[part]))
        for j, b in enumerate(batches):
            rng.shuffle(b)
            with open(os.path.join(a.out, f"{a.prefix}-{lang}-{j:02d}.txt"), "w", encoding="utf-8") as f:
                for sid, scene in b:
                    f.write(f"### {sid}\n{render(scene)}\n\n")
        print(f"{lang}: {2 * len(pairs)} scenes in {n_batches} batches")
    with open(key_path + ".tmp", "w") as f:
        json.dump(key, f, indent=0, sort_keys=True)
    os.replace(key_path + ".tmp", key_path)
    return 0


def read_labels(reads_dir):
    """Every reader's labels: {scene id: (label, reason, reader)} from reads/<reader>/*.tsv."""
    out = {}
    for reader in sorted(os.listdir(reads_dir)):
        d = os.path.join(reads_dir, reader)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if not f.endswith(".tsv"):
                continue
            for n, line in enumerate(open(os.path.join(d, f), encoding="utf-8"), 1):
                if not line.strip():
                    continue
                parts = line.rstrip("\n").split("\t")
                if len(parts) < 2 or parts[1].strip() not in ("S", "N", "U"):
                    raise ParseError(f"{reader}/{f}: line {n}: expected 'id<TAB>S|N|U<TAB>why': {line!r}")
                out[parts[0].strip()] = (parts[1].strip(), parts[2].strip() if len(parts) > 2 else "", reader)
    return out


def shingles(scene, n=3):
    w = norm(" ".join(t["text"] for t in scene)).split()
    return {tuple(w[i:i + n]) for i in range(max(1, len(w) - n + 1))}


def kappa(a, b):
    """Cohen's kappa of two boolean lists."""
    a, b = [bool(x) for x in a], [bool(x) for x in b]
    n = len(a)
    po = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    return (po - pe) / (1 - pe) if pe < 1 else 1.0


def cmd_build(a):
    """Merge writers' pairs and readers' labels into the scene set: a scene is kept when its
    reader gave the writer's label (S for the sarcastic half, N for the sincere one); a
    scene whose text nearly repeats an earlier kept one (word 3-gram Jaccard >= 0.8, same
    target) is dropped as a duplicate. Prints agreement and counts; writes the set."""
    raw = load_raw(a.raw)
    key = json.load(open(a.key))
    back = {(v["pair"], v["part"]): k for k, v in key.items()}
    labels = read_labels(a.reads)
    out, stats = [], {}
    seen = {}  # normalised target -> [shingles of kept scenes]
    for w in sorted(raw):
        lang = w[:2]
        for p in raw[w]:
            for part in ("S", "N"):
                sid = back.get((p["id"], part))
                lab = labels.get(sid)
                st = stats.setdefault(lang, {"written": 0, "read": 0, "agree": 0, "contradict": 0, "unsure": 0,
                                             "duplicate": 0, "writer": [], "reader": []})
                st["written"] += 1
                rec = {"id": f"{p['id']}-{part}", "pair": p["id"], "part": part, "writer": w, "lang": lang,
                       "form": p["form"], "setting": p["setting"], "hard": p["hard"], "crossed": p["crossed"],
                       "turns": p[part], "reader": lab[2] if lab else None, "reader_label": lab[0] if lab else None,
                       "reader_reason": lab[1] if lab else None, "kept": False, "dropped": "unread"}
                if lab:
                    st["read"] += 1
                    st["writer"].append(part == "S")
                    st["reader"].append(lab[0] == "S")
                    if lab[0] == part:
                        st["agree"] += 1
                        tgt = norm(p[part][-1]["text"])
                        sh = shingles(p[part])
                        dup = any(len(sh & o) / max(1, len(sh | o)) >= 0.8 for o in seen.get(tgt, []))
                        if dup:
                            st["duplicate"] += 1
                            rec["dropped"] = "duplicate"
                        else:
                            seen.setdefault(tgt, []).append(sh)
                            rec["kept"], rec["dropped"] = True, None
                    elif lab[0] == "U":
                        st["unsure"] += 1
                        rec["dropped"] = "reader unsure"
                    else:
                        st["contradict"] += 1
                        rec["dropped"] = "reader contradicts"
                out.append(rec)
    kept = {(r["pair"], r["part"]) for r in out if r["kept"]}
    pairs = {r["pair"] for r in out}
    for lang, st in stats.items():
        k = kappa(st["writer"], st["reader"]) if st["read"] else float("nan")
        full = sum(1 for p in pairs if p.startswith(lang) and (p, "S") in kept and (p, "N") in kept)
        print(f"{lang}: written {st['written']}, read {st['read']}, reader agrees {st['agree']}, contradicts "
              f"{st['contradict']}, unsure {st['unsure']}, duplicates dropped {st['duplicate']}; kappa (S vs rest) "
              f"{k:.3f}; complete pairs kept {full}")
    with open(a.out, "wb") as raw_f, gzip.GzipFile(fileobj=raw_f, mode="wb", mtime=0, filename="") as f:
        for r in out:  # mtime 0: the same scenes give the same bytes
            f.write((json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
    print(f"wrote {len(out)} scenes ({sum(r['kept'] for r in out)} kept) to {a.out}")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("files", nargs="+")
    d = sub.add_parser("deal")
    d.add_argument("--raw", required=True)
    d.add_argument("--out", required=True)
    d.add_argument("--key", required=True, help="scene id -> pair and half (kept from readers)")
    d.add_argument("--writers", nargs="+", required=True)
    d.add_argument("--prefix", required=True, help="names this wave's batches")
    d.add_argument("--per-batch", type=int, default=500)
    d.add_argument("--seed", type=int, default=48)
    b = sub.add_parser("build")
    b.add_argument("--raw", required=True)
    b.add_argument("--reads", required=True)
    b.add_argument("--key", required=True)
    b.add_argument("--out", required=True)
    a = ap.parse_args()
    return {"check": cmd_check, "deal": cmd_deal, "build": cmd_build}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
