"""Meeting-only text heads (issue 38, exploratory; nothing here is served).

The questions: how far do our AMI labels carry a text head when the sitcom corpora are left
out (the shipped v3 must keep its MUStARD++ leave-one-show-out AUC, which holds it at
share 1); do word n-grams add what the sentence embedding misses; and does the situation
help: the lines before (in meetings the cue is often what just happened) or the speaker's
own previous line?

Candidates (each a logistic regression, class-balanced, `unsure` lines positives at half
weight, as the recipe trains v3):
- `emb`: the daemon's USE-m3 embedding (what the text view serves), C in C_EMB;
- `emb+words`: the same, z-averaged with a word 1-2-gram TF-IDF LR (C_WORDS) at weight
  WORD_WEIGHT (z from each model's scores on its own training lines);
- `emb+prev K`: one LR on the line's embedding beside those of the K lines before it in
  the meeting (whoever spoke them), K in CONTEXT_LINES, C in C_CONTEXT;
- `emb+speaker`: the same beside the embedding of the speaker's own previous line.
  A context slot before the meeting's first line (or the speaker's first) is zeros, with
  an indicator column. Only what the daemon has when the line ends: earlier lines' text.

Protocol: the recipe's 5 folds of whole AMI series (models.recipe.lib.meetings), nested:
inside each outer fold's training series, 4 inner series folds choose the candidate (AUC)
and set the operating points (`meeting`: 1 % of plain lines; `meeting_strict`: one false
flag per meeting hour) from the inner out-of-fold plain scores; the outer fold is scored
once. German: our translated lines (models/labels/german), each scored by the outer fold's
model in English and in German. `unsure` lines are left out of every figure.

  models/studies/meeting_only/run.sh
"""
import argparse
import json
import os
import sys
import time

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

from models.labels import annotate
from models.recipe.lib import data, selection
from models.recipe.lib import meetings as mt
from models.recipe.lib.embcache import Embedder
from models.recipe.lib.metrics import baselines

CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "sarcasmd", "text-v3")
LABELS_DIR = os.path.dirname(os.path.abspath(annotate.__file__))
C_EMB = [0.0003, 0.001, 0.003, 0.01]
C_CONTEXT = [0.001, 0.003]
CONTEXT_LINES = [1, 2]
C_WORDS = 1.0
WORD_WEIGHT = [0.3, 0.5, 0.7]
UNSURE_WEIGHT = 0.5
TOTAL_WEIGHT = 1000.0  # the sample weights' sum: C is relative to it


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def auc(y, p):
    return float(roc_auc_score(y, p)) if 0 < np.sum(y) < len(y) else float("nan")


def context_features(M, X):
    """{context name: features of every line}: the line's own embedding and beside it the
    embeddings of earlier lines of its meeting, each with an indicator (zeros where none)."""
    n = len(X)

    def slot(prev_index):
        has = prev_index >= 0
        return [np.where(has[:, None], X[np.maximum(prev_index, 0)], 0.0), has[:, None].astype(X.dtype)]

    def back(k):
        j = np.arange(n) - k
        return np.where((j >= 0) & (M.meeting[np.maximum(j, 0)] == M.meeting), j, -1)

    out = {f"prev {K}": np.hstack([X] + [p for k in range(1, K + 1) for p in slot(back(k))]) for K in CONTEXT_LINES}
    last, spk = {}, np.full(n, -1)
    for i, r in enumerate(M.rows):
        key = (M.meeting[i], r["speaker"])
        spk[i] = last.get(key, -1)
        last[key] = i
    out["speaker"] = np.hstack([X] + slot(spk))
    return out


class Fits:
    """Per split (training lines), the fitted models, so inner and outer folds reuse them."""

    def __init__(self, M, X, text, contexts=None):
        self.M, self.X, self.text = M, X, np.array(text, dtype=object)
        self.y = (M.y | M.unsure).astype(int)
        self.contexts = contexts or {}

    def weights(self, idx):
        y, M = self.y[idx], self.M
        w = np.where(y == 1, 0.5 / max(int(M.y[idx].sum()), 1), 0.5 / max(int((y == 0).sum()), 1))
        w = np.where(M.unsure[idx], w * UNSURE_WEIGHT, w)
        return w / w.sum() * TOTAL_WEIGHT

    def emb(self, tr, C, X=None):
        X = self.X if X is None else X
        sc = StandardScaler().fit(X[tr])
        lr = LogisticRegression(C=C, max_iter=3000).fit(sc.transform(X[tr]), self.y[tr], sample_weight=self.weights(tr))
        z = lr.decision_function(sc.transform(X[tr]))
        return lambda X: (lr.decision_function(sc.transform(X)) - z.mean()) / z.std()

    def words(self, tr):
        v = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True).fit(self.text[tr])
        lr = LogisticRegression(C=C_WORDS, max_iter=3000).fit(v.transform(self.text[tr]), self.y[tr], sample_weight=self.weights(tr))
        z = lr.decision_function(v.transform(self.text[tr]))
        return lambda T: (lr.decision_function(v.transform(T)) - z.mean()) / z.std()

    def scorers(self, tr):
        """{candidate name: (context name, f(features, texts) -> scores)} fitted on the
        lines `tr`; the features are `self.features(context name)` rows."""
        embs = {C: self.emb(tr, C) for C in C_EMB}
        w = self.words(tr)
        out = {f"emb C {C:g}": ("", (lambda e: lambda X, T: e(X))(e)) for C, e in embs.items()}
        for C, e in embs.items():
            for a in WORD_WEIGHT:
                out[f"emb C {C:g} + words {a:g}"] = ("", (lambda e, a: lambda X, T: (1 - a) * e(X) + a * w(T))(e, a))
        for ctx, Xc in self.contexts.items():
            for C in C_CONTEXT:
                out[f"emb+{ctx} C {C:g}"] = (ctx, (lambda e: lambda X, T: e(X))(self.emb(tr, C, Xc)))
        return out

    def features(self, ctx):
        return self.contexts[ctx] if ctx else self.X

    def score(self, scorer, idx):
        ctx, f = scorer
        return f(self.features(ctx)[idx], self.text[idx])


FAMILIES = {"AMI only, USE-m3 LR": lambda n: n.startswith("emb C") and "words" not in n,
            "AMI only, USE-m3 LR + word n-gram LR": lambda n: n.startswith("emb C"),
            "AMI only, USE-m3 LR + the lines before (1 or 2)": lambda n: n.startswith("emb+prev"),
            "AMI only, USE-m3 LR + the speaker's previous line": lambda n: n.startswith("emb+speaker")}


def nested(F):
    """Outer series folds; per family (FAMILIES), the candidate and the thresholds chosen
    on inner folds of the training series only. Returns per family: scores, thresholds,
    choices, and the outer fold models (for German)."""
    M = F.M
    ev = ~M.unsure
    shares = {"meeting": 0.01, "meeting_strict": M.total_hours() / max(int(M.plain.sum()), 1)}
    out = {fam: (np.zeros(len(M.y)), {k: np.zeros(len(M.y)) for k in shares}, [], {}) for fam in FAMILIES}
    for k in range(mt.N_FOLDS):
        tr, te = np.where(M.fold != k)[0], np.where(M.fold == k)[0]
        inner = mt.series_folds(M.series[tr], M.y[tr], mt.N_FOLDS - 1)
        inner_p = {}
        for j in range(mt.N_FOLDS - 1):
            itr, ite = tr[inner != j], inner == j
            for name, f in F.scorers(itr).items():
                inner_p.setdefault(name, np.zeros(len(tr)))[ite] = F.score(f, tr[ite])
        ok = ev[tr]
        fitted = F.scorers(tr)
        for fam, admits in FAMILIES.items():
            p, thr, choice, outer = out[fam]
            best = selection.best(sorted(n for n in inner_p if admits(n)), lambda n: auc(M.y[tr][ok], inner_p[n][ok]))[0]
            for name, share in shares.items():
                thr[name][te] = mt.budget_threshold(inner_p[best][M.plain[tr]], share)
            p[te] = F.score(fitted[best], te)
            outer[k] = fitted[best]
            choice.append({"fold": k, "chosen": best, "inner_auc": auc(M.y[tr][ok], inner_p[best][ok])})
            log(f"{fam}: fold {k}: {best}, inner AUC {choice[-1]['inner_auc']:.3f}")
    return out


def german(F, emb, outer, thr):
    path = os.path.join(LABELS_DIR, "german", "ami_de.jsonl")
    if not os.path.exists(path):
        return None
    M = F.M
    de = data.read_jsonl(path)
    pos = {r["id"]: i for i, r in enumerate(M.rows)}
    idx = np.array([pos[r["id"]] for r in de])
    if any(ctx for ctx, _ in outer.values()):
        return None  # the German set holds single lines: their context is not translated
    X_de, T_de = emb([r["text_de"] for r in de]), np.array([r["text_de"] for r in de], dtype=object)
    p_en, p_de = np.zeros(len(idx)), np.zeros(len(idx))
    for k, scorer in outer.items():
        sel = M.fold[idx] == k
        p_en[sel] = F.score(scorer, idx[sel])
        p_de[sel] = scorer[1](X_de[sel], T_de[sel])
    ev = ~M.unsure[idx]
    y = M.y[idx][ev]
    out = {"n": int(ev.sum()), "n_sarcastic": int(y.sum())}
    for lang, p in (("en", p_en[ev]), ("de", p_de[ev])):
        out[lang] = {"auc": auc(y, p), "meeting": mt.at_threshold(p, y, thr["meeting"][idx][ev])}
    return out


def ci(f, key, scale=100.0, digits=1):
    v = f[key]
    lo, hi = v["ci95"] or (float("nan"), float("nan"))
    return f"{scale * v['value']:.{digits}f} [{scale * lo:.{digits}f}, {scale * hi:.{digits}f}]"


def write_report(path, res, v3):
    """The markdown report beside the JSON; `v3` is the shipped head's own nested row
    (models/studies/meeting_text/MEETING_TEXT.json), measured on the same folds."""
    rows = [("v3 as shipped (sitcom part + AMI share 1; nested, from MEETING_TEXT.json)", v3["meeting"]["nested"],
             v3["german"]["new"] if v3.get("german") else None)]
    rows += [(fam, {**r["figures"], **r["counts"]}, r["german"]) for fam, r in res["rows"].items()]
    L = ["# Meeting-only text heads: word n-grams and the lines before beside the embedding (issue 38, exploratory)", "",
         "Generated by `models/studies/meeting_only/run.sh` "
         f"({res['seconds'] / 60:.0f} min on one shared core). Nothing here is served. Percent; 95 % intervals from a "
         "bootstrap over meetings. Protocol and candidates: the docstring of `meeting_only.py`. Every figure is nested: "
         "the candidate and both thresholds were chosen on inner folds of the outer fold's training series. "
         f"AMI, our labels: {res['counts']['lines']} lines, {res['counts']['sarcastic']} sarcastic, "
         f"{res['counts']['unsure']} unsure (left out of every figure).", "",
         "| head | AUC | top-3 precision | `meeting`: plain flagged | recall (caught) | precision | "
         "`meeting_strict`: plain flagged | recall (caught) | German AUC (en on the same lines) |",
         "|---|---|---|---|---|---|---|---|---|"]
    for name, f, de in rows:
        mc, sc = f["meeting.counts"], f["meeting_strict.counts"]
        g = f"{100 * de['de']['auc']:.1f} ({100 * de['en']['auc']:.1f})" if de else "-"
        L.append(f"| {name} | {ci(f, 'auc')} | {ci(f, 'top3_precision')} | {ci(f, 'meeting.plain_flagged', digits=2)} | "
                 f"{ci(f, 'meeting.recall')} ({mc['caught']}) | {ci(f, 'meeting.precision')} | "
                 f"{ci(f, 'meeting_strict.plain_flagged', digits=2)} | {ci(f, 'meeting_strict.recall')} ({sc['caught']}) | {g} |")
    b = res["baselines"]
    L += ["", f"Baselines: random top-3 precision {100 * b['random_top3']:.2f}; random AUC 50. "
          f"A perfect ranker's top-3 precision: {100 * b['perfect_top3']:.1f} (only {b['meetings_with_sarcasm']} of "
          f"{b['meetings']} meetings hold a sarcastic line, and few hold three).",
          "", "Chosen inside each outer fold:", ""]
    for fam, r in res["rows"].items():
        L.append(f"- {fam}: " + "; ".join(f"fold {c['fold']}: {c['chosen']} (inner AUC {100 * c['inner_auc']:.1f})" for c in r["choice"]))
    L += ["", "Targets of issue 38 (series out): AUC >= 92; at the meeting point (<= 1 % plain flagged) recall >= 50 %; "
          "top-3 precision >= 25 %.", ""]
    with open(path, "w") as f:
        f.write("\n".join(L))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True, help="the report (.md; a .json beside it)")
    ap.add_argument("--v3", default="models/studies/meeting_text/MEETING_TEXT.json", help="the shipped head's study figures")
    a = ap.parse_args()
    t0 = time.time()
    emb = Embedder(a.bin, CACHE)
    M = mt.Meetings()
    X = emb(M.text)
    F = Fits(M, X, [t.lower() for t in M.text], context_features(M, X))
    ev = ~M.unsure
    res = {"counts": {"lines": int(len(M.y)), "sarcastic": int(M.y.sum()), "unsure": int(M.unsure.sum())}, "rows": {}}
    for fam, (p, thr, choice, outer) in nested(F).items():
        # No `default` point: these scores are z-scored logits, not calibrated probabilities.
        figs = mt.rare_figures(p[ev], M.y[ev], M.meeting[ev], M.hours, {n: t[ev] for n, t in thr.items()})
        res["rows"][fam] = {"figures": {k: v for k, v in figs.items() if not k.endswith(".counts")},
                            "counts": {k: v for k, v in figs.items() if k.endswith(".counts")},
                            "choice": choice, "german": german(F, emb, outer, thr)}
    # What a perfect ranker reaches: most meetings hold fewer than three sarcastic lines.
    perfect = mt.top_k_hits(M.y[ev].astype(float), M.y[ev], M.meeting[ev]).values()
    res["baselines"] = {"random_top3": mt.random_baseline_top3(M.y[ev], M.meeting[ev]),
                        "perfect_top3": sum(h for h, _ in perfect) / sum(n for _, n in perfect),
                        "meetings_with_sarcasm": int(len(np.unique(M.meeting[M.y]))), "meetings": int(len(M.hours)),
                        **baselines(M.y[ev], seed=13)}
    res["seconds"] = time.time() - t0
    with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
        json.dump(res, f, indent=1, default=float)
    write_report(a.out, res, json.load(open(a.v3)))
    log(f"done in {res['seconds']:.0f} s")


if __name__ == "__main__":
    main()
