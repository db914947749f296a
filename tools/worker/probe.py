"""`python -m tools.worker.probe`: is the GPU this process sees still usable? (issue 15)

Why: a kernel that corrupts its CUDA context shows up as the evaluation worker's `runtime_error` or
`crashed`, which is the candidate's own failure as long as a fresh process gets a working device.
A GPU that stays broken for every process (it fell off the bus, an uncorrectable ECC error, a hang
that needs a reset) is not the problem's fault, and every later problem sent to it would fail too.
So the eval runs this probe in a fresh process on that GPU after such a failure: for every device
CUDA_VISIBLE_DEVICES shows, allocate, run a trivial kernel, synchronise and check the answer.

Prints one JSON line: {"ok", "devices": [{"index", "uuid", "name", "ok", "error"}], "error"} and
exits 0 when every visible device answered, 1 otherwise. A machine without an NVIDIA driver has
nothing to probe (ok, with a note): logical GPUs of a CPU machine are not broken. torch only.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

ELEMENTS = 1 << 20  # 4 MiB: enough to launch a real grid, small enough for a full GPU


def driver_present() -> bool:
    """An NVIDIA driver's control device exists (a GPU machine, even one whose GPU is gone)."""
    return Path("/dev/nvidiactl").exists()


def check_device(index: int) -> dict[str, Any]:
    """Allocate on device `index`, run a kernel, synchronise, read the answer back; raises on a fault."""
    import torch

    device = torch.device("cuda", index)
    props = torch.cuda.get_device_properties(index)
    entry: dict[str, Any] = {"index": index, "uuid": str(getattr(props, "uuid", "")), "name": props.name}
    x = torch.ones(ELEMENTS, device=device)
    total = (x * 2).sum()
    torch.cuda.synchronize(device)
    value = float(total.item())
    if value != 2.0 * ELEMENTS:
        raise RuntimeError(f"wrong answer: {value} for {2.0 * ELEMENTS}")
    return entry


def probe() -> dict[str, Any]:
    """Every visible device's answer; never raises."""
    import torch

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    answer: dict[str, Any] = {"ok": True, "devices": [], "visible": visible}
    try:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception as exc:  # noqa: BLE001 - CUDA's own initialisation failing is the finding
        count, answer["error"] = 0, f"CUDA failed to start: {type(exc).__name__}: {exc}"
    if count == 0:
        if "error" not in answer and (not driver_present() or visible == ""):
            answer["note"] = "no NVIDIA driver here (or no device asked for): nothing to probe"
            return answer
        answer["ok"] = False
        answer.setdefault("error", f"CUDA sees no usable device (CUDA_VISIBLE_DEVICES={visible})")
        return answer
    for index in range(count):
        try:
            entry = check_device(index)
            entry["ok"] = True
        except Exception as exc:  # noqa: BLE001 - one device's fault is this probe's answer
            first = next((line for line in str(exc).splitlines() if line.strip()), "")
            entry = {"index": index, "ok": False, "error": f"{type(exc).__name__}: {first[:300]}"}
        answer["devices"].append(entry)
    failed = [entry for entry in answer["devices"] if not entry["ok"]]
    if failed:
        answer["ok"] = False
        answer["error"] = "; ".join(f"device {entry['index']}: {entry['error']}" for entry in failed)
    return answer


def main() -> int:
    answer = probe()
    print(json.dumps(answer), flush=True)
    return 0 if answer["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
