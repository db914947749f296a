"""Escape attempts through the real evaluation worker (`--device cpu`, C++-only programs).

Each attempt (tests/candidates/sandbox/) runs at import in front of the correct affine program,
so without the sandbox every one would pass its trials. Each must be blocked (nothing reaches the
listener, no file appears outside the work directory, no planted secret shows up in the output)
and reported as a `sandbox_violation` error finding, which makes the verdict `hacked`: such a
program is never verified. The listener is a real TCP server on 127.0.0.1 inside this test.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.listener import Listener

from nodes.support.worker_client import to_test_result
from tools.evaluate import evaluate
from tools.protocol import EvalRequest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ATTEMPTS = REPO / "tests" / "candidates" / "sandbox"
WORKER = REPO / "tests" / "candidates" / "worker"
SECRET = "sk-planted-4f1d2c9e"


@pytest.fixture()
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


@pytest.fixture()
def planted_process() -> Iterator[int]:
    """A process whose initial environment holds the secret (as the graph's does)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], env=dict(os.environ, OPENAI_API_KEY=SECRET)
    )
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sandbox-build-cache")


def program(attempt: str, **fill: Any) -> str:
    prelude = (ATTEMPTS / attempt).read_text()
    for key, value in fill.items():
        prelude = prelude.replace(f"__{key.upper()}__", str(value))
    return prelude + "\n" + (WORKER / "affine_ok.py").read_text()


def run(
    source: str, cache_dir: Path, timeout_s: float = 240, problem_source: str | None = None
) -> dict[str, Any]:
    request = EvalRequest(
        action="verify",
        problem_name="affine",
        problem_source=problem_source or (WORKER / "affine_problem.py").read_text(),
        candidate_source=source,
        device="cpu",
        perf_trials=5,
        correctness_trials=2,
        cache_dir=str(cache_dir),
    )
    return dict(evaluate(request, timeout_s=timeout_s, sandbox="required"))


def violations(response: dict[str, Any], kind: str) -> list[str]:
    return [
        f["evidence"]
        for f in response.get("findings") or []
        if f["id"] == "sandbox_violation"
        and f["severity"] == "error"
        and f["evidence"].startswith(kind + ":")
    ]


def assert_never_verified(response: dict[str, Any], source: str) -> None:
    test = to_test_result(response, source)  # type: ignore[arg-type]
    assert test.verdict == "hacked"
    assert "sandbox_violation" in {f["id"] for f in test.findings}


@pytest.fixture(scope="module")
def clean_run(cache_dir: Path) -> dict[str, Any]:
    """The correct program alone: builds the extension once for the module, and must stay clean."""
    return run((WORKER / "affine_ok.py").read_text(), cache_dir, timeout_s=300)


def test_the_correct_program_passes_inside_the_sandbox(clean_run: dict[str, Any]) -> None:
    assert clean_run["status"] == "passed", clean_run["message"]
    assert not [f for f in clean_run.get("findings") or [] if f["id"] == "sandbox_violation"]
    layers = clean_run["sandbox"]["layers"]
    assert all(layer["on"] for layer in layers.values()), layers
    assert clean_run["sandbox"]["applied"]["capabilities"] == []


def test_secrets_are_not_in_the_environment_nor_in_other_processes(
    clean_run: dict[str, Any],
    cache_dir: Path,
    listener: Listener,
    monkeypatch: pytest.MonkeyPatch,
    planted_process: int,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("LANGSMITH_API_KEY", SECRET)
    monkeypatch.setenv("STITCHCUDA_CODER_API_KEY", SECRET)
    source = program("env_secret.py", port=listener.port, secret=SECRET)
    response = run(source, cache_dir)
    assert "FOUND {}" in response["stdout_tail"]  # nothing secret in its environ, no other process visible
    assert SECRET not in response["stdout_tail"]
    assert listener.connections == 0 and not listener.received
    assert violations(response, "network"), response.get("findings")
    assert response["status"] == "passed"  # it computed the right answer ...
    assert_never_verified(response, source)  # ... and is still never verified


def test_connecting_out_is_refused_from_python_and_from_c(
    clean_run: dict[str, Any], cache_dir: Path, listener: Listener
) -> None:
    source = program("connect_out.py", port=listener.port)
    response = run(source, cache_dir)
    assert listener.connections == 0 and not listener.received
    refused = violations(response, "network")
    assert any("socket(AF_INET, SOCK_STREAM) refused" in e for e in refused), refused
    assert "c socket failed 13" in response["stdout_tail"]  # EACCES from the filter, not a connection error
    assert_never_verified(response, source)


def test_writing_outside_the_work_directory_is_refused(
    clean_run: dict[str, Any], cache_dir: Path, tmp_path: Path
) -> None:
    target = tmp_path / "stolen.txt"
    source = program("write_outside.py", target=target)
    response = run(source, cache_dir)
    assert not target.exists() and not Path(f"{target}.c").exists()
    assert any(str(target) in e for e in violations(response, "write")), response.get("findings")
    assert_never_verified(response, source)


def test_the_users_ssh_key_cannot_be_read(
    clean_run: dict[str, Any], cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    key = home / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True)
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY----- planted")
    token = home / ".config" / "gh" / "hosts.yml"
    token.parent.mkdir(parents=True)
    token.write_text("oauth_token: gho_planted")
    monkeypatch.setenv("HOME", str(home))
    source = program("read_ssh.py", target=key, config=token)
    response = run(source, cache_dir)
    assert "planted" not in response["stdout_tail"]  # neither from Python nor from C (fopen)
    assert response["stdout_tail"].count("c read failed") == 3, response["stdout_tail"]
    for path in (key, token):
        assert any(str(path) in e for e in violations(response, "read")), response.get("findings")
    assert_never_verified(response, source)


def test_the_sources_and_the_python_environment_cannot_be_changed(
    clean_run: dict[str, Any], cache_dir: Path
) -> None:
    # What would outlive the run: a module in the repository's tools/ (the graph imports that
    # package) and a .pth file that every later interpreter of this environment runs.
    tag = f"zz_stitch_sandbox_probe_{os.getpid()}"
    targets = [REPO / "tools" / f"{tag}.py", Path(sysconfig.get_paths()["purelib"]) / f"{tag}.pth"]
    source = program("persist.py", repo_file=targets[0], site_file=targets[1])
    try:
        response = run(source, cache_dir)
        left = [p for t in targets for p in (t, Path(f"{t}.c")) if p.exists()]
    finally:
        for target in targets:
            for path in (target, Path(f"{target}.c")):
                path.unlink(missing_ok=True)
    assert not left, left
    assert response["stdout_tail"].count("c write failed") == 2, response["stdout_tail"]
    for target in targets:
        assert any(str(target) in e for e in violations(response, "write")), response.get("findings")
    assert_never_verified(response, source)


def test_a_hostile_reference_is_held_like_a_candidate(
    clean_run: dict[str, Any],
    cache_dir: Path,
    listener: Listener,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    planted_process: int,
) -> None:
    # The reference is the user's downloaded problem file: the worker (which runs it beside the
    # candidate) and the baselines child (which times it alone) hold it to the same rules.
    from tools.baselines import measure_baselines

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("LANGSMITH_API_KEY", SECRET)
    target = tmp_path / "reference-loot.txt"
    problem = (ATTEMPTS / "reference_exfil.py").read_text()
    problem = problem.replace("__PORT__", str(listener.port)).replace("__TARGET__", str(target))
    problem = problem.replace("__SECRET__", SECRET) + "\n" + (WORKER / "affine_problem.py").read_text()
    worker = run((WORKER / "affine_ok.py").read_text(), cache_dir, problem_source=problem)
    baselines = measure_baselines(
        problem, "affine", modes=["eager"], device="cpu", perf_trials=5, cache_dir=cache_dir / "baselines",
        timeout_s=240, sandbox="required",
    )  # fmt: skip
    for response in (worker, baselines):
        assert response["status"] == "passed", response.get("message")  # it found nothing to raise about
        assert any("socket(AF_INET" in e for e in violations(response, "network")), response.get("findings")
        assert any(str(target) in e for e in violations(response, "write")), response.get("findings")
        assert response["sandbox"]["mode"] == "required"
        assert all(layer["on"] for layer in response["sandbox"]["layers"].values())
    assert listener.connections == 0 and not listener.received
    assert not target.exists()


def test_a_native_thief_is_a_hack_for_the_verifier_and_the_rl_reward(
    clean_run: dict[str, Any],
    cache_dir: Path,
    listener: Listener,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The theft lives in the extension's C++ (at load time): no audit hook sees it, and the static
    # checks call the program clean. Only the sandbox's refusals make it a hack, and they must.
    from rl.reward import RewardSettings, RuleSettings, make_sample, score
    from rl.reward.core import HACK_REWARD
    from tools.checks import hack_report

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("LANGSMITH_API_KEY", SECRET)
    monkeypatch.setenv("STITCHCUDA_SANDBOX", "required")  # the reward's worker takes the mode from here
    key = tmp_path / "home" / ".ssh" / "id_ed25519"
    key.parent.mkdir(parents=True)
    key.write_text("planted key")
    target = tmp_path / "native-loot.txt"
    source = program("native_exfil.py", port=listener.port, key=key, target=target)
    assert hack_report(source)["verdict"] == "clean"
    response = run(source, cache_dir)
    assert response["status"] == "passed", response.get("message")
    assert f"native socket errno {errno.EACCES}" in response["stdout_tail"]
    assert any("socket(AF_INET, SOCK_STREAM) refused" in e for e in violations(response, "network"))
    assert_never_verified(response, source)
    sample = make_sample(
        str(WORKER / "affine_problem.py"), f"Summary: affine\n\n```python\n{source}```\n", "write"
    )
    reward = score(
        sample, RewardSettings(rule=RuleSettings(mode="build", timeout_s=300, cache_dir=str(cache_dir)))
    )
    assert reward.rule.stage == "built", reward.evidence  # it built and loaded ...
    assert reward.hacked and reward.total == HACK_REWARD  # ... and scores as a hack
    assert any(e.startswith("error sandbox_violation: network: socket(AF_INET") for e in reward.evidence)
    assert listener.connections == 0 and not listener.received
    assert not target.exists()


def test_a_disk_filler_in_the_build_cache_is_stopped_by_the_reserve(
    clean_run: dict[str, Any], cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run may write the build cache, which no quota holds (other runs share it); the disk's
    # reserve does, on whichever filesystem the cache lives. The disk is simulated: the cache's
    # filesystem has 64 MiB free when the run starts and a reserve of 16 MiB.
    from tools.sandbox import supervisor

    filler = cache_dir / "filler"
    real_free = supervisor._free
    size = supervisor.disk_usage(cache_dir) + (64 << 20)
    monkeypatch.setattr(supervisor, "DISK_RESERVE", 16 << 20)
    monkeypatch.setattr(
        supervisor, "_free",
        lambda path: size - supervisor.disk_usage(cache_dir) if Path(path) == cache_dir else real_free(path),
    )  # fmt: skip
    try:
        response = run(program("cache_filler.py", target=filler), cache_dir, timeout_s=120)
    finally:
        shutil.rmtree(filler, ignore_errors=True)
    assert response["status"] == "crashed" and "the sandbox stopped the run" in response["message"]
    assert response["seconds"] < 60  # stopped by the sandbox, not by the wall-time limit
    assert any(f"free space on {cache_dir} fell" in e for e in violations(response, "disk")), response.get(
        "findings"
    )


@pytest.mark.parametrize(
    ("attempt", "variable", "value", "kind", "evidence"),
    [
        ("fork_bomb.py", "STITCHCUDA_SANDBOX_PROCESSES", "64", "processes", "cap of 64"),
        ("disk_filler.py", "STITCHCUDA_SANDBOX_DISK_MB", "64", "disk", "quota of 64 MiB"),
    ],
)
def test_a_fork_bomb_or_a_disk_filler_is_stopped(
    clean_run: dict[str, Any],
    cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    attempt: str,
    variable: str,
    value: str,
    kind: str,
    evidence: str,
) -> None:
    monkeypatch.setenv(variable, value)
    response = run(program(attempt), cache_dir, timeout_s=120)
    assert response["status"] == "crashed"
    assert "the sandbox stopped the run" in response["message"]
    assert response["seconds"] < 60  # stopped by the sandbox, not by the wall-time limit
    assert any(evidence in e for e in violations(response, kind)), response.get("findings")


def test_one_growing_file_stops_at_the_file_size_limit(
    clean_run: dict[str, Any], cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STITCHCUDA_SANDBOX_FILE_MB", "16")
    source = program("big_file.py")
    response = run(source, cache_dir, timeout_s=120)
    assert "File too large" in response["stdout_tail"]  # EFBIG: Python ignores SIGXFSZ
    assert any("big.bin reached the file-size limit (16 MiB)" in e for e in violations(response, "file_size"))
    assert_never_verified(response, source)
