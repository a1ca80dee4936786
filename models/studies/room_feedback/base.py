"""Series-out base heads for the room-feedback simulation (issue 37, item 4).

The shipped text head saw all 150 AMI meetings, so it cannot play the "shipped head" of a
simulated room. Here each room is scored by the head of the outer series-out fold that
holds the room's series out (models.recipe.lib.meetings.series_folds, 5 folds), built
with the shipped recipe's candidate (v2 sitcom part + AMI share 1, C 0.001, seed 13:
models/heads/text_head.json "training"). Each fold's operating points come from its
training part only, as the recipe's nested protocol sets them: the 0.99 quantile (and the
strict one) of the inner 4-fold series-out out-of-fold scores of its plain lines.

Cached in ~/.cache/sarcasmd/room-feedback/base-<key>.npz (25 fits: 5 outer + 20 inner).
"""
import hashlib
import json
import os
import time

import numpy as np

from models.recipe import text_head_meetings as thm
from models.recipe.lib import data
from models.recipe.lib import meetings as mt
from models.recipe.lib import text_v2 as v2
from models.recipe.lib.embcache import Embedder
from models.recipe.lib.heads import predict

CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "sarcasmd", "room-feedback")
SEED = 13


def log(*a):
    thm.log(*a)


def shipped_candidate(path="models/heads/text_head.json"):
    t = json.load(open(path))["training"]
    return {"name": t["recipe"], "ami": float(t["ami_share"]), "C": float(t["C"])}


def speech_exclusions(C_, house_features, cmpt_features):
    """The speech protocol's test texts and scenes (as v2.Protocols builds them): the sitcom
    part of every meeting fit leaves them out, so the fits are the recipe's own."""
    norms = set()
    for rows, path in ((C_.house, house_features), (C_.cmpt, cmpt_features)):
        wt = v2.whisper_rows(path, rows)
        keep = [i for i, t in enumerate(wt) if t]
        norms |= {data.norm_text(rows[i]["text"]) for i in keep}
        norms |= {data.norm_text(wt[i]) for i in keep}
    return norms, {r.get("scene") for r in C_.cmpt}


def load(manifests, bin_):
    """(Meetings, X_ami [n, 512], base dict): base["p"] each line's score by its outer
    fold's head, base["thr_meeting"] / ["thr_strict"] per line (its fold's thresholds)."""
    os.makedirs(CACHE, exist_ok=True)
    M = mt.Meetings()
    emb = Embedder(bin_, thm.CACHE)
    X = emb(M.text)
    cand = shipped_candidate()
    key = hashlib.sha256(json.dumps([cand, SEED, len(M.y), int(M.y.sum()), int(M.unsure.sum()),
                                     M.fold.tolist()[:: 97]]).encode()).hexdigest()[:12]
    path = os.path.join(CACHE, f"base-{key}.npz")
    if os.path.exists(path):
        z = np.load(path, allow_pickle=False)
        return M, X, {**{k: z[k] for k in z.files}, "cached": True}, cand
    t0 = time.time()
    C_ = v2.Corpora(manifests, emb)
    xc = os.path.join(os.path.dirname(CACHE), "cross-corpus")
    norms, groups = speech_exclusions(C_, os.path.join(xc, "features-house.jsonl"), os.path.join(xc, "features-cmpt419.jsonl"))
    Xs, ys, ws, _, _ = v2.training_set(C_, thm.SITCOM, C_.mpp, SEED, norms, groups, {})
    S = thm.Study(None, M, X, {SEED: (Xs, ys, ws)})
    log(f"sitcom part {len(ys)} rows; candidate {cand['name']}")
    shares = thm.budget_shares(M)
    p = np.zeros(len(M.y))
    thr = {n: np.zeros(len(M.y)) for n in shares}
    thr_fold = {}
    for k in range(mt.N_FOLDS):
        tr = np.where(M.fold != k)[0]
        te = np.where(M.fold == k)[0]
        inner = mt.series_folds(M.series[tr], M.y[tr], mt.N_FOLDS - 1)
        pin = S.oof(cand, tr, inner, SEED)
        for n, sh in shares.items():
            thr[n][te] = mt.budget_threshold(pin[M.plain[tr]], sh)
        p[te] = predict(S.meeting_fit(cand, tr, SEED), X[te])
        thr_fold[k] = {n: float(thr[n][te][0]) for n in shares}
        log(f"base fold {k}: thresholds {thr_fold[k]}, {time.time() - t0:.0f} s")
    out = {"p": p, "thr_meeting": thr["meeting"], "thr_strict": thr["meeting_strict"],
           "seconds": np.array(time.time() - t0)}
    np.savez(path, **out)
    return M, X, {**out, "cached": False}, cand
