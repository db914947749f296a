"""evals.device.slim_wheel on a small wheel built here, installed by the real pip afterwards."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from evals.device import slim_wheel

FILES = {
    "pkg/__init__.py": b"VALUE = 42\n",
    "pkg/jars/big.jar": b"\0" * 4096,
    "pkg/web/app.js.map": b"{}",
    "pkg/web/app.js": b"var a;",
    "pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n",
    "pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _wheel(folder: Path) -> Path:
    path = folder / "pkg-1.0-py3-none-any.whl"
    record = "".join(_record_line(n, d) + "\n" for n, d in FILES.items()) + "pkg-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in FILES.items():
            wheel.writestr(name, data)
        wheel.writestr("pkg-1.0.dist-info/RECORD", record)
    return path


def test_the_slim_wheel_loses_the_dropped_members_and_installs(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    target, count, saved = slim_wheel.slim(wheel, tmp_path / "out", ["pkg/jars/", ".js.map"])
    assert target.name == wheel.name and count == 2 and saved == 4096 + 2
    with zipfile.ZipFile(target) as slim:
        names = set(slim.namelist())
        record = slim.read("pkg-1.0.dist-info/RECORD").decode()
        assert slim.read("pkg/web/app.js") == FILES["pkg/web/app.js"]
    assert "pkg/jars/big.jar" not in names and "pkg/web/app.js.map" not in names
    assert "big.jar" not in record and ".js.map" not in record and "pkg/web/app.js," in record
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site), str(target)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (site / "pkg" / "__init__.py").read_text() == "VALUE = 42\n" and not (
        site / "pkg" / "jars"
    ).exists()


def test_slimming_refuses_to_overwrite_its_input_or_to_drop_nothing(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    with pytest.raises(ValueError, match="overwrite"):
        slim_wheel.slim(wheel, tmp_path, ["pkg/jars/"])
    with pytest.raises(ValueError, match="nothing"):
        slim_wheel.slim(wheel, tmp_path / "out", [])
    assert slim_wheel.dropped("ray/jars/x.jar", ["ray/jars/"]) and not slim_wheel.dropped(
        "ray/jarsx", ["ray/jars/"]
    )
