"""On a GPU: the offline policy's pooling programs against a float64 PyTorch reference.

Cases: the pool fixture (max 3-D ceil mode + epilogue, avg 2-D without pad counting, dilated max
1-D after BatchNorm1d, adaptive max 2-D, global adaptive avg as a reduction) and the suite's pool
problems. Each output must be allclose(atol=rtol=1e-4) to the fp32 reference and its error against
float64 within max(1e-5, 16 x the fp32 reference's own).

The GPU machine lacks pydantic (codegen needs it): write the programs on the CPU with
  python tests/gpu/test_pool_gpu.py --write out/pool-gpu
then on the GPU (out/pool-gpu carried):
  STITCH_POOL_PROGRAMS=out/pool-gpu python -m pytest -q -s tests/gpu/test_pool_gpu.py
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
CASES = {
    "pool families": REPO / "tests" / "fixtures" / "problems" / "level2" / "11_Pool_Families.py",
}
CASES |= {
    f"suite {path.stem}": path
    for pattern in ("level1/10_*.py", "level1/2[5-9]_*.py", "level1/3[01]_*.py", "level2/2[1-3]_*.py")
    for path in sorted((REPO / "evals" / "suite").glob(pattern))
}
PROGRAMS = Path(os.environ.get("STITCH_POOL_PROGRAMS", "out/pool-gpu"))

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def write_programs(out: Path) -> None:
    """CPU side: one program per case plus a manifest."""
    sys.path.insert(0, str(REPO))
    from codegen.policy import Context, OfflinePolicy
    from graph.artifacts import Task

    out.mkdir(parents=True, exist_ok=True)
    policy = OfflinePolicy(Context(gpu_arch="sm_90"))
    manifest = {}
    for label, path in CASES.items():
        task = Task(name=path.stem, path=str(path), source=path.read_text())
        program = out / f"{path.stem}_solution.py"
        program.write_text(policy.write(task, policy.plan(task, None), 1).source)
        (out / path.name).write_text(path.read_text())
        manifest[label] = {"reference": path.name, "program": program.name}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))


def _load(reference: Path, program: Path) -> dict[str, Any]:
    context: dict[str, Any] = {}
    exec(compile(reference.read_text(), str(reference), "exec"), context)
    exec(compile(program.read_text(), str(program), "exec"), context)
    return context


def _as_list(value: Any) -> list[torch.Tensor]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _manifest() -> dict[str, Any]:
    path = PROGRAMS / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else {}


@pytest.mark.parametrize("label", sorted(CASES))
def test_pool_program_matches_float64(label: str) -> None:
    manifest = _manifest()
    if label not in manifest:
        pytest.skip(f"no program for {label}: run 'python {__file__} --write {PROGRAMS}' on the CPU")
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    entry = manifest[label]
    context = _load(PROGRAMS / entry["reference"], PROGRAMS / entry["program"])
    torch.manual_seed(0)
    init = context["get_init_inputs"]()
    reference = context["Model"](*init).cuda()
    ours = context["ModelNew"](*init).cuda()
    ours.load_state_dict(reference.state_dict())
    exact = context["Model"](*init).cuda().double()
    exact.load_state_dict(reference.state_dict())
    inputs = [x.cuda() - 0.5 if isinstance(x, torch.Tensor) else x for x in context["get_inputs"]()]
    with torch.no_grad():
        want = _as_list(reference(*inputs))
        got = _as_list(ours(*inputs))
        best = _as_list(exact(*[x.double() if isinstance(x, torch.Tensor) else x for x in inputs]))
    torch.cuda.synchronize()
    for w, g, b in zip(want, got, best, strict=True):
        assert g.shape == w.shape
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
        ours_err = (g.double() - b).abs().max().item()
        ref_err = (w.double() - b).abs().max().item()
        print(f"{label}: shape {tuple(g.shape)} max|ours-f64| {ours_err:.3e} max|eager-f64| {ref_err:.3e}")
        assert ours_err <= max(1e-5, 16 * ref_err)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write":
        write_programs(Path(sys.argv[2]))
    else:
        print(__doc__)
