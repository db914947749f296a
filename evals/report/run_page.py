"""One run's HTML twin of report.md: trajectory, time split and kernel roofline as plots, plus the tables
(and, for an LLM run, report.md's table of model calls).

Why: a run's report.md says what happened turn by turn; the twin shows it at a glance (which
candidates failed, where the time went, where each kernel sits under the roofs). It reads only
RUN_DIR/report.json and RUN_DIR/profiles/ (the figures come from nodes.support.run_summary, as the
Markdown's do), so it can be redrawn at any time after the run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from matplotlib.ticker import ScalarFormatter

from evals.report import html as h
from evals.report.figures import (
    EAGER,
    OURS,
    draw_ceilings,
    intensity_range,
    message_png,
    new_figure,
    png_bytes,
)
from nodes.llm.call_log import call_step, short_model, summary_line
from nodes.support.run_summary import (
    best_origin,
    kernel_roofline,
    outcome_text,
    profile_report,
    time_split,
    trajectory,
)

MODE_COLOURS = {"write": "#1f77b4", "fix": "#d62728", "optimize": OURS}
OUTCOME_CSS = {"parsed": "good", "repaired": "", "rejected": "bad", "failed": "bad"}
PART_COLOURS = ("#4e79a7", "#59a14f", "#f28e2b", "#b07aa1", "#bab0ac", "#76b7b2")


def trajectory_png(report: dict[str, Any]) -> bytes:
    """Each candidate's time (log scale), coloured by its turn; failed ones as x on the top edge; best starred."""
    rows = trajectory(report)
    if not rows:
        return message_png("no candidate was evaluated")
    fig, ax = new_figure(8.5, 3.2)
    timed = [r["candidate_ms"] for r in rows if isinstance(r["candidate_ms"], int | float)]
    eager = report.get("eager_ms")
    top = max([*timed, eager or 0.0, 1e-3]) * 1.8
    for r in rows:
        colour = MODE_COLOURS.get(str(r["mode"]), "#333333")
        if r["status"] == "passed" and isinstance(r["candidate_ms"], int | float):
            ax.plot(r["candidate"], r["candidate_ms"], "o", color=colour, markersize=7)
            if r["best"]:
                ax.plot(r["candidate"], r["candidate_ms"], "*", color="#000000", markersize=14, mfc="none")
        else:
            ax.plot(r["candidate"], top, "x", color=colour, markersize=8)
            ax.annotate(
                str(r["status"]),
                (r["candidate"], top),
                textcoords="offset points",
                xytext=(0, -12),
                ha="center",
                fontsize=6,
                color="#a00000",
            )
    passed = [
        (r["candidate"], r["candidate_ms"]) for r in rows if r["status"] == "passed" and r["candidate_ms"]
    ]
    if len(passed) > 1:
        ax.plot(*zip(*passed, strict=True), color="#999999", linewidth=0.8, zorder=0)
    if eager:
        ax.axhline(eager, color=EAGER, linestyle="--", linewidth=1.0, label=f"eager {eager:.3f} ms")
    for mode, colour in MODE_COLOURS.items():
        ax.plot([], [], "o", color=colour, label=f"{mode} turn")
    ax.plot([], [], "*", color="#000000", mfc="none", markersize=10, label="best (reported)")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(ScalarFormatter())
    ax.set_ylim(top=top * 1.6)
    ax.set_xticks([r["candidate"] for r in rows])
    ax.set_xlabel("candidate")
    ax.set_ylabel("forward time (ms, log; x: failed)")
    ax.set_title("iteration trajectory")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return png_bytes(fig)


def time_split_png(split: dict[str, float]) -> bytes:
    """One stacked bar: the run's seconds in build, correctness, timing, profiling, other, planning/coding."""
    total = sum(split.values())
    if total <= 0:
        return message_png("no time was recorded for this run")
    fig, ax = new_figure(8.0, 2.6)
    left = 0.0
    for (part, seconds), colour in zip(split.items(), PART_COLOURS, strict=True):
        ax.barh(0, seconds, left=left, color=colour, label=f"{part} {seconds:.1f} s ({seconds / total:.0%})")
        left += seconds
    ax.set_yticks([])
    ax.set_xlim(0, total)
    ax.set_xlabel("seconds")
    ax.set_title(f"time split ({total:.1f} s)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.4), ncol=3, fontsize=7)
    fig.subplots_adjust(left=0.04, right=0.96, top=0.86, bottom=0.5)
    return png_bytes(fig, tight=False)


def kernel_roofline_png(roofline: dict[str, Any] | None) -> bytes:
    """Nsight Compute's roofline per kernel: fp32 FLOPs per DRAM byte against achieved FLOP/s."""
    kernels = [k for k in (roofline or {}).get("kernels", []) if k["intensity"] and k["flop_per_s"]]
    ceilings = (roofline or {}).get("ceilings") or {}
    if not roofline:
        return message_png("no Nsight Compute records for this run")
    if not kernels or not ceilings.get("copy_bandwidth"):
        return message_png("the Nsight Compute records hold no FLOP counts (an older metric set)")
    fig, ax = new_figure(7.0, 4.2)
    rates = {"FP32": float(ceilings["fp32_flops"]), "TF32": float(ceilings["tf32_flops"])}
    bandwidth = float(ceilings["copy_bandwidth"])
    draw_ceilings(
        ax, bandwidth, rates, intensity_range([k["intensity"] for k in kernels], rates["FP32"] / bandwidth)
    )
    for k in kernels:
        ax.plot(k["intensity"], k["flop_per_s"], "o", color=OURS, markersize=7)
        ax.annotate(
            k["name"][:28],
            (k["intensity"], k["flop_per_s"]),
            textcoords="offset points",
            xytext=(5, 4),
            fontsize=7,
        )
    ax.set_title(f"kernel roofline: {ceilings.get('gpu', '')}")
    return png_bytes(fig)


def _trajectory_table(report: dict[str, Any]) -> str:
    rows = [
        [
            h.number(r["candidate"], "d"),
            h.Cell(str(r["mode"])),
            h.Cell(
                outcome_text(r),
                css="good" if r["status"] == "passed" else "bad",
            ),
            h.number(r["candidate_ms"], ".3f"),
            h.number(r["speedup_vs_eager"], ".2f", "x"),
            h.number(r["build_s"], ".1f"),
            h.number(r["eval_s"], ".1f"),
            h.Cell("best" if r["best"] else "", css="good"),
            h.Cell(r["summary"]),
        ]
        for r in trajectory(report)
    ]
    return h.table(
        ["candidate", "turn", "outcome", "ms", "vs eager", "build s", "check s", "best", "summary"], rows
    )


def _kernel_table(roofline: dict[str, Any] | None) -> str:
    if not roofline:
        return ""
    rows = []
    for k in roofline["kernels"]:
        rows.append(
            [
                h.Cell(k["name"]),
                h.number(k["launches"], "d"),
                h.number(k["ns"] / 1e3, ".1f"),
                h.number(k["intensity"], ".3g"),
                h.number(k["flop_per_s"] / 1e9 if k["flop_per_s"] else None, ".4g"),
                h.number(k["byte_per_s"] / 1e9 if k["byte_per_s"] else None, ".4g"),
                h.Cell(str(k["bound"])),
            ]
        )
    return h.table(["kernel", "launches", "us", "FLOP/B", "GFLOP/s", "GB/s", "bound"], rows)


def _model_calls(report: dict[str, Any]) -> str:
    """report.md's "Model calls" section: one row per request and what became of its answer (LLM runs)."""
    calls = report.get("model_calls") or []
    if not calls:
        return ""
    rows = [
        [
            h.number(number, "d"),
            h.Cell(str(call.get("role") or "-")),
            h.Cell(call_step(call)),
            h.Cell(short_model(str(call.get("model") or ""))),
            h.number(call.get("latency_s"), ".1f"),
            h.number(call.get("answer_chars"), "d"),
            h.Cell(f"{call.get('input_tokens') or '-'}/{call.get('output_tokens') or '-'}"),
            h.Cell(str(call.get("finish_reason") or "-")),
            h.Cell(str(call.get("outcome")), css=OUTCOME_CSS.get(str(call.get("outcome")), "")),
            h.Cell(str(call.get("detail") or "")),
        ]
        for number, call in enumerate(calls, 1)
    ]
    headers = ["#", "role", "step", "model", "s", "answer chars", "tokens in/out", "finish", "outcome"]
    return "\n".join(
        [
            "<h2>Model calls</h2>",
            f'<p class="note">{h.escape(summary_line(calls))}</p>',
            h.table([*headers, "detail"], rows, ident="model-calls"),
        ]
    )


def write_run_page(run_dir: Path) -> Path:
    """RUN_DIR/report.html plus report-trajectory/-time/-kernels.png; ValueError without report.json."""
    path = run_dir / "report.json"
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: no readable run report ({exc})") from exc
    if "kernel_roofline" not in report:  # reports written before the roofline was part of them
        report["kernel_roofline"] = kernel_roofline(profile_report(run_dir, report.get("candidate_id")))
    split = time_split(report)
    pngs = {
        "trajectory": trajectory_png(report),
        "time": time_split_png(split),
        "kernels": kernel_roofline_png(report["kernel_roofline"]),
    }
    for name, data in pngs.items():
        (run_dir / f"report-{name}.png").write_bytes(data)
    speed = report.get("speedup_vs_eager")
    facts = (
        f"<p><b>{h.escape(str(report.get('status')))}</b>: {h.escape(str(report.get('status_reason') or ''))}<br>"
        f"device {h.escape(str(report.get('device') or '-'))}; policy {h.escape(str(report.get('policy')))}; "
        f"candidate {report.get('candidate_ms') or '-'} ms vs eager {report.get('eager_ms') or '-'} ms"
        + (f" ({speed:.2f}x)" if isinstance(speed, int | float) else "")
        + f"<br>best program: {h.escape(best_origin(report))}. "
        '<a href="report.md">report.md</a></p>'
    )
    body = "\n".join(
        [
            facts,
            "<h2>Iteration trajectory</h2>",
            h.image(pngs["trajectory"], "iteration trajectory", "each candidate's outcome and time by turn"),
            _trajectory_table(report),
            "<h2>Time split</h2>",
            h.image(pngs["time"], "time split", "where the run's seconds went"),
            "<h2>Kernel roofline (Nsight Compute)</h2>",
            h.image(pngs["kernels"], "kernel roofline", "fp32 FLOPs per DRAM byte against achieved FLOP/s"),
            _kernel_table(report["kernel_roofline"]),
            _model_calls(report),
        ]
    )
    target = run_dir / "report.html"
    target.write_text(h.page(f"StitchCUDA run: {report.get('problem')}", body))
    return target
