#!/usr/bin/env bash
# The op-family GPU tests in one device call (each family: its programs built in parallel, checked
# against fp32 and float64 PyTorch, suite problems timed against eager; tests/support/family_gpu.py).
#   CPU:    bash evals/device/families_gpu.sh --write decomposed copy axis rows gemm scan pool rnn conv
#   device: bash evals/device/families_gpu.sh decomposed copy axis rows    (carry out/<family>-gpu)
# Families: decomposed (norms, losses, einsum, unfold, stateful forwards), copy, axis, rows (softmax,
# log-softmax and layer norm over the last dims), gemm (cuBLASLt; STITCHCUDA_GEMM_SEARCH=0 skips the
# timed algorithm search), scan, pool, rnn, conv, tune (the worker's launch tuning, docs/autotuning.md). Writes $OUT/<family>_gpu.log and
# $OUT/<family>_gpu.jsonl; prints one summary line per family last. Knobs: ONLY=substring of case
# labels, JOBS=parallel builds, FAMILY_TIMEOUT=seconds per family (default 170).
set -u
test_file() {
    case "$1" in
        decomposed) echo tests/gpu/test_decompositions_gpu.py ;;
        copy | axis | rows | gemm | scan | pool | rnn | conv | tune) echo "tests/gpu/test_$1_gpu.py" ;;
        *) return 1 ;;
    esac
}
if [ "${1:-}" = "--write" ]; then
    shift
    for family in "$@"; do
        file=$(test_file "$family") || { echo "unknown family $family" >&2; exit 2; }
        python "$file" --write "out/$family-gpu" || exit 1
    done
    exit 0
fi
[ $# -gt 0 ] || { echo "usage: $0 [--write] FAMILY..." >&2; exit 2; }
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
out=${OUT:-/tmp/families-gpu-out}
mkdir -p "$out"
summary=()
status=0
for family in "$@"; do
    file=$(test_file "$family") || { echo "unknown family $family" >&2; exit 2; }
    programs="out/$family-gpu"
    if [ ! -f "$programs/manifest.json" ] && [ ! -d "$programs" ]; then
        summary+=("$family: no $programs (write it on the CPU first)")
        status=1
        continue
    fi
    prefix=$(echo "$family" | tr '[:lower:]' '[:upper:]')
    env "STITCH_${prefix}_PROGRAMS=$programs" "STITCH_${prefix}_ONLY=${ONLY:-}" \
        "STITCH_${prefix}_JOBS=${JOBS:-8}" "STITCH_${prefix}_RESULTS=$out/${family}_gpu.jsonl" \
        timeout "${FAMILY_TIMEOUT:-170}" python3 -m pytest -q -s -p no:cacheprovider "$file" \
        >"$out/${family}_gpu.log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || status=1
    summary+=("$family: exit $rc, $(tail -1 "$out/${family}_gpu.log")")
done
for line in "${summary[@]}"; do echo "$line"; done
exit "$status"
