"""The recipe's shared library: what rebuilding the shipped heads needs, and what the
studies in models/studies/ import (never the other way round).

- data: the corpora readers and JSON-lines helpers; selection: the one model-selection
  rule; metrics: macro P/R/F1, baselines, paired bootstraps;
- heads: features by the daemon (`sarcasmd embed` / `features`), the logistic-regression
  heads, their ONNX export (`write_head`, `save_onnx`) and the late-fusion rows;
- heads_lock: pinning heads in heads.lock.json (standard library only);
- embcache: the on-disk embedding cache of 100,000+ meeting lines;
- meetings: our AMI labels (models/labels) as training and test lines, series folds and
  the rare-sarcasm figures;
- text_v2: text head v2's sitcom corpora, training sets and protocols (the v3 recipe
  trains on v2's sitcom part).

Import it as `models.recipe.lib` with the repository root as the working directory
(`python -m models.recipe.<script>`); models/recipe/README.md lists the commands.
"""
