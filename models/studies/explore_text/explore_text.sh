#!/usr/bin/env bash
# Exploratory text-view experiments (stronger encoders, pooling, SIGN pairs, fine-tuning)
# under the issue's protocols; writes models/studies/explore_text/EXPLORE_TEXT.md and .json. Nothing it
# produces is served. About 35 minutes on one core (--skip-finetune: about 10).
# Usage: models/studies/explore_text/explore_text.sh [--data DIR] [--skip-finetune]
exec "$(dirname "$0")/../textlib/explore_run.sh" explore_text EXPLORE_TEXT "$@"
