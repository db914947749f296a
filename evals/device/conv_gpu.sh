#!/usr/bin/env bash
# On the H200 (device tool): the cuDNN convolution family's GPU test (tests/gpu/test_conv_gpu.py) over
# programs written on the CPU machine, which has codegen's dependencies:
#   CPU:    python tests/gpu/test_conv_gpu.py --write out/conv-gpu
#   device: bash evals/device/conv_gpu.sh        (carry out/conv-gpu)
# Writes $OUT/conv_gpu.log (the table: errors against float64, ours vs eager, TF32 mode) and
# $OUT/conv_gpu.jsonl (one row per case). Knobs: ONLY=substring of case labels, JOBS=parallel builds.
set -u
programs=${PROGRAMS:-out/conv-gpu}
if [ ! -f "$programs/manifest.json" ]; then
    echo "no $programs/manifest.json: run 'python tests/gpu/test_conv_gpu.py --write $programs' on the CPU first" >&2
    exit 2
fi
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
out=${OUT:-/tmp/conv-gpu-out}
mkdir -p "$out"
STITCH_CONV_PROGRAMS=$programs STITCH_CONV_ONLY=${ONLY:-} STITCH_CONV_JOBS=${JOBS:-8} \
    STITCH_CONV_RESULTS="$out/conv_gpu.jsonl" \
    timeout "${CONV_TIMEOUT:-560}" python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_conv_gpu.py 2>&1 \
    | tee "$out/conv_gpu.log" | tail -80
exit "${PIPESTATUS[0]}"
