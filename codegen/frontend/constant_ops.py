"""Fold `torch.tensor(<number>)` constants into the elementwise ops that read them.

Why: `torch.min(x, torch.tensor(0.0, device=x.device))` (a clamp spelled with a 0-d tensor) would
otherwise create a device tensor with PyTorch on every call (a host-to-device copy) and leave the
creation to PyTorch. A float32 0-d constant holds exactly the number rounded to float32, which is
what a chain's literal is (codegen/emit/expressions.py), so each elementwise user reads the number
instead and the creation node is absorbed (its users' `args['lead']`, re-emitted only when a user's
group is demoted to PyTorch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.fx as fx

from codegen.frontend.families import ELEMENTWISE, OTHER

if TYPE_CHECKING:
    from codegen.frontend.ops import OpSpec


def _constant(node: fx.Node) -> float | None:
    """The number of a `torch.tensor(number)` float32 creation, else None."""
    if node.op != "call_function" or node.target is not torch.tensor or len(node.args) != 1:
        return None
    value = node.args[0]
    if not isinstance(value, float) or set(node.kwargs) - {"device", "dtype", "requires_grad"}:
        return None  # an int makes an int64 tensor: the chains' float operands would not match
    if node.kwargs.get("dtype") not in (None, torch.float32) or node.kwargs.get("requires_grad"):
        return None
    return value


def fold_tensor_constants(specs: list[OpSpec]) -> None:
    """Replace constant-tensor operands of elementwise specs by their numbers; absorb the creation."""
    by_node = {s.node: s for s in specs}
    for spec in specs:
        number = _constant(spec.node) if spec.family == OTHER else None
        users = [by_node.get(u) for u in spec.node.users]
        if number is None or not users or any(u is None or u.family != ELEMENTWISE for u in users):
            continue
        for user in users:
            assert user is not None
            operands = user.args.get("operands", [])
            if "lead" in user.args or spec.node not in operands:
                break  # the users must read it as an operand only (not as a mask's lead)
        else:
            for user in users:
                assert user is not None
                user.args["operands"] = [number if o is spec.node else o for o in user.args["operands"]]
                user.args["lead"] = [spec.node]
            spec.family, spec.reason = ELEMENTWISE, ""
            spec.args = {"operands": [], "params": {}, "absorbed": True}
