#!/usr/bin/env bash
# Where a convolution's host time goes, cuDNN's graph-API engines off and on (on by default since the
# eleventh session: docs/convolutions.md), in one device call of about two minutes. The two settings
# alternate twice in one call, since the host's speed moves between calls.
#   CPU:    bash evals/device/next_probes.sh --write
#   device: bash evals/device/next_probes.sh          (carry out/)
# Prints, per run, the host-time table (ours, our C++, eager) and each extension's trace line (median
# host time per phase, and the calls of each algorithm id: engines are <= -100); the logs keep each
# search's candidates (STITCH_CONV_SEARCH: device and host us per call) and engine lists.
set -u
if [ "${1:-}" = "--write" ]; then
    exec python -m evals.device.verify_probe --write out/probe-conv level1/15_Conv2d_Dilated \
        level1/19_Conv2d_Same_Rectangular level2/10_Conv2d_Add_ReLU level3/8_DenseBlock
fi
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
out=${OUT:-/tmp/next-probes-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
for run in 1 2; do
    for engines in 0 1; do
        log="$out/host-engines$engines-run$run.log"
        STITCHCUDA_CUDNN_CACHE=off STITCHCUDA_CUDNN_ENGINES=$engines timeout 120 python3 -m evals.device.host_overhead out/probe-conv > "$log" 2>&1
        echo "=== engines $engines, run $run (exit $?)"
        grep -E "^\| level|STITCH_CONV_HOST_TRACE" "$log" | sed 's|STITCH_CONV_HOST_TRACE .*/stitch_|trace |'
    done
done
