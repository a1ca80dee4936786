"""MuSAG-style metrics: precision, recall and F1 per class, macro averages, accuracy,
with random and majority baselines."""
import numpy as np


def prf(y, pred):
    y = np.asarray(y).astype(int)
    pred = np.asarray(pred).astype(int)
    out = {}
    f1s, ps, rs = [], [], []
    for c in (0, 1):
        tp = int(((pred == c) & (y == c)).sum())
        fp = int(((pred == c) & (y != c)).sum())
        fn = int(((pred != c) & (y == c)).sum())
        p = tp / (tp + fp) if tp + fp else 0.0
        r = tp / (tp + fn) if tp + fn else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        ps.append(p); rs.append(r); f1s.append(f)
    out["precision_macro"] = float(np.mean(ps))
    out["recall_macro"] = float(np.mean(rs))
    out["f1_macro"] = float(np.mean(f1s))
    out["precision_sarcastic"] = ps[1]
    out["recall_sarcastic"] = rs[1]
    out["accuracy"] = float((y == pred).mean())
    out["n"] = int(len(y))
    out["n_sarcastic"] = int(y.sum())
    return out


def baselines(y, seed=0, draws=2000):
    y = np.asarray(y).astype(int)
    rng = np.random.default_rng(seed)
    rand = [prf(y, rng.integers(0, 2, len(y))) for _ in range(draws)]
    maj = int(y.mean() >= 0.5)
    return {
        "random": {k: float(np.mean([r[k] for r in rand])) for k in ("precision_macro", "recall_macro", "f1_macro", "accuracy")},
        "majority": prf(y, np.full(len(y), maj)),
    }


def paired_bootstrap_draws(y, p_row, p_base, n=2000, seed=13):
    """macro-F1(row) - macro-F1(base) over `n` resamples of the items with replacement
    (the same resample for both: paired)."""
    y = np.asarray(y)
    rng = np.random.RandomState(seed)
    a, b = np.asarray(p_row) >= 0.5, np.asarray(p_base) >= 0.5
    d = []
    for _ in range(n):
        i = rng.randint(0, len(y), len(y))
        d.append(prf(y[i], a[i])["f1_macro"] - prf(y[i], b[i])["f1_macro"])
    return np.array(d)


def paired_bootstrap(y, p_row, p_base, n=2000, seed=13):
    """95 % interval of macro-F1(row) - macro-F1(base) over items resampled with
    replacement (the same resample for both: paired)."""
    return np.percentile(paired_bootstrap_draws(y, p_row, p_base, n, seed), [2.5, 97.5])


def row(name, m):
    return (f"| {name} | {100*m['precision_macro']:.1f} | {100*m['recall_macro']:.1f} | "
            f"{100*m['f1_macro']:.1f} | {100*m['accuracy']:.1f} |")
