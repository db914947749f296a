"""The eval's device health check: after a run that may have broken its GPU, probe that GPU (issue 15).

Why: a kernel that corrupts its CUDA context ends its evaluation worker with `runtime_error` or
`crashed`; that is the problem's own failure when a fresh process still gets a working device, but
a GPU that stays broken would fail every later problem sent to it. So after a run whose last
evaluation ended that way (or that ended without a report at all), the executor runs a tiny probe
(`python -m tools.worker.probe`: allocate, launch, synchronise) in a fresh process on the same GPU.
If it fails, that GPU is dropped for the rest of the eval and the problem runs again elsewhere
(evals.ray_executor); if it passes, the record stands as the problem's own failure.

Dropped GPUs are appended to OUT/gpu_health.jsonl (one line each: the node, the GPU, why, after
which problem, when), which the summary repeats. Standard library only.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# Worker statuses that a broken device produces (an illegal address, a dead process, a hang), and
# "no_report": the run itself died or timed out before it wrote one.
FAULT_STATUSES = ("runtime_error", "crashed", "timeout", "no_report")
DEFAULT_PROBE = ("-m", "tools.worker.probe")  # after the node's own interpreter
PROBE_TIMEOUT_S = 120.0  # torch's import and CUDA's start; a hung device fails by running out of it
DROPS_FILE = "gpu_health.jsonl"


def suspect(record: dict[str, Any]) -> str | None:
    """Why this record's GPU may be broken (its last evaluation's status), or None."""
    status = record.get("last_attempt_status")
    return status if status in FAULT_STATUSES else None


@dataclass
class ProbeResult:
    ok: bool
    reason: str = ""  # why it failed (the probe's own words, or how it ended)
    devices: list[dict[str, Any]] = field(default_factory=list)  # the probe's per-device answers
    seconds: float = 0.0

    def failed_indices(self, visible: int) -> list[int]:
        """Which of the `visible` devices failed (all of them when the probe could not say)."""
        named = [int(d["index"]) for d in self.devices if not d.get("ok") and "index" in d]
        return sorted(set(named)) if named else list(range(visible))


def probe_command(command: Sequence[str] | None) -> list[str]:
    """The probe to run: the given command, else the node's own interpreter on tools.worker.probe."""
    return list(command) if command else [sys.executable, *DEFAULT_PROBE]


def run_probe(command: Sequence[str] | None = None, timeout_s: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """Run the probe in a fresh process (it inherits CUDA_VISIBLE_DEVICES: the caller's GPU)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    started = time.monotonic()
    try:
        proc = subprocess.run(
            probe_command(command), cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return ProbeResult(False, f"the probe hung for {timeout_s:.0f} s", seconds=timeout_s)
    except OSError as exc:
        return ProbeResult(False, f"the probe did not start: {exc}")
    seconds = round(time.monotonic() - started, 2)
    answer: dict[str, Any] = {}
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if lines:
        try:
            parsed = json.loads(lines[-1])
            answer = parsed if isinstance(parsed, dict) else {}
        except ValueError:
            answer = {}
    devices = [d for d in answer.get("devices", []) if isinstance(d, dict)]
    if proc.returncode == 0 and answer.get("ok", True):
        return ProbeResult(True, str(answer.get("note", "")), devices, seconds)
    tail = [line for line in (proc.stderr or "").splitlines() if line.strip()][-1:]
    reason = str(answer.get("error") or (tail[0] if tail else "") or f"the probe exited {proc.returncode}")
    return ProbeResult(False, reason[:500], devices, seconds)


def set_aside(out: Path, key: str, fault_round: int) -> str | None:
    """Move a faulted run's folder to OUT/runs/<key>.gpu-fault-N, so the retry starts afresh (the
    graph would otherwise resume its finished checkpoint); the new name, relative to OUT."""
    run_dir = out / "runs" / key
    if not run_dir.exists():
        return None
    target = run_dir.with_name(f"{run_dir.name}.gpu-fault-{fault_round}")
    for n in itertools.count(2):
        if not target.exists():
            break
        target = run_dir.with_name(f"{run_dir.name}.gpu-fault-{fault_round}-{n}")
    run_dir.rename(target)
    return str(target.relative_to(out))


def note_drop(out: Path, drop: dict[str, Any]) -> None:
    """Append one dropped GPU to OUT/gpu_health.jsonl."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / DROPS_FILE).open("a") as fh:
        fh.write(json.dumps(drop) + "\n")


def read_drops(out: Path) -> list[dict[str, Any]]:
    """Every GPU this eval's OUT has dropped (all its sessions), oldest first."""
    path = out / DROPS_FILE
    if not path.exists():
        return []
    drops = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            drops.append(entry)
    return drops


def drop_line(drop: dict[str, Any]) -> str:
    """'GPU 1 (GPU-8f..) of node host dropped after level1/3_X (runtime_error): the probe failed: ...'."""
    uuid = f" ({drop['uuid']})" if drop.get("uuid") else ""
    return (
        f"GPU {drop.get('gpu')}{uuid} of node {drop.get('node') or '?'} dropped after "
        f"{drop.get('problem')} ({drop.get('status')}): the probe failed: {drop.get('reason')}"
    )


class LocalHealth:
    """The local executor's health check: its runs share one GPU, so there is no other GPU to run a
    problem again on. After a suspect run it probes that GPU; a failed probe drops it: that run and
    every run still in flight or to come are not recorded (their runs set aside), and the next eval
    with the same OUT runs them, once the GPU is fixed."""

    def __init__(self, out: Path, probe: Sequence[str] | None, enabled: bool) -> None:
        self.out, self.probe, self.enabled = out, probe, enabled
        self.failed = threading.Event()
        self._lock = threading.Lock()

    def keep(self, record: dict[str, Any]) -> bool:
        """Whether to record this run (False: its GPU failed the probe, now or earlier; the run is set aside)."""
        status = suspect(record) if self.enabled else None
        if status is None:
            return True  # whatever happened to the GPU, this run finished cleanly
        if not self.failed.is_set():
            result = run_probe(self.probe)
            record["gpu_probe"] = {"ok": result.ok, "seconds": result.seconds}
            if result.ok:
                return True
            with self._lock:
                first = not self.failed.is_set()
                self.failed.set()
            if first:
                self._drop(record["problem"], status, result)
        set_aside(self.out, record["problem"], 1)
        return False

    def _drop(self, problem: str, status: str, result: ProbeResult) -> None:
        uuids = [str(d["uuid"]) for d in result.devices if not d.get("ok") and d.get("uuid")]
        drop = {
            "problem": problem,
            "status": status,
            "reason": result.reason,
            "node": socket.gethostname(),
            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES") or "0",
            "uuid": ",".join(uuids) or None,
            "at": round(time.time(), 1),
        }
        note_drop(self.out, drop)
        print(
            f"stitchcuda: {drop_line(drop)}; the eval stops (no other GPU here)", file=sys.stderr, flush=True
        )
