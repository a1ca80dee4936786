#!/usr/bin/env bash
# Contrastive pre-training of MiniLM on Sarcasm SIGN pairs, then the text protocols
# (exploratory): writes models/studies/contrastive_text/CONTRASTIVE_TEXT.md and .json; nothing it produces
# is served. About 20 minutes on one core (--skip-finetune: about 5).
# Usage: models/studies/contrastive_text/contrastive_text.sh [--data DIR] [--skip-finetune]
exec "$(dirname "$0")/../textlib/explore_run.sh" contrastive_text CONTRASTIVE_TEXT "$@"
