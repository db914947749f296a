"""Run a problem's reference and a solution once each inside an NVTX range, for `ncu --nvtx`.

    ncu --nvtx --nvtx-include "measure/" --clock-control none --section SpeedOfLight ... \
        python3 evals/device/ncu_compare.py PROBLEM.py SOLUTION.py [COMPILE_MODE]

Only torch and the standard library: it runs on the GPU machine. Warm-ups (builds, cuBLAS plans,
torch.compile's compilation) happen outside the range, so ncu sees one reference forward and one
candidate forward, and with COMPILE_MODE (e.g. `default`) one forward of the reference compiled in
that mode: the kernels torch.compile writes for the same problem, measured by the same counters.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from tools.problem import exec_problem_source
from tools.worker.guards import pin_precision


def main(problem_path: str, solution_path: str, compile_mode: str | None = None) -> None:
    pin_precision()  # the strict harness's fp32: no TF32 (a program may take another path under TF32)
    problem = exec_problem_source(Path(problem_path).read_text(), "problem", problem_path)
    solution: dict = {}
    exec(compile(Path(solution_path).read_text(), solution_path, "exec"), solution)
    torch.manual_seed(42)
    init = problem.get_init_inputs()
    torch.manual_seed(42)
    ref = problem.Model(*init).cuda()
    torch.manual_seed(42)
    new = solution["ModelNew"](*init).cuda()
    models = [("reference", ref), ("candidate", new)]
    if compile_mode:
        models.append(("compiled", torch.compile(ref, mode=compile_mode)))
    with torch.device("cuda"):
        inputs = problem.get_inputs()
    with torch.no_grad():
        for _, model in models:
            model(*inputs)
        torch.cuda.synchronize()
        for name, model in models:
            torch.cuda.nvtx.range_push("measure")
            torch.cuda.nvtx.range_push(name)
            model(*inputs)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
