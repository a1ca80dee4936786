"""Model selection for every script of models/recipe/ and models/studies/: one rule, in one place.

A candidate (a C, an alpha, an epoch, a recipe) is scored, and the first best in the
order given wins; grids are given in ascending order, so ties go to the smaller value
(the stronger regularisation). Inner cross-validation scores a candidate on out-of-fold
predictions over the training rows only, never on a test fold.
"""
import numpy as np

# The regularisation ladder that `grid_search` walks (protocols.py's C choice): a fixed
# grid picked its top or bottom value on some corpora, where the best C may lie beyond it.
C_LADDER = [0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0]
C_START = (2, 5)


def best(candidates, score, lower_is_better=False):
    """The first candidate with the best score(candidate), and every candidate's score
    (a list in the candidates' order)."""
    scores = [score(c) for c in candidates]
    sign = -1.0 if lower_is_better else 1.0
    i = max(range(len(scores)), key=lambda k: sign * scores[k])
    return candidates[i], scores


def out_of_fold(splits, n, fit_predict, dtype=float):
    """Predictions for rows 0..n, each made by fit_predict(train_idx, test_idx) on the
    split that holds it out."""
    pred = np.zeros(n) if dtype is float else np.empty(n, dtype=dtype)
    for tr, te in splits:
        pred[te] = fit_predict(tr, te)
    return pred


def grid_search(score):
    """The C of C_LADDER with the highest score(C) (the smaller C on ties), starting from
    C_LADDER[C_START] and growing the grid by one step past an edge while that edge
    strictly beats its neighbour. Returns (C, {C: score})."""
    lo, hi = C_START
    scores = {C: score(C) for C in C_LADDER[lo:hi]}
    while True:
        C_best, _ = best(sorted(scores), lambda c: scores[c])
        if C_best == C_LADDER[hi - 1] and hi < len(C_LADDER):
            hi += 1
            scores[C_LADDER[hi - 1]] = score(C_LADDER[hi - 1])
        elif C_best == C_LADDER[lo] and scores[C_best] > scores[C_LADDER[lo + 1]] and lo > 0:
            lo -= 1
            scores[C_LADDER[lo]] = score(C_LADDER[lo])
        else:
            return C_best, scores
