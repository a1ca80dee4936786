#!/usr/bin/env python3
"""Convert every corpus in ../shared/data into manifest JSONL files (docs/manifest.md,
section "Converters"): one file per corpus or protocol, media paths absolute, output sorted
and deterministic (seed 13 for the one fold assignment that is ours). Standard library only
(python3 >= 3.11). The files are written outside the repo: the corpora are not ours to
redistribute.

  python3 scripts/manifests.py                      # -> ${XDG_CACHE_HOME:-~/.cache}/sarcasmd/manifests
  python3 scripts/manifests.py --data ../shared/data --out /tmp/manifests

Every label-quality decision (duplicates dropped, malformed rows, leaking keys) is printed
with its count and documented in docs/manifest.md.
"""
import argparse
import csv
import json
import os
import random
import re
import sys
from collections import Counter, defaultdict

SEED = 13
N_FOLDS = 5
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")


def norm_text(s):
    """The normalisation SOURCES.md and models/recipe/lib/data.py use to find duplicates:
    lowercase, punctuation removed, whitespace collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", "", s.lower())).strip()


def one_line(s):
    """Collapse caption line breaks and runs of spaces into single spaces."""
    return " ".join(s.split())


def notes(log, msg):
    log.append(msg)


class Out:
    """Collects the rows of every output file, then writes and summarises them."""

    def __init__(self):
        self.files = {}  # name -> rows
        self.notes = defaultdict(list)  # name -> label-quality notes with counts

    def add(self, name, rows, note_list=()):
        ids = Counter(r["id"] for r in rows)
        dup = [i for i, n in ids.items() if n > 1]
        if dup:
            raise SystemExit(f"internal error: {name}: duplicate ids {dup[:5]}")
        for r in rows:
            if not any(r.get(k) for k in ("text", "audio", "video")):
                raise SystemExit(f"internal error: {name}: {r['id']} has nothing to score")
        self.files[name] = rows
        self.notes[name].extend(note_list)


# --- MUStARD -------------------------------------------------------------------------

def mustard(data):
    base = os.path.join(data, "mustard")
    with open(os.path.join(base, "sarcasm_data.json"), encoding="utf-8") as f:
        d = json.load(f)
    with open(os.path.join(base, "split_indices.json"), encoding="utf-8") as f:
        splits = json.load(f)
    si_test = set(splits["speaker_independent"]["test"])
    fold_of = {}
    for k, fold in enumerate(splits["folds"]):
        for i in fold["test"]:
            if i in fold_of:
                raise SystemExit(f"mustard/split_indices.json: {i} is in the test part of two folds")
            fold_of[i] = k
    rows = []
    for key in sorted(d, key=natural):
        v = d[key]
        ctx = [{"speaker": s.strip(), "text": t.strip()} if s.strip() else t.strip()
               for t, s in zip(v["context"], v["context_speakers"]) if t.strip()]
        row = {
            "id": f"mustard:{key}",
            "text": v["utterance"].strip(),
            "context": ctx,
            "label": int(bool(v["sarcasm"])),
            "speaker": v["speaker"].strip(),
            "source": "mustard",
            "group": key,
            "split": "test" if key in si_test else "train",
            # Metadata only: it gives the label away for GOLDENGIRLS (39/40 sarcastic) and
            # SARCASMOHOLICS (14/14). Never a feature (docs/manifest.md).
            "show": v["show"],
        }
        if key in fold_of:
            row["cv_fold"] = fold_of[key]
        rows.append(row)
    # The speaker-independent split is "test = FRIENDS"; check the converted indices say so.
    bad = [r["id"] for r in rows if (r["show"] == "FRIENDS") != (r["split"] == "test")]
    if bad:
        raise SystemExit(f"mustard: speaker-independent split is not FRIENDS-vs-rest: {bad[:5]}")
    missing = [r["id"] for r in rows if "cv_fold" not in r]
    log = [f"speaker-independent split: test = FRIENDS ({sum(r['split'] == 'test' for r in rows)})",
           f"cv_fold from split_indices.json folds: {len(rows) - len(missing)} items in a fold test part"
           + (f", {len(missing)} in none" if missing else "")]
    return rows, log


def natural(key):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", key)]


# --- MUStARD++ -----------------------------------------------------------------------

def mustard_pp(data):
    path = os.path.join(data, "mustard_plus_plus", "mustard++_text.csv")
    scenes = defaultdict(list)
    order = []
    with open(path, encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            if r["SCENE"] not in scenes:
                order.append(r["SCENE"])
            scenes[r["SCENE"]].append(r)
    rows, log = [], []
    placeholder_speakers = 0
    for scene in order:
        ctx_rows, utt = [], []
        for r in scenes[scene]:
            m = re.fullmatch(re.escape(scene) + r"_c_(\d+)", r["KEY"])
            if m:
                ctx_rows.append((int(m.group(1)), r))
            elif r["KEY"] == scene + "_u" or r["Sarcasm"] not in ("", None):
                utt.append(r)
        if len(utt) != 1:
            raise SystemExit(f"{path}: scene {scene} has {len(utt)} labelled utterance rows")
        u = utt[0]
        if u["KEY"] != scene + "_u":
            log.append(f"malformed row: scene {scene} has KEY {u['KEY']!r} instead of "
                       f"{scene}_u; read as the scene's utterance (label {u['Sarcasm']})")
        ctx = []
        for _, r in sorted(ctx_rows, key=lambda x: x[0]):
            t = one_line(r["SENTENCE"])
            if not t:
                continue
            sp = speaker_or_none(r["SPEAKER"])
            if sp is None:
                placeholder_speakers += 1
                ctx.append(t)
            else:
                ctx.append({"speaker": sp, "text": t})
        row = {
            "id": f"mpp:{scene}",
            "text": one_line(u["SENTENCE"]),
            "context": ctx,
            "label": int(float(u["Sarcasm"])),
            "source": "mustard++",
            "group": scene,
            "show": u["SHOW"].strip(),  # metadata only, never a feature (see MUStARD)
        }
        sp = speaker_or_none(u["SPEAKER"])
        if sp is not None:
            row["speaker"] = sp
        for key, col in (("emotion_implicit", "Implicit_Emotion"),
                         ("emotion_explicit", "Explicit_Emotion"),
                         ("sarcasm_type", "Sarcasm_Type")):
            if u[col].strip():
                row[key] = u[col].strip()
        for key, col in (("valence", "Valence"), ("arousal", "Arousal")):
            if u[col].strip():
                x = float(u[col])
                row[key] = int(x) if x.is_integer() else x
        rows.append(row)
    rows.sort(key=lambda r: natural(r["group"]))
    folds = stratified_group_folds(rows)
    for r in rows:
        r["split"] = f"fold{folds[r['group']]}"
    log.append(f"context turns with a placeholder speaker ('-' or 'PERSON') written as bare "
               f"strings: {placeholder_speakers}")
    lik = sum(r.get("sarcasm_type") == "LIK" for r in rows)
    log.append(f"sarcasm_type LIK (undocumented by the authors) kept as is: {lik}")
    return rows, log


def speaker_or_none(s):
    s = s.strip()
    return None if s in ("", "-", "PERSON") else s


def stratified_group_folds(rows):
    """5 folds, stratified by label, grouped by `group`: the groups of each class are
    sorted, shuffled with random.Random(13) and dealt round-robin; the dealing position
    carries over from class 0 to class 1 so fold sizes differ by at most one group."""
    label_of = {}
    for r in rows:
        g = r["group"]
        if label_of.setdefault(g, r["label"]) != r["label"]:
            # A group with mixed labels is dealt by its first item's label.
            pass
    rng = random.Random(SEED)
    fold, pos = {}, 0
    for cls in (0, 1):
        groups = sorted((g for g, l in label_of.items() if l == cls), key=natural)
        rng.shuffle(groups)
        for g in groups:
            fold[g] = pos % N_FOLDS
            pos += 1
    return fold


# --- MUStARD speaker-independent protocol --------------------------------------------

def mustard_si(m_rows, pp_rows):
    test = [dict(r, split="test") for r in m_rows if r["show"] == "FRIENDS"]
    m_ids = {r["group"] for r in m_rows}
    train = [dict(r, split="train") for r in m_rows if r["show"] != "FRIENDS"]
    extra, dup_scene, friends = [], 0, 0
    for r in pp_rows:
        if r["show"] == "FRIENDS":
            friends += 1
        elif r["group"] in m_ids:
            dup_scene += 1
        else:
            r = dict(r, split="train")
            r.pop("cv_fold", None)
            extra.append(r)
    train += extra
    for r in train + test:
        r.pop("cv_fold", None)
    test_text = {norm_text(r["text"]) for r in test}
    same_text = sorted(r["id"] for r in train if norm_text(r["text"]) in test_text)
    log = [f"train = MUStARD non-FRIENDS ({len(train) - len(extra)}) + MUStARD++ non-FRIENDS scenes "
           f"that are not MUStARD ids ({len(extra)})",
           f"MUStARD++ left out: FRIENDS {friends}, scene already a MUStARD id {dup_scene}",
           f"train utterances whose normalised text equals an SI-test utterance (different scene, "
           f"kept): {len(same_text)} {same_text}"]
    return train, test, log


# --- MMSD2.0 -------------------------------------------------------------------------

def mmsd(data):
    base = os.path.join(data, "mmsd2.0", "text_json_final")
    parts = {}
    for split in ("train", "valid", "test"):
        with open(os.path.join(base, f"{split}.json"), encoding="utf-8") as f:
            parts[split] = json.load(f)
    test_norm = {norm_text(r["text"]) for r in parts["test"]}
    rows, log = [], []
    for split in ("train", "valid", "test"):
        dropped = empty = 0
        for r in parts[split]:
            text = r["text"].strip()
            if not norm_text(text):
                empty += 1
                continue
            if split != "test" and norm_text(text) in test_norm:
                dropped += 1
                continue
            rows.append({
                "id": f"mmsd2:{r['image_id']}",
                "text": text,
                "label": int(r["label"]),
                "source": "mmsd2.0",
                "split": "dev" if split == "valid" else split,
                "image_id": str(r["image_id"]),
            })
        if split != "test":
            log.append(f"{split}: dropped {dropped} items whose normalised text occurs in test")
        if empty:
            log.append(f"{split}: skipped {empty} items with no word characters")
    log.append(f"test kept intact; distinct normalised test texts also in train: "
               f"{len(test_norm & {norm_text(r['text']) for r in parts['train']})}")
    return sort_rows(rows), log


SPLIT_ORDER = {"train": 0, "dev": 1, "test": 2}


def sort_rows(rows):
    return sorted(rows, key=lambda r: (SPLIT_ORDER.get(r.get("split"), 9), natural(r["id"])))


# --- SarcNet -------------------------------------------------------------------------

def sarcnet(data):
    base = os.path.join(data, "sarcnet", "SarcNet Image-Text")
    parts = {}
    for name, split in (("Train", "train"), ("Val", "dev"), ("Test", "test")):
        with open(os.path.join(base, f"SarcNet{name}.csv"), encoding="gbk", newline="") as f:
            parts[split] = list(csv.DictReader(f))
    test_norm = {norm_text(r["Text"]) for r in parts["test"]}
    rows, log = [], []
    for split in ("train", "dev", "test"):
        dropped = 0
        for i, r in enumerate(parts[split]):
            text = r["Text"].strip()
            if not text:
                continue
            if split != "test" and norm_text(text) in test_norm:
                dropped += 1
                continue
            img = r["Imagepath"].strip()
            rows.append({
                "id": f"sarcnet:{split}:{os.path.splitext(img)[0] or i}",
                "text": text,
                "label": int(r["Multi_label"]),
                "labels": {"text": int(r["Text_label"])},
                "label_image": int(r["Image_label"]),
                "language": "zh" if CJK.search(text) else "en",
                "source": "sarcnet",
                "split": split,
                "image": img,
            })
        if split != "test":
            log.append(f"{split}: dropped {dropped} items whose normalised text occurs in test")
    diff = sum(r["label"] != r["labels"]["text"] for r in rows)
    log.append(f"label (Multi_label) differs from labels.text (Text_label) on {diff} items; "
               f"a text-only model should train on labels.text")
    return sort_rows(rows), log


# --- iSarcasmEval --------------------------------------------------------------------

def isarcasmeval(data):
    base = os.path.join(data, "isarcasmeval")
    rows, log = [], []
    cats = ["sarcasm", "irony", "satire", "understatement", "overstatement", "rhetorical_question"]
    empty = []
    with open(os.path.join(base, "train", "train.En.csv"), encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            text = (r["tweet"] or "").strip()
            if not text:
                empty.append(r[""])
                continue
            row = {"id": f"isarc:{r['']}", "text": text, "label": int(r["sarcastic"]),
                   "source": "isarcasmeval", "split": "train"}
            if (r.get("rephrase") or "").strip():
                row["rephrase"] = r["rephrase"].strip()
            c = [k for k in cats if (r.get(k) or "").strip() in ("1", "1.0")]
            if c:
                row["categories"] = c
            rows.append(row)
    log.append(f"train: skipped {len(empty)} empty tweet(s) (row {', '.join(empty)})")
    with open(os.path.join(base, "test", "task_A_En_test.csv"), encoding="utf-8", newline="") as f:
        test = list(csv.DictReader(f))
    ann_path = os.path.join(base, "third-party annotations", "english_task_a.csv")
    with open(ann_path, encoding="utf-8", newline="") as f:
        ann = list(csv.DictReader(f))

    def crlf(s):
        return s.replace("\r\n", "\n").replace("\r", "\n").strip()

    matched = mismatched = 0
    for i, r in enumerate(test):
        row = {"id": f"isarc-test:{i}", "text": r["text"].strip(), "label": int(r["sarcastic"]),
               "source": "isarcasmeval", "split": "test"}
        # The annotation file lists the test tweets in the same order (with CRLF line ends
        # where the test file has LF); a row is matched only if text and label agree.
        a = ann[i] if i < len(ann) else None
        if a is not None and crlf(a["text"]) == crlf(r["text"]) and a["sarcasm_ref"] == r["sarcastic"]:
            k = int(a["#humans_sarcasm"])
            if not 0 <= k <= 5:
                raise SystemExit(f"{ann_path}: row {i + 2}: #humans_sarcasm {k} is not 0..5")
            row["annotators"] = [1] * k + [0] * (5 - k)
            row["human_aggregated"] = int(a["human_aggregated"])
            matched += 1
        else:
            mismatched += 1
        rows.append(row)
    log.append(f"test: annotators attached to {matched} of {len(test)} items "
               f"(matched by row order and text, CRLF = LF; {mismatched} unmatched, "
               f"{len(ann)} annotation rows)")
    log.append("Arabic (train.Ar, task_A_Ar) and tasks B/C not converted")
    return rows, log


# --- FigLang 2020 --------------------------------------------------------------------

def clean_tweet(s):
    """As models/recipe/lib/data.py figlang(): drop the @USER / <URL> anonymisation tokens."""
    return " ".join(s.replace("@USER", " ").replace("<URL>", " ").split())


def figlang(data, part):
    base = os.path.join(data, "figlang2020_sarcasm", part)
    raw = {}
    for split in ("training", "testing"):
        with open(os.path.join(base, f"sarcasm_detection_shared_task_{part}_{split}.jsonl"),
                  encoding="utf-8") as f:
            raw[split] = [json.loads(l) for l in f if l.strip()]
    log = []
    # Duplicates are found on the text that is written (@USER/<URL> removed), normalised:
    # 7 Twitter responses differ from another only in those tokens.
    def key(r):
        return norm_text(clean_tweet(r["response"]))

    test_norm = {key(r) for r in raw["testing"]}
    raw_dups = sum(v - 1 for v in Counter(norm_text(r["response"]) for r in raw["training"]).values())
    # Within train: keep the first of each normalised response; drop every copy of a
    # response that carries both labels.
    labels_of = defaultdict(set)
    for r in raw["training"]:
        labels_of[key(r)].add(r["label"])
    seen = set()
    dup = conflict = in_test = 0
    keep_train = []
    for i, r in enumerate(raw["training"]):
        n = key(r)
        if len(labels_of[n]) > 1:
            conflict += 1
            continue
        if n in seen:
            dup += 1
            continue
        seen.add(n)
        if n in test_norm:
            in_test += 1
            continue
        keep_train.append((i, r))
    extra = sum(v - 1 for v in Counter(key(r) for r in raw["training"]).values())
    log.append(f"train: {extra} extra copies of a normalised response ({raw_dups} before removing "
               f"@USER/<URL>); dropped {dup} copies (first kept), {conflict} items of "
               f"conflicting-label duplicates (all copies), {in_test} responses also in test")
    test_dup = sum(v - 1 for v in Counter(key(r) for r in raw["testing"]).values())
    log.append(f"test kept intact ({test_dup} duplicate normalised responses in it)")
    rows, empty = [], 0
    for split, items in (("train", keep_train), ("test", list(enumerate(raw["testing"])))):
        for i, r in items:
            text = clean_tweet(r["response"])
            if not text:
                empty += 1
                continue
            ctx = [c for c in (clean_tweet(t) for t in r.get("context") or []) if c]
            rid = r.get("id") or f"{part}_train_{i + 1}"
            rows.append({
                "id": f"figlang-{part}:{rid}",
                "text": text,
                "context": ctx,
                "label": 1 if r["label"] == "SARCASM" else 0,
                "source": f"figlang-{part}",
                "split": split,
            })
    if empty:
        log.append(f"skipped {empty} responses that are empty without @USER/<URL>")
    return rows, log


# --- News headlines ------------------------------------------------------------------

def news(data):
    path = os.path.join(data, "news_headlines_sarcasm", "Sarcasm_Headlines_Dataset.csv")
    rows, first = [], {}
    with open(path, encoding="utf-8", newline="") as f:
        for i, r in enumerate(csv.DictReader(f)):
            text = r["text"].strip()
            if not text:
                continue
            n = norm_text(text)
            g = first.setdefault(n, i)
            rows.append({"id": f"news:{i}", "text": text, "label": int(r["is_sarcastic"]),
                         "source": "news_headlines", "group": f"news:{g}"})
    dups = len(rows) - len(first)
    conflict = 0
    by = defaultdict(set)
    for r in rows:
        by[r["group"]].add(r["label"])
    conflict = sum(len(v) > 1 for v in by.values())
    log = [f"no official split (split left out); {dups} duplicate headlines kept, each copy in "
           f"its first copy's group ({conflict} with conflicting labels)",
           "label = source site (The Onion vs HuffPost): style, not speech-like sarcasm"]
    return rows, log


# --- Sarcasm SIGN --------------------------------------------------------------------

def sarcasm_sign(data):
    base = os.path.join(data, "sarcasm_sign", "corpus")
    parts = {}
    for split in ("train", "dev", "test"):
        with open(os.path.join(base, f"{split}.csv"), encoding="utf-8", newline="") as f:
            parts[split] = [r for r in csv.reader(f) if r]
    held_out = {norm_text(r[0]) for s in ("dev", "test") for r in parts[s]}
    rows, log = [], []
    for split in ("train", "dev", "test"):
        tweets = {}  # sarcastic tweet (stripped) -> list of rewrites, in file order
        for r in parts[split]:
            if len(r) != 2:
                raise SystemExit(f"sarcasm_sign/{split}.csv: a row with {len(r)} columns")
            tweets.setdefault(r[0].strip(), []).append(r[1].strip())
        tweet_norm = {norm_text(t) for t in tweets}
        copies = dup_rw = other_tweet = leak = 0
        for t_idx, (tweet, rewrites) in enumerate(tweets.items()):
            if split == "train" and norm_text(tweet) in held_out:
                leak += 1
                continue
            group = f"sign:{split}:{t_idx}"
            rows.append({"id": group, "text": tweet, "label": 1, "source": "sarcasm_sign",
                         "group": group, "split": split})
            seen = set()
            for j, rw in enumerate(rewrites):
                n = norm_text(rw)
                if not n or n == norm_text(tweet):
                    copies += 1  # the "literal" rewrite is the sarcastic tweet itself
                    continue
                if n in tweet_norm:
                    other_tweet += 1  # equals another sarcastic tweet: conflicting label
                    continue
                if n in seen:
                    dup_rw += 1
                    continue
                seen.add(n)
                rows.append({"id": f"{group}.{j}", "text": rw, "label": 0,
                             "source": "sarcasm_sign", "group": group, "split": split,
                             "rewrite_of": group})
        log.append(f"{split}: {len(parts[split])} lines, {len(tweets)} distinct tweets; dropped "
                   f"rewrites: {copies} identical to their tweet, {dup_rw} repeated, "
                   f"{other_tweet} equal to another sarcastic tweet"
                   + (f"; {leak} train tweets also in dev/test dropped" if split == "train" else ""))
    return rows, log


# --- Speech --------------------------------------------------------------------------

def speech(data):
    """As models/recipe/lib/data.py speech(): same ids, sources and groups."""
    rows = []
    base = os.path.abspath(os.path.join(data, "speech", "house_mustardpp_ext"))
    with open(os.path.join(base, "labels.csv"), encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            ep = r["key"].split("_")[1]  # S01E01: clips of one episode share scenes
            row = {"id": f"house:{r['key']}", "text": r["utterance"].strip(),
                   "audio": os.path.join(base, r["audio"]),
                   "context": [c.strip() for c in r["context"].split("||") if c.strip()],
                   "label": int(r["sarcasm"]), "speaker": r["speaker"].strip(),
                   "source": "house", "group": f"house:{ep}"}
            if r.get("video"):
                row["video"] = os.path.join(base, r["video"])
            if r.get("sarcasm_type", "").strip():
                row["sarcasm_type"] = r["sarcasm_type"].strip()
            rows.append(row)
    base = os.path.abspath(os.path.join(data, "speech", "mustardpp_samples"))
    with open(os.path.join(base, "labels.csv"), encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            key = r["key"]
            row = {"id": f"mppwav:{key}", "text": r["utterance"].strip(),
                   "audio": os.path.join(base, r["file"]), "label": int(r["sarcasm"]),
                   "speaker": r["speaker"].strip(), "source": "mustardpp_samples",
                   "group": f"mppwav:{key}",
                   "scene": key[:-2] if key.endswith("_u") else key}
            if r.get("sarcasm_type", "").strip():
                row["sarcasm_type"] = r["sarcasm_type"].strip()
            rows.append(row)
    missing = [r["id"] for r in rows for k in ("audio", "video") if k in r and not os.path.isfile(r[k])]
    if missing:
        raise SystemExit(f"speech: media files missing for {missing[:5]}")
    log = ["speaker and label are confounded in house (mostly HOUSE himself): speaker is not a feature",
           "mustardpp_samples are also MUStARD++ items (scene = key without _u): do not pool them "
           "with mustard++.jsonl across a split"]
    return rows, log


def speech_cmpt419(data):
    """The 210 MUStARD++ clips with their TV soundtrack and video (speech/mustardpp_cmpt419):
    the second show-apart speech corpus beside House. Grouped by scene (one utterance per
    scene here); `speaker` and `show` kept for speaker-independent and show-apart folds."""
    base = os.path.abspath(os.path.join(data, "speech", "mustardpp_cmpt419"))
    rows = []
    turn = re.compile(r"(?:^|\s)([A-Z][A-Z0-9'.\-]*(?: [A-Z][A-Z0-9'.\-]*)?): ")
    with open(os.path.join(base, "labels.csv"), encoding="utf-8", newline="") as f:
        for r in csv.DictReader(f):
            key = r["key"]
            ctx = r["context"].strip()
            starts = list(turn.finditer(ctx))
            context = []
            for i, m in enumerate(starts):
                end = starts[i + 1].start() if i + 1 < len(starts) else len(ctx)
                text = ctx[m.end():end].strip()
                if text:
                    context.append({"speaker": m.group(1), "text": text})
            if not starts and ctx:
                context.append(ctx)
            row = {"id": f"cmpt419:{key}", "text": r["utterance"].strip(),
                   "audio": os.path.join(base, r["audio"]), "label": int(r["sarcasm"]),
                   "speaker": r["speaker"].strip(), "source": "mustardpp_cmpt419",
                   "group": f"cmpt419:{r['scene']}", "scene": r["scene"], "show": r["show"]}
            if context:
                row["context"] = context
            if r.get("video", "").strip():
                row["video"] = os.path.join(base, r["video"])
            for k, col in (("sarcasm_type", "sarcasm_type"), ("emotion_implicit", "implicit_emotion"),
                           ("emotion_explicit", "explicit_emotion")):
                if r.get(col, "").strip():
                    row[k] = r[col].strip()
            for k in ("valence", "arousal"):
                if r.get(k, "").strip():
                    row[k] = float(r[k])
            rows.append(row)
    missing = [r["id"] for r in rows for k in ("audio", "video") if k in r and not os.path.isfile(r[k])]
    if missing:
        raise SystemExit(f"speech_cmpt419: media files missing for {missing[:5]}")
    log = ["every text is also in mustard++.jsonl (same scene): score a text head trained on "
           "MUStARD++ here only out of fold",
           "8 keys are also in mustardpp_samples (mppwav:); one clip (2_495) holds several turns"]
    return rows, log


# --- main ----------------------------------------------------------------------------

def write(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False, sort_keys=False) + "\n")
    os.replace(tmp, path)


def summary(name, rows):
    n = len(rows)
    s = sum(r.get("label") == 1 for r in rows)
    per = Counter(r.get("split", "-") for r in rows)
    per_s = Counter(r.get("split", "-") for r in rows if r.get("label") == 1)
    order = sorted(per, key=lambda k: (SPLIT_ORDER.get(k, 5), k))
    splits = ", ".join(f"{k} {per[k]} ({per_s[k]})" for k in order)
    return f"{name}: {n} items, {s} sarcastic; per split (sarcastic): {splits}"


def main():
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data"),
                    help="the corpora (default: ../shared/data beside the repo)")
    ap.add_argument("--out", default=os.path.join(cache, "sarcasmd", "manifests"),
                    help="output directory (default: %(default)s)")
    a = ap.parse_args()
    data = os.path.realpath(a.data)
    out = os.path.realpath(a.out)
    if not os.path.isdir(data):
        sys.exit(f"manifests.py: data directory {data} not found; pass --data DIR "
                 f"(the corpora of ../shared/data, see its SOURCES.md)")
    if out == os.path.realpath(REPO) or out.startswith(os.path.realpath(REPO) + os.sep):
        sys.exit(f"manifests.py: refusing to write into the repo ({out}); the corpora are not ours "
                 f"to redistribute. Pass --out outside it.")
    needed = ["mustard", "mustard_plus_plus", "mmsd2.0", "sarcnet", "isarcasmeval",
              "figlang2020_sarcasm", "news_headlines_sarcasm", "sarcasm_sign", "speech"]
    missing = [d for d in needed if not os.path.isdir(os.path.join(data, d))]
    if missing:
        sys.exit(f"manifests.py: {data} lacks {', '.join(missing)}")
    os.makedirs(out, exist_ok=True)

    o = Out()
    m_rows, log = mustard(data)
    o.add("mustard.jsonl", m_rows, log)
    pp_rows, log = mustard_pp(data)
    o.add("mustard_plus_plus.jsonl", pp_rows, log)
    tr, te, log = mustard_si(m_rows, pp_rows)
    o.add("mustard-si.train.jsonl", tr, log)
    o.add("mustard-si.test.jsonl", te)
    o.add("mmsd2.0.jsonl", *mmsd(data))
    o.add("sarcnet.jsonl", *sarcnet(data))
    o.add("isarcasmeval-en.jsonl", *isarcasmeval(data))
    o.add("figlang2020-reddit.jsonl", *figlang(data, "reddit"))
    o.add("figlang2020-twitter.jsonl", *figlang(data, "twitter"))
    o.add("news_headlines.jsonl", *news(data))
    o.add("sarcasm_sign.jsonl", *sarcasm_sign(data))
    o.add("speech.jsonl", *speech(data))
    if os.path.isdir(os.path.join(data, "speech", "mustardpp_cmpt419")):
        o.add("speech_cmpt419.jsonl", *speech_cmpt419(data))

    for name, rows in o.files.items():
        write(os.path.join(out, name), rows)
        print(summary(name, rows))
        for n in o.notes[name]:
            print(f"  - {n}")
    print(f"{len(o.files)} manifests in {out}")


if __name__ == "__main__":
    main()
