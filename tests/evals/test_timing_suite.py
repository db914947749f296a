"""evals/device/timing_suite.sh dry-run on the CPU: two slices of an eval over three suite problems
(ONLY), with a stand-in run command (the eval's hidden --run-command) and no install, as two device
calls on two fresh machines would run them, the state carried between them as the CPU side carries it.

- slice 1: two problems finish; the third is still running when the slice's time is up. Its run
  leaves a sandbox-like process in a session of its own that ignores SIGTERM: it is killed with the
  rest. The state comes back as one file (state.tgz) holding the results, the cut problem's run
  folder, the caches (the build cache's entries without object files) and the exact command.
- slice 2, on a "fresh machine" (no work folder, no caches): the state is restored, the cut problem
  resumes from its carried run folder (the stand-in's checkpoint), the other two do not run again,
  and the script prints "complete" (the total counts ONLY's problems, not the whole suite).

And the slice runner alone: a command that ends by itself leaves no process behind either.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from conftest import REPO

from evals.device import timing_slice

SCRIPT = REPO / "evals" / "device" / "timing_suite.sh"
ONLY = "level1/(1|2|3)_"

# The run of one problem: logs its start; 2_GELU, on its first run, writes a checkpoint into its run
# folder, starts a process of its own session that ignores SIGTERM (as a sandboxed worker would) and
# never ends; with the checkpoint carried back, it notes the resume and finishes.
FAKE_RUN = """
import json, os, signal, subprocess, sys, time
from pathlib import Path
scratch = Path({scratch!r})
argv = sys.argv[1:]
problem = Path(next(a for a in argv if a.endswith(".py"))).stem
out = Path(argv[argv.index("--out") + 1])
with (scratch / "runs.log").open("a") as fh:
    fh.write(problem + "\\n")
out.mkdir(parents=True, exist_ok=True)
if problem == "2_GELU":
    checkpoint = out / "checkpoints.sqlite"
    if not checkpoint.exists():
        checkpoint.write_text("planned")
        code = ("import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "open({pidfile!r}, 'w').write(str(os.getpid())); time.sleep(1000)  # stitchcuda-test-orphan")
        subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
        time.sleep(1000)
    (scratch / "resumed-from").write_text(checkpoint.read_text())
(out / "report.json").write_text(json.dumps({{"status": "verified", "iterations": 1, "attempts": []}}))
(out / "turns.jsonl").write_text(json.dumps({{"run": problem, "turn": 1}}) + "\\n")
"""


def _alive(pid: int) -> bool:
    try:
        return "stitchcuda-test-orphan" in Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return False


def _slice(
    tmp_path: Path, state: Path, out: Path, scratch: Path, name: str = "a", **settings: str
) -> subprocess.CompletedProcess[str]:
    out.mkdir()
    command = [
        sys.executable,
        "-c",
        FAKE_RUN.format(scratch=str(scratch), pidfile=str(scratch / "orphan.pid")),
    ]
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "OUT": str(out),
        "SKIP_INSTALL": "1",
        "STATE": str(state),
        "SNAPSHOT": str(tmp_path / "snapshot"),  # none: never the repository's committed one
        "WORK_ROOT": str(tmp_path / "machine" / "work"),
        "STITCHCUDA_CACHE": str(tmp_path / "machine" / "cache"),
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "machine" / "inductor"),
        "ONLY": ONLY,
        "RUN_COMMAND": json.dumps(command),
        "SLICE_BUDGET": "80",
        "RESERVE": "20",
        **settings,
    }
    return subprocess.run(
        ["bash", str(SCRIPT), name, "3", "--device", "cpu"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _fresh_machine(tmp_path: Path) -> None:
    subprocess.run(["rm", "-rf", str(tmp_path / "machine")], check=True)


@pytest.mark.slow
def test_two_slices_on_two_fresh_machines_finish_the_eval(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    device_state = tmp_path / "device-state"  # what the call carried (empty on the first)
    entry = tmp_path / "machine" / "cache" / "0123456789abcdef"  # a finished build-cache entry
    entry.mkdir(parents=True)
    (entry / "stitch_build.json").write_text("{}")
    (entry / "ext_0123.so").write_bytes(b"\0" * 1000)
    (entry / "main.o").write_bytes(b"\0" * 1000)
    (entry.parent / "cudnn-algos.tsv").write_text("v3|H100|sm90|cudnn91000|0|2\t1\t0\t0\n")  # conv choices
    (tmp_path / "machine" / "inductor" / "fxgraph").mkdir(parents=True)
    (tmp_path / "machine" / "inductor" / "fxgraph" / "entry").write_text("compiled")

    first = _slice(tmp_path, device_state, tmp_path / "out1", scratch)
    assert first.returncode == 0, first.stderr
    log = first.stdout
    assert "exit 124" in log and "a: 2 of 3 problems recorded" in log and "complete" not in log, log
    pid = int((scratch / "orphan.pid").read_text())
    assert not _alive(pid), "a process of the slice outlived it"
    assert "process(es) of the slice killed at its end" in (tmp_path / "out1" / "a.eval.log").read_text()
    calls = int(log.rsplit("call: ", 1)[1].split()[0])
    assert calls <= 80 + 10, log  # the call ends near its budget (stopping the eval takes up to 10 s)
    assert sorted(p.name for p in (tmp_path / "out1").iterdir()) == [
        "a.eval.log",
        "a.reports.tgz",
        "a.turns.tgz",
        "state.tgz",
    ]
    with tarfile.open(tmp_path / "out1" / "a.reports.tgz") as archive:  # the finished runs' reports
        reports = [name for name in archive.getnames() if name.endswith("report.json")]
    assert len(reports) == 2 and all(name.startswith("runs/level") for name in reports), reports
    with tarfile.open(tmp_path / "out1" / "a.turns.tgz") as archive:  # their coder turns (RL datasets)
        turns = [name for name in archive.getnames() if name.endswith("turns.jsonl")]
    assert len(turns) == 2 and all(name.startswith("runs/level") for name in turns), turns

    # The CPU side: the state comes back as one file and replaces the carried folder.
    carried = tmp_path / "carried"
    with tarfile.open(tmp_path / "out1" / "state.tgz") as archive:
        archive.extractall(carried, filter="data")
    names = sorted(p.name for p in carried.iterdir())
    assert {"a.results.jsonl", "a.runs.tgz", "a.slices.jsonl", "a.command", "suite.command"} <= set(names)
    assert {"build.cache.tgz", "inductor.cache.tgz", "a.slice"} <= set(names)
    with tarfile.open(carried / "build.cache.tgz") as archive:
        assert sorted(archive.getnames()) == [
            "0123456789abcdef/ext_0123.so",
            "0123456789abcdef/stitch_build.json",
            "cudnn-algos.tsv",
        ]
    with tarfile.open(carried / "a.runs.tgz") as archive:
        assert archive.getnames() == ["runs/level1/2_GELU/checkpoints.sqlite"]
    command = (carried / "suite.command").read_text()
    for part in ("--out", str(tmp_path / "machine" / "work" / "a"), "STITCHCUDA_CACHE=", "STITCHCUDA_BASELINE_CACHE=",
                 "TORCHINDUCTOR_CACHE_DIR=", "STITCHCUDA_PROFILERS=torch", "--only", "--jobs 3", "--max-iterations 3"):  # fmt: skip
        assert part in command, (part, command)

    _fresh_machine(tmp_path)
    second = _slice(tmp_path, carried, tmp_path / "out2", scratch, "auto")  # a: not an H100
    assert second.returncode == 0, second.stderr
    assert "a: 3 of 3 problems recorded" in second.stdout and "a: complete" in second.stdout, second.stdout
    assert "restored slice 1: 2 records, 1 runs in flight" in second.stdout
    assert (scratch / "resumed-from").read_text() == "planned"  # resumed from the carried checkpoint
    assert (scratch / "runs.log").read_text().split().count("1_ReLU") == 1  # recorded: not run again
    assert (tmp_path / "machine" / "cache" / "0123456789abcdef" / "ext_0123.so").exists()  # cache restored
    assert (tmp_path / "machine" / "inductor" / "fxgraph" / "entry").read_text() == "compiled"
    with tarfile.open(tmp_path / "out2" / "state.tgz") as archive:
        archive.extractall(tmp_path / "carried2", filter="data")
    results = [
        json.loads(line) for line in (tmp_path / "carried2" / "a.results.jsonl").read_text().splitlines()
    ]
    assert sorted(r["problem"] for r in results) == ["level1/1_ReLU", "level1/2_GELU", "level1/3_SiLU"]
    slices = [
        json.loads(line) for line in (tmp_path / "carried2" / "a.slices.jsonl").read_text().splitlines()
    ]
    assert [(s["slice"], s["exit"], s["recorded_after"], s["total"]) for s in slices] == [
        (1, 124, 2, 3),
        (2, 0, 3, 3),
    ]


def test_auto_names_the_eval_after_the_card(tmp_path: Path) -> None:
    """auto / auto2: a / b on an H200, ha / hb on an H100 (no time left for the eval: naming only)."""
    for name, card, expected in (("auto", "NVIDIA H100 80GB HBM3", "ha"), ("auto2", "NVIDIA H200", "b")):
        out = tmp_path / f"out-{name}"
        proc = _slice(
            tmp_path, tmp_path / f"state-{name}", out, tmp_path, name, GPU_NAME=card, SLICE_BUDGET="5"
        )
        assert proc.returncode == 0, proc.stderr
        assert f"{expected}: 0 of 3 problems recorded" in proc.stdout, proc.stdout
        assert (out / f"{expected}.eval.log").exists()


def test_the_slice_runner_leaves_nothing_behind_when_the_command_ends_first(tmp_path: Path) -> None:
    pidfile = tmp_path / "orphan.pid"
    code = (
        "import subprocess, sys; subprocess.Popen([sys.executable, '-c', "
        f"\"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(1000)  # stitchcuda-test-orphan\"], "
        "start_new_session=True)"
    )
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "evals.device.timing_slice", "run", "--seconds", "60", "--grace", "2", "--",
         sys.executable, "-c", code + "; import time; time.sleep(1)"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0 and time.monotonic() - started < 30, proc.stdout + proc.stderr
    assert "1 process(es) of the slice killed at its end" in proc.stdout
    assert not _alive(int(pidfile.read_text()))


def test_the_state_keeps_whole_cache_entries_within_its_budget(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for i in range(6):  # 1 MiB of incompressible library each, the newest first
        entry = cache / f"{i:016x}"
        entry.mkdir(parents=True)
        (entry / "lib.so").write_bytes(os.urandom(1 << 20))
        (entry / "stitch_build.json").write_text("{}")
        os.utime(entry / "stitch_build.json", (1000 + i, 1000 + i))
    work = tmp_path / "work"
    work.mkdir()
    sizes = timing_slice.save(
        tmp_path / "none", tmp_path / "into", "a", work, {"build": cache}, budget_mb=3.5
    )
    with tarfile.open(tmp_path / "into" / "build.cache.tgz") as archive:
        names = archive.getnames()
    kept = sorted({name.split("/")[0] for name in names})
    assert kept == [f"{5:016x}", f"{4:016x}", f"{3:016x}"][::-1]  # the three newest, each entry whole
    assert len(names) == 6 and sizes["state"] < 3.5 * (1 << 20) and sizes["build_groups"] == "3 of 6"


def test_a_warm_machine_keeps_its_work_folder_when_the_carried_state_is_not_newer(tmp_path: Path) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    state.mkdir()
    (state / "a.results.jsonl").write_text(json.dumps({"problem": "level1/1_a"}) + "\n")
    (state / "a.slice").write_text("2")
    work.mkdir()
    (work / ".slice").write_text("3")  # the machine ran slice 3; the state was not unpacked since
    (work / "results.jsonl").write_text("")
    assert "a warm machine" in timing_slice.restore(state, "a", work, {})
    assert (work / "results.jsonl").read_text() == ""  # kept, not replaced by the older state
    (work / ".slice").write_text("1")  # older than the state (another machine went on): restored
    assert timing_slice.restore(state, "a", work, {}).startswith("restored slice 2: 1 records")
    assert timing_slice.next_slice(work) == 3


def test_a_lost_state_is_seeded_from_committed_records_leaving_out_what_runs_again(tmp_path: Path) -> None:
    records = tmp_path / "results.jsonl"
    problems = ["level1/1_ReLU", "level1/18_Conv2d_Pointwise", "level2/4_Conv2d_BatchNorm_ReLU"]
    records.write_text("".join(json.dumps({"problem": p, "status": "verified"}) + "\n" for p in problems))
    state = tmp_path / "state"
    command = [
        sys.executable,
        "-m",
        "evals.device.timing_slice",
        "seed",
        "--state",
        str(state),
        "--name",
        "a",
    ]
    command += ["--records", str(records), "--rerun", "^level1/18_"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "2 records kept; to run again: level1/18_Conv2d_Pointwise" in done.stdout
    kept = [json.loads(line)["problem"] for line in (state / "a.results.jsonl").read_text().splitlines()]
    assert kept == ["level1/1_ReLU", "level2/4_Conv2d_BatchNorm_ReLU"]
    again = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert again.returncode != 0 and "already holds eval 'a'" in again.stderr  # never overwrites a state


def test_an_eval_is_tied_to_one_gpu_model_and_sets_aside_records_of_another(tmp_path: Path) -> None:
    state, work = tmp_path / "state", tmp_path / "work"
    state.mkdir()
    lines = [
        {"problem": "level1/1_a", "device": "NVIDIA H100 80GB HBM3"},  # seeded from another machine
        {"problem": "level1/2_b", "device": "NVIDIA H200"},
        {"problem": "level1/3_c", "device": None},  # no GPU named (unverified): kept
    ]
    (state / "a.results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (state / "a.slice").write_text("1")
    said = timing_slice.restore(state, "a", work, {}, gpu="NVIDIA H200")
    assert said.endswith("1 records from another GPU set aside (run again here)")
    assert timing_slice.recorded_keys(work / "results.jsonl") == {"level1/2_b", "level1/3_c"}
    assert "level1/1_a" in (state / "a.other-gpu.jsonl").read_text()
    assert (state / "a.gpu").read_text().strip() == "NVIDIA H200"
    with pytest.raises(timing_slice.OtherGpu, match="runs on 'NVIDIA H200'"):
        timing_slice.restore(state, "a", work, {}, gpu="NVIDIA H100 80GB HBM3")
    assert timing_slice.restore(state, "a", work, {}, gpu="NVIDIA H200").startswith(
        "work folder already holds"
    )


def test_a_committed_snapshot_carries_an_eval_into_a_new_checkout(tmp_path: Path) -> None:
    state, snap, fresh = tmp_path / "state", tmp_path / "snapshot", tmp_path / "fresh-checkout-state"
    state.mkdir()
    (state / "a.results.jsonl").write_text('{"problem": "level1/1_ReLU"}\n')
    (state / "a.gpu").write_text("NVIDIA H200\n")
    (state / "baselines.json").write_text("{}")
    (state / "b.results.jsonl").write_text("another eval's records\n")
    (state / "a.runs.tgz").write_bytes(b"big")  # run folders and caches stay out of the snapshot
    assert "a.results.jsonl, a.gpu, baselines.json" in timing_slice.snapshot(state, "a", snap)
    assert sorted(p.name for p in snap.iterdir()) == ["a.gpu", "a.results.jsonl", "baselines.json"]
    assert timing_slice.resume(fresh, "a", snap).startswith("resumed eval a")
    assert (fresh / "a.results.jsonl").read_text() == '{"problem": "level1/1_ReLU"}\n'
    (fresh / "a.results.jsonl").write_text("newer records\n")
    assert "already holds" in timing_slice.resume(fresh, "a", snap)  # a live state is never overwritten
    assert (fresh / "a.results.jsonl").read_text() == "newer records\n"
    assert "starts afresh" in timing_slice.resume(tmp_path / "other", "b", snap)
    with pytest.raises(SystemExit):
        timing_slice.snapshot(state, "c", snap)  # nothing of that eval: say so, write nothing
