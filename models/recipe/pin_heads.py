"""Pin heads that were not written by `models/recipe/lib/heads.py`'s `write_head` (which
pins what it writes): the extras head of `models/recipe/extras.py`, or a head made by hand.

    python3 -m models.recipe.pin_heads models/heads extras_head [more names...]   (from the repo root)

Records each `<dir>/<name>.onnx`'s size and SHA-256 in `<dir>/heads.lock.json`. The one
in models/heads is compiled into the daemon (rebuild after pinning); the daemon serves
only pinned heads. Standard library only.
"""
import os
import sys

from models.recipe.lib import heads_lock


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir, names = sys.argv[1], sys.argv[2:]
    for name in names:
        if not os.path.isfile(os.path.join(out_dir, f"{name}.onnx")):
            print(f"pin_heads: {out_dir}/{name}.onnx does not exist", file=sys.stderr)
            return 2
    for name in names:
        heads_lock.pin(out_dir, name)
        print(f"pinned {name} in {os.path.join(out_dir, heads_lock.LOCK)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
