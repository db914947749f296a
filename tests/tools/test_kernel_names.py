"""Kernel names: the `__global__` names a source declares, and the bare name in a profiler's signature."""

from __future__ import annotations

from tools.worker.kernel_names import base_name, kernel_names, strip_comments


def test_base_names_match_global_declarations() -> None:
    assert base_name("relu_f4(float4 const*, float4*, long)") == "relu_f4"
    assert base_name("void ns::gemm<128, 64>(float const*, float*)") == "gemm"
    assert base_name("void (anonymous namespace)::softmax_warp<float>(float*)") == "softmax_warp"
    assert base_name("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD"


def test_kernel_names_skip_attributes_comments_and_repeats() -> None:
    source = """
    // __global__ void commented_out(float* y) {}
    /* __global__ void also_commented(float* y) {} */
    __global__ void __launch_bounds__(256) relu_f4(const float4* x, float4* y, long n) {}
    template <int N> __global__ void gemm(const float* a, float* c) {}
    __global__ void relu_f4(const float* x) {}
    """
    assert kernel_names([source]) == ["relu_f4", "gemm"]
    assert kernel_names([]) == []
    assert "commented_out" not in strip_comments(source) and "relu_f4" in strip_comments(source)
