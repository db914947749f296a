"""GPU side: profile the prepared problems with Nsight Compute and Nsight Systems, pack raw and parsed results.

    python3 -m evals.device.capture_profiles --inputs out/profile-inputs --out OUT [--budget-s 230]

Runs on the device machine with torch and the standard library only. Order, chosen so the GPU never
waits on the CPU: candidate builds start in the background first (one process each, MAX_JOBS=2);
meanwhile ncu profiles the references; then the device ceilings are measured (tools.roofline);
then ncu profiles the candidates (each after its build); then nsys records each program's reference
and candidate in one session (driver target `both`, split by NVTX range) while `nsys stats` of
earlier recordings runs in a thread pool; last, the PyTorch profiler's timeline of the host-sync
program (a real Chrome trace for the fallback's tests). A job that would not finish before the
budget runs out is skipped and listed as such; where nsys recorded but could not report, the
PyTorch profiler's timeline stands in while time remains.

OUT receives capture.tar.gz (every raw output: ncu raw CSV (the .ncu-rep reports stay behind), nsys CSV reports, driver
answers, logs, `ncu --query-metrics`, `nsys stats --help-reports`, versions) and results.json (the
parsed records and summaries, what evals.device.write_reports reads), and summary.txt, whose table
is also printed last.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from tools import roofline
from tools.process import kill_group, wait_then_kill_group
from tools.profilers import ncu as ncu_tool
from tools.profilers import ncu_records
from tools.profilers import nsys as nsys_tool
from tools.profilers.system_profile import torch_profile
from tools.profilers.timeline import unavailable
from tools.profilers.tool_run import (
    DEFAULT_ITERS,
    DEFAULT_WARMUP,
    DriverFiles,
    driver_command,
    driver_env,
    meta_failure,
    read_meta,
    run_tool,
)

REPO = Path(__file__).resolve().parents[2]
ESTIMATE_S = {"ncu": 15.0, "nsys": 18.0, "torch": 10.0, "ceilings": 10.0}  # until one of each ran
RESERVE_S = 15.0  # kept for the last post-processing, the archive and the table
TORCH_TIMELINES = ("synthetic_host_sync",)
SKIP_IN_TAR = (".sqlite", ".qdstrm", ".nsys-rep", ".ncu-rep", ".tmp")  # binary; the CSVs carry them


class Capture:
    """The state of one capture: deadline, folders, results, job log."""

    def __init__(self, inputs: Path, out: Path, work: Path, budget_s: float) -> None:
        self.started = time.monotonic()
        self.deadline = self.started + budget_s
        self.inputs = inputs
        self.out = out
        self.work = work
        self.raw = work / "raw"
        self.cache = work / "build-cache"
        self.raw.mkdir(parents=True, exist_ok=True)
        self.manifest = json.loads((inputs / "manifest.json").read_text())
        self.entries = {e["key"]: e for e in self.manifest["entries"]}
        self.results: dict[str, Any] = {
            "manifest": self.manifest,
            "entries": {
                key: {"problem": e["problem"], "plan": _plan(inputs / key)} for key, e in self.entries.items()
            },
            "jobs": [],
            "skipped": [],
        }
        self.durations: dict[str, list[float]] = {}
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=4)
        self.pending: list[tuple[str, str, concurrent.futures.Future[dict[str, dict[str, Any]]]]] = []
        self.builds: dict[str, subprocess.Popen[bytes]] = {}

    def stop_builds(self) -> None:
        """Builds run in their own sessions, which outlive the command: end any still running."""
        for proc in self.builds.values():
            if proc.poll() is None:
                kill_group(proc.pid)
                proc.wait()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def log(self, message: str) -> None:
        print(f"[{self.elapsed():6.1f}s] {message}", flush=True)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def estimate(self, kind: str) -> float:
        seen = self.durations.get(kind)
        return max(seen) if seen else ESTIMATE_S[kind]

    def allowed(self, kind: str, key: str, target: str) -> bool:
        if self.remaining() - RESERVE_S >= self.estimate(kind):
            return True
        self.results["skipped"].append({"kind": kind, "key": key, "target": target})
        self.log(f"skip {kind} {key} {target}: {self.remaining():.0f} s left")
        return False

    def record(self, kind: str, key: str, target: str, seconds: float, status: str) -> None:
        self.durations.setdefault(kind, []).append(seconds)
        self.results["jobs"].append(
            {"kind": kind, "key": key, "target": target, "seconds": round(seconds, 2), "status": status}
        )
        self.log(f"{kind:8s} {key:34s} {target:9s} {status:12s} {seconds:6.1f}s")

    def sources(self, key: str) -> tuple[str, str]:
        folder = self.inputs / key
        return (folder / "problem.py").read_text(), (folder / "candidate.py").read_text()

    def slot(self, key: str, target: str) -> dict[str, Any]:
        return self.results["entries"][key].setdefault(target, {})


def _plan(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / "plan.json").read_text())
    except (OSError, ValueError):
        return None


def _capture_text(command: list[str], path: Path, timeout_s: float = 120.0) -> str:
    run = run_tool(command, timeout_s=timeout_s, log_path=path)
    return run.output


def environment(cap: Capture) -> tuple[str | None, str | None, set[str]]:
    """Versions, the chip's metric list and nsys's report list, saved raw; returns (ncu, nsys, metrics)."""
    ncu, nsys = ncu_tool.find_ncu(), nsys_tool.find_nsys()
    lines = [f"python {sys.version.split()[0]} at {sys.executable}"]
    try:
        import torch

        lines.append(f"torch {torch.__version__} cuda {torch.version.cuda}")
    except ImportError:
        lines.append("torch: not importable")
    smi = shutil.which("nvidia-smi")
    if smi:
        lines.append(
            _capture_text(
                [smi, "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv"],
                cap.raw / "nvidia-smi.txt",
            ).strip()
        )
    available: set[str] = set()
    lines.append(f"ncu: {ncu}")
    if ncu:
        lines.append(_capture_text([ncu, "--version"], cap.raw / "ncu-version.txt").strip())
        available = ncu_tool.parse_query_metrics(
            _capture_text([ncu, "--query-metrics"], cap.raw / "ncu-query-metrics.txt")
        )
        bases = sorted({m.split(".")[0] for m in (*ncu_tool.EXTRA_METRICS, *ncu_records.SECTION_METRICS)})
        _capture_text(
            [ncu, "--query-metrics", "--query-metrics-mode", "suffix", "--metrics", ",".join(bases)],
            cap.raw / "ncu-query-metrics-suffix.txt",
        )
        _capture_text([ncu, "--list-sections"], cap.raw / "ncu-list-sections.txt")
    kept, dropped = ncu_tool.select_metrics(ncu_tool.EXTRA_METRICS, available)
    cap.results["metrics"] = {"available_count": len(available), "kept": kept, "dropped": dropped}
    lines.append(
        f"ncu metrics: {len(available)} base names known, {len(kept)} extras kept, dropped {dropped}"
    )
    lines.append(f"nsys: {nsys}")
    if nsys:
        lines.append(_capture_text([nsys, "--version"], cap.raw / "nsys-version.txt").strip())
        _capture_text([nsys, "stats", "--help-reports"], cap.raw / "nsys-help-reports.txt")
        lines.append(f"QdstrmImporter: {nsys_tool.find_importer(nsys)}; libraries: {nsys_tool.library_dir()}")
    (cap.raw / "versions.txt").write_text("\n".join(lines) + "\n")
    cap.results["versions"] = lines
    for line in lines:
        cap.log(line.splitlines()[0] if line else line)
    return ncu, nsys, available


def start_builds(cap: Capture) -> dict[str, subprocess.Popen[bytes]]:
    """One background build per candidate (CPU only; the GPU stays free for the references)."""
    procs = {}
    for key in cap.entries:
        folder = cap.raw / key
        folder.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "tools.profilers.target",
            "--mode",
            "build",
            "--problem",
            str(cap.inputs / key / "problem.py"),
            "--candidate",
            str(cap.inputs / key / "candidate.py"),
            "--cache-dir",
            str(cap.cache),
            "--out",
            str(folder / "build.json"),
        ]
        log = open(folder / "build.log", "wb")  # noqa: SIM115 - closed when the build is collected
        procs[key] = subprocess.Popen(
            command,
            cwd=folder,
            env=driver_env(folder, {"MAX_JOBS": "2"}),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        procs[key].log = log  # type: ignore[attr-defined]
    cap.log(f"started {len(procs)} candidate builds")
    cap.builds = procs
    return procs


def wait_build(cap: Capture, key: str, procs: dict[str, subprocess.Popen[bytes]]) -> bool:
    proc = procs.get(key)
    if proc is None:
        return False
    started = time.monotonic()
    wait_then_kill_group(proc, max(1.0, cap.remaining() - RESERVE_S))
    proc.log.close()  # type: ignore[attr-defined]
    meta = read_meta(cap.raw / key / "build.json")
    cap.results["entries"][key]["build"] = meta
    waited = time.monotonic() - started
    if waited > 1:
        cap.log(f"waited {waited:.0f} s for the build of {key}")
    return meta.get("status") == "ok"


def ncu_job(cap: Capture, ncu: str, available: set[str], key: str, target: str) -> None:
    if not cap.allowed("ncu", key, target):
        return
    problem, candidate = cap.sources(key)
    result = ncu_tool.profile_kernels(
        problem,
        candidate if target == "candidate" else None,
        target=target,
        cache_dir=cap.cache,
        timeout_s=max(30.0, min(180.0, cap.remaining() - RESERVE_S)),
        keep_dir=cap.raw / key / f"ncu-{target}",
        ncu=ncu,
        available=available,
    )
    cap.slot(key, target)["ncu"] = result.to_dict()
    cap.record("ncu", key, target, result.seconds, f"{result.status}:{len(result.kernels)}")


def nsys_job(cap: Capture, nsys: str, key: str, targets: list[str]) -> None:
    """Record every target of one program in one nsys session (ranges split them); stats run in the pool."""
    label = "+".join(targets)
    if not cap.allowed("nsys", key, label):
        return
    problem, candidate = cap.sources(key)
    directory = cap.raw / key / "nsys"
    files = DriverFiles.write(directory, problem, candidate if "candidate" in targets else None, "nsys")
    base = directory / "nsys"
    command = driver_command(
        files,
        target="both" if len(targets) > 1 else targets[0],
        mode="range",
        iters=DEFAULT_ITERS,
        warmup=DEFAULT_WARMUP,
        cache_dir=cap.cache,
    )
    run = run_tool(
        nsys_tool.record_command(nsys, base, command),
        timeout_s=max(30.0, min(180.0, cap.remaining() - RESERVE_S)),
        cwd=directory,
        env=driver_env(directory),
        log_path=directory / "nsys.log",
    )
    meta = read_meta(files.meta)
    failure = meta_failure(meta, run)
    if failure is not None:
        for target in targets:
            cap.slot(key, target)["system"] = unavailable("nsys", target, failure, status="failed")
        cap.record("nsys", key, label, run.seconds, "failed")
        return
    future = cap.pool.submit(
        nsys_tool.summarize_recording, nsys, base, targets=targets, meta=meta, iters=DEFAULT_ITERS
    )
    cap.pending.append((key, label, future))
    cap.record("nsys", key, label, run.seconds, "recorded")


def torch_job(cap: Capture, key: str, target: str, slot: str) -> None:
    if not cap.allowed("torch", key, target):
        return
    problem, candidate = cap.sources(key)
    started = time.monotonic()
    summary = torch_profile(
        problem,
        candidate if target == "candidate" else None,
        target=target,
        cache_dir=cap.cache,
        timeout_s=max(30.0, min(120.0, cap.remaining() - RESERVE_S)),
        keep_dir=cap.raw / key / f"torch-{target}",
    )
    cap.slot(key, target)[slot] = summary
    cap.record("torch", key, target, time.monotonic() - started, str(summary.get("status")))


def ceilings_job(cap: Capture) -> None:
    if not cap.allowed("ceilings", "-", "-"):
        return
    started = time.monotonic()
    path = cap.raw / "ceilings.json"
    measured = roofline.measure_in_subprocess(cache=path, timeout_s=min(120.0, cap.remaining() - RESERVE_S))
    cap.results["ceilings"] = measured.to_dict() if measured else None
    cap.record("ceilings", "-", "-", time.monotonic() - started, "ok" if measured else "failed")


def collect(cap: Capture) -> None:
    """Wait (within the budget) for the nsys post-processing still running."""
    for key, label, future in cap.pending:
        targets = label.split("+")
        try:
            summaries = future.result(timeout=max(1.0, cap.deadline - time.monotonic() - 5.0))
        except concurrent.futures.TimeoutError:
            reason = "nsys stats did not finish within the capture budget"
            summaries = {t: unavailable("nsys", t, reason, status="failed") for t in targets}
        except Exception as exc:  # a parser bug must not lose the other results
            reason = f"post-processing failed: {type(exc).__name__}: {exc}"
            summaries = {t: unavailable("nsys", t, reason, status="failed") for t in targets}
        for target, summary in summaries.items():
            cap.slot(key, target)["system"] = summary
    cap.pool.shutdown(wait=False, cancel_futures=True)


def table(cap: Capture) -> str:
    """One row per profiled program: ncu kernels and class, nsys timeline, % of SOL."""
    ceilings = roofline.Ceilings.from_dict(cap.results["ceilings"]) if cap.results.get("ceilings") else None
    ceilings = ceilings or roofline.device_ceilings("NVIDIA H200")
    rows = [
        f"{'program':34s} {'target':9s} {'ncu':14s} {'top kernel class':16s} {'wall ms':>9s} {'busy%':>6s} "
        f"{'kern/fwd':>8s} {'syncs':>5s} {'%SOL':>6s}"
    ]
    for key, entry in cap.results["entries"].items():
        spec = cap.entries[key]
        sol = roofline.speed_of_light(spec["total_flops"], spec["total_bytes"], ceilings)
        for target in ("reference", "candidate"):
            slot = entry.get(target)
            if not slot:
                continue
            ncu = slot.get("ncu") or {}
            kernels = ncu.get("kernels", [])
            top_class = ""
            if kernels:
                top = max(kernels, key=lambda k: k.get("duration_ns") or 0.0)
                top_class = roofline.classify_kernel(ncu_tool.KernelMetrics.from_dict(top))[0]
            system = slot.get("system") or slot.get("torch") or {}
            ok = system.get("status") == "ok"
            wall = system.get("wall_ms") if ok else None
            pct = sol.pct_of_sol(wall) if wall else None
            rows.append(
                f"{key:34s} {target:9s} {ncu.get('status', '-') + ':' + str(len(kernels)):14s} {top_class:16s} "
                f"{wall if wall is not None else '-':>9} {system.get('gpu_busy_pct', '-') if ok else '-':>6} "
                f"{system.get('kernel_count', '-') if ok else '-':>8} "
                f"{system.get('host_syncs', {}).get('count', '-') if ok else '-':>5} "
                f"{f'{pct:.1f}' if pct is not None else '-':>6}"
            )
    skipped = cap.results["skipped"]
    rows.append(f"skipped jobs: {len(skipped)}" + (f" ({skipped})" if skipped else ""))
    rows.append(f"elapsed {cap.elapsed():.0f} s; ceilings: {ceilings.source}")
    return "\n".join(rows)


def pack(cap: Capture) -> Path:
    """capture.tar.gz of the raw folder (recordings and SQLite exports left out: the CSVs carry them)."""
    (cap.raw / "results.json").write_text(json.dumps(cap.results, indent=1, default=str))
    archive = cap.out / "capture.tar.gz"

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if info.name.endswith(SKIP_IN_TAR) else info

    with tarfile.open(archive, "w:gz") as tar:
        tar.add(cap.raw, arcname="capture", filter=keep)
    return archive


def built(cap: Capture, key: str) -> bool:
    return cap.results["entries"][key].get("build", {}).get("status") == "ok"


def run(cap: Capture) -> None:
    """The jobs in priority order: what the GPU can do while the candidates build comes first."""
    ncu, nsys, available = environment(cap)
    procs = start_builds(cap)
    suite = [k for k, e in cap.entries.items() if not e.get("synthetic")]
    synthetic = [k for k, e in cap.entries.items() if e.get("synthetic")]
    if ncu:
        for key in suite:
            ncu_job(cap, ncu, available, key, "reference")
    ceilings_job(cap)
    for key in suite + synthetic:
        if wait_build(cap, key, procs) and ncu:
            ncu_job(cap, ncu, available, key, "candidate")
    for key in suite + synthetic:
        targets = [t for t in cap.entries[key]["targets"] if t == "reference" or built(cap, key)]
        if not targets:
            continue
        if nsys:
            nsys_job(cap, nsys, key, targets)
        else:
            for target in targets:
                torch_job(cap, key, target, "system")
    for key in TORCH_TIMELINES if nsys else ():  # without nsys the timelines above already are torch's
        if key in cap.entries and built(cap, key):
            torch_job(cap, key, "candidate", "torch")
    collect(cap)
    for key in suite:  # nsys recorded but could not report: the PyTorch profiler stands in
        for target in cap.entries[key]["targets"]:
            system = cap.slot(key, target).get("system") or {}
            if system.get("status") == "failed" and (target == "reference" or built(cap, key)):
                cap.slot(key, target)["nsys_failure"] = system
                torch_job(cap, key, target, "system")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m evals.device.capture_profiles", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--inputs", default=str(REPO / "out" / "profile-inputs"), help="prepare_profiles' folder"
    )
    parser.add_argument("--out", required=True, help="where capture.tar.gz, results.json and summary.txt go")
    parser.add_argument("--budget-s", type=float, default=230.0, help="wall-time budget of the whole capture")
    parser.add_argument("--only", nargs="*", help="profile only these keys (e.g. level1_1_ReLU)")
    parser.add_argument("--work", help="working folder (default: a temporary one)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="stitch-capture-"))
    cap = Capture(Path(args.inputs).resolve(), out, work, args.budget_s)  # build jobs run elsewhere
    if args.only:
        cap.entries = {k: v for k, v in cap.entries.items() if k in args.only}
        cap.results["entries"] = {k: v for k, v in cap.results["entries"].items() if k in args.only}
    try:
        run(cap)
    finally:
        cap.stop_builds()
        cap.results["elapsed_s"] = round(cap.elapsed(), 1)
        summary = table(cap)
        (cap.raw / "summary.txt").write_text(summary + "\n")
        archive = pack(cap)
        shutil.copyfile(cap.raw / "results.json", out / "results.json")
        shutil.copyfile(cap.raw / "summary.txt", out / "summary.txt")
        print(f"wrote {archive} ({archive.stat().st_size / 1e6:.2f} MB), {out / 'results.json'}")
        print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
