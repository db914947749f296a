"""Benchmark scripts the lead runs on the GPU machine (torch and the standard library only)."""
