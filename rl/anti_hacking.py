"""The reward of every honest and adversarial candidate: is every cheat at or below 0, every honest
program above every cheat of the same problem?

    python -m rl.anti_hacking tests/candidates --rule gpu --out OUT   # on a GPU: the full table
    python -m rl.anti_hacking tests/candidates --rule static          # anywhere: the static part

Each candidate file declares its problem (`# harness-expect: problem=NAME`, a file in
`adversarial/problems/`); each is scored as a skill-1 answer (a Summary line and the program in one
fenced block) with the offline planner's plan. A candidate that shares an extension with others
names it in a `# harness-base: PATH` line; the program scored is the file with that line replaced by
PATH's text, exactly the program the test harness runs (tests/support/candidates.py). Writes OUT/anti_hacking.json and OUT/anti_hacking.md
and exits 1 when a check fails. On the static or build path the cheats that only a run can catch
(outputs never written, inputs overwritten, nondeterminism) cannot be told from honest programs;
the table marks them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rl.candidate_files import candidate_source, expectation
from rl.reward import RewardSettings, RuleSettings, make_sample
from rl.reward.batch import RewardService
from rl.reward.sample import Breakdown

KINDS = ("honest", "adversarial")


def candidates(root: Path) -> list[tuple[str, Path, Path]]:
    """(kind, candidate, problem) for every declared candidate under root/{honest,adversarial}."""
    found = []
    for kind in KINDS:
        for path in sorted((root / kind).glob("*.py")):
            problem = expectation(path).get("problem")
            if problem:
                found.append((kind, path, root / "adversarial" / "problems" / f"{problem}.py"))
    if not found:
        raise FileNotFoundError(f"no candidates with a harness-expect line under {root}")
    return found


def as_answer(program: str) -> str:
    return f"Summary: candidate program\n\n```python\n{program.rstrip()}\n```\n"


def score_all(root: Path, settings: RewardSettings, workers: int) -> list[dict[str, Any]]:
    listed = candidates(root)
    plans: dict[Path, Any] = {}
    samples = []
    for _, path, problem in listed:
        sample = make_sample(
            str(problem), as_answer(candidate_source(path)), "write", plan=plans.get(problem)
        )
        plans.setdefault(problem, sample.plan)
        samples.append(sample)
    service = RewardService(settings, workers=workers)
    try:
        results: list[Breakdown] = service.score_many(samples)
    finally:
        service.close()
    return [
        {
            "kind": kind,
            "candidate": path.stem,
            "problem": problem.stem,
            "static_expectation": expectation(path).get("static", ""),
            **result.to_dict(),
        }
        for (kind, path, problem), result in zip(listed, results, strict=True)
    ]


def left_to_a_run(rows: Sequence[dict[str, Any]], path: str) -> list[str]:
    """Cheats this path cannot judge: on a path that runs nothing (static, cpu build), those whose
    harness expectation says the static checks see nothing (`static=clean`); a GPU run judges all."""
    if path == "gpu":
        return []
    return sorted(
        r["candidate"] for r in rows if r["kind"] == "adversarial" and r.get("static_expectation") == "clean"
    )


def check(rows: Sequence[dict[str, Any]], path: str = "gpu") -> list[str]:
    """Failures of the two rules: cheats at most 0; honest above every cheat of its problem.

    Cheats the path cannot judge (`left_to_a_run`) are left out of both rules."""
    unjudged = set(left_to_a_run(rows, path))
    cheats = [r for r in rows if r["kind"] == "adversarial" and r["candidate"] not in unjudged]
    failures = [f"cheat {r['candidate']} earns {r['total']:+.3f} (> 0)" for r in cheats if r["total"] > 0]
    for honest in (r for r in rows if r["kind"] == "honest"):
        for cheat in (r for r in cheats if r["problem"] == honest["problem"]):
            if honest["total"] <= cheat["total"]:
                failures.append(
                    f"honest {honest['candidate']} ({honest['total']:+.3f}) is not above cheat "
                    f"{cheat['candidate']} ({cheat['total']:+.3f}) on {honest['problem']}"
                )
    return failures


def markdown(rows: Sequence[dict[str, Any]], path: str) -> str:
    lines = [
        f"Rule path: {path}.",
        "",
        "| candidate | kind | problem | harness static | total | rule | hacked | anti-hacking | coverage "
        "| what decided it |",
        "|---|---|---|---|---:|---|---|---:|---:|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["kind"] != "honest", r["problem"], r["candidate"])):
        reason = r["rubric"]["anti_hacking"]["reason"]
        why = (
            reason.removeprefix("hacked: ")
            if r["hacked"]
            else f"{r['rule']['stage']}: {r['rule']['note'][:60]}"
        )
        lines.append(
            f"| {r['candidate']} | {r['kind']} | {r['problem']} | {r.get('static_expectation', '')} | "
            f"{r['total']:+.3f} | {r['rule']['stage']} | "
            f"{'yes' if r['hacked'] else 'no'} | {r['rubric']['anti_hacking']['score']:.2f} | "
            f"{r['rubric']['operator_coverage']['score']:.2f} | {why} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.anti_hacking", description=__doc__.split("\n")[0])
    parser.add_argument("root", help="the candidates folder (tests/candidates)")
    parser.add_argument("--rule", default="auto", choices=["auto", "gpu", "build", "static"])
    parser.add_argument("--out", default=None, help="folder for anti_hacking.json and anti_hacking.md")
    parser.add_argument("--workers", type=int, default=4, help="evaluations at once")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per evaluation")
    args = parser.parse_args(argv)
    rule = RuleSettings(mode=args.rule, timeout_s=args.timeout)
    path = rule.resolved_mode()
    rows = score_all(Path(args.root), RewardSettings(rule=rule), args.workers)
    failures = check(rows, path)
    unjudged = left_to_a_run(rows, path)
    table = markdown(rows, path)
    verdict = "\n".join(failures) or "every cheat <= 0 and every honest program above every cheat"
    if unjudged:
        verdict += (
            f"\n{len(unjudged)} cheat(s) left to a GPU run (the static checks see nothing in them by "
            f"construction): {', '.join(unjudged)}"
        )
        table += "\n" + verdict.splitlines()[-1] + "\n"
    print(table)
    print(verdict)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "anti_hacking.json").write_text(
            json.dumps(
                {"path": path, "rows": rows, "failures": failures, "left_to_a_run": unjudged}, indent=1
            )
        )
        (out / "anti_hacking.md").write_text(table)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
