"""Exploratory, never served: distillation into the shipped text recipe.

Issue 3 lists distillation among the edge-sized options to try. The stronger text models
measured in EXPLORE_TEXT.md cost the daemon a second encoder; a student in the shipped
recipe's form (USEm3 embedding, standardise, clip, logistic regression) would cost it
nothing. So the teacher here is the strongest frozen model there, USEm3 and MiniLM
embeddings concatenated with a logistic regression, and the student is the shipped
recipe trained on:
- the labelled training items (hard labels, class-balanced weights, as shipped), and
- unlabelled in-domain text: the context turns (preceding dialogue from the same
  shows) of those training items only, each turn entered twice, as sarcastic with weight
  lam * p and as not sarcastic with weight lam * (1 - p), p the teacher's probability.

Rows:
  usem3 LR (shipped recipe)     same-run baseline
  teacher                       the concatenated LR (its C by inner CV)
  student, teacher's labels     the distilled student (C and lam by inner CV)
  student, own labels           control: the same student with the shipped recipe as
                                its own teacher (self-training), so a gain from the
                                extra text alone shows apart from the teacher's

Protocols as in explore_text.py (MUStARD++ 5 manifest folds; MUStARD SI train/test).
Nesting: every fit on a set of training items fits its teacher on those items only
(teacher C by inner 3-fold CV on them) and takes the context turns of those items only,
so the student's inner CV and the outer test fold never see a test item's text or its
context. Context turns of the SI test items are never used.

  models/studies/distill_text/distill_text.sh     # the wrapper: venv, MiniLM wheel, build, manifests
"""
import os
import sys
import time

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from models.studies.textlib import explore as X  # sets the one-thread environment before jax
from models.recipe.lib.data import read_jsonl
from models.recipe.lib.heads import embed, standardise
from models.recipe.lib.metrics import paired_bootstrap, prf

STUDENT_C = [0.001, 0.003, 0.01, 0.03]
LAMBDA = [0.25, 1.0]


class Pool:
    """Context turns of a corpus's items: features and the index of the item they belong to."""
    def __init__(self, owner, feats):
        self.owner, self.f = owner, feats

    def of(self, idx):
        return np.where(np.isin(self.owner, idx))[0]


def load(a, m, name, with_pool=True):
    """A corpus with USEm3 and concatenated features, and (with_pool) its context turns."""
    rows = read_jsonl(os.path.join(a.manifests, name + ".jsonl"))
    use = embed(a.bin, rows, a.work, name)
    emb, _, _ = X.minilm_features(m, [r.get("text") or "" for r in rows], os.path.join(a.work, f"minilm-{name}.npz"))
    c = X.Corpus(rows, {"use": use, "concat": np.hstack([use, emb])})
    if not with_pool:
        return c, None
    turns = [(i, t["text"] if isinstance(t, dict) else t) for i, r in enumerate(rows) for t in (r.get("context") or [])]
    turns = [(i, t) for i, t in turns if t and t.strip()]
    trows = [{"id": f"{rows[i]['id']}#ctx{k}", "text": t} for k, (i, t) in enumerate(turns)]
    tuse = embed(a.bin, trows, a.work, name + "-ctx")
    temb, _, _ = X.minilm_features(m, [r["text"] for r in trows], os.path.join(a.work, f"minilm-{name}-ctx.npz"))
    return c, Pool(np.array([i for i, _ in turns]), {"use": tuse, "concat": np.hstack([tuse, temb])})


class Teachers:
    """A teacher per set of training items (the same sets recur across the student grid),
    its C chosen by the same inner CV as every linear model in explore_text.py."""
    def __init__(self, corpus, key):
        self.c, self.key, self.cache = corpus, key, {}

    def get(self, idx):
        k = idx.tobytes()
        if k not in self.cache:
            _, make, _ = X.choose([(f"C={C}", lambda c, C=C: X.Dense(c, self.key, C)) for C in X.LR_C], self.c, idx)
            self.cache[k] = make(self.c).fit(idx).m
        return self.cache[k]


class Student:
    """The shipped recipe fit on labelled items plus their context turns, soft-labelled."""
    def __init__(self, corpus, pool, teachers, C, lam):
        self.c, self.pool, self.t, self.C, self.lam = corpus, pool, teachers, C, lam

    def fit(self, idx):
        y = self.c.y[idx]
        turns = self.pool.of(idx)
        p = X.predict(self.t.get(idx), self.pool.f[self.t.key][turns])
        Xs = np.vstack([self.c.f["use"][idx], self.pool.f["use"][turns], self.pool.f["use"][turns]])
        ys = np.r_[y, np.ones(len(turns)), np.zeros(len(turns))]
        cw = len(y) / (2 * np.bincount(y, minlength=2))  # class_weight="balanced" on the labelled rows
        w = np.r_[cw[y], self.lam * p, self.lam * (1 - p)]
        self.sc = StandardScaler().fit(Xs[:len(y) + len(turns)])
        self.lr = LogisticRegression(C=self.C, max_iter=5000).fit(standardise(self.sc, Xs), ys, sample_weight=w)
        return self

    def predict(self, idx):
        return self.lr.predict_proba(standardise(self.sc, self.c.f["use"][idx]))[:, 1]


def main():
    a = X.arg_parser().parse_args()
    os.makedirs(a.work, exist_ok=True)
    t_start = time.time()
    m = X.MiniLM(a.minilm, 128)
    mpp, mpp_pool = load(a, m, "mustard_plus_plus")
    (si_tr, si_tr_pool), (si_te, _) = load(a, m, "mustard-si.train"), load(a, m, "mustard-si.test", with_pool=False)
    si_c = si_tr.cat(si_te)
    si = {"corpus": si_c, "n_train": len(si_tr.y)}
    # Each corpus carries its context-turn pool and its teachers (one per feature key).
    # The SI pool holds the training items' turns only (owners index si_c's training rows).
    mpp.pool, si_c.pool = mpp_pool, si_tr_pool
    mpp.teachers, si_c.teachers = {}, {}
    print(f"context turns: MUStARD++ {len(mpp_pool.owner)}, SI train {len(si_tr_pool.owner)}", file=sys.stderr, flush=True)

    def teacher(c, key):
        if key not in c.teachers:
            c.teachers[key] = Teachers(c, key)
        return c.teachers[key]

    def dense(key):
        return [(f"C={C}", lambda c, C=C: X.Dense(c, key, C)) for C in X.LR_C]

    def student(key):
        return [(f"C={C} lam={lam}", lambda c, C=C, lam=lam: Student(c, c.pool, teacher(c, key), C, lam))
                for C in STUDENT_C for lam in LAMBDA]

    runs = {
        "usem3 LR (shipped recipe)": dense("use"),
        "teacher: usem3 + MiniLM concatenated, LR": dense("concat"),
        "student (shipped recipe) on the teacher's labels of the training items' context turns": student("concat"),
        "control: student on its own labels (teacher = shipped recipe)": student("use"),
    }
    results = X.run_protocols(mpp, si, runs)
    intro = ("# Text view: distillation into the shipped recipe, measured (exploratory)\n",
             "Generated by `models/studies/distill_text/distill_text.sh` (seed 13). Nothing here is served. Percent; macro-F1 over "
             "both classes at threshold 0.5, P and R macro averages. The teacher is EXPLORE_TEXT.md's strongest frozen "
             f"model; the student has the shipped head's form and is trained on the labelled training items plus their "
             f"context turns ({len(mpp_pool.owner)} for MUStARD++, {len(si_tr_pool.owner)} for MUStARD SI train) with "
             f"the teacher's probabilities as soft labels; student C in {STUDENT_C} and the turns' weight lam in "
             f"{LAMBDA} by inner 3-fold CV, the teacher refit inside every fit. Design and nesting: "
             "`models/studies/distill_text/distill_text.py`.\n")
    X.write_report(a, results, mpp.y, si_te.y, time.time() - t_start, intro)
    with open(a.out, "a") as f:
        f.write(bootstrap_table(results, mpp.y, si_te.y))


def bootstrap_table(results, y_mpp, y_si):
    _, base_oof, base_si, _, _ = results[0]
    out = ["\nDifference from the first row, macro-F1 points, with a paired bootstrap 95 % interval "
           "(2000 resamples of the items, seed 13; MUStARD++ items are one per scene):\n",
           "| model | MUStARD++ | SI |", "|---|---|---|"]
    for name, oof, p_si, _, _ in results[1:]:
        cells = []
        for y, p, q in ((y_mpp, oof, base_oof), (y_si, p_si, base_si)):
            lo, hi = paired_bootstrap(y, p, q)
            diff = prf(y, p >= 0.5)["f1_macro"] - prf(y, q >= 0.5)["f1_macro"]
            cells.append(f"{100 * diff:+.1f} ({100 * lo:+.1f} to {100 * hi:+.1f})")
        out.append(f"| {name} | {cells[0]} | {cells[1]} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
