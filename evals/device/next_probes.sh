#!/usr/bin/env bash
# The measurements still owed, in one device call of at most ~450 s (the order is the priority):
# the verifier's exact request for the problems that ended as PyTorch fallbacks (46-48) and the
# rewritten pointwise / depthwise convolutions, the host time our forward takes to issue a call
# beside eager's, and the level-1 convolutions 11-19 with cuDNN's graph-API engines off and on.
#   CPU:    bash evals/device/next_probes.sh --write
#   device: bash evals/device/next_probes.sh          (carry out/)
# Prints the probe's table, each conv run's rows and the host-time table last; logs under $OUT.
set -u
if [ "${1:-}" = "--write" ]; then
    python -m evals.device.verify_probe --write out/probe-axis level1/46_Argmax_MiddleDim \
        level1/47_Argmin_WithValues_LastDim level1/48_LogSumExp level1/18_Conv2d_Pointwise \
        level1/16_Conv2d_Depthwise || exit 1
    python -m evals.device.verify_probe --write out/probe-host level1/1_ReLU level1/6_SumReduction \
        level2/4_Conv2d_BatchNorm_ReLU || exit 1
    exec python tests/gpu/test_conv_gpu.py --write out/conv-gpu
fi
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
out=${OUT:-/tmp/next-probes-out}
mkdir -p "$out"
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
timeout 150 python3 -m evals.device.verify_probe out/probe-axis > "$out/probe-axis.log" 2>&1
echo "probe-axis exit $? at $(elapsed) s"
timeout 70 python3 -m evals.device.host_overhead out/probe-host > "$out/host.log" 2>&1
echo "host exit $? at $(elapsed) s"
for engines in 0 1; do
    mkdir -p "$out/conv-e$engines"
    STITCHCUDA_CUDNN_ENGINES=$engines ONLY=level1/1 CONV_TIMEOUT=110 OUT="$out/conv-e$engines" \
        bash evals/device/conv_gpu.sh > "$out/conv-e$engines/tail.txt" 2>&1
    echo "conv engines=$engines exit $? at $(elapsed) s"
done
echo "=== verification probe"; tail -12 "$out/probe-axis.log"
for engines in 0 1; do
    echo "=== level-1 convolutions, engines $engines"
    grep -E "^level1/|passed|failed" "$out/conv-e$engines/conv_gpu.log" | tail -12
done
echo "=== host time per call"; tail -30 "$out/host.log"
