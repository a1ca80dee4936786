"""Sentence embeddings by the daemon's own encoder (`sarcasmd embed`), cached on disk as
one float32 matrix and its keys, so 100,000+ meeting lines load in a second (the JSON
lines cache of text_head_v2 grows to gigabytes at that size).

Key = the first 16 hex digits of SHA-256 of the text, as text_head_v2.Embedder keys it.
"""
import hashlib
import json
import os
import subprocess

import numpy as np


def key(text):
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Embedder:
    def __init__(self, bin_, cache_dir, name="usem3"):
        self.bin = bin_
        os.makedirs(cache_dir, exist_ok=True)
        self.vec_path = os.path.join(cache_dir, f"{name}.vectors.npy")
        self.key_path = os.path.join(cache_dir, f"{name}.keys.json")
        self.keys, self.V = [], np.zeros((0, 512), np.float32)
        if os.path.exists(self.vec_path) and os.path.exists(self.key_path):
            self.keys = json.load(open(self.key_path))
            self.V = np.load(self.vec_path)
            if len(self.keys) != len(self.V):  # a torn write: start again
                self.keys, self.V = [], np.zeros((0, 512), np.float32)
        self.index = {k: i for i, k in enumerate(self.keys)}

    def __call__(self, texts):
        todo = {}
        for t in texts:
            k = key(t)
            if k not in self.index:
                todo[k] = t
        if todo:
            base = self.vec_path + ".tmp"
            inp, out = base + ".in.jsonl", base + ".out.jsonl"
            with open(inp, "w", encoding="utf-8") as f:
                for k, t in sorted(todo.items()):
                    f.write(json.dumps({"id": k, "text": t}, ensure_ascii=False) + "\n")
            subprocess.run([self.bin, "embed", "--in", inp, "--out", out], check=True, stderr=subprocess.DEVNULL)
            got = [json.loads(line) for line in open(out, encoding="utf-8")]
            new = np.array([g["embedding"] for g in got], np.float32).reshape(len(got), -1)
            self.V = np.vstack([self.V, new]) if len(self.V) else new
            for g in got:
                self.index[g["id"]] = len(self.keys)
                self.keys.append(g["id"])
            # Vectors first, keys last: a crash in between leaves lengths that disagree,
            # which the loader treats as no cache.
            np.save(self.vec_path + ".part.npy", self.V)
            os.replace(self.vec_path + ".part.npy", self.vec_path)
            with open(self.key_path + ".part", "w") as f:
                json.dump(self.keys, f)
            os.replace(self.key_path + ".part", self.key_path)
            os.remove(inp)
            os.remove(out)
        return self.V[[self.index[key(t)] for t in texts]]
