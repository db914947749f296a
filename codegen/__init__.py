"""StitchCUDA's offline policy: a small compiler from a PyTorch reference to a CUDA program.

Stages, one folder each (as Inductor and tinygrad separate them):
- `frontend/`: capture (fx on the meta device), canonical op records, FLOPs and bytes;
- `schedule/`: fusion groups with demotion levels, the Plan artifact, the fix path (repair);
- `emit/`: CUDA functors and launchers, the binding, Python glue, the assembled program.
`policy.py` ties the stages to `graph.policy.Policy`; `advice.py` maps the findings of the one
diagnosis (made by the profile node, handed over as `graph.artifacts.Finding` data) to the
optimisations the offline coder can apply. codegen may import `graph` (artifacts) and the
standard-library `tools.roofline`, never `nodes`. Nothing here is imported by the generated programs.
"""
