#!/usr/bin/env bash
# CPU side, before a device run that needs the graph (stitchcuda eval): download into .whl/ the
# cp312 wheels of the packages the graph imports that the H200 image lacks, at the versions
# installed here. The device side installs them with
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
# With --ray, instead: Ray for the Ray GPU test (issue 12, point 4) into .whl-ray/. The image has no Ray
# and its cp312 wheel (79 MB) does not fit the device tool's 64 MiB a call, so it is slimmed of what a
# Ray task on a GPU never loads (the Java jar, the libraries built on Ray, the dashboard's web build:
# evals.device.slim_wheel; about 40 MB left), beside the packages Ray needs that the image lacks;
# next_probes.sh ray installs both folders and runs tests/gpu/test_timing_gpu.py's Ray test.
# Usage: bash evals/device/fetch_wheels.sh [--ray]   (from the repository root, in the project's venv)
set -euo pipefail
download() {  # download FOLDER SPEC: one cp312 manylinux wheel, no dependencies
    python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$1" "$2"
}
version() { python -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }

if [ "${1:-}" = "--ray" ]; then
    DROP=(ray/jars/ ray/rllib/ ray/serve/ ray/llm/ ray/data/ ray/train/ ray/tune/ ray/air/ ray/dashboard/client/ .js.map)
    NEEDS=(jsonschema jsonschema-specifications referencing rpds-py)  # Ray's requirements the image lacks
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    download "$tmp" "ray==$(version ray)"
    rm -rf .whl-ray && mkdir -p .whl-ray
    drops=()
    for d in "${DROP[@]}"; do drops+=(--drop "$d"); done
    python -m evals.device.slim_wheel "$tmp"/ray-*.whl .whl-ray "${drops[@]}"
    for name in "${NEEDS[@]}"; do download .whl-ray "$name==$(version "$name")"; done
    ls .whl-ray
    du -cb .whl .whl-ray 2>/dev/null | tail -1 |
        awk '{printf "carried wheels: %.1f MiB (the call limit is 64 MiB with the working tree)\n", $1 / 1048576}'
    exit 0
fi

mkdir -p .whl
PKGS=$(python - <<'PY'
import importlib.metadata as md
import sys

import evals.runner, graph.build, graph.cli  # noqa: F401  what `stitchcuda eval` and `run` import
import nodes.coder, nodes.finalize, nodes.planner, nodes.verifier  # noqa: F401
import pyseccomp  # noqa: F401  the sandbox's syscall filter (tools/sandbox/seccomp.py imports it lazily)

ON_DEVICE = {"anyio", "certifi", "charset-normalizer", "click", "h11", "httpcore", "httpx", "idna",
             "packaging", "psutil", "pygments", "requests", "rich", "setuptools",
             "urllib3", "xxhash", "pyyaml", "tornado"}
names = set()
for module in {m.split(".")[0] for m in sys.modules}:
    for dist in md.packages_distributions().get(module, []):
        key = dist.lower().replace("_", "-")
        if key not in ON_DEVICE and key != "stitchcuda" and not key.startswith("opentelemetry"):
            names.add(f"{dist}=={md.version(dist)}")
print(" ".join(sorted(names)))
PY
)
echo "fetching: $PKGS"
for spec in $PKGS; do download .whl "$spec"; done
ls .whl
