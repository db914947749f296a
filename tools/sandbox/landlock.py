"""Landlock, through its three system calls: filesystem rules, TCP rules and scopes for one process tree.

Why our own binding (about a hundred lines of ctypes) and not the `landlock` package: that package
(1.0.0.dev5) covers only filesystem rights and does not negotiate the ABI, and the sandbox needs
the TCP rules (ABI 4) and the abstract-socket and signal scopes (ABI 6) where the kernel has them.
Landlock needs no privilege and no namespace, holds for root too, survives exec and cannot be
lifted, which is why `auto` uses it on every kernel that has it (5.13 and later).
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on every architecture
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the only rights a file rule may name
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]  # fmt: skip


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def abi_version() -> int:
    """The kernel's Landlock ABI (0: none, or disabled at boot)."""
    version = _libc.syscall(
        SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION)
    )
    return max(int(version), 0)


def fs_rights(abi: int) -> int:
    return FS_BY_ABI[max(k for k in FS_BY_ABI if k <= abi)]


@dataclass
class Applied:
    """What the ruleset holds on this kernel: the ABI, and whether TCP and the scopes are covered."""

    abi: int
    tcp: bool
    scopes: bool
    rules: int


def _fail(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"landlock: {what}: {os.strerror(err)}")


def restrict(
    read: list[str], list_only: list[str], write: list[str], devices: list[str], *, block_tcp: bool
) -> Applied:
    """Restrict this process (and everything it execs or forks from now on) to the given trees.

    read: trees opened for reading and executing; list_only: directories that may be listed;
    write: trees with every right; devices: nodes opened read-write with ioctls. block_tcp: no TCP
    connect or bind at all (ABI 4+). Paths that do not exist are skipped. Raises OSError when the
    kernel has no Landlock or refuses the ruleset.
    """
    abi = abi_version()
    if abi < 1:
        raise OSError("landlock: not available on this kernel")
    handled = fs_rights(abi)
    attr = _RulesetAttr(handled, 0, 0)
    size = 8
    if abi >= 4 and block_tcp:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
        size = 24
    ruleset = int(
        _libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    )
    if ruleset < 0:
        raise _fail("create_ruleset")
    count = 0
    try:
        grants = [(p, EXECUTE | READ_FILE | READ_DIR) for p in read]
        grants += [(p, READ_DIR) for p in list_only]
        grants += [(p, handled) for p in write]
        grants += [(p, READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV) for p in devices]
        for path, rights in grants:
            count += _add_path_rule(ruleset, path, rights & handled)
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _fail("no_new_privs")
        if _libc.syscall(SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:
            raise _fail("restrict_self")
    finally:
        os.close(ruleset)
    return Applied(abi, bool(attr.handled_access_net), bool(attr.scoped), count)


def _add_path_rule(ruleset: int, path: str, rights: int) -> int:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = _PathBeneath(rights, fd)
        if (
            _libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0))
            != 0
        ):
            raise _fail(f"add_rule {path}")
    finally:
        os.close(fd)
    return 1
