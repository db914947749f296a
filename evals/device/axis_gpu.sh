#!/usr/bin/env bash
# On the H200 (device tool): the AXIS family's GPU test (tests/gpu/test_axis_gpu.py: argmax / argmin,
# max / min with indices, logsumexp, softmax over a non-last dim, prod and split reductions) over
# programs written on the CPU machine, which has codegen's dependencies:
#   CPU:    python tests/gpu/test_axis_gpu.py --write out/axis-gpu
#   device: bash evals/device/axis_gpu.sh        (carry out/axis-gpu)
# Writes $OUT/axis_gpu.log (the table) and $OUT/axis_gpu.jsonl (one row per case).
# Knobs: ONLY=substring of case labels, JOBS=parallel builds, AXIS_TIMEOUT=seconds.
set -u
programs=${PROGRAMS:-out/axis-gpu}
if [ ! -f "$programs/manifest.json" ]; then
    echo "no $programs/manifest.json: run 'python tests/gpu/test_axis_gpu.py --write $programs' on the CPU first" >&2
    exit 2
fi
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
out=${OUT:-/tmp/axis-gpu-out}
mkdir -p "$out"
STITCH_AXIS_PROGRAMS=$programs STITCH_AXIS_ONLY=${ONLY:-} STITCH_AXIS_JOBS=${JOBS:-8} \
    STITCH_AXIS_RESULTS="$out/axis_gpu.jsonl" \
    timeout "${AXIS_TIMEOUT:-560}" python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_axis_gpu.py 2>&1 \
    | tee "$out/axis_gpu.log" | tail -60
exit "${PIPESTATUS[0]}"
