"""Room head by simulation (issue 37, item 4): can a handful of user corrections in a
meeting room lower the text head's false flags in the room's later meetings without
costing sarcastic recall?

Rooms. An AMI meeting series with at least two meetings (ES/IS/TS scenario teams, a-d, and
the natural series EN2001 a/b/d/e); single-meeting series (EN2003-5, IB*, IN*) cannot give
a "later meeting" and are left out. Each room's first floor(n/2) meetings (time order:
a, then b) are its correction meetings; the rest are its test meetings, the same for
every k, so every figure at k is paired with k = 0.

Base head (no leakage). The shipped text head saw every AMI meeting, so each room is
scored by the head of the series-out fold that holds its series out (base.py: the shipped
candidate, v2 sitcom part + AMI share 1, C 0.001, seed 13, on meetings.series_folds), at
that fold's operating points set on its training part only (nested inner OOF quantile:
`meeting` = at most 1 % of plain lines flagged; `default` = 0.5).

Corrections (what a user sees). Walking the correction meetings in time order: every line
the base head flags at the operating point becomes a correction with its gold label
(plain -> "not sarcastic", sarcastic -> "sarcastic"; a flagged `unsure` line gets no
click), and each missed sarcastic line is reported with probability REPORT_P (seeded), at
its place in time. The first k corrections are used, k in K; a room with fewer uses all it
has (the per-room counts are in the report).

Methods (z0 = the base head's logit, t0 = the operating point's logit):
  A  naive: sklearn logistic regression (C 1, class-balanced) over [embedding, z0], fit on
     the corrections of flagged lines only; its probability replaces the score (the base
     head when the corrections hold one class only).
  B0 room offset: z = z0 + clip(b, +-cap), b the L2-penalised (lambda_b) logistic
     offset fit on the corrections (a learned per-room threshold shift).
  B  offset logistic correction: z = z0 + clip(w.x + b, +-cap), x the centred unit
     embedding, (w, b) minimise the corrections' log-loss with z0 as offset plus
     lambda_w/2 |w|^2 + lambda_b/2 b^2 (a fixed penalty: with few corrections the prior
     toward 0 dominates; with no corrections z = z0 exactly).
  C  near-duplicate suppression: a line whose cosine (raw USE-m3 embeddings) to a line
     marked plain is >= t gets z = min(z, t0) - 0.05 (just below the operating point).
  D  B, then C.
Hyper-parameters (lambda, cap, t) are chosen per outer fold on the rooms of the OTHER
folds only (each scored by its own series-out head): the configuration with the fewest
pooled plain flags over k in {5, 10, 20} among those that catch at least as many
sarcastic lines as k = 0 (else the most caught, then the fewest plain flags).

Figures per method x k, pooled over rooms' test meetings (unsure lines excluded): plain-flag
rate, sarcastic recall, ROC-AUC, with 95 % intervals from a bootstrap over rooms (2,000
draws), and the paired change against k = 0 (plain-flag ratio, recall difference) over the
same draws.

  models/studies/room_feedback/run.sh
  (= python -m models.studies.room_feedback.room_feedback --manifests ~/.cache/sarcasmd/manifests
     --bin target/release/sarcasmd --out models/studies/room_feedback/ROOM_FEEDBACK.md)
"""
import argparse
import itertools
import json
import os
import time

import numpy as np
from scipy.optimize import minimize
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from models.recipe.lib import meetings as mt
from models.studies.room_feedback import base as basemod
from models.studies.room_feedback import report, sitcom

K = [0, 5, 10, 20, 50]
TUNE_K = [5, 10, 20]
REPORT_P = 0.5
SEED = 13
DRAWS = 2000
DELTA = 0.05
OPS = ["meeting", "default"]
NO_B = 1e9  # lambda_b so large the intercept stays 0: the correction is w.x only
GRID = {
    "A": [{}],
    "B0": [{"lam_b": lb, "cap": c} for lb in (3.0, 10.0, 30.0, 100.0, 300.0) for c in (0.5, 1.0, 2.0)],
    "B": [{"lam_w": lw, "lam_b": lb, "cap": c} for lw in (1.0, 3.0, 10.0, 30.0, 100.0) for lb in (30.0, 100.0, 300.0, NO_B)
          for c in (0.5, 1.0, 2.0)],
    "C": [{"t": t} for t in (0.8, 0.85, 0.9, 0.95, 0.97)],
}
GRID["D"] = [{**b, **c} for b in GRID["B"] for c in GRID["C"]]
METHODS = {"base": "k = 0 for every method: the series-out base head",
           "A": "naive: logistic over [embedding, base logit], flagged-line corrections only",
           "B0": "room offset only (a learned, capped threshold shift)",
           "B": "offset logistic correction, L2 toward 0, capped shift",
           "C": "near-duplicate suppression of lines marked plain",
           "D": "B + C"}


def log(*a):
    basemod.log(*a)


def logit(p):
    p = np.clip(np.asarray(p, float), 1e-7, 1 - 1e-7)
    return np.log(p / (1 - p))


# --- rooms and corrections -------------------------------------------------------------------
def rooms_of(M):
    out = []
    for s in sorted(set(M.series)):
        ms = sorted(set(M.meeting[M.series == s]))
        if len(ms) < 2:
            continue
        h = len(ms) // 2
        out.append({"series": s, "fold": int(M.fold[M.series == s][0]), "corr_meetings": ms[:h], "test_meetings": ms[h:]})
    return out


def corrections(M, room, p, thr, rng):
    """(line indices, labels 0/1, flagged?) in time order over the room's correction meetings."""
    idx = np.where(np.isin(M.meeting, room["corr_meetings"]))[0]  # reading order = time order
    out = []
    for i in idx:
        flagged = p[i] >= thr[i]
        if flagged and not M.unsure[i]:
            out.append((i, int(M.y[i]), True))
        elif not flagged and M.y[i] and rng.random() < REPORT_P:
            out.append((i, 1, False))
    return out


# --- the methods -----------------------------------------------------------------------------
def fit_offset(Xc, yc, z0c, lam_w, lam_b):
    """(w, b) minimising sum log-loss(y, z0 + Xw + b) + lam_w/2 |w|^2 + lam_b/2 b^2
    (Xc None: the offset b alone; lam_b >= NO_B: b fixed at 0)."""
    d = Xc.shape[1] if Xc is not None else 0
    fb = lam_b < NO_B

    def f(th):
        w = th[:d]
        b = th[d] if fb else 0.0
        s = z0c + (Xc @ w if d else 0.0) + b
        q = 1 / (1 + np.exp(-s))
        g = q - yc
        val = np.sum(np.logaddexp(0, s) - yc * s) + 0.5 * lam_b * b * b + (0.5 * lam_w * w @ w if d else 0.0)
        grad = [Xc.T @ g + lam_w * w] if d else []
        if fb:
            grad.append([g.sum() + lam_b * b])
        return val, np.concatenate(grad)
    r = minimize(f, np.zeros(d + int(fb)), jac=True, method="L-BFGS-B", options={"maxiter": 1000})
    return (r.x[:d] if d else None), (float(r.x[d]) if fb else 0.0)


def naive(Xraw_c, z0c, yc, Xraw_t, z0t):
    if len(set(yc)) < 2:
        return None
    lr = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000)
    lr.fit(np.column_stack([Xraw_c, z0c]), yc)
    return logit(lr.predict_proba(np.column_stack([Xraw_t, z0t]))[:, 1])


def suppress(z, t0, cos_max, t):
    z = z.copy()
    s = cos_max >= t
    z[s] = np.minimum(z[s], t0) - DELTA
    return z


# --- counts and the bootstrap over rooms ------------------------------------------------------
def room_counts(z, t0, y):
    flag = z >= t0
    return np.array([(flag & ~y).sum(), (~y).sum(), (flag & y).sum(), y.sum()], float)


def auc_parts(zs, ys):
    """Per room r: for each sarcastic line i, #plain lines of every room r' below it (ties
    1/2) -> (C [n_pos, R], room of each positive, n_plain per room)."""
    R = len(zs)
    neg = [np.sort(z[~y]) for z, y in zip(zs, ys)]
    pos, owner = [], []
    for r, (z, y) in enumerate(zip(zs, ys)):
        pos.extend(z[y]); owner.extend([r] * int(y.sum()))
    pos = np.array(pos)
    Cm = np.zeros((len(pos), R))
    for r in range(R):
        lo = np.searchsorted(neg[r], pos, "left")
        hi = np.searchsorted(neg[r], pos, "right")
        Cm[:, r] = lo + 0.5 * (hi - lo)
    return Cm, np.array(owner, int), np.array([len(n) for n in neg], float)


def figures(counts, zs, ys, W):
    """counts [R, 4], score lists; W [draws+1, R] room multiplicities (row 0 = all once).
    Returns arrays [draws+1] of plain-flag rate, recall, AUC."""
    c = W @ counts
    pf = c[:, 0] / c[:, 1]
    rec = np.where(c[:, 3] > 0, c[:, 2] / np.maximum(c[:, 3], 1), np.nan)
    Cm, owner, nneg = auc_parts(zs, ys)
    num = ((W[:, owner] * (W @ Cm.T))).sum(1)
    den = W[:, owner].sum(1) * (W @ nneg)
    auc = np.where(den > 0, num / np.maximum(den, 1), np.nan)
    return pf, rec, auc


def ci(v):
    v = v[1:][~np.isnan(v[1:])]
    return [float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))] if len(v) else None


# --- the simulation -----------------------------------------------------------------------------
def simulate(M, X, B, rooms):
    """For each op and room: the test lines, the corrections and, per k, what each method
    needs to score the test lines (scores() applies a config)."""
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    mu = {f: X[M.fold != f].mean(0) for f in range(mt.N_FOLDS)}   # label-free centring, training part
    z_all = logit(B["p"])
    lam_ws = sorted({c["lam_w"] for c in GRID["B"]})
    lam_bs = sorted({c["lam_b"] for c in GRID["B"]})
    sims = {}
    for op in OPS:
        thr = B["thr_meeting"] if op == "meeting" else np.full(len(M.y), 0.5)
        for ri, room in enumerate(rooms):
            rng = np.random.default_rng([SEED, ri])
            cor = corrections(M, room, B["p"], thr, rng)
            te = np.where(np.isin(M.meeting, room["test_meetings"]) & ~M.unsure)[0]
            t0 = float(logit(thr[te[0]]))
            z0t = z_all[te]
            Xc_t = X[te] - mu[room["fold"]]
            Xc_t /= np.linalg.norm(Xc_t, axis=1, keepdims=True)
            entry = {"te": te, "t0": t0, "z0": z0t, "available": len(cor),
                     "available_flagged": sum(1 for c in cor if c[2]),
                     "available_sarcastic": sum(1 for c in cor if c[1] == 1), "k": {}}
            for k in K:
                use = cor[:k]
                if k == 0 or not use:
                    entry["k"][k] = {"n": 0, "naive": None, "b0": {}, "shift": {}, "cos_max": None}
                    continue
                ci_ = np.array([c[0] for c in use]); yc = np.array([c[1] for c in use], float)
                z0c = z_all[ci_]
                Xcc = X[ci_] - mu[room["fold"]]
                Xcc /= np.linalg.norm(Xcc, axis=1, keepdims=True)
                fl = np.array([c[2] for c in use])
                za = naive(X[ci_][fl], z0c[fl], yc[fl], X[te], z0t) if fl.any() else None
                b0 = {lb: fit_offset(None, yc, z0c, None, lb)[1] for lb in sorted({c["lam_b"] for c in GRID["B0"]})}
                shift = {}
                for lw, lb in itertools.product(lam_ws, lam_bs):
                    w, b = fit_offset(Xcc, yc, z0c, lw, lb)
                    shift[(lw, lb)] = Xc_t @ w + b
                plain_c = ci_[yc == 0]
                cos_max = (Xn[te] @ Xn[plain_c].T).max(1) if len(plain_c) else None
                entry["k"][k] = {"n": len(use), "naive": za, "b0": b0, "shift": shift, "cos_max": cos_max,
                                 "n_plain_marked": int((yc == 0).sum()), "n_sarcastic_marked": int(yc.sum())}
            sims[(op, ri)] = entry
        log(f"simulated op {op}")
    return sims


def scores(e, k, method, cfg):
    """Test logits of one room (sim entry e) after k corrections under method/cfg."""
    s, z0, t0 = e["k"][k], e["z0"], e["t0"]
    if method == "base" or s["n"] == 0:
        return z0
    if method == "A":
        return s["naive"] if s["naive"] is not None else z0
    if method == "B0":
        return z0 + np.clip(s["b0"][cfg["lam_b"]], -cfg["cap"], cfg["cap"])
    z = z0
    if method in ("B", "D"):
        z = z0 + np.clip(s["shift"][(cfg["lam_w"], cfg["lam_b"])], -cfg["cap"], cfg["cap"])
    if method in ("C", "D") and s["cos_max"] is not None:
        z = suppress(z, t0, s["cos_max"], cfg["t"])
    return z


def choose(M, rooms, sims, op, method, fold):
    """The config of `method` for rooms of `fold`, chosen on the other folds' rooms."""
    others = [ri for ri, r in enumerate(rooms) if r["fold"] != fold]
    y = {ri: M.y[sims[(op, ri)]["te"]] for ri in others}
    base = sum(room_counts(sims[(op, ri)]["z0"], sims[(op, ri)]["t0"], y[ri]) for ri in others for k in TUNE_K)
    best = None
    for j, cfg in enumerate(GRID[method]):
        c = sum(room_counts(scores(sims[(op, ri)], k, method, cfg), sims[(op, ri)]["t0"], y[ri])
                for ri in others for k in TUNE_K)
        ok = c[2] >= base[2]
        key = (0 if ok else 1, -c[2] if not ok else 0, c[0] / c[1], j)
        if best is None or key < best[0]:
            best = (key, j, cfg, c)
    return best[1], best[2], {"plain_flag": float(best[3][0] / best[3][1]), "caught": int(best[3][2]),
                              "caught_k0": int(base[2]), "plain_flag_k0": float(base[0] / base[1])}


def grid_all_rooms(M, rooms, sims, op, method):
    """Every config's pooled figures on all rooms, beside a plain threshold raise making
    as many false flags (inspection only: never a choice)."""
    R = range(len(rooms))
    zs0 = [sims[(op, ri)]["z0"] for ri in R]
    t0s = [sims[(op, ri)]["t0"] for ri in R]
    ys = [M.y[sims[(op, ri)]["te"]] for ri in R]
    base = sum(room_counts(z, t, y) for z, t, y in zip(zs0, t0s, ys))
    out = []
    for j, cfg in enumerate(GRID[method]):
        row = {"config": cfg}
        for k in TUNE_K:
            c = sum(room_counts(scores(sims[(op, ri)], k, method, cfg), t0s[ri], ys[ri]) for ri in R)
            row[str(k)] = {"plain_flag_ratio": float(c[0] / base[0]), "caught": int(c[2]), "caught_k0": int(base[2]),
                           "caught_matched_raise": matched_raise(zs0, t0s, ys, int(c[0]))[1]}
        out.append(row)
    return out


def suppressed_texts(M, rooms, sims, op, method, pick, k):
    """The test lines whose flag the chosen config of `method` removed at k: text ->
    [plain, sarcastic] counts (what the room head learns to mute)."""
    out = {}
    for ri, room in enumerate(rooms):
        e = sims[(op, ri)]
        z = scores(e, k, method, pick[room["fold"]][1])
        gone = (e["z0"] >= e["t0"]) & (z < e["t0"])
        for i in e["te"][gone]:
            c = out.setdefault(M.text[i], [0, 0])
            c[int(M.y[i])] += 1
    return dict(sorted(out.items(), key=lambda kv: (-sum(kv[1]), kv[0]))[:40])


def matched_raise(zs0, t0s, ys, false_flags):
    """Recall of the base head with one logit shift of every room's threshold, chosen so it
    makes the same pooled number of false flags: what a plain threshold raise would buy."""
    d = np.concatenate([z - t for z, t in zip(zs0, t0s)])
    y = np.concatenate(ys)
    neg = np.sort(d[~y])[::-1]
    if false_flags <= 0:
        s = np.nextafter(neg[0], np.inf)
    elif false_flags >= len(neg):
        s = neg[-1]
    else:
        s = np.nextafter(neg[false_flags], np.inf)
    return float((d[y] >= s).mean()), int((d[y] >= s).sum()), float(s)


def evaluate(M, rooms, sims):
    R = len(rooms)
    rng = np.random.default_rng(SEED)
    W = np.vstack([np.ones(R)] + [np.bincount(rng.integers(0, R, R), minlength=R) for _ in range(DRAWS)]).astype(float)
    res = {"figures": {}, "choices": {}, "grid": {}}
    for op in OPS:
        ys = [M.y[sims[(op, ri)]["te"]] for ri in range(R)]
        t0s = [sims[(op, ri)]["t0"] for ri in range(R)]
        pick = {m: {f: choose(M, rooms, sims, op, m, f) for f in range(mt.N_FOLDS)} for m in GRID}
        res["choices"][op] = {m: {str(f): {"config": pick[m][f][1], "on_other_folds": pick[m][f][2]} for f in pick[m]}
                              for m in GRID}
        res["grid"][op] = {m: grid_all_rooms(M, rooms, sims, op, m) for m in (("B0", "B", "C", "D") if op == "meeting" else ("B0", "B", "C"))}
        zs0 = [sims[(op, ri)]["z0"] for ri in range(R)]
        cnt0 = np.array([room_counts(z, t, y) for z, t, y in zip(zs0, t0s, ys)])
        pf0, rec0, auc0 = figures(cnt0, zs0, ys, W)
        tab = {}
        for m in ["base"] + list(GRID):
            for k in (K if m == "base" else K[1:]):
                if m == "base" and k > 0:
                    continue
                if m == "base":
                    zs = zs0
                else:
                    zs = [scores(sims[(op, ri)], k, m, pick[m][rooms[ri]["fold"]][1]) for ri in range(R)]
                cnt = np.array([room_counts(z, t, y) for z, t, y in zip(zs, t0s, ys)])
                pf, rec, auc = figures(cnt, zs, ys, W)
                ratio = pf / pf0
                row = {"k": k, "plain_flag": float(pf[0]), "plain_flag_ci": ci(pf), "recall": float(rec[0]), "recall_ci": ci(rec),
                       "auc": float(auc[0]), "auc_ci": ci(auc),
                       "plain_flag_ratio": float(ratio[0]), "plain_flag_ratio_ci": ci(ratio),
                       "recall_delta": float(rec[0] - rec0[0]), "recall_delta_ci": ci(rec - rec0),
                       "auc_delta": float(auc[0] - auc0[0]), "auc_delta_ci": ci(auc - auc0),
                       "false_flags": int(cnt[:, 0].sum()), "n_plain": int(cnt[:, 1].sum()),
                       "caught": int(cnt[:, 2].sum()), "n_sarcastic": int(cnt[:, 3].sum()),
                       "rooms_with_k": int(sum(sims[(op, ri)]["available"] >= k for ri in range(R))),
                       "mean_corrections_used": float(np.mean([sims[(op, ri)]["k"][k]["n"] for ri in range(R)]))}
                rr, rc, rs = matched_raise(zs0, t0s, ys, row["false_flags"])
                row["matched_raise"] = {"recall": rr, "caught": rc, "logit_shift": rs}
                if m == "A":
                    row["naive_fitted_rooms"] = int(sum(sims[(op, ri)]["k"][k]["naive"] is not None for ri in range(R)))
                tab[f"{m}@{k}"] = row
        res["figures"][op] = tab
        res.setdefault("suppressed", {})[op] = {m: suppressed_texts(M, rooms, sims, op, m, pick[m], 20) for m in ("C", "D")}
        # Context: random flags at the base plain-flag rate catch that share of sarcastic lines.
        res.setdefault("baselines", {})[op] = {
            "random": {"plain_flag": float(pf0[0]), "recall": float(pf0[0]), "auc": 0.5},
            "majority (flag nothing)": {"plain_flag": 0.0, "recall": 0.0, "auc": 0.5}}
    return res


# --- sitcom rooms (secondary; fixed hyper-parameters) --------------------------------------------
SITCOM_OPS = {"default": 0.5, "shipped meeting threshold": None}


def mode_config(choices):
    cfgs = [json.dumps(v["config"], sort_keys=True) for v in choices.values()]
    return json.loads(max(sorted(set(cfgs)), key=cfgs.count))


def sitcom_rooms(a, M, X, cand, res):
    rows, Xs, ys, ps = sitcom.base_scores(a.manifests, a.bin, M, X, cand, basemod.CACHE)
    shipped_thr = json.load(open("models/heads/text_head.json"))["operating_points"]["meeting"]["text_threshold"]
    mu = X.mean(0)
    fixed = {m: mode_config(res["choices"]["meeting"][m]) for m in ("B0", "B", "C", "D")}
    fixed["A"] = {}
    fixed["B-weak"] = {"lam_w": 1.0, "lam_b": 30.0, "cap": 2.0}
    out = {"configs": fixed, "rooms": {}, "figures": {}}
    for op, thr in SITCOM_OPS.items():
        thr = shipped_thr if thr is None else thr
        t0 = float(logit(thr))
        ents = []
        for si, show in enumerate(sitcom.SHOWS):
            n = len(ys[show])
            h = n // 2
            z = logit(ps[show])
            y = ys[show]
            rng = np.random.default_rng([SEED, 100 + si])
            cor = []
            for i in range(h):
                if z[i] >= t0:
                    cor.append((i, int(y[i]), True))
                elif y[i] and rng.random() < REPORT_P:
                    cor.append((i, 1, False))
            te = np.arange(h, n)
            Xn = Xs[show] / np.linalg.norm(Xs[show], axis=1, keepdims=True)
            Xc = Xs[show] - mu
            Xc /= np.linalg.norm(Xc, axis=1, keepdims=True)
            e = {"te": te, "t0": t0, "z0": z[te], "y": y[te], "available": len(cor), "k": {}}
            for k in K:
                use = cor[:k]
                if not use:
                    e["k"][k] = {"n": 0, "naive": None, "b0": {}, "shift": {}, "cos_max": None}
                    continue
                ci_ = np.array([c[0] for c in use]); yc = np.array([c[1] for c in use], float)
                fl = np.array([c[2] for c in use])
                za = naive(Xs[show][ci_][fl], z[ci_][fl], yc[fl], Xs[show][te], z[te]) if fl.any() else None
                b0 = {fixed["B0"]["lam_b"]: fit_offset(None, yc, z[ci_], None, fixed["B0"]["lam_b"])[1]}
                shift = {}
                for m in ("B", "B-weak"):
                    key = (fixed[m]["lam_w"], fixed[m]["lam_b"])
                    w, b = fit_offset(Xc[ci_], yc, z[ci_], *key)
                    shift[key] = Xc[te] @ w + b
                plain_c = ci_[yc == 0]
                cos_max = (Xn[te] @ Xn[plain_c].T).max(1) if len(plain_c) else None
                e["k"][k] = {"n": len(use), "naive": za, "b0": b0, "shift": shift, "cos_max": cos_max}
            ents.append(e)
            out["rooms"].setdefault(show, {})[op] = {"items": n, "sarcastic": int(y.sum()), "test_items": int(len(te)),
                                                      "test_sarcastic": int(y[te].sum()), "available": len(cor),
                                                      "available_sarcastic": sum(c[1] for c in cor)}
        # bootstrap unit: the test item
        yy = np.concatenate([e["y"] for e in ents])
        units = len(yy)
        rng = np.random.default_rng(SEED)
        W = np.vstack([np.ones(units)] + [np.bincount(rng.integers(0, units, units), minlength=units) for _ in range(DRAWS)]).astype(float)

        def per_item(zs):
            z = np.concatenate(zs)
            return [z[i:i + 1] for i in range(units)], [yy[i:i + 1] for i in range(units)]
        z0s, y1 = per_item([e["z0"] for e in ents])
        cnt0 = np.array([room_counts(z, t0, y) for z, y in zip(z0s, y1)])
        pf0, rec0, auc0 = figures(cnt0, z0s, y1, W)
        tab = {}
        for m in ["base", "A", "B0", "B", "B-weak", "C", "D"]:
            for k in ([0] if m == "base" else K[1:]):
                meth = "B" if m == "B-weak" else m
                zs, _ = per_item([scores(e, k, meth, fixed[m]) if m != "base" else e["z0"] for e in ents])
                cnt = np.array([room_counts(z, t0, y) for z, y in zip(zs, y1)])
                pf, rec, auc = figures(cnt, zs, y1, W)
                tab[f"{m}@{k}"] = {"k": k, "plain_flag": float(pf[0]), "plain_flag_ci": ci(pf), "recall": float(rec[0]),
                                   "recall_ci": ci(rec), "auc": float(auc[0]), "auc_ci": ci(auc),
                                   "plain_flag_ratio": float(pf[0] / pf0[0]), "plain_flag_ratio_ci": ci(np.where(pf0 > 0, pf / np.where(pf0 > 0, pf0, 1), np.nan)),
                                   "recall_delta": float(rec[0] - rec0[0]), "recall_delta_ci": ci(rec - rec0),
                                   "auc_delta": float(auc[0] - auc0[0]), "auc_delta_ci": ci(auc - auc0),
                                   "false_flags": int(cnt[:, 0].sum()), "n_plain": int(cnt[:, 1].sum()),
                                   "caught": int(cnt[:, 2].sum()), "n_sarcastic": int(cnt[:, 3].sum()),
                                   "mean_corrections_used": float(np.mean([e["k"][k]["n"] for e in ents])),
                                   "per_show_auc": {s: float(roc_auc_score(e["y"], z)) for s, e, z in
                                                    zip(sitcom.SHOWS, ents, [scores(e, k, meth, fixed[m]) if m != "base" else e["z0"] for e in ents])}}
        out["figures"][op] = tab
        out.setdefault("thresholds", {})[op] = thr
        log(f"sitcom rooms, op {op}")
    return out


def room_table(M, rooms, sims):
    out = []
    for ri, r in enumerate(rooms):
        te = sims[("meeting", ri)]["te"]
        cm = np.isin(M.meeting, r["corr_meetings"])
        out.append({**r, "corr_sarcastic": int(M.y[cm].sum()), "corr_lines": int(cm.sum()),
                    "test_lines": int(len(te)), "test_sarcastic": int(M.y[te].sum()),
                    "available": {op: sims[(op, ri)]["available"] for op in OPS},
                    "available_flagged": {op: sims[(op, ri)]["available_flagged"] for op in OPS},
                    "available_sarcastic": {op: sims[(op, ri)]["available_sarcastic"] for op in OPS}})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--manifests", default=os.path.expanduser("~/.cache/sarcasmd/manifests"))
    ap.add_argument("--bin", default="target/release/sarcasmd")
    ap.add_argument("--out", default="models/studies/room_feedback/ROOM_FEEDBACK.md")
    ap.add_argument("--no-sitcom", action="store_true", help="skip the MUStARD++ show rooms")
    a = ap.parse_args()
    t0 = time.time()
    M, X, B, cand = basemod.load(a.manifests, a.bin)
    rooms = rooms_of(M)
    log(f"{len(rooms)} rooms")
    sims = simulate(M, X, B, rooms)
    res = evaluate(M, rooms, sims)
    res["rooms"] = room_table(M, rooms, sims)
    if not a.no_sitcom:
        res["sitcom"] = sitcom_rooms(a, M, X, cand, res)
    res["excluded_series"] = sorted(s for s in set(M.series) if s not in {r["series"] for r in rooms})
    res["base"] = {"candidate": cand, "seed": basemod.SEED, "base_fit_seconds": float(B["seconds"]), "base_cached": bool(B["cached"]),
                   "thresholds": {str(f): float(B["thr_meeting"][M.fold == f][0]) for f in range(mt.N_FOLDS)}}
    res["protocol"] = {"K": K, "tune_k": TUNE_K, "report_p": REPORT_P, "seed": SEED, "draws": DRAWS, "delta": DELTA,
                       "grid": GRID, "methods": METHODS}
    res["seconds"] = time.time() - t0
    report.write(a.out, res)
    log(f"done in {res['seconds']:.0f} s")


if __name__ == "__main__":
    main()
