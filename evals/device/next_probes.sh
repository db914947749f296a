#!/usr/bin/env bash
# The measurements the fourteenth session left owed, in one device call of about five minutes:
#  1. the one-instruction NaN-propagating max (PTX max.NaN, common.cuh's stitch_max) on the issue-bound
#     max pools and a max reduction: programs of the code before it (AB_BASE, default e50b8fa) and after,
#     alternated twice (evals/device/ab_probe.sh);
#  2. group norm's two-kernel path and the 64-register column scan on the other GPU kind than the one
#     that measured them (the H200 measured group norm, the H100 the scan): the same A/B's programs carry
#     both, level1/30 and level1/45 (their base is the same commit; the change that moved them is older,
#     so both columns show the new kernels: a check that the new code holds, not a ratio).
#  4. the elementwise launch knob unroll (float4 a thread, every chunk's loads before any store) at 2
#     and 4 against 1 on activations (out/ew-u1, out/ew-u2, out/ew-u4).
#  3. the pools' launch knob outs at 4 (four outputs of a row a thread) against 1, on the head's programs:
#     out/ab-outs4 holds the pool requests of out/ab-head with the knob set to 4 in their launch tables.
# The logs come back as one file ($OUT/logs.tgz: the device tool returns a limited number of files).
#   CPU:    bash evals/device/next_probes.sh --write      (writes out/ab-base, out/ab-head, out/ab-outs4, out/ew-u*)
#   device: bash evals/device/next_probes.sh               (carry those folders; part 4: ... ew)
set -u
AB_PROBLEMS="level1/10_MaxPool2d level1/25_MaxPool1d_Dilated level1/27_AvgPool2d_NoPadCount level1/7_MaxReduction level1/30_GroupNorm level1/45_Cumsum_MiddleDim"
EW="level1/2_GELU level1/1_ReLU level1/3_SiLU"
POOLS="level1/10_MaxPool2d level1/25_MaxPool1d_Dilated level1/27_AvgPool2d_NoPadCount"
if [ "${1:-}" = "ew" ]; then  # part 4, a call of its own
    export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    OUT=/tmp/ew AB_TIMEOUT=100 bash evals/device/ab_probe.sh out/ew-u1 out/ew-u2 2
    OUT=/tmp/ew AB_TIMEOUT=100 bash evals/device/ab_probe.sh out/ew-u1 out/ew-u4 1
    tar czf "${OUT:-/tmp}/ew-logs.tgz" -C /tmp/ew .
    exit 0
fi
if [ "${1:-}" = "--write" ]; then
    set -e
    rm -rf out/ab-base out/ab-head out/ab-outs4 out/ew-u1 out/ew-u2 out/ew-u4
    # shellcheck disable=SC2086
    python -m evals.device.verify_probe --write out/ew-u1 $EW
    for u in 2 4; do
        cp -r out/ew-u1 "out/ew-u$u"
        sed -i "s/'unroll': [0-9]/'unroll': $u/g" out/ew-u$u/*.request.json
        grep -q "'unroll': $u" "out/ew-u$u/level1__2_GELU.request.json"
    done
    # shellcheck disable=SC2086
    python -m evals.device.verify_probe --write out/ab-outs4 $POOLS
    sed -i "s/'outs': 1/'outs': 4/g" out/ab-outs4/*.request.json
    grep -q "'outs': 4" out/ab-outs4/level1__10_MaxPool2d.request.json
    # shellcheck disable=SC2086
    python -m evals.device.verify_probe --write out/ab-head $AB_PROBLEMS
    base=/tmp/stitchcuda-ab-base
    rm -rf "$base" && git worktree prune
    git worktree add --detach "$base" "${AB_BASE:-e50b8fa}"  # the code before the one-instruction max
    # shellcheck disable=SC2086
    (cd "$base" && python -m evals.device.verify_probe --write "$OLDPWD/out/ab-base" $AB_PROBLEMS)
    git worktree remove --force "$base"
    exit 0
fi
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
logs=/tmp/next-probes-logs
rm -rf "$logs" && mkdir -p "$logs"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$logs/gpu.txt"
t0=$(date +%s)
OUT=$logs AB_TIMEOUT=200 bash evals/device/ab_probe.sh out/ab-base out/ab-head 2
OUT=$logs AB_TIMEOUT=120 bash evals/device/ab_probe.sh out/ab-head out/ab-outs4 1
echo "all: $(( $(date +%s) - t0 )) s"
tar czf "${OUT:-/tmp}/logs.tgz" -C "$logs" .
