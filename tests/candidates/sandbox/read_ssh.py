# Read the user's SSH key: the planted absolute path, and ~ as the program sees it.
import os

for path in ("__TARGET__", os.path.expanduser("~/.ssh/id_ed25519")):
    try:
        with open(path) as handle:
            print("KEY", handle.read())
    except OSError as exc:
        print("read failed", path, exc)
