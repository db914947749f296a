"""Reward components of a training run over its steps, as a PNG (matplotlib, no display needed)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

DEFAULT_METRICS = ("reward", "stitchcuda/skill_compliance", "stitchcuda/total", "stitchcuda/rubric")
WINDOW = 5  # steps in the moving average drawn over each curve


def read_metrics(run_dir: str | Path) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.is_file():
        raise OSError(f"{path}: no metrics (is {run_dir} a training output_dir?)")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by_step = {r["step"]: r for r in rows if "reward" in r}  # a resumed run may log a step again
    return [by_step[s] for s in sorted(by_step)]


def moving_average(values: Sequence[float], window: int = WINDOW) -> list[float]:
    out = []
    for i in range(len(values)):
        part = values[max(0, i - window + 1) : i + 1]
        out.append(sum(part) / len(part))
    return out


def plot_rewards(
    run_dir: str | Path, out: str | Path | None = None, metrics: Sequence[str] | None = None
) -> Path:
    """Write the plot (default RUN/rewards.png) and return its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(run_dir)
    if not rows:
        raise ValueError(f"{run_dir}: no logged steps yet")
    names = [m for m in (metrics or DEFAULT_METRICS) if any(m in r for r in rows)]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    for name in names:
        steps = [r["step"] for r in rows if name in r]
        values = [float(r[name]) for r in rows if name in r]
        (line,) = ax.plot(steps, values, alpha=0.35, linewidth=1)
        ax.plot(
            steps,
            moving_average(values),
            color=line.get_color(),
            linewidth=2,
            label=f"{name} ({WINDOW}-step mean)",
        )
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("mean over the step's completions")
    ax.set_title(f"{Path(run_dir).name}: reward components")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    target = Path(out) if out else Path(run_dir) / "rewards.png"
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(target)
    plt.close(fig)
    return target
