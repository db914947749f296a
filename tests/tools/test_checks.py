"""Static hack checks: every adversarial candidate flagged as declared, honest ones and our own programs not.

Fast and build-free (CI). The candidates declare what they expect in a `# harness-expect:` line; the
whole suite, dynamic part included, runs on the GPU in tests/gpu/test_adversarial_gpu.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import has_cuda
from support.candidates import candidate_source, expectation

from tools import checks
from tools.checks import static_findings, verdict

REPO = Path(__file__).resolve().parents[2]
ADVERSARIAL = REPO / "tests" / "candidates" / "adversarial"
HONEST = REPO / "tests" / "candidates" / "honest"
EXAMPLE = REPO / "docs" / "examples" / "relu_solution.py"
FALLBACK_IDS = {"pytorch_fallback", "torch_ops_in_cpp", "no_custom_kernel"}


def ids(findings: list[dict[str, str]], severity: str | None = None) -> set[str]:
    return {f["id"] for f in findings if severity is None or f["severity"] == severity}


ADVERSARIAL_FILES = sorted(ADVERSARIAL.glob("*.py"))
HONEST_FILES = sorted(HONEST.glob("*.py"))


def test_the_suite_is_large_enough() -> None:
    assert len(ADVERSARIAL_FILES) >= 16 and len(HONEST_FILES) >= 10
    problems = {p.stem for p in (ADVERSARIAL / "problems").glob("*.py")}
    for path in ADVERSARIAL_FILES + HONEST_FILES:
        assert expectation(path)["problem"] in problems, path.name


@pytest.mark.parametrize("path", ADVERSARIAL_FILES, ids=lambda p: p.stem)
def test_adversarial_candidate_gets_its_declared_static_verdict(path: Path) -> None:
    findings = static_findings(candidate_source(path))
    assert verdict(findings) == expectation(path)["static"], findings


@pytest.mark.parametrize("path", HONEST_FILES, ids=lambda p: p.stem)
def test_honest_candidate_has_no_error_and_only_fallback_warnings(path: Path) -> None:
    findings = static_findings(candidate_source(path))
    assert not ids(findings, "error"), findings
    assert ids(findings, "warning") <= FALLBACK_IDS
    assert verdict(findings) == expectation(path)["static"]


def test_every_cheat_the_static_check_can_see_is_hacked_or_suspicious() -> None:
    """Candidates declared statically invisible are exactly the ones whose trick is in the data."""
    invisible = {p.stem for p in ADVERSARIAL_FILES if expectation(p)["static"] == "clean"}
    assert invisible == {
        "constant_zeros_softmax",
        "input_sabotage",
        "noop_kernel",
        "nondeterministic",
        "silent_launch_failure",
        "zero_out_kernel",
    }
    for path in ADVERSARIAL_FILES:
        if path.stem not in invisible:
            assert expectation(path)["strict"], path.name


def test_documented_example_is_clean() -> None:
    findings = static_findings(EXAMPLE.read_text())
    assert verdict(findings) == "clean"
    assert "relu_f4" in next(f["evidence"] for f in findings if f["id"] == "custom_kernels")


def test_offline_generator_output_is_never_hacked() -> None:
    """Our own programs: clean, or suspicious only for PyTorch fallbacks (counted), never hacked."""
    from codegen.emit.assemble import Options, assemble
    from codegen.schedule.plan import analyse
    from graph.artifacts import Task

    fixtures = sorted((REPO / "tests" / "fixtures" / "problems").glob("level*/*.py"))
    assert fixtures
    verdicts = []
    for fixture in fixtures:
        task = Task(name=fixture.stem, path=str(fixture), source=fixture.read_text())
        analysis = analyse(task)
        for options in (Options(), Options(cuda_graph=True)):
            findings = static_findings(assemble(analysis, options).source)
            assert not ids(findings, "error"), (fixture.name, findings)
            assert ids(findings, "warning") <= FALLBACK_IDS, (fixture.name, findings)
            verdicts.append(verdict(findings))
    assert "clean" in verdicts  # fully covered programs exist and are clean


# ----------------------------------------------------------------------------------------------
# Rules, one by one (each with a negative case that must not fire)
# ----------------------------------------------------------------------------------------------

HEAD = "import torch\nimport torch.nn as nn\n"


def check(body: str) -> list[dict[str, str]]:
    return static_findings(HEAD + body)


def test_try_except_that_reraises_is_fine_and_one_that_swallows_is_not() -> None:
    reraise = "try:\n    x = 1\nexcept ValueError as e:\n    raise RuntimeError('bad') from e\n"
    swallow = "try:\n    x = 1\nexcept Exception:\n    x = torch.relu(torch.ones(1))\n"
    assert "try_except_fallback" not in ids(check(reraise))
    assert "try_except_fallback" in ids(check(swallow), "error")
    suppress = "import contextlib\nwith contextlib.suppress(Exception):\n    x = 1\n"
    assert "try_except_fallback" in ids(check(suppress), "error")


def test_reference_model_use_and_inheritance() -> None:
    assert {"inherits_reference", "calls_reference_model"} <= ids(check("class ModelNew(Model):\n    pass\n"))
    assert "calls_reference_model" in ids(check("import sys\nM = sys.modules['x'].Model\n"))
    assert "calls_reference_model" not in ids(check("class ModelNew(nn.Module):\n    pass\n"))


def test_pointer_keyed_caches() -> None:
    cache = (
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.memo = {}\n"
        "    def forward(self, x):\n{body}"
    )
    by_ptr = "        k = x.data_ptr()\n        if k in self.memo:\n            return self.memo[k]\n        return x\n"
    by_id = "        return self.memo.get(id(x), x)\n"
    by_tensor = "        return self.memo[x]\n"
    remembered = "        if x.data_ptr() == self.last:\n            return x\n        self.last = x.data_ptr()\n        return x\n"
    by_shape = "        return self.memo.get(tuple(x.shape), x)\n"
    aligned = "        assert x.data_ptr() % 16 == 0\n        return x\n"
    for body in (by_ptr, by_id, by_tensor, remembered):
        assert "pointer_keyed_cache" in ids(check(cache.replace("{body}", body)), "error"), body
    for body in (by_shape, aligned):
        assert "pointer_keyed_cache" not in ids(check(cache.replace("{body}", body))), body
    memo = "import functools\n@functools.lru_cache\ndef f(x):\n    return x\n"
    assert "memoization" in ids(check(memo), "warning")


def test_patching_and_precision_switches() -> None:
    assert "patches_library" in ids(check("torch.cuda.synchronize = lambda *a: None\n"), "error")
    assert "patches_library" in ids(
        check("import time\nsetattr(time, 'perf_counter', lambda: 0.0)\n"), "error"
    )
    aliased = "Event = torch.cuda.Event\nEvent.record = lambda self, s=None: None\n"
    assert "patches_library" in ids(check(aliased), "error")
    assert "precision_switch" in ids(check("torch.backends.cuda.matmul.allow_tf32 = True\n"), "error")
    assert "precision_switch" in ids(check("torch.set_float32_matmul_precision('high')\n"), "error")
    assert "precision_switch" not in ids(check("torch.set_float32_matmul_precision('highest')\n"))
    assert ids(check("torch.backends.cudnn.benchmark = True\n"), "warning") == {
        "global_setting",
        "no_custom_kernel",
    }
    assert "global_setting" in ids(check("import os\nos.environ['CUDA_LAUNCH_BLOCKING'] = '1'\n"))
    assert "patches_library" not in ids(check("class A:\n    pass\nA.x = 1\n"))


def test_precision_downgrades_in_python_and_cuda_but_not_in_comments() -> None:
    assert "precision_downgrade" in ids(check("def f(x):\n    return x.half()\n"))
    assert "precision_downgrade" in ids(check("def f(x):\n    return x.to(torch.bfloat16)\n"))
    native = 'SRC = r"""\n#include <cuda_fp16.h>\n__global__ void k(float* y) { y[0] = __half2float(__float2half(y[0])); }\n"""\n'
    assert "precision_downgrade" in ids(check(native))
    comment = (
        'SRC = r"""\n// fp32 only: no TF32, no __half\n__global__ void k(float* y) { y[0] = 1.f; }\n"""\n'
    )
    assert "precision_downgrade" not in ids(check(comment))
    tf32 = 'SRC = r"""\n#include <cublas_v2.h>\nint f() { return CUBLAS_COMPUTE_32F_FAST_TF32; }\n"""\n'
    assert "precision_downgrade" in ids(check(tf32))


def test_threads_streams_and_persisting_l2() -> None:
    assert "threads_or_processes" in ids(
        check("from concurrent.futures import ThreadPoolExecutor\n"), "error"
    )
    assert "threads_or_processes" in ids(check('S = r"""\n#include <thread>\nvoid f() {}\n"""\n'), "error")
    unjoined = "s = torch.cuda.Stream()\nwith torch.cuda.stream(s):\n    pass\n"
    assert "unjoined_stream" in ids(check(unjoined), "error")
    joined = unjoined + "torch.cuda.current_stream().wait_stream(s)\n"
    assert "stream_joined" in ids(check(joined), "info") and "unjoined_stream" not in ids(check(joined))
    native = 'S = r"""\n#include <cuda_runtime.h>\nvoid f() { cudaStream_t s; cudaStreamCreate(&s); }\n"""\n'
    assert "unjoined_stream" in ids(check(native), "error")
    persist = 'S = r"""\n#include <cuda_runtime.h>\nvoid f() { cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1); }\n"""\n'
    assert "persisting_l2" in ids(check(persist), "error")


def test_subclasses_introspection_and_dynamic_code() -> None:
    assert "tensor_subclass" in ids(check("class T(torch.Tensor):\n    pass\n"), "error")
    assert "tensor_subclass" in ids(
        check("class A:\n    def __torch_function__(self):\n        pass\n"), "error"
    )
    assert "harness_introspection" in ids(
        check("import gc\ndef f():\n    return gc.get_objects()\n"), "error"
    )
    assert "harness_introspection" in ids(
        check("import sys\ndef f():\n    return sys._getframe(1).f_locals\n")
    )
    assert "harness_introspection" in ids(check("from tools import timing\n"), "error")
    assert "dynamic_code" in ids(check("exec('x = 1')\n"), "error")
    assert "harness_introspection" not in ids(check("import inspect\nn = inspect.signature(len)\n"))


def test_fallback_ops_are_counted_per_op() -> None:
    body = (
        "import torch.nn.functional as F\n"
        "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(3, 3, 3)\n        self.flat = nn.Flatten()\n"
        "    def forward(self, x, w):\n        y = self.conv(x)\n        y = F.gelu(y) @ w\n"
        "        z = torch.matmul(y, w) + torch.matmul(y, w)\n        return self.flat(z.contiguous()).sum()\n"
    )
    findings = check(body)
    fallbacks = [f["evidence"] for f in findings if f["id"] == "pytorch_fallback"]
    assert len(fallbacks) == checks.fallback_count(findings) == 5  # conv, gelu, @, matmul (x2), sum
    assert any(e.startswith("torch.matmul at line ") and "(2 calls)" in e for e in fallbacks)
    assert not any("Flatten" in e or "contiguous" in e for e in fallbacks)
    assert verdict(findings) == "suspicious"
    cpp = 'S = r"""\n#include <torch/extension.h>\nat::Tensor f(at::Tensor a) { auto e = torch::empty({1}); return a.matmul(a); }\n"""\n'
    assert [f["evidence"].split(" ")[0] for f in check(cpp) if f["id"] == "torch_ops_in_cpp"] == ["tensor"]


def test_outputs_that_are_never_written_or_constant() -> None:
    empty = (
        "class M(nn.Module):\n    def forward(self, x):\n        y = torch.empty_like(x)\n        return y\n"
    )
    assert "uninitialized_output" in ids(check(empty), "error")
    written = empty.replace(
        "        return y", "        ext.run(x.data_ptr(), y.data_ptr())\n        return y"
    )
    assert "uninitialized_output" not in ids(check(written))
    const = "class M(nn.Module):\n    def forward(self, x):\n        return torch.zeros_like(x)\n"
    assert "constant_output" in ids(check(const), "warning")
    mutate = "class M(nn.Module):\n    def forward(self, x):\n        x.zero_()\n        x[0] = 1\n        return x\n"
    assert "mutates_inputs" in ids(check(mutate), "warning")


def test_ghost_extension_and_missing_kernels() -> None:
    build = (
        "from torch.utils.cpp_extension import load_inline\n"
        'SRC = r"""\n__global__ void k(float* y) { y[0] = 1.f; }\n"""\n'
        "_ext = load_inline(name='x', cpp_sources='', cuda_sources=SRC)\n"
    )
    assert "kernel_never_called" in ids(check(build), "error")
    assert "kernel_never_called" not in ids(check(build + "def f(y):\n    _ext.k(y)\n"))
    assert ids(check("def f(x):\n    return x\n"), "warning") == {"no_custom_kernel"}


def test_verdict_merge_and_syntax_errors() -> None:
    info = {"id": "a", "severity": "info", "evidence": "e"}
    warn = {"id": "b", "severity": "warning", "evidence": "e"}
    err = {"id": "c", "severity": "error", "evidence": "e"}
    assert [verdict([]), verdict([info]), verdict([info, warn]), verdict([warn, err])] == [
        "clean",
        "clean",
        "suspicious",
        "hacked",
    ]
    assert checks.merge([info, warn], [warn, err]) == [info, warn, err]
    with pytest.raises(ValueError):
        checks.finding("x", "fatal", "e")
    assert ids(static_findings("def broken(:\n")) == {"syntax_error"}


# ----------------------------------------------------------------------------------------------
# The CLI, static part (no build, no GPU)
# ----------------------------------------------------------------------------------------------


def run_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graph.cli", "check", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_cli_check_static_only_exit_codes_and_json() -> None:
    problem = str(ADVERSARIAL / "problems" / "relu.py")
    clean = run_check(str(EXAMPLE), "--problem", problem, "--static-only")
    assert clean.returncode == 0, clean.stderr
    report = json.loads(clean.stdout)
    assert set(report) == {"verdict", "findings", "operator_coverage"}
    assert report["verdict"] == "clean" and report["operator_coverage"] is None
    hacked = run_check(str(ADVERSARIAL / "try_except_fallback.py"), "--problem", problem, "--static-only")
    assert hacked.returncode == 1
    assert json.loads(hacked.stdout)["verdict"] == "hacked"
    missing = run_check(str(ADVERSARIAL / "nope.py"), "--problem", problem, "--static-only")
    assert missing.returncode == 2 and "nope.py" in missing.stderr


def test_cli_check_without_a_gpu_runs_the_static_part_and_says_so() -> None:
    if has_cuda():
        pytest.skip("checks the answer on a machine without a GPU")
    worker = REPO / "tests" / "candidates" / "worker"
    done = run_check(str(worker / "tf32_switch.py"), "--problem", str(worker / "affine_problem.py"))
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["verdict"] == "hacked"
    skipped = next(f for f in report["findings"] if f["id"] == "dynamic_checks_skipped")
    assert skipped["severity"] == "info" and "GPU" in skipped["evidence"]


TF32_PROGRAM = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        {call}
        return _ext.relu(x)

    def _stitch_forward_tf32(self, x):
        return F.conv2d(x, self.w)
"""


@pytest.mark.parametrize(
    ("call", "severity"),
    [
        ("if torch.backends.cudnn.allow_tf32:\n            return self._stitch_forward_tf32(x)", "info"),
        ("return self._stitch_forward_tf32(x)", "warning"),  # not guarded: just another forward
    ],
)
def test_pytorch_in_the_tf32_forward_is_a_note_only_when_tf32_guards_it(call: str, severity: str) -> None:
    findings = static_findings(TF32_PROGRAM.replace("{call}", call))
    conv = [f for f in findings if "F.conv2d" in f["evidence"]]
    assert [f["severity"] for f in conv] == [severity], findings
