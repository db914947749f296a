"""Run a problem's reference and a solution once each inside an NVTX range, for `ncu --nvtx`.

    ncu --nvtx --nvtx-include "measure/" --clock-control none --section SpeedOfLight ... \
        python3 evals/device/ncu_compare.py PROBLEM.py SOLUTION.py

Only torch and the standard library: it runs on the GPU machine. Warm-ups (builds, cuBLAS plans)
happen outside the range, so ncu sees one reference forward and one candidate forward.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from tools.problem import exec_problem_source


def main(problem_path: str, solution_path: str) -> None:
    problem = exec_problem_source(Path(problem_path).read_text(), "problem", problem_path)
    solution: dict = {}
    exec(compile(Path(solution_path).read_text(), solution_path, "exec"), solution)
    torch.manual_seed(42)
    init = problem.get_init_inputs()
    torch.manual_seed(42)
    ref = problem.Model(*init).cuda()
    torch.manual_seed(42)
    new = solution["ModelNew"](*init).cuda()
    with torch.device("cuda"):
        inputs = problem.get_inputs()
    with torch.no_grad():
        for model in (ref, new):
            model(*inputs)
        torch.cuda.synchronize()
        for name, model in (("reference", ref), ("candidate", new)):
            torch.cuda.nvtx.range_push("measure")
            torch.cuda.nvtx.range_push(name)
            model(*inputs)
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            torch.cuda.nvtx.range_pop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
