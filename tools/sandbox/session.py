"""One sandboxed child process, start to finish: the layers, the command line, the watch, the findings.

    with Sandbox(run_dir, settings) as box:
        proc = box.popen([python, "-m", "tools.worker", ...], env=env, cwd=work, ...)
        ... wait for proc as before ...
    box.annotate(response, proc.returncode)   # sandbox_violation findings and the layers record

Why one object: the worker, the baselines child and the profiled driver start their children in
different ways (pipes, log files, under nsys or ncu), but each needs the same sequence: decide
the layers this platform allows (or fail, for `required`), wrap the command, filter the
environment, watch the child, and turn what was refused into findings. Standard library only.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tools.process import kill_group
from tools.sandbox import landlock, namespaces, paths, seccomp
from tools.sandbox.audit import POLICY_ENV, REPORT_FD_ENV
from tools.sandbox.environment import sandbox_environment
from tools.sandbox.limits import SandboxError, SandboxSettings, cache_trees, default_cache_dir
from tools.sandbox.supervisor import Supervisor, Violation

SITE_DIR = Path(__file__).resolve().parent / "site"
LAYERS = ("environment", "limits", "namespaces", "filesystem", "network", "syscalls", "processes")
FINDING_ID = "sandbox_violation"
PROFILES = ("program", "tool")


def _layer(on: bool, how: str) -> dict[str, Any]:
    return {"on": on, "how": how}


class Sandbox:
    """The sandbox of one child. profile 'program': the child runs candidate or reference code
    itself; caches: build caches besides the default one (each with its precompiled headers);
    writable, readable: further trees; 'tool': a profiler (nsys, ncu) runs it, which needs loopback TCP (inside the private
    network namespace), tracing, and for ncu's counters CAP_SYS_ADMIN (keep_caps)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        settings: SandboxSettings,
        *,
        profile: str = "program",
        caches: Sequence[str | os.PathLike[str]] = (),
        writable: Sequence[str | os.PathLike[str]] = (),
        readable: Sequence[str] = (),
        keep_caps: Sequence[str] = (),
    ) -> None:
        if profile not in PROFILES:
            raise ValueError(f"unknown sandbox profile {profile!r}")
        self.root = Path(root).resolve()
        self.settings = settings
        self.profile = profile
        self.cache_dir = default_cache_dir().resolve()
        self.off = settings.mode == "off"
        self.supervisor: Supervisor | None = None
        self.layers: dict[str, dict[str, Any]] = {}
        self._child_end: socket.socket | None = None
        self._parent_end: socket.socket | None = None
        self._proc: subprocess.Popen[Any] | None = None
        if self.off:
            self.layers = {name: _layer(False, "--sandbox off") for name in LAYERS}
            return
        builds = [tree for cache in (self.cache_dir, *map(Path, caches)) for tree in cache_trees(cache)]
        write = [*builds, *(Path(w) for w in writable)]
        for tree in write:
            tree.mkdir(parents=True, exist_ok=True)
        write.insert(0, self.root)
        self.backend = namespaces.detect()
        tool = profile == "tool"
        self.own_proc = namespaces.own_proc(self.backend, tool)
        mounted = self.backend.mounts or namespaces.launcher_mounts_apply(self.backend, tool)
        private = namespaces.private_trees(tool) if mounted else ()
        self.policy = paths.build_policy(
            write,
            extra_read=(*settings.extra_read, *readable),
            extra_write=settings.extra_write,
            private=private,
        )
        self.launcher_mounts = namespaces.launcher_mounts(self.backend, tool, self.policy)
        self.keep_caps = list(keep_caps) if os.geteuid() == 0 else []
        self._plan_layers(tool)

    # ------------------------------------------------------------------------------------------

    def _plan_layers(self, tool: bool) -> None:
        backend, limits = self.backend, self.settings.limits
        self.layers["environment"] = _layer(True, "allowlist; HOME and TMPDIR in the run's directory")
        self.layers["limits"] = _layer(True, limits.describe())
        if backend.name == "none":
            self.layers["namespaces"] = _layer(False, backend.why_not)
        else:
            how = "bubblewrap: network, PID, mount, IPC, UTS" if backend.mounts else "unshare: network"
            if self.launcher_mounts is not None:
                how += ", PID, mount (a private /proc, /tmp and /dev/shm for the profiler)"
            self.layers["namespaces"] = _layer(True, how)
        self.landlock_abi = landlock.abi_version()
        fs = []
        if backend.mounts:
            fs.append("bubblewrap mounts")
        if self.landlock_abi:
            fs.append(f"Landlock ABI {self.landlock_abi}")
        self.layers["filesystem"] = _layer(
            bool(fs), " + ".join(fs) or "no bubblewrap and no Landlock on this kernel"
        )
        usable, why = seccomp.available()
        notify = usable and seccomp.notify_supported()
        self.compiled = (
            seccomp.compile_filter(strict=not tool, count_processes=True, notify=notify) if usable else None
        )
        self.layers["syscalls"] = _layer(
            usable, ("seccomp, refusals reported" if notify else "seccomp, refusals not reported (kernel < 5.5)")
            if usable else why,
        )  # fmt: skip
        net = []
        if backend.name != "none":
            net.append("network namespace (only lo)")
        if usable and not tool:
            net.append("seccomp: Unix and netlink sockets only")
        if self.landlock_abi >= 4 and not tool:
            net.append("Landlock: no TCP")
        self.layers["network"] = _layer(bool(net), " + ".join(net) or "no namespace, no seccomp")
        count = []
        if notify:
            count.append(f"seccomp count, cap {limits.processes}")
        if os.geteuid() != 0:
            count.append("RLIMIT_NPROC")
        self.layers["processes"] = _layer(bool(count), " + ".join(count) or "root ignores RLIMIT_NPROC and seccomp "
                                          "notifications are missing")  # fmt: skip
        missing = [f"{name} ({self.layers[name]['how']})" for name in LAYERS if not self.layers[name]["on"]]
        if self.settings.mode == "required" and missing:
            raise SandboxError("--sandbox required, but this platform lacks: " + "; ".join(missing))

    def _spec(self, control_fd: int) -> dict[str, Any]:
        limits = self.settings.limits
        infinity = resource.RLIM_INFINITY
        space = limits.address_space if limits.address_space is not None else infinity
        rlimits: dict[str, list[int]] = {
            "address_space": [space, space],
            "cpu_s": [limits.cpu_s, limits.cpu_s + 5],
            "file_size": [limits.file_size, limits.file_size],
            "open_files": [limits.open_files, limits.open_files],
            "core": [0, 0],
        }
        if os.geteuid() != 0:
            rlimits["processes"] = [_own_tasks() + limits.processes] * 2
        spec: dict[str, Any] = {
            "control_fd": control_fd,
            "limits": rlimits,
            "drop_caps": True,
            "keep_caps": [_cap_number(c) for c in self.keep_caps],
            "loopback_up": self.profile == "tool" and self.backend.name == "unshare",
        }
        if self.landlock_abi:
            rules = paths.landlock_rules(self.policy, carve_proc=not self.own_proc)
            write = rules.write
            if self.profile == "tool" and self.own_proc:
                # A profiler's children (other PIDs than the launcher's) name their threads through
                # /proc/self/task too; this /proc shows only the sandbox's processes, and its global
                # files (sys, sysrq-trigger, irq, bus) are read-only mounts.
                write = [*write, "/proc"]
            spec["landlock"] = {
                "read": rules.read, "list_only": rules.list_only, "write": write, "devices": rules.devices,
                "block_tcp": self.profile == "program", "own_proc": not self.own_proc,
            }  # fmt: skip
        if self.launcher_mounts is not None:
            spec["mounts"] = self.launcher_mounts
        if self.compiled is not None:
            spec["seccomp"] = {
                "bpf": base64.b64encode(self.compiled.bpf).decode(),
                "listener": self.compiled.notify,
            }
        return spec

    # ------------------------------------------------------------------------------------------

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The child's environment from what the caller would have passed (default: os.environ)."""
        source = dict(os.environ if base is None else base)
        if self.off:  # the caller's environment as it is, the repository importable
            source["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(paths.REPO_ROOT), source.get("PYTHONPATH")) if p
            )
            source.setdefault("TMPDIR", str(self.root))
            return source
        env = sandbox_environment(
            source,
            self.root,
            cache_dir=self.cache_dir,
            python_path=[str(SITE_DIR), str(paths.REPO_ROOT)],
            writable=[Path(w) for w in self.policy.write],
        )
        env[POLICY_ENV] = json.dumps(self.policy.as_dict())
        return env

    def popen(
        self, command: Sequence[str], *, env: Mapping[str, str] | None = None, **kwargs: Any
    ) -> subprocess.Popen[Any]:
        """subprocess.Popen of `command` inside the sandbox (kwargs as Popen's; start_new_session forced)."""
        kwargs["start_new_session"] = True
        if self.off:
            self._proc = subprocess.Popen(list(command), env=self.env(env), **kwargs)
            return self._proc
        self._parent_end, self._child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        child_fd = self._child_end.fileno()
        child_env = self.env(env)
        child_env[REPORT_FD_ENV] = str(child_fd)
        launcher = [
            sys.executable,
            "-S",
            "-m",
            "tools.sandbox.launch",
            json.dumps(self._spec(child_fd)),
            "--",
        ]
        prefix = namespaces.command_prefix(
            self.backend, self.policy, keep_caps=self.keep_caps, tool=self.profile == "tool"
        )
        kwargs["pass_fds"] = (*kwargs.get("pass_fds", ()), child_fd)
        opener = _BubblewrapPopen if self.backend.name == "bwrap" else subprocess.Popen
        proc = opener([*prefix, *launcher, *command], env=child_env, **kwargs)
        self._proc = proc
        self._child_end.close()
        self.supervisor = Supervisor(
            control=self._parent_end,
            limits=self.settings.limits,
            root=self.root,
            watched_disks=sorted({self.root, *map(Path, self.policy.write)}),  # every tree it may fill
            names=self.compiled.names if self.compiled else {},
            kill=lambda: kill_group(proc.pid),
            session=proc.pid,  # start_new_session: the child leads its own session
        )
        self.supervisor.start()
        return proc

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the run: kill whatever it left running (its session, its PID namespace), stop the watch."""
        if self.supervisor is not None:
            self.supervisor.stop()
        if self._parent_end is not None:
            self._parent_end.close()
            self._parent_end = None

    # ------------------------------------------------------------------------------------------

    def violations(self, returncode: int | None) -> list[Violation]:
        """What the sandbox refused or stopped, plus what the exit code and the directory show."""
        found = list(self.supervisor.violations) if self.supervisor else []
        if self.off:
            return found
        if returncode is not None and returncode == -signal.SIGXFSZ:
            found.append(
                Violation("file_size", "a process was killed by SIGXFSZ: it wrote past the file-size limit")
            )
        limit = self.settings.limits.file_size
        for path in _files_at_least(self.root, limit):
            found.append(Violation("file_size", f"{path} reached the file-size limit ({limit >> 20} MiB)"))
        return found

    def record(self) -> dict[str, Any]:
        """The report's sandbox section: the mode, each layer (on/off and how), what took effect."""
        out: dict[str, Any] = {"mode": self.settings.mode, "profile": self.profile, "layers": self.layers}
        if self.supervisor is not None:
            out["applied"] = self.supervisor.applied
            if self.supervisor.launch_error:
                out["launch_error"] = self.supervisor.launch_error
            if self.supervisor.killed_for:
                out["stopped"] = self.supervisor.killed_for
            if self.supervisor.ended:
                out["killed_at_end"] = self.supervisor.ended  # processes the run left running
        return out

    def annotate(self, response: dict[str, Any], returncode: int | None = None) -> dict[str, Any]:
        """Add `sandbox_violation` error findings and the `sandbox` record to a worker-style response.

        returncode: the child's (default: that of the process `popen` started). A run the sandbox
        stopped (fork bomb, disk filler) or could not start says so in the status and message.
        """
        self.close()
        if returncode is None and self._proc is not None:
            returncode = self._proc.returncode
        found = [
            {"id": FINDING_ID, "severity": "error", "evidence": f"{v.kind}: {v.evidence}"}
            for v in self.violations(returncode)
        ]
        if found:
            known = {(f.get("id"), f.get("evidence")) for f in response.get("findings") or []}
            response["findings"] = [*(response.get("findings") or []),
                                    *(f for f in found if (f["id"], f["evidence"]) not in known)]  # fmt: skip
        response["sandbox"] = self.record()
        supervisor = self.supervisor
        if supervisor is not None and supervisor.launch_error:
            response["status"] = "crashed"
            response["message"] = supervisor.launch_error
        elif supervisor is not None and supervisor.killed_for:
            response["status"] = "crashed"
            response["message"] = f"the sandbox stopped the run: {supervisor.killed_for}"
        return response


class _BubblewrapPopen(subprocess.Popen):  # type: ignore[type-arg]
    """bubblewrap exits with 128+N when its child dies of signal N: report -N, as Popen would."""

    def _translate(self) -> int | None:
        code = self.returncode
        if code is not None and 128 < code <= 128 + 64:
            self.returncode = code = -(code - 128)
        return code

    def poll(self) -> int | None:
        super().poll()
        return self._translate()

    def wait(self, timeout: float | None = None) -> int:
        super().wait(timeout)
        return self._translate()  # type: ignore[return-value]


def platform_layers(mode: str | None = None) -> dict[str, Any]:
    """{"mode", "layers"} that a run in `mode` gets on this machine (nothing is started).

    Raises SandboxError for a bad mode, or for `required` where a layer is missing: the CLI calls
    this before a run starts, so such a run fails at once with the reason.
    """
    import tempfile

    settings = SandboxSettings.resolve(mode)
    with tempfile.TemporaryDirectory(prefix="stitch-sandbox-probe-") as root:
        box = Sandbox(root, settings)
        return {"mode": settings.mode, "layers": box.layers}


def layers_line(record: dict[str, Any] | None) -> str:
    """One line for reports: the mode, the layers that are on, and those that are off and why."""
    if not record:
        return "-"
    layers = record.get("layers") or {}
    on = [name for name, layer in layers.items() if layer.get("on")]
    off = [f"{name} ({layer.get('how')})" for name, layer in layers.items() if not layer.get("on")]
    return f"{record.get('mode')}; on: {', '.join(on) or 'none'}" + (
        f"; off: {'; '.join(off)}" if off else ""
    )


def _files_at_least(tree: Path, size: int, most: int = 5) -> list[str]:
    found: list[str] = []
    for folder, _dirs, files in os.walk(tree):
        for name in files:
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                if os.lstat(path).st_size >= size:
                    found.append(path)
                    if len(found) >= most:
                        return found
    return found


def _own_tasks() -> int:
    """Threads and processes of this real uid now (RLIMIT_NPROC counts them all)."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
    return count


CAPABILITIES = {"CAP_SYS_ADMIN": 21, "CAP_SYS_PTRACE": 19, "CAP_PERFMON": 38}


def _cap_number(name: str) -> int:
    if name not in CAPABILITIES:
        raise SandboxError(f"unknown capability {name!r} (known: {', '.join(CAPABILITIES)})")
    return CAPABILITIES[name]
