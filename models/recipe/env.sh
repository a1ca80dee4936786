# Sourced by the models/recipe/*.sh and models/studies/*/*.sh wrappers: repo root as cwd
# (the scripts run as `python -m models.recipe.<name>` / `models.studies.<study>.<name>`
# from there), the corpora dir ($data, from `--data DIR` or ../shared/data), the training
# venv ($venv), a release build and the manifests.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
data="../shared/data"
[ "${1:-}" = "--data" ] && data="$2"
[ -d "$data" ] || { echo "error: $data not found (the training corpora live in ../shared/data)" >&2; exit 2; }
cache="${XDG_CACHE_HOME:-$HOME/.cache}/sarcasmd"
venv="$cache/venv-train"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r models/recipe/requirements.txt
cargo build --release --locked
# Every corpus in $data as a manifest (docs/manifest.md), into $cache/manifests.
python3 scripts/manifests.py --data "$data" --out "$cache/manifests"
# The feature versions the heads record (the daemon refuses a head whose version differs).
prosody_version=$(grep -o 'PROSODY_FEATURE_VERSION: &str = "[^"]*"' -r src/views/prosody | head -1 | sed 's/.*"\(.*\)"/\1/')
vision_version=$(grep -o 'VISION_FEATURE_VERSION: &str = "[^"]*"' -r src/views/vision | head -1 | sed 's/.*"\(.*\)"/\1/')
