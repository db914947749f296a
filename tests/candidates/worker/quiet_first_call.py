"""Correct only when its first call ran inside the machine's quiet timing window.

The worker runs a program's first call there (a program times its own choices then: a cuDNN
algorithm search). This candidate looks at the window on that call, by asking for the window's
shared lock without waiting (refused while a timing holds it), and adds 1 to every later answer
when it found the window open.
"""
import fcntl
import os
from pathlib import Path

import torch
import torch.nn as nn


def _window_held() -> bool:
    path = Path(os.environ["STITCHCUDA_TIMING_WINDOW"]) / "timing-window.lock"
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


class ModelNew(nn.Module):
    def __init__(self, scale: float, bias: float):
        super().__init__()
        self.scale = scale
        self.bias = bias
        self.first_call_quiet: bool | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.first_call_quiet is None:
            self.first_call_quiet = _window_held()
        return x * self.scale + self.bias + (0.0 if self.first_call_quiet else 1.0)
