# Connect to a listener on 127.0.0.1, from Python and from C (ctypes: no audit hook sees it).
import ctypes
import socket
import struct

try:
    with socket.create_connection(("127.0.0.1", __PORT__), timeout=2) as out:
        out.sendall(b"exfil-python")
except OSError as exc:
    print("python connect failed", exc)
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
if fd >= 0:
    address = struct.pack("=HH4s8x", socket.AF_INET, socket.htons(__PORT__), socket.inet_aton("127.0.0.1"))
    if libc.connect(fd, address, len(address)) == 0:
        libc.write(fd, b"exfil-c", 7)
    libc.close(fd)
else:
    print("c socket failed", ctypes.get_errno())
