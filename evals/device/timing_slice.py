"""The helpers of evals/device/timing_suite.sh: one slice of a long eval, and the state between slices.

    python3 -m evals.device.timing_slice run --seconds S [--grace G] -- CMD ...
    python3 -m evals.device.timing_slice count --suite evals/suite [--only RE] RESULTS
    python3 -m evals.device.timing_slice restore --state DIR --name NAME --work DIR --caches ...
    python3 -m evals.device.timing_slice save --state DIR --into DIR --name NAME --work DIR --caches ... --budget-mb N
    python3 -m evals.device.timing_slice seed --state DIR --name NAME --records RESULTS [--rerun RE]
    python3 -m evals.device.timing_slice snapshot --state DIR --name NAME --into SNAPSHOT
    python3 -m evals.device.timing_slice resume --state DIR --name NAME --from SNAPSHOT

Why: a full-suite eval takes longer than one device call (600 s) and than one session's device time,
and every call may land on a fresh machine. So the eval runs in slices, and what a slice must hand
the next one travels as one carried folder (the state; it comes back from the device as one file):

- `run`: the slice itself. The eval and everything it starts die at the slice's end: the command
  runs in a session of its own under this process as a child subreaper (prctl), so a sandboxed
  worker that made its own session or process group is still our descendant; at the deadline the
  whole tree gets SIGTERM, then SIGKILL after the grace. Exit 124 on the deadline, as `timeout`.
- `count`: the problems the eval runs (the suite filtered by --only, exactly as `stitchcuda eval`
  filters it) and how many are recorded: 'RECORDED TOTAL'.
- `save`: the next state: the results, the baseline cache, the commands and the slice log (small),
  the run folders of problems not yet recorded (their graph checkpoints: a problem cut at the slice's
  end resumes at its last finished node instead of from scratch), then as much of the build cache
  (newest entries first, without object files) and of torch.compile's caches as the budget leaves.
  It prints the size of each part and of the whole caches on disk.
- `restore`: on a machine whose work folder is not the state's latest slice (a fresh machine), put
  the results, the run folders and the caches back.
- `seed` (CPU side): start a state from an eval's committed records, when the state folder itself
  was lost with its checkout: the eval then runs only the problems not recorded. `--rerun` names the
  problems (a regular expression on `level/name`) to run again, e.g. those whose kernels changed.
- `snapshot` (CPU side, after a slice): copy the eval's small files (records, slice log, command, GPU
  model) and the baseline cache into a folder that is committed, so the eval survives the checkout;
  `resume` (timing_suite.sh, at every slice's start): a state without the eval takes them back from
  there. Delete the snapshot's files of an eval to start it afresh.

Standard library only (the eval's own modules only for `count`).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

PR_SET_CHILD_SUBREAPER = 36
SLICE_FILE = ".slice"  # in the work folder and the state: which slice the folder holds
RUN_FILE_CAP = 4 << 20  # a run folder's file above this (a profile capture) stays behind
OBJECT_SUFFIXES = (".o", ".obj", ".ninja_deps", ".ninja_log")  # not needed for a cache hit
# Choice files at the build cache's root, carried first: the conv algorithm choices (templates/conv.cuh),
# whose searches a fresh machine of the same kind would otherwise repeat.
ROOT_FILES = ("cudnn-algos.tsv",)


# ----------------------------------------------------------------------------------------------
# run: one slice, its whole process tree killed at the end
# ----------------------------------------------------------------------------------------------


def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to us (Linux); False where that is not possible."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> list[int]:
    """Every live process below `root` (by parent pid, read from /proc).

    Zombies are walked through but not returned: /proc is not read atomically, so a child may have
    been read with its old parent's pid just before that parent exited.
    """
    children: dict[int, list[int]] = {}
    zombies: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":  # dead, waiting to be reaped
            zombies.add(int(entry.name))
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in zombies:
                found.append(child)
            todo.append(child)
    return found


def _reap() -> None:
    """Collect exited children (orphans re-parented to us included), without blocking."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _none_left(me: int, scans: int = 3, gap_s: float = 0.1) -> bool:
    """No descendant in `scans` scans in a row: one empty scan can miss a child whose parent was
    exiting while /proc was read (it is re-parented to us a moment later)."""
    for i in range(scans):
        if i:
            time.sleep(gap_s)
        _reap()
        if descendants(me):
            return False
    return True


def _signal_all(me: int, sig: signal.Signals) -> None:
    for pid in descendants(me):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def kill_tree(grace_s: float) -> int:
    """SIGTERM every descendant of this process, SIGKILL what is left after the grace; how many there were."""
    me = os.getpid()
    first = descendants(me)
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        _signal_all(me, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if _none_left(me):
                return len(first)
            if sig == signal.SIGKILL:  # a late re-parented one (SIGTERM goes once: handlers may clean up)
                _signal_all(me, sig)
            time.sleep(0.1)
    _reap()
    return len(first)


def run_slice(command: Sequence[str], seconds: float, grace_s: float) -> int:
    """Run `command` for at most `seconds`; then (and also when it ends first) nothing it started survives."""
    reaper = become_subreaper()
    proc = subprocess.Popen(list(command), start_new_session=True)
    try:
        code = proc.wait(timeout=max(1.0, seconds))
    except subprocess.TimeoutExpired:
        code = 124
        print(f"slice: {seconds:.0f} s are up; stopping the eval and everything it started", flush=True)
    left = kill_tree(grace_s)
    if left:
        print(f"slice: {left} process(es) of the slice killed at its end", flush=True)
    if not reaper:
        print(
            "slice: could not become a child subreaper: orphaned processes may outlive the slice", flush=True
        )
    return code


# ----------------------------------------------------------------------------------------------
# count: the problems this eval runs, and how many are recorded
# ----------------------------------------------------------------------------------------------


def count(suite: str, only: str | None, results: Path) -> tuple[int, int]:
    """(recorded, total) for the suite as `stitchcuda eval SUITE --only RE` selects it."""
    import re

    from evals.runner import discover, read_results

    keys = {p.key for p in discover([suite]) if not only or re.search(only, p.key)}
    recorded = {r["problem"] for r in read_results(results)} & keys
    return len(recorded), len(keys)


# ----------------------------------------------------------------------------------------------
# save / restore: the state between slices
# ----------------------------------------------------------------------------------------------


def recorded_keys(results: Path) -> set[str]:
    keys: set[str] = set()
    if results.exists():
        for line in results.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "problem" in record:
                keys.add(record["problem"])
    return keys


def unrecorded_runs(work: Path) -> list[Path]:
    """Run folders (OUT/runs/<level>/<name>) of problems without a record: the ones a slice cut."""
    done = recorded_keys(work / "results.jsonl")
    runs = work / "runs"
    if not runs.is_dir():
        return []
    return [
        folder
        for level in sorted(runs.iterdir())
        if level.is_dir()
        for folder in sorted(level.iterdir())
        if folder.is_dir() and f"{level.name}/{folder.name}" not in done
    ]


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _add_capped(
    archive: tarfile.TarFile, sink: Path, groups: list[list[tuple[Path, str]]], budget: int
) -> int:
    """Add whole groups of (path, name), in order, while the archive stays under `budget` bytes.

    A group is added entirely or not at all (a build entry without its library would be a broken
    cache hit), and only when its raw size still fits (no compression assumed, so the archive never
    overshoots by more than zlib's buffer). Returns how many groups went in.
    """
    added = 0
    for group in groups:
        raw = sum(path.stat().st_size for path, _ in group)
        if sink.stat().st_size + raw > budget:
            continue  # a smaller group further on may still fit
        for path, name in group:
            archive.add(path, arcname=name)
        added += 1
    return added


def file_groups(root: Path) -> list[list[tuple[Path, str]]]:
    """A cache folder's files, grouped by the folder that holds them, newest folder first."""
    if not root.is_dir():
        return []
    groups: dict[Path, list[Path]] = {}
    for file in root.rglob("*"):
        if file.is_file() and not file.is_symlink():
            groups.setdefault(file.parent, []).append(file)
    newest = sorted(groups, key=lambda d: max(f.stat().st_mtime for f in groups[d]), reverse=True)
    return [[(f, str(f.relative_to(root))) for f in sorted(groups[d])] for d in newest]


def cache_entries(build_cache: Path) -> list[Path]:
    """The build cache's finished entries (a folder with stitch_build.json), newest first."""
    if not build_cache.is_dir():
        return []
    entries = [d for d in build_cache.iterdir() if d.is_dir() and (d / "stitch_build.json").exists()]
    return sorted(entries, key=lambda d: (d / "stitch_build.json").stat().st_mtime, reverse=True)


def save(
    state: Path, into: Path, name: str, work: Path, caches: dict[str, Path], budget_mb: float
) -> dict[str, Any]:
    """Write the next state into `into` (the old `state` supplies what this slice did not touch)."""
    into.mkdir(parents=True, exist_ok=True)
    for old in sorted(state.glob("*")) if state.is_dir() else []:  # the other eval's files, the slice log ...
        if old.is_file() and not (into / old.name).exists():
            shutil.copy2(old, into / old.name)
    if (work / "results.jsonl").exists():
        shutil.copy2(work / "results.jsonl", into / f"{name}.results.jsonl")
    slice_no = int((work / SLICE_FILE).read_text() or 0) if (work / SLICE_FILE).exists() else 0
    (into / f"{name}{SLICE_FILE}").write_text(str(slice_no))
    sizes: dict[str, Any] = {}
    runs_tar = into / f"{name}.runs.tgz"
    with tarfile.open(runs_tar, "w:gz") as archive:
        for folder in unrecorded_runs(work):
            for file in sorted(folder.rglob("*")):
                if file.is_file() and not file.is_symlink() and file.stat().st_size <= RUN_FILE_CAP:
                    archive.add(file, arcname=str(file.relative_to(work)))
    sizes["runs_in_flight"] = len(unrecorded_runs(work))
    budget = int(budget_mb * (1 << 20))
    used = sum(_size(f) for f in into.iterdir() if f.is_file() and not f.name.endswith(".cache.tgz"))
    for label, root in caches.items():
        sink = into / f"{label}.cache.tgz"
        sink.unlink(missing_ok=True)
        on_disk = _size(root) if root.exists() else 0
        sizes[f"{label}_on_disk"] = on_disk
        if label == "build":  # the root's choice files; the finished entries, newest first, meta file last
            choices = [(root / f, f) for f in ROOT_FILES if (root / f).is_file()]
            groups = ([choices] if choices else []) + [
                sorted(
                    (
                        (f, f"{entry.name}/{f.name}")
                        for f in entry.iterdir()
                        if f.is_file() and not f.name.endswith(OBJECT_SUFFIXES)
                    ),
                    key=lambda item: item[0].name == "stitch_build.json",
                )
                for entry in cache_entries(root)
            ]
        else:
            groups = file_groups(root)
        with tarfile.open(sink, "w:gz") as archive:
            added = _add_capped(archive, sink, groups, budget - used)
        sizes[f"{label}_carried"] = sink.stat().st_size
        sizes[f"{label}_groups"] = f"{added} of {len(groups)}"
        used += sink.stat().st_size
    sizes["state"] = sum(_size(f) for f in into.iterdir() if f.is_file())
    return sizes


class OtherGpu(SystemExit):
    """The eval belongs to another GPU model: its speedups are not to be mixed with this one's."""


def claim_gpu(state: Path, name: str, gpu: str) -> str:
    """Tie eval `name` to GPU model `gpu` (state/NAME.gpu) at its first slice, or check that it is tied
    to it; records taken on another model (a seed from another machine) move to NAME.other-gpu.jsonl,
    so the eval runs those problems again on this one. Raises OtherGpu on a mismatch."""
    tied = state / f"{name}.gpu"
    if tied.exists() and tied.read_text().strip() != gpu:
        raise OtherGpu(
            f"eval {name!r} runs on {tied.read_text().strip()!r}, this machine has {gpu!r}: "
            "its speedups are not comparable (ask for that GPU, or start another eval name)"
        )
    tied.write_text(gpu + "\n")
    results = state / f"{name}.results.jsonl"
    if not results.exists():
        return ""
    # a record naming no GPU (unverified, no device) stays
    other, mine = _partition(results, lambda record: str(record.get("device") or "") not in ("", gpu))
    if not other:
        return ""
    with (state / f"{name}.other-gpu.jsonl").open("a") as sink:
        sink.write("".join(line + "\n" for line in other))
    results.write_text("".join(line + "\n" for line in mine))
    return f"; {len(other)} records from another GPU set aside (run again here)"


def _partition(records: Path, chosen: Callable[[dict[str, Any]], bool]) -> tuple[list[str], list[str]]:
    """The record lines of a results file `chosen` picks, and the rest."""
    picked: list[str] = []
    rest: list[str] = []
    for line in records.read_text().splitlines():
        if line.strip():
            (picked if chosen(json.loads(line)) else rest).append(line)
    return picked, rest


def restore(state: Path, name: str, work: Path, caches: dict[str, Path], gpu: str = "") -> str:
    """Bring a fresh machine's work folder and caches up to the state's latest slice; what it did.
    With `gpu` (this machine's GPU model) the eval is tied to it first (claim_gpu)."""
    moved = claim_gpu(state, name, gpu) if gpu else ""
    if moved and (work / SLICE_FILE).exists():
        shutil.rmtree(work)  # a warm work folder still holds the set-aside records
    carried = state / f"{name}{SLICE_FILE}"
    latest = carried.read_text().strip() if carried.exists() else ""
    here = (work / SLICE_FILE).read_text().strip() if (work / SLICE_FILE).exists() else ""
    if here and int(here) >= int(latest or 0):  # a warm machine, as far as the state or further
        return f"work folder already holds slice {here} (a warm machine; the carried state is slice {latest or 0})"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    results = state / f"{name}.results.jsonl"
    if results.exists():
        shutil.copy2(results, work / "results.jsonl")
    runs = state / f"{name}.runs.tgz"
    restored = 0
    if runs.exists():
        with tarfile.open(runs) as archive:
            members = [m for m in archive.getmembers() if m.isfile() and _inside(m.name)]
            archive.extractall(work, members=members, filter="data")
            restored = len({Path(m.name).parts[:3] for m in members})
    for label, root in caches.items():
        sink = state / f"{label}.cache.tgz"
        if sink.exists():
            root.mkdir(parents=True, exist_ok=True)
            with tarfile.open(sink) as archive:
                members = [m for m in archive.getmembers() if _inside(m.name)]
                archive.extractall(root, members=members, filter="data")
    (work / SLICE_FILE).write_text(latest or "0")
    records = len(recorded_keys(work / "results.jsonl"))
    return f"restored slice {latest or 0}: {records} records, {restored} runs in flight{moved}"


def _inside(name: str) -> bool:
    return not (name.startswith("/") or ".." in Path(name).parts)


def next_slice(work: Path) -> int:
    """Number this slice (the work folder's counter plus one) and write it down."""
    path = work / SLICE_FILE
    number = int(path.read_text().strip() or 0) + 1 if path.exists() else 1
    work.mkdir(parents=True, exist_ok=True)
    path.write_text(str(number))
    return number


def _caches(pairs: Sequence[str]) -> dict[str, Path]:
    out = {}
    for pair in pairs:
        label, _, path = pair.partition("=")
        out[label] = Path(path)
    return out


def seed(state: Path, name: str, records: Path, rerun: str | None) -> str:
    """Write state/NAME.results.jsonl from `records`, leaving out the problems `rerun` matches."""
    target = state / f"{name}.results.jsonl"
    if target.exists():
        raise SystemExit(f"{target} exists: the state already holds eval {name!r} (remove it to seed again)")
    pattern = re.compile(rerun) if rerun else None
    dropped, kept = _partition(
        records, lambda record: pattern is not None and bool(pattern.search(str(record.get("problem", ""))))
    )
    again = [str(json.loads(line).get("problem", "")) for line in dropped]  # the problems left out
    state.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(line + "\n" for line in kept))
    return f"seeded {target}: {len(kept)} records kept; to run again: {', '.join(again) or 'none'}"


SNAPSHOT_FILES = (
    "{name}.results.jsonl",
    "{name}.slices.jsonl",
    "{name}.command",
    "{name}.gpu",
    "baselines.json",
)


def snapshot(state: Path, name: str, into: Path) -> str:
    """Copy eval `name`'s small files and the baseline cache from the state into `into` (to commit)."""
    if not (state / f"{name}.results.jsonl").is_file():
        raise SystemExit(f"{state} holds no records of eval {name!r}")
    into.mkdir(parents=True, exist_ok=True)
    copied = []
    for pattern in SNAPSHOT_FILES:
        source = state / pattern.format(name=name)
        if source.is_file():
            shutil.copyfile(source, into / source.name)
            copied.append(source.name)
    return f"snapshot of {name} in {into}: {', '.join(copied)}"


def resume(state: Path, name: str, source: Path) -> str:
    """Give a state that lacks eval `name` the snapshot's files of it; a state that has it is left alone."""
    if (state / f"{name}.results.jsonl").exists():
        return f"{state} already holds eval {name}"
    if not (source / f"{name}.results.jsonl").is_file():
        return f"no snapshot of eval {name} in {source}: it starts afresh"
    state.mkdir(parents=True, exist_ok=True)
    taken = []
    for pattern in SNAPSHOT_FILES:
        file = source / pattern.format(name=name)
        if file.is_file() and not (state / file.name).exists():
            shutil.copyfile(file, state / file.name)
            taken.append(file.name)
    return f"resumed eval {name} from {source}: {', '.join(taken)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m evals.device.timing_slice", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="verb", required=True)
    p = sub.add_parser("run")
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--grace", type=float, default=10.0)
    p.add_argument("command", nargs=argparse.REMAINDER)
    p = sub.add_parser("count")
    p.add_argument("--suite", default="evals/suite")
    p.add_argument("--only", default=None)
    p.add_argument("results", type=Path)
    for verb in ("save", "restore"):
        p = sub.add_parser(verb)
        p.add_argument("--state", type=Path, required=True)
        p.add_argument("--name", required=True)
        p.add_argument("--work", type=Path, required=True)
        p.add_argument("--caches", nargs="*", default=[], help="LABEL=FOLDER (build=..., inductor=...)")
        if verb == "restore":
            p.add_argument("--gpu", default="", help="this machine's GPU model: the eval is tied to one")
        if verb == "save":
            p.add_argument("--into", type=Path, required=True)
            p.add_argument("--budget-mb", type=float, default=15.0)
    p = sub.add_parser("next-slice")
    p.add_argument("--work", type=Path, required=True)
    p = sub.add_parser("seed")
    p.add_argument("--state", type=Path, required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--records", type=Path, required=True, help="an eval's results.jsonl")
    p.add_argument("--rerun", default=None, help="regular expression on level/name: run these again")
    for verb, flag in (("snapshot", "--into"), ("resume", "--from")):
        p = sub.add_parser(verb)
        p.add_argument("--state", type=Path, required=True)
        p.add_argument("--name", required=True)
        p.add_argument(flag, dest="folder", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.verb == "snapshot":
        print(snapshot(args.state, args.name, args.folder))
        return 0
    if args.verb == "resume":
        print(resume(args.state, args.name, args.folder))
        return 0
    if args.verb == "run":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        return run_slice(command, args.seconds, args.grace)
    if args.verb == "count":
        recorded, total = count(args.suite, args.only, args.results)
        print(recorded, total)
        return 0
    if args.verb == "next-slice":
        print(next_slice(args.work))
        return 0
    if args.verb == "seed":
        print(seed(args.state, args.name, args.records, args.rerun))
        return 0
    if args.verb == "restore":
        print(restore(args.state, args.name, args.work, _caches(args.caches), args.gpu))
        return 0
    sizes = save(args.state, args.into, args.name, args.work, _caches(args.caches), args.budget_mb)
    print(
        "state: "
        + ", ".join(
            f"{k} {_mib(v) if isinstance(v, int) and k != 'runs_in_flight' else v}" for k, v in sizes.items()
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
