"""Generated programs run on the CPU: their CUDA built against an emulation of the CUDA runtime.

Why: GPU time is scarce and a kernel's logic (index math, barriers, shuffles, split reductions, launch
limits) is the same on any machine. `include/cuda_runtime.h` runs each launch's blocks one after
another and a block's threads as fibers switched at barriers, and checks every launch as the GPU
would; `program.load_program` builds a program's `CUDA_SRC` and `CPP_SRC` with g++ against it and
runs its `ModelNew` on CPU tensors. Numerics, races between warps and timing are the GPU's business;
`include/cublasLt.h` and `include/cudnn.h` compute the library calls our templates make; programs that
capture a CUDA graph are not emulated (`Unsupported`).
Test tooling: the graph never runs it (generated code stays out of the graph's process).
"""
