"""The text_candidates study (issue 22; exploratory): all-MiniLM-L6-v2 beside USE-m3, and
plain-dialogue negatives, under text head v2's protocols. What is compared and how:
models/studies/textlib/candidates.py (shared with mpnet_probe).

  models/studies/text_candidates/text_candidates.sh [--data DIR]
"""
import argparse
import json
import os
import time

from models.recipe.lib import text_v2 as v2
from models.recipe.lib.metrics import baselines
from models.studies.textlib.candidates import (CONTEXT_RECIPES, KEYS, Concat, MiniLMEmbedder, final_rows,
                                               protocol_material, run_encoders, selection_rows, write_md)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--manifests", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--minilm", required=True, help="dir with model.safetensors and tokenizer.json")
    ap.add_argument("--out", required=True, help="the report (.md; a .json beside it)")
    ap.add_argument("--cache", default=os.path.join(os.path.dirname(v2.CACHE), "text-candidates"))
    a = ap.parse_args()
    t0 = time.time()
    os.makedirs(a.cache, exist_ok=True)
    usem3 = v2.Embedder(a.bin, v2.CACHE)
    minilm = MiniLMEmbedder(a.minilm, a.cache)
    encoders = {"usem3": usem3, "minilm": minilm, "usem3+minilm": Concat(usem3, minilm)}
    material = protocol_material(a.manifests, a.bin, usem3)
    # usem3 with plain-dialogue negatives: its own selection among those recipes.
    results, P_by = run_encoders(a.manifests, encoders, material, CONTEXT_RECIPES)

    P = P_by["usem3"]
    shipped = results["usem3"][0]
    base_lines = {k: baselines(P.y(k), seed=13) for k in KEYS}
    out = {"seconds": time.time() - t0, "keys": KEYS, "baselines": base_lines, "meeting_whisper": material[3], "rows": [],
           "selection": selection_rows(results)}
    out["rows"] = final_rows(P_by, [("usem3", shipped)] + [(e, rs[-1]) for e, rs in results.items()], shipped)
    out["audit"] = {e: P_by[e].audit for e in P_by}
    with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
        json.dump(out, f, indent=1)
    write_md(a.out, out)
    v2.log(f"done in {(time.time() - t0) / 60:.1f} min")


if __name__ == "__main__":
    main()
