"""The torch-profiler summary the profile action reports: device time, launches, the program's own share."""

from __future__ import annotations

from typing import Any

import pytest

from tools.worker import torch_profile


def _device_event(name: str, start_us: float, end_us: float) -> Any:
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    return FunctionEvent(
        id=1, name=name, thread=0, start_us=start_us, end_us=end_us, device_type=DeviceType.CUDA
    )


def test_cuda_summary_splits_own_and_library_kernels() -> None:
    events = [
        _device_event("relu_f4(float4 const*, float4*, long)", 0, 30),
        _device_event("relu_f4(float4 const*, float4*, long)", 40, 70),
        _device_event("void at::native::vectorized_elementwise_kernel<4>(int)", 70, 100),
        _device_event("Memset (Device)", 100, 110),
    ]
    summary = torch_profile.summarize_cuda(events, {"relu_f4", "relu_tail"}, iters=2, top_k=5)
    assert summary["device_ms"] == pytest.approx(0.05)
    assert summary["kernel_count"] == 2  # 3 launches over 2 forwards, the memset not counted
    assert summary["own_kernel_share"] == pytest.approx(0.6)
    assert summary["top"][0]["name"].startswith("relu_f4") and summary["top"][0]["calls"] == 2
