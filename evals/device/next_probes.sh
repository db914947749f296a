#!/usr/bin/env bash
# Device probes owed by the fourteenth to sixteenth sessions, one call each (logs come back as one
# file: the device tool returns a limited number of files).
#  default (about 400 s; measured on an H100 on 2026-12-06, docs/benchmarks.md, fifteenth session):
#     the one-instruction NaN-propagating max (PTX max.NaN, common.cuh's stitch_max) on the max pools and
#     a max reduction, programs of the code before it (AB_BASE, default e50b8fa) against the head,
#     alternated twice (evals/device/ab_probe.sh); group norm's two-kernel path and the 64-register
#     column scan ride along (level1/30, level1/45: both columns carry the new kernels, a check, not a
#     ratio); then the pools' launch knob outs at 4 against 1 (out/ab-outs4: the head's pool requests
#     with the knob set to 4).
#  ew (about 230 s; measured there too): the elementwise knob unroll at 2 and 4 against 1 on activations
#     (out/ew-u1, out/ew-u2, out/ew-u4: every chunk's loads issued before any store).
#  host (owed): our issue time in a plain process (hot loop, strict loop, the verifier's interleaved
#     rounds: evals.device.issue_probe) beside the verifier's own, sandbox on and off (out/probe-issue2).
#  dw (owed by the sixteenth session, about 450 s): the depthwise kernel's numerics on the GPU with TF32
#     allowed, where programs now run it (tests/gpu/test_conv_gpu.py's depthwise cases, out/conv-gpu: the
#     TF32 columns must show our time and a max error of 0, eager's own summation order), which tiling the
#     conv search picked (four or two output rows a thread: algorithms -1 / -3 in the cache printout),
#     then Nsight Compute side by side (eager, ours, torch.compile) on the depthwise problems and on three
#     memory-bound problems within 5% of eager (out/ncu-dw, out/ncu-roof); last, the pools' launch knob
#     outs at 2 against 1 (out/pool-outs1, out/pool-outs2).
#  placement (run in the nineteenth session on an H100, 344 s with the scan A/B; to run again with its new `pinned`
#     setting and issue times, about 350 s; no folders): does an eager forward's strict
#     time depend on where its buffers sit, and does the rounds' placement shuffle narrow the spread
#     between processes; do the verifier's checks between calls, or a neighbour's memory churn
#     (allocate and free, no kernel), slow it
#     (evals.device.placement_probe, inside the clock probe: the SM clock alongside)?
#  ray (issue 12, point 4; run in the nineteenth session on an H100, 163 s): the Ray executor runs a problem as a one-GPU task
#     (tests/gpu/test_timing_gpu.py's Ray test); carry .whl and .whl-ray (fetch_wheels.sh, fetch_wheels.sh --ray).
#  release (owed by the nineteenth session, about 150 s, no folders): after a neighbour process lets go of
#     2 GiB of device memory (killed, or freeing it alive), how long does a memory-bound eager forward
#     stay slow (evals.device.release_probe: per-round means against the time since the release)? The
#     quiet window's wait after a GPU process exits is to be set from it.
#   CPU:    bash evals/device/next_probes.sh --write        (writes every folder above)
#   device: bash evals/device/next_probes.sh [ew|host|dw|placement|ray|release]  (carry the folders that part reads)
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
if [ "${1:-}" = "release" ]; then  # part 9: issue 12's agreement, the aftermath of a release
    export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    mkdir -p /tmp/release
    timeout 400 python3 -m evals.device.release_probe > /tmp/release/probe.log 2>&1
    grep -E "^\|" /tmp/release/probe.log; tail -2 /tmp/release/probe.log | cut -c1-300
    tar czf "${OUT:-/tmp}/release-logs.tgz" -C /tmp/release .
    exit 0
fi
if [ "${1:-}" = "ray" ]; then  # part 8: carry .whl and .whl-ray
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl .whl-ray/*.whl || exit 1
    export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    timeout 400 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_timing_gpu.py -k ray 2>&1 | tail -25
    exit 0
fi
if [ "${1:-}" = "placement" ]; then  # part 7: issue 12's eager agreement
    export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    mkdir -p /tmp/placement
    OUT=/tmp/placement timeout 480 python3 -m evals.device.clock_probe -- python3 -m evals.device.placement_probe \
        > /tmp/placement/probe.log 2>&1
    grep -E "^\|" /tmp/placement/command.log; tail -3 /tmp/placement/probe.log  # the table, the clocks
    tar czf "${OUT:-/tmp}/placement-logs.tgz" -C /tmp/placement .
    exit 0
fi
if [ "${1:-}" = "host" ]; then  # part 5: where our issue time grows, plain process against the verifier
    export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    mkdir -p /tmp/host
    timeout 240 python3 -m evals.device.issue_probe out/probe-issue2 > /tmp/host/issue.log 2>&1
    grep -E "^\||cudart" /tmp/host/issue.log
    for mode in auto off; do
        STITCHCUDA_SANDBOX=$mode timeout 150 python3 -m evals.device.verify_probe out/probe-issue2 \
            > "/tmp/host/verify-$mode.log" 2>&1
        echo "== verifier, sandbox $mode"
        grep -E "^\| level" "/tmp/host/verify-$mode.log" | cut -d'|' -f2-8
    done
    tar czf "${OUT:-/tmp}/host-logs.tgz" -C /tmp/host .
    exit 0
fi
if [ "${1:-}" = "dw" ]; then  # part 6: carry out/conv-gpu, out/ncu-dw, out/ncu-roof, out/pool-outs1, out/pool-outs2
    export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    mkdir -p /tmp/dw
    for only in depthwise Depthwise; do  # the small cases, then the suite's (the filter is case-sensitive)
        OUT=/tmp/dw/$only ONLY=$only timeout 150 bash evals/device/conv_gpu.sh > "/tmp/dw/conv-$only.log" 2>&1
        grep -E "^case|epthwise|passed|failed" "/tmp/dw/conv-$only.log" | cut -c1-200
        sed -n '/cuDNN algorithm cache/,$p' "/tmp/dw/conv-$only.log" | cut -c1-200 | tail -8  # the choices
    done
    for inputs in out/ncu-dw out/ncu-roof; do
        timeout 150 python3 -m evals.device.ncu_side_by_side "$inputs" --budget-s 90 --keep /tmp/dw/ncu \
            > "/tmp/dw/$(basename "$inputs").log" 2>&1
        grep -E "^\|" "/tmp/dw/$(basename "$inputs").log" | cut -c1-230
    done
    # the pools' outs at 2 (two outputs a thread, torch.compile's layout) against 1, one alternation
    OUT=/tmp/dw AB_TIMEOUT=100 bash evals/device/ab_probe.sh out/pool-outs1 out/pool-outs2 1
    tar czf "${OUT:-/tmp}/dw-logs.tgz" -C /tmp/dw --exclude='*.ncu-rep' .
    exit 0
fi
if [ "${1:-}" = "--write" ]; then
    set -e
    rm -rf out/conv-gpu out/ncu-dw out/ncu-roof
    python tests/gpu/test_conv_gpu.py --write out/conv-gpu
    python -m evals.device.prepare_profiles --no-synthetic --out out/ncu-dw --problems level1/16_Conv2d_Depthwise \
        level2/16_Conv2d_DepthwiseSeparable_ReLU6
    python -m evals.device.prepare_profiles --no-synthetic --out out/ncu-roof --problems level1/4_Softmax \
        level1/7_MaxReduction level1/2_GELU
    rm -rf out/pool-outs1 out/pool-outs2
    # shellcheck disable=SC2086
    python -m evals.device.verify_probe --write out/pool-outs1 $POOLS
    cp -r out/pool-outs1 out/pool-outs2
    sed -i "s/'outs': 1/'outs': 2/g" out/pool-outs2/*.request.json
    grep -q "'outs': 2" out/pool-outs2/level1__10_MaxPool2d.request.json
    rm -rf out/ab-base out/ab-head out/ab-outs4 out/ew-u1 out/ew-u2 out/ew-u4 out/probe-issue2
    python -m evals.device.verify_probe --write out/probe-issue2 level1/1_ReLU level1/27_AvgPool2d_NoPadCount \
        level1/15_Conv2d_Dilated
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
