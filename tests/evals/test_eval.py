"""`stitchcuda eval`: the results store, resume after a kill, baselines in the records, summary by hand.

The suite run uses the real CLI, graph, worker and baseline processes on the CPU; only the policy is
scripted (tests/support/scripted_policy.py), installed by a small wrapper that stands in for
`python -m graph.cli` in each problem's process (the eval's hidden --run-command).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO
from support.eval_suite import RUN_ARGS, TESTS, WRAPPER, make_suite

from evals import runner
from evals.breakdown import STEPS

# ----------------------------------------------------------------------------------------------
# The store and the record
# ----------------------------------------------------------------------------------------------


def test_a_torn_last_line_is_skipped_and_the_next_record_survives(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    runner.append_record(path, {"problem": "level1/1_a", "status": "verified"})
    with path.open("a") as fh:
        fh.write('{"problem": "level1/2_b", "sta')  # the process died mid-write
    assert [r["problem"] for r in runner.read_results(path)] == ["level1/1_a"]
    runner.append_record(path, {"problem": "level1/2_b", "status": "failed"})
    assert [r["problem"] for r in runner.read_results(path)] == ["level1/1_a", "level1/2_b"]
    runner.append_record(path, {"problem": "level1/2_b", "status": "verified"})  # a rerun replaces
    assert runner.read_results(path)[-1]["status"] == "verified" and len(runner.read_results(path)) == 2


def test_thread_ids_are_stable_and_distinct() -> None:
    first = runner.thread_id("level1/1_ReLU")
    assert first == runner.thread_id("level1/1_ReLU") and first.startswith("eval-level1-1-ReLU-")
    assert first != runner.thread_id("level2/1_ReLU")


def test_baseline_config_follows_the_run_arguments() -> None:
    config = runner.baseline_config(None, "eager,default", 60.0, ["--device", "cpu", "--perf-trials=7"])
    assert not config.enabled  # auto: only for CUDA runs with a GPU
    assert config.device == "cpu" and config.perf_trials == 7 and config.modes == ("eager", "default")
    assert runner.baseline_config(True, "eager", 60.0, []).enabled
    with pytest.raises(ValueError, match="unknown baseline mode"):
        runner.baseline_config(True, "eager,inductor", 60.0, [])


def test_speedups_are_side_by_side_ratios_where_there_are_some() -> None:
    measured = {
        "status": "passed",
        "baselines": {
            "eager": {"mean_ms": 3.0, "median_ms": 2.9},
            "default": {"mean_ms": 2.0, "eager_side_by_side_ms": 4.0},
            "reduce-overhead": {"error": "X"},
        },
    }
    record = {
        "candidate_ms": 1.0,
        "verifier_speedup_vs_eager": 2.5,
        "verifier_eager_ms": 2.4,
        "verifier_eager_median_ms": 2.32,
    }
    runner.add_speedups(record, measured)
    assert record["speedup_source"] == "side_by_side" and record["best_compile_mode"] == "default"
    assert record["speedup_vs_eager"] == 2.5  # the verifier's interleaved ratio, not 3.0 / 1.0
    assert record["speedup_vs_compile"] == pytest.approx(2.5 * 2.0 / 4.0)  # chained through eager
    assert record["eager_agreement"] == pytest.approx(3.0 / 2.4, abs=1e-4)
    assert record["eager_agreement_median"] == pytest.approx(2.9 / 2.32, abs=1e-4)
    assert record["baselines"] == {"eager": 3.0, "default": 2.0, "reduce-overhead": None}
    assert record["baseline_errors"] == {"reduce-overhead": "X"}
    untimed_eager = {"candidate_ms": 1.0}
    runner.add_speedups(untimed_eager, measured)  # the verifier did not time eager: the baselines do
    assert untimed_eager["speedup_source"] == "baselines" and untimed_eager[
        "speedup_vs_eager"
    ] == pytest.approx(3.0)
    assert untimed_eager["speedup_vs_compile"] == pytest.approx(2.0)
    same_rounds = {
        "candidate_ms": 2.0,
        "verifier_speedup_vs_eager": 2.5,
        "verifier_compile_ms": {"default": 3.0},
    }
    runner.add_speedups(same_rounds, measured)  # compile timed in the candidate's own rounds wins
    assert same_rounds["speedup_vs_compile"] == pytest.approx(1.5) and same_rounds["best_compile_ms"] == 3.0
    plain = {"candidate_ms": 1.0, "verifier_speedup_vs_eager": 2.5}
    runner.add_speedups(plain, None)
    assert plain["speedup_vs_eager"] == 2.5 and plain["speedup_source"] == "side_by_side"
    assert plain["speedup_vs_compile"] is None


@pytest.mark.parametrize(
    "argv",
    [
        ["SUITE", "--out", "OUT", "--no-baselines", "--", "--device", "cpu"],
        ["--out", "OUT", "--no-baselines", "SUITE", "--", "--device", "cpu"],
        ["SUITE", "--", "--device", "cpu", "--out", "OUT", "--no-baselines"],
    ],
)
def test_eval_options_may_follow_the_suites(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from graph.cli import main

    suite, out = make_suite(tmp_path / "suite"), tmp_path / "out"
    seen: dict = {}

    def fake_run_suite(problems, out_dir, run_args, **kwargs):  # noqa: ANN001, ANN202
        seen.update(problems=[p.key for p in problems], out=out_dir, run_args=list(run_args), **kwargs)
        return []

    monkeypatch.setattr(runner, "run_suite", fake_run_suite)
    monkeypatch.chdir(tmp_path)  # the default --out lands here
    args = [str(suite) if a == "SUITE" else str(out) if a == "OUT" else a for a in argv]
    if args[-1] == "--no-baselines":  # the third form: eval options after `--` belong to `run`
        assert main(["eval", *args]) == 0
        assert seen["run_args"] == ["--device", "cpu", "--out", str(out), "--no-baselines"]
        assert seen["out"] == Path("stitchcuda-eval")
        return
    assert main(["eval", *args]) == 0
    assert seen["out"] == out and seen["run_args"] == ["--device", "cpu"]
    assert seen["baseline"].enabled is False and len(seen["problems"]) == 3
    assert (out / "summary.json").exists() and "correct 0% of 3" in capsys.readouterr().out


# A stand-in for `stitchcuda run` (it starts in the repository, as every run does): writes a
# verified report where --out says, and logs that path, so the test sees where the run wrote.
REPORTING_RUN = """
import json, os, sys
from pathlib import Path
argv = sys.argv[1:]
out = Path(argv[argv.index("--out") + 1])
with open(os.environ["STITCHCUDA_TEST_OUT_LOG"], "a") as fh:
    fh.write(json.dumps({"cwd": os.getcwd(), "out": str(out)}) + "\\n")
out.mkdir(parents=True, exist_ok=True)
(out / "report.json").write_text(json.dumps({"status": "verified", "iterations": 1, "attempts": []}))
"""


def test_a_relative_out_from_another_folder_is_written_and_read_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from outside the repository with a relative --out: the runs write under that folder (not
    under the repository, where each run's process starts) and the records are read from there."""
    from graph.cli import main

    suite = make_suite(tmp_path / "suite")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    log = tmp_path / "outs.jsonl"
    monkeypatch.setenv("STITCHCUDA_TEST_OUT_LOG", str(log))
    monkeypatch.chdir(elsewhere)
    name = f"relative-out-{os.getpid()}"
    command = json.dumps([sys.executable, "-c", REPORTING_RUN])
    argv = ["eval", str(suite), "--out", name, "--no-baselines", "--run-command", command]
    try:
        assert main([*argv, "--", "--device", "cpu"]) == 0
        assert not (REPO / name).exists(), "the runs wrote under the repository"
    finally:
        shutil.rmtree(REPO / name, ignore_errors=True)  # the bug's litter, if any
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(runs) == 3 and {run["cwd"] for run in runs} == {str(REPO)}
    assert all(Path(run["out"]).is_relative_to(elsewhere / name / "runs") for run in runs), runs
    records = runner.read_results(elsewhere / name / "results.jsonl")
    assert sorted(r["status"] for r in records) == ["verified"] * 3  # each report found and read
    assert json.loads((elsewhere / name / "summary.json").read_text())["all"]["correctness_rate"] == 1.0


# ----------------------------------------------------------------------------------------------
# A whole eval, killed and resumed
# ----------------------------------------------------------------------------------------------


def eval_command(suite: Path, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "graph.cli", "eval", str(suite), "--out", str(out), "--policy", "scripted",
        "--baselines", "--baseline-modes", "eager", "--run-command", json.dumps([sys.executable, "-c", WRAPPER]),
        "--", *RUN_ARGS,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def killed_then_resumed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Start an eval, kill its whole process group after the first record, then run it again."""
    root = tmp_path_factory.mktemp("eval")
    suite, out = make_suite(root / "suite"), root / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        eval_command(suite, out), cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    results = out / "results.jsonl"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if results.exists() and results.read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    finished_early = proc.poll() is not None
    os.killpg(proc.pid, signal.SIGKILL)  # the eval and the problem run in flight die together
    proc.communicate()
    before = runner.read_results(results)
    again = subprocess.run(
        eval_command(suite, out), cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )
    return {"out": out, "before": before, "finished_early": finished_early, "again": again}


@pytest.mark.slow
def test_resume_after_a_kill_runs_only_what_is_missing(killed_then_resumed: dict) -> None:
    run = killed_then_resumed
    assert not run["finished_early"], "the first eval finished before it could be killed"
    assert [r["problem"] for r in run["before"]] == ["level1/1_ScaleRelu"]
    again = run["again"]
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming: 1 of 3 problems already recorded" in again.stderr
    lines = (run["out"] / "results.jsonl").read_text().splitlines()
    problems = [json.loads(line)["problem"] for line in lines]
    assert problems[0] == "level1/1_ScaleRelu" and sorted(problems) == sorted(set(problems))
    assert len(problems) == 3
    assert json.loads(lines[0]) == run["before"][0]  # the first record was kept, not redone


@pytest.mark.slow
def test_records_carry_status_verdict_and_baselines(killed_then_resumed: dict) -> None:
    records = {r["problem"]: r for r in runner.read_results(killed_then_resumed["out"] / "results.jsonl")}
    ok = records["level1/1_ScaleRelu"]
    assert ok["status"] == "verified" and ok["built"] and ok["verdict"] == "suspicious"  # PyTorch ops only
    assert ok["baseline_status"] == "passed" and ok["baselines"]["eager"] > 0
    assert ok["speedup_source"] == "side_by_side"
    assert ok["speedup_vs_eager"] == ok["verifier_speedup_vs_eager"]
    assert ok["eager_agreement"] == pytest.approx(ok["baseline_eager_ms"] / ok["verifier_eager_ms"], abs=1e-4)
    assert ok["executor"] == "local" and ok["node"]
    steps = ok["breakdown"]
    assert (
        set(steps) == set(STEPS) and min(steps.values()) >= 0
    )  # the scripted policy neither traces nor builds
    assert steps["baselines_s"] > 0 and steps["profile_s"] > 0 and steps["other_s"] > 0
    assert sum(steps.values()) == pytest.approx(ok["seconds"], abs=0.2)
    assert ok["speedup_vs_compile"] is None  # only eager was asked for
    broken = records["level1/2_ScaleReluBroken"]
    assert broken["status"] == "failed" and broken["built"] is False
    # each round says what the worker answered, so a failure reads from the record alone
    assert broken["attempts"] and all(a["status"] == "build_error" for a in broken["attempts"])
    assert all(a["message"] and len(a["message"]) <= runner.ATTEMPT_TEXT_CHARS for a in broken["attempts"])
    assert [a["status"] for a in ok["attempts"]][-1] == "passed"
    hacked = records["level2/1_ScaleReluFallback"]
    assert hacked["verdict"] == "hacked" and hacked["verdict_source"] in ("static", "report")


@pytest.mark.slow
def test_summary_numbers_by_hand(killed_then_resumed: dict) -> None:
    out = killed_then_resumed["out"]
    summary = json.loads((out / "summary.json").read_text())
    level1, level2, overall = summary["levels"]["level1"], summary["levels"]["level2"], summary["all"]
    records = runner.read_results(out / "results.jsonl")
    # level1: 2 problems, one verified (built), one never built; the broken program returns its input
    # without calling its extension, which the hack checker may flag.
    hacked1 = sum(1 for r in records if r["level"] == "level1" and r.get("verdict") == "hacked")
    assert (level1["problems"], level1["compiled"], level1["correct"], level1["hacked"]) == (2, 1, 1, hacked1)
    assert level1["compile_rate"] == 0.5 and level1["correctness_rate"] == 0.5
    assert level1["vs_eager"]["fast_p"]["0"] == 0.5 and level1["vs_eager"]["timed"] == 1
    assert level1["vs_compile"]["fast_p"]["0"] is None  # no compile baseline was measured
    # level2: its one program built but is hacked: not correct.
    assert (level2["compile_rate"], level2["correctness_rate"], level2["hacking_rate"]) == (1.0, 0.0, 1.0)
    assert overall["problems"] == 3
    assert overall["compile_rate"] == pytest.approx(2 / 3)
    assert overall["correctness_rate"] == pytest.approx(1 / 3)
    assert overall["hacking_rate"] == pytest.approx((hacked1 + 1) / 3)
    verified = next(r for r in records if r["problem"] == "level1/1_ScaleRelu")
    assert overall["vs_eager"]["geomean_speedup"] == pytest.approx(verified["speedup_vs_eager"])
    table = (out / "table.md").read_text()
    assert f"| level1 | 2 | 50% | 50% | {hacked1 / 2:.0%} | eager |" in table
    # it passes its trials, but the hack checks reject it: the graph never reports it as verified
    assert "| level2/1_ScaleReluFallback | failed | hacked |" in table
    stdout = killed_then_resumed["again"].stdout
    assert f"| all | 3 | 67% | 33% | {(hacked1 + 1) / 3:.0%} | eager |" in stdout
    assert "correct 33% of 3" in stdout


@pytest.mark.slow
def test_the_eval_ends_with_its_page_and_logs_plain_progress(killed_then_resumed: dict) -> None:
    out, again = killed_then_resumed["out"], killed_then_resumed["again"]
    page = out / "report.html"
    assert f"report: {page}" in again.stdout
    text = page.read_text()
    assert text.count('src="data:image/png;base64,') == 4
    assert 'href="runs/level1/1_ScaleRelu/report.html"' in text  # each run's twin, drawn by finalize
    assert (out / "runs" / "level1" / "1_ScaleRelu" / "report.html").exists()
    # stderr is a pipe here: plain lines, no bar (2 problems were left after the resume)
    assert "started level1/" in again.stderr and "[3/3] " in again.stderr and "in flight" in again.stderr
    assert "\x1b[" not in again.stderr
    record = next(
        r for r in runner.read_results(out / "results.jsonl") if r["problem"] == "level1/1_ScaleRelu"
    )
    # the run's plan figures travel with the record (the scripted policy's plan counts no work)
    plan = json.loads((out / "runs" / "level1" / "1_ScaleRelu" / "report.json").read_text())["plan"]
    assert (record["work_flops"], record["work_bytes"]) == (plan["total_flops"], plan["total_bytes"])


@pytest.mark.slow
def test_stability_script_times_each_problem_twice_on_cpu(tmp_path: Path) -> None:
    suite = make_suite(tmp_path / "suite")
    solutions = tmp_path / "solutions" / "level1"
    solutions.mkdir(parents=True)
    sys.path.insert(0, str(TESTS))
    from support.scripted_policy import OPTIMIZED

    (solutions / "1_ScaleRelu.py").write_text(OPTIMIZED)
    done = subprocess.run(
        [sys.executable, "-m", "evals.benchmarks.stability", str(tmp_path / "out"), "--suite", str(suite),
         "--device", "cpu", "--perf-trials", "5", "--solutions", str(tmp_path / "solutions")],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "stability.json").read_text())
    rows = {r["problem"]: r for r in report["rows"]}
    assert len(rows) == 3 and all(
        len(r["passes"]) == 2 and r["eager_diff"] is not None for r in rows.values()
    )
    assert rows["level1/1_ScaleRelu"]["solution_diff"] is not None
    assert rows["level1/2_ScaleReluBroken"]["solution_diff"] is None  # no solution given for it
    assert done.stdout.splitlines()[1].startswith("| problem | eager ms (1) | eager ms (2) |")
    assert "median relative difference" in done.stdout
