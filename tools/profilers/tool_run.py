"""Starting the profiled driver (`python -m tools.profilers.target`) under a tool, and reading its answer.

Why: ncu, nsys and the PyTorch-profiler fallback all run the same driver in a child process of its
own session, with a wall-time limit, a private TMPDIR and (for code from a problem or a candidate)
inside the sandbox; the driver always writes a META.json saying what happened (status, device, the
kernels the candidate compiled). Standard library only.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.process import read_json, wait_then_kill_group
from tools.protocol import Finding
from tools.sandbox import Sandbox, SandboxSettings

DEFAULT_ITERS = 5
DEFAULT_WARMUP = 2


@dataclass
class ToolRun:
    """What one child process did: exit code, the end of its output, whether it hit the limit."""

    command: list[str]
    returncode: int | None
    output: str
    seconds: float
    timed_out: bool = False
    findings: list[Finding] = field(default_factory=list)  # sandbox_violation, when sandboxed

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.findings


# Who runs the candidate or reference code under run_tool(sandbox=...): the driver itself, or a
# profiler (loopback TCP and tracing inside the sandbox; ncu's counters need CAP_SYS_ADMIN as root).
SANDBOX_PROFILES: dict[str, tuple[str, tuple[str, ...]]] = {
    "driver": ("program", ()),
    "nsys": ("tool", ()),
    "ncu": ("tool", ("CAP_SYS_ADMIN",)),
}


def run_tool(
    command: Sequence[str],
    *,
    timeout_s: float,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    log_path: str | os.PathLike[str] | None = None,
    tail_chars: int = 20000,
    sandbox: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> ToolRun:
    """Run `command` in its own process group with a wall-time limit; never raises for the child's sake.

    Output goes to a file (no pipe can fill up); on timeout the whole group is killed, so a hung
    profiled program dies with its profiler. sandbox: a SANDBOX_PROFILES name when the command runs
    candidate or reference code (the sandbox's root is `cwd`; cache_dir the build cache it uses).
    """
    started = time.monotonic()
    owned = log_path is None
    if log_path is None:
        handle, name = tempfile.mkstemp(prefix="stitch-tool-", suffix=".log")
        os.close(handle)
        log_path = name
    log = Path(log_path)
    box = _sandbox_for(sandbox, command, cwd, cache_dir, timeout_s)
    try:
        with open(log, "wb") as out, box or contextlib.nullcontext():
            try:
                popen = box.popen if box else functools.partial(subprocess.Popen, start_new_session=True)
                proc = popen(list(command), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT)  # fmt: skip
            except OSError as exc:
                return ToolRun(list(command), None, f"cannot start {command[0]}: {exc}", 0.0)
            timed_out = wait_then_kill_group(proc, timeout_s)
        text = log.read_bytes()[-tail_chars:].decode(errors="replace")
        findings = box.annotate({}).get("findings", []) if box else []
        seconds = round(time.monotonic() - started, 3)
        return ToolRun(list(command), proc.returncode, text, seconds, timed_out, findings)
    finally:
        if owned:
            with contextlib.suppress(OSError):
                log.unlink()


def _sandbox_for(
    profile: str | None,
    command: Sequence[str],
    cwd: str | os.PathLike[str] | None,
    cache_dir: str | os.PathLike[str] | None,
    timeout_s: float,
) -> Sandbox | None:
    if profile is None:
        return None
    kind, caps = SANDBOX_PROFILES[profile]
    tool_home = os.path.dirname(os.path.dirname(os.path.realpath(shutil.which(command[0]) or command[0])))
    return Sandbox(
        cwd or os.getcwd(),
        SandboxSettings.resolve(timeout_s=timeout_s),
        profile=kind,
        caches=[cache_dir] if cache_dir else [],
        readable=[tool_home] if kind == "tool" else [],
        keep_caps=caps,
    )


def driver_env(workdir: str | os.PathLike[str], extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of the profiled driver (the sandbox filters it): a private TMPDIR, unbuffered output."""
    env = dict(os.environ)
    env["TMPDIR"] = str(workdir)
    env["TORCH_EXTENSIONS_DIR"] = str(Path(workdir) / "torch_extensions")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


@dataclass
class DriverFiles:
    """The files one profiling run works with, all under one directory."""

    directory: Path
    problem: Path
    candidate: Path | None
    meta: Path

    @classmethod
    def write(
        cls, directory: Path, problem_source: str, candidate_source: str | None, tag: str
    ) -> DriverFiles:
        directory.mkdir(parents=True, exist_ok=True)
        problem = directory / "problem.py"
        problem.write_text(problem_source)
        candidate = None
        if candidate_source is not None:
            candidate = directory / "candidate.py"
            candidate.write_text(candidate_source)
        return cls(directory, problem, candidate, directory / f"{tag}.meta.json")


def driver_command(
    files: DriverFiles,
    *,
    target: str,
    mode: str,
    iters: int,
    warmup: int,
    arch: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    trace: Path | None = None,
    python: str = sys.executable,
) -> list[str]:
    """`python -m tools.profilers.target ...` for one target ('candidate' or 'reference')."""
    command = [python, "-m", "tools.profilers.target", "--problem", str(files.problem), "--target", target]
    if files.candidate is not None:
        command += ["--candidate", str(files.candidate)]
    command += ["--mode", mode, "--iters", str(iters), "--warmup", str(warmup), "--out", str(files.meta)]
    if arch:
        command += ["--arch", arch]
    if cache_dir:
        command += ["--cache-dir", str(cache_dir)]
    if trace is not None:
        command += ["--trace", str(trace)]
    return command


def read_meta(path: Path) -> dict[str, Any]:
    """The driver's answer (status, device, own kernels), or {} when it wrote none."""
    return read_json(path) or {}


def meta_failure(meta: dict[str, Any], run: ToolRun) -> str | None:
    """Why the driver run failed, or None when it profiled what it was asked to."""
    if run.timed_out:
        return f"timed out after {run.seconds:.0f} s"
    if run.findings:
        return "the sandbox refused: " + "; ".join(f["evidence"] for f in run.findings)
    if not meta:
        tail = [line for line in run.output.splitlines() if line.strip()][-6:]
        return f"the profiled program wrote no answer (exit code {run.returncode}): " + " | ".join(tail)
    if meta.get("status") != "ok":
        return f"{meta.get('status', 'failed')}: {meta.get('message', '')}".strip()
    return None
