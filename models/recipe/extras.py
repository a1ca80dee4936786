"""Train the extras head: MUStARD++'s extra labels (implicit and explicit emotion, sarcasm
type, valence, arousal) from the daemon's own text embedding, exported as one small ONNX
file with five outputs (models/heads/extras_head.onnx + .json) and a table
(models/studies/extras/EXTRAS.md, `--report`).

Input: the 512-d text embedding `sarcasmd embed` computes (feature version usem3-512-v1),
the same vector the daemon's text view computes per utterance. Text only: MUStARD++ has no
audio in ../shared/data, so no prosody for arousal.

Models: multinomial logistic regression (softmax, class_weight balanced) for the three
classification tasks, ridge regression for valence and arousal (1-9 scale), all on the
standardised, +-4 sd clipped embedding (`heads.standardise`, as the exported graph computes).

Evaluation: the manifest's 5 folds (fold0..fold4, scenes dealt with seed 13). For each test
fold, C / alpha are chosen by a 4-fold inner CV on the four training folds only (macro-F1
for classification, MAE for regression), the model is fitted on those folds and scored on
the test fold; figures are out of fold. Baselines use the training folds too: majority
class, uniform random label (mean of 2000 draws), mean predictor. The shipped head is refit
on all 1,202 items with C / alpha chosen by the same inner CV over all of them.

Sarcasm type: the 3 `LIK` (like-prefixed, described in the paper's annotation section and
Table 13 but with 3 items unlearnable as a class) are merged into `EMB`: both are sarcasm
the utterance text alone shows (the paper has annotators judge both from the text in
isolation). All 1,202 items are kept.
"""
import argparse
import datetime
import hashlib
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.linear_model import Ridge
from sklearn.metrics import f1_score
from sklearn.model_selection import GroupKFold, StratifiedGroupKFold
from sklearn.preprocessing import StandardScaler

from models.recipe.lib import data, selection
from models.recipe.lib.heads import CLIP_SD, SEED, TEXT_FEATURE_VERSION, embed, fit_lr, save_onnx, standardise

FOLDS = [f"fold{i}" for i in range(5)]
CLS_TASKS = ["emotion_implicit", "emotion_explicit", "sarcasm_type"]
REG_TASKS = ["valence", "arousal"]
REG_RANGE = (1.0, 9.0)
C_GRID = [0.0003, 0.001, 0.003, 0.01, 0.03, 0.1]
ALPHA_GRID = [100.0, 300.0, 1000.0, 3000.0, 10000.0, 30000.0, 100000.0]
TYPE_MERGE = {"LIK": "EMB"}


def fit_ridge(X, y, alpha):
    sc = StandardScaler().fit(X)
    return sc, Ridge(alpha=alpha).fit(standardise(sc, X), y)


def predict_cls(model, X):
    sc, lr = model
    return lr.predict_proba(standardise(sc, X))


def predict_reg(model, X):
    sc, rg = model
    return np.clip(rg.predict(standardise(sc, X)), *REG_RANGE)


def macro_f1(y, pred, classes):
    return float(f1_score(y, pred, labels=classes, average="macro", zero_division=0))


def choose(X, y, groups, kind, classes):
    """Inner CV on the given (training) rows only; returns the chosen C or alpha."""
    if kind == "cls":
        cv = list(StratifiedGroupKFold(n_splits=4, shuffle=True, random_state=SEED).split(X, y, groups))

        def label(C, tr, te):
            m = fit_lr(X[tr], y[tr], C)
            return m[1].classes_[predict_cls(m, X[te]).argmax(1)]
        return selection.best(
            C_GRID,
            lambda C: macro_f1(y, selection.out_of_fold(cv, len(y), lambda tr, te: label(C, tr, te), object), classes),
        )[0]
    cv = list(GroupKFold(n_splits=4).split(X, y, groups))

    def mae(a):
        pred = selection.out_of_fold(cv, len(y), lambda tr, te: predict_reg(fit_ridge(X[tr], y[tr], a), X[te]))
        return float(np.abs(pred - y).mean())
    return selection.best(ALPHA_GRID, mae, lower_is_better=True)[0]


def pearson(a, b):
    if np.std(a) == 0 or np.std(b) == 0:
        return None
    return sig12(float(np.corrcoef(a, b)[0, 1]))


def sig12(x):
    """12 significant digits: the last ones of a mean or a correlation follow the machine's
    summation order, and the written .json should not change with the CPU."""
    return float(f"{x:.12g}")


def export(path, sc, heads):
    """x [1, D] -> standardise -> clip to +-4 sd -> one linear layer per task ->
    softmax (classification, [1, K]) or clip to the 1-9 scale (regression, [1, 1]).
    Outputs in the order of `heads` (the metadata's `outputs`)."""
    scale = np.where(sc.scale_ > 0, sc.scale_, 1.0).astype(np.float32)
    mean = sc.mean_.astype(np.float32)
    d = len(mean)
    nodes = [helper.make_node("Sub", ["x", "mean"], ["xc"]),
             helper.make_node("Div", ["xc", "scale"], ["xs"]),
             helper.make_node("Clip", ["xs", "lo", "hi"], ["xk"])]
    inits = [numpy_helper.from_array(mean.reshape(1, d), "mean"), numpy_helper.from_array(scale.reshape(1, d), "scale"),
             numpy_helper.from_array(np.array(-CLIP_SD, np.float32), "lo"),
             numpy_helper.from_array(np.array(CLIP_SD, np.float32), "hi"),
             numpy_helper.from_array(np.array(REG_RANGE[0], np.float32), "reg_lo"),
             numpy_helper.from_array(np.array(REG_RANGE[1], np.float32), "reg_hi")]
    outputs = []
    for name, kind, model in heads:
        if kind == "softmax":
            w = model.coef_.T.astype(np.float32)            # [D, K]
            b = model.intercept_.astype(np.float32)         # [K]
        else:
            w = model.coef_.astype(np.float32).reshape(d, 1)
            b = np.array([model.intercept_], np.float32)
        k = w.shape[1]
        inits += [numpy_helper.from_array(w, f"{name}_w"), numpy_helper.from_array(b, f"{name}_b")]
        nodes += [helper.make_node("MatMul", ["xk", f"{name}_w"], [f"{name}_z0"]),
                  helper.make_node("Add", [f"{name}_z0", f"{name}_b"], [f"{name}_z"])]
        if kind == "softmax":
            nodes.append(helper.make_node("Softmax", [f"{name}_z"], [name], axis=-1))
        else:
            nodes.append(helper.make_node("Clip", [f"{name}_z", "reg_lo", "reg_hi"], [name]))
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, k]))
    g = helper.make_graph(nodes, "extras_head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, d])],
                          outputs, inits)
    raw = save_onnx(g, path)
    return hashlib.sha256(raw).hexdigest(), d, len(raw)


def check_export(path, sc, heads, X):
    """The exported graph computes what sklearn computes (numpy re-implementation of the
    graph from the stored initialisers would only test onnx; compare with sklearn)."""
    m = onnx.load(path)
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    xk = np.clip((X - w["mean"]) / w["scale"], -CLIP_SD, CLIP_SD)
    for name, kind, model in heads:
        z = xk @ w[f"{name}_w"] + w[f"{name}_b"]
        if kind == "softmax":
            p = np.exp(z - z.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
            ref = model.predict_proba(standardise(sc, X))
        else:
            p = np.clip(z[:, 0], *REG_RANGE)
            ref = np.clip(model.predict(standardise(sc, X)), *REG_RANGE)
        err = float(np.abs(p - ref).max())
        assert err < 1e-3, f"{name}: exported graph differs from sklearn by {err}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--manifest", default=os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                                                       "sarcasmd", "manifests", "mustard_plus_plus.jsonl"),
                    help="written by scripts/manifests.py")
    ap.add_argument("--bin", required=True, help="sarcasmd binary (for `sarcasmd embed`)")
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True, help="dir for extras_head.onnx + .json (models/heads)")
    ap.add_argument("--report", required=True, help="the table (models/studies/extras/EXTRAS.md)")
    ap.add_argument("--version", default=datetime.date.today().isoformat(),
                    help="the head's version field (default today; 2026-11-22 rebuilds the shipped .json)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)

    rows = data.read_jsonl(a.manifest)
    assert len(rows) == 1202, f"{a.manifest}: expected 1,202 MUStARD++ items, got {len(rows)}"
    n_lik = sum(r["sarcasm_type"] == "LIK" for r in rows)
    for r in rows:
        r["sarcasm_type"] = TYPE_MERGE.get(r["sarcasm_type"], r["sarcasm_type"])
    X = embed(a.bin, rows, a.work, "mpp-extras")
    groups = np.array([r["group"] for r in rows])
    fold = np.array([r["split"] for r in rows])
    Y = {t: np.array([r[t] for r in rows]) for t in CLS_TASKS}
    Y.update({t: np.array([float(r[t]) for r in rows]) for t in REG_TASKS})
    # Class order: by frequency in the whole corpus, ties by name (stated in the metadata).
    classes = {}
    for t in CLS_TASKS:
        vals, counts = np.unique(Y[t], return_counts=True)
        classes[t] = [str(v) for _, v in sorted(zip(-counts, vals))]

    rng = np.random.default_rng(SEED)
    oof = {t: np.empty(len(rows), dtype=object) for t in CLS_TASKS}
    oof.update({t: np.zeros(len(rows)) for t in REG_TASKS})
    maj = {t: np.empty(len(rows), dtype=object) for t in CLS_TASKS}
    mean_pred = {t: np.zeros(len(rows)) for t in REG_TASKS}
    chosen = {t: [] for t in CLS_TASKS + REG_TASKS}
    for f in FOLDS:
        te = np.flatnonzero(fold == f); tr = np.flatnonzero(fold != f)
        for t in CLS_TASKS:
            C = choose(X[tr], Y[t][tr], groups[tr], "cls", classes[t])
            chosen[t].append(C)
            m = fit_lr(X[tr], Y[t][tr], C)
            oof[t][te] = m[1].classes_[predict_cls(m, X[te]).argmax(1)]
            v, c = np.unique(Y[t][tr], return_counts=True)
            maj[t][te] = v[c.argmax()]
        for t in REG_TASKS:
            al = choose(X[tr], Y[t][tr], groups[tr], "reg", None)
            chosen[t].append(al)
            oof[t][te] = predict_reg(fit_ridge(X[tr], Y[t][tr], al), X[te])
            mean_pred[t][te] = Y[t][tr].mean()
        print(f"{f}: chosen {({t: chosen[t][-1] for t in chosen})}", file=sys.stderr, flush=True)

    metrics = {}
    for t in CLS_TASKS:
        y, k = Y[t], classes[t]
        draws = [rng.choice(k, len(y)) for _ in range(2000)]
        metrics[t] = {
            "classes": k, "n": len(y), "C_per_fold": chosen[t],
            "oof": {"f1_macro": macro_f1(y, oof[t], k), "accuracy": float((oof[t] == y).mean())},
            "majority": {"f1_macro": macro_f1(y, maj[t], k), "accuracy": float((maj[t] == y).mean())},
            "random_uniform": {"f1_macro": float(np.mean([macro_f1(y, d, k) for d in draws])),
                               "accuracy": float(np.mean([(d == y).mean() for d in draws]))},
        }
    for t in REG_TASKS:
        y = Y[t]
        metrics[t] = {
            "n": len(y), "alpha_per_fold": chosen[t], "scale": list(REG_RANGE),
            "oof": {"mae": sig12(float(np.abs(oof[t] - y).mean())), "pearson_r": pearson(oof[t], y)},
            "mean_predictor": {"mae": sig12(float(np.abs(mean_pred[t] - y).mean())),
                               "pearson_r": pearson(mean_pred[t], y)},
        }

    # --- shipped head: refit on all items, C / alpha by inner CV over all of them ------
    final = {}
    heads = []
    sc = StandardScaler().fit(X)
    for t in CLS_TASKS:
        C = choose(X, Y[t], groups, "cls", classes[t])
        m = fit_lr(X, Y[t], C)
        assert np.allclose(m[0].mean_, sc.mean_) and np.allclose(m[0].scale_, sc.scale_)
        # Reorder the softmax rows to the documented class order.
        order = [list(m[1].classes_).index(c) for c in classes[t]]
        m[1].coef_ = m[1].coef_[order]; m[1].intercept_ = m[1].intercept_[order]; m[1].classes_ = m[1].classes_[order]
        final[t] = C
        heads.append((t, "softmax", m[1]))
    for t in REG_TASKS:
        al = choose(X, Y[t], groups, "reg", None)
        m = fit_ridge(X, Y[t], al)
        final[t] = al
        heads.append((t, "regression", m[1]))
    path = os.path.join(a.out, "extras_head.onnx")
    sha, d, size = export(path, sc, heads)
    check_export(path, sc, heads, X)
    version = a.version
    outputs = [{"name": t, "kind": "softmax", "classes": classes[t]} for t in CLS_TASKS] + \
              [{"name": t, "kind": "regression", "range": list(REG_RANGE)} for t in REG_TASKS]
    meta = {
        "name": "extras_head", "version": version, "feature_version": TEXT_FEATURE_VERSION, "input_dim": d,
        "onnx_sha256": sha, "outputs": outputs,
        "training": {
            "train": f"all {len(rows)} MUStARD++ utterances (gold transcripts, text only; TV sitcom dialogue: "
                     "BBT, FRIENDS, Silicon Valley, Golden Girls, Sarcasmoholics)",
            "labels": "MUStARD++ Implicit_Emotion, Explicit_Emotion, Sarcasm_Type (NONE for non-sarcastic; "
                      f"{n_lik} LIK merged into EMB), Valence, Arousal (1-9)",
            "models": "multinomial logistic regression (class_weight balanced) per classification task, "
                      "ridge regression per 1-9 rating, on the standardised embedding clipped to +-4 sd",
            "selection": "C / alpha by 4-fold inner CV (macro-F1 / MAE), seed 13",
            "chosen": final,
            "evaluation": "out-of-fold over the manifest's fold0..fold4 (scenes dealt by label with seed 13, "
                          "scripts/manifests.py); C / alpha chosen per outer fold by inner CV on its training folds",
        },
        "metrics": metrics,
    }
    with open(os.path.join(a.out, "extras_head.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")

    pct = lambda v: f"{100 * v:.1f}"
    rep = ["# Extras head: MUStARD++ emotions, sarcasm type, valence, arousal\n",
           f"Generated by `models/recipe/extras.py` (seed {SEED}); reproduce with `models/recipe/train.sh` "
           "(which runs it second) or, for this head alone (from the repository root):\n",
           "```sh\ncargo build --release --locked\npython3 scripts/manifests.py\n"
           "~/.cache/sarcasmd/venv-train/bin/python -m models.recipe.extras --bin target/release/sarcasmd \\\n"
           "  --work ~/.cache/sarcasmd/train --out models/heads --report models/studies/extras/EXTRAS.md\n"
           "python3 -m models.recipe.pin_heads models/heads extras_head\n```\n",
           f"Input: the daemon's text embedding (`{TEXT_FEATURE_VERSION}`, 512-d) of the gold transcript; text "
           "only (MUStARD++ has no audio here). Data: all 1,202 MUStARD++ utterances, TV sitcom dialogue. "
           "Figures are **out-of-fold** over the manifest's 5 folds (fold0..fold4, grouped by scene, seed 13); "
           "C / alpha chosen for each test fold by a 4-fold inner CV on its training folds only. "
           "Baselines are computed the same way (majority class and mean of the training folds; uniform random "
           "label, mean of 2,000 draws). The shipped head is refit on all items.\n",
           f"Sarcasm type: the {n_lik} `LIK` (like-prefixed) items are merged into `EMB` (both are sarcasm the "
           "utterance text alone shows); `NONE` = not sarcastic.\n",
           "## Classification (percent)\n",
           "| task | classes | macro-F1 | acc | majority macro-F1 | majority acc | random macro-F1 | random acc |",
           "|---|---|---|---|---|---|---|---|"]
    for t in CLS_TASKS:
        m = metrics[t]
        rep.append(f"| {t} | {len(m['classes'])} | {pct(m['oof']['f1_macro'])} | {pct(m['oof']['accuracy'])} | "
                   f"{pct(m['majority']['f1_macro'])} | {pct(m['majority']['accuracy'])} | "
                   f"{pct(m['random_uniform']['f1_macro'])} | {pct(m['random_uniform']['accuracy'])} |")
    rep += ["\n## Regression (1-9 scale)\n",
            "| task | MAE | Pearson r | mean-predictor MAE | mean-predictor r |", "|---|---|---|---|---|"]
    for t in REG_TASKS:
        m = metrics[t]
        rep.append(f"| {t} | {m['oof']['mae']:.3f} | {m['oof']['pearson_r']:.3f} | {m['mean_predictor']['mae']:.3f} | n/a (constant) |")
    rep += ["\n**Reading these figures.** Text alone says little about these labels: the annotators watched "
            "the video, and the paper's illocutionary type is by definition sarcasm carried by voice or face. "
            "The classifiers use balanced class weights, which trade accuracy on the frequent classes "
            "(explicit `Neutral`, type `NONE`) for recall on the rare ones: that is why accuracy can fall below "
            "the majority baseline while macro-F1 is well above it. Valence is barely better than predicting the "
            "mean (MAE); Pearson r shows some ranking ability for both ratings. Treat the outputs as weak hints, "
            "not as measurements of a person's emotion.\n",
            f"Grids: C in {C_GRID}, alpha in {ALPHA_GRID}.\n"]
    rep += ["\n## Chosen regularisation\n",
            "| task | per outer fold | shipped head |", "|---|---|---|"]
    for t in CLS_TASKS + REG_TASKS:
        rep.append(f"| {t} ({'C' if t in CLS_TASKS else 'alpha'}) | {', '.join(str(v) for v in chosen[t])} | {final[t]} |")
    rep += ["\n## Classes, in output order\n"]
    for t in CLS_TASKS:
        rep.append(f"- `{t}`: {', '.join(classes[t])}")
    rep.append(f"\nHead: `extras_head.onnx`, {size:,} bytes, one graph with outputs "
               f"{', '.join('`' + h[0] + '`' for h in heads)}.\n")
    with open(a.report, "w") as f:
        f.write("\n".join(rep) + "\n")
    print("\n".join(rep))


if __name__ == "__main__":
    main()
