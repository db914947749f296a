"""The fused attention template (codegen/emit/templates/attention.cuh) built on its own, for its tests.

One binding serves the CPU emulation's build (tools.emulation) and the real nvcc build on a GPU
(tests/gpu/test_attention_gpu.py): pybind11 only, pointers, strides and the stream passed as integers,
the kernel's return code handed back. The mask modes' codes come from the planner's own table
(codegen.frontend.attention_ops.MASK_MODES: torch and the standard library, which the GPU machine has).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from codegen.frontend.attention_ops import MASK_MODES

TEMPLATES = Path(__file__).resolve().parents[2] / "codegen" / "emit" / "templates"
NOT_SUPPORTED = 801  # cudaErrorNotSupported: head dims past 128, or no keys


def _declaration() -> str:
    """The template's own `extern "C" ... stitch_attention_masked(...)` signature, as a declaration."""
    source = (TEMPLATES / "attention.cuh").read_text()
    found = re.search(r'extern "C" int stitch_attention_masked\([^)]*\)', source)
    assert found is not None, "attention.cuh lost stitch_attention_masked"
    return found.group(0) + ";"


BINDING = (
    r"""
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <cstdint>
"""
    + _declaration()
    + r"""
static int64_t py_attention_masked(std::uintptr_t q, std::uintptr_t k, std::uintptr_t v, std::uintptr_t o,
                                   int64_t B, int64_t H, int64_t Tq, int64_t Tk, int64_t D, int64_t Dv,
                                   int64_t q_sb, int64_t q_sh, int64_t q_st, int64_t k_sb, int64_t k_sh,
                                   int64_t k_st, int64_t v_sb, int64_t v_sh, int64_t v_st, int64_t o_sb,
                                   int64_t o_sh, int64_t o_st, double scale, int64_t causal, std::uintptr_t mask,
                                   int64_t m_sb, int64_t m_sh, int64_t m_si, int64_t m_sj, int64_t compare,
                                   double rhs, double fill, std::uintptr_t stream) {
  return stitch_attention_masked(
      reinterpret_cast<const float*>(q), reinterpret_cast<const float*>(k), reinterpret_cast<const float*>(v),
      reinterpret_cast<float*>(o), B, H, Tq, Tk, D, Dv, q_sb, q_sh, q_st, k_sb, k_sh, k_st, v_sb, v_sh, v_st, o_sb,
      o_sh, o_st, (float)scale, (int)causal, reinterpret_cast<const void*>(mask), m_sb, m_sh, m_si, m_sj,
      (int)compare, (float)rhs, (float)fill, reinterpret_cast<cudaStream_t>(stream));
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("attention_masked", &py_attention_masked); }
"""
)


def cuda_source() -> str:
    """common.cuh (the helpers the template uses) and the template."""
    return (TEMPLATES / "common.cuh").read_text() + "\n" + (TEMPLATES / "attention.cuh").read_text()


def run_attention(
    ext: Any, q: Any, k: Any, v: Any, o: Any, scale: float, causal: bool, stream: int = 0
) -> int:
    """The kernel on 4-D views q [B, H, Tq, D], k, v, o (any strides, last dim contiguous), no tensor
    mask; its return code."""
    B, H, Tq, D = q.shape
    Tk, Dv = k.shape[2], v.shape[3]
    for t in (q, k, v, o):
        assert t.stride(3) == 1, "the last dim must be contiguous"
    strides = [s for t in (q, k, v, o) for s in t.stride()[:3]]
    ptrs = [t.data_ptr() for t in (q, k, v, o)]
    no_mask = (0, 0, 0, 0, 0, 0, 0.0, 0.0)
    return int(
        ext.attention_masked(*ptrs, B, H, Tq, Tk, D, Dv, *strides, scale, int(causal), *no_mask, stream)
    )


def run_attention_masked(
    ext: Any,
    q: Any,
    k: Any,
    v: Any,
    o: Any,
    scale: float,
    mask: Any,
    compare: str,
    rhs: float,
    fill: float,
    causal: bool = False,
    stream: int = 0,
) -> int:
    """The kernel with a float32 tensor mask broadcastable to [B, H, Tq, Tk] (read through its strides,
    0 for broadcast dims); where `mask <compare> rhs` holds the scaled score becomes `fill`."""
    B, H, Tq, D = q.shape
    Tk, Dv = k.shape[2], v.shape[3]
    for t in (q, k, v, o):
        assert t.stride(3) == 1, "the last dim must be contiguous"
    strides = [s for t in (q, k, v, o) for s in t.stride()[:3]]
    full = mask.expand(B, H, Tq, Tk)
    ptrs = [t.data_ptr() for t in (q, k, v, o)]
    code = MASK_MODES[compare]
    return int(
        ext.attention_masked(
            *ptrs,
            B,
            H,
            Tq,
            Tk,
            D,
            Dv,
            *strides,
            scale,
            int(causal),
            full.data_ptr(),
            *full.stride(),
            code,
            rhs,
            fill,
            stream,
        )
    )
