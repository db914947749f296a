"""The first program inside the sandbox: apply the in-process layers, then exec the real command.

    python -S -m tools.sandbox.launch SPEC_JSON -- COMMAND...

(-S: no site import, so the audit hook of tools/sandbox/site is not installed in the launcher.)

Why a launcher: rlimits, dropped capabilities, Landlock and the seccomp filter are all properties
a process sets on itself and hands to everything it execs, so they must be set after the
namespaces exist (bubblewrap or unshare ran us) and before any untrusted code runs. The launcher
runs no untrusted code: it reads its spec from argv, tells the parent over the inherited control
socket what took effect (and passes the seccomp listener with SCM_RIGHTS), closes the listener,
and execs. Any failure ends it with exit code 125 and a message, before the command starts.
Standard library only.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import fcntl
import json
import os
import resource
import socket
import struct
import sys
from pathlib import Path
from typing import Any

from tools.sandbox import landlock, seccomp

EXIT_LAUNCH_FAILED = 125
RLIMITS = {
    "address_space": resource.RLIMIT_AS,
    "cpu_s": resource.RLIMIT_CPU,
    "file_size": resource.RLIMIT_FSIZE,
    "processes": resource.RLIMIT_NPROC,
    "open_files": resource.RLIMIT_NOFILE,
    "core": resource.RLIMIT_CORE,
}
PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
CAP_VERSION_3 = 0x20080522
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def set_limits(limits: dict[str, list[int]]) -> dict[str, int]:
    """Lower each named rlimit (never raise one above its current hard limit)."""
    applied = {}
    for name, (soft, hard) in limits.items():
        which = RLIMITS[name]
        _, current_hard = resource.getrlimit(which)
        if current_hard != resource.RLIM_INFINITY:
            hard = current_hard if hard == resource.RLIM_INFINITY else min(hard, current_hard)
            soft = hard if soft == resource.RLIM_INFINITY else min(soft, hard)
        resource.setrlimit(which, (soft, hard))
        applied[name] = soft
    return applied


def drop_capabilities(keep: list[int]) -> list[int]:
    """Empty the bounding, ambient and inheritable sets (but `keep`); the capabilities left effective."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        if cap not in keep:
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: bubblewrap dropped them
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = ctypes.create_string_buffer(struct.pack("=Ii", CAP_VERSION_3, 0), 8)
    current = ctypes.create_string_buffer(24)
    libc.capget(header, current)
    words = struct.unpack("=6I", current.raw)
    mask = [0, 0]
    for cap in keep:
        mask[cap // 32] |= 1 << (cap % 32)
    low = [w & mask[0] for w in words[0:3]]
    high = [w & mask[1] for w in words[3:6]]
    wanted = ctypes.create_string_buffer(struct.pack("=6I", low[0], low[1], 0, high[0], high[1], 0), 24)
    if libc.capset(header, wanted) != 0:
        raise OSError(ctypes.get_errno(), "capset refused")
    return [c for c in keep if (low[0] | (high[0] << 32)) >> c & 1]


MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 8, 32, 4096, 16384


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    source_b, target_b, fstype_b, data_b = (
        None if v is None else v.encode() for v in (source, target, fstype, data)
    )
    if libc.mount(source_b, target_b, fstype_b, ctypes.c_ulong(flags), data_b) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target}: {os.strerror(errno)}")


def _remount_read_only(path: str) -> None:
    """Make a bind mount read-only, keeping the flags the mount already has (in a user namespace the
    kernel refuses a remount that would clear nosuid, nodev or noexec)."""
    kept = os.statvfs(path).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC)  # ST_* bits equal MS_* bits
    _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | kept, None)


def private_mounts(mounts: dict[str, Any]) -> list[str]:
    """In the fresh mount namespace unshare made: a size-capped tmpfs on each private tree with the
    kept trees inside it bound back (held open before the tmpfs hides them), and read-only covers
    over the given /proc entries (a fresh procfs keeps its global files writable)."""
    done = []
    held = []
    for path, writable in mounts.get("keep", []):
        with contextlib.suppress(OSError):  # a tree that does not exist needs no mount
            held.append((path, bool(writable), os.open(path, os.O_PATH | os.O_CLOEXEC)))
    for tree, size in mounts.get("tmpfs", []):
        _mount("tmpfs", tree, "tmpfs", MS_NOSUID | MS_NODEV, f"size={int(size)},mode=1777")
        done.append(tree)
    for path, writable, fd in held:
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
        if not writable:
            _remount_read_only(path)
        os.close(fd)
        done.append(f"{path} (kept{'' if writable else ', read-only'})")
    for path in mounts.get("read_only", []):
        _mount(path, path, None, MS_BIND | MS_REC, None)
        _remount_read_only(path)
        done.append(f"{path} (read-only)")
    return done


def loopback_up() -> None:
    """Bring `lo` up in a fresh network namespace (a profiler talks to its target over it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


def apply(spec: dict[str, Any]) -> tuple[dict[str, Any], int | None]:
    """Every in-process layer of the spec, in order; (what took effect, the seccomp listener or None)."""
    done: dict[str, Any] = {}
    if spec.get("loopback_up"):
        loopback_up()
    if spec.get("mounts"):  # before Landlock, which forbids mounting
        done["mounts"] = private_mounts(spec["mounts"])
    done["limits"] = set_limits(spec.get("limits") or {})
    rules = spec.get("landlock")
    if rules:
        own = f"/proc/{os.getpid()}"
        if rules.get("own_proc"):  # /proc is carved (no PID namespace): this process's entry stays readable
            rules["read"] = [*rules["read"], own]
        # The CUDA driver names its helper threads by writing /proc/self/task/TID/comm, and cuInit
        # fails (304, "OS call failed") when it cannot: this process may write its own threads' entries.
        rules["write"] = [*rules["write"], f"{own}/task"]
        applied = landlock.restrict(
            rules["read"], rules["list_only"], rules["write"], rules["devices"], block_tcp=rules["block_tcp"]
        )
        done["landlock"] = {
            "abi": applied.abi,
            "tcp": applied.tcp,
            "scopes": applied.scopes,
            "rules": applied.rules,
        }
    if spec.get("drop_caps"):
        done["capabilities"] = drop_capabilities(list(spec.get("keep_caps") or []))
    listener = None
    filt = spec.get("seccomp")
    if filt:
        listener = seccomp.load(base64.b64decode(filt["bpf"]), listener=bool(filt["listener"]))
        done["seccomp"] = {"listener": listener is not None}
    return done, listener


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m tools.sandbox.launch SPEC_JSON -- COMMAND...", file=sys.stderr)
        return EXIT_LAUNCH_FAILED
    spec = json.loads(argv[0])
    control = socket.socket(fileno=int(spec["control_fd"]))
    try:
        done, listener = apply(spec)
    except Exception as exc:  # any layer that fails stops the run before untrusted code starts
        why = f"sandbox: cannot apply a layer: {type(exc).__name__}: {exc}"
        control.send(json.dumps({"type": "launch_error", "message": why}).encode())
        print(why, file=sys.stderr)
        return EXIT_LAUNCH_FAILED
    message = json.dumps({"type": "ready", "applied": done, "pid": os.getpid()}).encode()
    if listener is not None:
        socket.send_fds(control, [message], [listener])
        os.close(listener)  # the program must not answer its own notifications
    else:
        control.send(message)
    os.set_inheritable(control.fileno(), True)  # the audit hook reports through it
    control.detach()
    try:
        os.execvp(argv[2], argv[2:])
    except OSError as exc:
        print(f"sandbox: cannot run {argv[2]}: {exc}", file=sys.stderr)
    return EXIT_LAUNCH_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
