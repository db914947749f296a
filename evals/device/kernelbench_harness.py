"""Run programs through KernelBench's own `eval_kernel_against_ref`, as its scripts call it.

Why: our `kernelbench` mode reproduces KernelBench's loader and process state, but the claim
"KernelBench's harness accepts what we verify" is only proved by its own code. This script takes
a checkout of the public KernelBench repository (never copied into ours), loads its evaluator,
and judges each program with a build directory, five correctness trials and timing, one fresh
process per problem (KernelBench's scripts use one process per sample too). It prints one JSON
line per problem and a table last.

    python3 evals/device/kernelbench_harness.py KERNELBENCH_CHECKOUT PROGRAMS_DIR [--out FILE]

PROGRAMS_DIR holds `levelN__NAME.py` files as `tests/gpu/test_kernelbench_gpu.py --write` writes
them; each reference is read from `evals/suite/`. KernelBench's `utils` imports LLM clients
(openai, litellm, dotenv) that evaluation never calls; where they are not installed, empty
modules stand in so that the evaluator imports on a GPU machine that has only torch.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "evals" / "suite"
UNUSED_CLIENTS = ("openai", "litellm", "dotenv", "tqdm")


def _stand_in_for_unused_clients() -> None:
    for name in UNUSED_CLIENTS:
        try:
            __import__(name)
        except ImportError:
            module = types.ModuleType(name)
            module.__dict__.update(
                OpenAI=object, completion=None, load_dotenv=lambda *a, **k: None, tqdm=lambda x, **k: x
            )
            sys.modules[name] = module


def judge_one(checkout: Path, reference: Path, program: Path, build_dir: Path) -> dict[str, Any]:
    """In this process: KernelBench's verdict and mean times (its `runtime` fields hold the milliseconds
    CUDA events give, whatever their comment says)."""
    _stand_in_for_unused_clients()
    sys.path.insert(0, str(checkout / "src"))
    import torch
    from kernelbench.eval import eval_kernel_against_ref

    result = eval_kernel_against_ref(
        reference.read_text(),
        program.read_text(),
        num_correct_trials=5,
        num_perf_trials=100,
        measure_performance=True,
        build_dir=str(build_dir),
        device=torch.device("cuda:0"),
    )
    data = result.model_dump() if hasattr(result, "model_dump") else dict(result)
    metadata = {k: str(v)[:300] for k, v in (data.get("metadata") or {}).items()}
    return {
        "compiled": data.get("compiled"),
        "correctness": data.get("correctness"),
        "ms": data.get("runtime"),
        "reference_ms": data.get("ref_runtime"),
        "metadata": metadata,
    }


def reference_for(program: Path) -> Path:
    level, name = program.stem.split("__", 1)
    return SUITE / level / f"{name}.py"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("checkout", type=Path, help="a checkout of the public KernelBench repository")
    parser.add_argument("programs", type=Path, help="folder of levelN__NAME.py programs")
    parser.add_argument("--out", type=Path, help="also write the JSON lines here")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # internal: judge one program here
    parser.add_argument("--build-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        verdict = judge_one(args.checkout, reference_for(args.one), args.one, args.build_dir)
        print("VERDICT " + json.dumps(verdict))
        return 0
    if not (args.checkout / "src" / "kernelbench" / "eval.py").exists():
        parser.error(f"{args.checkout} is not a KernelBench checkout (no src/kernelbench/eval.py)")
    programs = sorted(args.programs.glob("level*__*.py"))
    if not programs:
        parser.error(f"no levelN__NAME.py programs in {args.programs}")
    rows = []
    for program in programs:
        with tempfile.TemporaryDirectory() as build:
            command = [
                sys.executable,
                __file__,
                str(args.checkout),
                str(args.programs),
                "--one",
                str(program),
            ]
            done = subprocess.run(
                [*command, "--build-dir", build], capture_output=True, text=True, timeout=900, check=False
            )
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("VERDICT ")), None)
        record: dict[str, Any] = {"problem": program.stem.replace("__", "/")}
        if line is None:
            record |= {"compiled": False, "correctness": False, "error": (done.stderr or done.stdout)[-600:]}
        else:
            record |= json.loads(line[len("VERDICT ") :])
        print(json.dumps(record), flush=True)
        if args.out:
            with args.out.open("a") as handle:
                handle.write(json.dumps(record) + "\n")
        rows.append(record)
    print("| problem | compiled | correct | KernelBench ms | reference ms |")
    print("|---|---|---|---|---|")
    for r in rows:
        ms = "-" if (r.get("ms") or -1) < 0 else f"{r['ms']:.3f}"
        ref = "-" if (r.get("reference_ms") or -1) < 0 else f"{r['reference_ms']:.3f}"
        print(f"| {r['problem']} | {r.get('compiled')} | {r.get('correctness')} | {ms} | {ref} |")
    return 0 if all(r.get("correctness") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
