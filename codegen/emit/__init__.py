"""Emit: CUDA kernels and launchers per group, the binding, Python glue, the whole program.

`assemble` turns an analysed, scheduled reference into the program (docs/program-format.md);
`kernels.GroupWriter` writes each group from a `chain.Chain` of fused math, the `functors` the
templates instantiate and the group's Python `helper`, with one module per further family;
`templates/` holds the CUDA headers the kernels instantiate; `runtime.py` is copied verbatim into
every generated program.
"""
