#!/usr/bin/env bash
# The measurements the eleventh session left owed, in one device call of about five minutes:
#  1. group / instance norm in one pass (on by default, unmeasured) against the statistics + elementwise
#     path, the same programs with the launch knob `onepass` at 1 and at 0, alternated twice in one
#     call through the verifier's strict timing (level1/31 qualifies; level1/30 and level2/23 are
#     controls whose slabs do not fit, so both programs run the same path there);
#  2. the pool family on the GPU: numerics against float64 and speed against eager, with the new
#     index dividers and the one-pass instance norm (level1/31 is in this family too);
#  3. whether the strict timing runs at full SM clocks (evals/device/clock_probe.py), around the
#     verifier's timing of two convolutions;
#  4. a convolution's host time with cuDNN's engines off and on (on by default since the eleventh
#     session), alternated twice; the logs keep each search's candidates (STITCH_CONV_SEARCH) and
#     the engine lists (STITCH_CONV_ENGINES).
#   CPU:    bash evals/device/next_probes.sh --write
#   device: bash evals/device/next_probes.sh          (carry out/)
set -u
norms=(level1/31_InstanceNorm level1/30_GroupNorm level2/23_Conv2d_GroupNorm_SiLU)
if [ "${1:-}" = "--write" ]; then
    set -e
    rm -rf out/probe-conv out/probe-norm-on out/probe-norm-off out/pool-gpu
    python -m evals.device.verify_probe --write out/probe-conv level1/15_Conv2d_Dilated \
        level1/19_Conv2d_Same_Rectangular level2/10_Conv2d_Add_ReLU level3/8_DenseBlock
    python -m evals.device.verify_probe --write out/probe-norm-on "${norms[@]}"
    mkdir -p out/probe-norm-off
    for f in out/probe-norm-on/*.json; do  # the same programs with the knob at 0 in their launch table
        sed "s/'onepass': 1/'onepass': 0/g" "$f" > "out/probe-norm-off/$(basename "$f")"
    done
    grep -c "'onepass': 0" out/probe-norm-off/*.json
    exec bash evals/device/families_gpu.sh --write pool
fi
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
out=${OUT:-/tmp/next-probes-out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
t0=$(date +%s)
OUT=$out AB_TIMEOUT=120 bash evals/device/ab_probe.sh out/probe-norm-on out/probe-norm-off 2
echo "norms: $(( $(date +%s) - t0 )) s"
OUT=$out/pool FAMILY_TIMEOUT=150 timeout 170 bash evals/device/families_gpu.sh pool > "$out/pool.log" 2>&1
tail -3 "$out/pool.log"
echo "pool: $(( $(date +%s) - t0 )) s"
mkdir -p "$out/clocks"
OUT=$out/clocks timeout 120 python3 -m evals.device.clock_probe -- \
    python3 -m evals.device.verify_probe out/probe-conv
grep -E "^\| level" "$out/clocks/command.log" | cut -d'|' -f2-6
echo "clocks: $(( $(date +%s) - t0 )) s"
for run in 1 2; do
    for engines in 0 1; do
        log="$out/host-engines$engines-run$run.log"
        STITCHCUDA_CUDNN_CACHE=off STITCHCUDA_CUDNN_ENGINES=$engines timeout 120 python3 -m evals.device.host_overhead out/probe-conv > "$log" 2>&1
        echo "=== engines $engines, run $run (exit $?)"
        grep -E "^\| level|STITCH_CONV_HOST_TRACE" "$log" | sed 's|STITCH_CONV_HOST_TRACE .*/stitch_|trace |'
    done
done
echo "all: $(( $(date +%s) - t0 )) s"
