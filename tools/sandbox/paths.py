"""Which trees a sandboxed child may read and write, as one policy every layer applies.

Why one policy: bubblewrap realises it as mounts (hidden trees become empty read-only tmpfs,
allowed ones are bound back), Landlock as path rules, and the Python audit hook as a check on
`open`; they must agree, or a program passes under one layer and fails under another.

The child reads the system (/usr, /etc less its private files, /opt, /sys, /proc), the Python
environment (even when it lives in a home directory, as pyenv's does), the compilers and CUDA
install the environment names (CC, CXX, CUDA_HOME, ...), the repository's `tools/`
package (not the rest of the repository, which may hold a .env) and the GPU device nodes. It writes
only its own directory, the build cache and any tree the user adds. It never sees home
directories, /tmp, /run (session buses, agent sockets) or /mnt.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import site
import sys
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
TOOLS_DIR = REPO_ROOT / "tools"
HIDDEN_SYSTEM = ("/home", "/root", "/tmp", "/var/tmp", "/run", "/mnt", "/media", "/srv", "/lost+found")
PRIVATE_ETC = ("shadow", "shadow-", "gshadow", "gshadow-", "ssh", "sudoers", "sudoers.d", "security")
PRIVATE_ETC_TREES = ("ssl/private",)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
GPU_DEVICE_GLOBS = ("/dev/nvidia*", "/dev/nvidia-caps/*", "/dev/dxg")
# Unix sockets the NVIDIA driver stack talks to (path sockets: a network namespace keeps them).
DRIVER_SOCKETS = ("/run/nvidia-persistenced", "/var/run/nvidia-persistenced", "/run/nvidia-fabricmanager")


@dataclass(frozen=True)
class FilesystemPolicy:
    """Trees as absolute paths; `read` and `write` are allowed inside `hidden` too (they win).

    private: trees the sandbox replaces with its own small tmpfs (bubblewrap's /dev/shm, and /tmp
    under a profiler): writable there, never the host's.
    """

    hidden: tuple[str, ...]
    hidden_files: tuple[str, ...]
    read: tuple[str, ...]
    write: tuple[str, ...]
    devices: tuple[str, ...]
    private: tuple[str, ...] = ()

    def may_write(self, path: str) -> bool:
        return under_any(path, self.write) or under_any(path, self.private) or path in self.devices

    def may_read(self, path: str) -> bool:
        """False only inside a hidden tree or file that no allowed tree reopens (reads elsewhere pass)."""
        if under_any(path, self.read) or under_any(path, self.write) or path in self.devices:
            return True
        return not (under_any(path, self.hidden) or path in self.hidden_files)

    def as_dict(self) -> dict[str, list[str]]:
        return {k: list(getattr(self, k)) for k in POLICY_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, list[str]]) -> FilesystemPolicy:
        return cls(**{k: tuple(data.get(k, ())) for k in POLICY_FIELDS})


POLICY_FIELDS = ("hidden", "hidden_files", "read", "write", "devices", "private")


def under_any(path: str, trees: tuple[str, ...]) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in trees)


def home_dirs() -> list[str]:
    """$HOME and the account's home from the password database (they differ under sudo or in tests)."""
    homes = {os.path.expanduser("~")}
    with contextlib.suppress(KeyError):
        homes.add(pwd.getpwuid(os.getuid()).pw_dir)
    return sorted(h for h in homes if h and h != "/")


def python_roots() -> list[str]:
    """The interpreter, its standard library and every site directory, symlinks resolved too."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)}
    roots.update(site.getsitepackages())
    # Packages installed beside the environment and named by PYTHONPATH (a --target folder); not the
    # repository itself, of which only tools/ is readable.
    roots.update(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    user_site = site.getusersitepackages()
    if os.path.isdir(user_site):
        roots.add(user_site)
    roots.update(os.path.realpath(r) for r in list(roots))
    roots.add(os.path.dirname(os.path.realpath(sys.executable)))
    repo = str(REPO_ROOT)
    return _outermost(r for r in roots if os.path.isdir(r) and r != repo and not repo.startswith(r + "/"))


TOOL_VARIABLES = ("CC", "CXX", "PYTORCH_NVCC", "STITCHCUDA_NSYS", "STITCHCUDA_NCU")
TREE_VARIABLES = ("CUDA_HOME", "CUDA_PATH")
LIST_VARIABLES = ("LD_LIBRARY_PATH",)


def toolchain_roots(environ: dict[str, str] | None = None) -> list[str]:
    """Folders of the compilers, profilers and CUDA install the environment names (readable wherever
    they live: a compiler in a home directory is still the toolchain)."""
    env = dict(os.environ if environ is None else environ)
    roots = []
    for name in TOOL_VARIABLES:
        found = shutil.which(env.get(name, "").split(" ")[0]) if env.get(name) else None
        if found:
            roots += [os.path.dirname(found), os.path.dirname(os.path.realpath(found))]
    roots += [env[name] for name in TREE_VARIABLES if env.get(name)]
    roots += [p for name in LIST_VARIABLES for p in env.get(name, "").split(os.pathsep) if p]
    return [r for r in roots if os.path.isdir(r)]


def gpu_devices() -> list[str]:
    found = [p for pattern in GPU_DEVICE_GLOBS for p in glob.glob(pattern)]
    return sorted(p for p in found if not os.path.isdir(p))


def _outermost(paths: object) -> list[str]:
    """Drop paths inside another listed path (one rule or bind covers them)."""
    unique = sorted({os.path.abspath(str(p)) for p in paths})  # type: ignore[attr-defined]
    kept: list[str] = []
    for path in unique:
        if not any(path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def build_policy(
    writable: list[Path],
    *,
    extra_read: tuple[str, ...] = (),
    extra_write: tuple[str, ...] = (),
    private: tuple[str, ...] = (),
) -> FilesystemPolicy:
    """The policy of one run: its writable trees (its own directory, the cache) plus the user's extras;
    private: trees the namespace layer replaces with its own tmpfs (see FilesystemPolicy)."""
    write = _outermost([*(str(w.resolve()) for w in writable), *extra_write])
    hidden = _outermost([*HIDDEN_SYSTEM, *home_dirs(), str(REPO_ROOT)])
    hidden_files = [f"/etc/{name}" for name in PRIVATE_ETC] + [f"/etc/{t}" for t in PRIVATE_ETC_TREES]
    read = [*python_roots(), *toolchain_roots(), str(TOOLS_DIR), *extra_read]
    read += [s for s in DRIVER_SOCKETS if os.path.exists(s)]
    return FilesystemPolicy(
        hidden=tuple(hidden),
        hidden_files=tuple(f for f in hidden_files if os.path.lexists(f)),
        read=tuple(_outermost(p for p in read if os.path.exists(p))),
        write=tuple(write),
        devices=tuple([*(d for d in DEVICES if os.path.exists(d)), *gpu_devices()]),
        private=private,
    )


@dataclass(frozen=True)
class LandlockRules:
    """Landlock's view of a policy: trees to read, directories only to list, trees to write, devices."""

    read: list[str]
    list_only: list[str]
    write: list[str]
    devices: list[str]


def landlock_rules(policy: FilesystemPolicy, carve_proc: bool) -> LandlockRules:
    """The policy as Landlock rules, which can only allow: hidden trees are carved out.

    Carving: a readable tree that contains a hidden one is replaced by its children, down the path
    to the hidden tree, leaving that tree out. /dev is listable, and only the policy's device nodes
    open (a raw disk node stays closed even to root). carve_proc: without a private PID namespace,
    /proc keeps only its non-process files (the launcher adds its own /proc/PID), so no child can
    read another process's environ, the graph's included.
    """
    hidden = [*policy.hidden, *policy.hidden_files, "/dev"]
    if carve_proc:
        hidden.append("/proc")
    readable = _carve("/", tuple(hidden))
    if carve_proc:
        readable += [str(p) for p in Path("/proc").iterdir() if not p.name.isdigit() and p.name != "self"]
    readable += list(policy.read)
    return LandlockRules(
        read=_outermost(readable),
        list_only=["/dev", str(REPO_ROOT)],  # the import system lists the repository to find tools/
        write=[*policy.write, *policy.private],
        devices=list(policy.devices),
    )


def _carve(root: str, hidden: tuple[str, ...]) -> list[str]:
    if under_any(root, hidden):
        return []
    inner = [h for h in hidden if h.startswith(root.rstrip("/") + "/")]
    if not inner:
        return [root]
    try:
        children = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    out: list[str] = []
    for child in children:
        if child.is_symlink():
            continue  # its target is covered (or not) where it lives
        out += _carve(child.path, tuple(inner))
    return out
