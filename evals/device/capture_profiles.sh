#!/usr/bin/env bash
# GPU evidence for issue 5: profile 6 suite problems (reference and offline candidate) plus two
# synthetic programs with planted bottlenecks, with Nsight Compute and Nsight Systems, on the device.
#
#   CPU side first:  python -m evals.device.prepare_profiles      (writes out/profile-inputs)
#                    bash evals/device/nsys_libs.sh .nsys-libs                     (nsys importer's libraries)
#   GPU side:        bash evals/device/capture_profiles.sh "$OUT" [INPUTS]        (carry out/profile-inputs, .nsys-libs)
#   CPU side after:  python -m evals.device.write_reports --capture DIR_WITH_results.json
#
# Finishes within BUDGET_S seconds (default 230; jobs that would not fit are skipped and listed).
# Writes OUT/capture.tar.gz, OUT/results.json, OUT/summary.txt and OUT/capture.log; prints the table last.
set -u
OUT=${1:?usage: capture_profiles.sh OUT [INPUTS]}
INPUTS=${2:-out/profile-inputs}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ -d .nsys-libs/usr/lib/x86_64-linux-gnu ]; then
    export STITCHCUDA_NSYS_LIBS="$PWD/.nsys-libs/usr/lib/x86_64-linux-gnu"
fi
PY=${PYTHON:-python3}
"$PY" -m evals.device.capture_profiles --inputs "$INPUTS" --out "$OUT" --budget-s "${BUDGET_S:-230}" \
    ${ONLY:+--only $ONLY} 2>&1 | tee "$OUT/capture.log"
exit "${PIPESTATUS[0]}"
