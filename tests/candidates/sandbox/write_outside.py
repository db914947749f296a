# Write outside the work directory: from Python, and from C (ctypes fopen).
import ctypes

try:
    with open("__TARGET__", "w") as handle:
        handle.write("stolen")
except OSError as exc:
    print("python write failed", exc)
libc = ctypes.CDLL(None, use_errno=True)
libc.fopen.restype = ctypes.c_void_p
handle = libc.fopen(b"__TARGET__.c", b"w")
if handle:
    libc.fputs(b"stolen", ctypes.c_void_p(handle))
    libc.fclose(ctypes.c_void_p(handle))
else:
    print("c write failed", ctypes.get_errno())
