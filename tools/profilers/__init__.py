"""Profilers: Nsight Compute, Nsight Systems, the system-level timeline and the program they run.

The parent side starts a profiler around `python -m tools.profilers.target` (which builds the
candidate, or takes the reference, and runs N forwards inside a named range) and parses what the
tool wrote into typed records. May import the worker island, the build system and tools.process.
"""
