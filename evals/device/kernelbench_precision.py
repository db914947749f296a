"""Why does a program pass our strict harness but fail KernelBench's? Precision evidence on the GPU.

    python -m evals.device.kernelbench_precision --problem P.py --program S.py [--out R.json]

KernelBench leaves cuDNN's TF32 on (docs/kernelbench.md §2); our strict harness pins it off. For
one problem and one program this measures, on KernelBench's first correctness trial:
- the reference against itself with TF32 on and off, and against a float64 twin;
- the first layer (forward hooks, in execution order) where TF32 on and off disagree beyond
  KernelBench's tolerance, and the largest per-layer disagreement;
- how far a perturbation of one float32 ulp in the input moves the TF32 reference: the floor any
  program that is not bit-identical to eager has to live with;
- the program, loaded as KernelBench loads it, under both settings, against every reference;
- the convolution kernels (cuDNN's algorithm choice shows in their names) of each run.
Torch and the standard library only: it runs on the GPU machine as it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

TOLERANCE = 1e-4  # KernelBench fp32 (docs/kernelbench.md §2)
PREFIX = "import os\nos.environ['TORCH_EXTENSIONS_DIR'] = {build!r}\n"
CONV_WORDS = ("conv", "fprop", "dgrad", "implicit", "winograd", "fft", "xmma", "sm90_", "cudnn")


def set_seed(seed: int) -> None:
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)


def first_trial_seed() -> int:
    torch.manual_seed(42)
    return int(torch.randint(0, 2**32 - 1, (1,)).item())


@contextmanager
def tf32(cudnn_on: bool) -> Iterator[None]:
    """KernelBench's process state: matmul TF32 off (PyTorch's default), cuDNN TF32 as asked."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = cudnn_on
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max().item())


def passes(ref: torch.Tensor, new: torch.Tensor) -> bool:
    return bool(torch.allclose(ref.float(), new.float(), atol=TOLERANCE, rtol=TOLERANCE))


def load_problem(problem: Path) -> dict[str, Any]:
    """Exec the problem into a fresh dict (KernelBench's context)."""
    context: dict[str, Any] = {}
    exec(compile(problem.read_text(), "<string>", "exec"), context)
    return context


def load_program(context: dict[str, Any], program: Path, build: str) -> None:
    """Exec the program after KernelBench's two lines into the problem's dict. As in KernelBench, the
    reference models are built before: a program's copies of the reference's helper classes (kept for
    ModelNew's parameters, without their forward) replace those names in the shared dict."""
    exec(compile(PREFIX.format(build=build) + program.read_text(), "<string>", "exec"), context)


def make(cls: Callable[..., torch.nn.Module], init: list[Any], device: torch.device) -> torch.nn.Module:
    set_seed(42)
    return cls(*init).to(device)


def layer_outputs(model: torch.nn.Module, inputs: list[Any]) -> list[tuple[str, torch.Tensor]]:
    """Every leaf module's tensor output, in execution order."""
    seen: list[tuple[str, torch.Tensor]] = []
    hooks = []
    for name, module in model.named_modules():
        if next(module.children(), None) is None:

            def hook(_m: Any, _i: Any, out: Any, name: str = name) -> None:
                if isinstance(out, torch.Tensor):
                    seen.append((name, out.detach().clone()))

            hooks.append(module.register_forward_hook(hook))
    try:
        model(*inputs)
    finally:
        for h in hooks:
            h.remove()
    return seen


def conv_kernels(fn: Callable[[], Any]) -> Counter[str]:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names: Counter[str] = Counter()
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            low = event.name.lower()
            if any(w in low for w in CONV_WORDS):
                names[event.name[:90]] += 1
    return names


def investigate(problem: Path, program: Path | None, build: str) -> dict[str, Any]:
    device = torch.device("cuda")
    context = load_problem(problem)
    set_seed(42)
    init = context["get_init_inputs"]()
    set_seed(first_trial_seed())
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in context["get_inputs"]()]
    result: dict[str, Any] = {"problem": problem.name, "gpu": torch.cuda.get_device_name()}
    with torch.no_grad():
        reference = make(context["Model"], init, device)
        outs: dict[str, torch.Tensor] = {}
        for on in (True, False):
            with tf32(on):
                outs[f"ref_tf32_{'on' if on else 'off'}"] = reference(*inputs).clone()
        ref64 = make(context["Model"], init, device).double()
        if program is not None:
            load_program(context, program, build)
        outs["ref_fp64"] = ref64(*[x.double() if isinstance(x, torch.Tensor) else x for x in inputs])
        # One-ulp perturbation of the input: the noise floor of TF32 through this model.
        bumped = [
            x * (1 + 2**-23) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs
        ]
        with tf32(True):
            outs["ref_tf32_on_ulp"] = reference(*bumped).clone()
        with tf32(False):
            outs["ref_tf32_off_ulp"] = reference(*bumped).clone()
        # Layer by layer: where do TF32 on and off part?
        with tf32(True):
            on_layers = layer_outputs(reference, inputs)
        with tf32(False):
            off_layers = layer_outputs(reference, inputs)
        per_layer: list[dict[str, Any]] = [
            {"layer": name, "max_diff": max_diff(a, b), "allclose": passes(b, a)}
            for (name, a), (_, b) in zip(on_layers, off_layers, strict=False)
        ]
        first_bad = next((row for row in per_layer if not row["allclose"]), None)
        result["layers"] = len(per_layer)
        result["first_layer_beyond_tolerance"] = first_bad
        result["worst_layers"] = sorted(per_layer, key=lambda r: -r["max_diff"])[:5]
        kernels = {}
        with tf32(True):
            kernels["reference_tf32_on"] = conv_kernels(lambda: reference(*inputs))
        with tf32(False):
            kernels["reference_tf32_off"] = conv_kernels(lambda: reference(*inputs))
        if program is not None:
            candidate = make(context["ModelNew"], init, device)
            for on in (True, False):
                with tf32(on):
                    outs[f"new_tf32_{'on' if on else 'off'}"] = candidate(*inputs).clone()
                    kernels[f"program_tf32_{'on' if on else 'off'}"] = conv_kernels(
                        lambda: candidate(*inputs)
                    )
    names = list(outs)
    result["pairs"] = [
        {"a": a, "b": b, "max_diff": max_diff(outs[a], outs[b]), "allclose": passes(outs[b], outs[a])}
        for i, a in enumerate(names)
        for b in names[i + 1 :]
    ]
    result["conv_kernels"] = {k: dict(v.most_common(8)) for k, v in kernels.items()}
    return result


def print_table(result: dict[str, Any]) -> None:
    print(f"# {result['problem']} on {result['gpu']}")
    print("| a | b | max diff | allclose 1e-4 |")
    print("|---|---|---|---|")
    for row in result["pairs"]:
        print(f"| {row['a']} | {row['b']} | {row['max_diff']:.3g} | {row['allclose']} |")
    first = result["first_layer_beyond_tolerance"]
    print(f"layers: {result['layers']}; first beyond tolerance (TF32 on vs off): {first}")
    for kind, counts in result["conv_kernels"].items():
        print(f"{kind}: {counts}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problem", type=Path, required=True)
    parser.add_argument("--program", type=Path, help="a solution (ModelNew); omitted: reference only")
    parser.add_argument("--build-dir", default="/tmp/kb-precision-build")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    result = investigate(args.problem, args.program, args.build_dir)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
