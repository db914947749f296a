"""What the sandbox costs one worker run: wall time and the timed forward, sandboxed and not.

    python -m tools.sandbox.overhead [--device cpu|cuda] [--rounds 5] [--cache DIR]

Runs the repository's small affine program (C++, CPU) or the ReLU example (CUDA) through the
real worker, first once to fill the build cache, then ROUNDS times with `--sandbox auto` and
ROUNDS times with `off`, alternating, and prints a Markdown table of medians. The GPU test
(tests/gpu/test_sandbox_gpu.py) holds the cost on the timed forward to under 1%; this prints the
start-up cost as well, for the record.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from tools.evaluate import evaluate
from tools.protocol import EvalRequest
from tools.sandbox import layers_line

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = {
    "cpu": ("tests/candidates/worker/affine_problem.py", "tests/candidates/worker/affine_ok.py"),
    "cuda": ("tests/candidates/worker/relu_problem.py", "docs/examples/relu_solution.py"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.sandbox.overhead", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--device", choices=sorted(PROGRAMS), default="cpu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cache", help="build cache (default: a fresh temporary folder)")
    args = parser.parse_args(argv)
    problem, program = (REPO / p for p in PROGRAMS[args.device])
    cache = Path(args.cache) if args.cache else Path(tempfile.mkdtemp(prefix="stitch-sandbox-bench-"))
    request = EvalRequest(
        action="verify",
        problem_name=problem.stem,
        problem_source=problem.read_text(),
        candidate_source=program.read_text(),
        device=args.device,  # type: ignore[typeddict-item]
        perf_trials=100,
        cache_dir=str(cache),
    )
    first = evaluate(request, timeout_s=600, sandbox="auto")
    print(f"build: {first['status']}; sandbox {layers_line(first.get('sandbox'))}")  # type: ignore[arg-type]
    walls: dict[str, list[float]] = {"off": [], "auto": []}
    forwards: dict[str, list[float]] = {"off": [], "auto": []}
    for _ in range(args.rounds):
        for mode in ("off", "auto"):
            started = time.monotonic()
            response = evaluate(request, timeout_s=600, sandbox=mode)
            walls[mode].append(time.monotonic() - started)
            if response["status"] != "passed":
                print(f"{mode}: {response['status']}: {response.get('message', '')}")
                return 1
            forwards[mode].append(response["timing"]["candidate_ms"])
    print(f"\n{args.device}, {args.rounds} rounds each, medians\n")
    print("| mode | worker run s | timed forward ms |\n|---|---|---|")
    for mode in ("off", "auto"):
        print(f"| {mode} | {statistics.median(walls[mode]):.2f} | {statistics.median(forwards[mode]):.5f} |")
    wall_cost = statistics.median(walls["auto"]) - statistics.median(walls["off"])
    forward_cost = statistics.median(forwards["auto"]) / statistics.median(forwards["off"]) - 1
    print(f"\nsandbox cost: {wall_cost:+.2f} s per worker run, {forward_cost:+.2%} on the timed forward")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
