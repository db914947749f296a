"""The offline policy: plans, writes, repairs and advises with no model and no API key.

It implements graph.policy.Policy. Every candidate is regenerated from the analysed reference plus a
small set of options kept in `Candidate.meta` (per-group demotion levels, CUDA graph, vector
unroll), so fix and optimise steps are deterministic edits of those options, and the same options
always give the same program.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from codegen.advice import advice_for, choose_optimisation
from codegen.emit.assemble import Options, Program, assemble
from codegen.schedule.demotion import has_split_form
from codegen.schedule.fusion import ELEMENTWISE, REFERENCE
from codegen.schedule.plan import Analysis, analyse, build_plan, graph_pays
from codegen.schedule.repair import plan_fix
from graph.artifacts import Candidate, CoderMode, Feedback, Finding, Plan, Profile, Task, TestResult
from graph.context import Context
from graph.launch_advice import parse_launch

POLICY_NAME = "offline"


class OfflinePolicy:
    """Built-in planner, coder and advisor (rule-based, template-driven)."""

    name = POLICY_NAME

    def __init__(self, context: Context | None = None) -> None:
        self.context = context or Context()

    # ---- planner ---------------------------------------------------------------------------------
    def plan(self, task: Task, reference_profile: Profile | None = None) -> Plan:
        return build_plan(task, analyse(task), reference_profile)

    # ---- coder, skill 1 ------------------------------------------------------------------------
    def write(self, task: Task, plan: Plan, candidate_id: int) -> Candidate:
        analysis = analyse(task)
        options = Options(
            arch=self.context.gpu_arch,
            cuda_graph=bool(plan.host.cuda_graph and analysis.ok),
            levels=_levels_from_plan(plan, analysis),
        )
        program = assemble(analysis, options)
        return self._candidate(
            program, analysis, "write", candidate_id, None, _write_summary(program, analysis), {}
        )

    # ---- coder, skill 2 ------------------------------------------------------------------------
    def revise(
        self,
        task: Task,
        plan: Plan,
        previous: Candidate,
        feedback: Feedback,
        mode: CoderMode,
        candidate_id: int,
    ) -> Candidate:
        analysis = analyse(task)
        options = options_from_meta(previous.meta)
        if options is None:  # another policy wrote it: start over from our own program
            fresh = self.write(task, plan, candidate_id)
            fresh.mode, fresh.parent = mode, previous.id
            fresh.summary = f"{mode}: replaced a foreign candidate with the offline program; {fresh.summary}"
            return fresh
        program = assemble(analysis, options)
        program.cuda_src = _literal(previous.source, "CUDA_SRC", program.cuda_src)
        program.cpp_src = _literal(previous.source, "CPP_SRC", program.cpp_src)
        history = {k: list(previous.meta.get(k, [])) for k in ("demotions", "optimizations")}
        if mode == "fix":
            classifier = analysis.classifier
            repair = plan_fix(
                feedback,
                program,
                analysis.groups,
                options,
                lambda g: classifier is not None and has_split_form(classifier, g),
            )
            history["demotions"] += repair.demoted
            if not repair.changed:
                return self._candidate(
                    program, analysis, mode, candidate_id, previous, repair.summary, history, previous.source
                )
            new_program = assemble(analysis, repair.options)
            return self._candidate(
                new_program, analysis, mode, candidate_id, previous, repair.summary, history
            )
        has_ew = any(g.kind == ELEMENTWISE for g in analysis.groups) or any(
            t.startswith("ew") or "ew_epilogue" in t or t.startswith("bn") for t in program.templates.values()
        )
        choice = choose_optimisation(
            feedback,
            options,
            analysis.ok,
            program.launches,
            has_ew,
            program.streams,
            graph_pays=graph_pays(analysis),
        )
        if choice is None:
            return self._candidate(
                program,
                analysis,
                mode,
                candidate_id,
                previous,
                "no further optimisation",
                history,
                previous.source,
            )
        history["optimizations"].append(choice.name)
        new_program = assemble(analysis, choice.options)
        return self._candidate(new_program, analysis, mode, candidate_id, previous, choice.summary, history)

    # ---- verifier's advisor ----------------------------------------------------------------------
    def advise(
        self,
        task: Task,
        plan: Plan,
        candidate: Candidate,
        test: TestResult,
        profile: Profile,
        *,
        findings: Sequence[Finding] = (),
    ) -> Feedback:
        """Map the profile node's diagnosis (its findings) to the optimisations this coder can apply."""
        return advice_for(findings, profile)

    # ---- helpers ---------------------------------------------------------------------------------
    def _candidate(
        self,
        program: Program,
        analysis: Analysis,
        mode: CoderMode,
        candidate_id: int,
        previous: Candidate | None,
        summary: str,
        history: dict[str, list[Any]],
        source: str | None = None,
    ) -> Candidate:
        meta: dict[str, Any] = {
            "options": program.options.dump(),
            "templates": program.templates,
            "launches": program.launches,
            "traced": analysis.ok,
            "demotions": history.get("demotions", []),
            "auto_demoted": program.auto_demoted,
            "optimizations": history.get("optimizations", []),
        }
        return Candidate(
            id=candidate_id,
            source=source if source is not None else program.source,
            mode=mode,
            parent=previous.id if previous is not None else None,
            policy=POLICY_NAME,
            summary=summary,
            covered_ops=program.covered_ops,
            uncovered_ops=program.uncovered_ops,
            meta=meta,
        )


def options_from_meta(meta: dict[str, Any]) -> Options | None:
    """The options an offline candidate was written with (None for other policies' candidates)."""
    raw = meta.get("options") if isinstance(meta, dict) else None
    if not isinstance(raw, dict):
        return None
    levels = raw.get("levels", {})
    return Options(
        arch=str(raw.get("arch", "sm_90")),
        cuda_graph=bool(raw.get("cuda_graph", False)),
        ew_unroll=int(raw.get("ew_unroll", 1)),
        streams=bool(raw.get("streams", False)),
        levels={str(k): int(v) for k, v in levels.items()} if isinstance(levels, dict) else {},
        launch=parse_launch(raw.get("launch", {})),
    )


def _levels_from_plan(plan: Plan, analysis: Analysis) -> dict[str, int]:
    """Honour a plan that leaves a group to PyTorch (e.g. an edited or LLM-written plan)."""
    ours = {g.id: g for g in analysis.groups}
    levels: dict[str, int] = {}
    for group in plan.groups:
        mine = ours.get(group.id)
        if (
            mine is not None
            and mine.covered
            and not group.covered
            and [n.name for n in mine.members] == group.nodes
        ):
            levels[group.id] = 2
    return levels


def _literal(source: str, name: str, default: str) -> str:
    """The value of a module-level string constant of a program (CUDA_SRC / CPP_SRC)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return default
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        named = any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        if named and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return node.value.value
    return default


def _write_summary(program: Program, analysis: Analysis) -> str:
    if not analysis.ok:
        return f"untraced reference kept as PyTorch ({analysis.trace_error})"
    groups = analysis.groups
    covered = [g for g in groups if g.kind != REFERENCE]
    kinds = sorted({g.kind for g in covered})
    text = f"{len(covered)}/{len(groups)} groups with custom kernels ({', '.join(kinds) or 'none'}), ~{program.launches} launches"
    if program.uncovered_ops:
        text += f"; PyTorch: {', '.join(program.uncovered_ops)}"
    if program.options.cuda_graph:
        text += "; forward captured in a CUDA graph"
    return text
