# Read the user's SSH key and a token under ~/.config: the planted absolute paths and ~ as the
# program sees it, from Python and from C (ctypes fopen: no audit hook sees it).
import ctypes
import os

targets = ("__TARGET__", "__CONFIG__", os.path.expanduser("~/.ssh/id_ed25519"))
for path in targets:
    try:
        with open(path) as handle:
            print("KEY", handle.read())
    except OSError as exc:
        print("read failed", path, exc)
libc = ctypes.CDLL(None, use_errno=True)
libc.fopen.restype = ctypes.c_void_p
for path in targets:
    handle = libc.fopen(path.encode(), b"r")
    if handle:
        buffer = ctypes.create_string_buffer(256)
        libc.fread(buffer, 1, 255, ctypes.c_void_p(handle))
        libc.fclose(ctypes.c_void_p(handle))
        print("C-KEY", buffer.value.decode(errors="replace"))
    else:
        print("c read failed", path, ctypes.get_errno())
