#!/usr/bin/env bash
# On the H200 (device tool): the scan family's GPU test (tests/gpu/test_scan_gpu.py) over programs
# written on the CPU machine, which has codegen's dependencies:
#   CPU:    python tests/gpu/test_scan_gpu.py --write out/scan-gpu
#   device: bash evals/device/scan_gpu.sh        (carry out/scan-gpu)
# Writes $OUT/scan_gpu.log (the table: errors against float64, ours vs eager, GB/s) and
# $OUT/scan_gpu.jsonl (one row per case). Knobs: ONLY=substring of case labels, JOBS=parallel builds.
set -u
programs=${PROGRAMS:-out/scan-gpu}
if [ ! -f "$programs/manifest.json" ]; then
    echo "no $programs/manifest.json: run 'python tests/gpu/test_scan_gpu.py --write $programs' on the CPU first" >&2
    exit 2
fi
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
out=${OUT:-/tmp/scan-gpu-out}
mkdir -p "$out"
STITCH_SCAN_PROGRAMS=$programs STITCH_SCAN_ONLY=${ONLY:-} STITCH_SCAN_JOBS=${JOBS:-8} \
    STITCH_SCAN_RESULTS="$out/scan_gpu.jsonl" \
    timeout "${SCAN_TIMEOUT:-560}" python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_scan_gpu.py 2>&1 \
    | tee "$out/scan_gpu.log" | tail -60
exit "${PIPESTATUS[0]}"
