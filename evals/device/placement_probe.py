"""Does an eager forward's time depend on where its buffers sit? (device side; issue 12's agreement)

Measured (H100 eval `ha`, eighteenth session): the baseline step's eager time and the verifier's
disagreed by more than 3% on 6 of 36 problems (worst 6.7%, adaptive average pooling), and inside one
baseline process the eager time of one forward moved by up to 10% between its four timings, each
beside another torch.compile mode. One explanation is placement: a process keeps its buffers at one
set of addresses for all its calls, and a memory-bound kernel's speed depends on them. This probe
tests that and the remedy (tools.worker.rounds' placement shuffle): for each problem, PROCESSES fresh
processes each time the eager forward as the baseline step does (strict method, 10 rounds of 10
calls, inputs drawn on the device), REPEATS times without and with the shuffle, alternating.

A third setting tests the other suspect, a neighbour's memory churn: `churn` times the eager forward
(unshuffled) while another process allocates and frees 2 GiB of device memory in a loop through the
driver API, launching no kernel (what a worker does when it empties its cache or exits, outside the
device lock). Placement aside, if `churn` is slower than `off`, unmapping or scrubbing another
process's memory takes bandwidth from a timing, and workers must free memory inside the window.

A fourth, `checked`, gives eager the verifier's work between the candidate's timed calls (its output
checked against preallocated buffers, the OS threads listed; eager's own calls get none there): the
verifier adds about 17 us to our calls' host time and 4 to eager's (sixteenth session), and if that
work slows the next call, it is the reason and both sides should get it.

Columns per problem and setting: the mean time; `across`, the spread of the processes' means
(max/min - 1: what the agreement check sees between two processes); `within`, the spread between
one process's repeats (mean over processes); with the shuffle, `rounds`, the spread of the round
means (one placement each); `checked / off` and `churn / off`, those settings' means over the plain one. Placement
matters if `rounds` is wide; the shuffle helps if its `across` is narrower than without.

Run on an H100 (nineteenth session, docs/benchmarks.md): the shuffle did not narrow `across` (each
process keeps a level of its own), the checks cost nothing, the churn up to 15%. The next suspect is
the host: each strict call's issue time is inside its time. A fifth setting, `pinned`, times eager
with the timing thread on the first core of the GPU's NUMA node (tools.worker.cpu_pinning, `gpu1`;
unpinned when sysfs does not say; `$PLACEMENT_PIN` names others, e.g. `3`), before the churn;
`pinned across %` beside `off across %` says
whether pinning narrows the spread between processes, and `off issue us` / `off issue across us`
(the mean host time from the start event to the call's return, and its spread between processes)
whether the processes' levels follow their issue times.

    python3 -m evals.device.placement_probe [--processes 3] [--repeats 2] [PROBLEM.py ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SUITE = Path(__file__).resolve().parents[1] / "suite"
# among the worst agreements of eval ha: five memory-bound forwards and a compute-bound convolution
DEFAULT_PROBLEMS = (
    "level1/29_AdaptiveAvgPool2d.py",
    "level1/7_MaxReduction.py",
    "level1/30_GroupNorm.py",
    "level1/1_ReLU.py",
    "level1/25_MaxPool1d_Dilated.py",
    "level1/12_Conv1d_Dilated_Strided.py",
)


# The start of a neighbour process: a CUDA context of its own through the driver API (ctypes; it starts
# in a fraction of a second, without torch), `cuda` and a device pointer `ptr` for what follows.
DRIVER_NEIGHBOUR = """
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cuda.cuCtxSetCurrent(ctx) == 0
"""
# A neighbour that maps and unmaps device memory and runs no kernel.
CHURN = (
    DRIVER_NEIGHBOUR
    + """
print("ready", flush=True)
while True:
    if cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(int(sys.argv[1]))) == 0:
        cuda.cuMemFree_v2(ptr)
"""
)
CHURN_BYTES = 2 << 30


@contextlib.contextmanager
def churning(on: bool) -> Iterator[None]:
    """While inside: a neighbour process allocating and freeing CHURN_BYTES in a loop (when `on`)."""
    if not on:
        yield
        return
    neighbour = subprocess.Popen(
        [sys.executable, "-c", CHURN, str(CHURN_BYTES)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert neighbour.stdout is not None
        if neighbour.stdout.readline().strip() != "ready":  # printed once its context exists
            raise RuntimeError("the memory-churn neighbour did not start (no CUDA driver?)")
        time.sleep(0.2)
        yield
    finally:
        neighbour.kill()
        neighbour.wait()


def eager_setup(path: Path) -> tuple[Any, list[Any], Any]:
    """(model, inputs, device) of a problem file as the baseline step prepares them: fp32, precision
    pinned, seed 42, inputs drawn on the device (a GPU when there is one)."""
    import torch

    from tools.baselines import construct_model, draw_problem_inputs
    from tools.worker.guards import pin_precision
    from tools.worker.loading import exec_problem_source

    problem = exec_problem_source(path.read_text(), path.stem, "problem.py")
    pin_precision()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = construct_model(problem, device, torch.float32, 42)
    request = {"mode": "strict", "seed": 42, "inputs_on_device": True}
    return model, draw_problem_inputs(problem, device, torch.float32, request), device


def measure(path: Path, repeats: int, churn: bool = False) -> dict[str, Any]:
    """In this process: the eager forward's strict times without ("off") and with ("on") the shuffle,
    with the verifier's between-call work on the candidate's side ("checked"), and beside a
    neighbour's memory churn ("churn", when asked and on a GPU)."""
    import torch

    from tools.worker.compare import BufferedMatch
    from tools.worker.inputs import clone_inputs
    from tools.worker.rounds import Contestant, time_in_rounds

    model, inputs, device = eager_setup(path)
    with torch.no_grad():
        matcher = BufferedMatch([model(*clone_inputs(inputs))], 1e-4, 1e-4)
    # what the verifier does after each of the candidate's timed calls (eager's have none): the output
    # check against preallocated buffers, then a look at the OS threads

    def check(index: int, out: Any) -> None:
        matcher.matches(index, out)

    def after_call() -> None:
        os.listdir("/proc/self/task")

    checked = Contestant("eager", model, check, after_call)
    found: dict[str, Any] = {"device": str(device), "on_rounds": []}
    settings = [("off", False), ("on", False), ("checked", False), ("pinned", False)]
    settings += [("churn", True)] if churn and device.type == "cuda" else []
    with torch.no_grad():
        for _ in range(repeats):
            for name, neighbour in settings:
                contestant = checked if name == "checked" else Contestant("eager", model)
                with churning(neighbour):
                    info = time_in_rounds(
                        [contestant],
                        [inputs],
                        device,
                        shuffle=name == "on",
                        pin=os.environ.get("PLACEMENT_PIN", "gpu1") if name == "pinned" else "",
                    )
                found.setdefault(name, []).append(float(info["eager"]["mean_ms"]))
                found.setdefault(f"{name}_issue_ms", []).append(
                    float(info["eager"].get("issue_mean_ms", 0.0))
                )
                if name == "pinned":
                    found["pinned_cpus"] = info.get("cpus")
                if name == "on":
                    found["on_rounds"].extend(info["eager"]["round_means_ms"])
    return found


def spread(values: list[float]) -> float:
    """max/min - 1 (0 for fewer than two values)."""
    return max(values) / min(values) - 1.0 if len(values) > 1 and min(values) > 0 else 0.0


def summarise(problem: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One table row from the processes' measurements of one problem."""
    row: dict[str, Any] = {"problem": problem, "processes": len(runs)}
    for key in ("off", "on"):
        means = [statistics.fmean(run[key]) for run in runs]
        row[f"{key} ms"] = statistics.fmean(means)
        row[f"{key} across %"] = 100 * spread(means)
        row[f"{key} within %"] = 100 * statistics.fmean(spread(run[key]) for run in runs)
    row["on rounds %"] = 100 * statistics.fmean(spread(run["on_rounds"]) for run in runs)
    pinned = [statistics.fmean(run["pinned"]) for run in runs if run.get("pinned")]
    row["pinned across %"] = 100 * spread(pinned) if pinned else float("nan")
    issues = [statistics.fmean(run["off_issue_ms"]) for run in runs if run.get("off_issue_ms")]
    row["off issue us"] = 1000 * statistics.fmean(issues) if issues else float("nan")
    row["off issue across us"] = 1000 * (max(issues) - min(issues)) if issues else float("nan")
    for setting in ("checked", "pinned", "churn"):
        ratios = [
            statistics.fmean(run[setting]) / statistics.fmean(run["off"]) for run in runs if run.get(setting)
        ]
        row[f"{setting} / off"] = statistics.fmean(ratios) if ratios else float("nan")
    return row


def child(path: Path, repeats: int, churn: bool) -> dict[str, Any]:
    """measure() in a fresh process (its own CUDA context and allocator)."""
    command = [
        sys.executable,
        "-m",
        "evals.device.placement_probe",
        "--child",
        str(path),
        "--repeats",
        str(repeats),
    ]
    done = subprocess.run(
        command + (["--churn"] if churn else []),
        capture_output=True,
        text=True,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{path.name}: exit {done.returncode}: {done.stderr.strip()[-600:]}")
    return dict(json.loads(lines[-1]))


def problem_paths(
    parser: argparse.ArgumentParser, given: list[Path], defaults: tuple[str, ...]
) -> list[Path]:
    """The problem files to probe: those given, else the suite's `defaults`; a missing one is a usage
    error."""
    paths = given or [SUITE / name for name in defaults]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        parser.error(f"no such problem file: {', '.join(missing)}")
    return paths


def table(rows: list[dict[str, Any]]) -> str:
    columns = [k for k in rows[0] if k not in ("problem", "processes")]
    lines = ["| problem | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for row in rows:
        lines.append(f"| {row['problem']} | " + " | ".join(f"{row[c]:.3f}" for c in columns) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m evals.device.placement_probe", description=__doc__.split("\n")[0]
    )
    parser.add_argument("problems", nargs="*", type=Path, help="problem files (default: six of the suite)")
    parser.add_argument("--processes", type=int, default=3, help="fresh processes per problem")
    parser.add_argument("--repeats", type=int, default=2, help="timings per setting in each process")
    parser.add_argument("--no-churn", action="store_true", help="leave out the memory-churn setting")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--churn", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.processes < 1 or args.repeats < 1:
        parser.error("--processes and --repeats must be at least 1")
    if args.child is not None:
        print(json.dumps(measure(args.child, args.repeats, args.churn)), flush=True)
        return 0
    paths = problem_paths(parser, args.problems, DEFAULT_PROBLEMS)
    rows = []
    for path in paths:
        runs = [child(path, args.repeats, not args.no_churn) for _ in range(args.processes)]
        rows.append(summarise(path.stem, runs))
        print(json.dumps({**rows[-1], "runs": runs}), flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
