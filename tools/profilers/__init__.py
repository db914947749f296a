"""Profilers: Nsight Compute, Nsight Systems, the system-level timeline and the program they run.

The parent side starts a profiler around `python -m tools.profilers.target` (which builds the
candidate, or takes the reference, and runs N forwards inside a named range) and parses what the
tool wrote into typed records. Standard library only, except `target` (the driver, a child process,
which uses the worker island and torch). May import the worker island, the build system and
tools.process; nothing here is imported by the island.

| module | what |
|---|---|
| target | the driver: build, warm up, run the forwards between cudaProfilerStart/Stop in a named range |
| tool_run | starting the driver under a tool with a time limit, and reading its META.json |
| ncu, ncu_records | running Nsight Compute; its metric set and per-launch records |
| nsys | running Nsight Systems and reading its CSV reports |
| timeline | the records both timeline sources share, and the per-forward summary |
| system_profile | the one system-level entry point: nsys, else the PyTorch profiler |
"""
