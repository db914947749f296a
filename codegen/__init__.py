"""StitchCUDA's offline policy: a small compiler from a PyTorch reference to a CUDA program.

Stages, one folder each (as Inductor and tinygrad separate them):
- `frontend/`: capture (fx on the meta device), canonical op records, FLOPs and bytes;
- `schedule/`: fusion groups with demotion levels, the Plan artifact, the fix path (repair);
- `emit/`: CUDA functors and launchers, the binding, Python glue, the assembled program.
`policy.py` ties the stages to `graph.policy.Policy`; `advice.py` turns a diagnosis into the
optimisations the offline coder can apply. Nothing here is imported by the generated programs.
"""
