"""Recorded coder turns -> the two skill datasets (skill1.jsonl, skill2.jsonl).

Reads the OUT/turns.jsonl of every run under the given folders (`nodes.support.turn_log` writes them),
joins each turn with its candidate's outcome, and writes one JSON line per distinct (prompt,
answer) pair:

- skill1.jsonl (write): the problem, its plan, the prompt (chat messages, exactly as the LLM coder
  gets them), the answer, the program and its outcome;
- skill2.jsonl (revise): the same plus the mode (fix or optimize), the previous program, its
  outcome and the verifier's feedback.

Every row of a problem also carries the best verified program found for it in any of the runs
(`reference_program`: passed, not hacked, fastest), or null. Duplicates keep the row whose outcome
says most (a GPU result over a CPU build over none). The files load with
`datasets.load_dataset("json", data_files=...)`; columns have one type each (plans as JSON text).

A dataset grows without its runs: `keep` folders (an earlier dataset's skill files) join the new
turns' rows before deduplication and the reference programs are chosen again over all of them. With
`compress`, the files are written xz-compressed (NAME.jsonl.xz: a row repeats its programs, which xz
finds across rows, so a starter dataset fits in the repository); `datasets` and `read_rows` read both.
"""

from __future__ import annotations

import hashlib
import json
import logging
import lzma
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

TURNS_FILE = "turns.jsonl"
SKILL_FILES = {"write": "skill1.jsonl", "revise": "skill2.jsonl"}
XZ = ".xz"
OUTCOME_KEYS = (
    "status",
    "verdict",
    "build_ok",
    "device",
    "speedup_vs_eager",
    "candidate_ms",
    "eager_ms",
    "operator_coverage",
    "trials",
    "trials_passed",
    "message",
    "findings",
)


class DatasetError(ValueError):
    """No turns to read, or a path that is not a run folder."""


@dataclass
class BuildStats:
    files: list[str] = field(default_factory=list)
    turns: int = 0
    unreadable_lines: int = 0
    duplicates: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    references: int = 0


def find_turn_files(paths: Sequence[str | Path]) -> list[Path]:
    """Every turns.jsonl under the paths (a run folder, a folder of runs, or the file itself)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found.extend(sorted(path.rglob(TURNS_FILE)))
        else:
            raise DatasetError(f"{path}: no such file or folder")
    if not found:
        raise DatasetError(
            f"no {TURNS_FILE} under {', '.join(str(p) for p in paths)} (was the run given --out?)"
        )
    return found


def read_records(path: Path, stats: BuildStats) -> list[dict[str, Any]]:
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            stats.unreadable_lines += 1  # a line cut by a crash: everything before it still counts
            continue
        if isinstance(record, dict) and "type" in record:
            records.append(record)
    return records


def normal_outcome(record: dict[str, Any] | None, turn: dict[str, Any]) -> dict[str, Any]:
    """An outcome with every key present (one column type per key across rows)."""
    if turn.get("error"):
        record = {"status": "policy_error", "message": str(turn["error"])[:2000]}
    elif record is None:
        record = {"status": "not_evaluated"}
    outcome = {key: record.get(key) for key in OUTCOME_KEYS}
    outcome["findings"] = findings_text(record.get("findings"))
    outcome["message"] = outcome["message"] or ""
    return outcome


def findings_text(findings: str | list[dict[str, Any]] | None) -> str:
    """An outcome's findings as JSON text, like `plan` and `feedback`: a list column would be typed
    from the first rows `datasets` reads, and rows with no findings there leave no type for the
    findings of later rows (a dataset that no longer loads). Text stays as it is."""
    if isinstance(findings, str):
        return findings
    return json.dumps(
        [{k: str(f.get(k, "")) for k in ("id", "severity", "evidence")} for f in findings or []]
    )


def outcome_rank(outcome: dict[str, Any]) -> int:
    """How much an outcome tells: a GPU verdict 3, a CPU build 2, an unusable answer 1, nothing 0."""
    status = outcome.get("status")
    if status in (None, "not_evaluated"):
        return 0
    if status == "policy_error":
        return 1
    return 2 if status == "no_gpu" else 3


def verified(outcome: dict[str, Any]) -> bool:
    return outcome.get("status") == "passed" and outcome.get("verdict") != "hacked"


def problem_key(name: str, source: str) -> str:
    return f"{name}:{hashlib.sha256(source.encode()).hexdigest()[:12]}"


def row_id(skill: str, prompt: list[dict[str, str]], answer: str) -> str:
    text = json.dumps([skill, prompt, answer], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _runs(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per run id: its run line, turns and outcomes (the last line per key wins, as after a resume)."""
    runs: dict[str, dict[str, Any]] = {}
    for record in records:
        run = runs.setdefault(str(record.get("run", "run")), {"run": None, "turns": {}, "outcomes": {}})
        kind = record["type"]
        if kind == "run":
            run["run"] = record
        elif kind == "turn":
            run["turns"][record.get("turn")] = record
        elif kind == "outcome":
            run["outcomes"][record.get("candidate")] = record
    return runs


def rows_from_file(path: Path, stats: BuildStats) -> list[dict[str, Any]]:
    """The skill rows of one turns.jsonl (without references, before deduplication)."""
    rows = []
    for run_id, run in _runs(read_records(path, stats)).items():
        head = run["run"]
        if head is None:
            log.warning("%s: run %s has no run line; its turns are skipped", path, run_id)
            continue
        problem = head["problem"]
        outcomes = run["outcomes"]
        for number in sorted(run["turns"], key=lambda n: n or 0):
            turn = run["turns"][number]
            stats.turns += 1
            outcome = normal_outcome(outcomes.get(turn.get("candidate")), turn)
            row: dict[str, Any] = {
                "id": row_id(turn["skill"], turn["messages"], turn["answer"]),
                "skill": turn["skill"],
                "mode": turn["mode"],
                "data_source": "stitchcuda/" + ("skill1" if turn["skill"] == "write" else "skill2"),
                "problem_name": problem["name"],
                "level": problem.get("level") or "",
                "problem_source": problem["source"],
                "plan": json.dumps(head.get("plan") or {}),
                "prompt": turn["messages"],
                "answer": turn["answer"] or "",
                "program": turn.get("program"),
                "outcome": outcome,
                "provenance": {
                    "run": run_id,
                    "run_dir": str(path.parent),
                    "policy": turn.get("policy") or head.get("policy") or "",
                    "turn": int(number or 0),
                    "candidate": turn.get("candidate"),
                    "gpu_arch": head.get("gpu_arch") or "",
                },
            }
            feedback = turn.get("feedback")
            row["feedback"] = json.dumps(feedback) if feedback else ""
            if turn["skill"] == "revise":
                previous = turn.get("previous") or {}
                row["previous_program"] = previous.get("source", "")
                row["previous_outcome"] = normal_outcome(outcomes.get(previous.get("id")), {})
            rows.append(row)
    return rows


def build_rows(
    paths: Sequence[str | Path], keep: Sequence[str | Path] = ()
) -> tuple[dict[str, list[dict[str, Any]]], BuildStats]:
    """Both skills' rows from every run under `paths` and every dataset folder in `keep`:
    deduplicated, with reference programs."""
    stats = BuildStats()
    chosen: dict[str, dict[str, Any]] = {}
    kept_rows = [row for folder in keep for row in dataset_rows(folder)]
    for row in kept_rows:  # datasets written before the findings became text
        for key in ("outcome", "previous_outcome"):
            if isinstance(row.get(key), dict):
                row[key]["findings"] = findings_text(row[key].get("findings"))
    for row in [*kept_rows, *(r for path in find_turn_files(paths) for r in _file_rows(path, stats))]:
        kept = chosen.get(row["id"])
        if kept is None:
            chosen[row["id"]] = row
            continue
        stats.duplicates += 1
        if outcome_rank(row["outcome"]) > outcome_rank(kept["outcome"]):
            chosen[row["id"]] = row
    best: dict[str, tuple[float, str]] = {}
    for row in chosen.values():
        if verified(row["outcome"]) and row["program"]:
            key = problem_key(row["problem_name"], row["problem_source"])
            speed = float(row["outcome"].get("speedup_vs_eager") or 0.0)
            if key not in best or speed > best[key][0]:
                best[key] = (speed, row["program"])
    stats.references = len(best)
    skills: dict[str, list[dict[str, Any]]] = {skill: [] for skill in SKILL_FILES}
    for row in chosen.values():
        reference = best.get(problem_key(row["problem_name"], row["problem_source"]))
        row["reference_program"] = reference[1] if reference else None
        row["reference_speedup"] = reference[0] if reference else None
        skills[row["skill"]].append(row)
    for skill, rows in skills.items():
        rows.sort(
            key=lambda r: (r["level"], r["problem_name"], r["provenance"]["run"], r["provenance"]["turn"])
        )
        stats.rows[skill] = len(rows)
    return skills, stats


def _file_rows(path: Path, stats: BuildStats) -> list[dict[str, Any]]:
    stats.files.append(str(path))
    return rows_from_file(path, stats)


def write_dataset(
    paths: Sequence[str | Path],
    out_dir: str | Path,
    keep: Sequence[str | Path] = (),
    compress: bool = False,
) -> BuildStats:
    """Write OUT/skill1.jsonl, OUT/skill2.jsonl (with `compress`: .jsonl.xz) and OUT/manifest.json
    (counts and sources). The rows of `keep` (dataset folders) are read before anything is written,
    so OUT may be one of them."""
    skills, stats = build_rows(paths, keep)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = {skill: name + (XZ if compress else "") for skill, name in SKILL_FILES.items()}
    for skill, name in SKILL_FILES.items():
        text = "".join(json.dumps(row) + "\n" for row in skills[skill])
        (out / names[skill]).write_bytes(lzma.compress(text.encode()) if compress else text.encode())
        (out / (name if compress else name + XZ)).unlink(missing_ok=True)  # never two versions of a skill
    manifest = {
        "files": stats.files,
        "kept": [str(folder) for folder in keep],
        "turns": stats.turns,
        "rows": {names[k]: v for k, v in stats.rows.items()},
        "duplicates_dropped": stats.duplicates,
        "unreadable_lines": stats.unreadable_lines,
        "problems_with_reference_program": stats.references,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return stats


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of one skill file (JSON lines, plain or xz-compressed by its .xz name)."""
    path = Path(path)
    data = path.read_bytes()
    text = (lzma.decompress(data) if path.name.endswith(XZ) else data).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def skill_file(folder: str | Path, name: str) -> Path | None:
    """A dataset folder's file for one skill (`name` as in SKILL_FILES), plain or .xz; None if absent."""
    for candidate in (Path(folder) / name, Path(folder) / (name + XZ)):
        if candidate.is_file():
            return candidate
    return None


def dataset_rows(folder: str | Path) -> list[dict[str, Any]]:
    """Every row of a dataset folder's skill files."""
    files = [f for f in (skill_file(folder, name) for name in SKILL_FILES.values()) if f is not None]
    if not files:
        raise DatasetError(f"{folder}: no {' or '.join(SKILL_FILES.values())} (plain or {XZ}) to keep")
    return [row for path in files for row in read_rows(path)]
