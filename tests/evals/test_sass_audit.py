"""The SASS audit on real nvcc output: the kernels that loop over rows or tiles keep several loads in
flight per thread (the depthwise staging and the row loops kept one until 2026-12-05)."""

from __future__ import annotations

import shutil

import pytest

from evals import sass_audit

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("nvcc") is None or sass_audit.cuobjdump() is None, reason="needs nvcc and cuobjdump"
    ),
]


@pytest.mark.parametrize(
    ("problem", "kernels"),
    [
        ("level1/16_Conv2d_Depthwise", ("stitch_conv_depthwise_kernel",)),
        ("level1/4_Softmax", ("stitch_softmax_block_kernel", "stitch_softmax_long_kernel")),
        ("level1/56_CrossEntropyLoss", ("stitch_axis_warp_kernel", "stitch_axis_block_kernel")),
    ],
)
def test_looping_kernels_keep_four_loads_in_flight_and_no_local_memory(
    problem: str, kernels: tuple[str, ...]
) -> None:
    audited = sass_audit.audit_problem(problem)
    for kernel in kernels:
        found = [a for name, a in audited.items() if kernel in name]
        assert found, f"{kernel} not in {problem}'s program"
        assert all(max(a.runs) >= 4 for a in found), (kernel, found)
        assert not any(sass_audit.serial(name, a.runs) for name, a in audited.items() if kernel in name)
        assert all(a.local == 0 for a in found), (kernel, found)


@pytest.mark.parametrize(
    ("problem", "kernel"),
    [
        ("level1/31_InstanceNorm", "stitch_gn_onepass_kernel"),
        ("level1/4_Softmax", "stitch_softmax_long_kernel"),
    ],
)
def test_the_long_row_kernels_keep_their_head_in_shared_memory_16_bytes_at_a_time(
    problem: str, kernel: str
) -> None:
    """The head of a long row moves as float4 (STS.128 and LDS.128), not as four bank-conflicting scalars."""
    found = [a for name, a in sass_audit.audit_problem(problem).items() if kernel in name]
    assert found and all(a.wide_shared >= 2 for a in found), (kernel, found)


def test_one_load_at_a_time_is_marked_except_in_per_element_kernels() -> None:
    sass = """
        Function : _Z4loopPf
        /*0000*/ LDG.E R2, [R4.64] ;
        /*0010*/ FADD R0, R0, R2 ;
        /*0020*/ LDG.E R3, [R6.64] ;
        /*0030*/ IADD3 R6, R6, 0x4, RZ ;
        /*0040*/ FADD R0, R0, R3 ;
        Function : _Z8batchedPf
        /*0000*/ LDG.E R2, [R4.64] ;
        /*0010*/ IADD3 R6, R4, 0x80, RZ ;
        /*0020*/ LDG.E R3, [R6.64] ;
        /*0030*/ FADD R0, R2, R3 ;
    """
    runs = sass_audit.load_runs(sass)
    assert runs == {"_Z4loopPf": [1, 1], "_Z8batchedPf": [2]}
    assert sass_audit.serial("void stitch_row_kernel<0>(float*)", runs["_Z4loopPf"])
    assert not sass_audit.serial("void stitch_ew_vec_kernel<F>(F, long)", runs["_Z4loopPf"])
    assert not sass_audit.serial("batched", runs["_Z8batchedPf"])


def test_local_memory_loads_and_stores_are_counted_per_kernel() -> None:
    sass = """
        Function : _Z5stackPf
        /*0000*/ STL [R1], R2 ;
        /*0010*/ LDL R3, [R1+0x4] ;
        /*0020*/ LDG.E R2, [R4.64] ;
        Function : _Z4flatPf
        /*0000*/ LDG.E R2, [R4.64] ;
        /*0010*/ LDS R3, [R5] ;
    """
    assert sass_audit.local_memory(sass) == {"_Z5stackPf": 2, "_Z4flatPf": 0}
    wide = (
        sass
        + "        Function : _Z4headPf\n        /*0000*/ STS.128 [R2], R4 ;\n        /*0010*/ LDS.U.128 R8, [R2] ;\n"
    )
    assert sass_audit.wide_shared(wide) == {"_Z5stackPf": 0, "_Z4flatPf": 0, "_Z4headPf": 2}
