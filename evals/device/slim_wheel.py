"""Repack a wheel without the parts a run does not load, so that it travels to the device machine.

Why: the device tool carries at most 64 MiB a call (working tree and carried folders together), and
Ray's cp312 wheel is 79 MB, 32 MB of it a Java jar that Python workers never open. Issue 12's Ray GPU
test needs Ray there (the device image lacks it): `evals/device/fetch_wheels.sh --ray` downloads the
wheel and calls this to drop the named members (path prefixes or suffixes) and their RECORD lines,
keeping the file name, so `pip install --no-deps` installs it as usual.

    python3 -m evals.device.slim_wheel WHEEL OUT_DIR --drop ray/jars/ --drop .js.map ...
"""

from __future__ import annotations

import argparse
import zipfile
from collections.abc import Sequence
from pathlib import Path


def dropped(name: str, drop: Sequence[str]) -> bool:
    """Whether a member goes: its path starts or ends with one of `drop` (folders end with "/")."""
    return any(name.startswith(d) or (not d.endswith("/") and name.endswith(d)) for d in drop)


def slim(wheel: Path, out_dir: Path, drop: Sequence[str]) -> tuple[Path, int, int]:
    """Write OUT_DIR/<same name> without the dropped members; (the new wheel, members dropped, bytes
    saved uncompressed). RECORD loses their lines; everything else is copied byte for byte."""
    if not drop:
        raise ValueError("nothing to drop")
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / wheel.name
    if target.resolve() == wheel.resolve():
        raise ValueError(f"{target} would overwrite the wheel it reads")
    count = saved = 0
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as sink:
        for info in source.infolist():
            if dropped(info.filename, drop):
                count += 1
                saved += info.file_size
                continue
            data = source.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines()
                data = "".join(f"{ln}\n" for ln in lines if not dropped(ln.split(",", 1)[0], drop)).encode()
            sink.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
    return target, count, saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m evals.device.slim_wheel", description=__doc__.split("\n")[0]
    )
    parser.add_argument("wheel", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument(
        "--drop", action="append", required=True, help="a member path prefix (folder/) or suffix"
    )
    args = parser.parse_args(argv)
    target, count, saved = slim(args.wheel, args.out_dir, args.drop)
    size = target.stat().st_size
    print(f"{target}: {count} members dropped ({saved / 1e6:.1f} MB unpacked), {size / 1e6:.1f} MB left")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
