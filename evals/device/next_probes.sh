#!/usr/bin/env bash
# The measurements the thirteenth session left owed, in one device call of about five minutes:
#  1. where a forward's strict time goes beyond its kernels, ours against eager's
#     (evals/device/issue_probe.py: hot and strict issue time, strict mean, back-to-back device time)
#     on a single-group streaming problem (ReLU), a concatenation, an arg-reduction, cross entropy's
#     four groups, instance norm's one-pass kernel and a convolution;
#  2. the same programs' host time split into our extension calls and the Python around them, with
#     cProfile's top functions (evals/device/host_overhead.py);
#  3. the long-row kernels' shared-memory head in 16-byte accesses (instance norm's one-pass kernel,
#     the long-row log-softmax; group norm as the control), programs of the code before (AB_BASE) and
#     after, alternated twice (evals/device/ab_probe.sh).
# The logs come back as one file ($OUT/logs.tgz: the device tool returns a limited number of files).
#   CPU:    bash evals/device/next_probes.sh --write      (writes out/probe-issue, out/ab-base, out/ab-head)
#   device: bash evals/device/next_probes.sh               (carry those three folders)
set -u
AB_PROBLEMS="level1/31_InstanceNorm level1/58_LogSoftmax_LongRows level1/30_GroupNorm"
if [ "${1:-}" = "--write" ]; then
    set -e
    rm -rf out/probe-issue out/ab-base out/ab-head
    python -m evals.device.verify_probe --write out/probe-issue level1/1_ReLU \
        level1/49_Concat_Channels level1/46_Argmax_MiddleDim level1/56_CrossEntropyLoss \
        level1/31_InstanceNorm level1/15_Conv2d_Dilated
    # shellcheck disable=SC2086
    python -m evals.device.verify_probe --write out/ab-head $AB_PROBLEMS
    base=/tmp/stitchcuda-ab-base
    rm -rf "$base" && git worktree prune
    git worktree add --detach "$base" "${AB_BASE:-e95b898}"  # the code before the 16-byte heads
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
timeout 240 python3 -m evals.device.issue_probe out/probe-issue > "$logs/issue.log" 2>&1
echo "issue probe (exit $?): $(( $(date +%s) - t0 )) s"
grep -E "^\| " "$logs/issue.log"
timeout 150 python3 -m evals.device.host_overhead out/probe-issue > "$logs/host.log" 2>&1
echo "host split (exit $?): $(( $(date +%s) - t0 )) s"
grep -E "^\| " "$logs/host.log"
OUT=$logs AB_TIMEOUT=150 bash evals/device/ab_probe.sh out/ab-base out/ab-head 2
echo "all: $(( $(date +%s) - t0 )) s"
tar czf "${OUT:-/tmp}/logs.tgz" -C "$logs" .
