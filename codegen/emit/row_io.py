"""The fused load and store of a row kernel, shared by the row families' writers.

Softmax, layer norm, reductions (codegen/emit/kernels.py) and scans (codegen/emit/scan.py) all read
their input through a StitchPro_* functor (elementwise prologue fused) and write through a
StitchEpi_* functor (elementwise epilogue fused); `GroupWriter.row_io` builds both once, this record
carries what the launcher then needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codegen.emit.chain import Chain
    from codegen.emit.helper import Helper
    from codegen.schedule.fusion import Group


def functor_init(struct: str, var: str, members: list[tuple[str, str]], prefix: str) -> str:
    """The C++ line constructing functor `var` of type `struct` from launcher parameters."""
    if struct == "StitchNoEpi":
        return f"  const StitchNoEpi {var}{{}};"
    values = ", ".join(f"{prefix}{name}" for _, name in members)
    return f"  const {struct} {var}{{{values}}};"


def prefixed(fields: list[tuple[str, str]], prefix: str) -> list[tuple[str, str]]:
    return [(ctype, f"{prefix}{name}") for ctype, name in fields]


@dataclass
class Load:
    """A kernel's fused load (GroupWriter.prologue_load): the StitchPro_* functor over the group's
    prologue, or over its input read as it is; row kernels, pools and norms take it alike."""

    chain: Chain
    struct: str  # the StitchPro_* functor
    fields: list[tuple[str, str]]  # its launcher parameters (`p_` names)
    init: str  # the C++ line constructing `pro` from them
    args: list[str]  # the helper's arguments for them
    device: str  # a helper tensor on the input's device


@dataclass
class RowIO:
    """What a row kernel's launcher needs of its fused prologue and epilogue (GroupWriter.row_io)."""

    pro_chain: Chain
    epi_chain: Chain
    pro_fields: list[tuple[str, str]]
    epi_fields: list[tuple[str, str]]
    pro_init: str
    epi_init: str
    pro: str  # the StitchPro_* functor
    epi: str  # the StitchEpi_* functor (or StitchNoEpi)
    call: list[str]  # launcher arguments so far (the prologue's)
    alloc: str  # `torch.empty({}, ...)` on the input's device, `{}` the shape

    @classmethod
    def build(cls, load: Load, epi_chain: Chain, epi: str) -> RowIO:
        """After the helper prepared the load's operands (`p_` names, `p_shape`)."""
        epi_fields = epi_chain.fields()
        return cls(
            pro_chain=load.chain,
            epi_chain=epi_chain,
            pro_fields=load.fields,
            epi_fields=prefixed(epi_fields, "e_") if epi_chain.ops else [],
            pro_init=load.init,
            epi_init=functor_init(epi, "epi", epi_fields, "e_"),
            pro=load.struct,
            epi=epi,
            call=list(load.args),
            alloc=f"torch.empty({{}}, device={load.device}.device, dtype=torch.float32)",
        )

    def add_epilogue_args(self, helper: Helper, shape_var: str) -> None:
        if self.epi_chain.ops:
            helper.prepare_chain(self.epi_chain, "e_", shape_var, False)
            self.call += helper.chain_args(self.epi_chain, "e_")

    def returns(self, group: Group, saved: str | None) -> list[str]:
        """`saved` for the prologue's result where it is a group output, `y` for the rest."""
        last = group.prologue[-1].node if group.prologue else None
        return [saved if saved and node is last else "y" for node in group.outputs]
