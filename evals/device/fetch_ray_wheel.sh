#!/usr/bin/env bash
# CPU side, before the Ray GPU test on the device (issue 12, point 4): the device image has no Ray, and
# its cp312 wheel (79 MB) does not fit the device tool's 64 MiB a call. This downloads it at the version
# installed here, drops what a Ray task on a GPU never loads (the Java jar, the libraries built on Ray,
# the dashboard's web build: evals.device.slim_wheel; about 40 MB left) and adds the packages Ray needs
# that the image lacks, into .whl-ray/ (ignored by git). The device side (next_probes.sh ray) installs
# it beside .whl/ (fetch_wheels.sh) and runs tests/gpu/test_timing_gpu.py's Ray test.
# Usage: bash evals/device/fetch_ray_wheel.sh   (from the repository root, in the project's venv)
set -euo pipefail
DROP=(ray/jars/ ray/rllib/ ray/serve/ ray/llm/ ray/data/ ray/train/ ray/tune/ ray/air/ ray/dashboard/client/ .js.map)
NEEDS=(jsonschema jsonschema-specifications referencing rpds-py)  # Ray's requirements the image lacks
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
version() { python -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }
download() {
    python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        "${PLATFORMS[@]}" -d "$1" "$2"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
download "$tmp" "ray==$(version ray)"
rm -rf .whl-ray && mkdir -p .whl-ray
drops=()
for d in "${DROP[@]}"; do drops+=(--drop "$d"); done
python -m evals.device.slim_wheel "$tmp"/ray-*.whl .whl-ray "${drops[@]}"
for name in "${NEEDS[@]}"; do download .whl-ray "$name==$(version "$name")"; done
ls .whl-ray
du -cb .whl .whl-ray 2>/dev/null | tail -1 | awk '{printf "carried wheels: %.1f MiB (the call limit is 64 MiB with the working tree)\n", $1 / 1048576}'
