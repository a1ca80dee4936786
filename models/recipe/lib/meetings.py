"""Meeting lines for training and measuring the text view (issue 38): our AMI labels
(models/labels/), folds that hold out whole meeting series, and the figures a room with
rare sarcasm needs (ROC-AUC, the share of plain lines flagged and the recall at each
operating point, false flags per meeting hour, precision among each meeting's top lines),
with intervals from a bootstrap over meetings.
"""
import re

import numpy as np
from sklearn.metrics import roc_auc_score

from models.labels import labels  # the annotation reader and gold labels

from .metrics import prf

N_FOLDS = 5


def ami_text(t):
    """AMI transcript -> what a recogniser writes: spelled letters joined ("L_C_D_" ->
    "LCD"), no underscores, single spaces."""
    t = re.sub(r"\b((?:[A-Za-z]_){2,})", lambda m: m.group(1).replace("_", ""), t)
    return " ".join(t.replace("_", "").split())


class Meetings:
    """Every line of every annotated AMI meeting, in reading order."""

    def __init__(self, ami_dir=None):
        self.rows = labels.gold_lines(ami_dir) if ami_dir else labels.gold_lines()
        self.text = [ami_text(r["text"]) for r in self.rows]
        lab = np.array([r["label"] for r in self.rows])
        self.y = lab == "sarcastic"
        self.unsure = lab == "unsure"
        self.plain = lab == "plain"
        self.series = np.array([r["series"] for r in self.rows])
        self.meeting = np.array([r["meeting"] for r in self.rows])
        self.fold = series_folds(self.series, self.y)
        # Meeting length in hours (first start to last end), for false flags per hour.
        self.hours = {}
        for m in np.unique(self.meeting):
            rs = [r for r, mm in zip(self.rows, self.meeting) if mm == m]
            t0 = min(r["start_s"] for r in rs if r["start_s"] is not None)
            t1 = max(r["end_s"] for r in rs if r["end_s"] is not None)
            self.hours[m] = (t1 - t0) / 3600.0

    def previous(self, k=1):
        """The k-th previous line of the same meeting ('' at its start)."""
        return [self.text[i - k] if i - k >= 0 and self.meeting[i - k] == self.meeting[i] else ""
                for i in range(len(self.rows))]

    def total_hours(self):
        return float(sum(self.hours.values()))


def series_folds(series, y, n_folds=N_FOLDS):
    """Fold of each line: whole series per fold, series dealt (most sarcastic lines first,
    then by name) to the fold with the fewest sarcastic lines, then the fewest lines, so
    every fold holds out whole teams and a fair share of the rare class."""
    pos, n = {}, {}
    for s, yy in zip(series, y):
        pos[s] = pos.get(s, 0) + int(yy)
        n[s] = n.get(s, 0) + 1
    load, lines, fold_of = [0] * n_folds, [0] * n_folds, {}
    for s in sorted(pos, key=lambda s: (-pos[s], s)):
        k = min(range(n_folds), key=lambda k: (load[k], lines[k], k))
        fold_of[s] = k
        load[k] += pos[s]
        lines[k] += n[s]
    return np.array([fold_of[s] for s in series])


# --- figures for rare sarcasm -------------------------------------------------------------
def top_k_hits(p, y, meeting, k=3):
    """Per meeting: (sarcastic lines among its k highest-scored lines, k or fewer)."""
    out = {}
    for m in np.unique(meeting):
        i = np.where(meeting == m)[0]
        top = i[np.argsort(-p[i], kind="stable")[:k]]
        out[m] = (int(y[top].sum()), len(top))
    return out


def at_threshold(p, y, thr):
    """Plain lines flagged (share), sarcastic caught (recall), precision, macro-F1 at `thr`."""
    flag = p >= thr
    m = prf(y, flag)
    neg = ~y
    return {"threshold": float(thr) if np.ndim(thr) == 0 else None, "plain_flagged": float(flag[neg].mean()), "recall": float(flag[y].mean()),
            "precision": float(y[flag].mean()) if flag.any() else float("nan"), "flagged": int(flag.sum()),
            "caught": int((flag & y).sum()), "false_flags": int((flag & neg).sum()),
            "f1_macro": m["f1_macro"], "precision_macro": m["precision_macro"], "recall_macro": m["recall_macro"]}


def budget_threshold(p_plain, share):
    """The lowest threshold that flags at most `share` of these plain scores."""
    p = np.sort(np.asarray(p_plain))[::-1]
    k = int(np.floor(share * len(p)))
    if k <= 0:
        return float(np.nextafter(p[0], np.inf))
    return float(np.nextafter(p[k], np.inf)) if k < len(p) else float(p[-1])


def rare_figures(p, y, meeting, hours, thresholds, draws=1000, seed=13):
    """AUC, each operating point and top-3 precision, with 95 % intervals from a bootstrap
    over meetings. `thresholds`: {name: threshold or array of per-line thresholds}."""
    p, y, meeting = np.asarray(p, float), np.asarray(y, bool), np.asarray(meeting)
    ms = np.unique(meeting)
    idx = {m: np.where(meeting == m)[0] for m in ms}
    tk = top_k_hits(p, y, meeting)

    def thr_of(name):
        t = thresholds[name]
        return t if np.ndim(t) else np.full(len(p), t)

    def point(sel, name, h):
        t = thr_of(name)[sel]
        flag = p[sel] >= t
        ys = y[sel]
        return {"plain_flagged": flag[~ys].mean(), "recall": flag[ys].mean() if ys.any() else np.nan,
                "precision": ys[flag].mean() if flag.any() else np.nan, "false_per_hour": (flag & ~ys).sum() / h}

    def figures(sample):
        sel = np.concatenate([idx[m] for m in sample])
        f = {"auc": roc_auc_score(y[sel], p[sel]) if 0 < y[sel].sum() < len(sel) else np.nan}
        hits = [tk[m] for m in sample]
        f["top3_precision"] = sum(h for h, _ in hits) / sum(n for _, n in hits)
        for name in thresholds:
            # Hours of the sample as drawn: a meeting drawn twice counts twice.
            for k, v in point(sel, name, sum(hours[m] for m in sample)).items():
                f[f"{name}.{k}"] = v
        return f

    est = figures(ms)
    rng = np.random.default_rng(seed)
    boot = [figures(rng.choice(ms, len(ms), replace=True)) for _ in range(draws)]
    out = {}
    for k, v in est.items():
        b = np.array([x[k] for x in boot], float)
        b = b[~np.isnan(b)]
        out[k] = {"value": float(v), "ci95": [float(np.percentile(b, 2.5)), float(np.percentile(b, 97.5))] if len(b) else None}
    out["n_lines"], out["n_sarcastic"], out["n_meetings"] = int(len(p)), int(y.sum()), int(len(ms))
    out["hours"] = float(sum(hours[m] for m in ms))
    for name in thresholds:
        out[f"{name}.counts"] = at_threshold(p, y, thr_of(name))
    return out


def random_baseline_top3(y, meeting):
    """Expected precision among 3 lines drawn at random per meeting."""
    hits = tot = 0.0
    for m in np.unique(meeting):
        i = meeting == m
        k = min(3, int(i.sum()))
        hits += k * y[i].mean()
        tot += k
    return hits / tot
