#!/usr/bin/env bash
# Distillation into the shipped text recipe (exploratory): writes
# models/heads/DISTILL_TEXT.md and .json; nothing it produces is served.
# Usage: models/train/distill_text.sh [--data DIR]
exec "$(dirname "$0")/explore_run.sh" distill_text DISTILL_TEXT "$@"
