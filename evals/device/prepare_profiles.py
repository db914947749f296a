"""CPU side, before the GPU run: write each problem's offline candidate and plan into one folder to carry.

    python -m evals.device.prepare_profiles [--out out/profile-inputs] [--problems level1/1_ReLU ...]

Why here: the offline policy needs pydantic and the fx analysis, which the GPU machine does not
have; the capture there (capture_profiles.py) needs only torch. The folder holds, per problem,
problem.py, candidate.py and plan.json (FLOPs and minimum bytes for the speed of light), plus
manifest.json; the two synthetic programs with planted bottlenecks (evals/device/synthetic) are
added so every diagnosis rule meets real evidence. `out/` is git-ignored: carry the folder.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from evals import suite_path
from graph.artifacts import Plan, Task
from graph.context import Context

REPO = Path(__file__).resolve().parents[2]
SYNTHETIC = Path(__file__).resolve().parent / "synthetic"
DEFAULT_OUT = REPO / "out" / "profile-inputs"
PROBLEMS = (
    "level1/1_ReLU",
    "level1/4_Softmax",
    "level1/8_Matmul",
    "level2/4_Conv2d_BatchNorm_ReLU",
    "level2/6_Scale_Bias_Tanh_Clamp",
    "level3/5_RecurrentLoop",
)
SYNTHETICS = ("bad_kernels", "host_sync")


def key_of(problem: str) -> str:
    """'level1/1_ReLU' -> 'level1_1_ReLU' (one folder level, safe file names)."""
    return problem.replace("/", "_")


def load_task(path: Path) -> Task:
    from nodes.planner import load_task as load

    return load({"problem_path": str(path)})


def offline_program(task: Task, arch: str) -> tuple[Plan, str, str]:
    """(plan, candidate source, which code wrote it): the offline policy's first candidate."""
    from codegen.policy import OfflinePolicy

    policy = OfflinePolicy(Context(policy="offline", gpu_arch=arch))
    plan = policy.plan(task, None)
    return plan, policy.write(task, plan, 1).source, "codegen.policy.OfflinePolicy"


def _git_head() -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
        )
        return done.stdout.strip()
    except OSError:
        return ""


def prepare(
    out: Path, problems: tuple[str, ...], arch: str = "sm_90", synthetics: bool = True
) -> dict[str, Any]:
    """Write every input of the capture into `out` and return the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    entries = []
    for problem in problems:
        source = suite_path() / f"{problem}.py"
        task = load_task(source)
        plan, candidate, writer = offline_program(task, arch)
        key = key_of(problem)
        folder = out / key
        folder.mkdir(exist_ok=True)
        shutil.copyfile(source, folder / "problem.py")
        (folder / "candidate.py").write_text(candidate)
        (folder / "plan.json").write_text(json.dumps(plan.dump(), indent=1))
        entries.append(
            {
                "key": key,
                "problem": problem,
                "targets": ["reference", "candidate"],
                "candidate_by": writer,
                "total_flops": plan.total_flops,
                "total_bytes": plan.total_bytes,
                "synthetic": False,
            }
        )
    if synthetics:
        for name in SYNTHETICS:
            problem_file = SYNTHETIC / f"{name}_problem.py"
            task = load_task(problem_file)
            from codegen.schedule.plan import analyse, build_plan

            plan = build_plan(task, analyse(task))
            key = f"synthetic_{name}"
            folder = out / key
            folder.mkdir(exist_ok=True)
            shutil.copyfile(problem_file, folder / "problem.py")
            shutil.copyfile(SYNTHETIC / f"{name}_candidate.py", folder / "candidate.py")
            (folder / "plan.json").write_text(json.dumps(plan.dump(), indent=1))
            entries.append(
                {
                    "key": key,
                    "problem": f"synthetic/{name}",
                    "targets": ["candidate"],
                    "candidate_by": f"evals/device/synthetic/{name}_candidate.py",
                    "total_flops": plan.total_flops,
                    "total_bytes": plan.total_bytes,
                    "synthetic": True,
                }
            )
    manifest = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "git_head": _git_head(),
        "arch": arch,
        "entries": entries,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evals.device.prepare_profiles", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="folder to write (carry it to the GPU run)")
    parser.add_argument(
        "--problems", nargs="*", default=list(PROBLEMS), help="suite problems, e.g. level1/1_ReLU"
    )
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument(
        "--no-synthetic", action="store_true", help="leave out the planted-bottleneck programs"
    )
    args = parser.parse_args(argv)
    manifest = prepare(Path(args.out), tuple(args.problems), args.arch, not args.no_synthetic)
    for entry in manifest["entries"]:
        print(
            f"{entry['key']:36s} {entry['total_flops'] / 1e9:9.3g} GFLOP {entry['total_bytes'] / 1e6:9.4g} MB  {entry['candidate_by']}"
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
