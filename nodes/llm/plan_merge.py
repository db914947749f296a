"""Reconciling the planner model's Plan with the facts the trace measured.

The model decides the grouping, the to-do list and the host plan; it does not get to restate facts.
Operator rows, FLOPs and bytes come from the fx trace when there is one, the task name is the task's,
and coverage is made consistent with the groups, so later nodes and the report read one truth.
"""

from __future__ import annotations

from collections.abc import Sequence

from graph.artifacts import OpInfo, Plan, Task


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def reconcile_plan(plan: Plan, task: Task, traced_ops: Sequence[OpInfo], source_note: str) -> Plan:
    """`plan` with the trace's operators, per-group totals and coverage derived from the groups."""
    ops = [op.model_copy() for op in traced_ops] if traced_ops else [op.model_copy() for op in plan.ops]
    by_node = {op.node: op for op in ops}
    covered_nodes = {n for g in plan.groups if g.covered for n in g.nodes}
    for op in ops:
        op.covered = op.node in covered_nodes

    groups = []
    for group in plan.groups:
        members = [by_node[n] for n in group.nodes if n in by_node]
        if members:
            group = group.model_copy(
                update={"flops": sum(m.flops for m in members), "bytes": sum(m.bytes for m in members)}
            )
        groups.append(group)

    covered_kinds = _unique([op.op for op in ops if op.covered]) if ops else []
    uncovered_kinds = _unique([op.op for op in ops if not op.covered]) if ops else []
    unknown_nodes = sorted({n for g in plan.groups for n in g.nodes} - set(by_node)) if by_node else []
    notes = [plan.notes] if plan.notes else []
    notes.append(source_note)
    if unknown_nodes:
        notes.append(f"groups name nodes the trace does not have: {', '.join(unknown_nodes[:10])}")
    return plan.model_copy(
        update={
            "task": task.name,
            "ops": ops,
            "groups": groups,
            "total_flops": sum(op.flops for op in ops) if ops else plan.total_flops,
            "total_bytes": sum(op.bytes for op in ops) if ops else plan.total_bytes,
            "covered_ops": covered_kinds if ops and plan.groups else _unique(plan.covered_ops),
            "uncovered_ops": uncovered_kinds if ops and plan.groups else _unique(plan.uncovered_ops),
            "traced": bool(traced_ops),
            "notes": " ".join(notes),
        }
    )
