"""Inputs for the correctness trials and the timed calls: seeds, draws, device moves, clones, signs.

Why a module of its own: the worker's correctness trials, its timing, the profilers' driver and the
baseline process must all draw and copy inputs exactly the same way (KernelBench's seeding: the CPU
and every CUDA generator set before each draw) so that every number is measured on the same data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch


def set_seed(seed: int) -> None:
    """KernelBench's set_seed: the CPU and every CUDA generator."""
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)


def trial_seeds(trials: int, seed: int = 42) -> list[int]:
    """One seed per correctness trial, drawn exactly as KernelBench draws them."""
    torch.manual_seed(seed)
    return [int(torch.randint(0, 2**32 - 1, (1,)).item()) for _ in range(trials)]


def prepare_inputs(
    inputs: Sequence[Any], device: torch.device | str, dtype: torch.dtype = torch.float32
) -> list[Any]:
    """Move tensors to `device`; floating tensors become `dtype`, integer and bool ones keep their dtype."""
    prepared: list[Any] = []
    for value in inputs:
        if isinstance(value, torch.Tensor):
            target = dtype if value.is_floating_point() else value.dtype
            prepared.append(value.to(device=device, dtype=target))
        else:
            prepared.append(value)
    return prepared


def draw_inputs(
    get_inputs: Callable[[], Sequence[Any]],
    device: torch.device | str,
    on_device: bool,
    dtype: torch.dtype = torch.float32,
) -> list[Any]:
    """Call the problem's get_inputs() under the current seed and move the result to `device`.

    on_device: draw directly on a CUDA device (torch's default-device context makes torch.rand
    allocate there), which is many times faster for multi-GB inputs than KernelBench's CPU draw;
    both models still see identical, seeded inputs.
    """
    device = torch.device(device)
    if on_device and device.type == "cuda":
        with device:
            return prepare_inputs(get_inputs(), device, dtype)
    return prepare_inputs(get_inputs(), device, dtype)


def clone_inputs(inputs: Sequence[Any]) -> list[Any]:
    """A private copy of every tensor input for one model call."""
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in inputs]


def signed_inputs(inputs: Sequence[Any], seed: int) -> list[Any]:
    """The inputs with each floating element's sign flipped at random (seeded): mixed-sign data.

    The signs are drawn where the tensor lives: a CPU draw of a 2 GiB input's signs took seconds
    while the worker held the GPU's device lock."""
    generators: dict[torch.device, torch.Generator] = {}
    signed: list[Any] = []
    for value in inputs:
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 0:
            if value.device not in generators:
                generators[value.device] = torch.Generator(device=value.device).manual_seed(seed)
            flip = torch.rand(value.shape, generator=generators[value.device], device=value.device) < 0.5
            sign = torch.where(flip, -1.0, 1.0).to(dtype=value.dtype)
            signed.append(value * sign)
        else:
            signed.append(value)
    return signed


def upcast_inputs(inputs: Sequence[Any]) -> list[Any]:
    """Floating tensors as float64 (for the float64 reference); everything else unchanged."""
    return [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in inputs]


def tensor_bytes(values: Any) -> int:
    """Bytes held by the tensors in a value, list or tuple (nested)."""
    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, (list, tuple)):
        return sum(tensor_bytes(v) for v in values)
    return 0


def predrawn(
    get_inputs: Callable[[], Sequence[Any]], seeds: Sequence[int], budget_bytes: int
) -> Callable[[], Sequence[Any]]:
    """get_inputs with the CPU draws for `seeds` made now, ahead of the GPU work.

    Why: KernelBench draws every trial's inputs on the CPU, seconds for a multi-GB input, and the
    worker would otherwise make those draws while it holds the GPU's device lock. The returned
    function answers a call from the draw made ahead when the CPU generator is exactly where
    `set_seed(seed)` left it (`torch.initial_seed()` names the seed, the generator's state proves
    nothing advanced it since), and leaves the generator where that draw left it: the caller sees
    the same values and the same generator state as a draw made then. Each draw serves one call;
    any other call draws as usual. Draws stop at `budget_bytes` of inputs; a get_inputs that makes
    non-CPU tensors is not drawn ahead at all.
    """
    ready: dict[int, tuple[torch.Tensor, list[Any], torch.Tensor]] = {}
    used = 0
    for seed in seeds:
        set_seed(seed)
        seeded = torch.get_rng_state()
        values = list(get_inputs())
        if any(isinstance(v, torch.Tensor) and v.device.type != "cpu" for v in values):
            return get_inputs
        used += tensor_bytes(values)
        if used > budget_bytes:
            break
        ready[seed] = (seeded, values, torch.get_rng_state())

    def replay() -> Sequence[Any]:
        seed = torch.initial_seed()
        entry = ready.get(seed)
        if entry is not None and torch.equal(torch.get_rng_state(), entry[0]):
            del ready[seed]
            torch.set_rng_state(entry[2])
            return entry[1]
        return get_inputs()

    return replay


def host_draw_budget(share: float = 0.25, cap: int = 16 << 30) -> int:
    """Bytes of inputs a worker may draw ahead: `share` of the memory available now, at most `cap`."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return min(cap, int(int(line.split()[1]) * 1024 * share))
    except (OSError, ValueError, IndexError):
        pass
    return 0
