"""The cross-corpus protocol: which views may move `p_sarcastic`, and its calibration.

Issue 23: a view earns weight in the served fused score only by helping on shows and
speakers it has never seen. Two show-apart speech corpora (../shared/data/speech):
- House: the 129 House M.D. clips (house_mustardpp_ext; mostly one speaker);
- MUStARD++ clips: the 210 clips of mustardpp_cmpt419 (Friends, The Big Bang Theory,
  The Golden Girls, Sarcasmaholics).
Protocols, all audio in, scored by `sarcasmd eval` with the daemon's default
configuration (VAD, Whisper tiny.en transcript, prosody, vision):
- House -> MUStARD++ clips and MUStARD++ clips -> House: audio, video and fusion heads
  trained on one corpus (the shipped recipe, `heads.fit_speech_heads`), scored on the other;
- speaker-independent: 5 folds over the MUStARD++ clips grouped by speaker
  (GroupKFold), heads trained on the other speakers' clips.
The text view in every protocol is the shipped text head itself: its recipe
(models/recipe/text_head_meetings.py, on text head v2's sitcom part) keeps the scenes and
texts of both speech corpora out of training (every MUStARD++ clip's text is in MUStARD++), so it has seen no clip scored
here; this script refuses a text head whose recorded training texts overlap the clips,
and `sarcasmd eval` checks it again (`seen in training`).

Fusion candidates (text alone, text + audio, text + video, all three) are logistic
regressions without intercept over the views' logits (`fit_fusion` says why), fitted on
the training corpus's out-of-fold view probabilities with both classes weighted equally
(calibrated at a balanced prior), and
applied to the unseen corpus's view probabilities as `sarcasmd eval` scored them. A view
enters the shipped fusion only if adding it to text raises the fused macro-F1 on the
unseen corpus in both directions, the paired 95 % bootstrap interval of that gain lying
above 0 in each (a gain within the noise does not count). The shipped fusion head is then fitted on both corpora
with that rule (`weighted_views` in its metadata), and each direction is scored once more
through `sarcasmd eval` with a head of the same rule fitted on the training corpus only
(the "served" row, through the product).

  models/recipe/cross_corpus.sh [--ship]   # the wrapper: venv, build, manifests, this script
"""
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold

from models.recipe.lib import data
from models.recipe.lib.data import read_jsonl, write_jsonl
from models.recipe.lib.heads import (FUSION_FEATURE_VERSION, SEED, arg_parser, embed, fit_speech_heads, head_probs,
                                     logit, oof_audio_video, predict, speech_views, text_keys, write_head)
from models.recipe.lib.metrics import baselines, paired_bootstrap, prf

BOOT = 2000
VIEWS = ("text", "audio", "video")
CANDIDATES = {"T": ("text",), "T+A": ("text", "audio"), "T+V": ("text", "video"), "T+A+V": ("text", "audio", "video")}
# Room priors docs/accuracy.md reports precision and recall at: balanced (replay, eval) and the
# meeting-room profiles' setting.
PRIORS = (0.5, 0.4, 0.3, 0.2)


def ece(y, p, bins=10):
    """Expected calibration error as `sarcasmd eval` computes it (10 equal-width bins)."""
    y, p = np.asarray(y, float), np.clip(np.asarray(p, float), 0, 1)
    b = np.minimum((p * bins).astype(int), bins - 1)
    return float(sum(abs(y[b == k].sum() - p[b == k].sum()) for k in range(bins)) / len(y))


def auc(y, p):
    """ROC-AUC (ties count half, as `sarcasmd eval` computes it); NaN with one class."""
    y = np.asarray(y)
    return float(roc_auc_score(y, np.asarray(p, float))) if 0 < y.sum() < len(y) else float("nan")


def boot_ci(y, p, fn, n=BOOT, seed=SEED):
    """95 % bootstrap interval of fn(y, p) over items resampled with replacement."""
    y, p = np.asarray(y), np.asarray(p)
    rng = np.random.RandomState(seed)
    vals = []
    for _ in range(n):
        i = rng.randint(0, len(y), len(y))
        if y[i].min() == y[i].max():
            continue
        vals.append(fn(y[i], p[i]))
    return [float(v) for v in np.percentile(vals, [2.5, 97.5])]


def paired_diff(y, p, q):
    """macro-F1(p) - macro-F1(q) at 0.5 and its paired bootstrap 95 % interval."""
    y = np.asarray(y)
    d = prf(y, np.asarray(p) >= 0.5)["f1_macro"] - prf(y, np.asarray(q) >= 0.5)["f1_macro"]
    return d, [float(v) for v in paired_bootstrap(y, p, q, n=BOOT, seed=SEED)]


def scores(y, p, thr=0.5):
    y, p = np.asarray(y), np.asarray(p, float)
    m = prf(y, p >= thr)
    return {"n": int(len(y)), "P": m["precision_macro"], "R": m["recall_macro"], "F1": m["f1_macro"],
            "F1_ci": boot_ci(y, p, lambda a, b: prf(a, b >= thr)["f1_macro"]),
            "AUC": auc(y, p), "AUC_ci": boot_ci(y, p, auc), "ECE": ece(y, p),
            "flagged": float((p >= thr).mean()), "P_sarcastic": m["precision_sarcastic"],
            "R_sarcastic": m["recall_sarcastic"]}


def fusion_x(pt, pa, pv, views):
    """[logit T, logit A, logit V, has T, has V] with the views outside `views` masked
    (logit 0, flag 0), as `Fusion::fuse` serves them. Missing (NaN) views are masked too."""
    pt, pa, pv = (np.asarray(v, float) for v in (pt, pa, pv))
    t_on = ~np.isnan(pt) & ("text" in views)
    a_on = ~np.isnan(pa) & ("audio" in views)
    v_on = ~np.isnan(pv) & ("video" in views)
    lt = np.where(t_on, logit(np.nan_to_num(pt, nan=0.5)), 0.0)
    la = np.where(a_on, logit(np.nan_to_num(pa, nan=0.5)), 0.0)
    lv = np.where(v_on, logit(np.nan_to_num(pv, nan=0.5)), 0.0)
    return np.column_stack([lt, la, lv, t_on.astype(float), v_on.astype(float)]), (t_on | a_on | v_on)


class _NoScaling:
    """What export_lr expects of a scaler, for inputs used as they are (logits)."""
    mean_ = np.zeros(5)
    scale_ = np.ones(5)


def fit_fusion(pt, pa, pv, y, views):
    """A fusion candidate: logistic regression without intercept (C 1, classes weighted
    equally) over the weighted views' logits, each clip as it is and, for the views that
    can be missing at run time (text: nothing recognised; video: no face), with that view
    masked. No intercept and no flag terms: every view head is trained with balanced
    class weights, so logit 0 means "either class" for each of them, and the fusion only
    learns how far to trust each view's log-odds on shows it has not seen (temperature
    scaling when one view is weighted). An intercept fitted on one show moved the
    decision point the wrong way on the other (CROSS_CORPUS.md, first run); without it a
    single weighted view keeps its own decision at 0.5 and only its confidence is
    calibrated, so the served score cannot fall below that view alone at 0.5."""
    from sklearn.linear_model import LogisticRegression
    Xs, ys = [], []
    pt, pv = np.asarray(pt, float), np.asarray(pv, float)
    for mask_t, mask_v in ((False, False), (True, False), (False, True)):
        X, ok = fusion_x(np.where(mask_t, np.nan, pt), pa, np.where(mask_v, np.nan, pv), views)
        Xs.append(X[ok]); ys.append(np.asarray(y)[ok])
    X = np.vstack(Xs)
    X[:, 3:] = 0.0  # the has-view flags would act as intercepts
    X = np.clip(X, -4.0, 4.0)  # as the exported graph clips its inputs
    lr = LogisticRegression(C=1.0, fit_intercept=False, max_iter=5000, class_weight="balanced").fit(X, np.concatenate(ys))
    return _NoScaling(), lr


def apply_fusion(model, pt, pa, pv, views):
    """Served score: None (NaN) where no weighted view is present. As the exported graph
    computes it: (x - 0) / 1, clipped to +-4 (logits), linear, sigmoid."""
    X, ok = fusion_x(pt, pa, pv, views)
    p = np.full(len(X), np.nan)
    if ok.any():
        p[ok] = predict(model, X[ok])
    return p


class Corpus:
    """One speech corpus: manifest rows, the live pipeline's features, and the out-of-
    sample view probabilities the fusion candidates are fitted on."""

    def __init__(self, name, rows, a, text_model):
        self.name, self.rows = name, rows
        work = os.path.join(a.work, name)
        os.makedirs(work, exist_ok=True)
        self.have, asr_rows, self.P, self.V, self.n_none, self.n_multi = speech_views(a.bin, rows, work, reuse=True)
        # For audio-research scripts: the same features under a stable name.
        shutil.copy(os.path.join(work, "speech.features.jsonl"), os.path.join(a.work, f"features-{name}.jsonl"))
        self.y = np.array([int(r["label"]) for r in self.have])
        self.groups = np.array([r["group"] for r in self.have])
        X_asr = embed(a.bin, asr_rows, work, "asr")
        empty = np.array([not r["text"] for r in asr_rows])
        self.p_text = np.where(empty, np.nan, head_probs(text_model, X_asr))
        self.empty_text = empty
        self.p_audio, p_video = oof_audio_video(self.P, self.V, self.y, self.groups)
        self.p_video = np.asarray(p_video, float)


def heads_dir(a, name, text_dir, audio_video, fusion, weighted, desc, train_rows, V):
    out = os.path.join(a.work, f"heads-{name}")
    os.makedirs(out, exist_ok=True)
    for f in ("text_head.onnx", "text_head.json"):
        shutil.copy(os.path.join(text_dir, f), out)
    (audio, C_a), (video, C_v) = audio_video
    version = f"cross-{name}"
    keys = text_keys(train_rows)
    write_head(out, "audio_head", audio, a.prosody_version, {"train": desc, "C": C_a, "item_text_sha8": keys}, {}, version)
    write_head(out, "video_head", video, a.vision_version,
               {"train": desc + " with a face", "C": C_v,
                "item_text_sha8": text_keys([r for r, v in zip(train_rows, V) if v is not None])}, {}, version)
    write_head(out, "fusion_head", fusion, FUSION_FEATURE_VERSION, {"train": desc, "item_text_sha8": keys}, {}, version)
    if weighted is not None:
        path = os.path.join(out, "fusion_head.json")
        with open(path) as f:
            meta = json.load(f)
        meta["weighted_views"] = list(weighted)
        with open(path, "w") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
            f.write("\n")
    return out


@functools.lru_cache(maxsize=None)
def _file_sha256(path):
    """A file's digest; cached, since the ~180 MB daemon binary is part of every eval key."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _eval_key(a, heads, man, extra):
    """What an eval's result depends on: the daemon binary, every file of the heads
    directory, the manifest and the extra arguments. A cached result is reused only under
    the same key (keyed by name alone, a refitted head was scored with the old one's
    cached output)."""
    h = hashlib.sha256(_file_sha256(a.bin).encode())
    for path in [man] + sorted(os.path.join(heads, f) for f in os.listdir(heads)):
        h.update(os.path.basename(path).encode())
        with open(path, "rb") as f:
            h.update(f.read())
    h.update("\0".join(extra).encode())
    return h.hexdigest()[:16]


def run_eval(a, heads, rows, name, extra=()):
    man = os.path.join(a.work, f"{name}.jsonl")
    write_jsonl(man, rows)
    key = _eval_key(a, heads, man, extra)
    out = os.path.join(a.work, f"eval-{name}-{key}.json")
    if not os.path.exists(out):
        # Results of this eval under other keys are stale: keep the cache to one per name.
        stale = re.compile(re.escape(f"eval-{name}") + r"(-[0-9a-f]{16})?\.json")
        for old in os.listdir(a.work):
            if stale.fullmatch(old):
                os.remove(os.path.join(a.work, old))
        subprocess.run([a.bin, "eval", man, "--heads", heads, "--json", out + ".tmp", *extra],
                       check=True, capture_output=True, text=True)
        os.replace(out + ".tmp", out)
    with open(out) as f:
        rep = json.load(f)
    seen = max((r["seen_in_training"] or 0) for r in rep["rows"] if r["views"] != "annotators' majority")
    return {it["id"]: it for it in rep["items"]}, seen


def view_probs(items, ids):
    """Per-item view probabilities as `sarcasmd eval` scored them (NaN when absent)."""
    get = lambda it, k: it["p"].get(k, np.nan) if it else np.nan  # noqa: E731
    pt = np.array([get(items.get(i), "T") for i in ids], float)
    pa = np.array([get(items.get(i), "A") for i in ids], float)
    pv = np.array([get(items.get(i), "V") for i in ids], float)
    silent = np.array([bool(items[i]["silent"]) if i in items else True for i in ids])
    return pt, pa, pv, silent


def durations(rows):
    import wave
    out = []
    for r in rows:
        with wave.open(r["audio"]) as w:
            out.append(w.getnframes() / w.getframerate())
    return np.array(out)


def direction(a, name, train_c, test_rows, text_dir, report):
    """Heads fitted on `train_c`, scored on `test_rows` through `sarcasmd eval`."""
    desc = f"cross_corpus.py {name}: {len(train_c.have)} {train_c.name} clips"
    av = fit_speech_heads(train_c.P, train_c.V, train_c.y, train_c.groups, np.nan_to_num(train_c.p_text, nan=0.5),
                          train_c.empty_text, oof=(train_c.p_audio, train_c.p_video))[:2]
    cands = {k: fit_fusion(train_c.p_text, train_c.p_audio, train_c.p_video, train_c.y, v) for k, v in CANDIDATES.items()}
    heads = heads_dir(a, name, text_dir, av, cands["T+A+V"], None, desc, train_c.have, train_c.V)
    items, seen = run_eval(a, heads, test_rows, name)
    ids = [r["id"] for r in test_rows]
    y = np.array([int(r["label"]) for r in test_rows])
    pt, pa, pv, silent = view_probs(items, ids)
    dur = durations(test_rows)
    res = {"n": len(ids), "n_sarcastic": int(y.sum()), "silent": int(silent.sum()), "seen_in_training": seen,
           "baselines": {k: v["f1_macro"] for k, v in baselines(y, seed=SEED).items()}, "rows": {}, "fused": {}}
    for key, p in (("T (raw)", pt), ("A", pa), ("V", pv)):
        ok = ~np.isnan(p)
        if ok.sum() > 2:
            res["rows"][key] = scores(y[ok], p[ok])
    res["rows"]["duration alone (AUC only)"] = {"n": len(ids), "AUC": auc(y, dur), "AUC_ci": boot_ci(y, dur, auc)}
    # Fusion candidates on the whole test corpus: a clip without any weighted view (silent,
    # nothing recognised) counts as not flagged, as the served row does.
    for key, views in CANDIDATES.items():
        p = apply_fusion(cands[key], pt, pa, pv, views)
        res["fused"][key] = scores(y, np.nan_to_num(p, nan=0.0))
        res["fused"][key]["p"] = [None if np.isnan(x) else float(x) for x in p]
    base = np.nan_to_num(np.array(res["fused"]["T"]["p"], float), nan=0.0)
    for key in ("T+A", "T+V", "T+A+V"):
        q = np.nan_to_num(np.array(res["fused"][key]["p"], float), nan=0.0)
        d, ci = paired_diff(y, q, base)
        res["fused"][key]["minus_T"] = {"F1": d, "ci": ci}
    # Video: also on the clips where a face was found, where it can help at all.
    face = ~np.isnan(pv)
    if face.sum() > 10:
        for key, views in (("T", ("text",)), ("T+V", ("text", "video"))):
            p = np.nan_to_num(apply_fusion(cands[key], pt[face], pa[face], pv[face], views), nan=0.0)
            res["fused"][key + " (clips with a face)"] = scores(y[face], p)
    report[name] = res
    return cands, av, y, pt, pa, pv, silent, ids


def main():
    ap = arg_parser("--heads", "--prosody-version", "--vision-version")
    ap.add_argument("--ship", action="store_true", help="write the shipped fusion head into --heads")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    speech_rows = read_jsonl(os.path.join(a.manifests, "speech.jsonl"))
    house_rows = [r for r in speech_rows if r["id"].startswith("house:")]
    mpp_clip_rows = read_jsonl(os.path.join(a.manifests, "speech_cmpt419.jsonl"))

    # The text view is the shipped text head itself: its recipe (text_head_meetings.py, v2's sitcom part) keeps
    # every scene and text of both speech corpora out of training, and eval checks that
    # no scored clip was seen (`seen in training` = 0 in the report).
    text_dir = a.heads
    with open(os.path.join(text_dir, "text_head.json")) as f:
        text_meta = json.load(f)
    held = {data.norm_text(r["text"]) for r in house_rows + mpp_clip_rows}
    held_keys = {hashlib.sha256(t.encode()).hexdigest()[:8] for t in held if t}
    overlap = held_keys & set(text_meta["training"].get("item_text_sha8", []))
    # A few one-word lines ("yeah", "what") of other scenes share their text with a clip:
    # the same words get the same score, and eval counts them in `seen in training`.
    if len(overlap) > 5:
        sys.exit(f"the shipped text head was trained on {len(overlap)} texts of the speech clips: "
                 "the protocol needs a text head that has seen none (models/recipe/text_head_meetings.sh)")
    text_model = os.path.join(text_dir, "text_head.onnx")
    print(f"text view: the shipped text head ({text_meta['version']}, {text_meta['training'].get('train', '')[:80]})",
          file=sys.stderr)

    house = Corpus("house", house_rows, a, text_model)
    clips = Corpus("cmpt419", mpp_clip_rows, a, text_model)
    report = {"text_head": f"{text_meta['version']}: {text_meta['training'].get('train', '')}",
              "text_shared": len(overlap)}
    dirs = {}
    dirs["house->cmpt419"] = direction(a, "house-to-cmpt419", house, mpp_clip_rows, text_dir, report)
    dirs["cmpt419->house"] = direction(a, "cmpt419-to-house", clips, house_rows, text_dir, report)

    # Speaker-independent folds inside the MUStARD++ clips.
    spk = np.array([r["speaker"] for r in mpp_clip_rows])
    y_all = np.array([int(r["label"]) for r in mpp_clip_rows])
    pooled = {"T (raw)": [], "A": [], "V": [], "T": [], "T+A": [], "T+V": [], "T+A+V": []}
    yy = []
    pos = {r["id"]: i for i, r in enumerate(clips.have)}
    for k, (tr, te) in enumerate(GroupKFold(n_splits=5).split(y_all, y_all, spk)):
        idx = np.array(sorted(pos[mpp_clip_rows[j]["id"]] for j in tr if mpp_clip_rows[j]["id"] in pos))
        sub = _Sub(clips, idx)
        rep = {}
        _, _, y, pt, pa, pv, _, _ = direction(a, f"cmpt419-si-fold{k}", sub, [mpp_clip_rows[j] for j in te], text_dir, rep)
        r = rep[f"cmpt419-si-fold{k}"]
        yy.append(y)
        pooled["T (raw)"].append(pt); pooled["A"].append(pa); pooled["V"].append(pv)
        for key in CANDIDATES:
            pooled[key].append(np.array(r["fused"][key]["p"], float))
        print(f"speaker-independent fold {k}: {len(idx)} training clips, {len(te)} scored", file=sys.stderr)
    y = np.concatenate(yy)
    si = {"n": int(len(y)), "rows": {}, "fused": {}, "baselines": {k: v["f1_macro"] for k, v in baselines(y, seed=SEED).items()}}
    for key in ("T (raw)", "A", "V"):
        p = np.concatenate(pooled[key]); ok = ~np.isnan(p)
        si["rows"][key] = scores(y[ok], p[ok])
    for key in CANDIDATES:
        si["fused"][key] = scores(y, np.nan_to_num(np.concatenate(pooled[key]), nan=0.0))
    base = np.nan_to_num(np.concatenate(pooled["T"]), nan=0.0)
    for key in ("T+A", "T+V", "T+A+V"):
        d, ci = paired_diff(y, np.nan_to_num(np.concatenate(pooled[key]), nan=0.0), base)
        si["fused"][key]["minus_T"] = {"F1": d, "ci": ci}
    report["cmpt419-speaker-independent"] = si

    # The rule: a view is weighted only if adding it to text raises the fused macro-F1 on
    # the unseen corpus in both directions, with the paired 95 % interval of the gain above
    # 0 (a gain inside the noise would let a few hundred clips move every served score).
    weighted = ["text"]
    for view, key in (("audio", "T+A"), ("video", "T+V")):
        dirs_ = ("house-to-cmpt419", "cmpt419-to-house")
        gains = [report[d]["fused"][key]["minus_T"]["F1"] for d in dirs_]
        lows = [report[d]["fused"][key]["minus_T"]["ci"][0] for d in dirs_]
        ok = all(lo > 0 for lo in lows)
        report.setdefault("rule", {})[view] = {"gains": gains, "gain_ci_low": lows, "weighted": ok}
        if ok:
            weighted.append(view)
    report["weighted_views"] = weighted
    print(f"weighted views: {weighted}", file=sys.stderr)

    # Each direction through the product with the rule's head fitted on the training corpus.
    for name, c, test_rows in (("house-to-cmpt419", house, mpp_clip_rows), ("cmpt419-to-house", clips, house_rows)):
        cands, av = dirs[name.replace("-to-", "->")][:2]
        model = fit_fusion(c.p_text, c.p_audio, c.p_video, c.y, weighted)
        heads = heads_dir(a, name + "-served", text_dir, av, model, weighted, f"cross_corpus.py {name} served rule",
                          c.have, c.V)
        items, _ = run_eval(a, heads, test_rows, name + "-served")
        ids = [r["id"] for r in test_rows]
        y = np.array([int(r["label"]) for r in test_rows])
        served = np.array([items[i]["p"].get("served", np.nan) if i in items else np.nan for i in ids], float)
        sv = np.nan_to_num(served, nan=0.0)
        report[name]["served"] = {str(pr): scores(y, sv, thr=1 - pr) for pr in PRIORS}
        report[name]["served_no_score"] = int(np.isnan(served).sum())

    # The shipped fusion head: the rule fitted on both corpora.
    if a.ship:
        pt = np.concatenate([house.p_text, clips.p_text]); pa = np.concatenate([house.p_audio, clips.p_audio])
        pv = np.concatenate([house.p_video, clips.p_video]); y = np.concatenate([house.y, clips.y])
        model = fit_fusion(pt, pa, pv, y, weighted)
        summary = {d: {"served_f1_macro": report[d]["served"]["0.5"]["F1"], "served_auc": report[d]["served"]["0.5"]["AUC"],
                       "served_ece": report[d]["served"]["0.5"]["ECE"]} for d in ("house-to-cmpt419", "cmpt419-to-house")}
        write_head(a.heads, "fusion_head", model, FUSION_FEATURE_VERSION,
                   {"train": f"cross_corpus.py: {len(house.have)} House + {len(clips.have)} MUStARD++ clips, out-of-sample "
                             "view probabilities (text: the shipped text head, trained on neither corpus; audio/video: out of fold), "
                             "logistic regression without intercept over the views' logits, both classes weighted equally "
                             "(calibrated at a balanced prior); inputs [logit T, logit A, logit V, has T, has V] (flags "
                             "weight 0), views outside weighted_views masked",
                    "item_text_sha8": text_keys(house.have + clips.have)},
                   {"cross_corpus": summary}, "2026-11-27")
        path = os.path.join(a.heads, "fusion_head.json")
        with open(path) as f:
            meta = json.load(f)
        meta["weighted_views"] = weighted
        with open(path, "w") as f:
            json.dump(meta, f, indent=2, sort_keys=True)
            f.write("\n")

    with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
        json.dump(report, f, indent=1, default=float)
    with open(a.out, "w") as f:
        f.write(render(report))
    print(render(report))


class _Sub:
    """A corpus restricted to some of its clips (for folds); out-of-fold view
    probabilities recomputed inside it, so nothing of the held-out speakers leaks."""

    def __init__(self, c, idx):
        self.name = c.name
        self.have = [c.have[i] for i in idx]
        self.P, self.V = c.P[idx], [c.V[i] for i in idx]
        self.y, self.groups = c.y[idx], c.groups[idx]
        self.p_text, self.empty_text = c.p_text[idx], c.empty_text[idx]
        self.p_audio, p_video = oof_audio_video(self.P, self.V, self.y, self.groups)
        self.p_video = np.asarray(p_video, float)


def render(rep):
    pct = lambda v: "-" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{100 * v:.1f}"  # noqa: E731
    ci = lambda c: f"[{pct(c[0])}, {pct(c[1])}]" if c else ""  # noqa: E731
    out = ["# Cross-corpus protocol: which views move `p_sarcastic`\n",
           "Generated by `models/recipe/cross_corpus.sh` (seed 13; design and splits in `models/recipe/cross_corpus.py`). "
           "Audio in, the daemon's default configuration, Whisper tiny.en transcripts; heads trained on one corpus, scored "
           "on the other by `sarcasmd eval`. Text view: the shipped text head, trained on neither speech corpus "
           f"({rep['text_head'][:160]}...). Percent; 95 % bootstrap intervals (2000 resamples) in "
           "brackets; threshold 0.5; fused rows count a clip with no weighted view (nothing recognised) as not flagged.\n"]
    for name, title in (("house-to-cmpt419", "Trained on House, scored on the MUStARD++ clips"),
                        ("cmpt419-to-house", "Trained on the MUStARD++ clips, scored on House"),
                        ("cmpt419-speaker-independent", "MUStARD++ clips, 5 speaker-independent folds (pooled)")):
        r = rep[name]
        out += [f"## {title}\n",
                f"n = {r['n']}; random / majority macro-F1 {pct(r['baselines']['random'])} / {pct(r['baselines']['majority'])}"
                + (f"; seen in training (eval's check; one-word lines such as \"yeah\" that other scenes share): "
                   f"{r['seen_in_training']}; silent clips: {r['silent']}" if "silent" in r else "")
                + "\n",
                "| row | n | P | R | macro-F1 | AUC | ECE | flagged | vs T (macro-F1) |", "|---|---|---|---|---|---|---|---|---|"]
        for key, s in list(r["rows"].items()) + [("fused " + k, v) for k, v in r["fused"].items()]:
            if "P" not in s:
                out.append(f"| {key} | {s['n']} | | | | {pct(s['AUC'])} {ci(s['AUC_ci'])} | | | |")
                continue
            d = s.get("minus_T")
            out.append(f"| {key} | {s['n']} | {pct(s['P'])} | {pct(s['R'])} | **{pct(s['F1'])}** {ci(s['F1_ci'])} | "
                       f"{pct(s['AUC'])} {ci(s['AUC_ci'])} | {pct(s['ECE'])} | {pct(s['flagged'])} | "
                       + (f"{100 * d['F1']:+.1f} {ci(d['ci'])}" if d else "") + " |")
        served = r.get("served", {})
        for pr, s in served.items():
            out.append(f"| **served** (shipped rule, prior {pr}, threshold {1 - float(pr):.2f}) | "
                       f"{s['n']} | {pct(s['P'])} | {pct(s['R'])} | **{pct(s['F1'])}** {ci(s['F1_ci'])} | "
                       f"{pct(s['AUC'])} {ci(s['AUC_ci'])} | {pct(s['ECE'])} | {pct(s['flagged'])} | |")
        if served:
            out += ["", "The served score at each room prior (`fusion.prior`; threshold = 1 - prior at the default "
                        "`fusion.threshold` 0.5), sarcastic class: precision of the flags and the share of sarcastic "
                        "clips flagged:\n",
                    "| prior | threshold | flagged | precision (sarcastic) | recall (sarcastic) | macro-F1 |",
                    "|---|---|---|---|---|---|"]
            for pr, s in served.items():
                out.append(f"| {pr} | {1 - float(pr):.2f} | {pct(s['flagged'])} | {pct(s['P_sarcastic'])} | "
                           f"{pct(s['R_sarcastic'])} | {pct(s['F1'])} |")
        out.append("")
    out.append("## The rule\n")
    for view, g in rep["rule"].items():
        lows = g.get("gain_ci_low", [float("nan")] * 2)
        out.append(f"- {view}: fused macro-F1 minus text alone, House -> MUStARD++ {100 * g['gains'][0]:+.1f} "
                   f"(interval from {100 * lows[0]:+.1f}), MUStARD++ -> House {100 * g['gains'][1]:+.1f} "
                   f"(from {100 * lows[1]:+.1f}): {'weighted' if g['weighted'] else 'no weight'} (weighted only "
                   "when both intervals lie above 0)")
    out.append(f"\nShipped `weighted_views`: {rep['weighted_views']}.\n")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
