"""Text-view figures under the issue's protocols, with the daemon's own embeddings.

Manifests come from `scripts/manifests.py` (docs/manifest.md lists every split).
Embeddings come from `sarcasmd embed` (with `--context-s` for the context condition, so
the context text is built by the same Rust code `sarcasmd eval` uses).

1. MUStARD++ 5-fold: the manifest's folds (stratified, grouped by scene, seed 13).
   Out-of-fold P/R/macro-F1/acc for each training composition (an extra corpus's
   *training* split added to every training fold), without context and with 15 s of
   context (train and test both see context). C is chosen by an inner 3-fold CV on the
   training folds only; the test fold is never used for a choice.
2. MUStARD speaker-independent: a head trained on `mustard-si.train` (MUStARD minus
   FRIENDS, plus MUStARD++ minus its FRIENDS scenes and minus the scenes MUStARD
   already has), C by inner grouped CV on that set, exported beside the shipped
   audio/video/fusion heads into <work>/heads-mustard-si, and scored on
   `mustard-si.test` (every FRIENDS item) by `sarcasmd eval --heads` (the real pipeline).

3. Official splits (MMSD2.0, iSarcasmEval EN, SarcNet): a text head per corpus trained
   on its own training split (C on its dev split where it has one, else by inner
   3-fold CV on the training split), exported like the SI head and scored on the
   official test split by `sarcasmd eval --heads --split test`. SarcNet's head learns
   its text label (`labels.text`): the text view sees the text only.

The composition compared on MUStARD++ is chosen there and then reused for the SI head,
so the SI test never takes part in a choice.

  models/studies/protocols/protocols.sh        # the wrapper: venv, build, manifests, this script
"""
import json
import os
import random
import shutil
import subprocess
import sys

import numpy as np
from sklearn.model_selection import StratifiedGroupKFold

from models.recipe.lib import selection
from models.recipe.lib.data import read_jsonl
from models.recipe.lib.heads import SEED, TEXT_FEATURE_VERSION, arg_parser, embed, fit_lr, predict, text_keys, write_head
from models.recipe.lib.metrics import baselines, prf, row
from models.recipe.lib.selection import C_LADDER, C_START, grid_search

# The C search (selection.grid_search): half-decade steps of C, starting on the middle
# three and growing past whichever edge wins.
# Extra corpora (training splits only) and the cap on items taken from each, so a
# composition costs minutes, not an hour (seeded sample).
EXTRAS = {
    "figlang": (["figlang2020-reddit", "figlang2020-twitter"], "train"),
    "isarcasmeval": (["isarcasmeval-en"], "train"),
    "sarcasm_sign": (["sarcasm_sign"], "train"),
    "mmsd2.0": (["mmsd2.0"], "train"),
    "headlines": (["news_headlines"], None),
}
EXTRA_CAP = 6000


def choose_C(X, y, groups, n_in):
    """Inner CV over the training rows only; extra-corpus rows (index >= n_in) stay in
    every inner training fold and are never scored."""
    Xin, yin, gin = X[:n_in], y[:n_in], groups[:n_in]
    Xex, yex = X[n_in:], y[n_in:]
    cv = StratifiedGroupKFold(n_splits=3, shuffle=True, random_state=SEED)

    def score(C):
        pred = np.zeros(len(yin))
        for tr, te in cv.split(Xin, yin, gin):
            m = fit_lr(np.vstack([Xin[tr], Xex]), np.concatenate([yin[tr], yex]), C)
            pred[te] = predict(m, Xin[te])
        return prf(yin, pred >= 0.5)["f1_macro"]
    return grid_search(score)[0]


def extra_rows(manifests, name):
    files, split = EXTRAS[name]
    rows = []
    for f in files:
        for r in read_jsonl(os.path.join(manifests, f + ".jsonl")):
            if split is None or r.get("split") == split:
                if r.get("text") and r.get("label") is not None and r.get("language", "en") == "en":
                    rows.append({"id": r["id"], "text": r["text"], "label": int(r["label"])})
    random.Random(SEED).shuffle(rows)
    return rows[:EXTRA_CAP]


def mustardpp_cv(a, mpp, extras_cache, compositions, contexts):
    y = np.array([int(r["label"]) for r in mpp])
    groups = np.array([r.get("group", r["id"]) for r in mpp])
    folds = sorted({r["split"] for r in mpp})
    fold_of = np.array([r["split"] for r in mpp])
    results = []
    for ctx in contexts:
        X = embed(a.bin, mpp, a.work, "mpp", ctx)
        for comp in compositions:
            Xex = np.zeros((0, X.shape[1]), np.float32)
            yex = np.zeros(0, int)
            for name in comp:
                rows = extras_cache[name]
                Xex = np.vstack([Xex, embed(a.bin, rows, a.work, name)])
                yex = np.concatenate([yex, [r["label"] for r in rows]])
            pred = np.zeros(len(y))
            Cs = []
            for f in folds:
                tr, te = fold_of != f, fold_of == f
                Xtr = np.vstack([X[tr], Xex])
                ytr = np.concatenate([y[tr], yex])
                C = choose_C(Xtr, ytr, np.concatenate([groups[tr], ["x"] * len(yex)]), int(tr.sum()))
                Cs.append(C)
                pred[te] = predict(fit_lr(Xtr, ytr, C), X[te])
            m = prf(y, pred >= 0.5)
            label = "+".join(["MUStARD++"] + list(comp))
            print(f"mpp CV ctx={ctx} {label}: macro-F1 {m['f1_macro']:.3f} C={Cs}", file=sys.stderr, flush=True)
            results.append({"context_s": ctx, "composition": list(comp), "label": label, "C_per_fold": Cs, "metrics": m})
    return results, baselines(y)


def mustard_si(a, manifests, extras_cache, comp, ctx):
    train = read_jsonl(os.path.join(manifests, "mustard-si.train.jsonl"))
    X = embed(a.bin, train, a.work, "si-train", ctx)
    y = np.array([int(r["label"]) for r in train])
    groups = np.array([r.get("group", r["id"]) for r in train])
    n_in = len(y)
    for name in comp:
        rows = extras_cache[name]
        X = np.vstack([X, embed(a.bin, rows, a.work, name)])
        y = np.concatenate([y, [r["label"] for r in rows]])
        groups = np.concatenate([groups, ["x"] * len(rows)])
    C = choose_C(X, y, groups, n_in)
    model = fit_lr(X, y, C)
    heads = os.path.join(a.work, "heads-mustard-si" + ("-ctx" if ctx else ""))
    export_with_shipped(a, heads, model,
               {"train": f"mustard-si.train ({n_in} items: MUStARD minus FRIENDS, MUStARD++ minus FRIENDS and minus MUStARD's scenes)"
                         + (f" + {'+'.join(comp)} training splits (<= {EXTRA_CAP} each)" if comp else "")
                         + (f"; text with {ctx:g} s of context" if ctx else ""),
                "C": C, "selection": "inner 3-fold StratifiedGroupKFold on the training set, seed 13",
                "item_text_sha8": text_keys(train + [r for n in comp for r in extras_cache[n]])})
    out_json = os.path.join(a.work, f"eval-mustard-si{'-ctx' if ctx else ''}.json")
    table = subprocess.run([a.bin, "eval", os.path.join(manifests, "mustard-si.test.jsonl"), "--heads", heads,
                            "--json", out_json, "--context-s", str(ctx or 15)],
                           check=True, capture_output=True, text=True).stdout
    return C, table, out_json


# Corpora with an official test split: (manifest, label key, where C is chosen).
OFFICIAL = [
    ("mmsd2.0", "label", "dev"),
    ("isarcasmeval-en", "label", "cv"),
    ("sarcnet", "labels.text", "dev"),
]


def label_of(r, key):
    return r["labels"]["text"] if key == "labels.text" else r["label"]


def export_with_shipped(a, heads, model, training):
    """A protocol text head beside the shipped audio/video/fusion heads (eval's T row uses
    only the text head)."""
    os.makedirs(heads, exist_ok=True)
    for f in os.listdir(a.heads):
        if f.endswith((".onnx", ".json")) and not f.startswith("text_head"):
            shutil.copy(os.path.join(a.heads, f), heads)
    write_head(heads, "text_head", model, TEXT_FEATURE_VERSION, training, {}, "protocol-" + os.path.basename(heads).removeprefix("heads-"))


def official_split(a, name, key, how_chosen):
    """Train on the corpus's own training split, score its official test by `sarcasmd eval`."""
    rows = [r for r in read_jsonl(os.path.join(a.manifests, name + ".jsonl")) if r.get("text")]
    train = [r for r in rows if r.get("split") == "train"]
    X = embed(a.bin, train, a.work, name + "-train")
    y = np.array([int(label_of(r, key)) for r in train])
    if how_chosen == "dev":
        dev = [r for r in rows if r.get("split") == "dev"]
        Xd, yd = embed(a.bin, dev, a.work, name + "-dev"), np.array([int(label_of(r, key)) for r in dev])
        C, f1 = grid_search(lambda C: prf(yd, predict(fit_lr(X, y, C), Xd) >= 0.5)["f1_macro"])
        tried = ", ".join(f"{c:g}: {100 * f1[c]:.1f}" for c in sorted(f1))
        how = f"C by macro-F1 on the dev split ({len(dev)} items; {tried})"
    else:
        C = choose_C(X, y, np.array([r.get("group", r["id"]) for r in train]), len(y))
        how = "C by inner 3-fold StratifiedGroupKFold on the training split, seed 13"
    heads = os.path.join(a.work, "heads-" + name)
    export_with_shipped(a, heads, fit_lr(X, y, C),
                        {"train": f"{name} official training split ({len(train)} items, label `{key}`)", "C": C,
                         "selection": how, "item_text_sha8": text_keys(train)})
    out_json = os.path.join(a.work, f"eval-{name}.json")
    table = subprocess.run([a.bin, "eval", os.path.join(a.manifests, name + ".jsonl"), "--split", "test",
                            "--heads", heads, "--json", out_json],
                           check=True, capture_output=True, text=True).stdout
    print(f"official {name}: C={C}", file=sys.stderr, flush=True)
    return len(train), C, how, table


def main():
    ap = arg_parser("--heads")
    ap.add_argument("--context-s", type=float, default=15.0)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)

    mpp = read_jsonl(os.path.join(a.manifests, "mustard_plus_plus.jsonl"))
    extras_cache = {n: extra_rows(a.manifests, n) for n in EXTRAS}
    singles = [()] + [(n,) for n in EXTRAS]
    results, base = mustardpp_cv(a, mpp, extras_cache, singles, [0.0])
    best = selection.best(results, lambda r: r["metrics"]["f1_macro"])[0]
    comp = tuple(best["composition"])
    # Context measured on the base composition and on the best one.
    ctx_comps = [()] + ([comp] if comp else [])
    ctx_results, _ = mustardpp_cv(a, mpp, extras_cache, ctx_comps, [a.context_s])
    results += ctx_results

    rep = ["# Text view under the issue's protocols\n",
           "Generated by `models/studies/protocols/protocols.sh` (seed 13). Percent; P and R are macro averages over both classes.\n",
           "## MUStARD++ 5-fold (manifest folds fold0-fold4, stratified, grouped by scene)\n",
           f"Extra corpora: their training splits, English only, at most {EXTRA_CAP} items each (seeded sample), in every training fold. "
           f"C per fold by inner 3-fold CV on the training folds (grid {C_LADDER[C_START[0]:C_START[1]]}, grown by "
           f"half-decades past an edge that wins, within {C_LADDER[0]:g}-{C_LADDER[-1]:g}; the same search everywhere below). "
           "Context: the item's preceding turns, the last "
           f"{a.context_s:g} s at 2.5 words/s (the rule `sarcasmd eval` uses), in training and test alike.\n",
           "| training set | context | P | R | macro-F1 | acc |", "|---|---|---|---|---|---|"]
    for r in results:
        m = r["metrics"]
        ctx = f"{r['context_s']:g} s" if r["context_s"] else "none"
        rep.append(f"| {r['label']} | {ctx} | {100*m['precision_macro']:.1f} | {100*m['recall_macro']:.1f} | "
                   f"{100*m['f1_macro']:.1f} | {100*m['accuracy']:.1f} |")
    rep.append(row("random baseline | -", base["random"]))
    rep.append(row("majority baseline | -", base["majority"]))
    rep.append(f"\nBest composition on this CV (no context): {best['label']} (chosen on this CV: optimistic by the selection).\n")

    si_ctx = [0.0, a.context_s]
    rep.append("## MUStARD speaker-independent (test = all 356 FRIENDS items), by `sarcasmd eval`\n")
    for ctx in si_ctx:
        C, table, js = mustard_si(a, a.manifests, extras_cache, comp, ctx)
        rep.append(f"### Text head trained {'with' if ctx else 'without'} context (training set MUStARD-SI train"
                   f"{' + ' + '+'.join(comp) if comp else ''}, C={C})\n")
        rep.append("The T row without context is the protocol figure for the head trained without context; "
                   "the T row with context is the figure for the head trained with it.\n" if not ctx else "")
        rep.append(table)
    rep.append("## Official test splits, a head trained on each corpus's own training split, by `sarcasmd eval`\n")
    rep.append("Each head sees only its corpus's training split (label in the heading); the test split is scored "
               "once by `sarcasmd eval --split test --heads`. The rows for context, per-modality labels and annotators "
               "are eval's own; the T row without context is the protocol figure.\n")
    for name, key, how_chosen in OFFICIAL:
        n, C, how, table = official_split(a, name, key, how_chosen)
        rep.append(f"### {name}: {n} training items, label `{key}`, C={C} ({how})\n")
        rep.append(table)
    with open(a.out, "w") as f:
        f.write("\n".join(rep) + "\n")
    with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
        json.dump({"mustardpp_cv": results, "baselines": base}, f, indent=1)
    print("\n".join(rep))


if __name__ == "__main__":
    main()
