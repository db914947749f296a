#!/usr/bin/env bash
# Two versions of the same programs side by side: the verifier's strict timing (verify_probe) over folder
# A, then B, alternated RUNS times in one device call (host-side times drift between calls, so an A/B
# ratio is only taken within one call). Logs: $OUT/ab-<folder>-run<k>.log; the table rows print as
# they come.
#   CPU:    python -m evals.device.verify_probe --write out/A PROBLEMS...   (one folder per code version)
#   device: bash evals/device/ab_probe.sh out/A out/B [runs]                (carry out/)
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 FOLDER_A FOLDER_B [runs]" >&2
    exit 2
fi
a=$1 b=$2 runs=${3:-2}
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
out=${OUT:-/tmp/ab-probe-out}
mkdir -p "$out"
for run in $(seq 1 "$runs"); do
    for folder in "$a" "$b"; do
        log="$out/ab-$(basename "$folder")-run$run.log"
        timeout "${AB_TIMEOUT:-240}" python3 -m evals.device.verify_probe "$folder" > "$log" 2>&1
        echo "=== $folder, run $run (exit $?)"
        grep -E "^\| level" "$log" | cut -d'|' -f2-6
    done
done
