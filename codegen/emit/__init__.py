"""Emit: CUDA kernels and launchers per group, the binding, Python glue, the whole program.

`assemble` turns an analysed, scheduled reference into the program (docs/program-format.md);
`templates/` holds the CUDA headers the kernels instantiate; `runtime.py` is copied verbatim into
every generated program.
"""
