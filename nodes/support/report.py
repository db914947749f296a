"""The run's report: one dict (report.json) and its Markdown rendering (report.md)."""

from __future__ import annotations

from typing import Any, cast

from graph.artifacts import Best
from graph.state import State, read_optional
from nodes.llm.call_log import summarize
from nodes.support.run_summary import markdown_sections
from nodes.support.speed import speed_verdict
from nodes.support.worker_client import kernelbench_line, to_profile
from tools.protocol import ProfileInfo
from tools.sandbox import SandboxError, layers_line, platform_layers


def _fmt(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def _hack_line(check: dict[str, Any] | None) -> str:
    if not check:
        return "- (no verified program)"
    ids = sorted({f["id"] for f in check.get("findings") or [] if f.get("severity") != "info"})
    coverage = check.get("operator_coverage")
    cov = "" if coverage is None else f"; operator coverage {coverage:.0%}"
    return f"{check.get('verdict')}{cov}" + (f" ({', '.join(ids)})" if ids else "")


PROFILE_FIELDS = ("source", "device_ms", "kernel_count", "own_kernel_share", "summary")


def _profile_fields(profile: dict[str, Any] | None) -> dict[str, Any] | None:
    return {k: profile.get(k) for k in PROFILE_FIELDS} if profile else None


def _shown_profile(state: State, best: Best | None) -> dict[str, Any] | None:
    """The profile of the program the report shows. The state's profile is the last one taken; when a
    later candidate was profiled (an optimisation that did not win), the best's own verification
    trace stands in, so the report never pairs the best's time with another program's kernels."""
    latest = state.get("profile")
    if best is None or (state.get("candidate") or {}).get("id") == best.candidate.id:
        return latest
    return to_profile(cast(ProfileInfo, best.test.profile)).dump() if best.test.profile else None


def _sandbox(mode: str) -> dict[str, Any]:
    try:
        return platform_layers(mode)
    except SandboxError as exc:
        return {"mode": mode, "error": str(exc), "layers": {}}


def _speed(test: dict[str, Any]) -> dict[str, Any] | None:
    """The plain verdict on the reported program's speedup (nodes.support.speed), None untimed."""
    if not test:
        return None
    verdict = speed_verdict(
        test.get("speedup_vs_eager"), test.get("speedup_cv"), test.get("speedup_rounds") or 0
    )
    return {"kind": verdict.kind, "band": round(verdict.band, 4), "text": verdict.text}


def build_report(
    state: State, status: str, reason: str, policy: str, sandbox: str = "auto"
) -> dict[str, Any]:
    """Everything a reader needs about the run, as plain data (sandbox: the run's mode; its layers here)."""
    best = read_optional(state, "best", Best)
    best_test = best.test.dump() if best is not None else {}
    best_build = best.build.dump() if best is not None else state.get("build") or {}
    plan = state.get("plan") or {}
    task = state.get("task") or {}
    shown = best.candidate.dump() if best is not None else state.get("candidate") or {}
    return {
        "problem": task.get("name") or state.get("problem_name") or state.get("problem_path"),
        "status": status,
        "status_reason": reason,
        "policy": policy,
        "device": best_test.get("device") or (state.get("test") or {}).get("device", ""),
        "speedup_vs_eager": best_test.get("speedup_vs_eager"),
        "speed": _speed(best_test),
        "eager_ms": best_test.get("eager_ms"),
        "eager_median_ms": best_test.get("eager_median_ms"),
        "candidate_ms": best_test.get("candidate_ms"),
        "compile_ms": best_test.get("compile_ms") or {},
        "iterations": state.get("iteration", 0),
        "build_s": best_build.get("seconds"),
        "candidate_id": shown.get("id"),
        "covered_ops": shown.get("covered_ops") or plan.get("covered_ops", []),
        "uncovered_ops": shown.get("uncovered_ops") or plan.get("uncovered_ops", []),
        "plan": {
            "groups": [
                {k: g.get(k) for k in ("id", "kind", "template", "covered", "nodes", "reason")}
                for g in plan.get("groups", [])
            ],
            "total_flops": plan.get("total_flops"),
            "total_bytes": plan.get("total_bytes"),
            "cuda_graph": (plan.get("host") or {}).get("cuda_graph"),
        },
        "profile": _profile_fields(_shown_profile(state, best)),
        "reference_profile": _profile_fields(state.get("reference_profile")),
        "harness": kernelbench_line(best_test.get("kernelbench")) if best_test else None,
        "harness_check": best_test.get("kernelbench") if best_test else None,
        "hack_check": {k: best_test.get(k) for k in ("verdict", "findings", "operator_coverage")}
        if best_test
        else None,
        "attempts": state.get("history", []),
        "node_seconds": state.get("node_seconds", {}),
        "trace_s": plan.get("trace_seconds"),
        "sandbox": _sandbox(sandbox),
        "model_calls": state.get("model_calls", []),
        "model_call_summary": summarize(state.get("model_calls", [])),
    }


def render_markdown(report: dict[str, Any]) -> str:
    """A short human-readable report."""
    lines = [
        f"# StitchCUDA report: {report['problem']}",
        "",
        f"- status: **{report['status']}** ({report['status_reason']})",
        f"- policy: {report['policy']}; device: {report['device'] or '-'}",
        f"- eager {_fmt(report['eager_ms'])} ms, candidate {_fmt(report['candidate_ms'])} ms, "
        f"speedup vs eager {_fmt(report['speedup_vs_eager'], '.2f')}x",
        f"- speed: {(report.get('speed') or {}).get('text', '-')}",
        f"- coder turns: {report['iterations']}; build of the reported program: {_fmt(report['build_s'], '.1f')} s",
        f"- custom kernels for: {', '.join(report['covered_ops']) or 'none'}",
        f"- left to PyTorch: {', '.join(report['uncovered_ops']) or 'none'}",
        f"- harness: {report.get('harness') or '-'}",
        f"- hack check: {_hack_line(report.get('hack_check'))}",
        f"- sandbox: {layers_line(report.get('sandbox'))}",
        "",
        "## Fusion groups",
        "",
        "| group | kind | template | covered | ops |",
        "|---|---|---|---|---|",
    ]
    for g in report["plan"]["groups"]:
        ops = ", ".join(g.get("nodes") or [])
        lines.append(
            f"| {g['id']} | {g['kind']} | {g['template']} | {'yes' if g['covered'] else 'no'} | {ops} |"
        )
    lines += markdown_sections(report)
    profiles = [
        (who, report.get(key)) for who, key in (("reference", "reference_profile"), ("candidate", "profile"))
    ]
    if any(profile for _, profile in profiles):
        lines += ["", "## Profile", ""]
        lines += [f"- {who}: {profile.get('summary') or ''}" for who, profile in profiles if profile]
    lines += _model_call_lines(report.get("model_calls") or [])
    return "\n".join(lines) + "\n"


def _short_model(name: str) -> str:
    """A served checkpoint is often named by its path; its last part is what a reader recognises."""
    return name.rstrip("/").rsplit("/", 1)[-1] if name.startswith(("/", "./", "~")) else name


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _model_call_lines(calls: list[dict[str, Any]]) -> list[str]:
    """One row per model request: who asked, how long it took, how big the answer was, what became of it."""
    if not calls:
        return []
    summary = summarize(calls)
    counts = ", ".join(f"{n} {name}" for name, n in summary["outcomes"].items() if n)
    lines = [
        "",
        "## Model calls",
        "",
        f"{summary['calls']} calls ({counts}); {summary['latency_s']:.1f} s waiting for "
        f"{', '.join(summary['models'])}.",
        "",
        "| # | role | step | model | s | answer chars | tokens in/out | finish | outcome | detail |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for number, call in enumerate(calls, 1):
        step = " ".join(
            str(part)
            for part in (
                call.get("mode"),
                call.get("method"),
                call.get("candidate") and f"#{call['candidate']}",
            )
            if part
        )
        tokens = f"{call.get('input_tokens') or '-'}/{call.get('output_tokens') or '-'}"
        lines.append(
            f"| {number} | {call.get('role')} | {step or '-'} | {_cell(_short_model(call.get('model', '')))} | "
            f"{call.get('latency_s', 0.0):.1f} | {call.get('answer_chars', 0)} | {tokens} | "
            f"{call.get('finish_reason') or '-'} | {call.get('outcome')} | {_cell(call.get('detail') or '')} |"
        )
    return lines
