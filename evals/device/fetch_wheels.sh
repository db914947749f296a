#!/usr/bin/env bash
# CPU side, before a device run that needs the graph (stitchcuda eval): download into .whl/ the
# cp312 wheels of the packages the graph imports that the H200 image lacks, at the versions
# installed here. The device side installs them with
#   python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
# Usage: bash evals/device/fetch_wheels.sh   (from the repository root, in the project's venv)
set -euo pipefail
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
for spec in $PKGS; do
    python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "$spec"
done
ls .whl
