"""What the agents call: problem loading, builds, the isolated evaluation worker, checks, profilers.

| where | what | may import |
|---|---|---|
| `worker/` | the child process that builds, checks, times and profiles one candidate | torch, stdlib, `protocol`, `process`, `cache_paths`, `build/` |
| `build/` | the cached `load_inline` and the direct builder | torch, stdlib, `process`, `cache_paths`, `worker.kernel_names` |
| `checks/` | the static hack checks and the one verdict (`hack_report`) | stdlib, `protocol`, `worker.kernel_names` |
| `emulation/` | generated programs run on the CPU: their CUDA built against an emulated CUDA runtime, cuBLASLt and cuDNN (tests; docs/emulation.md) | stdlib, torch, `cache_paths` |
| `profilers/` | Nsight Compute, Nsight Systems, the system timeline, the profiled driver | stdlib, `process`, the island |
| `protocol.py` | the JSON wire format between parent and worker, findings included | stdlib |
| `process.py` | child processes: group kills, capped logs, atomic JSON files | stdlib |
| `cache_paths.py` | where the build cache and its precompiled headers live (one rule for all sides) | stdlib |
| `evaluate.py` | the parent side: one request in a fresh, killable worker; the speed-of-light judgement | stdlib, `protocol`, `process`, `roofline` |
| `problem.py`, `roofline.py`, `baselines.py`, `baseline_suite.py` | problem files and suites; device ceilings; PyTorch baselines (and their table over a suite) | parent side |

The worker island (`worker/` and `build/`) is what runs on the GPU machine next to untrusted code:
it needs nothing beyond torch and the standard library (tests/tools/test_layout.py checks that).
"""
