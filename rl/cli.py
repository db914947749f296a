"""`stitchcuda rl dataset | score | train | plot | verl-data`: RL for the coder from the command line.

The StitchCUDA CLI calls `add_rl_commands(subparsers)`; nothing heavy is imported until a command
runs, and only `train`, `plot` and `verl-data` need the `rl` extra (trl, peft, transformers,
matplotlib, pyarrow); without it they refuse with exit code 2 and say why.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_BAD_INPUT = 2


def _fail(message: str) -> int:
    print(f"stitchcuda rl: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def cmd_dataset(args: argparse.Namespace) -> int:
    from rl.dataset import DatasetError, write_dataset

    try:
        stats = write_dataset(args.runs, args.out, keep=args.keep or (), compress=args.xz)
    except DatasetError as exc:
        return _fail(str(exc))
    rows = ", ".join(f"{n} {skill} rows" for skill, n in stats.rows.items())
    print(
        f"{rows} from {stats.turns} turns in {len(stats.files)} run file(s) "
        f"({stats.duplicates} duplicates dropped, {stats.references} problem(s) with a verified "
        f"reference program) -> {args.out}"
    )
    return 0


def _settings(args: argparse.Namespace) -> object:
    from rl.reward import RewardSettings, RuleSettings
    from rl.reward.judge import Judge

    rule = RuleSettings(mode=args.rule, timeout_s=args.timeout, perf_trials=args.perf_trials, arch=args.arch)
    return RewardSettings(rule=rule, judge=Judge() if args.judge else None)


def cmd_score(args: argparse.Namespace) -> int:
    from rl.reward import make_sample, score
    from tools.problem import ProblemError

    texts = {}
    for label, path in (("completion", args.completion), ("previous", args.previous)):
        if path is None:
            continue
        try:
            texts[label] = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return _fail(f"{label} {path}: cannot be read ({exc})")
    try:
        plan = Path(args.plan).read_text() if args.plan else None
        feedback = Path(args.feedback).read_text() if args.feedback else None
        sample = make_sample(
            args.problem,
            texts["completion"],
            args.skill,
            plan=plan,
            previous=texts.get("previous"),
            feedback=feedback,
            mode=args.mode or "write",
        )
    except (ProblemError, OSError, ValueError) as exc:
        return _fail(str(exc))
    result = score(sample, _settings(args))  # type: ignore[arg-type]
    print(json.dumps(result.to_dict(), indent=2))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    try:
        from rl.trl_train import TrainConfigError, require_extra, train

        require_extra()
    except ImportError as exc:
        return _fail(f"training needs the rl extra (pip install -e '.[rl]'): {exc}")
    try:
        summary = train(args.config, max_steps=args.max_steps, output_dir=args.output_dir)
    except TrainConfigError as exc:
        return _fail(str(exc))
    print(json.dumps(summary, indent=2))
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from rl.plot import plot_rewards

    try:
        path = plot_rewards(args.run, args.out, metrics=args.metric)
    except ImportError as exc:  # matplotlib is imported when the plot is drawn
        return _fail(f"plotting needs the rl extra (matplotlib): {exc}")
    except (OSError, ValueError) as exc:
        return _fail(str(exc))
    print(path)
    return 0


def cmd_verl_data(args: argparse.Namespace) -> int:
    from rl.verl_reward import VerlDataError, write_verl_parquet

    try:
        written = write_verl_parquet(args.dataset, args.out)
    except ImportError as exc:
        return _fail(f"verl parquet needs the rl extra (pyarrow; pip install -e '.[rl]'): {exc}")
    except (VerlDataError, OSError) as exc:
        return _fail(str(exc))
    for path, count in written.items():
        print(f"{count} rows -> {path}")
    return 0


def _add_reward_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rule",
        default="auto",
        choices=["auto", "gpu", "build", "static"],
        help="rule part: auto (gpu with a CUDA device, else build), gpu, build (CPU), static (no build)",
    )
    p.add_argument("--judge", action="store_true", help="score the rubric with the judge role's model")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per worker evaluation")
    p.add_argument("--perf-trials", type=int, default=30, help="timed calls per evaluation (GPU)")
    p.add_argument(
        "--arch", default=None, help="CUDA architecture to build for (default: the GPU's, else sm_90)"
    )


def add_rl_commands(sub: argparse._SubParsersAction) -> None:
    rl = sub.add_parser("rl", help="RL for the coder: skill datasets, the reward, GRPO training")
    rl_sub = rl.add_subparsers(dest="rl_command", required=True)

    p = rl_sub.add_parser("dataset", help="recorded coder turns -> DIR/skill1.jsonl and DIR/skill2.jsonl")
    p.add_argument("runs", nargs="+", help="run folders (with turns.jsonl), or folders holding runs")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument(
        "--keep",
        action="append",
        metavar="DATASET",
        help="an earlier dataset folder whose rows join (repeatable)",
    )
    p.add_argument("--xz", action="store_true", help="write skill1.jsonl.xz / skill2.jsonl.xz")
    p.set_defaults(func=cmd_dataset)

    p = rl_sub.add_parser(
        "score",
        help="the reward of one answer as JSON (total, rule, rubric, hacked, evidence)",
        description="Score one completion with the reward core. Without --plan, the offline planner's "
        "plan for the problem is used. On a CPU-only machine the rule part comes from the build and "
        "the static checks (the JSON says so).",
    )
    p.add_argument("--problem", required=True, help="the KernelBench-format problem file")
    p.add_argument("--completion", required=True, help="file holding the model's answer (prose + program)")
    p.add_argument(
        "--skill", required=True, choices=["write", "revise"], help="skill 1 (write) or 2 (revise)"
    )
    p.add_argument("--previous", help="revise: the previous program")
    p.add_argument("--feedback", help="revise: the verifier's feedback (Feedback JSON)")
    p.add_argument(
        "--mode", choices=["fix", "optimize"], help="revise: fix or optimize (default: from feedback)"
    )
    p.add_argument("--plan", help="the plan (Plan JSON; default: the offline planner's)")
    _add_reward_options(p)
    p.set_defaults(func=cmd_score)

    p = rl_sub.add_parser("train", help="GRPO with LoRA on TRL, rewarded by the reward core")
    p.add_argument("--config", required=True, help="training config (YAML), e.g. rl/configs/smoke.yaml")
    p.add_argument("--max-steps", type=int, default=None, help="override grpo.max_steps")
    p.add_argument("--output-dir", default=None, help="override output_dir")
    p.set_defaults(func=cmd_train)

    p = rl_sub.add_parser("plot", help="plot reward components of a training run (PNG)")
    p.add_argument("run", help="the training output_dir (holds metrics.jsonl)")
    p.add_argument("--out", default=None, help="PNG path (default: RUN/rewards.png)")
    p.add_argument("--metric", action="append", default=None, help="metric to plot (repeatable)")
    p.set_defaults(func=cmd_plot)

    p = rl_sub.add_parser(
        "verl-data", help="skill datasets -> verl parquet (data_source, prompt, reward_model)"
    )
    p.add_argument("dataset", help="folder with skill1.jsonl / skill2.jsonl")
    p.add_argument("--out", required=True, help="output folder for skill1.parquet / skill2.parquet")
    p.set_defaults(func=cmd_verl_data)
