#!/usr/bin/env bash
# The measurements the twelfth session left owed, in one device call of about four minutes:
#  1. whether the strict timing runs at full SM clocks (evals/device/clock_probe.py), around the
#     verifier's timing of two convolutions;
#  2. a convolution's host time with cuDNN's engines off and on (on by default since the eleventh
#     session), alternated twice; the logs keep each search's candidates (STITCH_CONV_SEARCH) and
#     the engine lists (STITCH_CONV_ENGINES);
#  3. every level-1 pool through the verifier (ours against eager, after the index dividers and the
#     adaptive kernel's tap walk).
# The logs come back as one file ($OUT/logs.tgz: the device tool returns a limited number of files).
#   CPU:    bash evals/device/next_probes.sh --write
#   device: bash evals/device/next_probes.sh          (carry out/)
set -u
if [ "${1:-}" = "--write" ]; then
    set -e
    rm -rf out/probe-conv out/probe-pools
    python -m evals.device.verify_probe --write out/probe-conv level1/15_Conv2d_Dilated \
        level1/19_Conv2d_Same_Rectangular level2/10_Conv2d_Add_ReLU level3/8_DenseBlock
    # shellcheck disable=SC2046
    exec python -m evals.device.verify_probe --write out/probe-pools \
        $(ls evals/suite/level1 | grep -i pool | sed 's/.py$//; s|^|level1/|')
fi
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
logs=/tmp/next-probes-logs
rm -rf "$logs" && mkdir -p "$logs/clocks"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$logs/gpu.txt"
t0=$(date +%s)
OUT=$logs/clocks timeout 120 python3 -m evals.device.clock_probe -- \
    python3 -m evals.device.verify_probe out/probe-conv
grep -E "^\| level" "$logs/clocks/command.log" | cut -d'|' -f2-6
echo "clocks: $(( $(date +%s) - t0 )) s"
for run in 1 2; do
    for engines in 0 1; do
        log="$logs/host-engines$engines-run$run.log"
        STITCHCUDA_CUDNN_CACHE=off STITCHCUDA_CUDNN_ENGINES=$engines timeout 120 python3 -m evals.device.host_overhead out/probe-conv > "$log" 2>&1
        echo "=== engines $engines, run $run (exit $?)"
        grep -E "^\| level|STITCH_CONV_HOST_TRACE" "$log" | sed 's|STITCH_CONV_HOST_TRACE .*/stitch_|trace |'
    done
done
echo "engines: $(( $(date +%s) - t0 )) s"
timeout 150 python3 -m evals.device.verify_probe out/probe-pools > "$logs/pools.log" 2>&1
grep -E "^\| level" "$logs/pools.log" | cut -d'|' -f2-6
echo "all: $(( $(date +%s) - t0 )) s"
tar czf "${OUT:-/tmp}/logs.tgz" -C "$logs" .
