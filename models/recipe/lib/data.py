"""Readers for the corpora in ../shared/data, producing one documented row format.

Row: {"id", "text", "label" (1 sarcastic / 0 not), "source", "group", and for speech
"audio" (absolute path)}. `group` keeps items that must stay on the same side of a split
together (same scene / episode).
"""
import csv
import json
import os
import re

def norm_text(s):
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", "", s.lower())).strip()


def mustard_pp(data_dir):
    rows = []
    path = os.path.join(data_dir, "mustard_plus_plus", "mustard++_text.csv")
    with open(path, encoding="utf-8") as f:
        for r in csv.DictReader(f):
            key = r["KEY"]
            # One malformed row carries an emotion in KEY (see SOURCES.md); it is the
            # utterance of its scene.
            if not key.endswith("_u") and not (key == "Disgust" and r["SCENE"] == "1_S11E03_067"):
                continue
            if r["Sarcasm"] in ("", None):
                continue
            rows.append({
                "id": f"mpp:{r['SCENE']}",
                "text": r["SENTENCE"].strip(),
                "label": int(float(r["Sarcasm"])),
                "source": "mustard++",
                "group": r["SCENE"],
                "show": r["SHOW"],
            })
    return rows


def figlang(data_dir, part, split="training"):
    path = os.path.join(data_dir, "figlang2020_sarcasm", part,
                        f"sarcasm_detection_shared_task_{part}_{split}.jsonl")
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            r = json.loads(line)
            rows.append({
                "id": f"figlang-{part}-{split}:{i}",
                "text": r["response"].replace("@USER", "").replace("<URL>", "").strip(),
                "label": 1 if r["label"] == "SARCASM" else 0,
                "source": f"figlang-{part}",
                "group": f"figlang-{part}:{i}",
            })
    return rows


def isarcasm_train(data_dir):
    path = os.path.join(data_dir, "isarcasmeval", "train", "train.En.csv")
    rows = []
    with open(path, encoding="utf-8") as f:
        for r in csv.DictReader(f):
            t = (r.get("tweet") or "").strip()
            if not t:
                continue
            rows.append({"id": f"isarc:{r['']}", "text": t, "label": int(r["sarcastic"]),
                         "source": "isarcasmeval", "group": f"isarc:{r['']}"})
    return rows


def speech(data_dir):
    """The labelled real-speech clips: House extension + MUStARD++ samples."""
    rows = []
    base = os.path.join(data_dir, "speech", "house_mustardpp_ext")
    with open(os.path.join(base, "labels.csv"), encoding="utf-8") as f:
        for r in csv.DictReader(f):
            ep = r["key"].split("_")[1]  # S01E01: clips of one episode share scenes
            rows.append({"id": f"house:{r['key']}", "text": r["utterance"], "label": int(r["sarcasm"]),
                         "source": "house", "group": f"house:{ep}",
                         "audio": os.path.abspath(os.path.join(base, r["audio"])),
                         "video": os.path.abspath(os.path.join(base, r["video"])) if r.get("video") else None})
    base = os.path.join(data_dir, "speech", "mustardpp_samples")
    with open(os.path.join(base, "labels.csv"), encoding="utf-8") as f:
        for r in csv.DictReader(f):
            rows.append({"id": f"mppwav:{r['key']}", "text": r["utterance"], "label": int(r["sarcasm"]),
                         "source": "mustardpp_samples", "group": f"mppwav:{r['key']}",
                         "scene": r["key"][:-2] if r["key"].endswith("_u") else r["key"],
                         "audio": os.path.abspath(os.path.join(base, r["file"]))})
    return rows


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]
