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
    def build(cls, helper: Helper, pro_chain: Chain, epi_chain: Chain, pro: str, epi: str) -> RowIO:
        """After `helper` prepared the prologue's operands (`p_` names, `p_shape`)."""
        pro_fields, epi_fields = pro_chain.fields(), epi_chain.fields()
        device = "p_f0" if pro_chain.full else "p_b0"
        return cls(
            pro_chain=pro_chain,
            epi_chain=epi_chain,
            pro_fields=prefixed(pro_fields, "p_"),
            epi_fields=prefixed(epi_fields, "e_") if epi_chain.ops else [],
            pro_init=functor_init(pro, "pro", pro_fields, "p_"),
            epi_init=functor_init(epi, "epi", epi_fields, "e_"),
            pro=pro,
            epi=epi,
            call=helper.chain_args(pro_chain, "p_"),
            alloc=f"torch.empty({{}}, device={device}.device, dtype=torch.float32)",
        )

    def add_epilogue_args(self, helper: Helper, shape_var: str) -> None:
        if self.epi_chain.ops:
            helper.prepare_chain(self.epi_chain, "e_", shape_var, False)
            self.call += helper.chain_args(self.epi_chain, "e_")

    def returns(self, group: Group, saved: str | None) -> list[str]:
        """`saved` for the prologue's result where it is a group output, `y` for the rest."""
        last = group.prologue[-1].node if group.prologue else None
        return [saved if saved and node is last else "y" for node in group.outputs]
