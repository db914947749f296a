"""The worker island: the child process that builds, checks, times and profiles one candidate.

Everything here runs on the GPU machine in a fresh, killable process. It imports only torch, the
standard library, `tools.protocol` (the JSON wire format), `tools.process` (atomic answer files) and
`tools.build` (the extension builder the candidate's `load_inline` is routed to), so it runs on any
CUDA box, langgraph or not. `python -m tools.worker --request REQ.json --response RESP.json` is the
entry point.

| module | what |
|---|---|
| entry | read the request, run the action, write the answer (`run_request`, `main`) |
| reporting | `Outcome` (a run's early end), `Progress` (the phase file), exception summaries |
| guards | precision pinned to fp32; the harness functions and settings a candidate must not change |
| loading | the problem and candidate executed from their sources; KernelBench's seeded construction |
| harness | the request's settings, the strict harness around each call, the timing input sets |
| verify | the verify action: correctness, timing, the profile-based hack checks |
| profile_action | the profile action (torch profiler summary, operator coverage) |
| correctness | the correctness trials, KernelBench's and strict |
| inputs, compare | seeded input draws and copies; output comparison and the strict output checks |
| timing | CUDA-event timing, KernelBench's method and the strict one |
| dynamic_checks | poisoned memory, the watcher, persisting L2, profile classification |
| torch_profile | the torch-profiler summary of a forward |
| kernel_names | `__global__` names in sources, the bare name in a profiler's signature (stdlib only) |
| gpu_lock | one measurement on a device at a time (one lock per physical GPU) |
| probe | `python -m tools.worker.probe`: is this process's GPU still usable (the eval's health check) |
"""
