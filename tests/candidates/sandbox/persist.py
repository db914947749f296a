# Leave something behind that outlives the run: a module in the repository's tools/ (imported by the
# graph) and a .pth file in the Python environment (run by every interpreter), from Python and from C.
import ctypes

for path in ("__REPO_FILE__", "__SITE_FILE__"):
    try:
        with open(path, "w") as handle:
            handle.write("# stolen\n")
    except OSError as exc:
        print("python write failed", path, exc)
libc = ctypes.CDLL(None, use_errno=True)
libc.fopen.restype = ctypes.c_void_p
for path in ("__REPO_FILE__", "__SITE_FILE__"):
    handle = libc.fopen(f"{path}.c".encode(), b"w")
    if handle:
        libc.fputs(b"# stolen\n", ctypes.c_void_p(handle))
        libc.fclose(ctypes.c_void_p(handle))
    else:
        print("c write failed", path, ctypes.get_errno())
