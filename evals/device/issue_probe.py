"""Where a forward's time goes in the strict timing loop beyond its kernels (device side, diagnosis).

Measured (twelfth and thirteenth sessions, H100): our programs lose 2-5% to eager on problems where
both run kernels at the copy ceiling (ReLU, GELU, softmax: 0.95-0.97x in the suite's strict
timing), more than their extra issue time explains (a hot loop: ReLU 19 us ours, 13 eager; the
strict loop 26 and 15). Per probe request, ours and eager's: the median issue time (call to return,
the device idle) in a hot loop (evals.device.host_overhead.host_us) and in the worker's strict loop
(tools.worker.timing.time_strict, no output check), the strict loop's mean milliseconds, and the
device's own time per call (calls issued back to back between two events). Strict minus back to back
is what a call pays beyond its kernels. The last two columns: each side's median issue time when the
two are timed as the verifier times them, interleaved in rounds (tools.worker.rounds), and the CUDA
runtime libraries mapped into the process (a program's extension may bring a second libcudart). (A first version also timed the hot loop after the CPU read
64 MB before each call: every forward, ours and eager's alike, issued about 100 us slower, so cold
CPU caches alone do not set ours apart.)

    python -m evals.device.verify_probe --write out/probe-issue [PROBLEM ...]   # CPU machine
    python3 -m evals.device.issue_probe out/probe-issue                        # device machine

It runs the offline policy's own programs on the device machine only, as the GPU tests do.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from evals.device.host_overhead import back_to_back_ms, host_us, load_case

CALLS = 100


def strict_stats(fn: Any, inputs: list[Any], calls: int = CALLS) -> dict[str, float]:
    """The strict timing loop's (tools.worker.timing.time_strict, no output check) median issue
    microseconds and mean milliseconds per call."""
    from tools.worker.timing import time_strict

    stats = time_strict(fn, [inputs], inputs[0].device, warmup=3, trials=calls)
    return {"issue_us": float(stats["issue_median_ms"]) * 1e3, "ms": float(stats["mean_ms"])}


def interleaved_issue_us(ours: Any, eager: Any, inputs: list[Any]) -> dict[str, float]:
    """Each side's median issue microseconds in the verifier's interleaved rounds (no output check)."""
    from tools.worker.rounds import Contestant, time_in_rounds

    info = time_in_rounds(
        [Contestant("ours", ours), Contestant("eager", eager)], [inputs], inputs[0].device, trials=CALLS
    )
    return {f"{who} rounds issue us": float(info[who]["issue_median_ms"]) * 1e3 for who in ("ours", "eager")}


def cudart_libraries() -> str:
    """The libcudart files mapped into this process, by file name."""
    maps = Path("/proc/self/maps").read_text().splitlines()
    names = {line.split()[-1].rsplit("/", 1)[-1] for line in maps if "libcudart" in line}
    return ",".join(sorted(names)) or "-"


def measure(fn: Any, inputs: list[Any]) -> dict[str, float]:
    strict = strict_stats(fn, inputs)
    return {
        "hot issue us": host_us(fn, inputs),
        "strict issue us": strict["issue_us"],
        "strict ms": strict["ms"],
        "back-to-back ms": back_to_back_ms(fn, inputs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m evals.device.issue_probe", description=__doc__.split("\n")[0]
    )
    parser.add_argument("folder", type=Path, help="verify_probe's folder of requests")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for path in sorted(args.folder.glob("*.request.json")):
            case = load_case(path, Path(scratch))
            row: dict[str, Any] = {"problem": case.problem}
            for who, fn in (("ours", case.candidate), ("eager", case.reference)):
                row.update({f"{who} {k}": v for k, v in measure(fn, case.inputs).items()})
            row.update(interleaved_issue_us(case.candidate, case.reference, case.inputs))
            rows.append(row)
            print("cudart:", cudart_libraries(), flush=True)
            print(" ".join(f"{k}={v:.3f}" if isinstance(v, float) else v for k, v in row.items()), flush=True)
            del case
    columns = [k for k in rows[0] if k != "problem"] if rows else []
    print("| problem | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for row in rows:
        print(f"| {row['problem']} | " + " | ".join(f"{row[c]:.3f}" for c in columns) + " |")
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
