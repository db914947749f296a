"""Why a forward's host time grows inside the verifier's worker (device side, diagnosis).

Measured (tenth session, H100): our ReLU program issues a call in ~20 us in a plain process, 54 us in
the worker with the sandbox off and 103 us with it on; eager's grows alike (14 / 21 / 40 us). This
runs one child process per setting (plain, sandbox off, sandbox auto), each reporting what could slow
its host code: CPU affinity, the kernel's speculation mitigations for it (a seccomp filter without
SPEC_ALLOW turns on Speculative Store Bypass Disable where the kernel's mode is "seccomp"), the
sandbox layers, a pure-Python loop, a tiny CUDA op's host time, and each probe request's forward
(ours, eager, and ours with the worker's audit-hook watch active, plus the audit events it raises).

    python -m evals.device.verify_probe --write out/probe-host [PROBLEM ...]     # CPU machine
    python3 -m evals.device.host_probe out/probe-host                             # device machine

It runs the offline policy's own programs on the device machine only, as the GPU tests do.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from evals.device.host_overhead import host_us, load_case

REPO = Path(__file__).resolve().parents[2]
SETTINGS = ("plain", "off", "auto")


def _status_lines() -> dict[str, str]:
    wanted = ("Seccomp", "Speculation_Store_Bypass", "SpeculationIndirectBranch", "Cpus_allowed_list")
    text = Path("/proc/self/status").read_text()
    return {k: v.strip() for k, _, v in (line.partition(":") for line in text.splitlines()) if k in wanted}


def _python_loop_us() -> float:
    """Median microseconds of a fixed pure-Python loop (dict and attribute work, no allocation churn)."""
    times = []
    for _ in range(30):
        start = time.perf_counter()
        d: dict[int, int] = {}
        for i in range(20000):
            d[i & 63] = d.get(i & 63, 0) + i
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def _forward_rows(folder: Path, scratch: Path) -> list[dict[str, Any]]:
    import torch

    from tools.worker.dynamic_checks import Watch
    from tools.worker.harness import Harness

    events: list[str] = []
    counting = [False]

    def count(event: str, args: tuple[Any, ...]) -> None:
        if counting[0]:
            events.append(event)

    sys.addaudithook(count)
    harness = Harness({}, Watch(), torch.device("cuda"))  # its watched() is the verifier's candidate call
    rows = []
    for path in sorted(folder.glob("*.request.json")):
        case = load_case(path, scratch)
        counting[0] = True
        with torch.no_grad():
            case.candidate(*case.inputs)
        counting[0] = False
        kinds = sorted(set(events))[:8]
        rows.append(
            {
                "problem": case.problem,
                "ours_us": round(host_us(case.candidate, case.inputs), 1),
                "watched_us": round(host_us(harness.watched(case.candidate), case.inputs), 1),
                "eager_us": round(host_us(case.reference, case.inputs), 1),
                "strict_ours_us": _strict_issue_us(case.candidate, case.inputs),
                "strict_eager_us": _strict_issue_us(case.reference, case.inputs),
                "audit_events": len(events),
                "event_kinds": kinds,
            }
        )
        events.clear()
    return rows


def _strict_issue_us(fn: Any, inputs: list[Any]) -> float:
    """The median host time of a call in the worker's strict timing loop (after its L2 flush and sync)."""
    from tools.worker.timing import time_strict

    return round(time_strict(fn, [inputs], "cuda", trials=60)["issue_median_ms"] * 1e3, 1)


def child(folder: Path) -> dict[str, Any]:
    import torch

    x = torch.ones(1, device="cuda")
    tiny = host_us(lambda t: t.add(1.0), [x], 2000)
    with tempfile.TemporaryDirectory() as scratch:
        rows = _forward_rows(folder, Path(scratch))
    return {
        "pid_cpus": len(os.sched_getaffinity(0)),
        "status": _status_lines(),
        "python_loop_us": round(_python_loop_us(), 1),
        "tiny_op_us": round(tiny, 2),
        "forwards": rows,
    }


def run_setting(setting: str, folder: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "evals.device.host_probe", "--child", str(folder.resolve())]
    if setting == "plain":
        env = dict(os.environ, PYTHONPATH=str(REPO))
        proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        out, err, annotate = proc.stdout, proc.stderr, {}
    else:
        from tools.sandbox import Sandbox, SandboxSettings

        root = Path(tempfile.mkdtemp(prefix="host-probe-"))
        box = Sandbox(
            root,
            SandboxSettings.resolve(setting, device="cuda", timeout_s=300),
            readable=[str(REPO / "evals"), str(folder.resolve())],
        )
        with box:
            handle = box.popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out, err = handle.communicate(timeout=300)
        annotate = box.annotate({}).get("sandbox", {})
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        return {"setting": setting, "error": err[-2000:]}
    result = json.loads(lines[-1])
    result["setting"] = setting
    result["layers"] = {k: v.get("on") for k, v in annotate.get("layers", {}).items()}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m evals.device.host_probe", description=__doc__.split("\n")[0]
    )
    parser.add_argument("folder", type=Path, help="verify_probe's folder of requests")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.folder)), flush=True)
        return 0
    results = [run_setting(setting, args.folder) for setting in SETTINGS]
    for result in results:
        print(json.dumps(result), flush=True)
    print(
        "| setting | layers on | status | cpus | python loop us | tiny op us | problem | ours us | watched us | eager us "
        "| strict issue us ours/eager | audit events |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "error" in r:
            print(f"| {r['setting']} | error: {r['error'][-200:]!r} |")
            continue
        layers = ",".join(k for k, on in r["layers"].items() if on) or "-"
        status = "; ".join(f"{k}={v}" for k, v in r["status"].items() if k != "Cpus_allowed_list")
        for f in r["forwards"]:
            print(
                f"| {r['setting']} | {layers} | {status} | {r['pid_cpus']} | {r['python_loop_us']} | "
                f"{r['tiny_op_us']} | {f['problem']} | {f['ours_us']} | {f['watched_us']} | {f['eager_us']} | "
                f"{f['strict_ours_us']}/{f['strict_eager_us']} | {f['audit_events']} {f['event_kinds']} |"
            )
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
