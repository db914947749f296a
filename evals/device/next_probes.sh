#!/usr/bin/env bash
# The measurements still owed, in one device call of at most ~450 s (the order is the priority):
# where the verifier's extra host time per call comes from (the same requests through the worker
# with the sandbox on and off: inside it our calls issue in 46-79 us against 20 us plain, eager's
# in 19-37 us; ninth session), and the level-1 convolutions 11-19 with cuDNN's graph-API engines
# off and on (our legacy-API algorithms stay at 0.88-0.98x of eager, which uses the engines).
# (The axis probe of 46-48 and 16/18 was measured in the ninth session; its requests stay written.)
#   CPU:    bash evals/device/next_probes.sh --write
#   device: bash evals/device/next_probes.sh          (carry out/)
# Prints the issue times with the sandbox on and off, then each conv run's rows; logs under $OUT.
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
for box in auto off; do
    STITCHCUDA_SANDBOX=$box timeout 100 python3 -m evals.device.verify_probe out/probe-host > "$out/probe-host-$box.log" 2>&1
    echo "probe-host sandbox=$box exit $? at $(elapsed) s"
done
for engines in 0 1; do
    mkdir -p "$out/conv-e$engines"
    STITCHCUDA_CUDNN_ENGINES=$engines ONLY=level1/1 CONV_TIMEOUT=110 OUT="$out/conv-e$engines" \
        bash evals/device/conv_gpu.sh > "$out/conv-e$engines/tail.txt" 2>&1
    echo "conv engines=$engines exit $? at $(elapsed) s"
done
for box in auto off; do echo "=== issue time, sandbox $box"; tail -6 "$out/probe-host-$box.log"; done
for engines in 0 1; do
    echo "=== level-1 convolutions, engines $engines"
    grep -E "^level1/|passed|failed" "$out/conv-e$engines/conv_gpu.log" | tail -12
done

