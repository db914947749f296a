"""Child-process helpers: capped logs, whole-group kills, the JSON files parent and child exchange."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tools.process import CappedLog, read_json, wait_then_kill_group, write_atomic


def test_capped_log_keeps_head_on_disk_and_tail_in_memory(tmp_path: Path) -> None:
    log = CappedLog(tmp_path / "out.log", head_bytes=1000, tail_bytes=300)
    for i in range(500):
        log.write(f"line {i:04d}\n".encode())
    log.close()
    head = (tmp_path / "out.log").read_text()
    assert head.startswith("line 0000") and "more bytes not kept" in head
    assert len(head) < 1100
    tail = log.tail_text(100)
    assert tail.endswith("line 0499\n") and "bytes before" in tail


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_whole_group_dies_with_the_child_even_after_a_clean_exit(tmp_path: Path) -> None:
    grandchild = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys; "
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        f"open({str(grandchild)!r}, 'w').write(str(p.pid))"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    assert not wait_then_kill_group(proc, timeout_s=60)  # the child exits; its sleeper stays behind
    pid = int(grandchild.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), "the grandchild outlived its group"
    hung = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    assert wait_then_kill_group(hung, timeout_s=0.5) and hung.returncode is not None


def test_json_files_are_written_whole_and_read_back_or_none(tmp_path: Path) -> None:
    path = tmp_path / "answer.json"
    write_atomic(path, '{"status": "passed"}')
    assert read_json(path) == {"status": "passed"} and not (tmp_path / "answer.json.tmp").exists()
    assert read_json(tmp_path / "missing.json") is None
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "half.json").write_text('{"status": ')
    assert read_json(tmp_path / "list.json") is None and read_json(tmp_path / "half.json") is None
