"""The eval page's plots, each returned as PNG bytes: speedup bars, fast_p curves, roofline, coverage.

Why these: KernelBench users read fast_p curves; GPU engineers read a roofline and speedup
distributions before any table. Every plot draws from evals.metrics / evals.report.suite_data, so the
page and the Markdown tables cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evals.metrics import fast_share, is_correct, speedup_of
from evals.report.figures import (
    EAGER,
    OURS,
    draw_ceilings,
    intensity_range,
    level_colour,
    message_png,
    new_figure,
    new_figure_grid,
    png_bytes,
)
from evals.report.suite_data import RooflinePoint, coverage

BASELINE_TITLES = {"eager": "vs eager", "compile": "vs best torch.compile mode"}
P_MAX = 3.0
P_STEPS = 300


def _short(problem: str) -> str:
    level, _, name = problem.partition("/")
    return f"{level.removeprefix('level')}/{name}"


def speedup_bars(records: Sequence[dict[str, Any]], levels: list[str]) -> bytes:
    """Per problem, sorted bars of the speedup vs eager and vs best compile; incorrect problems at 0, marked x."""
    fig, axes = new_figure_grid(11.0, max(3.0, 0.22 * len(records) + 1.2), 2)
    for ax, baseline in zip(axes, ("eager", "compile"), strict=True):
        rows = sorted(
            ((speedup_of(r, baseline) if is_correct(r) else None, r) for r in records),
            key=lambda item: (item[0] is not None, item[0] or 0.0),
        )
        measured = [s for s, _ in rows if s is not None]
        ax.set_title(BASELINE_TITLES[baseline])
        if not measured:
            ax.text(
                0.5, 0.5, f"no {baseline} baseline recorded", ha="center", va="center", transform=ax.transAxes
            )
            ax.axis("off")
            continue
        ys = list(range(len(rows)))
        ax.barh(
            ys,
            [s or 0.0 for s, _ in rows],
            color=[level_colour(r.get("level") or "custom", levels) for _, r in rows],
            height=0.7,
        )
        for y, (s, _) in zip(ys, rows, strict=True):
            if s is None:
                ax.plot(0.02, y, "x", color="#c00000", markersize=5)
            else:
                ax.text(s, y, f" {s:.2f}x", va="center", fontsize=7)
        ax.axvline(1.0, color="#000000", linewidth=0.8)
        ax.set_yticks(ys, [_short(r["problem"]) for _, r in rows], fontsize=7)
        ax.set_xlabel("speedup (x, higher is better; x at 0: not correct or not timed)")
        ax.set_xlim(0, max(measured) * 1.25)
        ax.legend(handles=[_patch(level_colour(lv, levels), lv) for lv in levels], loc="lower right")
    return png_bytes(fig)


def _patch(colour: str, label: str) -> Any:
    from matplotlib.patches import Patch

    return Patch(color=colour, label=label)


def fast_p_points(
    records: Sequence[dict[str, Any]], total: int, baseline: str
) -> tuple[list[float], list[float]]:
    """(p values from 0 to 3, fast_p at each): the share of all `total` problems correct and faster than p."""
    ps = [P_MAX * i / P_STEPS for i in range(P_STEPS + 1)]
    return ps, [fast_share(records, total, baseline, p) for p in ps]


def fast_p_curves(records: Sequence[dict[str, Any]], totals: dict[str, int]) -> bytes:
    """fast_p against eager and against compile, one line per level and one for all (KernelBench's curve)."""
    fig, axes = new_figure_grid(10.0, 3.6, 2)
    levels = sorted(totals)
    for ax, baseline in zip(axes, ("eager", "compile"), strict=True):
        ax.set_title(f"fast_p {BASELINE_TITLES[baseline]}")
        if not any(speedup_of(r, baseline) is not None for r in records):
            ax.text(
                0.5, 0.5, f"no {baseline} baseline recorded", ha="center", va="center", transform=ax.transAxes
            )
            ax.axis("off")
            continue
        groups = [(level, [r for r in records if r.get("level") == level], totals[level]) for level in levels]
        groups.append(("all", list(records), sum(totals.values())))
        for level, rows, total in groups:
            ps, shares = fast_p_points(rows, total, baseline)
            colour = "#000000" if level == "all" else level_colour(level, levels)
            style = "--" if level == "all" else "-"
            ax.step(ps, shares, where="post", color=colour, linestyle=style, label=f"{level} ({total})")
        ax.axvline(1.0, color="#888888", linewidth=0.8)
        ax.set_xlim(0, P_MAX)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("speedup threshold p")
        ax.set_ylabel("share of problems correct and faster than p")
        ax.legend(loc="upper right")
    return png_bytes(fig)


def roofline(points: Sequence[RooflinePoint], ceilings_of: Any) -> bytes:
    """Each problem's intensity against its achieved FLOP/s, ours (filled) next to eager (open), per GPU.

    ceilings_of(gpu) -> tools.roofline.Ceilings: the GPU's measured ceilings (or labelled stand-ins).
    """
    if not points:
        return message_png("roofline: no problem has work figures and a GPU time")
    gpus = sorted({p.gpu for p in points})
    fig, axes = new_figure_grid(7.5 * len(gpus), 5.0, len(gpus))
    levels = sorted({p.level for p in points})
    for ax, gpu in zip(axes, gpus, strict=True):
        ceilings = ceilings_of(gpu)
        mine = [p for p in points if p.gpu == gpu]
        rates = {"FP32": ceilings.fp32_flops, "TF32": ceilings.tf32_flops}
        draw_ceilings(
            ax,
            ceilings.copy_bandwidth,
            rates,
            intensity_range([p.intensity for p in mine], min(rates.values()) / ceilings.copy_bandwidth),
        )
        for point in mine:
            colour = level_colour(point.level, levels)
            ours, eager = point.throughput(point.ours_ms), point.throughput(point.eager_ms)
            if ours and eager:
                ax.plot([point.intensity] * 2, [eager, ours], color=colour, linewidth=0.8, alpha=0.6)
            if eager:
                ax.plot(point.intensity, eager, "o", mfc="white", mec=EAGER, markersize=5)
            if ours:
                ax.plot(point.intensity, ours, "o", color=colour, mec=OURS, markersize=6)
        for level in sorted({p.level for p in mine}):  # which colour is which level, as in the other plots
            ax.plot(
                [], [], "o", color=level_colour(level, levels), mec=OURS, label=f"StitchCUDA program, {level}"
            )
        ax.plot([], [], "o", mfc="white", mec=EAGER, label="PyTorch eager (open)")
        ax.legend(loc="lower right")
        ax.set_title(f"{gpu}: ceilings {ceilings.source.split(':')[0]}")
    return png_bytes(fig)


def coverage_bars(records: Sequence[dict[str, Any]]) -> bytes:
    """Per problem, the share of the work in our own kernels (GPU time when measured, else op kinds)."""
    rows = sorted(records, key=lambda r: (coverage(r)[0] or 0.0, r["problem"]))
    fig, ax = new_figure(7.0, max(2.5, 0.22 * len(rows) + 1.0))
    ys = list(range(len(rows)))
    shares = [coverage(r)[0] for r in rows]
    ax.barh(ys, [1.0] * len(rows), color="#dddddd", height=0.7)
    ax.barh(ys, [s or 0.0 for s in shares], color=OURS, height=0.7)
    for y, record, share in zip(ys, rows, shares, strict=True):
        what = coverage(record)[1]
        ax.text(1.01, y, f"{share:.0%} ({what})" if share is not None else "-", va="center", fontsize=7)
    ax.set_yticks(ys, [_short(r["problem"]) for r in rows], fontsize=7)
    ax.set_xlim(0, 1.25)
    ax.set_xlabel("operator coverage: share done by our own kernels (green) vs left to PyTorch (grey)")
    ax.set_title("operator coverage per problem")
    return png_bytes(fig)
