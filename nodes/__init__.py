"""The graph's nodes, one module each: planner, coder, verifier, profiler, finalize.

Nodes read the shared state, ask their policy (`graph.policy`) or the tools for artifacts, validate
them, and return plain-data updates.
"""
