"""The sandbox itself, with small real programs (no extension builds): every backend, every layer.

Each backend this machine has (bubblewrap, util-linux unshare, none) runs the same probe program,
which tries what a hostile candidate would: read secrets from its environment and from another
process's /proc entry, open an IP socket from C, read a planted file in a hidden tree, write
outside its directory. The escape tests through the real worker are in test_sandbox_escapes.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tools.sandbox import Sandbox, SandboxError, SandboxSettings, namespaces, paths
from tools.sandbox import limits as sandbox_limits
from tools.sandbox.environment import allowed, sandbox_environment

SECRET = "sk-planted-in-a-parent-9a7b"
PROBE = r"""
import ctypes, json, os, sys
target, planted, outside = sys.argv[1], sys.argv[2], sys.argv[3]
out = {"env": sorted(k for k in os.environ if "KEY" in k or "TOKEN" in k or "SECRET" in k),
       "home": os.environ["HOME"], "tmpdir": os.environ["TMPDIR"]}
try:
    out["proc"] = open(f"/proc/{target}/environ", "rb").read().decode(errors="replace")
except OSError as exc:
    out["proc"] = f"refused: {exc.errno}"
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.socket(2, 1, 0)
out["socket"] = "opened" if fd >= 0 else f"refused: {ctypes.get_errno()}"
try:
    out["planted"] = os.read(os.open(planted, os.O_RDONLY), 100).decode()
except OSError as exc:
    out["planted"] = f"refused: {exc}"
try:
    fd = libc.open(outside.encode(), os.O_WRONLY | os.O_CREAT, 0o644)
    out["outside"] = "written" if fd >= 0 else f"refused: {ctypes.get_errno()}"
except OSError as exc:
    out["outside"] = f"refused: {exc}"
import threading
helper = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True)
helper.start()  # named from outside, as the CUDA driver names its threads (cuInit fails if it cannot)
fd = libc.open(f"/proc/self/task/{helper.native_id}/comm".encode(), os.O_WRONLY)
out["thread_name"] = "named" if fd >= 0 and libc.write(fd, b"cuda-helper", 11) == 11 else f"refused: {ctypes.get_errno()}"
print(json.dumps(out))
"""


@pytest.fixture()
def planted_parent(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process whose initial environment holds a secret (as the graph's does)."""
    env = dict(os.environ, OPENAI_API_KEY=SECRET)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    time.sleep(0.2)
    yield proc
    proc.kill()
    proc.wait()


def backends() -> list[str]:
    found = ["none"]
    if shutil.which("unshare"):
        found.append("unshare")
    if namespaces.find_bwrap():
        found.append("bwrap")
    return found


@pytest.fixture()
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    """Make `namespaces.detect` find only the named backend (by hiding the others' executables)."""
    name = request.param
    if name != "bwrap":
        monkeypatch.setenv(namespaces.BWRAP_ENV, str(tmp_path / "no-bwrap"))
    if name == "none":
        monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    namespaces.detect.cache_clear()
    detected = namespaces.detect()
    if detected.name != name:
        pytest.skip(f"{name} does not work here: {detected.why_not}")
    yield name
    namespaces.detect.cache_clear()


def probe(box: Sandbox, root: Path, target: int, planted: Path, outside: Path) -> dict[str, Any]:
    env = dict(os.environ, OPENAI_API_KEY=SECRET, STITCHCUDA_CODER_API_KEY=SECRET, LANGSMITH_API_KEY=SECRET)
    proc = box.popen(
        [sys.executable, "-c", PROBE, str(target), str(planted), str(outside)],
        env=env, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    return json.loads(out.decode().strip().splitlines()[-1])


@pytest.mark.parametrize("backend", backends(), indirect=True)
def test_every_backend_holds_the_probe(
    backend: str, tmp_path: Path, planted_parent: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    hidden = tmp_path / "home"
    (hidden / ".ssh").mkdir(parents=True)
    planted = hidden / ".ssh" / "id_ed25519"
    planted.write_text("planted key")
    monkeypatch.setenv("HOME", str(hidden))
    root = tmp_path / "run"
    root.mkdir()
    box = Sandbox(root, SandboxSettings.resolve("auto", device="cpu", timeout_s=60))
    with box:
        seen = probe(box, root, planted_parent.pid, planted, tmp_path / "outside.txt")
    response = box.annotate({})
    assert seen["env"] == []
    assert seen["home"].startswith(str(root)) and seen["tmpdir"] == str(root)
    assert SECRET not in seen["proc"] and seen["proc"].startswith("refused")
    assert seen["planted"].startswith("refused")  # ENOENT under bubblewrap, the audit hook elsewhere
    assert not (tmp_path / "outside.txt").exists() and seen["outside"].startswith("refused")
    assert seen["socket"] == "refused: 13"
    assert seen["thread_name"] == "named"
    layers = response["sandbox"]["layers"]
    assert layers["namespaces"]["on"] == (backend != "none")
    assert layers["network"]["on"] and layers["filesystem"]["on"] and layers["syscalls"]["on"]
    assert any(f["evidence"].startswith("network: socket(AF_INET") for f in response["findings"])


def test_required_names_every_missing_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(namespaces.BWRAP_ENV, str(tmp_path / "no-bwrap"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    namespaces.detect.cache_clear()
    try:
        with pytest.raises(
            SandboxError, match=r"--sandbox required, but this platform lacks: namespaces \(no bubblewrap"
        ):
            Sandbox(tmp_path, SandboxSettings.resolve("required", device="cpu"))
    finally:
        namespaces.detect.cache_clear()


def test_off_is_really_off(tmp_path: Path) -> None:
    box = Sandbox(tmp_path, SandboxSettings.resolve("off"))
    env = box.env(dict(os.environ, OPENAI_API_KEY=SECRET))
    assert env["OPENAI_API_KEY"] == SECRET  # off keeps the caller's environment: for debugging only
    with box:
        proc = box.popen([sys.executable, "-c", "print('ran')"], env=env, stdout=subprocess.PIPE)
        assert proc.communicate(timeout=60)[0].strip() == b"ran"
    record = box.annotate({})["sandbox"]
    assert record["mode"] == "off" and not any(layer["on"] for layer in record["layers"].values())


@pytest.mark.skipif(not namespaces.find_bwrap(), reason="needs bubblewrap")
def test_a_signal_death_reads_as_the_signal_through_bubblewrap(tmp_path: Path) -> None:
    namespaces.detect.cache_clear()
    with Sandbox(tmp_path, SandboxSettings.resolve("auto", device="cpu")) as box:
        proc = box.popen(
            [sys.executable, "-c", "import os; os.abort()"], cwd=tmp_path, stderr=subprocess.DEVNULL
        )
        assert proc.wait(timeout=60) == -signal.SIGABRT


@pytest.mark.parametrize(
    ("name", "passes"),
    [
        ("PATH", True), ("CUDA_HOME", True), ("LC_ALL", True), ("STITCHCUDA_BUILDER", True),
        ("TORCH_EXTENSIONS_DIR", True), ("OPENAI_API_KEY", False), ("LANGSMITH_API_KEY", False),
        ("LANGSMITH_TRACING", False), ("AWS_SECRET_ACCESS_KEY", False), ("SSH_AUTH_SOCK", False),
        ("HF_TOKEN", False), ("STITCHCUDA_CODER_API_KEY", False), ("STITCHCUDA_LLM_BASE_URL", False),
        ("GITHUB_TOKEN", False), ("CUDA_SECRET", False), ("HOME", False), ("LD_PRELOAD", False),
        ("TORCHINDUCTOR_CACHE_DIR", True),
    ],
)  # fmt: skip
def test_the_environment_is_an_allowlist(name: str, passes: bool) -> None:
    assert allowed(name) is passes


def test_torch_compiles_cache_outlives_the_run(tmp_path: Path) -> None:
    """Under the machine's cache root unless the caller's own choice lies in a writable tree (by default
    inductor writes under the run's TMPDIR, and every baseline process compiled from scratch)."""
    cache, writable, root = tmp_path / "cache", tmp_path / "shared", tmp_path / "run"

    def inductor(base: dict[str, str]) -> str:
        env = sandbox_environment(
            base, root, cache_dir=cache, python_path=[], writable=[cache, writable, root]
        )
        return env["TORCHINDUCTOR_CACHE_DIR"]

    assert inductor({}) == str(cache / "torchinductor")
    assert inductor({"TORCHINDUCTOR_CACHE_DIR": str(writable / "inductor")}) == str(writable / "inductor")
    assert inductor({"TORCHINDUCTOR_CACHE_DIR": "/etc/inductor"}) == str(cache / "torchinductor")


def test_bad_settings_fail_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SandboxError, match="unknown sandbox mode 'strict'"):
        SandboxSettings.resolve("strict")
    monkeypatch.setenv("STITCHCUDA_SANDBOX_DISK_MB", "lots")
    with pytest.raises(SandboxError, match="STITCHCUDA_SANDBOX_DISK_MB='lots': expected a number"):
        SandboxSettings.resolve()
    monkeypatch.setenv("STITCHCUDA_SANDBOX_DISK_MB", "64")
    monkeypatch.setenv("STITCHCUDA_SANDBOX_MEMORY_GB", "unlimited")
    limits = SandboxSettings.resolve().limits
    assert limits.disk == 64 << 20 and limits.address_space is None


def test_the_cache_rules_match_the_builders(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tools import build

    for value in (None, str(tmp_path / "cache")):
        if value:
            monkeypatch.setenv("STITCHCUDA_CACHE", value)
        assert sandbox_limits.default_cache_dir() == build.default_cache_dir()
        cache = build.default_cache_dir()
        assert sandbox_limits.cache_trees(cache) == [cache, build.pch_root(cache)]


def test_landlock_rules_carve_out_hidden_trees(tmp_path: Path) -> None:
    policy = paths.build_policy([tmp_path / "run"])
    rules = paths.landlock_rules(policy, carve_proc=True)
    for tree in policy.hidden:
        inside = [r for r in rules.read if r == tree or r.startswith(tree + "/")]
        assert all(any(r == p or r.startswith(p + "/") for p in policy.read) for r in inside), inside
    assert "/usr" in rules.read and str(paths.TOOLS_DIR) in rules.read
    assert not any(p.rsplit("/", 1)[-1].isdigit() for p in rules.read if p.startswith("/proc/"))
    assert "/dev" in rules.list_only and "/dev" not in rules.read


def test_cli_required_fails_at_once_without_a_layer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from graph.cli import EXIT_BAD_INPUT, main

    problem = next((Path(__file__).resolve().parents[1] / "fixtures" / "problems").rglob("*.py"))
    monkeypatch.setenv(namespaces.BWRAP_ENV, str(tmp_path / "no-bwrap"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    namespaces.detect.cache_clear()
    try:
        code = main(["run", str(problem), "--sandbox", "required", "--out", str(tmp_path / "out")])
    finally:
        namespaces.detect.cache_clear()
    assert code == EXIT_BAD_INPUT
    assert "--sandbox required, but this platform lacks: namespaces" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_report_names_the_layers() -> None:
    from nodes.support.report import build_report, render_markdown

    namespaces.detect.cache_clear()
    report = build_report({"problem_name": "p"}, "failed", "test", "offline", sandbox="auto")  # type: ignore[typeddict-unknown-key]
    assert report["sandbox"]["mode"] == "auto"
    assert set(report["sandbox"]["layers"]) == {"environment", "limits", "namespaces", "filesystem", "network",
                                                "syscalls", "processes"}  # fmt: skip
    line = next(x for x in render_markdown(report).splitlines() if x.startswith("- sandbox: "))
    assert line.startswith("- sandbox: auto; on: environment, limits")


@pytest.mark.skipif(not namespaces.find_bwrap(), reason="needs bubblewrap")
def test_a_profiler_gets_a_private_tmp_not_the_hosts(tmp_path: Path) -> None:
    namespaces.detect.cache_clear()
    root = tmp_path / "run"
    root.mkdir()
    marker = f"/tmp/stitch-private-{os.getpid()}"
    code = f"open({marker!r}, 'w').write('x'); open('inside.txt', 'w').write('y'); print('ok')"
    with Sandbox(root, SandboxSettings.resolve("auto", device="cpu"), profile="tool") as box:
        proc = box.popen(
            [sys.executable, "-c", code], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        out, err = proc.communicate(timeout=60)
    assert out.strip() == b"ok", err.decode()
    assert not os.path.exists(marker) and (root / "inside.txt").read_text() == "y"
    assert not box.annotate({}).get("findings")


PROFILED_CHILD = r"""
import ctypes, json, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
out = {}
helper = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True)
helper.start()
fd = libc.open(f"/proc/self/task/{helper.native_id}/comm".encode(), os.O_WRONLY)
out["thread_name"] = "named" if fd >= 0 and libc.write(fd, b"cuda-helper", 11) == 11 else f"refused: {ctypes.get_errno()}"
try:
    out["maps"] = "read" if open("/proc/self/maps").read(10) else "empty"
except OSError as exc:
    out["maps"] = f"refused: {exc.errno}"
try:
    open(sys.argv[1], "w").write("x")
    out["tmp"] = "written"
except OSError as exc:
    out["tmp"] = f"refused: {exc.errno}"
try:  # the run's own directory by its absolute path (it may itself live under /tmp)
    open(sys.argv[2], "w").write("y")
    out["run_dir"] = "written"
except OSError as exc:
    out["run_dir"] = f"refused: {exc.errno}"
for target in ("/proc/sys/kernel/hostname", "/proc/sysrq-trigger"):
    try:
        open(target, "w").close()
        out[target] = "writable"
    except OSError as exc:
        out[target] = f"refused: {exc.errno}"
print(json.dumps(out))
"""


@pytest.mark.parametrize("backend", [b for b in backends() if b != "none"], indirect=True)
def test_a_profilers_child_can_start_cuda_and_use_a_private_tmp(backend: str, tmp_path: Path) -> None:
    # ncu and nsys run the target as their own child, whose PID the launcher cannot know: it must
    # still name its threads (cuInit fails with 304 otherwise), read its /proc/self and write /tmp.
    root = tmp_path / "run"
    root.mkdir()
    marker = f"/tmp/stitch-profiled-{os.getpid()}-{backend}"
    inside = root / "written-by-the-child.txt"
    child = [sys.executable, "-c", PROFILED_CHILD, marker, str(inside)]
    parent = f"import subprocess, sys; sys.exit(subprocess.run({child!r}).returncode)"
    with Sandbox(root, SandboxSettings.resolve("auto", device="cpu", timeout_s=60), profile="tool") as box:
        proc = box.popen(
            [sys.executable, "-c", parent], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    seen = json.loads(out.decode().strip().splitlines()[-1])
    assert seen["thread_name"] == "named" and seen["maps"] == "read" and seen["tmp"] == "written", seen
    assert not os.path.exists(marker)  # the profiler's /tmp is its own
    assert seen["run_dir"] == "written" and inside.read_text() == "y", seen  # its own tree stays bound in
    assert seen["/proc/sys/kernel/hostname"].startswith("refused"), seen  # /proc's global files stay shut
    assert seen["/proc/sysrq-trigger"].startswith("refused"), seen


LEAVES_ITS_GROUP = r"""
import os, time
if os.fork() == 0:
    os.setpgrp()  # out of the child's process group: a kill of that group misses it
    for _ in range(300):
        with open("beat.txt", "a") as handle:
            handle.write("x")
        time.sleep(0.1)
    os._exit(0)
time.sleep(0.5)
"""


@pytest.mark.parametrize("backend", backends(), indirect=True)
def test_a_process_that_leaves_the_group_dies_with_the_run(backend: str, tmp_path: Path) -> None:
    # Without a private PID namespace (unshare, none: the H200's backend is unshare) a process that
    # moved to its own group outlived the callers' kill_group and the wall-time limit (measured: it
    # kept writing after the run on both); the sandbox now kills the run's whole session at its end.
    from tools.process import wait_then_kill_group

    root = tmp_path / "run"
    root.mkdir()
    with Sandbox(root, SandboxSettings.resolve("auto", device="cpu", timeout_s=60)) as box:
        proc = box.popen([sys.executable, "-c", LEAVES_ITS_GROUP], cwd=root, stderr=subprocess.PIPE)
        wait_then_kill_group(proc, 30)
        assert proc.returncode == 0, proc.stderr.read().decode() if proc.stderr else ""
    beats = root / "beat.txt"
    assert beats.exists()
    size = beats.stat().st_size
    time.sleep(0.6)
    assert beats.stat().st_size == size, "a process of the run is still writing after its end"
    record = box.annotate({})["sandbox"]
    if backend != "bwrap":  # bubblewrap's PID namespace died with its first process already
        assert record["killed_at_end"] >= 1, record


FORK_CHAIN_LEAVING_SESSIONS = r"""
import os, time
for depth in range(40):
    try:
        if os.fork() != 0:
            break
        os.setsid()  # allowed under a profiler: a count by session would see one process per session
    except OSError:
        break
time.sleep(20)
"""


@pytest.mark.parametrize("backend", [b for b in backends() if b != "none"], indirect=True)
def test_a_profiled_fork_chain_that_leaves_its_sessions_is_still_counted(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not namespaces.own_proc(namespaces.detect(), tool=True):
        pytest.skip("no private PID namespace for profiler runs here")
    monkeypatch.setenv("STITCHCUDA_SANDBOX_PROCESSES", "16")
    root = tmp_path / "run"
    root.mkdir()
    started = time.monotonic()
    settings = SandboxSettings.resolve("auto", device="cpu", timeout_s=60)
    with Sandbox(root, settings, profile="tool") as box:
        proc = box.popen(
            [sys.executable, "-c", FORK_CHAIN_LEAVING_SESSIONS], cwd=root, stderr=subprocess.DEVNULL
        )
        proc.wait(timeout=60)
    response = box.annotate({})
    assert time.monotonic() - started < 15  # stopped at the cap, not after the chain's 20 s sleep
    assert any(
        f["evidence"].startswith("processes: ") and "cap of 16" in f["evidence"] for f in response["findings"]
    ), response.get("findings")
    assert response["sandbox"]["stopped"]


LIMITS_PROBE = r"""
import json, resource
out = {name: resource.getrlimit(getattr(resource, name))[0]
       for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE", "RLIMIT_NPROC")}
try:
    block = bytearray(3 << 30)
    out["allocation"] = "3 GiB allocated"
except MemoryError:
    out["allocation"] = "MemoryError"
handles = []
try:
    for _ in range(200):
        handles.append(open("/dev/null"))
    out["open_files"] = "200 opened"
except OSError as exc:
    out["open_files"] = f"refused at {len(handles)}: {exc.errno}"
print(json.dumps(out))
"""


@pytest.mark.parametrize("backend", backends(), indirect=True)
def test_the_rlimits_hold_inside(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno
    import resource

    monkeypatch.setenv("STITCHCUDA_SANDBOX_MEMORY_GB", "2")
    monkeypatch.setenv("STITCHCUDA_SANDBOX_OPEN_FILES", "64")
    monkeypatch.setenv("STITCHCUDA_SANDBOX_FILE_MB", "4")
    settings = SandboxSettings.resolve("auto", device="cpu", timeout_s=30)
    with Sandbox(tmp_path, settings) as box:
        proc = box.popen([sys.executable, "-c", LIMITS_PROBE], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)  # fmt: skip
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    seen = json.loads(out.decode().strip().splitlines()[-1])
    assert seen["RLIMIT_AS"] == 2 << 30 and seen["allocation"] == "MemoryError", seen
    assert seen["RLIMIT_NOFILE"] == 64 and seen["open_files"].endswith(f": {errno.EMFILE}"), seen
    assert seen["RLIMIT_FSIZE"] == 4 << 20 and seen["RLIMIT_CORE"] == 0, seen
    assert seen["RLIMIT_CPU"] == settings.limits.cpu_s, seen
    if os.geteuid() != 0:  # root ignores RLIMIT_NPROC; the seccomp count holds processes there
        assert seen["RLIMIT_NPROC"] != resource.RLIM_INFINITY, seen
    applied = box.annotate({})["sandbox"]["applied"]["limits"]
    assert applied["address_space"] == 2 << 30 and applied["open_files"] == 64, applied


def test_the_cpu_time_limit_ends_a_spinning_process(tmp_path: Path) -> None:
    from dataclasses import replace

    settings = SandboxSettings.resolve("auto", device="cpu", timeout_s=30)
    settings = replace(settings, limits=replace(settings.limits, cpu_s=1))
    with Sandbox(tmp_path, settings) as box:
        proc = box.popen([sys.executable, "-c", "while True: pass"], cwd=tmp_path)
        assert proc.wait(timeout=60) == -signal.SIGXCPU


FILLS_A_WRITABLE_TREE = r"""
import os, sys, time
chunk = os.urandom(1 << 20)
for index in range(256):
    with open(os.path.join(sys.argv[1], f"fill_{index}.bin"), "wb") as handle:
        handle.write(chunk)
time.sleep(60)
"""


def test_the_disk_reserve_covers_every_writable_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The quota holds the run's own directory; a tree it may also write (a build cache, an extra
    # tree) is held by the disk's reserve, on whatever filesystem it lives. The disk is simulated: a
    # 64 MiB filesystem that holds only `extra`, with a 16 MiB reserve.
    from tools.sandbox import supervisor

    extra = tmp_path / "extra"
    extra.mkdir()
    real_free = supervisor._free
    monkeypatch.setattr(supervisor, "DISK_RESERVE", 16 << 20)
    monkeypatch.setattr(
        supervisor, "_free",
        lambda path: (64 << 20) - supervisor.disk_usage(extra) if Path(path) == extra else real_free(path),
    )  # fmt: skip
    root = tmp_path / "run"
    root.mkdir()
    started = time.monotonic()
    with Sandbox(root, SandboxSettings.resolve("auto", device="cpu", timeout_s=60), writable=[extra]) as box:
        proc = box.popen([sys.executable, "-c", FILLS_A_WRITABLE_TREE, str(extra)], cwd=root,
                         stderr=subprocess.DEVNULL)  # fmt: skip
        proc.wait(timeout=60)
    response = box.annotate({})
    assert time.monotonic() - started < 30
    assert any(f["evidence"].startswith(f"disk: free space on {extra} fell") for f in response["findings"]), (
        response.get("findings")
    )


STATUS_PROBE = "print(open('/proc/self/status').read())"


def _speculation(status: str) -> dict[str, str]:
    pairs = (line.partition(":") for line in status.splitlines())
    return {key: value.strip() for key, _, value in pairs if key.startswith("Specul")}


@pytest.mark.parametrize("backend", backends(), indirect=True)
def test_the_filter_leaves_the_cpus_speculation_settings_alone(backend: str, tmp_path: Path) -> None:
    """A seccomp filter loaded without SPEC_ALLOW turns on Speculative Store Bypass Disable where the
    kernel's mitigation mode is "seccomp", which slows the timed forward's host code: the sandboxed
    process must report the same speculation state as an unsandboxed one."""
    with Sandbox(tmp_path, SandboxSettings.resolve("auto", device="cpu", timeout_s=30)) as box:
        proc = box.popen([sys.executable, "-c", STATUS_PROBE], cwd=tmp_path, stdout=subprocess.PIPE)
        inside = proc.communicate(timeout=60)[0].decode()
    outside = subprocess.run(
        [sys.executable, "-c", STATUS_PROBE], capture_output=True, text=True, check=True
    ).stdout
    assert box.annotate({})["sandbox"]["applied"].get("seccomp") is not None
    assert _speculation(outside) and _speculation(inside) == _speculation(outside)
