"""CUDA functor structs that the template libraries instantiate with a group's fused math.

Why a module of its own: the three shapes of functor (`StitchEw_*` standalone elementwise,
`StitchPro_*` a row kernel's load with its prologue, `StitchEpi_*` a store with its epilogue) are the
one contract between a `Chain` and the CUDA templates (codegen/emit/templates).
"""

from __future__ import annotations

from typing import Any

from codegen.emit.chain import Chain
from codegen.emit.cuda_unit import NAME_PLACEHOLDER, CudaUnit


def _struct(members: list[tuple[str, str]], methods: str) -> str:
    decls = "\n".join(f"  {ctype} {name};" for ctype, name in members)
    return f"struct {NAME_PLACEHOLDER} {{\n{decls}\n{methods}}};\n"


def _indent(lines: list[str], spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line for line in lines)


def _vec4_loads(chain: Chain, into: str = "") -> list[str]:
    """Statements reading elements e..e+3 of every operand into the float[4] arrays `into`F<i>, B<i>."""
    vec = [chain.load4(i, f"{into}F{i}") for i in range(len(chain.full))]
    vec += [f"stitch_bload4(b{i}, e, b{i}_inner, b{i}_count, {into}B{i});" for i in range(len(chain.bcast))]
    return vec


def _vec4_math(chain: Chain, results: list[str], arrays: list[str], source: str = "") -> list[str]:
    """A loop computing elements e..e+3 of each `results` value into the float[4] `arrays` from the
    operand arrays `source`F<i>, B<i>."""
    inner = ["const int64_t ei = e + k;"] if chain.uses_index else []
    inner += [f"const float x_f{i} = {source}F{i}[k];" for i in range(len(chain.full))]
    inner += [f"const float x_b{i} = {source}B{i}[k];" for i in range(len(chain.bcast))]
    inner += chain.lines + [f"{a}[k] = {v};" for a, v in zip(arrays, results, strict=True)]
    return ["#pragma unroll", "for (int k = 0; k < 4; ++k) {"] + ["  " + line for line in inner] + ["}"]


def _operand_arrays(chain: Chain) -> list[str]:
    return [f"float F{i}[4];" for i in range(len(chain.full))] + [
        f"float B{i}[4];" for i in range(len(chain.bcast))
    ]


def ew_functor(
    unit: CudaUnit, chain: Chain, outputs: list[Any], group: str
) -> tuple[str, list[tuple[str, str]]]:
    """A StitchEw_* struct computing `outputs` elementwise; returns (name, output field list)."""
    out_fields = [("float*", f"o{j}") for j in range(len(outputs))]
    members = chain.fields() + out_fields
    out_vars = [chain.var(k) for k in outputs]
    scalar_body = chain.loads() + chain.lines + [f"o{j}[e] = {v};" for j, v in enumerate(out_vars)]
    arrays = [f"R{j}" for j in range(len(outputs))]
    store = [f"float {a}[4];" for a in arrays] + _vec4_math(chain, out_vars, arrays, "in.")
    store += [f"stitch_st4(o{j} + e, R{j});" for j in range(len(outputs))]
    # load4 and store4 apart let a driver issue several chunks' loads before any store: the compiler
    # may not move a load above a store through pointers that could alias (templates/elementwise.cuh).
    methods = (
        "  struct In {\n"
        + _indent(_operand_arrays(chain), 4)
        + "\n  };\n"
        + "  __device__ __forceinline__ void scalar(int64_t e) const {\n"
        + _indent(scalar_body, 4)
        + "\n  }\n  __device__ __forceinline__ void load4(int64_t e, In& in) const {\n"
        + _indent(_vec4_loads(chain, "in."), 4)
        + "\n  }\n  __device__ __forceinline__ void store4(int64_t e, const In& in) const {\n"
        + _indent(store, 4)
        + "\n  }\n  __device__ __forceinline__ void vec4(int64_t e) const {\n"
        + "    In in;\n    load4(e, in);\n    store4(e, in);"
        + "\n  }\n"
    )
    name = unit.define("StitchEw", _struct(members, methods), group)
    return name, out_fields


def pro_functor(unit: CudaUnit, chain: Chain, result: Any, group: str) -> str:
    """A StitchPro_* struct for a row kernel's input with its prologue fused.

    load(e) gives element e; load4(e, v) elements e..e+3 through 16-byte loads, valid when the host
    has checked vec_ok() (every full operand 16-byte aligned; views check their own) and e is a
    multiple of 4.
    """
    body = chain.loads() + chain.lines + [f"return {chain.var(result)};"]
    aligned = " && ".join(chain.aligned()) or "true"
    methods = (
        "  __device__ __forceinline__ float load(int64_t e) const {\n"
        + _indent(body, 4)
        + "\n  }\n  __device__ __forceinline__ void load4(int64_t e, float v[4]) const {\n"
        + _indent(
            _operand_arrays(chain) + _vec4_loads(chain) + _vec4_math(chain, [chain.var(result)], ["v"]), 4
        )
        + f"\n  }}\n  bool vec_ok() const {{ return {aligned}; }}\n"
    )
    return unit.define("StitchPro", _struct(chain.fields(), methods), group)


def epi_functor(unit: CudaUnit, chain: Chain, result: Any, group: str) -> str:
    """A StitchEpi_* struct whose apply(seed, e) finishes output element e."""
    if not chain.ops:
        return "StitchNoEpi"
    body = chain.loads() + chain.lines + [f"return {chain.var(result)};"]
    methods = (
        "  __device__ __forceinline__ float apply(float seed, int64_t e) const {\n"
        + _indent(body, 4)
        + "\n  }\n"
    )
    return unit.define("StitchEpi", _struct(chain.fields(), methods), group)
