#!/usr/bin/env bash
# Distillation into the shipped text recipe (exploratory): writes
# models/studies/distill_text/DISTILL_TEXT.md and .json; nothing it produces is served.
# Usage: models/studies/distill_text/distill_text.sh [--data DIR]
exec "$(dirname "$0")/../textlib/explore_run.sh" distill_text DISTILL_TEXT "$@"
