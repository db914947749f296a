"""The dynamic hack checks on the CPU: profile classification, operator coverage, poison, L2, the watcher."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from tools.worker import dynamic_checks


def _event(
    name: str,
    *,
    cpu: bool,
    id_: int = 0,
    linked: int = 0,
    start: float = 0,
    end: float = 0,
    range_: bool = False,
) -> Any:
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    return FunctionEvent(
        id=id_,
        name=name,
        thread=0,
        start_us=start,
        end_us=end,
        device_type=DeviceType.CPU if cpu else DeviceType.CUDA,
        linked_correlation_id=linked,
        is_user_annotation=range_,
    )


def _trace(
    kernels: list[tuple[str, int, float]], ops: list[tuple[int, str, int]], link_device: bool = True
) -> list[Any]:
    """CPU ops (id, name, parent id) with their kernels, and device kernels (name, linked op id, us).

    link_device=False leaves the device events' correlation ids at 0, as torch 2.11's parsed trace does.
    Like a real trace, the device timeline also holds the wrapper's range (a gpu_user_annotation
    spanning every kernel), which is not work and must not be counted.
    """
    events: dict[int, Any] = {}
    for id_, name, parent in ops:
        events[id_] = _event(name, cpu=True, id_=id_)
        if parent:
            events[id_].cpu_parent = events[parent]
    device = []
    for name, linked, us in kernels:
        device.append(_event(name, cpu=False, linked=linked if link_device else 0, end=us))
        if linked:
            events[linked].append_kernel(name, 0, us)
    span = sum(us for _, _, us in kernels)
    device.append(_event(dynamic_checks.WRAPPER, cpu=False, end=span, range_=True))
    return list(events.values()) + device


def test_profile_classes_and_operator_coverage() -> None:
    wrapper = [(1, dynamic_checks.WRAPPER, 0)]
    reference = _trace(
        [("sm90_xmma_gemm_f32", 3, 800.0), ("void at::native::vectorized_elementwise_kernel<4>", 4, 200.0)],
        wrapper + [(2, "aten::linear", 1), (3, "aten::addmm", 2), (4, "aten::relu", 1)],
    )
    own_relu = _trace(
        [("sm90_xmma_gemm_f32", 3, 800.0), ("relu_f4(float4 const*, float4*, long)", 1, 150.0)],
        wrapper + [(2, "aten::linear", 1), (3, "aten::addmm", 2)],
    )
    all_own = _trace([("fused_linear_relu", 1, 900.0), ("Memset (Device)", 1, 5.0)], wrapper)
    ref = dynamic_checks.classify_events(reference, ())
    assert ref["torch_ops_ms"] == {"aten::linear": 0.8, "aten::relu": 0.2} and ref["device_ms"] == 1.0
    partial = dynamic_checks.classify_events(own_relu, {"relu_f4"})
    assert partial["split_ms"] == {"own": 0.15, "torch": 0.8}
    assert dynamic_checks.coverage(partial, ref) == pytest.approx(0.2)
    full = dynamic_checks.classify_events(all_own, {"fused_linear_relu"})
    assert dynamic_checks.coverage(full, ref) == 1.0 and full["split_ms"]["data"] == 0.005
    findings = dynamic_checks.profile_findings(partial, {"relu_f4"})
    assert [f["id"] for f in findings] == ["pytorch_fallback"] and "aten::linear" in findings[0]["evidence"]


def test_ghost_kernels_and_library_calls_in_the_profile() -> None:
    torch_only = dynamic_checks.classify_events(
        _trace(
            [("void at::native::vectorized_elementwise_kernel<4>", 2, 100.0)],
            [(1, "w", 0), (2, "aten::relu", 1)],
        ),
        {"relu_f4"},
    )
    ghost = dynamic_checks.profile_findings(torch_only, {"relu_f4"})
    assert ghost[0]["id"] == "own_kernels_not_run" and ghost[0]["severity"] == "error"
    assert dynamic_checks.profile_findings(torch_only, set())[0]["id"] == "no_custom_kernel_ran"
    direct = dynamic_checks.classify_events(_trace([("nvjet_sgemm_128x64", 1, 100.0)], [(1, "w", 0)]), set())
    assert direct["split_ms"] == {"library": 0.1} and dynamic_checks.profile_findings(direct, set()) == []
    graph_replay = dynamic_checks.classify_events(
        _trace([("void at::native::reduce_kernel<512, 1>", 0, 50.0)], []), set()
    )
    assert graph_replay["split_ms"] == {"torch": 0.05}  # a PyTorch kernel with no op: replayed from a graph


def test_kernels_link_to_their_ops_through_the_op_kernel_lists_when_device_ids_are_missing() -> None:
    # A program calling torch.matmul in forward: cuBLAS kernel names, but launched by aten::matmul.
    trace = _trace(
        [("nvjet_sgemm_128x64", 3, 100.0), ("relu_f4(float4 const*)", 1, 20.0)],
        [(1, dynamic_checks.WRAPPER, 0), (2, "aten::matmul", 1), (3, "aten::mm", 2)],
        link_device=False,
    )
    split = dynamic_checks.classify_events(trace, {"relu_f4"})
    assert split["split_ms"] == {"own": 0.02, "torch": 0.1}
    assert split["torch_ops_ms"] == {"aten::matmul": 0.1}
    direct = dynamic_checks.classify_events(
        _trace([("nvjet_sgemm_128x64", 1, 100.0)], [(1, "w", 0)], link_device=False), set()
    )
    assert direct["split_ms"] == {"library": 0.1}  # launched by the program itself: a direct library call


def test_cpu_poison_is_a_noop_and_persisting_l2_reports_what_it_saw() -> None:
    assert dynamic_checks.poison_free_memory("cpu") == 0
    l2 = dynamic_checks.PersistingL2()
    assert l2.findings() == []
    l2.seen_limit = 4 << 20
    assert l2.findings()[0]["id"] == "persisting_l2"


def test_watch_sees_threads_left_alive_and_processes_spawned() -> None:
    watch = dynamic_checks.Watch()
    release = threading.Event()
    with watch.running():
        thread = threading.Thread(target=release.wait, name="deferred-work", daemon=True)
        thread.start()
        os.system("true")
    watch.os_threads = set()
    watch.after_call()
    try:
        found = {f["id"]: f for f in watch.findings()}
    finally:
        release.set()
        thread.join()
    assert "deferred-work" in found["background_thread"]["evidence"]
    assert "os.system" in found["spawns_process"]["evidence"]
    quiet = dynamic_checks.Watch()
    os.system("true")  # not while a candidate runs
    assert "spawns_process" not in {f["id"] for f in quiet.findings()}
