"""Pin trained heads in `heads.lock.json` beside them (standard library only).

The daemon serves only heads whose ONNX SHA-256 is pinned in models/heads/heads.lock.json,
which is compiled into the binary as models/models.lock.json is: a head retrained into
models/heads is pinned in the same step (`heads.write_head` calls `pin`), and served once
the binary is rebuilt. Heads written elsewhere (a protocol's work dir) get a lock beside
them that nothing trusts; `sarcasmd eval --heads DIR` measures them with a warning.
"""
import hashlib
import json
import os

LOCK = "heads.lock.json"


def pin(out_dir, name):
    """Record `<out_dir>/<name>.onnx`'s size and SHA-256 in `<out_dir>/heads.lock.json`."""
    onnx = os.path.join(out_dir, f"{name}.onnx")
    with open(onnx, "rb") as f:
        data = f.read()
    path = os.path.join(out_dir, LOCK)
    lock = {"version": 1, "heads": {}}
    if os.path.exists(path):
        with open(path) as f:
            lock = json.load(f)
    lock["heads"][name] = {"onnx_bytes": len(data), "onnx_sha256": hashlib.sha256(data).hexdigest()}
    with open(path + ".tmp", "w") as f:
        json.dump(lock, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(path + ".tmp", path)
