"""Headless, deterministic matplotlib: one style, PNG bytes without timestamps, the roofline ceilings.

Why: a page regenerated from the same records must be byte-identical (reviewable diffs, cacheable
screenshots), so the backend is Agg, every rcParam that shapes the output is pinned, the SVG hash
salt is fixed and the PNG carries no Software/date metadata. Colours are fixed per level so a level
reads the same in every plot.
"""

from __future__ import annotations

import io
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402 - the backend is chosen first
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

STYLE: Any = {  # Any: matplotlib types rc_context keys as a Literal of every rc name
    "font.family": "DejaVu Sans",
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 9.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linestyle": "-",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "figure.dpi": 100.0,
    "savefig.dpi": 100.0,
    "figure.facecolor": "white",
    "svg.hashsalt": "stitchcuda-report",
    "path.simplify": True,
    "legend.fontsize": 8.0,
    "legend.frameon": False,
}
LEVEL_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
OURS, EAGER, CEILING = "#76b900", "#555555", "#202020"  # NVIDIA green for our program, grey for eager


def level_colour(level: str, levels: list[str]) -> str:
    return LEVEL_COLOURS[sorted(levels).index(level) % len(LEVEL_COLOURS)] if level in levels else "#333333"


def new_figure(width: float, height: float) -> tuple[Figure, Any]:
    """A figure under the fixed style (applied per figure, so the caller's rcParams are untouched)."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 1, figsize=(width, height))
    return fig, axes


def new_figure_grid(width: float, height: float, columns: int) -> tuple[Figure, Any]:
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, columns, figsize=(width, height), squeeze=False)
    return fig, axes[0]


def png_bytes(fig: Figure, tight: bool = True) -> bytes:
    """The figure as PNG without metadata that changes between runs; the figure is closed.

    tight False: the caller placed the axes itself (a legend outside them defeats tight_layout).
    """
    buffer = io.BytesIO()
    with plt.rc_context(STYLE):
        if tight:
            fig.tight_layout()
        fig.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def message_png(text: str, width: float = 6.0, height: float = 1.2) -> bytes:
    """A small image that says why a plot has nothing to show (a page never has a broken image)."""
    fig, ax = new_figure(width, height)
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, color="#444444")
    return png_bytes(fig)


def draw_ceilings(ax: Axes, bandwidth: float, rates: dict[str, float], x_range: tuple[float, float]) -> None:
    """Nsight Compute's roofline: the memory roof (bandwidth x intensity) up to each compute roof, log-log."""
    low, high = x_range
    xs = [low * (high / low) ** (i / 200) for i in range(201)]
    styles = ("-", "--", ":")
    for (label, rate), style in zip(sorted(rates.items(), key=lambda kv: kv[1]), styles, strict=False):
        ax.plot(xs, [min(bandwidth * x, rate) for x in xs], style, color=CEILING, linewidth=1.2)
        ax.text(high, rate, f" {label} {rate / 1e12:.0f} TFLOP/s", va="center", ha="left", fontsize=7)
    ridge = min(rates.values()) / bandwidth
    ax.text(
        low * 1.3,
        bandwidth * low * 1.6,
        f"DRAM {bandwidth / 1e12:.2f} TB/s",
        rotation=0,
        fontsize=7,
        color=CEILING,
    )
    ax.axvline(ridge, color=CEILING, alpha=0.15, linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved throughput (FLOP/s)")


def intensity_range(values: list[float], ridge: float) -> tuple[float, float]:
    """An x range around every point and the ridge, in whole decades."""
    import math

    points = [v for v in values if v > 0] + [ridge]
    low = 10 ** math.floor(math.log10(min(points)) - 0.5)
    high = 10 ** math.ceil(math.log10(max(points)) + 0.5)
    return low, high
