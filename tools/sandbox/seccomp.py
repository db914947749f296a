"""The system-call filter: which calls a sandboxed program may make, and which the parent hears about.

Why libseccomp (through `pyseccomp`, a ctypes binding with the API of libseccomp's own Python
module): writing BPF by hand means getting architecture checks, the x32 ABI and per-architecture
call numbers right; libseccomp does that and is on every distribution (apt itself depends on it).
The parent compiles the filter to BPF here; the launcher inside the sandbox only loads those bytes
(`load`), so the child needs neither pyseccomp nor libseccomp.

Calls the filter catches go to the parent as user notifications (kernel 5.5+): it refuses and
reports IP sockets, privileged calls and session changes, and counts processes (tools.sandbox.supervisor).
On older kernels the same calls fail with an errno and nothing is reported.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import tempfile
from dataclasses import dataclass
from typing import Any

AF_UNIX, AF_NETLINK = 1, 16
FAMILY_RANGE = 64  # families at or above this are refused as one rule
CLONE_THREAD = 0x00010000
PROCESS_CALLS = ("fork", "vfork")
PRIVILEGED_CALLS = (
    "mount", "umount2", "pivot_root", "chroot", "setns", "unshare", "bpf", "init_module", "finit_module",
    "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "keyctl", "add_key",
    "request_key", "open_by_handle_at", "mount_setattr", "fsopen", "fsmount", "move_mount", "open_tree",
)  # fmt: skip
INSPECTION_CALLS = ("ptrace", "process_vm_readv", "process_vm_writev")  # profilers under nsys/ncu need them
SILENT_ERRNO = {"clone3": errno.ENOSYS, "io_uring_setup": errno.ENOSYS, "userfaultfd": errno.EPERM}
# clone3 hides its flags behind a pointer; glibc falls back to clone, whose flags the filter can read.
# io_uring can open sockets without the socket call.

SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, SECCOMP_FILTER_FLAG_SPEC_ALLOW = 1, 8, 4
PR_SET_NO_NEW_PRIVS = 38
SYS_SECCOMP = {"x86_64": 317, "aarch64": 277, "ppc64le": 358, "s390x": 348, "riscv64": 277}
NOTIF = struct.Struct("=QIIiIQ6Q")  # struct seccomp_notif: id, pid, flags, then seccomp_data
RESPONSE = struct.Struct("=QqiI")  # struct seccomp_notif_resp: id, val, error, flags
IOCTL_RECV, IOCTL_SEND = 0xC0502100, 0xC0182101
FLAG_CONTINUE = 1


@dataclass(frozen=True)
class Compiled:
    """A filter ready for `load`: BPF bytes, whether it notifies the parent, and its call numbers."""

    bpf: bytes
    notify: bool
    names: dict[int, str]


def available() -> tuple[bool, str]:
    """Whether this machine can compile filters, and why not when it cannot."""
    try:
        import pyseccomp  # noqa: F401
    except (ImportError, OSError) as exc:
        return False, f"pyseccomp or libseccomp.so.2 missing ({exc}); pip install pyseccomp"
    if platform.machine() not in SYS_SECCOMP:
        return False, f"no seccomp call number known for {platform.machine()}"
    return True, ""


def notify_supported() -> bool:
    """User notifications that can also let a call continue: Linux 5.5 and later."""
    release = platform.release().split("-")[0].split(".")
    try:
        major, minor = int(release[0]), int(release[1])
    except (IndexError, ValueError):
        return False
    return (major, minor) >= (5, 5)


def compile_filter(*, strict: bool, count_processes: bool, notify: bool) -> Compiled:
    """BPF for the native architecture.

    strict: the program alone (not under a profiler): also refuse sockets other than Unix and
    netlink, ptrace and cross-process memory calls, and leaving the session. A profiler talks to
    its target over loopback TCP (inside the sandbox's own network namespace) and traces it.
    count_processes: send every new process (fork, vfork, clone without CLONE_THREAD) to the parent.
    notify: report refusals to the parent; False turns every report into a plain errno.
    """
    import pyseccomp as sc

    arch = sc.system_arch()
    deny_ip = sc.NOTIFY if notify else sc.ERRNO(errno.EACCES)
    deny_call = sc.NOTIFY if notify else sc.ERRNO(errno.EPERM)
    filt = sc.SyscallFilter(sc.ALLOW)
    names: dict[int, str] = {}

    def rule(action: int, name: str, *args: Any) -> None:
        number = sc.resolve_syscall(arch, name)
        if number < 0:
            return  # not a call on this architecture (fork and vfork on arm64)
        filt.add_rule(action, name, *args)
        names[number] = name

    if strict:
        for family in range(FAMILY_RANGE):
            if family not in (AF_UNIX, AF_NETLINK):
                rule(deny_ip, "socket", sc.Arg(0, sc.EQ, family))
        rule(deny_ip, "socket", sc.Arg(0, sc.GE, FAMILY_RANGE))
    for name in PRIVILEGED_CALLS + (INSPECTION_CALLS if strict else ()):
        rule(deny_call, name)
    if strict:
        rule(deny_call, "setsid")  # leaving the session would leave the kill and the process count
    if count_processes and notify:
        for name in PROCESS_CALLS:
            rule(sc.NOTIFY, name)
        rule(sc.NOTIFY, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    for name, code in SILENT_ERRNO.items():
        rule(sc.ERRNO(code), name)
    with tempfile.TemporaryFile() as handle:
        filt.export_bpf(handle)
        handle.seek(0)
        bpf = handle.read()
    return Compiled(bpf, notify, names)


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load(bpf: bytes, *, listener: bool) -> int | None:
    """Install the filter on this process (kept across fork and exec); the listener fd when asked.

    SPEC_ALLOW keeps the CPU's speculation settings as they were: without it, kernels whose mitigation
    mode is "seccomp" turn on Speculative Store Bypass Disable for every filtered process, which slows
    interpreted host code (a timed forward's Python issue time) for candidate and baseline alike
    (docs/sandbox.md). Kernels before 4.17 refuse the flag; the filter then loads without it.
    Runs in the launcher, inside the sandbox: standard library only.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    buffer = ctypes.create_string_buffer(bpf, len(bpf))
    program = _Program(len(bpf) // 8, ctypes.addressof(buffer))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp: no_new_privs refused")
    number = SYS_SECCOMP[platform.machine()]
    flags = SECCOMP_FILTER_FLAG_NEW_LISTENER if listener else 0
    result = int(
        libc.syscall(
            number, SECCOMP_SET_MODE_FILTER, flags | SECCOMP_FILTER_FLAG_SPEC_ALLOW, ctypes.byref(program)
        )
    )
    if result < 0 and ctypes.get_errno() == errno.EINVAL:
        result = int(libc.syscall(number, SECCOMP_SET_MODE_FILTER, flags, ctypes.byref(program)))
    if result < 0:
        err = ctypes.get_errno()
        what = "filter with a listener" if listener else "filter"
        raise OSError(err, f"seccomp: {what} refused: {os.strerror(err)}")
    return result if listener else None


@dataclass(frozen=True)
class Notification:
    """One intercepted call: its id (for the answer), the calling process, the call and its arguments."""

    id: int
    pid: int
    nr: int
    args: tuple[int, ...]

    @classmethod
    def unpack(cls, raw: bytes) -> Notification:
        nid, pid, _flags, nr, _arch, _ip, *args = NOTIF.unpack(raw)
        return cls(nid, pid, nr, tuple(args))


def answer(fd: int, notification: Notification, *, error: int = 0, proceed: bool = False) -> None:
    """Let the call run (proceed) or fail it with `error`; a process that died meanwhile is ignored."""
    import fcntl

    flags = FLAG_CONTINUE if proceed else 0
    reply = bytearray(RESPONSE.pack(notification.id, 0, 0 if proceed else -error, flags))
    try:
        fcntl.ioctl(fd, IOCTL_SEND, reply)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise


def receive(fd: int) -> Notification | None:
    """The next pending notification, or None when its caller is already gone."""
    import fcntl

    raw = bytearray(NOTIF.size)
    try:
        fcntl.ioctl(fd, IOCTL_RECV, raw)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.EINTR):
            return None
        raise
    return Notification.unpack(bytes(raw))
